/*
 * s3/store_file_meta.c - the file backend's etags and metadata: the etag of
 * a file (it changes whenever the bytes can have), and the user.mapfs.*
 * xattrs of a store_meta.
 */
#include "store_file_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

int64_t file_ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* See store_file_int.h. */
void file_etag_fill(const struct stat *sb, bool marker,
		    char etag[STORE_ETAG_MAX])
{
	if (marker) {
		snprintf(etag, STORE_ETAG_MAX, "%s", MARKER_ETAG);
		return;
	}
	snprintf(etag, STORE_ETAG_MAX,
		 "%" PRIx64 "-%" PRIx64 "-%" PRIx64 "-%" PRIx64,
		 (uint64_t)sb->st_ino, (uint64_t)sb->st_size,
		 (uint64_t)file_ts_ns(&sb->st_mtim),
		 (uint64_t)file_ts_ns(&sb->st_ctim));
}

void file_info_fill(const struct stat *sb, bool marker, struct store_info *out)
{
	memset(out, 0, sizeof(*out));
	out->size = marker ? 0 : (uint64_t)sb->st_size;
	file_etag_fill(sb, marker, out->etag);
	out->last_modified_ns = file_ts_ns(&sb->st_mtim);
}

/* See store_file_int.h. */
int file_xattr_store(int fd, const char *name, const char *val)
{
	if (val)
		return fsetxattr(fd, name, val, strlen(val), 0) ? -errno : 0;
	if (fremovexattr(fd, name) && errno != ENODATA)
		return -errno;
	return 0;
}

/* See store_file_int.h. */
int file_meta_write(int fd, const struct store_meta *m)
{
	static const struct store_meta none;
	char mode[16], uid[16], gid[16], mtime[24], rdev[24];
	int err;

	if (!m)
		m = &none;
	snprintf(mode, sizeof(mode), "%" PRIu32, m->mode);
	snprintf(uid, sizeof(uid), "%" PRIu32, m->uid);
	snprintf(gid, sizeof(gid), "%" PRIu32, m->gid);
	snprintf(mtime, sizeof(mtime), "%" PRId64, m->mtime_ns);
	snprintf(rdev, sizeof(rdev), "%" PRId64, (int64_t)m->rdev);
	err = file_xattr_store(fd, XA_MODE, m->has_mode ? mode : NULL);
	if (!err)
		err = file_xattr_store(fd, XA_UID, m->has_uid ? uid : NULL);
	if (!err)
		err = file_xattr_store(fd, XA_GID, m->has_gid ? gid : NULL);
	if (!err)
		err = file_xattr_store(fd, XA_MTIME,
				       m->has_mtime ? mtime : NULL);
	if (!err)
		err = file_xattr_store(fd, XA_SYMLINK, m->symlink ? "1" : NULL);
	if (!err)
		err = file_xattr_store(
			fd, XA_RDEV,
			m->has_rdev && m->rdev <= INT64_MAX ? rdev : NULL);
	if (!err)
		err = file_xattr_store(fd, XA_WID, m->wid[0] ? m->wid : NULL);
	if (!err)
		err = file_xattr_store(fd, XA_LINK,
				       m->link[0] ? m->link : NULL);
	return err;
}

/* Read xattr name as a decimal; 1 if present and well formed, 0 if not. */
static int xattr_num(int fd, const char *name, bool is_signed, int64_t lo,
		     int64_t hi, int64_t *out)
{
	char buf[32], *end;
	ssize_t n;

	n = fgetxattr(fd, name, buf, sizeof(buf) - 1);
	if (n < 0) {
		/* Absent, or too long to be ours: a file written by hand. */
		if (errno == ENODATA || errno == ERANGE || errno == ENOTSUP)
			return 0;
		return -errno;
	}
	buf[n] = '\0';
	if (n == 0 || (!is_signed && buf[0] == '-'))
		return 0;
	errno = 0;
	*out = strtoll(buf, &end, 10);
	if (errno || *end || *out < lo || *out > hi)
		return 0;
	return 1;
}

/* See store_file_int.h. */
int file_meta_read(int fd, struct store_meta *m)
{
	int64_t v;
	int r;

	memset(m, 0, sizeof(*m));
	r = xattr_num(fd, XA_MODE, false, 0, UINT32_MAX, &v);
	if (r < 0)
		return r;
	m->has_mode = r;
	m->mode = r ? (uint32_t)v : 0;
	r = xattr_num(fd, XA_UID, false, 0, UINT32_MAX, &v);
	if (r < 0)
		return r;
	m->has_uid = r;
	m->uid = r ? (uint32_t)v : 0;
	r = xattr_num(fd, XA_GID, false, 0, UINT32_MAX, &v);
	if (r < 0)
		return r;
	m->has_gid = r;
	m->gid = r ? (uint32_t)v : 0;
	r = xattr_num(fd, XA_MTIME, true, INT64_MIN, INT64_MAX, &v);
	if (r < 0)
		return r;
	m->has_mtime = r;
	m->mtime_ns = r ? v : 0;
	r = xattr_num(fd, XA_SYMLINK, false, 1, 1, &v);
	if (r < 0)
		return r;
	m->symlink = r;
	r = xattr_num(fd, XA_RDEV, false, 0, INT64_MAX, &v);
	if (r < 0)
		return r;
	m->has_rdev = r;
	m->rdev = r ? (uint64_t)v : 0;
	r = (int)fgetxattr(fd, XA_WID, m->wid, sizeof(m->wid) - 1);
	m->wid[r > 0 ? r : 0] = '\0';
	r = (int)fgetxattr(fd, XA_LINK, m->link, sizeof(m->link) - 1);
	m->link[r > 0 ? r : 0] = '\0';
	return 0;
}
