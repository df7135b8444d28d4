/*
 * s3/store_s3_meta.c - the S3 backend's keys and metadata on the wire: the
 * keys both backends accept, the x-amz-meta-* headers of a store_meta and
 * back, the info a write reports, the x-amz-copy-source of a key.
 */
#include "store_s3_int.h"
#include "buf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

/* See store_s3_int.h. */
int s3_key_check(const char *key)
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

bool s3_is_marker(const char *key)
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

void s3_meta_headers(struct req *r, const char *key, const struct store_meta *m,
		     struct meta_bufs *b)
{
	s3_req_hdr(r, "content-type",
		   s3_is_marker(key) ? "application/x-directory"
				     : "application/octet-stream");
	if (!m)
		return;
	if (m->has_mode) {
		uint32_t mode = m->mode;

		if (m->symlink && !(mode & S_IFMT))
			mode |= S_IFLNK;
		snprintf(b->mode, sizeof(b->mode), "%" PRIu32, mode);
		s3_req_hdr(r, "x-amz-meta-mode", b->mode);
	}
	if (m->has_uid) {
		snprintf(b->uid, sizeof(b->uid), "%" PRIu32, m->uid);
		s3_req_hdr(r, "x-amz-meta-uid", b->uid);
	}
	if (m->has_gid) {
		snprintf(b->gid, sizeof(b->gid), "%" PRIu32, m->gid);
		s3_req_hdr(r, "x-amz-meta-gid", b->gid);
	}
	if (m->has_mtime) {
		mtime_fmt(m->mtime_ns, b->mtime, sizeof(b->mtime));
		s3_req_hdr(r, "x-amz-meta-mtime", b->mtime);
	}
	if (m->symlink)
		s3_req_hdr(r, "x-amz-meta-mapfs-symlink", "1");
	if (m->has_rdev) {
		snprintf(b->rdev, sizeof(b->rdev), "%" PRIu64, m->rdev);
		s3_req_hdr(r, "x-amz-meta-rdev", b->rdev);
	}
	if (m->wid[0])
		s3_req_hdr(r, "x-amz-meta-mapfs-wid", m->wid);
	if (m->link[0])
		s3_req_hdr(r, "x-amz-meta-mapfs-link", m->link);
}

/* See store_s3_int.h. */
void s3_meta_read(const struct resp_hdrs *rh, struct store_meta *m)
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

/* See store_s3_int.h. */
void s3_write_info(const struct req *r, uint64_t size,
		   const struct store_meta *meta, struct store_info *out)
{
	if (!out)
		return;
	memset(out, 0, sizeof(*out));
	out->size = size;
	snprintf(out->etag, sizeof(out->etag), "%s", r->rh.etag);
	out->last_modified_ns =
		(r->rh.date ? r->rh.date : (int64_t)time(NULL)) * 1000000000;
	if (meta)
		out->meta = *meta;
}

/* See store_s3_int.h. */
char *s3_copy_source(const struct store_s3 *s, const char *key)
{
	struct s3_buf b = { 0 };

	s3_buf_str(&b, "/");
	s3_buf_uri(&b, s->bucket, false);
	s3_buf_str(&b, "/");
	s3_buf_uri(&b, s->prefix, true);
	s3_buf_uri(&b, key, true);
	return s3_buf_take(&b);
}
