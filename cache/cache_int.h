/*
 * cache/cache_int.h - what the files of cache/ share; not for other rooms.
 *
 * struct cache is the whole state of one cache (no globals): the directory
 * fds, the shared fd table (fdtab.c), the chunk state of every local inode
 * and its LMDB journal (chunks.c), one io_uring ring (ring.c) and
 * completion list (compl.c) per event loop, the fetch tasks (tasks.c) and
 * worker pool (fetch.c) and the evictor (evict.c).
 *
 * The files are layers, each calling only those below it (the order is
 * written once, in docs/ARCHITECTURE.md, and tests/arrows.sh checks it):
 * files, compl, fdtab, spare (their calls are here), then chunks, tasks,
 * evict, settle, fetch, pin, ring and cache.c on top, each offering the
 * files above it what its own X_int.h declares.
 *
 * Lock order: attach_lock, an entry's land_lock -> an entry shard's lock
 * -> fetch_lock, a loop's compl_lock, db/'s queue lock.  No syscall runs under a shard lock.
 */
#ifndef MAPFS_CACHE_INT_H
#define MAPFS_CACHE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <liburing.h>

#include "cache.h"
#include "db/db.h"
#include "s3/store.h"

#define CACHE_NDIRS 256         /* shard directories XX = low byte of ino */
#define CACHE_NAME_MAX 24       /* "INO": 16 hex digits */
#define CACHE_SPARE_MAX 4096    /* emptied cache files kept for reuse */
#define CACHE_ENT_SHARDS 64     /* chunk-state table shards */
#define CACHE_ENT_BUCKETS 1024  /* hash chains per shard */
#define CACHE_FDTAB_SHARDS 64   /* fd table shards, each with its own mutex */
#define CACHE_FDTAB_BUCKETS 256 /* hash chains per shard */
#define CACHE_REQS_KEEP 256     /* finished ring requests kept per loop */
#define CACHE_DIO_ALIGN 4096u   /* O_DIRECT: offsets, lengths, memory */
#define CACHE_DIO_BUFS 16u      /* registered write buffers per loop */
#define CACHE_DIO_BUF ((size_t)1 << 20) /* ... of this size (wtmax) */

/*
 * One open cache file.  The table holds one reference while the entry is
 * in it; every operation holds one for the duration of its I/O.  The fd
 * is closed when the last reference goes, so replacing or removing an
 * entry never pulls the fd from under an operation in flight.
 */
