/*
 * s3/store.h - the object store interface of mapfs-gw.
 *
 * Objects are named by keys ("a/b.txt"); the store knows nothing of NFS,
 * inodes or LMDB.  Backends: the local directory ("file:///path", the
 * embedded default) and S3 over libcurl ("s3://bucket/prefix").
 *
 * All calls are blocking and thread-safe: callers run them on worker
 * threads (cache fetchers, fs syncer), never on an event loop.  Every
 * function returns 0 or a negative errno (one table per backend maps its
 * native errors: ENOENT no such key, EACCES denied, EAGAIN retry later,
 * ENOTSUP the backend lacks the feature).
 */
#ifndef MAPFS_STORE_H
#define MAPFS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define STORE_ETAG_MAX 72
#define STORE_KEY_MAX 1024
#define STORE_WID_MAX 64
#define STORE_LINK_MAX 48

/* File attributes kept with an object (x-amz-meta-* on S3, xattrs here). */
struct store_meta {
	bool has_mode, has_uid, has_gid, has_mtime, has_rdev;
	uint32_t mode; /* permission bits (and S_IFMT bits if known) */
	uint32_t uid, gid;
	int64_t mtime_ns;
	uint64_t rdev; /* devices: the Linux dev_t (makedev), as s3fs writes */
	bool symlink;  /* the body is a symlink target */
	/* The id of the write that made this version ("": none; S3:
	 * x-amz-meta-mapfs-wid), so that a write can tell its own earlier
	 * try from another writer's version (store_cond.wid).  fs/ makes it
	 * WRITER-VERSION: the text before the last '-' names who wrote
	 * (namespace, node, inode), the rest which version. */
	char wid[STORE_WID_MAX];
	/* One id on every name of a file with several (hard links; "":
	 * none; S3: x-amz-meta-mapfs-link), so that a namespace rebuilt
	 * from the bucket finds them to be one file again. */
	char link[STORE_LINK_MAX];
};

struct store_info {
	uint64_t size;
	char etag[STORE_ETAG_MAX];
	int64_t last_modified_ns;
	struct store_meta meta;
};

struct store_entry {
	char *key; /* full key (malloc'd, owned by the page) */
	uint64_t size;
	char etag[STORE_ETAG_MAX];
	int64_t last_modified_ns;
};

struct store_page {
	struct store_entry *entries;
	size_t nentries;
	char **prefixes; /* common prefixes, each ending in the delimiter */
	size_t nprefixes;
	char *next_token; /* NULL when the listing is complete */
};

/*
 * What a write is based on (the *_if calls).  A write whose condition
 * does not hold changes nothing and returns -ESTALE (S3's 412
 * Precondition Failed: someone else wrote the key); STORE_IF_MATCH on a
 * key that is gone returns -ENOENT.  A store that honours If-Match /
 * If-None-Match checks in the same request; one that ignores them (found
 * by a probe on the first conditional write, said in the log) gets a HEAD
 * just before the write instead: a write by another client between the
 * two is then overwritten.
 */
enum store_if {
	STORE_IF_ANY = 0, /* unconditional */
	STORE_IF_NONE,    /* only if no object has the key (If-None-Match: *) */
	STORE_IF_MATCH,   /* only if the object is etag's version (If-Match) */
};

struct store_cond {
	enum store_if kind;
	char etag[STORE_ETAG_MAX]; /* STORE_IF_MATCH */
	/* This write's id, as its meta carries it ("": none).  An object
	 * that already carries it is this very write's, from a try whose
	 * answer was lost: the condition counts as met. */
	char wid[STORE_WID_MAX];
};

struct store_opts {
	const char *url; /* file:///abs/path or s3://bucket[/prefix] */
	/* S3 only; NULL, false or 0 picks the default. */
	const char *s3_endpoint; /* "http[s]://host[:port]"; default AWS's */
	const char *s3_region;   /* default: AWS_REGION, AWS_DEFAULT_REGION,
				    the profile's region, "us-east-1" */
	bool s3_path_style;      /* force path-style addressing */
	int s3_max_requests;     /* requests in flight, default 64 */
	/* Largest object sent as one PUT (store_put_max); 0: the backend's
	 * choice. */
	uint64_t put_max;
};

struct store;

/* Open a store from its URL.  Returns 0, -EINVAL (bad URL) or -errno. */
int store_open(const struct store_opts *opts, struct store **out);
void store_close(struct store *st);

/* Human-readable URL of the store (owned by st). */
const char *store_url(const struct store *st);

