/*
 * s3/http.c - the I/O thread of s3/http.h.
 *
 * Only the I/O thread touches the multi handle and the easy handles (curl
 * handles are not thread-safe); callers only queue under the lock and
 * poke the thread with curl_multi_wakeup(), which is.
 */
#include "http.h"
#include "common/log.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONNECT_TIMEOUT_S 10L
/* A transfer that moves under 1 byte/s for this long is dead. */
#define STALL_TIMEOUT_S 30L
#define RECV_BUFFER (512L << 10)
#define SEND_BUFFER (1L << 20)
#define POLL_MS 1000

struct s3_http {
	pthread_mutex_t lock;
	struct s3_xfer *head, *tail; /* queued, not started */
	int active, max;
	bool stop;
	CURLM *multi;
	pthread_t thread;
	CURL **pool; /* idle easy handles, at most max */
	int npool;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	struct s3_xfer *x = ud;
	size_t len = size * n, nlen, vstart;
	char *colon;

	if (!x->on_header)
		return len;
	colon = memchr(p, ':', len);
	if (!colon)
		return len; /* the status line or the blank line */
	nlen = (size_t)(colon - p);
	vstart = nlen + 1;
	while (vstart < len && (p[vstart] == ' ' || p[vstart] == '\t'))
		vstart++;
	while (len > vstart &&
	       (p[len - 1] == '\r' || p[len - 1] == '\n' || p[len - 1] == ' '))
		len--;
	x->on_header(x->header_arg, p, nlen, p + vstart, len - vstart);
	return size * n;
}

/*
 * Of len body bytes just received, the ones the caller asked for: *skip
 * leading bytes are before the range (a 206 starts at the range; a 200 is
 * the whole object), and bytes past dst_len are dropped.
 */
static size_t range_take(struct s3_xfer *x, long status, size_t len,
			 size_t *skip)
{
	size_t take;

	*skip = 0;
	if (status == 200)
		*skip = x->dst_skip < len ? (size_t)x->dst_skip : len;
	x->dst_skip -= *skip;
	take = len - *skip;
	if (take > x->dst_len - x->dst_got)
		take = x->dst_len - x->dst_got;
	return take;
}

static size_t on_write(char *p, size_t size, size_t n, void *ud)
{
	struct s3_xfer *x = ud;
	size_t len = size * n, take;
	long status = 0;

	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	if (x->sink && status >= 200 && status < 300) {
		size_t skip;

		take = range_take(x, status, len, &skip);
		/* Bytes an earlier run of the request handed already. */
		if (x->dst_got < x->sink_done) {
			uint64_t seen = x->sink_done - x->dst_got;
			size_t drop = seen < take ? (size_t)seen : take;

			x->dst_got += drop;
			skip += drop;
			take -= drop;
		}
		if (take) {
			x->sink_err = x->sink(x->sink_arg, p + skip, take);
			if (x->sink_err)
				return 0;
			x->dst_got += take;
			x->sink_done += take;
		}
		return len;
	}
	if (x->dst && status >= 200 && status < 300) {
		size_t skip;

		take = range_take(x, status, len, &skip);
		memcpy((char *)x->dst + x->dst_got, p + skip, take);
		x->dst_got += take;
		return len; /* bytes past what was asked for are dropped */
	}
	if (x->resp.len + len > S3_HTTP_BODY_MAX)
		return 0;
	s3_buf_add(&x->resp, p, len);
	return s3_buf_err(&x->resp) ? 0 : len;
}

static size_t on_read(char *p, size_t size, size_t n, void *ud)
{
	struct s3_xfer *x = ud;
	uint64_t left = x->body_len - x->sent;
	size_t want = size * n < left ? size * n : (size_t)left;
	ssize_t got;

	if (!want)
		return 0;
	if (x->body == S3_BODY_MEM) {
		memcpy(p, (const char *)x->body_mem + x->sent, want);
		x->sent += want;
		return want;
	}
	do {
		got = pread(x->body_fd, p, want,
			    (off_t)(x->body_off + x->sent));
	} while (got < 0 && errno == EINTR);
	if (got <= 0) {
		/* A file shorter than announced is as broken as a failed read. */
		x->read_err = got < 0 ? -errno : -EIO;
		return CURL_READFUNC_ABORT;
	}
	x->sent += (uint64_t)got;
	return (size_t)got;
}

/* curl rewinds the body when it resends on a reused connection. */
static int on_seek(void *ud, curl_off_t off, int origin)
{
	struct s3_xfer *x = ud;

	if (origin != SEEK_SET || off < 0 || (uint64_t)off > x->body_len)
		return CURL_SEEKFUNC_FAIL;
	x->sent = (uint64_t)off;
	return CURL_SEEKFUNC_OK;
}

static CURL *easy_get(struct s3_http *h)
{
	CURL *e;

	if (h->npool) {
		e = h->pool[--h->npool];
		curl_easy_reset(e);
		return e;
	}
	return curl_easy_init();
}

