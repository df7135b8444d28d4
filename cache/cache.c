/*
 * cache/cache.c - the cache directory: open/close, names, and the
 * synchronous operations on an inode's local data.
 *
 * Layout: DIR/XX/INO, XX the low byte of the inode in hex, INO the inode
 * in 16 hex digits; DIR/tmp/ holds fetches in progress.  A cache file
 * exists only when it holds the inode's complete data, so whatever is in
 * tmp/ at open time is the remains of a crash and is removed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache_int.h"
#include "metrics/metrics.h"

#define CACHE_DEFAULT_RING_DEPTH 256
#define CACHE_MIN_RING_DEPTH 4
#define CACHE_DEFAULT_FETCH_CHUNK (1u << 20)
#define CACHE_DEFAULT_FETCH_THREADS 8
#define CACHE_DEFAULT_MAX_OPEN 4096

void cache_name(uint64_t ino, char buf[CACHE_NAME_MAX])
{
	snprintf(buf, CACHE_NAME_MAX, "%016" PRIx64, ino);
}

void cache_dir_changed(struct cache *c, uint64_t ino)
{
	atomic_fetch_add(&c->dir_changes[ino & 0xff], 1);
}

uint64_t cache_dir_snapshot(struct cache *c, uint64_t ino)
{
	return atomic_load(&c->dir_changes[ino & 0xff]);
}

bool cache_dir_needs_sync(struct cache *c, uint64_t ino)
{
	return atomic_load(&c->dir_synced[ino & 0xff]) !=
	       atomic_load(&c->dir_changes[ino & 0xff]);
}

void cache_dir_synced(struct cache *c, uint64_t ino, uint64_t snap)
{
	atomic_uint_fast64_t *synced = &c->dir_synced[ino & 0xff];
	uint_fast64_t cur = atomic_load(synced);

	/* Syncs may finish out of order: keep the newest coverage. */
	while (cur < snap && !atomic_compare_exchange_weak(synced, &cur, snap))
		;
}

int cache_sync_blocking(struct cache *c, struct cache_fd *f)
{
	uint64_t snap;

	if (fdatasync(f->fd) < 0)
		return -errno;
	if (!cache_dir_needs_sync(c, f->ino))
		return 0;
	snap = cache_dir_snapshot(c, f->ino);
	if (fsync(cache_dirfd(c, f->ino)) < 0)
		return -errno;
	cache_dir_synced(c, f->ino, snap);
	return 0;
}

/*
 * mkdir -p.  A directory created here is fsynced into its parent, so the
 * cache's own skeleton survives a power loss like the files in it.
 */
