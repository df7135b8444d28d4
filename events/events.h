/*
 * events/events.h - the receiver of S3 event notifications: changes other
 * writers make to the bucket are taken in at once, instead of after the
 * listing TTLs (which stay as the safety net).
 *
 * HTTP POST on ADDR:PORT (libmicrohttpd, one thread), to the path
 * "/SECRET" or with the header "X-Mapfs-Secret: SECRET"; anything else
 * is refused (403) with a log line.  Bodies are S3 event JSON (see
 * events/parse.h for the shapes); each record of an object in our bucket
 * and prefix makes its directory be listed again (fs_store_key_changed),
 * so duplicates and records out of order are harmless.  Bounded: a body
 * of at most 1 MiB (413), at most EVENTS_RATE records a second (503, the
 * sender retries), 16 connections, 10 s idle.
 */
#ifndef MAPFS_EVENTS_H
#define MAPFS_EVENTS_H

#include <stddef.h>

struct fs;
struct store;
struct events;

#define EVENTS_BODY_MAX (1u << 20)
#define EVENTS_RATE 2000 /* records a second, over one-second windows */

/*
 * Listen on addr ("ADDR:PORT", port 0: a free one) for events of st's
 * objects, taken into fs.  secret (at least 16 characters) is copied.
 * bound gets the address really bound.  0, -EINVAL (bad address, short
 * secret), or the error of listening.  fs and st outlive the receiver.
 */
int events_start(const char *addr, const char *secret, struct fs *fs,
		 struct store *st, struct events **out, char *bound,
		 size_t cap);

/* Stop (waits for a request in progress) and free; NULL is a no-op. */
void events_stop(struct events *ev);

#endif