struct cache_fd {
	uint64_t ino;
	int fd;
	int dfd; /* the same file with O_DIRECT (opts.direct), else -1 */
	atomic_int refs;
	struct cache_fd *hnext;               /* hash chain */
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

/*
 * Chunk state, one byte per chunk.  PRESENT and DIRTY are journaled in
 * LMDB; BUSY and REF live only in memory.
 */
enum {
	CH_PRESENT = 1u << 0, /* its bytes are in the cache file */
	CH_DIRTY = 1u << 1,   /* written here, not yet in the store */
	CH_BUSY = 1u << 2,    /* a fetch or an eviction owns it: wait.  A
				 fetched chunk is PRESENT (readable) and still
				 BUSY until its bytes are durable and its
				 record is journaled (settle.c) */
	CH_REF = 1u << 3,     /* CLOCK: used since the hand last passed */
};

/* A caller of cache_fetch waiting for chunks [cur, last] (fetch.c). */
struct cache_wait {
	struct cache_wait *next;
	uint64_t cur, last;
	bool for_write;
	uint64_t wr_off, wr_end; /* for_write: the bytes being written */
	struct cache_compl *answer;
};

/*
 * One local inode.  refs: the table's, each queued fetch task's, each
 * read in flight's.  Fields below `lock held` are guarded by the entry's
 * shard lock.
 */
struct cache_ent {
	struct cache_ent *hnext;
	uint64_t ino;
	atomic_int refs;
	atomic_int pins; /* reads in flight: the evictor keeps off */
	/* Held by a fetch worker from its last check to its restored
	 * mtime, and by cache_truncate: no fetched range lands past a new
	 * end of file, and fetches landing together cannot leave each
	 * other's mtime behind. */
	pthread_mutex_t land_lock;
	atomic_uint_fast64_t j_dur; /* journal ops durable (by seq) */
	/* Bumped when a write starts and ends, and by truncates. */
	atomic_uint_fast64_t wseq;
	/* Writes marked and not yet unmarked, and changes begun and not
	 * done (cache_change_begin): cache_clean waits them out. */
	atomic_uint writing;
	/* The lowest offset a write landed at, or a truncate cut to, since
	 * cache_written_low() last asked (UINT64_MAX: none; a new entry:
	 * 0, all of it new).  Set after the bytes are in the file. */
	atomic_uint_fast64_t low_written;
	/* The end of the furthest write landed (cut back by truncates). */
	atomic_uint_fast64_t end_written;
	/* Under the shard lock: cleanings (cache_clean) so far, and how
	 * many the namespace had seen when it last recorded the file dirty
	 * (cache_marked).  Unequal: the record may be clean by now, so a
	 * write must have it marked first (cache_write_mark: -EUCLEAN). */
	uint64_t clean_epoch, marked_epoch;
	/* Bumped after anything changed the cache file's size, times or
	 * blocks (cache_ent_touched): the stat snapshot is good while it
	 * is what it was before that snapshot's fstat. */
	atomic_uint_fast64_t sgen;
	/* lock held: */
	bool dead;      /* dropped or replaced: nothing may land */
	uint64_t limit; /* bytes that may come from the store */
	uint64_t epoch; /* bumped by truncate: older fetches void */
	uint64_t j_sub; /* journal ops submitted */
	uint8_t *st;    /* chunk states; nst of them */
	uint32_t nst;
	uint32_t hand; /* CLOCK hand */
	bool snap_ok;  /* snap holds the fstat of sgen == snap_gen */
	uint64_t snap_gen;
	struct cache_stat snap;
	char *key; /* the object last fetched from (readahead) */
	char etag[STORE_ETAG_MAX]; /* its version fetches pin ("": none) */
	uint64_t ra_next, ra_last, ra_win; /* sequential-read detection */
	struct cache_wait *waiters;
};

struct cache_entshard {
	pthread_mutex_t lock;
	struct cache_ent *buckets[CACHE_ENT_BUCKETS];
};

/* A chunk of an entry to fetch (fetch.c); holds a reference on ent. */
struct cache_task {
	struct cache_task *next;
	struct cache_ent *ent;
	uint32_t idx;
	uint64_t epoch;
	char *key;
	char etag[STORE_ETAG_MAX]; /* the version to GET ("": any) */
	uint64_t queued_ns;        /* when it joined the fetch queue */
};

struct cache_req; /* one ring operation (ring.c) */

/* Per event loop: touched only by that loop's thread, except compl_*. */
struct cache_loop {
	struct io_uring ring;
	int efd;           /* eventfd: ring CQEs and posted completions */
	unsigned inflight; /* CQEs the ring still owes us */
	unsigned cq_cap;   /* never expect more CQEs than the CQ holds */
	struct cache_req *backlog_head, *backlog_tail; /* waiting for CQ room */
	struct cache_req *free_reqs; /* finished requests, for reuse */
	unsigned nfree_reqs;
	/* opts.direct: buffers registered with the ring, for writes whose
	 * data is not block-aligned in memory; free ones as a stack. */
	void *dbuf; /* CACHE_DIO_BUFS of CACHE_DIO_BUF bytes */
	unsigned dfree[CACHE_DIO_BUFS];
	unsigned ndfree;
	pthread_mutex_t compl_lock;
	struct cache_compl *compl_head, *compl_tail;
};

struct cache_fetch_job; /* fetch.c */
struct cache_worker;    /* fetch.c */

struct cache {
	struct store *st;
	struct db *db;
	db_table dbi_chunks;
	int nloops;
	unsigned ring_depth;
	uint64_t cs;    /* chunk size */
	bool unflushed; /* as its journal (db_unflushed): files not flushed */
	uint64_t ra_max;
	uint64_t capacity, high, low; /* bytes; 0: no limit */
	int fetch_threads;
	unsigned fdtab_cap; /* per shard */
	bool direct;        /* opts.direct */

	int rootfd;
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

	struct cache_fdshard fdtab[CACHE_FDTAB_SHARDS];

	/* chunks.c: local inodes.  attach_lock serializes making and
	 * replacing entries (and their files), a rare event per inode. */
	pthread_mutex_t attach_lock;
	struct cache_entshard ents[CACHE_ENT_SHARDS];
	atomic_uint_fast64_t used, dirty; /* bytes of chunks */
	atomic_uint_fast64_t gets, evicted;

	struct cache_loop *loops;

	/* fetch.c: task queue and workers. */
	pthread_mutex_t fetch_lock;
	pthread_cond_t task_cond;
	pthread_cond_t fetch_idle; /* signalled when ntasks drops to 0 */
	struct cache_task *queue_head, *queue_tail;
	unsigned ntasks; /* queued, running or settling */
	bool workers_stop;
	struct cache_worker *workers;
	int nworkers;
	uint32_t get_chunks; /* most chunks one GET fetches */