/*
 * Whether the store is down: its last operation that said anything of
 * its health got -EAGAIN (the backend's retries used up); the next one
 * that gets an answer (a success, no such key, denied, ...) clears it.
 * Transitions are logged once per outage.  Lock-free; any thread.
 */
bool store_down(const struct store *st);

/*
 * How many outages (store_down() true, then false) have ended since the
 * store was opened, and how long the last one lasted (*last_ms), so
 * that a caller that looks now and then sees one however short it was.
 * Lock-free; any thread.
 */
uint64_t store_outages_ended(const struct store *st, uint64_t *last_ms);

/*
 * Keys of the store's own (a backend's staging and multipart files, the
 * probe): every key whose first segment starts with this.  No object of
 * the namespace may have one; a listing never shows one.
 */
#define STORE_RESERVED_PREFIX ".mapfs-"

/* Whether key (relative to the store's prefix) is one of the store's own. */
bool store_key_reserved(const char *key);

/* The key store_probe() HEADs: not expected to exist (404 is an answer). */
#define STORE_PROBE_KEY STORE_RESERVED_PREFIX "gw-probe"

/*
 * One cheap request (HEAD of STORE_PROBE_KEY) to learn whether the store
 * answers: 0 if it did (whatever it said), -EAGAIN if not.  Updates
 * store_down() like any operation.
 */
int store_probe(struct store *st);

/* HEAD: size, etag, metadata.  -ENOENT if the key is absent. */
int store_head(struct store *st, const char *key, struct store_info *out);

/*
 * GET bytes [off, off+len) into buf.  *got is the number of bytes read
 * (less than len only at the end of the object; 0, not an error, when off
 * is at or past the end).
 */
int store_get(struct store *st, const char *key, uint64_t off, size_t len,
	      void *buf, size_t *got);

/*
 * GET bytes [off, off+len) and hand them to sink in order, every byte
 * exactly once: sink(arg, p, n) with n > 0, p valid only during the
 * call; a try the backend repeats resumes where the sink left off.  A
 * non-zero return from sink stops the GET, which returns that value.
 * *got is the number of bytes handed (less than len only at the end of
 * the object).  sink may run on a thread of the store's (S3: its I/O
 * thread, so it must not block for long nor call the store).  Memory
 * stays bounded whatever len is.
 */
typedef int (*store_sink_fn)(void *arg, const void *p, size_t n);
int store_get_stream(struct store *st, const char *key, uint64_t off,
		     uint64_t len, store_sink_fn sink, void *arg,
		     uint64_t *got);

/*
 * store_get_stream pinned to one version: with if_match (an etag; NULL or
 * "" pins nothing) a GET of any other version returns -ESTALE and hands
 * the sink nothing, so a reader that needs more bytes of an object never
 * mixes two versions of it.
 */
int store_get_stream_if(struct store *st, const char *key, const char *if_match,
			uint64_t off, uint64_t len, store_sink_fn sink,
			void *arg, uint64_t *got);

/*
 * PUT a whole object from memory, metadata in the same request.  It
 * replaces any old object atomically (a new etag).  A key ending in '/' is
 * a directory marker: its body must be empty.  out may be NULL.
 */
int store_put(struct store *st, const char *key, const void *buf, size_t len,
	      const struct store_meta *meta, struct store_info *out);

/* PUT a whole object from bytes [0, len) of an open file. */
int store_put_fd(struct store *st, const char *key, int fd, uint64_t len,
		 const struct store_meta *meta, struct store_info *out);

/* store_put and store_put_fd only if cond holds (NULL: always). */
int store_put_if(struct store *st, const char *key, const void *buf, size_t len,
		 const struct store_meta *meta, const struct store_cond *cond,
		 struct store_info *out);
int store_put_fd_if(struct store *st, const char *key, int fd, uint64_t len,
		    const struct store_meta *meta,
		    const struct store_cond *cond, struct store_info *out);

/*
 * The largest object that is best sent as one PUT (store_put_fd);
 * bigger ones go faster as a multipart upload with parts in parallel.
 * store_opts.put_max if it was set, else the backend's choice: it knows
 * what its requests cost (over a network one stream is slower than many;
 * on this machine it is not, and a multipart upload costs the server a
 * second pass over the bytes).
 */
#define STORE_PUT_MAX_DEFAULT (64ull << 20)
uint64_t store_put_max(struct store *st);

/*
 * The longest key (bytes, at most STORE_KEY_MAX) an object of this store
 * may have: S3 takes 1,024 bytes with the prefix, so a store
 * s3://bucket/PREFIX has that much less for the gateway's keys.
 */
size_t store_key_max(struct store *st);

