/*
 * s3/store_s3_int.h - what the S3 backend's files share: the backend's
 * struct, one request (struct req, s3_do: store_s3_req.c), keys and
 * metadata on the wire (store_s3_meta.c), and the calls one request kind
 * makes of another. Private to the S3 backend.
 */
#ifndef MAPFS_STORE_S3_INT_H
#define MAPFS_STORE_S3_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "http.h"
#include "sign.h"
#include "store_int.h"
#include "xml.h"

#define HDRS_MAX 16         /* a request's headers of its own */
#define QUERY_MAX 8         /* a request's query parameters */
#define MPU_PARTS_MAX 10000 /* S3's limit of parts in one upload */

struct store_s3 {
	struct store base;
	struct s3_http *http;
	struct s3_cred_src *creds;
	char *bucket;
	char *prefix; /* "" or "some/prefix/" */
	char *region;
	char *origin;     /* "https://host[:port]" the URLs start with */
	char *host;       /* the Host header */
	char *path;       /* encoded path before the key: "" or "/bucket" */
	uint64_t put_max; /* store_put_max() */
	/* The server compares If-Match with the ETag unquoted (radosgw 16.2
	 * on PUT): learnt from a 412 of the version it holds. */
	_Atomic bool match_bare;
};

static inline struct store_s3 *s3_of(struct store *st)
{
	return (struct store_s3 *)st;
}

/* What the response headers said; filled in the I/O thread. */
struct resp_hdrs {
	char etag[STORE_ETAG_MAX];
	bool has_length;
	uint64_t length;
	int64_t last_modified, date; /* seconds; 0 = absent */
	char mode[24], uid[24], gid[24], mtime[40], symlink[8], rdev[24];
	char wid[STORE_WID_MAX];   /* x-amz-meta-mapfs-wid */
	char link[STORE_LINK_MAX]; /* x-amz-meta-mapfs-link */
};

/* One request: what to send (set by its caller), and what came back. */
struct req {
	const char *method;
	const char *key; /* store key; NULL for a bucket-level request */
	struct s3_kv query[QUERY_MAX];
	size_t nq;
	struct s3_kv hdrs[HDRS_MAX]; /* besides host, date, hash, token */
	size_t nh;
	enum s3_body body;
	const void *mem;
	int fd;
	uint64_t off, len;
	void *dst;
	size_t dst_len;
	uint64_t dst_skip;
	store_sink_fn sink; /* instead of dst (s3/http.h) */
	void *sink_arg;
	bool error_in_200; /* the operation may answer 200 with an <Error> */

	/* Results. */
	long status;
	char code[S3_XML_CODE_MAX];
	struct resp_hdrs rh;
	struct s3_buf resp;
	size_t got;
	int tries;
};

/* Headers for m; bufs holds their text and lives as long as r. */
struct meta_bufs {
	char mode[16], uid[16], gid[16], mtime[32], rdev[24];
};

/* store_s3_req.c */
/* Add a header or a query parameter to r (values live as long as r;
 * past HDRS_MAX / QUERY_MAX they are dropped). */
void s3_req_hdr(struct req *r, const char *name, const char *value);
void s3_req_query(struct req *r, const char *name, const char *value);

/* v (vlen bytes, not terminated) into dst, cut to cap - 1, terminated. */
void s3_hdr_copy(char *dst, size_t cap, const char *v, size_t vlen);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t s3_now_ms(void);

/*
 * Run r with retries; 0 or -errno.  The response body (error documents
 * excepted) is left in r->resp for the caller, who frees it.
 */
int s3_do(struct store_s3 *s, struct req *r);

/* Free what s3_do left in r (its response body). */
void s3_req_free(struct req *r);

/* store_s3_meta.c */
/* The same keys as the file backend accepts, so both backends agree. */
int s3_key_check(const char *key);

/* Whether key is a directory marker ("dir/"). */
bool s3_is_marker(const char *key);

/* r's headers for key's metadata m (NULL: the content type only); b
 * holds their text and lives as long as r. */
void s3_meta_headers(struct req *r, const char *key, const struct store_meta *m,
		     struct meta_bufs *b);

/* Metadata from response headers; malformed fields read as absent. */
void s3_meta_read(const struct resp_hdrs *rh, struct store_meta *m);

/* The info a write reports: its size, the new ETag, the server's time. */
void s3_write_info(const struct req *r, uint64_t size,
		   const struct store_meta *meta, struct store_info *out);

/* "/bucket/prefix+key", encoded, for x-amz-copy-source. */
char *s3_copy_source(const struct store_s3 *s, const char *key);

/*
 * The backend's store_ops entries, by request kind; store.h says what
 * each promises.  Those here are the ones another kind calls.
 */

/* store_s3_get.c */
int s3_head(struct store *st, const char *key, struct store_info *out);

int s3_get(struct store *st, const char *key, uint64_t off, size_t len,
	   void *buf, size_t *got);

int s3_get_stream(struct store *st, const char *key, const char *if_match,
		  uint64_t off, uint64_t len, store_sink_fn sink, void *arg,
		  uint64_t *got);

/* store_s3_put.c */
int s3_put(struct store *st, const char *key, const void *buf, size_t len,
	   const struct store_meta *meta, const struct store_cond *cond,
	   struct store_info *out);

int s3_put_fd(struct store *st, const char *key, int fd, uint64_t len,
	      const struct store_meta *meta, const struct store_cond *cond,
	      struct store_info *out);

int s3_mpu_create(struct store *st, const char *key,
		  const struct store_meta *meta, char **upload_id);

int s3_mpu_part(struct store *st, const char *key, const char *upload_id,
		int partno, int fd, uint64_t off, uint64_t len,
		char etag[STORE_ETAG_MAX]);

int s3_mpu_part_copy(struct store *st, const char *key, const char *upload_id,
		     int partno, const char *src, uint64_t off, uint64_t len,
		     char etag[STORE_ETAG_MAX]);

int s3_mpu_complete(struct store *st, const char *key, const char *upload_id,
		    int nparts, char (*etags)[STORE_ETAG_MAX],
		    const struct store_cond *cond, struct store_info *out);

int s3_mpu_abort(struct store *st, const char *key, const char *upload_id);

/*
 * Which conditions the server honours, learnt from writes of a key of
 * our own: created with If-None-Match: *, written the same way again
 * (412 if honoured), then with If-Match of an ETag it cannot hold (412
 * if honoured), then a multipart Complete with If-None-Match: * (412 if
 * honoured), then deleted.  -errno if it could not tell.
 */
int s3_cond_native(struct store *st);

/* store_s3_list.c */
int s3_list(struct store *st, const char *prefix, char delimiter,
	    const char *token, unsigned max_keys, struct store_page *out);

/*
 * Abort uploads under our prefix that are older than MPU_STALE_S: what a
 * crash left behind.  Younger ones may be resumed by the uploader.  A
 * server without ListMultipartUploads (s3rver) is left alone.
 */
void s3_abort_stale_uploads(struct store_s3 *s);

int s3_mpu_list(struct store *st, const char *prefix, struct store_upload **out,
		size_t *n);

/* store_s3_copy.c */
int s3_copy(struct store *st, const char *src, const char *dst,
	    const struct store_meta *meta, struct store_info *out);

/* store_s3_delete.c */
int s3_del(struct store *st, const char *key);

int s3_del_many(struct store *st, const char *const *keys, size_t n);

#endif
