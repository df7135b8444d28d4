/*
 * cache/cache.h - file data on the local NVMe cache.
 *
 * Bytes only, never names: the cache knows inode numbers and, when it must
 * fetch, an opaque object reference (key, size) handed down by fs/.
 * Each inode's data lives in one sparse cache file named by its inode
 * number (STATE/cache/XX/INO), so no name a client sends can reach the
 * disk.  The file is cut in fixed-size chunks (opts.chunk_size); which
 * chunks are present and which are dirty is kept in the LMDB database
 * "chunks" (through db/) and mirrored in memory, so a READ hit checks a
 * bitmap, never LMDB.  A chunk is readable when it is present, or when it
 * lies wholly past the inode's "store limit" (the bytes that may still
 * come from the store: the object's size, lowered by truncation): such
 * bytes are holes or were written here, never fetched.
 *
 * An inode is "local" once the cache holds an entry for it (made by
 * cache_create or by a first cache_fetch); local does not mean complete.
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
struct db;
struct cache;
struct db_txn;

struct cache_opts {
	const char *dir;     /* cache directory (created if missing) */
	struct db *db;       /* holds the "chunks" database (not owned) */
	int nloops;          /* number of event loops that will call in */
	unsigned ring_depth; /* io_uring entries per loop (default 256) */
	size_t chunk_size;   /* cache and ranged-GET unit (default 1 MiB,
				 at least 4 KiB, a multiple of 4 KiB) */
	uint64_t readahead;  /* largest sequential readahead window
				 (default 64 MiB, at most capacity / 4;
				 below one chunk: none) */
	uint64_t capacity;   /* bytes of chunks kept (0: no limit) */
	unsigned high_pct;   /* evict above this % of capacity (default 95) */
	unsigned low_pct;    /* ... down to this % (default 85) */
	int fetch_threads;   /* worker threads for store fetches (default 8) */
	unsigned max_open;   /* open cache files kept (default 4096; rounded
				 up to a multiple of 64, exceeded only while
				 every open file is in use) */
	bool direct;         /* O_DIRECT for the loops' block-aligned reads
				 and writes (the page cache is bypassed; the
				 rest stays buffered, and Linux keeps the two
				 coherent); writes go through buffers
				 registered with each ring */
};

/* What to fetch: the object behind an inode (owned by the caller). */
struct cache_obj {
	const char *key; /* store key */
	uint64_t size;   /* object size in bytes */
	/* The version the cached bytes are of: every GET for the inode
	 * pins it (a GET of another version fails -ESTALE, so no file
	 * mixes two).  NULL or "": unknown, not pinned. */
	const char *etag;
};

struct cache_stat {
	uint64_t size;
	uint64_t blocks_bytes; /* disk bytes used */
	struct timespec mtime, ctime;
	uint64_t wseq; /* changes with every write and truncate */
};

/* What the cache holds, in bytes of chunks. */
struct cache_usage {
	uint64_t capacity; /* 0: no limit */
	uint64_t used;     /* present chunks, dirty ones included */
	uint64_t dirty;    /* dirty chunks (never evicted) */
	uint64_t gets;     /* ranged GETs issued since open */
	uint64_t evicted;  /* chunks evicted since open */
};

typedef void (*cache_done_fn)(void *arg, long result);

/*
 * Open the cache in opts->dir over store st and opts->db (neither owned;
 * both must outlive the cache).  The chunk state is loaded from LMDB, so
 * what was cached before a restart is served again without a download.
 * Starts the fetch workers and the evictor.  Returns 0 or -errno (e.g.
 * io_uring missing).
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
 * Operations started on a loop are queued on its ring, not submitted:
 * the loop calls cache_loop_flush() at the end of each iteration, which
 * submits them all in one system call and runs the completions already
 * there (a page-cache hit completes during the submit), so a batch of
 * READs costs one io_uring_enter and no wake-up.  Loop k's thread only.
 */
void cache_loop_flush(void *cache, int loop); /* matches rpc_watch_fn */

/*
 * Keep every chunk of ino from eviction until cache_unpin() (the entry is
 * made if missing, like cache_fetch() with an object of size bytes).  For
 * an upload: it reads the cache file for bytes that replace the store's,
 * and a chunk punched under it would read as zeros while its only other
 * copy is the object being replaced.  Pin first, then cache_fetch() what
 * is not local: a chunk being evicted at the pin is waited for and
 * fetched again.  0 or -errno; *out is the caller's to unpin.
 */
struct cache_pin;
int cache_pin(struct cache *c, uint64_t ino, uint64_t size,
	      struct cache_pin **out);
