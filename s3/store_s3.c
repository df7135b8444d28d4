/*
 * s3/store_s3.c - the S3 backend ("s3://bucket[/prefix]").
 *
 * Store key K is object PREFIX/K.  Every call signs its request with
 * SigV4 (s3/sign.c) in the calling thread, hands it to an I/O thread
 * (s3/http.c) and waits; failures of the EAGAIN class are retried, in
 * one place for every request kind (s3_do, store_s3_req.c).
 *
 * Files, one per request kind: store_s3_get.c (HEAD, GET),
 * store_s3_put.c (PUT, multipart, conditions), store_s3_list.c
 * (listings of objects and of uploads), store_s3_copy.c,
 * store_s3_delete.c; below them store_s3_req.c (one request, retries)
 * and store_s3_meta.c (keys and metadata on the wire); this file opens
 * and closes the backend.  They share store_s3_int.h.
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
#include "store_s3_int.h"
#include "buf.h"
#include "creds.h"
#include "http.h"
#include "common/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define S3_SCHEME "s3://"
#define MAX_REQUESTS_DEFAULT 64

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
	s3_hdr_copy(h, sizeof(h), hostport,
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
	s3_hdr_copy(h, sizeof(h), hostport,
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
			if (s3_buf_err(&pfx) == 0 && s3_key_check(pfx.p)) {
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

/* S3 counts the prefix in its 1,024 bytes. */
static size_t s3_key_max(struct store *st)
{
	size_t pl = strlen(s3_of(st)->prefix);

	return pl < STORE_KEY_MAX ? STORE_KEY_MAX - pl : 0;
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
	s->base.ops =
		&store_s3_ops; /* s3_close may run before store_open sets it */
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
	maxr = opts->s3_max_requests > 0 ? opts->s3_max_requests
					 : MAX_REQUESTS_DEFAULT;
	err = s3_http_open(maxr, &s->http);
	if (err)
		goto out_close;
	err = s3_list(&s->base, "", '/', NULL, 1, &page);
	if (!err) {
		store_page_free(&page);
		s3_abort_stale_uploads(s);
	} else if (err == -EAGAIN) {
		log_warn("s3: %s is not answering; starting anyway (serving "
			 "from the cache; changes wait until it answers)",
			 s->origin);
		s->base.down_since_ms = s3_now_ms(); /* store_down() */
		err = 0;
	} else if (err == -EACCES) {
		log_error("s3: access to bucket %s denied: check the "
			  "credentials (from %s) and region %s",
			  s->bucket, s3_creds_origin(s->creds), s->region);
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
	.key_max = s3_key_max,
	.cond_native = s3_cond_native,
	.event_key = s3_event_key,
};
