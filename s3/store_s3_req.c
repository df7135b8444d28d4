/*
 * s3/store_s3_req.c - the S3 backend's one request to S3: built, signed
 * with SigV4 in the calling thread, handed to an I/O thread (s3/http.c),
 * and retried here: s3_do is the one place that decides what is retried
 * (s3_err_retryable, errmap.c), with exponential backoff and jitter within
 * RETRY_TRIES tries and RETRY_BUDGET_MS. Every request we send is
 * idempotent (a PUT body is re-read from its buffer or fd on each try), so
 * all of them may be retried; the one whose retry can see its own success,
 * CompleteMultipartUpload, checks for it (store_s3_put.c).
 */
#include "store_s3_int.h"
#include "buf.h"
#include "creds.h"
#include "errmap.h"
#include "http.h"
#include "sign.h"
#include "xml.h"
#include "common/log.h"
#include "metrics/metrics.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define RETRY_TRIES 6
#define RETRY_BUDGET_MS 20000
#define RETRY_BASE_MS 100
#define RETRY_CAP_MS 5000
#define EMPTY_SHA256 \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

void s3_req_hdr(struct req *r, const char *name, const char *value)
{
	if (r->nh < HDRS_MAX)
		r->hdrs[r->nh++] = (struct s3_kv){ name, value };
}

void s3_req_query(struct req *r, const char *name, const char *value)
{
	if (r->nq < QUERY_MAX)
		r->query[r->nq++] = (struct s3_kv){ name, value };
}

void s3_hdr_copy(char *dst, size_t cap, const char *v, size_t vlen)
{
	if (vlen >= cap)
		vlen = cap - 1;
	memcpy(dst, v, vlen);
	dst[vlen] = '\0';
}

static bool hdr_is(const char *name, size_t nlen, const char *want)
{
	return strlen(want) == nlen && strncasecmp(name, want, nlen) == 0;
}

/* Seconds of an HTTP date ("Wed, 21 Oct 2015 07:28:00 GMT"), or 0. */
static int64_t http_date(const char *v, size_t vlen)
{
	char buf[64];
	time_t t;

	s3_hdr_copy(buf, sizeof(buf), v, vlen);
	t = curl_getdate(buf, NULL);
	return t < 0 ? 0 : (int64_t)t;
}

static void on_header(void *arg, const char *name, size_t nlen, const char *v,
		      size_t vlen)
{
	struct resp_hdrs *rh = arg;

	if (hdr_is(name, nlen, "etag")) {
		if (vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"') {
			v++;
			vlen -= 2;
		}
		if (vlen < STORE_ETAG_MAX)
			s3_hdr_copy(rh->etag, sizeof(rh->etag), v, vlen);
	} else if (hdr_is(name, nlen, "content-length")) {
		char buf[24], *end;

		s3_hdr_copy(buf, sizeof(buf), v, vlen);
		rh->length = strtoull(buf, &end, 10);
		rh->has_length = end != buf && !*end;
	} else if (hdr_is(name, nlen, "last-modified")) {
		rh->last_modified = http_date(v, vlen);
	} else if (hdr_is(name, nlen, "date")) {
		rh->date = http_date(v, vlen);
	} else if (hdr_is(name, nlen, "x-amz-meta-mode")) {
		s3_hdr_copy(rh->mode, sizeof(rh->mode), v, vlen);
	} else if (hdr_is(name, nlen, "x-amz-meta-uid")) {
		s3_hdr_copy(rh->uid, sizeof(rh->uid), v, vlen);
	} else if (hdr_is(name, nlen, "x-amz-meta-gid")) {
		s3_hdr_copy(rh->gid, sizeof(rh->gid), v, vlen);
	} else if (hdr_is(name, nlen, "x-amz-meta-mtime")) {
		s3_hdr_copy(rh->mtime, sizeof(rh->mtime), v, vlen);
	} else if (hdr_is(name, nlen, "x-amz-meta-mapfs-symlink")) {
		s3_hdr_copy(rh->symlink, sizeof(rh->symlink), v, vlen);
	} else if (hdr_is(name, nlen, "x-amz-meta-rdev")) {
		s3_hdr_copy(rh->rdev, sizeof(rh->rdev), v, vlen);
	} else if (hdr_is(name, nlen, "x-amz-meta-mapfs-wid")) {
		s3_hdr_copy(rh->wid, sizeof(rh->wid), v, vlen);
	} else if (hdr_is(name, nlen, "x-amz-meta-mapfs-link")) {
		s3_hdr_copy(rh->link, sizeof(rh->link), v, vlen);
	}
}