void cache_unpin(struct cache_pin *p);

/*
 * Read up to len bytes at off from inode ino's local data into buf (owned
 * by the caller, valid until done).  done(arg, bytes read, 0 at EOF) or
 * -ENODATA when a chunk of the range is not readable (cache_fetch it,
 * then read again).  A sequential reader gets readahead queued here.
 */
void cache_read(struct cache *c, int loop, uint64_t ino, uint64_t off,
		size_t len, void *buf, cache_done_fn done, void *arg);

/*
 * cache_read() into a pipe (write end pipe_fd, owned by the caller, with
 * room for the range's pages): the page-cache pages move into the pipe by
 * reference, no byte is copied.  Same results as cache_read().
 */
void cache_splice(struct cache *c, int loop, uint64_t ino, uint64_t off,
		  size_t len, int pipe_fd, cache_done_fn done, void *arg);

/*
 * Write len bytes at off into inode ino's local data; the chunks written
 * become present and dirty (journaled in LMDB).  With sync, the data and
 * that journal are on stable storage before done.  done(arg, len), or
 * -ENODATA when the inode is not local or a chunk the write covers only
 * in part is not readable (cache_fetch(..., for_write) first), -EUCLEAN
 * (nothing written) when ino was cleaned (cache_clean) since the
 * namespace last said it is dirty (cache_marked): its record may be
 * clean now, and must be marked dirty again first, -ENOSPC, -EIO.
 */
void cache_write(struct cache *c, int loop, uint64_t ino, uint64_t off,
		 const void *buf, size_t len, bool sync, cache_done_fn done,
		 void *arg);

/*
 * Make ino's local data stable (data, the file's name and the chunk
 * journal): done(arg, 0), or -ENODATA, -EIO.  A synced cache_write()
 * covers all of that as well.
 */
/*
 * Make every cache file's data and name durable at once (syncfs of the
 * cache's file system, one flush however many files) and the chunk
 * journal's records queued so far (a durable database commit): what an
 * async export's window ends with.  Blocks; any thread but a loop's.
 * 0 or -errno.
 */
int cache_sync_all(struct cache *c);

void cache_sync(struct cache *c, int loop, uint64_t ino, cache_done_fn done,
		void *arg);

/*
 * Make bytes [off, off+len) of inode ino readable, fetching the missing
 * chunks of obj with parallel ranged GETs on worker threads (len 0 only
 * makes ino local: an entry whose store limit is obj->size).  With
 * for_write, only the chunks the range covers in part are fetched (a
 * write replaces the others whole).  obj is copied; it need not outlive
 * the call; an inode already local keeps its own store limit.  A chunk
 * in flight is fetched once for all who wait on it.  done(arg, 0), or
 * -errno from the store (-ENOENT, -EAGAIN, ...), -EIO if the object is
 * shorter than expected, -EAGAIN if a cache_drop() or cache_create() of
 * ino overtook the fetch (retry it).  With loop < 0 the call blocks.
 */
void cache_fetch(struct cache *c, int loop, uint64_t ino,
		 const struct cache_obj *obj, uint64_t off, uint64_t len,
		 bool for_write, cache_done_fn done, void *arg);

/*
 * True if bytes [off, off+len) of ino are known to equal the store
 * object's: no dirty chunk there and all of it below the store limit
 * (so an upload may copy that range from the old object).  False for an
 * inode that is not local.
 */
bool cache_range_clean(struct cache *c, uint64_t ino, uint64_t off,
		       uint64_t len);

/*
 * True if bytes [off, off+len) of ino can be read from the cache file
 * now (every chunk present or past the store limit), so an upload needs
 * no fetch.  False for an inode that is not local.
 */
bool cache_range_local(struct cache *c, uint64_t ino, uint64_t off,
		       uint64_t len);

/*
 * How many times ino was cleaned (cache_clean) so far; 0 if not local.
 * The namespace reads it in the db transaction that finds or makes the
 * record dirty, and hands it to cache_marked() once that commit is
 * durable: a clean that came after the transaction then still counts.
 */
uint64_t cache_clean_epoch(struct cache *c, uint64_t ino);

/*
 * The namespace has recorded ino dirty (its commit is durable) in a
 * transaction that saw clean epoch epoch (cache_clean_epoch): writes may
 * go on without asking it again, unless ino was cleaned after that
 * transaction (then they answer -EUCLEAN until it is marked again).
 */
void cache_marked(struct cache *c, uint64_t ino, uint64_t epoch);

