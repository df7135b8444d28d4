/*
 * s3/store_file_path.c - the file backend's keys and paths: a key validated
 * and split, walked one component at a time with O_NOFOLLOW from the root
 * fd (never out of ROOT, never through a symlink), and the objects and
 * markers it names opened.
 */
#include "store_file_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* See store_file_int.h. */
int file_key_parse(const char *key, struct keypath *kp)
{
	size_t len;
	char *c, *end;

	if (!key)
		return -EINVAL;
	len = strnlen(key, STORE_KEY_MAX + 1);
	if (len == 0 || len > STORE_KEY_MAX || key[0] == '/')
		return -EINVAL;
	memcpy(kp->buf, key, len + 1);
	kp->marker = kp->buf[len - 1] == '/';
	if (kp->marker)
		kp->buf[--len] = '\0';
	if (store_key_reserved(kp->buf))
		return -EINVAL;
	c = kp->buf;
	end = kp->buf + len;
	for (;;) {
		char *slash = memchr(c, '/', (size_t)(end - c));
		size_t n = (size_t)((slash ? slash : end) - c);

		if (n == 0)
			return -EINVAL;
		if ((n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.'))
			return -EINVAL;
		if (n > NAME_MAX)
			return -ENAMETOOLONG;
		if (!slash) {
			kp->leaf = c;
			return 0;
		}
		*slash = '\0';
		c = slash + 1;
	}
}

/* See store_file_int.h. */
int file_dir_step(int dirfd, const char *name, mode_t mode, int *out)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	int fd = openat(dirfd, name, flags);

	if (fd < 0 && errno == ENOENT && mode) {
		if (mkdirat(dirfd, name, mode) == 0) {
			if (fsync(dirfd))
				return -errno;
		} else if (errno != EEXIST) {
			return -errno;
		}
		fd = openat(dirfd, name, flags);
	}
	if (fd < 0) {
		if (errno == ELOOP || errno == ENOTDIR)
			return mode ? -ENOTDIR : -ENOENT;
		return -errno;
	}
	*out = fd;
	return 0;
}

/* See store_file_int.h. */
int file_kp_parent(const struct store_file *sf, const struct keypath *kp,
		   bool create, int *out)
{
	const char *c;
	int cur, next, err;

	cur = fcntl(sf->root_fd, F_DUPFD_CLOEXEC, 0);
	if (cur < 0)
		return -errno;
	for (c = kp->buf; c != kp->leaf; c += strlen(c) + 1) {
		err = file_dir_step(cur, c, create ? 0755 : 0, &next);
		close(cur);
		if (err)
			return err;
		cur = next;
	}
	*out = cur;
	return 0;
}

/* See store_file_int.h. */
int file_dir_scan(int dirfd, DIR **out)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	*out = fdopendir(fd);
	if (!*out) {
		int err = -errno;

		close(fd);
		return err;
	}
	return 0;
}

/* See store_file_int.h. */
int file_marker_open(const struct store_file *sf, const struct keypath *kp,
		     bool create, int *out, struct stat *sb)
{
	int dfd, err;

	err = file_kp_parent(sf, kp, create, &dfd);
	if (err)
		return err;
	err = file_dir_step(dfd, kp->leaf, create ? 0755 : 0, out);
	close(dfd);
	if (err)
		return err;
	if (fstat(*out, sb)) {
		err = -errno;
		close(*out);
	}
	return err;
}

/* See store_file_int.h. */
int file_obj_open(const struct store_file *sf, const struct keypath *kp,
		  int *out, struct stat *sb)
{
	int dfd, fd, err;

	err = file_kp_parent(sf, kp, false, &dfd);
	if (err)
		return err;
	if (fstatat(dfd, kp->leaf, sb, AT_SYMLINK_NOFOLLOW)) {
		err = -errno;
		goto out_close_dir;
	}
	if (!S_ISREG(sb->st_mode)) {
		err = -ENOENT;
		goto out_close_dir;
	}
	fd = openat(dfd, kp->leaf,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		err = errno == ELOOP ? -ENOENT : -errno;
		goto out_close_dir;
	}
	if (fstat(fd, sb))
		err = -errno;
	else if (!S_ISREG(sb->st_mode))
		err = -ENOENT;
	if (err)
		close(fd);
	else
		*out = fd;
out_close_dir:
	close(dfd);
	return err;
}

/* See store_file_int.h. */
int file_path_mkdirs(const char *path)
{
	char buf[PATH_MAX];
	size_t len = strlen(path), i;
	struct stat sb;

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		/* An existing directory may answer EACCES or EROFS, not EEXIST. */
		if (mkdir(buf, 0755) && errno != EEXIST) {
			int err = -errno;

			if (stat(buf, &sb) || !S_ISDIR(sb.st_mode))
				return err;
		}
		if (i < len)
			buf[i] = '/';
	}
	return 0;
}