/* The encoded object path (canonical URI) of store key key, or of the
 * bucket when key is NULL. */
static void object_uri(const struct store_s3 *s, const char *key,
		       struct s3_buf *b)
{
	s3_buf_str(b, s->path);
	if (!key) {
		if (!*s->path)
			s3_buf_str(b, "/");
		return;
	}
	s3_buf_str(b, "/");
	s3_buf_uri(b, s->prefix, true);
	s3_buf_uri(b, key, true);
}

int64_t s3_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Build, sign and run r once; x receives the transfer. */
static int req_once(struct store_s3 *s, struct req *r, struct s3_xfer *x)
{
	struct s3_kv all[HDRS_MAX + 4];
	struct s3_buf uri = { 0 }, url = { 0 }, line = { 0 };
	struct s3_sign_out so = { 0 };
	struct s3_creds cr = { 0 };
	struct curl_slist *sl = NULL, *tmp;
	char date[S3_AMZ_DATE_LEN], hash[S3_SHA256_HEX];
	const char *payload = EMPTY_SHA256;
	size_t n = 0, i;
	int err;

	err = s3_creds_get(s->creds, &cr);
	if (err)
		return err;
	if (r->body == S3_BODY_MEM) {
		err = s3_sha256_hex(r->mem, r->len, hash);
		if (err)
			goto out;
		payload = hash;
	} else if (r->body == S3_BODY_FD) {
		/* Hashing would read the file twice; TLS guards the bytes. */
		payload = S3_UNSIGNED_PAYLOAD;
	}
	s3_amz_date((long long)time(NULL), date);
	all[n++] = (struct s3_kv){ "host", s->host };
	all[n++] = (struct s3_kv){ "x-amz-date", date };
	all[n++] = (struct s3_kv){ "x-amz-content-sha256", payload };
	if (cr.token)
		all[n++] = (struct s3_kv){ "x-amz-security-token", cr.token };
	for (i = 0; i < r->nh; i++)
		all[n++] = r->hdrs[i];
	object_uri(s, r->key, &uri);
	err = s3_buf_err(&uri);
	if (err)
		goto out;
	err = s3_sign(
		&(struct s3_sign_in){
			.method = r->method,
			.uri = uri.p,
			.query = r->query,
			.nquery = r->nq,
			.headers = all,
			.nheaders = n,
			.payload_hash = payload,
			.amz_date = date,
			.region = s->region,
			.service = "s3",
			.access_key = cr.access_key,
			.secret_key = cr.secret_key,
		},
		&so);
	if (err)
		goto out;
	s3_buf_fmt(&url, "%s%s%s%s", s->origin, uri.p, so.query.len ? "?" : "",
		   so.query.p);
	/* host goes in as curl would send it; the rest as signed. */
	for (i = 0; i <= n && !err; i++) {
		s3_buf_reset(&line);
		if (i == n)
			s3_buf_fmt(&line, "Authorization: %s", so.authz.p);
		else
			s3_buf_fmt(&line, "%s: %s", all[i].name, all[i].value);
		tmp = s3_buf_err(&line) ? NULL : curl_slist_append(sl, line.p);
		if (!tmp)
			err = -ENOMEM;
		else
			sl = tmp;
	}
	if (!err)
		err = s3_buf_err(&url);
	if (err)
		goto out;
	memset(&r->rh, 0, sizeof(r->rh));
	x->method = r->method;
	x->url = url.p;
	x->headers = sl;
	x->body = r->body;
	x->body_mem = r->mem;
	x->body_fd = r->fd;
	x->body_off = r->off;
	x->body_len = r->body == S3_BODY_NONE ? 0 : r->len;
	x->dst = r->dst;
	x->dst_len = r->dst_len;
	x->dst_skip = r->dst_skip;
	x->sink = r->sink;
	x->sink_arg = r->sink_arg;
	x->on_header = on_header;
	x->header_arg = &r->rh;
	err = s3_http_run(s->http, x);
out:
	if (line.p)
		memset(line.p, 0, line.cap);
	s3_buf_free(&line);
	/* The list holds the session token: wipe before freeing. */
	for (tmp = sl; tmp; tmp = tmp->next)
		memset(tmp->data, 0, strlen(tmp->data));
	curl_slist_free_all(sl);
	s3_buf_free(&url);
	s3_buf_free(&uri);
	s3_sign_out_free(&so);
	s3_creds_free(&cr);
	return err;
}