static int mkdir_p(const char *path)
{
	char buf[PATH_MAX], *slash;
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (slash = buf + 1;; slash++) {
		bool last = *slash == '\0';
		int pfd;

		if (*slash != '/' && !last)
			continue;
		*slash = '\0';
		if (mkdir(buf, 0700) == 0) {
			char *p = strrchr(buf, '/');

			if (p == buf)
				pfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			else {
				*p = '\0';
				pfd = open(buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
				*p = '/';
			}
			if (pfd >= 0) {
				fsync(pfd);
				close(pfd);
			}
		} else if (errno != EEXIST) {
			return -errno;
		}
		if (last)
			return 0;
		*slash = '/';
	}
}

/* Open (creating) subdirectory name of c->rootfd; *created if it was new. */
static int subdir_open(struct cache *c, const char *name, bool *created)
{
	int fd;

	if (mkdirat(c->rootfd, name, 0700) == 0)
		*created = true;
	else if (errno != EEXIST)
		return -errno;
	fd = openat(c->rootfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Remove what a crash left in tmp/: fetches that never completed. */
static int tmp_clean(struct cache *c)
{
	int fd = dup(c->tmpfd);
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(c->tmpfd, de->d_name, 0);
	}
	closedir(d);
	return 0;
}

static void dirs_close(struct cache *c)
{
	for (int i = 0; i < CACHE_NDIRS; i++)
		if (c->dirfd[i] >= 0)
			close(c->dirfd[i]);
	if (c->tmpfd >= 0)
		close(c->tmpfd);
	close(c->rootfd);
}

static int dirs_open(struct cache *c, const char *dir)
{
	bool created = false;
	char name[3];
	int rc, i;

	rc = mkdir_p(dir);
	if (rc)
		return rc;
	c->rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->rootfd < 0)
		return -errno;
	c->tmpfd = -1;
	for (i = 0; i < CACHE_NDIRS; i++)
		c->dirfd[i] = -1;
	for (i = 0; i < CACHE_NDIRS; i++) {
		snprintf(name, sizeof(name), "%02x", i);
		rc = subdir_open(c, name, &created);
		if (rc < 0)
			goto out_close;
		c->dirfd[i] = rc;
	}
	rc = subdir_open(c, "tmp", &created);
	if (rc < 0)
		goto out_close;
	c->tmpfd = rc;
	if (created && fsync(c->rootfd) < 0) {
		rc = -errno;
		goto out_close;
	}
	rc = tmp_clean(c);
	if (rc)
		goto out_close;
	return 0;

out_close:
	dirs_close(c);
	return rc;
}

int cache_open(const struct cache_opts *opts, struct store *st,
	       struct cache **out)
{
	struct cache *c;
	unsigned max_open;
	int rc;

	if (!opts->dir || opts->nloops < 0)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->st = st;
	c->nloops = opts->nloops;
	c->ring_depth = opts->ring_depth ? opts->ring_depth
					 : CACHE_DEFAULT_RING_DEPTH;
	/* One round of a synced write takes 3 SQEs (write, data, dir). */
	if (c->ring_depth < CACHE_MIN_RING_DEPTH)
		c->ring_depth = CACHE_MIN_RING_DEPTH;
	c->fetch_chunk = opts->fetch_chunk ? opts->fetch_chunk
					   : CACHE_DEFAULT_FETCH_CHUNK;
	c->fetch_threads = opts->fetch_threads > 0 ? opts->fetch_threads
						   : CACHE_DEFAULT_FETCH_THREADS;
	max_open = opts->max_open ? opts->max_open : CACHE_DEFAULT_MAX_OPEN;
	c->fdtab_cap = (max_open + CACHE_FDTAB_SHARDS - 1) / CACHE_FDTAB_SHARDS;

	rc = dirs_open(c, opts->dir);
	if (rc)
		goto out_free;
	cache_fdtab_init(c);
	rc = cache_loops_init(c);
	if (rc)
		goto out_fdtab;
	rc = cache_fetch_init(c);
	if (rc)
		goto out_loops;
	*out = c;
	return 0;

out_loops:
	cache_loops_destroy(c);
out_fdtab:
	cache_fdtab_destroy(c);
	dirs_close(c);
out_free:
	free(c);
	return rc;
}

void cache_close(struct cache *c)
{
	if (!c)
		return;
	/* Fetches first: finishing one posts completions to the loops. */
	cache_fetch_destroy(c);
	cache_loops_destroy(c);
	cache_fdtab_destroy(c);
	dirs_close(c);
	free(c);
}

int cache_create(struct cache *c, uint64_t ino)
{
	char name[CACHE_NAME_MAX];
	int fd;

	cache_fetch_cancel(c, ino);
	cache_name(ino, name);
	fd = openat(cache_dirfd(c, ino), name,
		    O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	cache_dir_changed(c, ino);
	cache_fd_install(c, ino, fd);
	return 0;
}

int cache_truncate(struct cache *c, uint64_t ino, uint64_t size)
{
	struct cache_fd *f;
	int rc;

	if (size > INT64_MAX)
		return -EFBIG;
	rc = cache_fd_get(c, ino, &f);
	if (rc)
		return rc;
	if (ftruncate(f->fd, (off_t)size) < 0)
		rc = -errno;
	cache_fd_put(f);
	return rc;
}

int cache_stat(struct cache *c, uint64_t ino, struct cache_stat *out)
{
	struct cache_fd *f;
	struct stat sb;
	int rc;

	rc = cache_fd_get(c, ino, &f);
	if (rc)
		return rc;
	if (fstat(f->fd, &sb) < 0) {
		rc = -errno;
	} else {
		out->size = (uint64_t)sb.st_size;
		out->blocks_bytes = (uint64_t)sb.st_blocks * 512;
		out->mtime = sb.st_mtim;
		out->ctime = sb.st_ctim;
	}
	cache_fd_put(f);
	return rc;
}

int cache_set_mtime(struct cache *c, uint64_t ino, const struct timespec *mt)
{
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, *mt };
	struct cache_fd *f;
	int rc;

	rc = cache_fd_get(c, ino, &f);
	if (rc)
		return rc;
	if (futimens(f->fd, ts) < 0)
		rc = -errno;
	cache_fd_put(f);
	return rc;
}

int cache_drop(struct cache *c, uint64_t ino)
{
	char name[CACHE_NAME_MAX];
	int rc = 0;

	cache_fetch_cancel(c, ino);
	cache_name(ino, name);
	/* Unlink before forgetting: a racing open then fails (fdtab.c). */
	if (unlinkat(cache_dirfd(c, ino), name, 0) < 0) {
		if (errno != ENOENT)
			rc = -errno;
	} else {
		cache_dir_changed(c, ino);
		metrics_inc(MET_CACHE_EVICTIONS); /* metrics */
	}
	cache_fd_forget(c, ino);
	return rc;
}

bool cache_is_local(struct cache *c, uint64_t ino)
{
	struct cache_fd *f;

	/* Opening it now is not wasted: the caller reads it next. */
	if (cache_fd_get(c, ino, &f))
		return false;
	cache_fd_put(f);
	return true;
}

int cache_open_fd(struct cache *c, uint64_t ino, int *fd)
{
	char name[CACHE_NAME_MAX];
	int rc;

	cache_name(ino, name);
	rc = openat(cache_dirfd(c, ino), name, O_RDONLY | O_CLOEXEC);
	if (rc < 0)
		return errno == ENOENT ? -ENODATA : -errno;
	*fd = rc;
	return 0;
}
