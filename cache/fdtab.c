/*
 * cache/fdtab.c - the shared table of open cache files (ino -> fd).
 *
 * Every loop and worker reads through the same table, so it is sharded by
 * inode hash with a mutex per shard, and the lock is held only to find,
 * insert or unlink an entry (never across a syscall).  References are
 * atomic: dropping one needs no lock, and the fd closes with the last.
 * Each shard keeps at most fdtab_cap entries, evicting the least recently
 * used entry that no operation holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "cache_int.h"

static uint64_t fd_hash(uint64_t ino)
{
	return ino * 0x9e3779b97f4a7c15ull;
}

static struct cache_fdshard *fd_shard(struct cache *c, uint64_t h)
{
	return &c->fdtab[(h >> 58) % CACHE_FDTAB_SHARDS];
}

static struct cache_fd **fd_bucket(struct cache_fdshard *s, uint64_t h)
{
	return &s->buckets[(h >> 32) % CACHE_FDTAB_BUCKETS];
}

static void lru_unlink(struct cache_fdshard *s, struct cache_fd *f)
{
	if (f->lru_prev)
		f->lru_prev->lru_next = f->lru_next;
	else
		s->lru_head = f->lru_next;
	if (f->lru_next)
		f->lru_next->lru_prev = f->lru_prev;
	else
		s->lru_tail = f->lru_prev;
	f->lru_prev = f->lru_next = NULL;
}

static void lru_push_head(struct cache_fdshard *s, struct cache_fd *f)
{
	f->lru_prev = NULL;
	f->lru_next = s->lru_head;
	if (s->lru_head)
		s->lru_head->lru_prev = f;
	else
		s->lru_tail = f;
	s->lru_head = f;
}

/* Find ino under the shard lock and take a reference. */
static struct cache_fd *fd_lookup_locked(struct cache_fdshard *s, uint64_t h,
					 uint64_t ino)
{
	for (struct cache_fd *f = *fd_bucket(s, h); f; f = f->hnext) {
		if (f->ino == ino) {
			atomic_fetch_add(&f->refs, 1);
			lru_unlink(s, f);
			lru_push_head(s, f);
			return f;
		}
	}
	return NULL;
}

/* Unlink ino's entry under the shard lock; the caller drops its table ref. */
static struct cache_fd *fd_unlink_locked(struct cache_fdshard *s, uint64_t h,
					 uint64_t ino)
{
	for (struct cache_fd **pp = fd_bucket(s, h); *pp; pp = &(*pp)->hnext) {
		struct cache_fd *f = *pp;

		if (f->ino == ino) {
			*pp = f->hnext;
			lru_unlink(s, f);
			s->count--;
			return f;
		}
	}
	return NULL;
}

/*
 * Insert f and evict unreferenced entries beyond the cap.  Victims are
 * chained on hnext and released by the caller after unlocking, so no
 * close(2) runs under the lock.
 */
static struct cache_fd *fd_insert_locked(struct cache *c,
					 struct cache_fdshard *s, uint64_t h,
					 struct cache_fd *f)
{
	struct cache_fd **b = fd_bucket(s, h), *victims = NULL, *v, *prev;

	f->hnext = *b;
	*b = f;
	lru_push_head(s, f);
	s->count++;
	for (v = s->lru_tail; v && s->count > c->fdtab_cap; v = prev) {
		prev = v->lru_prev;
		/* Only the table's reference: no operation uses it. */
		if (v != f && atomic_load(&v->refs) == 1) {
			fd_unlink_locked(s, fd_hash(v->ino), v->ino);
			v->hnext = victims;
			victims = v;
		}
	}
	return victims;
}

static void fd_put_chain(struct cache_fd *f)
{
	while (f) {
		struct cache_fd *next = f->hnext;

		cache_fd_put(f);
		f = next;
	}
}

static struct cache_fd *fd_new(uint64_t ino, int fd, int dfd, int refs)
{
	struct cache_fd *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->ino = ino;
	f->fd = fd;
	f->dfd = dfd;
	atomic_init(&f->refs, refs);
	return f;
}

/* The O_DIRECT twin of ino's file name (opts.direct), or -1. */
static int dfd_open(struct cache *c, uint64_t ino, const char *name)
{
	if (!c->direct)
		return -1;
	return openat(cache_dirfd(c, ino), name, O_RDWR | O_DIRECT | O_CLOEXEC);
}

