/*
 * cache/cache.h - file data on the local NVMe cache.
 *
 * Bytes only, never names: the cache knows inode numbers and, when it must
 * fetch, an opaque object reference (key, size, etag) handed down by fs/.
 * Each inode's data lives in one cache file named by its inode number
 * (STATE/cache/XX/INO), so no name a client sends can reach the disk.
 * A cache file exists only when it holds the inode's complete current
 * data ("local"); a fetch writes a temp file and renames it into place.
 *
 * Event-loop I/O: every loop has its own io_uring ring.  Asynchronous calls
 * take the caller's loop index and complete on that loop (main wires the
 * ring's eventfd into the loop with rpc_server_watch()).  With loop < 0
 * (worker threads) the call runs synchronously and completes inline.
 * With loop >= 0, done never runs inside the call, errors included: it
 * runs from cache_loop_poll() on that loop (only a loop index out of
 * range, or no memory for the completion, is answered inline).
 * Completion callbacks get a result >= 0 (bytes, or 0) or -errno.
 */
#ifndef MAPFS_CACHE_H
#define MAPFS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct store;
struct cache;

struct cache_opts {
	const char *dir;      /* cache directory (created if missing) */
	int nloops;           /* number of event loops that will call in */
	unsigned ring_depth;  /* io_uring entries per loop (default 256) */
	size_t fetch_chunk;   /* ranged GET size for fetches (default 1 MiB) */
	int fetch_threads;    /* worker threads for store fetches (default 8) */
	unsigned max_open;    /* open cache files kept (default 4096; rounded
				 up to a multiple of 64, exceeded only while
				 every open file is in use) */
};

/* What to fetch: the object behind an inode (owned by the caller). */
struct cache_obj {
	const char *key; /* store key */
	uint64_t size;   /* object size in bytes */
};

struct cache_stat {
	uint64_t size;
	uint64_t blocks_bytes; /* disk bytes used */
	struct timespec mtime, ctime;
};

typedef void (*cache_done_fn)(void *arg, long result);

/*
 * Open the cache in opts->dir over store st (not owned; it must outlive
 * the cache).  Leftovers of fetches cut short by a crash are removed.
 * Starts the fetch workers.  Returns 0 or -errno (e.g. io_uring missing).
 */
int cache_open(const struct cache_opts *opts, struct store *st,
	       struct cache **out);

/*
 * Wait for fetches in flight, then for ring operations; completions not
 * yet delivered by cache_loop_poll() run here, on the calling thread
 * (call it after the loops stopped).  Closes rings and files, frees.
 */
void cache_close(struct cache *c);

/*
 * eventfd of loop `loop` (owned by the cache, valid until cache_close;
 * -EINVAL for a bad loop), and the function that reaps it: it runs the
 * done callbacks of that loop's finished operations.  Loop k's ring has
 * no lock: cache calls with loop k and cache_loop_poll(c, k) must all
 * come from loop k's thread.
 */
int cache_loop_fd(struct cache *c, int loop);
void cache_loop_poll(void *cache, int loop); /* matches rpc_watch_fn */

/*
 * Read up to len bytes at off from inode ino's local data into buf (owned
 * by the caller, valid until done).  done(arg, bytes read, 0 at EOF) or
 * -ENODATA when the inode is not local (fetch it first).
 */
void cache_read(struct cache *c, int loop, uint64_t ino, uint64_t off,
		size_t len, void *buf, cache_done_fn done, void *arg);

/*
 * Write len bytes at off into inode ino's local data.  With sync, the data
 * is on stable storage before done.  done(arg, len) or -ENODATA when the
 * inode is not local, -ENOSPC, -EIO.
 */
void cache_write(struct cache *c, int loop, uint64_t ino, uint64_t off,
		 const void *buf, size_t len, bool sync, cache_done_fn done,
		 void *arg);

/*
 * Make ino's local data stable (data and the file's name): done(arg, 0),
 * or -ENODATA, -EIO.  A synced cache_write() covers the name as well.
 */
void cache_sync(struct cache *c, int loop, uint64_t ino, cache_done_fn done,
		void *arg);

/*
 * Make inode ino local by fetching obj from the store (parallel ranged
 * GETs on worker threads).  obj is copied; it need not outlive the call.
 * Concurrent fetches of one inode share one download.  done(arg, 0) when
 * local, or -errno from the store (-ENOENT, -EAGAIN, ...), -EIO if the
 * object is shorter than obj->size, -EAGAIN if a cache_drop() or
 * cache_create() of ino overtook the fetch (retry it).  With loop < 0
 * the call blocks until the fetch is done.
 */
void cache_fetch(struct cache *c, int loop, uint64_t ino,
		 const struct cache_obj *obj, cache_done_fn done, void *arg);

/* Create empty local data for a new inode (replacing any).  0 or -errno. */
int cache_create(struct cache *c, uint64_t ino);

/* Set the local data's size.  -ENODATA if not local. */
int cache_truncate(struct cache *c, uint64_t ino, uint64_t size);

/* Size and times of the local data.  -ENODATA if not local. */
int cache_stat(struct cache *c, uint64_t ino, struct cache_stat *out);

/* Set the local data's mtime (SETATTR on a locally held file). */
int cache_set_mtime(struct cache *c, uint64_t ino, const struct timespec *mt);

/*
 * Forget ino's local data (removed, or changed in the store); cancels a
 * fetch in flight.  Fds from cache_open_fd() stay readable.  The unlink
 * is made durable by the next cache_sync() of an inode in its shard
 * directory, not by this call.  0 (also if not local) or -errno.
 */
int cache_drop(struct cache *c, uint64_t ino);

/* True if ino's data is local. */
bool cache_is_local(struct cache *c, uint64_t ino);

/*
 * Open ino's local data read-only for an upload; the caller closes *fd.
 * -ENODATA if not local.
 */
int cache_open_fd(struct cache *c, uint64_t ino, int *fd);

#endif
