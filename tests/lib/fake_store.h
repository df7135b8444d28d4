/*
 * tests/lib/fake_store.h - the tests' one fake store: a store (s3/store.h)
 * whose every call goes on to an inner store, the file backend in the
 * test's temp dir, so what the tests check is real stored bytes.  On the
 * way it counts calls by kind, and, on command, holds calls at a gate
 * (before they go in, or after they landed and before their answer) or
 * fails them as an unreachable or a lax store would.
 *
 * It is the one place outside s3/ that implements the backend interface
 * (s3/store_int.h); tests hand fake_store_store() to cache/ and fs/.
 * Thread-safe: the gateway's threads call it while the test steers it.
 */
#ifndef MAPFS_TEST_FAKE_STORE_H
#define MAPFS_TEST_FAKE_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "s3/store.h"

/* What the fake counts and can hold, one kind per store call. */
enum fake_call {
	FAKE_HEAD,
	FAKE_GET, /* store_get and the streaming GETs */
	FAKE_PUT, /* a PUT from memory */
	FAKE_PUT_FD,
	FAKE_PART,
	FAKE_PART_COPY,
	FAKE_COPY,
	FAKE_LIST, /* a page of a listing */
	FAKE_CALLS
};

/* Faults, any set of them (fake_store_faults). */
enum fake_fault {
	FAKE_PUTS_DOWN = 1 << 0,    /* every PUT -EAGAIN: unreachable */
	FAKE_ALL_DOWN = 1 << 1,     /* every HEAD and GET -EAGAIN too */
	FAKE_NO_PART_COPY = 1 << 2, /* UploadPartCopy -ENOTSUP */
	FAKE_MPU_FAIL = 1 << 3,     /* complete and abort -EAGAIN (a crash) */
	FAKE_MPU_LOSE_CREATE = 1 << 4, /* an upload is made, its id lost */
};

/* Where a gate holds the calls of one kind. */
enum fake_hold {
	FAKE_HOLD_NONE,   /* open: every call goes through */
	FAKE_HOLD_BEFORE, /* before the call reaches the inner store */
	FAKE_HOLD_AFTER,  /* after it landed there, before its answer */
};

struct fake_store;

/*
 * A fake in front of a new inner store opened from inner_url (a
 * "file://" URL): 0, or -errno.  Every counter 0, no fault, gates open;
 * conditions honoured in the request, as the inner store does; files
 * past S3's one-PUT size (STORE_PUT_MAX_DEFAULT) go up in parts.
 */
int fake_store_open(const char *inner_url, struct fake_store **out);

/* Close the fake and its inner store (NULL is a no-op). */
void fake_store_close(struct fake_store *f);

/* The store to hand to the gateway's rooms (owned by f). */
struct store *fake_store_store(struct fake_store *f);

/* The inner store, to put or check objects behind the gateway's back. */
struct store *fake_store_inner(struct fake_store *f);

/* The fault set from now on (0: none). */
void fake_store_faults(struct fake_store *f, unsigned faults);

/* Calls of kind so far; bytes asked by GETs, and the most one asked. */
int fake_store_count(struct fake_store *f, enum fake_call kind);
uint64_t fake_store_get_bytes(struct fake_store *f);
uint64_t fake_store_get_most(struct fake_store *f);

/* Every counter back to 0. */
void fake_store_counts_reset(struct fake_store *f);

/*
 * Hold the calls of kind where says (FAKE_HOLD_NONE lets the held ones
 * go); the count of calls that reached the gate starts again at 0.
 */
void fake_store_hold(struct fake_store *f, enum fake_call kind,
		     enum fake_hold where);

/* fake_store_hold(), but the first pass calls of kind go by. */
void fake_store_hold_after(struct fake_store *f, enum fake_call kind,
			   enum fake_hold where, int pass);

/*
 * Wait until n calls of kind reached its gate since it was set: true, or
 * false after timeout_ms.
 */
bool fake_store_held_wait(struct fake_store *f, enum fake_call kind, int n,
			  int timeout_ms);

/* The largest object sent as one PUT (store_put_max); 0: S3's default. */
void fake_store_put_max(struct fake_store *f, uint64_t bytes);

#endif