/*
 * A change to ino's cache file is coming that the namespace recorded
 * first (SETATTR's truncate or mtime, made after its commit): until
 * cache_change_done(), cache_clean() answers -EBUSY, so that no upload
 * of the file as it was before the change cleans the record that says
 * it changed.  Call it inside the db transaction that records the
 * change (a clean after that one must wait).  NULL if ino is not local
 * (then nothing can clean it); the caller owns the hold.
 */
struct cache_change;
struct cache_change *cache_change_begin(struct cache *c, uint64_t ino);
void cache_change_done(struct cache_change *ch); /* NULL: nothing */

/*
 * The upload of ino's data as of cache_stat().wseq == wseq reached the
 * store as an object of size bytes: clear the dirty chunks and make size
 * the store limit, in txn (the caller's LMDB write txn; call it last in
 * the apply, since memory changes at once).  -EBUSY (nothing changed)
 * if ino was written or truncated since, or a write to it is in flight
 * (its bytes may be missing from what the upload read, while the write
 * count does not show it yet), -ENODATA if not local.
 */
int cache_clean(struct cache *c, struct db_txn *txn, uint64_t ino,
		uint64_t wseq, uint64_t size);

/* Chunk counters, a snapshot. */
void cache_usage(struct cache *c, struct cache_usage *out);

/*
 * Create empty local data for a new inode (replacing any; a fetch in
 * flight is cancelled).  0 or -errno.
 */
int cache_create(struct cache *c, uint64_t ino);

/*
 * Set the local data's size; past the new size nothing more comes from
 * the store.  Blocks (worker threads only).  -ENODATA if not local.
 */
int cache_truncate(struct cache *c, uint64_t ino, uint64_t size);

/* Size and times of the local data.  -ENODATA if not local. */
int cache_stat(struct cache *c, uint64_t ino, struct cache_stat *out);

/*
 * The lowest offset of ino's data that a write changed (bytes landed) or
 * a truncate changed (from the lower of the old and new ends) since the
 * previous call for ino, in *low (UINT64_MAX:
 * nothing; for an entry made since, 0), and a new count starts.  An
 * upload that sends parts of a file still being written asks before it
 * reads them and again before it completes: parts at or past *low are
 * stale.  One caller per inode (the syncer).  0, or -ENODATA if not
 * local (dropped: its parts are of nothing).
 */
int cache_written_low(struct cache *c, uint64_t ino, uint64_t *low);

/*
 * The end of the furthest write into ino that landed since its entry was
 * made, lowered by truncates, in *end: a writer has been past every byte
 * below it, while the file's size may run ahead of its data (a client
 * that sets the size before it writes).  0, or -ENODATA if not local.
 */
int cache_written_end(struct cache *c, uint64_t ino, uint64_t *end);

/* Set the local data's mtime (SETATTR on a locally held file). */
int cache_set_mtime(struct cache *c, uint64_t ino, const struct timespec *mt);

/*
 * Forget ino's local data (removed, or changed in the store); cancels a
 * fetch in flight.  Fds from cache_open_fd() stay readable.  The unlink
 * is made durable by the next cache_sync() of an inode in its shard
 * directory, not by this call.  0 (also if not local) or -errno.
 */
int cache_drop(struct cache *c, uint64_t ino);

/* True if ino is local (has a cache entry; not necessarily complete). */
bool cache_is_local(struct cache *c, uint64_t ino);

/*
 * Open ino's local data read-only for an upload; the caller closes *fd
 * with cache_close_fd() (until then a cache_drop() never hands the file
 * to a new inode).  Only readable chunks hold the file's data
 * (cache_fetch the rest).  -ENODATA if not local.
 */
int cache_open_fd(struct cache *c, uint64_t ino, int *fd);
void cache_close_fd(struct cache *c, uint64_t ino, int fd);

/*
 * Make ino's cache file (fd, from cache_open_fd) and its name durable:
 * an upload calls it before its commit journals the chunks clean
 * (cache_clean), so that a clean record never points at bytes a crash
 * of this machine can lose (the store has them; a read would not fetch
 * them again).  Blocks for the disk; cheap when a COMMIT synced it
 * already.  0 or -errno.
 */
int cache_fd_durable(struct cache *c, uint64_t ino, int fd);

/*
 * Make ino's cache file durable as it is now: its bytes, size and times
 * (the authority while the file is dirty) and its name.  What a sync
 * export's SETATTR of a dirty file waits for after cache_truncate(),
 * cache_create() or cache_set_mtime(): its reply promises the change
 * outlives a crash of this machine.  Blocks for the disk: any thread but
 * a loop's.  0, -ENODATA if ino is not local, or -errno.
 */
int cache_file_durable(struct cache *c, uint64_t ino);

#endif