static void fd_close(int fd, int dfd)
{
	close(fd);
	if (dfd >= 0)
		close(dfd);
}

void cache_fdtab_init(struct cache *c)
{
	for (int i = 0; i < CACHE_FDTAB_SHARDS; i++)
		pthread_mutex_init(&c->fdtab[i].lock, NULL);
}

/* At close no operation is in flight: only table references remain. */
void cache_fdtab_destroy(struct cache *c)
{
	for (int i = 0; i < CACHE_FDTAB_SHARDS; i++) {
		struct cache_fdshard *s = &c->fdtab[i];
		struct cache_fd *f, *next;

		for (f = s->lru_head; f; f = next) {
			next = f->lru_next;
			cache_fd_put(f);
		}
		pthread_mutex_destroy(&s->lock);
	}
}

int cache_fd_get(struct cache *c, uint64_t ino, struct cache_fd **out)
{
	uint64_t h = fd_hash(ino), gen;
	struct cache_fdshard *s = fd_shard(c, h);
	struct cache_fd *f, *victims;
	char name[CACHE_NAME_MAX];
	int fd, dfd;

	for (;;) {
		pthread_mutex_lock(&s->lock);
		f = fd_lookup_locked(s, h, ino);
		gen = s->gen;
		pthread_mutex_unlock(&s->lock);
		if (f) {
			*out = f;
			return 0;
		}
		cache_name(ino, name);
		fd = openat(cache_dirfd(c, ino), name, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return errno == ENOENT ? -ENODATA : -errno;
		/* Without its twin the file is served buffered. */
		dfd = dfd_open(c, ino, name);
		pthread_mutex_lock(&s->lock);
		if (s->gen != gen) {
			/* Replaced or dropped while we opened: look again. */
			pthread_mutex_unlock(&s->lock);
			fd_close(fd, dfd);
			continue;
		}
		f = fd_lookup_locked(s, h, ino);
		if (f) {
			/* Another thread opened it first; keep theirs. */
			pthread_mutex_unlock(&s->lock);
			fd_close(fd, dfd);
			*out = f;
			return 0;
		}
		/* The table's and the caller's references. */
		f = fd_new(ino, fd, dfd, 2);
		if (!f) {
			pthread_mutex_unlock(&s->lock);
			fd_close(fd, dfd);
			return -ENOMEM;
		}
		victims = fd_insert_locked(c, s, h, f);
		pthread_mutex_unlock(&s->lock);
		fd_put_chain(victims);
		*out = f;
		return 0;
	}
}

void cache_fd_put(struct cache_fd *f)
{
	if (atomic_fetch_sub(&f->refs, 1) == 1) {
		fd_close(f->fd, f->dfd);
		free(f);
	}
}

/*
 * Without memory for an entry the old one is still removed and fd closed:
 * the next cache_fd_get() opens the file again, so nothing stale remains.
 */
void cache_fd_install(struct cache *c, uint64_t ino, int fd, const char *name)
{
	uint64_t h = fd_hash(ino);
	struct cache_fdshard *s = fd_shard(c, h);
	int dfd = dfd_open(c, ino, name);
	struct cache_fd *old, *victims = NULL, *f = fd_new(ino, fd, dfd, 1);

	pthread_mutex_lock(&s->lock);
	s->gen++;
	old = fd_unlink_locked(s, h, ino);
	if (f)
		victims = fd_insert_locked(c, s, h, f);
	pthread_mutex_unlock(&s->lock);
	if (!f)
		fd_close(fd, dfd);
	if (old)
		cache_fd_put(old);
	fd_put_chain(victims);
}

struct cache_fd *cache_fd_forget_take(struct cache *c, uint64_t ino)
{
	uint64_t h = fd_hash(ino);
	struct cache_fdshard *s = fd_shard(c, h);
	struct cache_fd *old;

	pthread_mutex_lock(&s->lock);
	s->gen++;
	old = fd_unlink_locked(s, h, ino);
	pthread_mutex_unlock(&s->lock);
	return old;
}

void cache_fd_forget(struct cache *c, uint64_t ino)
{
	struct cache_fd *old = cache_fd_forget_take(c, ino);

	if (old)
		cache_fd_put(old);
}