/* The errno of a finished transfer; fills r->status and r->code. */
static int req_result(struct req *r, const struct s3_xfer *x)
{
	char msg[S3_XML_MSG_MAX];
	bool ok = x->status >= 200 && x->status < 300;

	r->status = x->status;
	r->code[0] = '\0';
	if (x->read_err)
		return x->read_err;
	if (x->sink_err)
		return x->sink_err;
	if (!x->transport && x->resp.len && (!ok || r->error_in_200))
		s3_xml_error(x->resp.p, x->resp.len, r->code, msg);
	return s3_errmap(x->status, r->code, x->transport);
}

/* Sleep before try number `tries` (1-based): exponential, half jittered. */
static void backoff(int tries, unsigned *seed)
{
	int64_t cap = RETRY_BASE_MS << (tries - 1);
	struct timespec ts;

	if (cap > RETRY_CAP_MS)
		cap = RETRY_CAP_MS;
	cap = cap / 2 + rand_r(seed) % (cap / 2 + 1);
	ts.tv_sec = cap / 1000;
	ts.tv_nsec = (cap % 1000) * 1000000;
	nanosleep(&ts, NULL);
}

/* See store_s3_int.h. */
int s3_do(struct store_s3 *s, struct req *r)
{
	int64_t start = s3_now_ms();
	unsigned seed = (unsigned)start ^ (unsigned)(uintptr_t)r;
	struct s3_xfer x = { 0 };
	int err;

	for (r->tries = 1;; r->tries++) {
		metrics_s3_try(r->method, r->tries > 1);
		/*
		 * A stalled server must not hold a try past the budget: the
		 * caller (an NFS call waiting on a fetch) is owed its JUKEBOX
		 * in time.  A transfer that moves is not cut.
		 */
		int64_t left_ms = RETRY_BUDGET_MS - (s3_now_ms() - start);

		x.stall_s = left_ms > 1000 ? (long)(left_ms / 1000) : 1;
		err = req_once(s, r, &x);
		if (!err)
			err = req_result(r, &x);
		if (err == -EAGAIN && strcmp(r->code, "ExpiredToken") == 0)
			s3_creds_expire(s->creds);
		if (!s3_err_retryable(err) || x.sink_err ||
		    r->tries >= RETRY_TRIES ||
		    s3_now_ms() - start > RETRY_BUDGET_MS)
			break;
		log_debug("s3: %s %s: %s (%ld %s), retrying", r->method,
			  r->key ? r->key : "(bucket)", strerror(-err),
			  r->status, r->code);
		backoff(r->tries, &seed);
	}
	if (err && err != -ENOENT && err != -ERANGE)
		log_debug("s3: %s %s: %s (HTTP %ld %s, curl %d, %d tries)",
			  r->method, r->key ? r->key : "(bucket)",
			  strerror(-err), r->status, r->code, x.transport,
			  r->tries);
	r->got = r->sink ? x.sink_done : x.dst_got;
	s3_buf_free(&r->resp);
	r->resp = x.resp;
	return err;
}

void s3_req_free(struct req *r)
{
	s3_buf_free(&r->resp);
}
