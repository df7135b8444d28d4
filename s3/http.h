/*
 * s3/http.h - internal to s3/: HTTP transfers over libcurl multi
 * handles, each driven by its own I/O thread (a "lane", up to four).
 *
 * A caller fills a struct s3_xfer, calls s3_http_run() and blocks on the
 * transfer's own condition until an I/O thread has finished it.  The
 * transfer goes to the least busy lane; at most max_requests transfers
 * are in flight over all lanes (each lane its share), the rest wait in
 * FIFO order on their lane.  Connections are kept and reused by each
 * lane's multi handle.  A sink runs on its transfer's lane, so sinks of
 * concurrent transfers run in parallel, and a slow sink holds up only
 * the transfers of its own lane.  The engine knows nothing of S3:
 * signing, retries and error mapping belong to the caller.
 */
#ifndef MAPFS_S3_HTTP_H
#define MAPFS_S3_HTTP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define S3_HTTP_BODY_MAX (64u << 20) /* a response body we keep in memory */

enum s3_body { S3_BODY_NONE, S3_BODY_MEM, S3_BODY_FD };

struct s3_xfer {
	/* The request; owned by the caller, unchanged until the run ends. */
	const char *method; /* GET HEAD PUT POST DELETE */
	const char *url;
	struct curl_slist *headers;
	enum s3_body body;
	const void *body_mem;
	int body_fd;
	uint64_t body_off, body_len;
	/*
	 * A 2xx body goes into dst (at most dst_len bytes; from a 200, which
	 * is a server ignoring the Range, after skipping dst_skip bytes); any
	 * other body, and a 2xx one when dst is NULL, goes into resp.
	 */
	void *dst;
	size_t dst_len;
	uint64_t dst_skip;
	/*
	 * Instead of dst: a 2xx body (up to dst_len bytes, dst_skip as
	 * above) is handed to sink, in the transfer's I/O thread.  sink_done counts
	 * the bytes it took over every run of this xfer (the caller zeroes
	 * it once), so a run that repeats the request skips what was
	 * handed before.  A non-zero return from sink ends the transfer
	 * and is kept in sink_err.
	 */
	int (*sink)(void *arg, const void *p, size_t n);
	void *sink_arg;
	uint64_t sink_done;
	/* Called in the I/O thread for each response header line. */
	void (*on_header)(void *arg, const char *name, size_t nlen,
			  const char *value, size_t vlen);
	void *header_arg;
	/*
	 * A transfer that moves under 1 byte/s for this many seconds is
	 * dead; 0 means STALL_TIMEOUT_S (s3/http.c).
	 */
	long stall_s;

	/* The result, valid once s3_http_run() returned. */
	int transport; /* a CURLcode; 0 = an HTTP answer arrived */
	long status;
	size_t dst_got;
	struct s3_buf resp;
	int read_err; /* -errno from reading body_fd, if that failed */
	int sink_err; /* what sink returned, if it stopped the transfer */

	/* Engine-private. */
	pthread_cond_t done_cv;
	bool done;
	uint64_t sent;
	struct s3_xfer *next;
	void *easy;
};

struct s3_http;

/* Start the I/O threads.  max_requests >= 1 (also the most lanes). */
int s3_http_open(int max_requests, struct s3_http **out);

/* Stop the I/O threads; no s3_http_run may be in progress. */
void s3_http_close(struct s3_http *h);

/*
 * Run x to completion (blocking) and fill its result fields.  Returns 0
 * once it ran (look at x->transport and x->status) or -ENOMEM if it could
 * not start.  x->resp is reset first and freed by the caller.
 */
int s3_http_run(struct s3_http *h, struct s3_xfer *x);

#endif
