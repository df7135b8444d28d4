/*
 * s3/store_file_delete.c - the file backend's deletes, and the parent
 * directories a delete leaves empty pruned (unless a marker keeps them), as
 * S3's prefixes go with their last key.
 */
#include "store_file_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

/*
 * After key went: remove the directories above it that are only
 * prefixes (no XA_MARKER) and now empty, deepest first, as S3 forgets a
 * prefix with its last key.  Best effort: a directory that is not empty,
 * is a marker, or changed meanwhile simply stays.
 */
static void prune_prefixes(struct store_file *sf, const char *key)
{
	char path[STORE_KEY_MAX + 1];
	size_t len = strlen(key);
	char *slash;

	if (len >= sizeof(path))
		return;
	memcpy(path, key, len + 1);
	if (len && path[len - 1] == '/')
		path[len - 1] = '\0';
	while ((slash = strrchr(path, '/'))) {
		int fd;
		bool marker;

		*slash = '\0';
		fd = openat(sf->root_fd, path,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return;
		marker = fgetxattr(fd, XA_MARKER, NULL, 0) >= 0;
		close(fd);
		if (marker || unlinkat(sf->root_fd, path, AT_REMOVEDIR))
			return;
	}
}

/* See store_file_int.h. */
int file_del(struct store *st, const char *key)
{
	struct store_file *sf = sf_of(st);
	struct keypath kp;
	struct stat sb;
	int dfd, fd, err;

	err = file_key_parse(key, &kp);
	if (err)
		return err;
	err = file_kp_parent(sf, &kp, false, &dfd);
	if (err)
		return err == -ENOENT ? 0 : err;
	if (kp.marker) {
		if (unlinkat(dfd, kp.leaf, AT_REMOVEDIR) == 0) {
			err = fsync(dfd) ? -errno : 0;
		} else if (errno == ENOTEMPTY || errno == EEXIST) {
			err = file_dir_step(dfd, kp.leaf, 0, &fd);
			if (!err) {
				err = file_meta_write(fd, NULL);
				if (!err)
					err = file_xattr_store(fd, XA_MARKER,
							       NULL);
				close(fd);
			} else if (err == -ENOENT) {
				err = 0; /* emptied and removed meanwhile */
			}
		} else if (errno != ENOENT && errno != ENOTDIR) {
			err = -errno;
		}
		goto out_close_dir;
	}
	if (fstatat(dfd, kp.leaf, &sb, AT_SYMLINK_NOFOLLOW)) {
		err = errno == ENOENT ? 0 : -errno;
		goto out_close_dir;
	}
	if (!S_ISREG(sb.st_mode))
		goto out_close_dir;
	if (unlinkat(dfd, kp.leaf, 0))
		err = errno == ENOENT ? 0 : -errno;
	else
		err = fsync(dfd) ? -errno : 0;
out_close_dir:
	close(dfd);
	if (!err)
		prune_prefixes(sf, key);
	return err;
}

int file_del_many(struct store *st, const char *const *keys, size_t n)
{
	int first = 0, err;
	size_t i;

	/* Like DeleteObjects: every key is tried, the first error reported. */
	for (i = 0; i < n; i++) {
		err = file_del(st, keys[i]);
		if (err && !first)
			first = err;
	}
	return first;
}
