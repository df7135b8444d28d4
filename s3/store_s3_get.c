/*
 * s3/store_s3_get.c - the S3 backend's reads: HEAD, ranged GET into a
 * buffer, and the streaming GET, pinned to one version (If-Match, and the
 * ETag of the answer checked before any byte goes on).
 */
#include "store_s3_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int s3_head(struct store *st, const char *key, struct store_info *out)
{
	struct req r = { .method = "HEAD", .key = key };
	int err = s3_key_check(key);

	if (err)
		return err;
	err = s3_do(s3_of(st), &r);
	if (!err) {
		memset(out, 0, sizeof(*out));
		out->size = r.rh.has_length ? r.rh.length : 0;
		snprintf(out->etag, sizeof(out->etag), "%s", r.rh.etag);
		out->last_modified_ns = r.rh.last_modified * 1000000000;
		s3_meta_read(&r.rh, &out->meta);
	}
	s3_req_free(&r);
	return err;
}

int s3_get(struct store *st, const char *key, uint64_t off, size_t len,
	   void *buf, size_t *got)
{
	struct req r = { .method = "GET", .key = key };
	char range[64];
	int err = s3_key_check(key);

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
	s3_req_hdr(&r, "range", range);
	r.dst = buf;
	r.dst_len = len;
	r.dst_skip = off;
	err = s3_do(s3_of(st), &r);
	if (!err)
		*got = r.got;
	else if (err == -ERANGE)
		err = 0; /* at or past the end: 0 bytes, as promised */
	s3_req_free(&r);
	return err;
}

/* A pinned GET's sink: bytes only of the version asked for. */
struct pin_sink {
	store_sink_fn sink;
	void *arg;
	const char *want;           /* the ETag pinned */
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

int s3_get_stream(struct store *st, const char *key, const char *if_match,
		  uint64_t off, uint64_t len, store_sink_fn sink, void *arg,
		  uint64_t *got)
{
	struct req r = {
		.method = "GET", .key = key, .sink = sink, .sink_arg = arg
	};
	struct pin_sink ps = { sink, arg, if_match, &r.rh };
	char range[64], ifm[STORE_ETAG_MAX + 2];
	int err = s3_key_check(key);

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
	s3_req_hdr(&r, "range", range);
	if (if_match) {
		/* A GET's If-Match is compared as HTTP says: quoted. */
		snprintf(ifm, sizeof(ifm), "\"%s\"", if_match);
		s3_req_hdr(&r, "if-match", ifm);
		r.sink = pin_sink_fn;
		r.sink_arg = &ps;
	}
	r.dst_len = (size_t)len;
	r.dst_skip = off;
	err = s3_do(s3_of(st), &r);
	*got = r.got;
	if (err == -ERANGE)
		err = 0; /* at or past the end: 0 bytes, as promised */
	s3_req_free(&r);
	return err;
}
