/*
 * cache/cache_int.h - what the files of cache/ share; not for other rooms.
 *
 * struct cache is the whole state of one cache (no globals): the directory
 * fds, the shared fd table (fdtab.c), one io_uring ring and completion list
 * per event loop (ring.c) and the fetch worker pool (fetch.c).
 */
#ifndef MAPFS_CACHE_INT_H
#define MAPFS_CACHE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <liburing.h>

#include "cache/cache.h"

#define CACHE_NDIRS 256       /* shard directories XX = low byte of ino */
#define CACHE_NAME_MAX 40     /* "INO" or "INO.N": 16 hex digits, ".", u64 */
#define CACHE_FDTAB_SHARDS 64 /* fd table shards, each with its own mutex */
#define CACHE_FDTAB_BUCKETS 256 /* hash chains per shard */

/*
 * One open cache file.  The table holds one reference while the entry is
 * in it; every operation holds one for the duration of its I/O.  The fd
 * is closed when the last reference goes, so replacing or removing an
 * entry never pulls the fd from under an operation in flight.
 */
struct cache_fd {
	uint64_t ino;
	int fd;
	atomic_int refs;
	struct cache_fd *hnext;             /* hash chain */
	struct cache_fd *lru_prev, *lru_next; /* head = most recently used */
};

struct cache_fdshard {
	pthread_mutex_t lock;
	/*
	 * Bumped by every replace or remove.  An acquire that opened a file
	 * without the lock inserts it only if gen did not move meanwhile, so
	 * an fd of a file that was dropped or replaced never enters the
	 * table.
	 */
	uint64_t gen;
	unsigned count;
	struct cache_fd *lru_head, *lru_tail;
	struct cache_fd *buckets[CACHE_FDTAB_BUCKETS];
};

/*
 * A completion to deliver: done(arg, result) on loop `loop`, or inline
 * when loop < 0.  malloc'd; freed by whoever delivers it.
 */
struct cache_compl {
	struct cache_compl *next;
	cache_done_fn done;
	void *arg;
	long result;
	int loop;
};

struct cache_req; /* one ring operation (ring.c) */

/* Per event loop: touched only by that loop's thread, except compl_*. */
struct cache_loop {
	struct io_uring ring;
	int efd;            /* eventfd: ring CQEs and posted completions */
	unsigned inflight;  /* CQEs the ring still owes us */
	unsigned cq_cap;    /* never expect more CQEs than the CQ holds */
	struct cache_req *backlog_head, *backlog_tail; /* waiting for CQ room */
	pthread_mutex_t compl_lock;
	struct cache_compl *compl_head, *compl_tail;
};

struct cache_fetch_job; /* fetch.c */
struct cache_worker;    /* fetch.c */

struct cache {
	struct store *st;
	int nloops;
	unsigned ring_depth;
	size_t fetch_chunk;
	int fetch_threads;
	unsigned fdtab_cap; /* per shard */

	int rootfd, tmpfd;
	int dirfd[CACHE_NDIRS];
	/*
	 * Per shard directory: how often its names changed (create,
	 * rename into place, unlink) and the count its last fsync covered;
	 * a sync fsyncs the directory only when they differ.  Per directory
	 * rather than per inode, so nothing is forgotten when an fd leaves
	 * the table; the price is a rare extra directory fsync.
	 */
	atomic_uint_fast64_t dir_changes[CACHE_NDIRS];
	atomic_uint_fast64_t dir_synced[CACHE_NDIRS];
	atomic_uint_fast64_t tmp_seq; /* N of DIR/tmp/INO.N */

	struct cache_fdshard fdtab[CACHE_FDTAB_SHARDS];

	struct cache_loop *loops;

	/* fetch.c: in-flight jobs by inode, task queue, workers. */
	pthread_mutex_t fetch_lock;
	pthread_cond_t fetch_idle; /* signalled when njobs drops to 0 */
	struct cache_fetch_job **jobs; /* hash of CACHE_FETCH_BUCKETS chains */
	unsigned njobs; /* jobs not finished, cancelled ones included */
	pthread_cond_t task_cond;
	/* Jobs with work for a worker: starting, or chunks not yet taken. */
	struct cache_fetch_job *queue_head, *queue_tail;
	bool workers_stop;
	struct cache_worker *workers;
	int nworkers;
};

/* cache.c: names and directory syncs. */
void cache_name(uint64_t ino, char buf[CACHE_NAME_MAX]);
static inline int cache_dirfd(const struct cache *c, uint64_t ino)
{
	return c->dirfd[ino & 0xff];
}
/* Note a name change in ino's shard directory (after the syscall). */
void cache_dir_changed(struct cache *c, uint64_t ino);
/* The change count a directory fsync started now would cover. */
uint64_t cache_dir_snapshot(struct cache *c, uint64_t ino);
/* Whether ino's shard directory has changes no fsync covered yet. */
bool cache_dir_needs_sync(struct cache *c, uint64_t ino);
/* Record that an fsync of ino's directory covered changes up to snap. */
void cache_dir_synced(struct cache *c, uint64_t ino, uint64_t snap);
/* fdatasync the file and, if needed, fsync its directory (blocking). */
int cache_sync_blocking(struct cache *c, struct cache_fd *f);

/* fdtab.c: the shared fd table. */
void cache_fdtab_init(struct cache *c);
void cache_fdtab_destroy(struct cache *c);
/* A reference to ino's open file, opening it if needed; -ENODATA if absent. */
int cache_fd_get(struct cache *c, uint64_t ino, struct cache_fd **out);
void cache_fd_put(struct cache_fd *f);
/* Make fd (now owned by the table) ino's file, replacing any entry. */
void cache_fd_install(struct cache *c, uint64_t ino, int fd);
/* Remove ino's entry if any. */
void cache_fd_forget(struct cache *c, uint64_t ino);

/* ring.c: loops. */
int cache_loops_init(struct cache *c);
void cache_loops_destroy(struct cache *c);
/* Deliver n (n->loop >= 0) on its loop; callable from any thread. */
void cache_post(struct cache *c, struct cache_compl *n);
/*
 * done(arg, result) through loop's list for loop >= 0, inline for loop < 0
 * (and, without memory for the list node, inline as a last resort).
 */
void cache_complete(struct cache *c, int loop, cache_done_fn done, void *arg,
		    long result);

/* fetch.c: workers and jobs. */
int cache_fetch_init(struct cache *c);
void cache_fetch_destroy(struct cache *c);
/* A fetch in flight for ino must not install its data (drop, create). */
void cache_fetch_cancel(struct cache *c, uint64_t ino);

#endif
