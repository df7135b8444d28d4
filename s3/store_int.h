/*
 * s3/store_int.h - what s3/'s backends share behind store.h: the backend
 * vtable every store_*.c fills and the struct each backend's own begins
 * with.  Private to s3/ (tests/lib/fake_store.c, the tests' one fake
 * store, is the only other user); the rest of the gateway sees only the
 * calls of store.h.
 */
#ifndef MAPFS_STORE_INT_H
#define MAPFS_STORE_INT_H

#include <pthread.h>

#include "store.h"

/* The backend vtable (s3/store_*.c). */
struct store_ops {
	const char *scheme;
	int (*open)(const struct store_opts *opts, struct store **out);
	void (*close)(struct store *st);
	int (*head)(struct store *, const char *, struct store_info *);
	int (*get)(struct store *, const char *, uint64_t, size_t, void *,
		   size_t *);
	/* May be NULL: store.c then GETs into a bounded buffer. */
	int (*get_stream)(struct store *, const char *, const char *if_match,
			  uint64_t, uint64_t, store_sink_fn, void *,
			  uint64_t *);
	/* Writes with a cond (NULL: none) check it in the request itself;
	 * store.c passes only conditions cond_native says the backend
	 * honours, and HEADs for the others. */
	int (*put)(struct store *, const char *, const void *, size_t,
		   const struct store_meta *, const struct store_cond *,
		   struct store_info *);
	int (*put_fd)(struct store *, const char *, int, uint64_t,
		      const struct store_meta *, const struct store_cond *,
		      struct store_info *);
	int (*mpu_create)(struct store *, const char *,
			  const struct store_meta *, char **);
	int (*mpu_part)(struct store *, const char *, const char *, int, int,
			uint64_t, uint64_t, char[STORE_ETAG_MAX]);
	int (*mpu_part_copy)(struct store *, const char *, const char *, int,
			     const char *, uint64_t, uint64_t,
			     char[STORE_ETAG_MAX]);
	int (*mpu_complete)(struct store *, const char *, const char *, int,
			    char (*)[STORE_ETAG_MAX], const struct store_cond *,
			    struct store_info *);
	int (*mpu_abort)(struct store *, const char *, const char *);
	int (*mpu_list)(struct store *, const char *, struct store_upload **,
			size_t *);
	int (*list)(struct store *, const char *, char, const char *, unsigned,
		    struct store_page *);
	int (*copy)(struct store *, const char *, const char *,
		    const struct store_meta *, struct store_info *);
	int (*del)(struct store *, const char *);
	int (*del_many)(struct store *, const char *const *, size_t);
	int (*statfs)(struct store *, uint64_t *, uint64_t *); /* may be NULL */
	int (*event_key)(struct store *, const char *, const char *, char *,
			 size_t);            /* may be NULL */
	uint64_t (*put_max)(struct store *); /* NULL: the default */
	size_t (*key_max)(struct store *);   /* NULL: STORE_KEY_MAX */
	/* Writes worth having in flight at once (store_put_parallel);
	 * 0: STORE_PUT_PARALLEL_DEFAULT. */
	unsigned put_parallel;
	/*
	 * Which conditions the backend honours in the request itself:
	 * STORE_COND_* bits, or -errno if it cannot tell yet (asked again
	 * later).  NULL: none (store.c HEADs before each conditional write).
	 */
	int (*cond_native)(struct store *);
};

#define STORE_COND_NONE_OK 1  /* If-None-Match: * on PUT */
#define STORE_COND_MATCH_OK 2 /* If-Match on PUT */
#define STORE_COND_MPU_OK 4   /* the same on CompleteMultipartUpload */
#define STORE_COND_ALL 7
#define STORE_COND_OK_MAX 16

/* Every backend's struct begins with this. */
struct store {
	const struct store_ops *ops;
	char *url;
	uint64_t put_max; /* store_opts.put_max; 0: ops->put_max decides */
	/* store_down(): 0 while it answers, else CLOCK_MONOTONIC ms of the
	 * first -EAGAIN of this outage (a backend's open may set it). */
	_Atomic int64_t down_since_ms;
	/* Outages ended so far, and how long the last one lasted. */
	_Atomic uint64_t outages_ended;
	_Atomic int64_t last_outage_ms;
	/* STORE_COND_* bits the backend honours; -1 until it could tell. */
	_Atomic int cond_bits;
	/* Writes (by id) whose condition a HEAD found met, for the server
	 * that ignores conditions: their later tries need no new HEAD (a
	 * lax server may keep what a cut try sent, without its metadata). */
	pthread_mutex_t cond_lock;
	char cond_ok[STORE_COND_OK_MAX][STORE_WID_MAX];
	unsigned cond_ok_next;
};

/* The backends store_open() dispatches to.  "file:///abs/path": objects
 * are files under a local directory. */
extern const struct store_ops store_file_ops;

/* "s3://bucket[/prefix]": objects in an S3 bucket, over libcurl. */
extern const struct store_ops store_s3_ops;

/* For the backends' mpu_list: append a copy of (key, upload_id) to the
 * array *v of *n uploads.  0 or -ENOMEM (the array stays as it was). */
int store_uploads_add(struct store_upload **v, size_t *n, const char *key,
		      const char *upload_id);

#endif
