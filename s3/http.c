/*
 * s3/http.c - the I/O threads ("lanes") of s3/http.h.
 *
 * Each lane is one thread with its own multi handle, connections, idle
 * easy handles and queue.  Only a lane's thread touches its multi handle
 * and the easy handles on it (curl handles are not thread-safe); callers
 * only queue under the lane's lock and poke its thread with
 * curl_multi_wakeup(), which is.  A transfer goes to the lane with the
 * fewest transfers (running or queued) at the time it is queued, so the
 * sinks of concurrent GETs - which land fetched data in cache files -
 * run on as many threads as there are lanes.
 */
#include "http.h"
#include "common/log.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdatomic.h>
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
/* Lanes at most: past a few, landing is not what a fetch waits on. */
#define LANES_MAX 4

struct lane {
	pthread_mutex_t lock;
	struct s3_xfer *head, *tail; /* queued, not started */
	int active, max;
	atomic_int load; /* running + queued, read without the lock */
	bool stop;
	CURLM *multi;
	pthread_t thread;
	bool started;
	CURL **pool; /* idle easy handles, at most max */
	int npool;
};

struct s3_http {
	int nlanes;
	struct lane lanes[];
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

static CURL *easy_get(struct lane *l)
{
	CURL *e;

	if (l->npool) {
		e = l->pool[--l->npool];
		curl_easy_reset(e);
		return e;
	}
	return curl_easy_init();
}

static int xfer_start(struct lane *l, struct s3_xfer *x)
{
	CURL *e = easy_get(l);

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
	if (curl_multi_add_handle(l->multi, e) != CURLM_OK) {
		curl_easy_cleanup(e);
		x->easy = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Under l->lock: x is finished; wake its caller. */
static void xfer_done(struct lane *l, struct s3_xfer *x)
{
	if (x->easy) {
		if (l->npool < l->max)
			l->pool[l->npool++] = x->easy;
		else
			curl_easy_cleanup(x->easy);
		x->easy = NULL;
	}
	atomic_fetch_sub(&l->load, 1);
	x->done = true;
	pthread_cond_signal(&x->done_cv);
}

/* Start queued transfers while there is room; under l->lock. */
static void start_queued(struct lane *l)
{
	while (l->head && l->active < l->max) {
		struct s3_xfer *x = l->head;

		l->head = x->next;
		if (!l->head)
			l->tail = NULL;
		if (xfer_start(l, x)) {
			x->transport = CURLE_OUT_OF_MEMORY;
			xfer_done(l, x);
			continue;
		}
		l->active++;
	}
}

static void *lane_thread(void *arg)
{
	struct lane *l = arg;
	struct CURLMsg *m;
	int running, left;

	for (;;) {
		pthread_mutex_lock(&l->lock);
		start_queued(l);
		if (l->stop && !l->active && !l->head) {
			pthread_mutex_unlock(&l->lock);
			break;
		}
		pthread_mutex_unlock(&l->lock);
		curl_multi_perform(l->multi, &running);
		while ((m = curl_multi_info_read(l->multi, &left))) {
			struct s3_xfer *x = NULL;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
					  (char **)&x);
			x->transport = (int)m->data.result;
			curl_easy_getinfo(m->easy_handle,
					  CURLINFO_RESPONSE_CODE, &x->status);
			curl_multi_remove_handle(l->multi, m->easy_handle);
			pthread_mutex_lock(&l->lock);
			l->active--;
			xfer_done(l, x);
			pthread_mutex_unlock(&l->lock);
		}
		curl_multi_poll(l->multi, NULL, 0, POLL_MS, NULL);
	}
	return NULL;
}

/* Stop l's thread (if it runs) and free what l holds. */
static void lane_close(struct lane *l)
{
	if (l->started) {
		pthread_mutex_lock(&l->lock);
		l->stop = true;
		pthread_mutex_unlock(&l->lock);
		curl_multi_wakeup(l->multi);
		pthread_join(l->thread, NULL);
		pthread_mutex_destroy(&l->lock);
	}
	while (l->npool)
		curl_easy_cleanup(l->pool[--l->npool]);
	if (l->multi)
		curl_multi_cleanup(l->multi);
	free(l->pool);
}

/* Set up l for at most max transfers at once and start its thread. */
static int lane_open(struct lane *l, int max)
{
	int err;

	l->max = max;
	l->pool = calloc((size_t)max, sizeof(*l->pool));
	l->multi = curl_multi_init();
	if (!l->pool || !l->multi)
		return -ENOMEM;
	curl_multi_setopt(l->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)max);
	curl_multi_setopt(l->multi, CURLMOPT_MAXCONNECTS, (long)max);
	atomic_init(&l->load, 0);
	pthread_mutex_init(&l->lock, NULL);
	err = -pthread_create(&l->thread, NULL, lane_thread, l);
	if (err) {
		pthread_mutex_destroy(&l->lock);
		return err;
	}
	pthread_setname_np(l->thread, "s3-lane");
	l->started = true;
	return 0;
}

int s3_http_open(int max_requests, struct s3_http **out)
{
	struct s3_http *h;
	int n, err = 0;

	if (max_requests < 1)
		return -EINVAL;
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return -EIO;
	n = max_requests < LANES_MAX ? max_requests : LANES_MAX;
	h = calloc(1, sizeof(*h) + (size_t)n * sizeof(h->lanes[0]));
	if (!h)
		return -ENOMEM;
	/* The lanes share max_requests, the first ones taking the rest. */
	for (int i = 0; i < n && !err; i++) {
		err = lane_open(&h->lanes[i],
				max_requests / n + (i < max_requests % n));
		h->nlanes = i + 1;
	}
	if (err) {
		s3_http_close(h);
		return err;
	}
	*out = h;
	return 0;
}

void s3_http_close(struct s3_http *h)
{
	if (!h)
		return;
	for (int i = 0; i < h->nlanes; i++)
		lane_close(&h->lanes[i]);
	free(h);
}

/* The lane with the fewest transfers running or queued. */
static struct lane *lane_pick(struct s3_http *h)
{
	struct lane *best = &h->lanes[0];
	int least = atomic_load(&best->load);

	for (int i = 1; i < h->nlanes && least; i++) {
		int load = atomic_load(&h->lanes[i].load);

		if (load < least) {
			least = load;
			best = &h->lanes[i];
		}
	}
	return best;
}

int s3_http_run(struct s3_http *h, struct s3_xfer *x)
{
	struct lane *l = lane_pick(h);

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
	atomic_fetch_add(&l->load, 1);
	pthread_mutex_lock(&l->lock);
	if (l->tail)
		l->tail->next = x;
	else
		l->head = x;
	l->tail = x;
	pthread_mutex_unlock(&l->lock);
	curl_multi_wakeup(l->multi);
	pthread_mutex_lock(&l->lock);
	while (!x->done)
		pthread_cond_wait(&x->done_cv, &l->lock);
	pthread_mutex_unlock(&l->lock);
	pthread_cond_destroy(&x->done_cv);
	return 0;
}
