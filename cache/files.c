/*
 * cache/files.c - the bottom of cache/: cache file names (DIR/XX/INO) and
 * the durability of the shard directories: a change to a directory's
 * entries is counted, and a sync covers the changes counted before it,
 * so one fsync of a directory serves every file created meanwhile.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "cache_int.h"
#include "metrics/metrics.h"

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

/* fd's data (with times: and its times too) and its name durable. */
static int fd_durable(struct cache *c, uint64_t ino, int fd, bool times)
{
	uint64_t snap;

	/* Unflushed, a file is as durable as its journal: the kernel has
	 * it, and a crash of the machine drops them both. */
	if (c->unflushed)
		return 0;
	metrics_inc(MET_FLUSH_FILE);
	if ((times ? fsync(fd) : fdatasync(fd)) < 0)
		return -errno;
	if (!cache_dir_needs_sync(c, ino))
		return 0;
	snap = cache_dir_snapshot(c, ino);
	metrics_inc(MET_FLUSH_DIR);
	if (fsync(cache_dirfd(c, ino)) < 0)
		return -errno;
	cache_dir_synced(c, ino, snap);
	return 0;
}

/* See cache.h. */
int cache_fd_durable(struct cache *c, uint64_t ino, int fd)
{
	return fd_durable(c, ino, fd, false);
}

/* See cache_int.h. */
int cache_fd_durable_all(struct cache *c, uint64_t ino, int fd)
{
	return fd_durable(c, ino, fd, true);
}

int cache_sync_blocking(struct cache *c, struct cache_fd *f)
{
	return cache_fd_durable(c, f->ino, f->fd);
}
