/*
 * s3/store_s3.c - the S3 backend ("s3://bucket[/prefix]").
 *
 * Store key K is object PREFIX/K.  Every call signs its request with
 * SigV4 (s3/sign.c) in the calling thread, hands it to the I/O thread
 * (s3/http.c) and waits; failures of the EAGAIN class are retried here
 * with exponential backoff and jitter, within RETRY_TRIES tries and
 * RETRY_BUDGET_MS.  Every request we send is idempotent (a PUT body is
 * re-read from its buffer or fd on each try), so all of them may be
 * retried; the one whose retry can see its own success,
 * CompleteMultipartUpload, checks for it.
 *
 * Metadata uses the names s3fs and rclone read: x-amz-meta-mode (decimal,
 * with the S_IFMT bits as given), x-amz-meta-uid, x-amz-meta-gid and
 * x-amz-meta-mtime, as decimal seconds with up to nine fraction digits
 * ("1700000000.123456789"; "1700000000" when whole, which is what s3fs
 * writes; s3fs reads the whole seconds, rclone the fraction too).  A
 * symlink carries x-amz-meta-mapfs-symlink: 1 and its mode's S_IFLNK; an
 * object with either (s3fs marks symlinks by mode alone) reads back as a
 * symlink.  Directory markers are sent as application/x-directory like
 * s3fs's.  A device carries its number in x-amz-meta-rdev (decimal
 * dev_t), and FIFOs, sockets and devices their type in the mode's S_IFMT
 * bits, as s3fs stores them.
 *
 * Addressing: virtual-hosted (bucket.host) unless --s3-path-style, or the
 * bucket name is not a DNS label (dots, capitals, '_'), or the endpoint
 * host is an IP address or "localhost", where only path-style can work.
 *
 * The struct is written only in store_open, so every call is thread-safe.
 */
#include "s3/store_int.h"
#include "s3/buf.h"
#include "s3/creds.h"
#include "s3/errmap.h"
#include "s3/http.h"
#include "s3/sign.h"
#include "s3/xml.h"
#include "common/log.h"
#include "metrics/metrics.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdatomic.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define S3_SCHEME "s3://"
#define MAX_REQUESTS_DEFAULT 64
#define LIST_MAX 1000        /* S3's page size limit */
#define DELETE_BATCH 1000    /* S3's DeleteObjects limit */
#define MPU_PARTS_MAX 10000
#define COPY_MAX (5ull << 30) /* CopyObject's limit; above: part copies */
#define COPY_PART (1ull << 30)
#define MPU_STALE_S (24 * 3600) /* our uploads older than this are debris */
/*
 * One PUT up to this size when the server is on this machine: there is
 * no per-connection bandwidth for parallel parts to add up, they only
 * share the server's CPUs, and completing a multipart upload costs some
 * servers a second pass over the bytes (s3rver copies every part into
 * the object: a 256 MiB file took 2.9 s as 8 parallel parts, 1.5 s as
 * one PUT here; radosgw: one 1 GiB PUT 155-200 MB/s, 8 parallel PUTs
 * 129 MiB/s, see ../shared/s3/README.md and bench/RESULTS.md).
 */
#define LOOPBACK_PUT_MAX (1ull << 30)
#define RETRY_TRIES 6
#define RETRY_BUDGET_MS 20000
#define RETRY_BASE_MS 100
#define RETRY_CAP_MS 5000
#define HDRS_MAX 16
#define QUERY_MAX 8
#define EMPTY_SHA256 \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct store_s3 {
	struct store base;
	struct s3_http *http;
	struct s3_cred_src *creds;
	char *bucket;
	char *prefix;   /* "" or "some/prefix/" */
	char *region;
	char *origin;   /* "https://host[:port]" the URLs start with */
	char *host;     /* the Host header */
	char *path;     /* encoded path before the key: "" or "/bucket" */
	uint64_t put_max; /* store_put_max() */
	/* The server compares If-Match with the ETag unquoted (radosgw 16.2
	 * on PUT): learnt from a 412 of the version it holds. */
	_Atomic bool match_bare;
};

static struct store_s3 *s3_of(struct store *st)
{
	return (struct store_s3 *)st;
}

/* ---- one request ------------------------------------------------------- */

/* What the response headers said; filled in the I/O thread. */
struct resp_hdrs {
	char etag[STORE_ETAG_MAX];
	bool has_length;
	uint64_t length;
	int64_t last_modified, date; /* seconds; 0 = absent */
	char mode[24], uid[24], gid[24], mtime[40], symlink[8], rdev[24];
	char wid[STORE_WID_MAX]; /* x-amz-meta-mapfs-wid */
	char link[STORE_LINK_MAX]; /* x-amz-meta-mapfs-link */
};

struct req {
	const char *method;
	const char *key;  /* store key; NULL for a bucket-level request */
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

static void req_hdr(struct req *r, const char *name, const char *value)
{
	if (r->nh < HDRS_MAX)
		r->hdrs[r->nh++] = (struct s3_kv){ name, value };
}

static void req_query(struct req *r, const char *name, const char *value)
{
	if (r->nq < QUERY_MAX)
		r->query[r->nq++] = (struct s3_kv){ name, value };
}

static void hdr_copy(char *dst, size_t cap, const char *v, size_t vlen)
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

	hdr_copy(buf, sizeof(buf), v, vlen);
	t = curl_getdate(buf, NULL);
	return t < 0 ? 0 : (int64_t)t;
}

