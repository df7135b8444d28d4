/*
 * admin/usage.c - disk use of a directory tree (the cache's), for ctl
 * status and the cache-size gauge.  Walks with openat() so it needs no
 * global state (nftw's callback has no argument) and never follows a
 * symlink out of the tree.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admin.h"

#define USAGE_DEPTH_MAX 16 /* the cache is two levels deep */

static int usage_at(int dfd, unsigned depth, uint64_t *bytes, uint64_t *files)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	int rc = 0;

	if (!d) {
		close(dfd);
		return -errno;
	}
	while (!rc && (e = readdir(d))) {
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue; /* removed while we walked */
		if (S_ISREG(st.st_mode)) {
			*bytes += (uint64_t)st.st_blocks * 512;
			(*files)++;
		} else if (S_ISDIR(st.st_mode) && depth < USAGE_DEPTH_MAX) {
			int fd = openat(dirfd(d), e->d_name,
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
						O_CLOEXEC);

			if (fd >= 0)
				rc = usage_at(fd, depth + 1, bytes, files);
		}
	}
	closedir(d);
	return rc;
}

int admin_dir_usage(const char *dir, uint64_t *bytes, uint64_t *files)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	*bytes = *files = 0;
	if (fd < 0)
		return -errno;
	return usage_at(fd, 0, bytes, files);
}
