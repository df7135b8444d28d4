/*
 * s3/store_file.c - the local-directory backend ("file:///abs/path").
 *
 * Key "a/b.txt" is the file ROOT/a/b.txt; key "a/b/" (a directory marker)
 * is the directory ROOT/a/b.  The backend answers like S3 does, not like
 * POSIX: listings are byte-wise sorted over whole keys with common
 * prefixes and opaque continuation tokens, a PUT replaces an object
 * atomically, parents appear and stay as prefixes.  Because a directory is
 * a marker here, every directory under ROOT is the key "dir/".
 *
 * No key reaches outside ROOT: keys with "", "//", "." or ".." components
 * or a leading '/' are refused, and paths are walked one component at a
 * time with O_NOFOLLOW from the root fd, so a symlink inside ROOT is never
 * followed (it is simply not an object).
 *
 * Metadata lives in user.mapfs.* xattrs as decimal text.  ROOT/.mapfs-tmp
 * stages PUTs and copies (written, fsync'd, then renamed into place) and
 * ROOT/.mapfs-mpu holds multipart uploads; names starting ".mapfs-" at the
 * root are reserved, never listed and never valid keys.
 *
 * The struct holds only fds opened at store_open, never written after, so
 * every call is thread-safe.
 */
#include "store_file_int.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#define FILE_SCHEME "file://"

static void file_close(struct store *st)
{
	struct store_file *sf = sf_of(st);

	if (sf->mpu_fd >= 0)
		close(sf->mpu_fd);
	if (sf->stage_fd >= 0)
		close(sf->stage_fd);
	if (sf->root_fd >= 0)
		close(sf->root_fd);
	pthread_mutex_destroy(&sf->cond_lock);
	free(sf);
}

static int file_open(const struct store_opts *opts, struct store **out)
{
	const char *path = opts->url + strlen(FILE_SCHEME);
	struct store_file *sf;
	int err;

	if (strncmp(opts->url, FILE_SCHEME, strlen(FILE_SCHEME)) ||
	    path[0] != '/')
		return -EINVAL;
	sf = calloc(1, sizeof(*sf));
	if (!sf)
		return -ENOMEM;
	sf->root_fd = sf->stage_fd = sf->mpu_fd = -1;
	pthread_mutex_init(&sf->cond_lock, NULL);
	err = file_path_mkdirs(path);
	if (err)
		goto out_close;
	sf->root_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sf->root_fd < 0) {
		err = -errno;
		goto out_close;
	}
	err = file_dir_step(sf->root_fd, STAGE_DIR, 0700, &sf->stage_fd);
	if (!err)
		err = file_dir_step(sf->root_fd, MPU_DIR, 0700, &sf->mpu_fd);
	if (err)
		goto out_close;
	/* Metadata needs user xattrs; refuse now rather than lose it later. */
	if (fsetxattr(sf->stage_fd, XA_PROBE, "1", 1, 0)) {
		err = -errno;
		if (err == -ENOTSUP)
			log_error("store: %s: file system has no user xattrs "
				  "(needed for object metadata)",
				  opts->url);
		goto out_close;
	}
	fremovexattr(sf->stage_fd, XA_PROBE);
	file_stage_sweep(sf->stage_fd);
	*out = &sf->base;
	return 0;
out_close:
	file_close(&sf->base);
	return err;
}

static int file_statfs(struct store *st, uint64_t *total_bytes,
		       uint64_t *avail_bytes)
{
	struct statvfs vfs;

	if (fstatvfs(sf_of(st)->root_fd, &vfs))
		return -errno;
	*total_bytes = (uint64_t)vfs.f_blocks * vfs.f_frsize;
	*avail_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	return 0;
}

/*
 * Any size in one PUT: the parts of a multipart upload are copied once
 * into the upload and again at completion, one disk and one page cache
 * for both passes, so parallel parts only double the work.  (fs/ still
 * sends parts for a big file that is not all in its cache.)
 */
static uint64_t file_put_max(struct store *st)
{
	(void)st;
	return UINT64_MAX;
}

/* Both conditions are checked with the rename that places an object. */
static int file_cond_native(struct store *st)
{
	(void)st;
	return STORE_COND_ALL;
}

const struct store_ops store_file_ops = {
	.scheme = "file",
	.open = file_open,
	.close = file_close,
	.head = file_head,
	.get = file_get,
	.get_stream = file_get_stream,
	.put = file_put,
	.put_fd = file_put_fd,
	.mpu_create = file_mpu_create,
	.mpu_part = file_mpu_part,
	.mpu_part_copy = file_mpu_part_copy,
	.mpu_complete = file_mpu_complete,
	.mpu_abort = file_mpu_abort,
	.mpu_list = file_mpu_list,
	.list = file_list,
	.copy = file_copy,
	.del = file_del,
	.del_many = file_del_many,
	.statfs = file_statfs,
	.put_max = file_put_max,
	.put_parallel = 1, /* each PUT an fsync of one disk */
	.cond_native = file_cond_native,
};
