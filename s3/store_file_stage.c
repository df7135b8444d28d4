/*
 * s3/store_file_stage.c - the file backend's staging: every write goes to
 * ROOT/.mapfs-tmp, is fsync'd and renamed into place, under its condition
 * (If-Match, If-None-Match) checked just before the rename; staged files a
 * crash left are swept at open.
 */
#include "store_file_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STAGE_STALE_S 3600 /* staged files older than this are crash debris */
#define COPY_BUF (1u << 20)

int file_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len) {
		n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* pread/pwrite copy, for when the kernel cannot copy_file_range. */
static int copy_slow(int in, uint64_t in_off, int out, uint64_t out_off,
		     uint64_t len)
{
	char *buf = malloc(COPY_BUF);
	ssize_t n, w;
	int err = 0;

	if (!buf)
		return -ENOMEM;
	while (len) {
		n = pread(in, buf, len < COPY_BUF ? len : COPY_BUF,
			  (off_t)in_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -EIO;
			break;
		}
		for (w = 0; w < n;) {
			ssize_t k = pwrite(out, buf + w, (size_t)(n - w),
					   (off_t)(out_off + (uint64_t)w));
			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0) {
				err = -errno;
				goto out_free;
			}
			w += k;
		}
		in_off += (uint64_t)n;
		out_off += (uint64_t)n;
		len -= (uint64_t)n;
	}
out_free:
	free(buf);
	return err;
}

/* See store_file_int.h. */
int file_copy_bytes(int in, uint64_t in_off, int out, uint64_t out_off,
		    uint64_t len)
{
	while (len) {
		loff_t ip = (loff_t)in_off, op = (loff_t)out_off;
		size_t chunk = len < (1u << 30) ? (size_t)len : (1u << 30);
		ssize_t n = copy_file_range(in, &ip, out, &op, chunk, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EXDEV || errno == ENOSYS ||
			    errno == EOPNOTSUPP || errno == EINVAL)
				return copy_slow(in, in_off, out, out_off, len);
			return -errno;
		}
		if (n == 0)
			return -EIO;
		in_off += (uint64_t)n;
		out_off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

int file_rand_hex(char *out, size_t nbytes)
{
	unsigned char raw[32];
	size_t got = 0, i;
	ssize_t n;

	while (got < nbytes) {
		n = getrandom(raw + got, nbytes - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	for (i = 0; i < nbytes; i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

/* See store_file_int.h. */
int file_tmp_create(int dirfd, char name[TMP_NAME_MAX], int *out)
{
	int fd, err, tries;

	for (tries = 0; tries < 8; tries++) {
		memcpy(name, "t.", 2);
		err = file_rand_hex(name + 2, 8);
		if (err)
			return err;
		fd = openat(dirfd, name,
			    O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0644);
		if (fd >= 0) {
			*out = fd;
			return 0;
		}
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/*
 * Does kp's object (in its directory dfd) hold cond?  0, -ESTALE
 * (another version; for STORE_IF_NONE: any), -ENOENT (none: for
 * STORE_IF_MATCH), -EISDIR (a directory of other keys is there).  An object carrying cond's write id is this write's
 * own (an earlier try): 0.
 */
static int cond_match(int dfd, const struct keypath *kp,
		      const struct store_cond *cond)
{
	char etag[STORE_ETAG_MAX];
	struct store_meta m;
	struct stat sb;
	int fd, err;

	fd = openat(dfd, kp->leaf,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return cond->kind == STORE_IF_NONE ? 0 : -ENOENT;
	if (fd < 0)
		return errno == ELOOP ? -ESTALE : -errno;
	/* A directory in the way is no version of the key: no write can
	 * replace it (as an unconditional PUT's -EISDIR). */
	err = fstat(fd, &sb)         ? -errno
	      : S_ISDIR(sb.st_mode)  ? -EISDIR
	      : !S_ISREG(sb.st_mode) ? -ESTALE
				     : 0;
	if (!err && cond->wid[0] && !file_meta_read(fd, &m) &&
	    !strcmp(m.wid, cond->wid)) {
		close(fd);
		return 0;
	}
	close(fd);
	if (err || cond->kind == STORE_IF_NONE)
		return err ? err : -ESTALE;
	file_etag_fill(&sb, false, etag);
	return strcmp(etag, cond->etag) ? -ESTALE : 0;
}

/*
 * Rename staged tmp into kp's place in dfd if cond (NULL: none) holds,
 * checked and renamed under cond_lock: one at a time in this process (a
 * writer outside it between the check and the rename is overwritten,
 * the window of a HEAD).
 */
static int cond_rename(struct store_file *sf, const char *tmp, int dfd,
		       const struct keypath *kp, const struct store_cond *cond)
{
	int err;

	if (!cond || cond->kind == STORE_IF_ANY)
		return renameat(sf->stage_fd, tmp, dfd, kp->leaf) ? -errno : 0;
	pthread_mutex_lock(&sf->cond_lock);
	err = cond_match(dfd, kp, cond);
	if (!err && renameat(sf->stage_fd, tmp, dfd, kp->leaf))
		err = -errno;
	pthread_mutex_unlock(&sf->cond_lock);
	return err;
}

/* See store_file_int.h. */
int file_stage_commit(struct store_file *sf, int fd, const char *tmp,
		      const struct keypath *kp, const struct store_meta *meta,
		      const struct store_cond *cond, struct store_info *out)
{
	struct stat sb;
	int dfd, err;

	err = file_meta_write(fd, meta);
	if (!err && fsync(fd))
		err = -errno;
	if (err)
		return err;
	err = file_kp_parent(sf, kp, true, &dfd);
	if (err)
		return err;
	err = cond_rename(sf, tmp, dfd, kp, cond);
	if (!err && fsync(dfd))
		err = -errno;
	close(dfd);
	if (err || !out)
		return err;
	if (fstat(fd, &sb))
		return -errno;
	file_info_fill(&sb, false, out);
	if (meta)
		out->meta = *meta;
	return 0;
}

/* See store_file_int.h. */
int file_marker_put(struct store_file *sf, const struct keypath *kp,
		    const struct store_meta *meta, struct store_info *out)
{
	struct stat sb;
	int fd, err;

	err = file_marker_open(sf, kp, true, &fd, &sb);
	if (err)
		return err;
	err = file_meta_write(fd, meta);
	if (!err)
		err = file_xattr_store(fd, XA_MARKER, "1");
	if (!err && fsync(fd))
		err = -errno;
	if (!err && out) {
		if (fstat(fd, &sb))
			err = -errno;
		else
			file_info_fill(&sb, true, out);
		if (!err && meta)
			out->meta = *meta;
	}
	close(fd);
	return err;
}

/* See store_file_int.h. */
void file_stage_sweep(int stage_fd)
{
	time_t now = time(NULL);
	struct dirent *de;
	struct stat sb;
	DIR *d;

	if (file_dir_scan(stage_fd, &d))
		return;
	while ((de = readdir(d))) {
		if (fstatat(stage_fd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(sb.st_mode))
			continue;
		if (now - sb.st_mtim.tv_sec > STAGE_STALE_S)
			unlinkat(stage_fd, de->d_name, 0);
	}
	closedir(d);
}