static int xfer_start(struct s3_http *h, struct s3_xfer *x)
{
	CURL *e = easy_get(h);

	if (!e)
		return -ENOMEM;
	x->easy = e;
	curl_easy_setopt(e, CURLOPT_URL, x->url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, x);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	/* S3 keys are not paths: "a/../b" must reach the server as is. */
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME,
			 x->stall_s > 0 ? x->stall_s : STALL_TIMEOUT_S);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE, RECV_BUFFER);
	curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, SEND_BUFFER);
	if (strcmp(x->method, "HEAD") == 0) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else if (strcmp(x->method, "GET") == 0) {
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	} else if (strcmp(x->method, "PUT") == 0) {
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE,
				 (curl_off_t)x->body_len);
	} else if (strcmp(x->method, "POST") == 0) {
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)x->body_len);
	} else {
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, x->method);
	}
	if (x->body != S3_BODY_NONE) {
		curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(e, CURLOPT_READDATA, x);
		curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(e, CURLOPT_SEEKDATA, x);
	}
	if (curl_multi_add_handle(h->multi, e) != CURLM_OK) {
		curl_easy_cleanup(e);
		x->easy = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Under h->lock: x is finished; wake its caller. */
static void xfer_done(struct s3_http *h, struct s3_xfer *x)
{
	if (x->easy) {
		if (h->npool < h->max)
			h->pool[h->npool++] = x->easy;
		else
			curl_easy_cleanup(x->easy);
		x->easy = NULL;
	}
	x->done = true;
	pthread_cond_signal(&x->done_cv);
}

/* Start queued transfers while there is room; under h->lock. */
static void start_queued(struct s3_http *h)
{
	while (h->head && h->active < h->max) {
		struct s3_xfer *x = h->head;

		h->head = x->next;
		if (!h->head)
			h->tail = NULL;
		if (xfer_start(h, x)) {
			x->transport = CURLE_OUT_OF_MEMORY;
			xfer_done(h, x);
			continue;
		}
		h->active++;
	}
}

static void *io_thread(void *arg)
{
	struct s3_http *h = arg;
	struct CURLMsg *m;
	int running, left;

	for (;;) {
		pthread_mutex_lock(&h->lock);
		start_queued(h);
		if (h->stop && !h->active && !h->head) {
			pthread_mutex_unlock(&h->lock);
			break;
		}
		pthread_mutex_unlock(&h->lock);
		curl_multi_perform(h->multi, &running);
		while ((m = curl_multi_info_read(h->multi, &left))) {
			struct s3_xfer *x = NULL;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
					  (char **)&x);
			x->transport = (int)m->data.result;
			curl_easy_getinfo(m->easy_handle,
					  CURLINFO_RESPONSE_CODE, &x->status);
			curl_multi_remove_handle(h->multi, m->easy_handle);
			pthread_mutex_lock(&h->lock);
			h->active--;
			xfer_done(h, x);
			pthread_mutex_unlock(&h->lock);
		}
		curl_multi_poll(h->multi, NULL, 0, POLL_MS, NULL);
	}
	return NULL;
}

int s3_http_open(int max_requests, struct s3_http **out)
{
	struct s3_http *h;
	int err;

	if (max_requests < 1)
		return -EINVAL;
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return -EIO;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->max = max_requests;
	h->pool = calloc((size_t)max_requests, sizeof(*h->pool));
	h->multi = curl_multi_init();
	if (!h->pool || !h->multi) {
		err = -ENOMEM;
		goto out_free;
	}
	curl_multi_setopt(h->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS,
			  (long)max_requests);
	curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)max_requests);
	pthread_mutex_init(&h->lock, NULL);
	err = -pthread_create(&h->thread, NULL, io_thread, h);
	if (err) {
		pthread_mutex_destroy(&h->lock);
		goto out_free;
	}
	*out = h;
	return 0;
out_free:
	if (h->multi)
		curl_multi_cleanup(h->multi);
	free(h->pool);
	free(h);
	return err;
}

void s3_http_close(struct s3_http *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->lock);
	h->stop = true;
	pthread_mutex_unlock(&h->lock);
	curl_multi_wakeup(h->multi);
	pthread_join(h->thread, NULL);
	while (h->npool)
		curl_easy_cleanup(h->pool[--h->npool]);
	curl_multi_cleanup(h->multi);
	pthread_mutex_destroy(&h->lock);
	free(h->pool);
	free(h);
}

int s3_http_run(struct s3_http *h, struct s3_xfer *x)
{
	x->transport = 0;
	x->status = 0;
	x->dst_got = 0;
	x->read_err = 0;
	x->sink_err = 0;
	x->sent = 0;
	x->done = false;
	x->next = NULL;
	x->easy = NULL;
	s3_buf_reset(&x->resp);
	if (pthread_cond_init(&x->done_cv, NULL))
		return -ENOMEM;
	pthread_mutex_lock(&h->lock);
	if (h->tail)
		h->tail->next = x;
	else
		h->head = x;
	h->tail = x;
	pthread_mutex_unlock(&h->lock);
	curl_multi_wakeup(h->multi);
	pthread_mutex_lock(&h->lock);
	while (!x->done)
		pthread_cond_wait(&x->done_cv, &h->lock);
	pthread_mutex_unlock(&h->lock);
	pthread_cond_destroy(&x->done_cv);
	return 0;
}
