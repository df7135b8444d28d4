/*
 * cache/spare.c - recycled cache files.
 *
 * A dropped cache file is not unlinked when nothing can still touch it:
 * it is renamed into <cache>/spare, emptied, and the next new cache file
 * is that inode renamed into place.  Every small file written through
 * the gateway otherwise costs the cache disk an inode allocation and a
 * free; on ext4 the allocator also passes over every inode freed in the
 * last minutes (recently_deleted(): 60 s, 360 s while the inode's table
 * block is dirty), looking each one up, so under a create/remove churn
 * each new file cost more the longer it ran: 45% of an event loop's time
 * in a small-file benchmark here (bench/RESULTS.md).  A rename costs
 * neither.
 *
 * "Nothing can still touch it": the entry retired by the drop was its
 * last reference (no read, write, fetch, settle or eviction in flight:
 * each holds the entry), the fd table's descriptor had no user, and no
 * upload holds a descriptor from cache_open_fd().  The file is renamed
 * away first, so no one can open it by name after the check.  Otherwise
 * it is unlinked as before, and late writes land in an orphan.
 *
 * Files in spare/ are garbage by definition: one that is not empty (a
 * crash between the rename and the truncation) is emptied when taken,
 * and at startup one with a second link (a rename half-written by a
 * file system without a journal) is unlinked rather than reused.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_int.h"
#include "common/log.h"

#define SPARE_DIR "spare"

static void spare_name(uint32_t id, char buf[16])
{
	snprintf(buf, 16, "s%u", id);
}

/* Keep spare id, or unlink it when the pool is full. */
static void spare_push_locked(struct cache *c, uint32_t id)
{
	char name[16];

	if (c->nspare < CACHE_SPARE_MAX) {
		c->spare[c->nspare++] = id;
		return;
	}
	spare_name(id, name);
	unlinkat(c->sparefd, name, 0);
}

int cache_spare_init(struct cache *c)
{
	struct dirent *d;
	DIR *dir;
	int fd;

	pthread_mutex_init(&c->spare_lock, NULL);
	c->sparefd = -1;
	if (mkdirat(c->rootfd, SPARE_DIR, 0700) < 0 && errno != EEXIST)
		return -errno;
	c->sparefd = openat(c->rootfd, SPARE_DIR,
			    O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->sparefd < 0)
		return -errno;
	/* A second fd: closedir() closes the one it reads. */
	fd = dup(c->sparefd);
	dir = fd < 0 ? NULL : fdopendir(fd);
	if (!dir) {
		if (fd >= 0)
			close(fd);
		return 0; /* an empty pool; it fills as files are dropped */
	}
	while ((d = readdir(dir))) {
		struct stat sb;
		char *end;
		unsigned long id;

		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		id = d->d_name[0] == 's' ? strtoul(d->d_name + 1, &end, 10) : 0;
		if (d->d_name[0] != 's' || *end || id > UINT32_MAX ||
		    fstatat(c->sparefd, d->d_name, &sb, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(sb.st_mode) || sb.st_nlink != 1) {
			unlinkat(c->sparefd, d->d_name, 0);
			continue;
		}
		if (id >= c->spare_next)
			c->spare_next = (uint32_t)id + 1;
		spare_push_locked(c, (uint32_t)id);
	}
	closedir(dir);
	return 0;
}

void cache_spare_destroy(struct cache *c)
{
	if (c->sparefd >= 0)
		close(c->sparefd);
	free(c->priv);
	pthread_mutex_destroy(&c->spare_lock);
}

int cache_spare_take(struct cache *c, int dirfd, const char *name)
{
	char sname[16];
	struct stat sb;
	uint32_t id;
	int fd;

	for (;;) {
		pthread_mutex_lock(&c->spare_lock);
		if (!c->nspare) {
			pthread_mutex_unlock(&c->spare_lock);
			return -ENOENT;
		}
		id = c->spare[--c->nspare];
		pthread_mutex_unlock(&c->spare_lock);
		spare_name(id, sname);
		/* Replaces a leftover file of that name: an fd still open on
		 * it keeps writing to that one, never into this. */
		if (renameat(c->sparefd, sname, dirfd, name) == 0)
			break;
		if (errno != ENOENT)
			return -errno;
		/* Gone behind our back: try the next one. */
	}
	fd = openat(dirfd, name, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Emptied when it was dropped, unless a crash came in between;
	 * its times must be the new file's (the authority while dirty). */
	if (fstat(fd, &sb) < 0 || (sb.st_size && ftruncate(fd, 0) < 0) ||
	    futimens(fd, NULL) < 0) {
		int rc = -errno;

		close(fd);
		unlinkat(dirfd, name, 0);
		return rc;
	}
	return fd;
}

/* Does an upload hold a cache_open_fd() descriptor of ino? */
static bool priv_open_locked(const struct cache *c, uint64_t ino)
{
	for (size_t i = 0; i < c->npriv; i++)
		if (c->priv[i] == ino)
			return true;
	return false;
}

bool cache_spare_give(struct cache *c, int dirfd, const char *name,
		      uint64_t ino, struct cache_ent *e)
{
	struct cache_fd *old;
	char sname[16];
	uint32_t id;
	bool idle;
	int fd;

	pthread_mutex_lock(&c->spare_lock);
	if (c->nspare >= CACHE_SPARE_MAX || c->sparefd < 0) {
		pthread_mutex_unlock(&c->spare_lock);
		return false;
	}
	id = c->spare_next++;
	pthread_mutex_unlock(&c->spare_lock);
	spare_name(id, sname);
	if (renameat(dirfd, name, c->sparefd, sname) < 0)
		return false; /* no such file (-> nothing to unlink) or worse */
	/* From here no one opens it by name; who holds it already shows. */
	old = cache_fd_forget_take(c, ino);
	pthread_mutex_lock(&c->spare_lock);
	idle = (!e || atomic_load(&e->refs) == 1) &&
	       (!old || atomic_load(&old->refs) == 1) &&
	       !priv_open_locked(c, ino);
	pthread_mutex_unlock(&c->spare_lock);
	if (idle) {
		fd = old ? old->fd
			 : openat(c->sparefd, sname, O_WRONLY | O_CLOEXEC);
		idle = fd >= 0 && ftruncate(fd, 0) == 0;
		if (!old && fd >= 0)
			close(fd);
	}
	if (old)
		cache_fd_put(old);
	if (!idle) {
		unlinkat(c->sparefd, sname, 0);
		return true;
	}
	pthread_mutex_lock(&c->spare_lock);
	spare_push_locked(c, id);
	pthread_mutex_unlock(&c->spare_lock);
	return true;
}

int cache_priv_add(struct cache *c, uint64_t ino)
{
	int rc = 0;

	pthread_mutex_lock(&c->spare_lock);
	if (c->npriv == c->priv_cap) {
		size_t cap = c->priv_cap ? 2 * c->priv_cap : 16;
		uint64_t *n = realloc(c->priv, cap * sizeof(*n));

		if (!n) {
			rc = -ENOMEM;
			goto out;
		}
		c->priv = n;
		c->priv_cap = cap;
	}
	c->priv[c->npriv++] = ino;
out:
	pthread_mutex_unlock(&c->spare_lock);
	return rc;
}

void cache_priv_del(struct cache *c, uint64_t ino)
{
	pthread_mutex_lock(&c->spare_lock);
	for (size_t i = 0; i < c->npriv; i++)
		if (c->priv[i] == ino) {
			c->priv[i] = c->priv[--c->npriv];
			break;
		}
	pthread_mutex_unlock(&c->spare_lock);
}