	/* settle.c: fetched chunks waiting to be made durable. */
	pthread_mutex_t settle_lock;
	pthread_cond_t settle_cond;
	struct cache_task *settle_head, *settle_tail;
	bool settle_stop, settle_started;
	pthread_t settler;

	/* spare.c: emptied cache files to reuse (ids of spare/s<id>), and
	 * the inodes uploads hold cache_open_fd() descriptors of. */
	pthread_mutex_t spare_lock;
	int sparefd;
	uint32_t spare[CACHE_SPARE_MAX];
	unsigned nspare;
	uint32_t spare_next;
	uint64_t *priv;
	size_t npriv, priv_cap;

	/* evict.c */
	pthread_mutex_t evict_lock;
	pthread_cond_t evict_wake;
	bool evict_stop, evict_started;
	unsigned evict_shard; /* where the CLOCK sweep goes on */
	pthread_t evictor;
};

/* files.c: names and directory syncs. */
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
/* As cache_fd_durable, with the file's times (fsync, not fdatasync). */
int cache_fd_durable_all(struct cache *c, uint64_t ino, int fd);

/* fdtab.c: the shared fd table. */
void cache_fdtab_init(struct cache *c);
void cache_fdtab_destroy(struct cache *c);
/* A reference to ino's open file, opening it if needed; -ENODATA if absent. */
int cache_fd_get(struct cache *c, uint64_t ino, struct cache_fd **out);
void cache_fd_put(struct cache_fd *f);
/* Make fd (now owned by the table) ino's file, replacing any entry;
 * name is the file's (for its O_DIRECT twin). */
void cache_fd_install(struct cache *c, uint64_t ino, int fd, const char *name);
/* Remove ino's entry if any. */
void cache_fd_forget(struct cache *c, uint64_t ino);
/* The same, handing the table's reference on the removed entry (or NULL)
 * to the caller, who puts it. */
struct cache_fd *cache_fd_forget_take(struct cache *c, uint64_t ino);

/* spare.c: recycled cache files (see there); the pool is per cache. */
int cache_spare_init(struct cache *c);
void cache_spare_destroy(struct cache *c);
/* Rename a spare into dirfd/name and open it, empty with fresh times:
 * an fd, -ENOENT if the pool is empty, or -errno. */
int cache_spare_take(struct cache *c, int dirfd, const char *name);
/* For cache_drop (attach_lock held): move dirfd/name (ino's file, whose
 * retired entry e the caller still references, or NULL) out of its name,
 * into the pool if nothing can touch it any more, else unlinked; its fd
 * table entry is forgotten.  false: nothing done (no room, no file). */
bool cache_spare_give(struct cache *c, int dirfd, const char *name,
		      uint64_t ino, struct cache_ent *e);
/* Uploads' descriptors (cache_open_fd): a file one holds is not reused. */
int cache_priv_add(struct cache *c, uint64_t ino);
void cache_priv_del(struct cache *c, uint64_t ino);

/* compl.c: the loops' completion lists. */
/* Wake loop l's thread (its eventfd). */
void cache_loop_wake(struct cache_loop *l);
/* Deliver n (n->loop >= 0) on its loop; callable from any thread. */
void cache_post(struct cache *c, struct cache_compl *n);
/*
 * done(arg, result) through loop's list for loop >= 0, inline for loop < 0
 * (and, without memory for the list node, inline as a last resort).
 */
void cache_complete(struct cache *c, int loop, cache_done_fn done, void *arg,
		    long result);

/* Run loop l's queued completions (its thread, each poll). */
void cache_compl_drain(struct cache_loop *l);

/* The cache file of e changed (size, times, blocks): after the change. */
static inline void cache_ent_touched(struct cache_ent *e)
{
	atomic_fetch_add(&e->sgen, 1);
}
/* Chunk i can be read from the cache file. */
static inline bool cache_chunk_readable(const struct cache *c,
					const struct cache_ent *e, uint64_t i)
{
	return (i < e->nst && (e->st[i] & CH_PRESENT)) || i * c->cs >= e->limit;
}
/* Chunks [first, last] of a range of len bytes at off (len > 0). */
static inline void cache_chunk_span(const struct cache *c, uint64_t off,
				    uint64_t len, uint64_t *first,
				    uint64_t *last)
{
	*first = off / c->cs;
	*last = (off + len - 1) / c->cs;
}

#endif