/*
 * How many small uploads are worth having in flight at once: over a
 * network each waits a round trip, and many fill the store (the S3
 * backend: STORE_PUT_PARALLEL_DEFAULT); on the file store each is an
 * fsync of the same disk, and more at once only contend (1).
 */
#define STORE_PUT_PARALLEL_DEFAULT 16
unsigned store_put_parallel(const struct store *st);

/* Multipart upload.  upload_id is a malloc'd string the caller frees. */
int store_mpu_create(struct store *st, const char *key,
		     const struct store_meta *meta, char **upload_id);
/* Upload part partno (1-based) from bytes [off, off+len) of fd. */
int store_mpu_part(struct store *st, const char *key, const char *upload_id,
		   int partno, int fd, uint64_t off, uint64_t len,
		   char etag[STORE_ETAG_MAX]);
/* Part partno copied from bytes [off, off+len) of object src (-ENOTSUP). */
int store_mpu_part_copy(struct store *st, const char *key,
			const char *upload_id, int partno, const char *src,
			uint64_t off, uint64_t len, char etag[STORE_ETAG_MAX]);
/*
 * Join parts 1..nparts, etags[i] being part i+1's: -EINVAL if a part is
 * missing or its etag differs (S3's InvalidPart).  An unknown upload id
 * (or one of another key) is -ENOENT, for every mpu call.
 */
int store_mpu_complete(struct store *st, const char *key, const char *upload_id,
		       int nparts, char (*etags)[STORE_ETAG_MAX],
		       struct store_info *out);
/* store_mpu_complete only if cond holds for key (NULL: always); the
 * upload stays (to abort) when it does not. */
int store_mpu_complete_if(struct store *st, const char *key,
			  const char *upload_id, int nparts,
			  char (*etags)[STORE_ETAG_MAX],
			  const struct store_cond *cond,
			  struct store_info *out);
int store_mpu_abort(struct store *st, const char *key, const char *upload_id);

/* A multipart upload in progress (store_mpu_list). */
struct store_upload {
	char *key;       /* malloc'd, owned by the array */
	char *upload_id; /* malloc'd, owned by the array */
};

/*
 * Every multipart upload in progress whose key starts with prefix, over
 * all pages: *out (malloc'd; NULL and *n 0 when there are none or on an
 * error) is freed with store_uploads_free().  An upload created by a request whose answer was
 * lost is here too, so a caller can find (and abort) uploads it never
 * learnt the id of.  -ENOTSUP if the backend cannot list them.
 */
int store_mpu_list(struct store *st, const char *prefix,
		   struct store_upload **out, size_t *n);
void store_uploads_free(struct store_upload *v, size_t n);

/*
 * List one page of keys starting with prefix.  With delimiter '/', keys
 * with a further '/' after the prefix are rolled up into common prefixes.
 * token is NULL for the first page, else the previous page's next_token.
 * max_keys 0 means the backend's default (1000).  The page is freed with
 * store_page_free().  A key equal to the prefix (a "dir/" marker) may be
 * returned; callers skip it.  At most 1000 items (entries plus prefixes)
 * a page, as on S3; next_token is opaque.
 */
int store_list(struct store *st, const char *prefix, char delimiter,
	       const char *token, unsigned max_keys, struct store_page *out);
void store_page_free(struct store_page *page);

/* Server-side copy; meta NULL keeps the source's metadata. */
int store_copy(struct store *st, const char *src, const char *dst,
	       const struct store_meta *meta, struct store_info *out);

/*
 * store_copy only if cond holds for dst (NULL: always).  S3 has no
 * conditional copy that every server honours: this one HEADs dst just
 * before the copy (the window of the HEAD fallback above).
 */
int store_copy_if(struct store *st, const char *src, const char *dst,
		  const struct store_meta *meta, const struct store_cond *cond,
		  struct store_info *out);

/* Delete a key; deleting an absent key is not an error. */
int store_delete(struct store *st, const char *key);

/* Delete many keys (a batch); returns the first error. */
int store_delete_many(struct store *st, const char *const *keys, size_t n);

/*
 * The store key (relative to the store's prefix) that an event record's
 * bucket and object key name, into out (cap bytes): 0, -ENOENT if the
 * object is not in this store (another bucket or prefix), -ENOTSUP if
 * the backend has no events (the file store).
 */
int store_event_key(struct store *st, const char *bucket, const char *key,
		    char *out, size_t cap);

/* Capacity of the backing store, if it has one (-ENOTSUP for S3). */
int store_statfs(struct store *st, uint64_t *total_bytes,
		 uint64_t *avail_bytes);

#endif
