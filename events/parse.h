/*
 * events/parse.h - S3 event notifications, as they arrive over HTTP, to
 * the objects they name.  Three shapes are read: S3's own
 * {"Records":[...]} (radosgw's HTTP push, an S3 Lambda-style body), the
 * same inside an SNS envelope ({"Type":"Notification","Message":"..."},
 * Amazon S3 -> SNS -> HTTP(S) subscription, and the envelope's
 * SubscriptionConfirmation), and an EventBridge event ({"detail-type":
 * "Object Created", "detail":{"bucket":{"name"},"object":{"key"}}}).
 * The text is untrusted: anything else is refused, nothing is trusted
 * beyond what is checked here, and the parse is bounded (EV_RECORDS_MAX).
 */
#ifndef MAPFS_EVENTS_PARSE_H
#define MAPFS_EVENTS_PARSE_H

#include <stdbool.h>
#include <stddef.h>

#define EV_RECORDS_MAX 1000 /* records taken from one body */

/* One object an event names. */
struct ev_rec {
	char *bucket; /* malloc'd */
	char *key;    /* malloc'd, as the event has it (S3: URL-encoded) */
	bool removed; /* ObjectRemoved; else created or replaced */
};

struct ev_batch {
	struct ev_rec *recs; /* malloc'd */
	size_t n;
	size_t skipped;    /* records of other kinds, or malformed */
	char *confirm_url; /* SNS SubscriptionConfirmation: SubscribeURL */
};

/*
 * Parse body (len bytes, not NUL-terminated) into *out (ev_batch_free).
 * 0, or -EINVAL if it is none of the shapes above (or not JSON), -ENOMEM.
 */
int ev_parse(const char *body, size_t len, struct ev_batch *out);
void ev_batch_free(struct ev_batch *b);

/*
 * key with S3's event encoding undone (%XX, '+' for a space) into out
 * (cap bytes): 0, or -EINVAL (a bad escape, a NUL byte, too long).
 */
int ev_key_decode(const char *key, char *out, size_t cap);

#endif