static void on_header(void *arg, const char *name, size_t nlen,
		      const char *v, size_t vlen)
{
	struct resp_hdrs *rh = arg;

	if (hdr_is(name, nlen, "etag")) {
		if (vlen >= 2 && v[0] == '"' && v[vlen - 1] == '"') {
			v++;
			vlen -= 2;
		}
		if (vlen < STORE_ETAG_MAX)
			hdr_copy(rh->etag, sizeof(rh->etag), v, vlen);
	} else if (hdr_is(name, nlen, "content-length")) {
		char buf[24], *end;

		hdr_copy(buf, sizeof(buf), v, vlen);
		rh->length = strtoull(buf, &end, 10);
		rh->has_length = end != buf && !*end;
	} else if (hdr_is(name, nlen, "last-modified")) {
		rh->last_modified = http_date(v, vlen);
	} else if (hdr_is(name, nlen, "date")) {
		rh->date = http_date(v, vlen);
	} else if (hdr_is(name, nlen, "x-amz-meta-mode")) {
		hdr_copy(rh->mode, sizeof(rh->mode), v, vlen);
	} else if (hdr_is(name, nlen, "x-amz-meta-uid")) {
		hdr_copy(rh->uid, sizeof(rh->uid), v, vlen);
	} else if (hdr_is(name, nlen, "x-amz-meta-gid")) {
		hdr_copy(rh->gid, sizeof(rh->gid), v, vlen);
	} else if (hdr_is(name, nlen, "x-amz-meta-mtime")) {
		hdr_copy(rh->mtime, sizeof(rh->mtime), v, vlen);
	} else if (hdr_is(name, nlen, "x-amz-meta-mapfs-symlink")) {
		hdr_copy(rh->symlink, sizeof(rh->symlink), v, vlen);
	} else if (hdr_is(name, nlen, "x-amz-meta-rdev")) {
		hdr_copy(rh->rdev, sizeof(rh->rdev), v, vlen);
	} else if (hdr_is(name, nlen, "x-amz-meta-mapfs-wid")) {
		hdr_copy(rh->wid, sizeof(rh->wid), v, vlen);
	} else if (hdr_is(name, nlen, "x-amz-meta-mapfs-link")) {
		hdr_copy(rh->link, sizeof(rh->link), v, vlen);
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

static int64_t now_ms(void)
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
	err = s3_sign(&(struct s3_sign_in){
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

/*
 * Run r with retries; 0 or -errno.  The response body (error documents
 * excepted) is left in r->resp for the caller, who frees it.
 */
static int s3_do(struct store_s3 *s, struct req *r)
{
	int64_t start = now_ms();
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
		int64_t left_ms = RETRY_BUDGET_MS - (now_ms() - start);

		x.stall_s = left_ms > 1000 ? (long)(left_ms / 1000) : 1;
		err = req_once(s, r, &x);
		if (!err)
			err = req_result(r, &x);
		if (err == -EAGAIN && strcmp(r->code, "ExpiredToken") == 0)
			s3_creds_expire(s->creds);
		if (!s3_err_retryable(err) || x.sink_err ||
		    r->tries >= RETRY_TRIES ||
		    now_ms() - start > RETRY_BUDGET_MS)
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

static void req_free(struct req *r)
{
	s3_buf_free(&r->resp);
}

/* ---- keys and metadata -------------------------------------------------- */

/* The same keys as the file backend accepts, so both backends agree. */
static int key_check(const char *key)
{
	size_t len;
	const char *c;

	if (!key)
		return -EINVAL;
	len = strnlen(key, STORE_KEY_MAX + 1);
	if (len == 0 || len > STORE_KEY_MAX || key[0] == '/')
		return -EINVAL;
	for (c = key; *c;) {
		const char *slash = strchr(c, '/');
		size_t n = slash ? (size_t)(slash - c) : strlen(c);

		if (n == 0 || (n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.'))
			return -EINVAL;
		if (!slash)
			break;
		c = slash + 1;
	}
	return 0;
}

static bool is_marker(const char *key)
{
	return key[strlen(key) - 1] == '/';
}

/* Decimal seconds with the fraction trimmed: exact for every ns value. */
static void mtime_fmt(int64_t ns, char *out, size_t cap)
{
	uint64_t a = ns < 0 ? -(uint64_t)ns : (uint64_t)ns;
	uint64_t sec = a / 1000000000u, frac = a % 1000000000u;
	int digits = 9;

	if (!frac) {
		snprintf(out, cap, "%s%" PRIu64, ns < 0 ? "-" : "", sec);
		return;
	}
	while (frac % 10 == 0) {
		frac /= 10;
		digits--;
	}
	snprintf(out, cap, "%s%" PRIu64 ".%0*" PRIu64, ns < 0 ? "-" : "", sec,
		 digits, frac);
}

static bool mtime_parse(const char *s, int64_t *ns)
{
	bool neg = *s == '-';
	uint64_t sec = 0, frac = 0;
	int digits = 0;

	if (neg)
		s++;
	if (*s < '0' || *s > '9')
		return false;
	for (; *s >= '0' && *s <= '9'; s++) {
		sec = sec * 10 + (uint64_t)(*s - '0');
		if (sec > INT64_MAX / 1000000000 - 1)
			return false;
	}
	if (*s == '.') {
		for (s++; *s >= '0' && *s <= '9'; s++, digits++)
			if (digits < 9)
				frac = frac * 10 + (uint64_t)(*s - '0');
		for (; digits < 9; digits++)
			frac *= 10;
	}
	if (*s)
		return false;
	*ns = (int64_t)(sec * 1000000000u + frac);
	if (neg)
		*ns = -*ns;
	return true;
}

/* A decimal of at most max; false if s is anything else. */
static bool dec_parse(const char *s, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return false;
	*out = v;
	return true;
}

static bool u32_parse(const char *s, uint32_t *out)
{
	uint64_t v;

	if (!dec_parse(s, UINT32_MAX, &v))
		return false;
	*out = (uint32_t)v;
	return true;
}

/* Headers for m; bufs holds their text and lives as long as r. */
struct meta_bufs {
	char mode[16], uid[16], gid[16], mtime[32], rdev[24];
};

static void meta_headers(struct req *r, const char *key,
			 const struct store_meta *m, struct meta_bufs *b)
{
	req_hdr(r, "content-type",
		is_marker(key) ? "application/x-directory" :
				 "application/octet-stream");
	if (!m)
		return;
	if (m->has_mode) {
		uint32_t mode = m->mode;

		if (m->symlink && !(mode & S_IFMT))
			mode |= S_IFLNK;
		snprintf(b->mode, sizeof(b->mode), "%" PRIu32, mode);
		req_hdr(r, "x-amz-meta-mode", b->mode);
	}
	if (m->has_uid) {
		snprintf(b->uid, sizeof(b->uid), "%" PRIu32, m->uid);
		req_hdr(r, "x-amz-meta-uid", b->uid);
	}
	if (m->has_gid) {
		snprintf(b->gid, sizeof(b->gid), "%" PRIu32, m->gid);
		req_hdr(r, "x-amz-meta-gid", b->gid);
	}
	if (m->has_mtime) {
		mtime_fmt(m->mtime_ns, b->mtime, sizeof(b->mtime));
		req_hdr(r, "x-amz-meta-mtime", b->mtime);
	}
	if (m->symlink)
		req_hdr(r, "x-amz-meta-mapfs-symlink", "1");
	if (m->has_rdev) {
		snprintf(b->rdev, sizeof(b->rdev), "%" PRIu64, m->rdev);
		req_hdr(r, "x-amz-meta-rdev", b->rdev);
	}
	if (m->wid[0])
		req_hdr(r, "x-amz-meta-mapfs-wid", m->wid);
	if (m->link[0])
		req_hdr(r, "x-amz-meta-mapfs-link", m->link);
}

/* Metadata from response headers; malformed fields read as absent. */
static void meta_read(const struct resp_hdrs *rh, struct store_meta *m)
{
	memset(m, 0, sizeof(*m));
	m->has_mode = rh->mode[0] && u32_parse(rh->mode, &m->mode);
	if (!m->has_mode)
		m->mode = 0;
	m->has_uid = rh->uid[0] && u32_parse(rh->uid, &m->uid);
	if (!m->has_uid)
		m->uid = 0;
	m->has_gid = rh->gid[0] && u32_parse(rh->gid, &m->gid);
	if (!m->has_gid)
		m->gid = 0;
	m->has_mtime = rh->mtime[0] && mtime_parse(rh->mtime, &m->mtime_ns);
	if (!m->has_mtime)
		m->mtime_ns = 0;
	m->has_rdev = rh->rdev[0] && dec_parse(rh->rdev, UINT64_MAX, &m->rdev);
	if (!m->has_rdev)
		m->rdev = 0;
	m->symlink = strcmp(rh->symlink, "1") == 0 ||
		     strcasecmp(rh->symlink, "true") == 0 ||
		     (m->has_mode && S_ISLNK(m->mode));
	memcpy(m->wid, rh->wid, sizeof(m->wid));
	memcpy(m->link, rh->link, sizeof(m->link));
}

/* The info a write reports: its size, the new ETag, the server's time. */
static void write_info(const struct req *r, uint64_t size,
		       const struct store_meta *meta, struct store_info *out)
{
	if (!out)
		return;
	memset(out, 0, sizeof(*out));
	out->size = size;
	snprintf(out->etag, sizeof(out->etag), "%s", r->rh.etag);
	out->last_modified_ns = (r->rh.date ? r->rh.date : (int64_t)time(NULL)) *
				1000000000;
	if (meta)
		out->meta = *meta;
}

/* "/bucket/prefix+key", encoded, for x-amz-copy-source. */
static char *copy_source(const struct store_s3 *s, const char *key)
{
	struct s3_buf b = { 0 };

	s3_buf_str(&b, "/");
	s3_buf_uri(&b, s->bucket, false);
	s3_buf_str(&b, "/");
	s3_buf_uri(&b, s->prefix, true);
	s3_buf_uri(&b, key, true);
	return s3_buf_take(&b);
}

/* ---- objects ------------------------------------------------------------ */

static int s3_head(struct store *st, const char *key, struct store_info *out)
{
	struct req r = { .method = "HEAD", .key = key };
	int err = key_check(key);

	if (err)
		return err;
	err = s3_do(s3_of(st), &r);
	if (!err) {
		memset(out, 0, sizeof(*out));
		out->size = r.rh.has_length ? r.rh.length : 0;
		snprintf(out->etag, sizeof(out->etag), "%s", r.rh.etag);
		out->last_modified_ns = r.rh.last_modified * 1000000000;
		meta_read(&r.rh, &out->meta);
	}
	req_free(&r);
	return err;
}

/* ---- conditional writes ------------------------------------------------- */

/* cond's headers on r (none for NULL); buf keeps the If-Match value. */
static void cond_headers(struct store_s3 *s, struct req *r,
			 const struct store_cond *cond,
			 char buf[STORE_ETAG_MAX + 2])
{
	if (!cond || cond->kind == STORE_IF_ANY)
		return;
	if (cond->kind == STORE_IF_NONE) {
		req_hdr(r, "if-none-match", "*");
		return;
	}
	if (atomic_load(&s->match_bare))
		snprintf(buf, STORE_ETAG_MAX + 2, "%s", cond->etag);
	else
		snprintf(buf, STORE_ETAG_MAX + 2, "\"%s\"", cond->etag);
	req_hdr(r, "if-match", buf);
}

/*
 * A conditional write of key was answered 412 (-ESTALE): what it means,
 * from a HEAD.  The object carries cond's write id: our own write, from
 * a try whose answer was lost (then 0, *out from the HEAD).  -ENOENT for
 * an If-Match of a key that is gone; *again (with -ESTALE) when the
 * object is the very version If-Match named, so the server compared the
 * quotes too: from now on it is sent bare.  Else -ESTALE (someone else
 * wrote it) or the HEAD's error.
 */
static int cond_settle(struct store *st, const char *key,
		       const struct store_cond *cond, struct store_info *out,
		       bool *again)
{
	struct store_s3 *s = s3_of(st);
	struct store_info info;
	int err = s3_head(st, key, &info);

	*again = false;
	if (err == -ENOENT)
		return cond->kind == STORE_IF_MATCH ? -ENOENT : -ESTALE;
	if (err)
		return err;
	if (cond->wid[0] && !strcmp(info.meta.wid, cond->wid)) {
		if (out)
			*out = info;
		return 0;
	}
	if (cond->kind == STORE_IF_MATCH && !strcmp(info.etag, cond->etag) &&
	    !atomic_exchange(&s->match_bare, true)) {
		log_info("s3: %s compares If-Match without the quotes; sending "
			 "it bare", s->origin);
		*again = true;
	}
	return -ESTALE;
}

static int s3_get(struct store *st, const char *key, uint64_t off,
		  size_t len, void *buf, size_t *got)
{
	struct req r = { .method = "GET", .key = key };
	char range[64];
	int err = key_check(key);

	*got = 0;
	if (err)
		return err;
	if (!len) {
		/* No byte range can be empty; a HEAD still says ENOENT. */
		struct store_info info;

		return s3_head(st, key, &info);
	}
	snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, off,
		 off + len - 1);
	req_hdr(&r, "range", range);
	r.dst = buf;
	r.dst_len = len;
	r.dst_skip = off;
	err = s3_do(s3_of(st), &r);
	if (!err)
		*got = r.got;
	else if (err == -ERANGE)
		err = 0; /* at or past the end: 0 bytes, as promised */
	req_free(&r);
	return err;
}

/* A pinned GET's sink: bytes only of the version asked for. */
struct pin_sink {
	store_sink_fn sink;
	void *arg;
	const char *want;          /* the ETag pinned */
	const struct resp_hdrs *rh; /* the answer's, filled before the body */
};

/* A server that ignores If-Match on GET (s3rver) still names the ETag
 * it answers with: another one is refused before any byte goes on. */
static int pin_sink_fn(void *arg, const void *p, size_t n)
{
	struct pin_sink *ps = arg;

	if (ps->rh->etag[0] && strcmp(ps->rh->etag, ps->want))
		return -ESTALE;
	return ps->sink(ps->arg, p, n);
}

static int s3_get_stream(struct store *st, const char *key,
			 const char *if_match, uint64_t off, uint64_t len,
			 store_sink_fn sink, void *arg, uint64_t *got)
{
	struct req r = { .method = "GET", .key = key, .sink = sink,
			 .sink_arg = arg };
	struct pin_sink ps = { sink, arg, if_match, &r.rh };
	char range[64], ifm[STORE_ETAG_MAX + 2];
	int err = key_check(key);

	*got = 0;
	if (err)
		return err;
	if (!len || len > SIZE_MAX) {
		struct store_info info;

		if (len)
			return -EINVAL;
		err = s3_head(st, key, &info);
		return !err && if_match && strcmp(info.etag, if_match) ? -ESTALE
								       : err;
	}
	snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, off,
		 off + len - 1);
	req_hdr(&r, "range", range);
	if (if_match) {
		/* A GET's If-Match is compared as HTTP says: quoted. */
		snprintf(ifm, sizeof(ifm), "\"%s\"", if_match);
		req_hdr(&r, "if-match", ifm);
		r.sink = pin_sink_fn;
		r.sink_arg = &ps;
	}
	r.dst_len = (size_t)len;
	r.dst_skip = off;
	err = s3_do(s3_of(st), &r);
	*got = r.got;
	if (err == -ERANGE)
		err = 0; /* at or past the end: 0 bytes, as promised */
	req_free(&r);
	return err;
}

/*
 * PUT of r's body (set up by the caller) with meta, if cond holds.  A
 * retry that meets its own earlier success (412) tells it by the write
 * id meta carries (cond_settle).
 */
static int put_common(struct store *st, const char *key, const struct req *body,
		      uint64_t len, const struct store_meta *meta,
		      const struct store_cond *cond, struct store_info *out)
{
	char ifm[STORE_ETAG_MAX + 2];
	bool again = true;
	struct meta_bufs mb;
	int err = key_check(key);

	if (err)
		return err;
	if (is_marker(key) && len)
		return -EINVAL;
	while (again) {
		struct req r = *body;

		again = false;
		r.method = "PUT";
		r.key = key;
		r.len = len;
		meta_headers(&r, key, meta, &mb);
		cond_headers(s3_of(st), &r, cond, ifm);
		err = s3_do(s3_of(st), &r);
		if (!err)
			write_info(&r, len, meta, out);
		req_free(&r);
		if (err == -ESTALE && cond)
			err = cond_settle(st, key, cond, out, &again);
	}
	return err;
}

static int s3_put(struct store *st, const char *key, const void *buf,
		  size_t len, const struct store_meta *meta,
		  const struct store_cond *cond, struct store_info *out)
{
	struct req r = { .body = S3_BODY_MEM, .mem = len ? buf : "" };

	return put_common(st, key, &r, len, meta, cond, out);
}

static int s3_put_fd(struct store *st, const char *key, int fd,
		     uint64_t len, const struct store_meta *meta,
		     const struct store_cond *cond, struct store_info *out)
{
	struct req r = { .body = S3_BODY_FD, .fd = fd };

	return put_common(st, key, &r, len, meta, cond, out);
}

static int s3_del(struct store *st, const char *key)
{
	struct req r = { .method = "DELETE", .key = key };
	int err = key_check(key);

	if (err)
		return err;
	err = s3_do(s3_of(st), &r);
	req_free(&r);
	return err == -ENOENT ? 0 : err;
}

/* One DeleteObjects batch.  *fallback: the server cannot do batches. */
static int delete_batch(struct store_s3 *s, const char *const *keys,
			size_t n, bool *fallback)
{
	struct s3_buf body = { 0 }, full = { 0 };
	char **pk = calloc(n, sizeof(*pk)), md5[32];
	char code[S3_XML_CODE_MAX], key[STORE_KEY_MAX + 1];
	struct req r = { .method = "POST", .body = S3_BODY_MEM };
	size_t i;
	int err = 0, rc;

	if (!pk)
		return -ENOMEM;
	for (i = 0; i < n && !err; i++) {
		s3_buf_reset(&full);
		s3_buf_str(&full, s->prefix);
		s3_buf_str(&full, keys[i]);
		pk[i] = s3_buf_take(&full);
		if (!pk[i])
			err = -ENOMEM;
	}
	if (err)
		goto out_free;
	s3_xml_delete_body(&body, (const char *const *)pk, n);
	err = s3_buf_err(&body);
	if (!err)
		err = s3_md5_b64(body.p, body.len, md5);
	if (err)
		goto out_free;
	req_query(&r, "delete", NULL);
	req_hdr(&r, "content-md5", md5);
	req_hdr(&r, "content-type", "application/xml");
	r.mem = body.p;
	r.len = body.len;
	err = s3_do(s, &r);
	/* s3rver answers 500 for some batches; single deletes work there. */
	if (err == -ENOTSUP || (err == -EAGAIN && r.status == 500)) {
		*fallback = true;
		err = 0;
		goto out_free;
	}
	if (err)
		goto out_free;
	rc = s3_xml_delete_result(r.resp.p, r.resp.len, code, key, sizeof(key));
	if (rc < 0) {
		err = rc;
	} else if (rc > 0 && strcmp(code, "NoSuchKey")) {
		log_debug("s3: DeleteObjects: %s failed: %s", key, code);
		err = s3_errmap(400, code, 0);
	}
out_free:
	req_free(&r);
	s3_buf_free(&body);
	for (i = 0; i < n; i++)
		free(pk[i]);
	free(pk);
	return err;
}

static int s3_del_many(struct store *st, const char *const *keys, size_t n)
{
	struct store_s3 *s = s3_of(st);
	int first = 0, err;
	size_t i, at;

	for (i = 0; i < n; i++)
		if (key_check(keys[i]))
			return -EINVAL;
	for (at = 0; at < n; at += DELETE_BATCH) {
		size_t cnt = n - at < DELETE_BATCH ? n - at : DELETE_BATCH;
		bool fallback = false;

		err = delete_batch(s, keys + at, cnt, &fallback);
		/* Like DeleteObjects: every key is tried, the first error kept. */
		for (i = 0; fallback && i < cnt; i++) {
			err = s3_del(st, keys[at + i]);
			if (err && !first)
				first = err;
		}
		if (err && !first)
			first = err;
	}
	return first;
}

/* ---- listing ------------------------------------------------------------ */

static int s3_list(struct store *st, const char *prefix, char delimiter,
		   const char *token, unsigned max_keys, struct store_page *out)
{
	struct store_s3 *s = s3_of(st);
	struct req r = { .method = "GET" };
	struct s3_buf full = { 0 };
	char delim[2] = { delimiter, '\0' }, maxk[16];
	int err;

	memset(out, 0, sizeof(*out));
	if (!prefix || strlen(prefix) > STORE_KEY_MAX)
		return -EINVAL;
	s3_buf_str(&full, s->prefix);
	s3_buf_str(&full, prefix);
	if (s3_buf_err(&full))
		return -ENOMEM;
	if (!max_keys || max_keys > LIST_MAX)
		max_keys = LIST_MAX;
	snprintf(maxk, sizeof(maxk), "%u", max_keys);
	req_query(&r, "list-type", "2");
	req_query(&r, "prefix", full.p);
	req_query(&r, "max-keys", maxk);
	/* Keys may hold bytes XML 1.0 cannot carry: ask for them encoded. */
	req_query(&r, "encoding-type", "url");
	if (delimiter)
		req_query(&r, "delimiter", delim);
	if (token && *token)
		req_query(&r, "continuation-token", token);
	err = s3_do(s, &r);
	if (!err)
		err = s3_xml_list(r.resp.p, r.resp.len, s->prefix, out);
	req_free(&r);
	s3_buf_free(&full);
	return err;
}

/* ---- multipart ---------------------------------------------------------- */

static bool upload_id_ok(const char *id)
{
	return id && *id && strlen(id) < 1024;
}

static int s3_mpu_create(struct store *st, const char *key,
			 const struct store_meta *meta, char **upload_id)
{
	struct req r = { .method = "POST", .key = key };
	struct meta_bufs mb;
	int err = key_check(key);

	if (err)
		return err;
	req_query(&r, "uploads", NULL);
	meta_headers(&r, key, meta, &mb);
	err = s3_do(s3_of(st), &r);
	if (!err)
		err = s3_xml_upload_id(r.resp.p, r.resp.len, upload_id);
	req_free(&r);
	return err;
}

static int s3_mpu_part(struct store *st, const char *key,
		       const char *upload_id, int partno, int fd, uint64_t off,
		       uint64_t len, char etag[STORE_ETAG_MAX])
{
	struct req r = { .method = "PUT", .key = key, .body = S3_BODY_FD,
			 .fd = fd, .off = off, .len = len };
	char pn[16];
	int err = key_check(key);

	if (err)
		return err;
	if (!upload_id_ok(upload_id) || partno < 1 || partno > MPU_PARTS_MAX)
		return -EINVAL;
	snprintf(pn, sizeof(pn), "%d", partno);
	req_query(&r, "partNumber", pn);
	req_query(&r, "uploadId", upload_id);
	err = s3_do(s3_of(st), &r);
	if (!err && !r.rh.etag[0])
		err = -EIO;
	if (!err)
		snprintf(etag, STORE_ETAG_MAX, "%s", r.rh.etag);
	req_free(&r);
	return err;
}

static int s3_mpu_part_copy(struct store *st, const char *key,
			    const char *upload_id, int partno, const char *src,
			    uint64_t off, uint64_t len,
			    char etag[STORE_ETAG_MAX])
{
	struct req r = { .method = "PUT", .key = key, .error_in_200 = true };
	char pn[16], range[64], *cs;
	int err = key_check(key);

	if (!err)
		err = key_check(src);
	if (err)
		return err;
	if (!upload_id_ok(upload_id) || partno < 1 ||
	    partno > MPU_PARTS_MAX || !len)
		return -EINVAL;
	cs = copy_source(s3_of(st), src);
	if (!cs)
		return -ENOMEM;
	snprintf(pn, sizeof(pn), "%d", partno);
	snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, off,
		 off + len - 1);
	req_query(&r, "partNumber", pn);
	req_query(&r, "uploadId", upload_id);
	req_hdr(&r, "x-amz-copy-source", cs);
	req_hdr(&r, "x-amz-copy-source-range", range);
	err = s3_do(s3_of(st), &r);
	/*
	 * A server without UploadPartCopy may take this for an empty part
	 * upload and answer 200: only a CopyPartResult proves the copy.
	 */
	if (!err && s3_xml_etag(r.resp.p, r.resp.len, "CopyPartResult", etag,
				NULL))
		err = -ENOTSUP;
	req_free(&r);
	free(cs);
	return err;
}

/* ListParts of one part: 0 if the upload exists, -ENOENT if not. */
static int upload_probe(struct store *st, const char *key,
			const char *upload_id)
{
	struct req r = { .method = "GET", .key = key };
	int err;

	req_query(&r, "uploadId", upload_id);
	req_query(&r, "max-parts", "1");
	err = s3_do(s3_of(st), &r);
	req_free(&r);
	return err;
}

/* Did an upload whose Complete was retried complete on an earlier try?
 * Its id is gone and the key is a multipart object of nparts parts. */
static bool mpu_completed(struct store *st, const char *key,
			  const char *upload_id, int nparts)
{
	struct store_info info;
	char suffix[16];
	size_t el, sl;

	if (upload_probe(st, key, upload_id) != -ENOENT ||
	    s3_head(st, key, &info))
		return false;
	snprintf(suffix, sizeof(suffix), "-%d", nparts);
	el = strlen(info.etag);
	sl = strlen(suffix);
	return el > sl && strcmp(info.etag + el - sl, suffix) == 0;
}

static int s3_mpu_complete(struct store *st, const char *key,
			   const char *upload_id, int nparts,
			   char (*etags)[STORE_ETAG_MAX],
			   const struct store_cond *cond,
			   struct store_info *out)
{
	struct s3_buf body = { 0 };
	char etag[STORE_ETAG_MAX], ifm[STORE_ETAG_MAX + 2];
	bool again = true;
	int err = key_check(key);

	if (err)
		return err;
	if (!upload_id_ok(upload_id) || nparts < 1 || nparts > MPU_PARTS_MAX)
		return -EINVAL;
	s3_xml_complete_body(&body, nparts, etags);
	if (s3_buf_err(&body))
		return -ENOMEM;
	while (again) {
		struct req r = { .method = "POST", .key = key,
				 .body = S3_BODY_MEM, .error_in_200 = true };

		again = false;
		req_query(&r, "uploadId", upload_id);
		req_hdr(&r, "content-type", "application/xml");
		cond_headers(s3_of(st), &r, cond, ifm);
		r.mem = body.p;
		r.len = body.len;
		err = s3_do(s3_of(st), &r);
		if (!err)
			err = s3_xml_etag(r.resp.p, r.resp.len,
					  "CompleteMultipartUploadResult", etag,
					  NULL);
		/* radosgw 16.2 answers 500, not NoSuchUpload, for an aborted
		 * upload. */
		if (err == -EAGAIN && r.status == 500 &&
		    upload_probe(st, key, upload_id) == -ENOENT)
			err = -ENOENT;
		/* A retry after a lost answer finds the upload gone (or the
		 * condition false) because it completed: a multipart ETag
		 * ends in "-<parts>". */
		if ((err == -ENOENT || err == -ESTALE) && r.tries > 1 &&
		    mpu_completed(st, key, upload_id, nparts))
			err = 0;
		else if (err == -ESTALE && cond)
			err = cond_settle(st, key, cond, NULL, &again);
		req_free(&r);
	}
	s3_buf_free(&body);
	/* radosgw's answer has an empty ETag and no size: ask HEAD. */
	if (!err && out)
		err = s3_head(st, key, out);
	return err;
}

static int s3_mpu_abort(struct store *st, const char *key,
			const char *upload_id)
{
	struct req r = { .method = "DELETE", .key = key };
	int err = key_check(key);

	if (err)
		return err;
	if (!upload_id_ok(upload_id))
		return -EINVAL;
	req_query(&r, "uploadId", upload_id);
	err = s3_do(s3_of(st), &r);
	req_free(&r);
	return err;
}

/* ---- copy --------------------------------------------------------------- */

/* Copy an object too big for CopyObject as parts of COPY_PART bytes. */
static int copy_multipart(struct store *st, const char *src, const char *dst,
			  const struct store_info *sinfo,
			  const struct store_meta *meta, struct store_info *out)
{
	uint64_t size = sinfo->size;
	int nparts = (int)((size + COPY_PART - 1) / COPY_PART), i;
	char (*etags)[STORE_ETAG_MAX];
	char *id = NULL;
	int err;

	if (nparts > MPU_PARTS_MAX)
		return -EFBIG;
	etags = calloc((size_t)nparts, sizeof(*etags));
	if (!etags)
		return -ENOMEM;
	err = s3_mpu_create(st, dst, meta ? meta : &sinfo->meta, &id);
	for (i = 0; !err && i < nparts; i++) {
		uint64_t off = (uint64_t)i * COPY_PART;
		uint64_t len = size - off < COPY_PART ? size - off : COPY_PART;

		err = s3_mpu_part_copy(st, dst, id, i + 1, src, off, len,
				       etags[i]);
	}
	if (!err)
		err = s3_mpu_complete(st, dst, id, nparts, etags, NULL, out);
	if (err && id)
		s3_mpu_abort(st, dst, id);
	free(id);
	free(etags);
	return err;
}

static int s3_copy(struct store *st, const char *src, const char *dst,
		   const struct store_meta *meta, struct store_info *out)
{
	struct req r = { .method = "PUT", .key = dst, .error_in_200 = true };
	struct store_info sinfo;
	struct meta_bufs mb;
	char etag[STORE_ETAG_MAX], *cs;
	int err = key_check(src);

	if (!err)
		err = key_check(dst);
	if (err)
		return err;
	if (is_marker(src) != is_marker(dst))
		return -EINVAL;
	cs = copy_source(s3_of(st), src);
	if (!cs)
		return -ENOMEM;
	req_hdr(&r, "x-amz-copy-source", cs);
	req_hdr(&r, "x-amz-metadata-directive", meta ? "REPLACE" : "COPY");
	if (meta)
		meta_headers(&r, dst, meta, &mb);
	err = s3_do(s3_of(st), &r);
	if (!err)
		err = s3_xml_etag(r.resp.p, r.resp.len, "CopyObjectResult", etag,
				  NULL);
	req_free(&r);
	free(cs);
	if ((err == -EINVAL || err == -EFBIG) && s3_head(st, src, &sinfo) == 0 &&
	    sinfo.size > COPY_MAX)
		return copy_multipart(st, src, dst, &sinfo, meta, out);
	/* CopyObjectResult has no size and (with COPY) no metadata. */
	if (!err && out)
		err = s3_head(st, dst, out);
	return err;
}

/* ---- open/close ----------------------------------------------------------- */

/* S3's DNS-compatible bucket names; others need path-style. */
static bool bucket_dns_ok(const char *b)
{
	size_t n = strlen(b);

	if (n < 3 || n > 63)
		return false;
	for (const char *c = b; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
		      *c == '-'))
			return false;
	return b[0] != '-' && b[n - 1] != '-';
}

static bool bucket_name_ok(const char *b)
{
	size_t n = strlen(b);

	if (n < 1 || n > 255)
		return false;
	for (const char *c = b; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '-' || *c == '.' ||
		      *c == '_'))
			return false;
	return true;
}

/* An IP literal or localhost: no bucket.host DNS name can exist. */
static bool host_is_literal(const char *hostport)
{
	char h[256];
	const char *end;
	unsigned char a[16];

	if (hostport[0] == '[')
		return true;
	end = strchr(hostport, ':');
	hdr_copy(h, sizeof(h), hostport,
		 end ? (size_t)(end - hostport) : strlen(hostport));
	return strcmp(h, "localhost") == 0 || inet_pton(AF_INET, h, a) == 1;
}

/* 127.0.0.0/8, ::1 or localhost: a server on this machine. */
static bool host_is_loopback(const char *hostport)
{
	char h[256];
	const char *end;
	struct in_addr a4;

	if (!strncmp(hostport, "[::1]", 5))
		return true;
	end = strchr(hostport, ':');
	hdr_copy(h, sizeof(h), hostport,
		 end ? (size_t)(end - hostport) : strlen(hostport));
	if (!strcasecmp(h, "localhost"))
		return true;
	return inet_pton(AF_INET, h, &a4) == 1 &&
	       (ntohl(a4.s_addr) >> 24) == 127;
}

/* Split "s3://bucket/pre/fix" into bucket and "pre/fix/". */
static int url_parse(struct store_s3 *s, const char *url)
{
	const char *b = url + strlen(S3_SCHEME), *slash;
	struct s3_buf pfx = { 0 };
	size_t n;

	if (strncmp(url, S3_SCHEME, strlen(S3_SCHEME)))
		return -EINVAL;
	slash = strchr(b, '/');
	n = slash ? (size_t)(slash - b) : strlen(b);
	s->bucket = strndup(b, n);
	if (!s->bucket)
		return -ENOMEM;
	if (!bucket_name_ok(s->bucket))
		return -EINVAL;
	if (slash) {
		const char *p = slash;

		while (*p == '/')
			p++;
		s3_buf_str(&pfx, p);
		while (pfx.len && pfx.p[pfx.len - 1] == '/')
			pfx.p[--pfx.len] = '\0';
		if (pfx.len) {
			s3_buf_str(&pfx, "/");
			if (s3_buf_err(&pfx) == 0 && key_check(pfx.p)) {
				s3_buf_free(&pfx);
				return -EINVAL;
			}
		}
	}
	s->prefix = s3_buf_take(&pfx);
	return s->prefix ? 0 : -ENOMEM;
}

/* origin, host and path from the endpoint (or AWS's) and the style. */
static int endpoint_setup(struct store_s3 *s, const struct store_opts *o)
{
	struct s3_buf ep = { 0 }, b = { 0 };
	const char *hs, *path;
	char *hostport;
	bool path_style;
	int err = 0;

	if (o->s3_endpoint && *o->s3_endpoint) {
		if (!strstr(o->s3_endpoint, "://"))
			s3_buf_str(&ep, "https://");
		s3_buf_str(&ep, o->s3_endpoint);
	} else {
		s3_buf_fmt(&ep, "https://s3.%s.amazonaws.com", s->region);
	}
	if (s3_buf_err(&ep))
		return -ENOMEM;
	while (ep.len && ep.p[ep.len - 1] == '/')
		ep.p[--ep.len] = '\0';
	if (strncmp(ep.p, "http://", 7) && strncmp(ep.p, "https://", 8)) {
		log_error("s3: endpoint %s: only http:// and https://", ep.p);
		err = -EINVAL;
		goto out;
	}
	hs = strstr(ep.p, "://") + 3;
	path = strchr(hs, '/');
	hostport = strndup(hs, path ? (size_t)(path - hs) : strlen(hs));
	if (!hostport || !*hostport) {
		free(hostport);
		err = hostport ? -EINVAL : -ENOMEM;
		goto out;
	}
	path_style = o->s3_path_style || !bucket_dns_ok(s->bucket) ||
		     host_is_literal(hostport);
	s->put_max = host_is_loopback(hostport) ? LOOPBACK_PUT_MAX
						: STORE_PUT_MAX_DEFAULT;
	if (path_style) {
		s->host = hostport;
		s3_buf_add(&b, ep.p, (size_t)(hs - ep.p));
		s3_buf_str(&b, hostport);
		s->origin = s3_buf_take(&b);
		s3_buf_str(&b, path ? path : "");
		s3_buf_str(&b, "/");
		s3_buf_uri(&b, s->bucket, false);
		s->path = s3_buf_take(&b);
	} else {
		s3_buf_fmt(&b, "%s.%s", s->bucket, hostport);
		free(hostport);
		s->host = s3_buf_take(&b);
		s3_buf_add(&b, ep.p, (size_t)(hs - ep.p));
		s3_buf_str(&b, s->host ? s->host : "");
		s->origin = s3_buf_take(&b);
		s->path = strdup(path ? path : "");
	}
	if (!s->host || !s->origin || !s->path)
		err = -ENOMEM;
	else
		log_info("s3: bucket %s at %s (%s-style, region %s)", s->bucket,
			 s->origin, path_style ? "path" : "virtual-hosted",
			 s->region);
out:
	s3_buf_free(&ep);
	return err;
}

/*
 * ListMultipartUploads of every page under our prefix + prefix: fn(arg,
 * store key, upload) for each of ours (its key under our prefix and
 * valid); a non-zero return stops the walk with it.  -ENOTSUP when the
 * server cannot list them (s3rver).
 */
static int uploads_walk(struct store_s3 *s, const char *prefix,
			int (*fn)(void *arg, const char *key,
				  const struct s3_upload *u),
			void *arg)
{
	char *kmark = NULL, *imark = NULL;
	struct s3_buf full = { 0 };
	int err;

	s3_buf_str(&full, s->prefix);
	s3_buf_str(&full, prefix);
	if (s3_buf_err(&full))
		return -ENOMEM;
	do {
		struct req r = { .method = "GET" };
		struct s3_uploads u;

		req_query(&r, "uploads", NULL);
		req_query(&r, "prefix", full.p);
		if (kmark)
			req_query(&r, "key-marker", kmark);
		if (imark)
			req_query(&r, "upload-id-marker", imark);
		err = s3_do(s, &r);
		if (!err)
			err = s3_xml_uploads(r.resp.p, r.resp.len, &u);
		req_free(&r);
		free(kmark);
		free(imark);
		kmark = imark = NULL;
		if (err)
			break;
		for (size_t i = 0; !err && i < u.n; i++) {
			const char *k = u.v[i].key + strlen(s->prefix);

			if (strncmp(u.v[i].key, s->prefix, strlen(s->prefix)) ||
			    key_check(k))
				continue;
			err = fn(arg, k, &u.v[i]);
		}
		if (!err && u.truncated) {
			kmark = u.next_key;
			imark = u.next_id;
			u.next_key = u.next_id = NULL;
		}
		s3_xml_uploads_free(&u);
	} while (kmark);
	s3_buf_free(&full);
	return err;
}

struct stale {
	struct store_s3 *s;
	int64_t cutoff;
	size_t aborted;
};

static int stale_abort(void *arg, const char *key, const struct s3_upload *u)
{
	struct stale *st = arg;

	if (u->initiated_ns && u->initiated_ns <= st->cutoff &&
	    s3_mpu_abort(&st->s->base, key, u->upload_id) == 0)
		st->aborted++;
	return 0;
}

/*
 * Abort uploads under our prefix that are older than MPU_STALE_S: what a
 * crash left behind.  Younger ones may be resumed by the uploader.  A
 * server without ListMultipartUploads (s3rver) is left alone.
 */
static void abort_stale_uploads(struct store_s3 *s)
{
	struct stale st = {
		.s = s,
		.cutoff = ((int64_t)time(NULL) - MPU_STALE_S) * 1000000000,
	};
	int err = uploads_walk(s, "", stale_abort, &st);

	if (err == -ENOTSUP)
		log_info("s3: server cannot list multipart uploads; stale ones "
			 "are not cleaned up");
	else if (err)
		log_warn("s3: listing stale multipart uploads: %s",
			 strerror(-err));
	if (st.aborted)
		log_info("s3: aborted %zu stale multipart upload(s)", st.aborted);
}

struct upload_list {
	struct store_upload *v;
	size_t n;
};

static int upload_keep(void *arg, const char *key, const struct s3_upload *u)
{
	struct upload_list *l = arg;

	return store_uploads_add(&l->v, &l->n, key, u->upload_id);
}

static int s3_mpu_list(struct store *st, const char *prefix,
		       struct store_upload **out, size_t *n)
{
	struct upload_list l = { 0 };
	int err;

	if (!prefix || strlen(prefix) > STORE_KEY_MAX)
		return -EINVAL;
	err = uploads_walk(s3_of(st), prefix, upload_keep, &l);
	if (err) {
		store_uploads_free(l.v, l.n);
		return err;
	}
	*out = l.v;
	*n = l.n;
	return 0;
}

/* Does the server refuse a Complete of key, which exists, under
 * If-None-Match: *?  -ESTALE if it does, 0 if it completed. */
static int cond_probe_mpu(struct store *st, const char *key)
{
	struct store_cond none = { .kind = STORE_IF_NONE };
	char etags[1][STORE_ETAG_MAX], *id = NULL;
	int err = s3_mpu_create(st, key, NULL, &id);
	struct req r = { .method = "PUT", .key = key, .body = S3_BODY_MEM,
			 .mem = "x", .len = 1 };

	if (err)
		return err;
	req_query(&r, "partNumber", "1");
	req_query(&r, "uploadId", id);
	err = s3_do(s3_of(st), &r);
	snprintf(etags[0], sizeof(etags[0]), "%s", r.rh.etag);
	req_free(&r);
	if (!err)
		err = s3_mpu_complete(st, key, id, 1, etags, &none, NULL);
	if (err)
		s3_mpu_abort(st, key, id);
	free(id);
	return err;
}

/*
 * Which conditions the server honours, learnt from writes of a key of
 * our own: created with If-None-Match: *, written the same way again
 * (412 if honoured), then with If-Match of an ETag it cannot hold (412
 * if honoured), then a multipart Complete with If-None-Match: * (412 if
 * honoured), then deleted.  -errno if it could not tell.
 */
static int s3_cond_native(struct store *st)
{
	struct store_cond none = { .kind = STORE_IF_NONE };
	struct store_cond match = { .kind = STORE_IF_MATCH,
				    .etag = "00000000000000000000000000000000" };
	unsigned char raw[8] = { 0 };
	char key[64];
	int bits = 0, err;

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		memset(raw, 0, sizeof(raw)); /* one fixed name: still ours */
	snprintf(key, sizeof(key),
		 STORE_RESERVED_PREFIX "gw-cond-%02x%02x%02x%02x%02x%02x%02x%02x",
		 raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7]);
	err = s3_put(st, key, "", 0, NULL, &none, NULL);
	if (err)
		return err;
	err = s3_put(st, key, "", 0, NULL, &none, NULL);
	if (err == -ESTALE)
		bits |= STORE_COND_NONE_OK;
	if (!err || err == -ESTALE)
		err = s3_put(st, key, "", 0, NULL, &match, NULL);
	if (err == -ESTALE)
		bits |= STORE_COND_MATCH_OK;
	if (!err || err == -ESTALE)
		err = cond_probe_mpu(st, key);
	if (err == -ESTALE)
		bits |= STORE_COND_MPU_OK;
	s3_del(st, key);
	return err && err != -ESTALE ? err : bits;
}

/* An event's object is ours if it is in our bucket, under our prefix. */
static int s3_event_key(struct store *st, const char *bucket, const char *key,
			char *out, size_t cap)
{
	struct store_s3 *s = s3_of(st);
	size_t pl = strlen(s->prefix);

	if (strcmp(bucket, s->bucket) || strncmp(key, s->prefix, pl) ||
	    !key[pl])
		return -ENOENT;
	if (strlen(key + pl) >= cap)
		return -ENAMETOOLONG;
	strcpy(out, key + pl);
	return 0;
}

static uint64_t s3_put_max(struct store *st)
{
	return s3_of(st)->put_max;
}

static void s3_close(struct store *st)
{
	struct store_s3 *s = s3_of(st);

	s3_http_close(s->http);
	s3_creds_close(s->creds);
	free(s->bucket);
	free(s->prefix);
	free(s->region);
	free(s->origin);
	free(s->host);
	free(s->path);
	free(s);
}

/*
 * Open: parse the URL, find region and credentials, start the I/O
 * thread, then prove access with a one-key listing, so wrong credentials
 * or a missing bucket fail here with a clear message.  An unreachable
 * server does not: the gateway can serve its cache until S3 is back.
 */
static int s3_open(const struct store_opts *opts, struct store **out)
{
	struct store_s3 *s = calloc(1, sizeof(*s));
	struct store_page page;
	int err, maxr;

	if (!s)
		return -ENOMEM;
	s->base.ops = &store_s3_ops; /* s3_close may run before store_open sets it */
	err = url_parse(s, opts->url);
	if (err) {
		if (err == -EINVAL)
			log_error("store: %s: want s3://BUCKET[/PREFIX]",
				  opts->url);
		goto out_close;
	}
	err = s3_region_resolve(opts->s3_region, &s->region);
	if (!err)
		err = endpoint_setup(s, opts);
	if (!err)
		err = s3_creds_open(&s->creds);
	if (err)
		goto out_close;
	maxr = opts->s3_max_requests > 0 ? opts->s3_max_requests :
					   MAX_REQUESTS_DEFAULT;
	err = s3_http_open(maxr, &s->http);
	if (err)
		goto out_close;
	err = s3_list(&s->base, "", '/', NULL, 1, &page);
	if (!err) {
		store_page_free(&page);
		abort_stale_uploads(s);
	} else if (err == -EAGAIN) {
		log_warn("s3: %s is not answering; starting anyway (serving "
			 "from the cache; changes wait until it answers)",
			 s->origin);
		s->base.down_since_ms = now_ms(); /* store_down() */
		err = 0;
	} else if (err == -EACCES) {
		log_error("s3: access to bucket %s denied: check the "
			  "credentials (from %s) and region %s", s->bucket,
			  s3_creds_origin(s->creds), s->region);
	} else if (err == -ENXIO) {
		log_error("s3: bucket %s does not exist at %s", s->bucket,
			  s->origin);
	} else {
		log_error("s3: listing bucket %s: %s", s->bucket,
			  strerror(-err));
	}
	if (err)
		goto out_close;
	*out = &s->base;
	return 0;
out_close:
	s3_close(&s->base);
	return err;
}

const struct store_ops store_s3_ops = {
	.scheme = "s3",
	.open = s3_open,
	.close = s3_close,
	.head = s3_head,
	.get = s3_get,
	.get_stream = s3_get_stream,
	.put = s3_put,
	.put_fd = s3_put_fd,
	.mpu_create = s3_mpu_create,
	.mpu_part = s3_mpu_part,
	.mpu_part_copy = s3_mpu_part_copy,
	.mpu_complete = s3_mpu_complete,
	.mpu_abort = s3_mpu_abort,
	.mpu_list = s3_mpu_list,
	.list = s3_list,
	.copy = s3_copy,
	.del = s3_del,
	.del_many = s3_del_many,
	.statfs = NULL, /* a bucket has no capacity */
	.put_max = s3_put_max,
	.cond_native = s3_cond_native,
	.event_key = s3_event_key,
};
