/*
 * fs/fs_int.h - what the files of fs/ share; not for other rooms.
 *
 * LMDB layout (named databases of the shared env, opened in fs_open):
 *   inodes     ino (u64, DB_INTKEY) -> packed struct fs_inode
 *   dirents    parent (u64 BE) || name -> child ino, cookie
 *   dircookies parent (u64 BE) || cookie (u64 BE) -> child ino, name
 *   keys       store key -> ino: objects that exist in the store (or are
 *              about to, once the pending records ahead of them ran), so
 *              revalidation tells our objects from foreign ones
 *   meta       "version" -> u32, "next_ino" -> u64
 *   pending    seq (u64, DB_INTKEY) -> store work in namespace order:
 *              DEL key, COPY src -> dst (renames)
 *   work       ino (u64, DB_INTKEY) -> "": inodes with a DIRTY flag
 *   mpu        upload id -> store key: multipart uploads begun and not yet
 *              completed or aborted (a crash leaves them; start aborts them)
 *   links      ino (u64 BE) || parent (u64 BE) || name -> struct fs_link:
 *              the names of a file past its first (hard links, links.c)
 *   linkids    link id -> ino: the files whose names a listing found
 *              by the link id in their objects' metadata (links.c)
 *
 * Invariants:
 *   - DIRTY_DATA implies the regular file's data is local (cache/), and
 *     the cache file is then the authority for size and mtime.
 *   - IN_STORE: an object exists at the inode's current key once every
 *     pending record committed so far has run (a rename queues COPY+DEL
 *     and keeps the flag).  keys[current key] == ino only once it is
 *     really there.
 *   - Only the syncer writes to the store, one operation at a time, and
 *     pending records run in seq order before any upload taken from the
 *     same snapshot: the store replays the namespace's history in order.
 */
#ifndef MAPFS_FS_INT_H
#define MAPFS_FS_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "db/db.h"
#include "fs.h"
#include "s3/store.h"

#define FS_FORMAT_VERSION 1
#define FS_COOKIE_FIRST 3 /* "." is 1, ".." is 2 */
#define FS_GEN 1
/* Longest "keys" DB key: LMDB's default limit is 511 bytes. */
#define FS_KEYS_DBKEY_MAX 480

enum {
	FS_F_DIRTY_DATA = 1u << 0, /* local data differs from the store */
	FS_F_DIRTY_META = 1u << 1, /* object (metadata, marker) to rewrite */
	FS_F_IN_STORE = 1u << 2,
	FS_F_MARKER = 1u << 3, /* dirs: a "dir/" marker object exists */
	FS_F_EXCL = 1u << 4,   /* verf holds an exclusive-create verifier */
	FS_F_DIRTY_LINKS = 1u << 5, /* a name (links.c) lacks its object */
	/* Made while the store was away, not uploaded yet: its first upload
	 * looks for another writer's object of the other kind at its name
	 * (a file where we made a directory, or keys under a name we made a
	 * file of; syncer.c other_kind). */
	FS_F_MADE_AWAY = 1u << 6,
};
#define FS_F_DIRTY (FS_F_DIRTY_DATA | FS_F_DIRTY_META | FS_F_DIRTY_LINKS)

/* An inode record, decoded.  Times are ns since the epoch. */
struct fs_inode {
	uint64_t ino;
	uint32_t gen, type, mode, uid, gid, nlink, flags;
	uint64_t size;
	int64_t atime, mtime, ctime;
	uint64_t parent;
	uint64_t next_cookie;  /* dirs: next cookie to hand out */
	uint64_t dir_ver;      /* dirs: change counter, the cookie verifier */
	uint64_t listed_at_ms; /* dirs: when the store was last listed */
	uint64_t synced_ms;    /* when the object last reached the store */
	uint8_t verf[8];
	uint32_t owner; /* cluster: the node whose cache holds its changes */
	char etag[STORE_ETAG_MAX];
	char name[FS_NAME_MAX + 1];
	char target[FS_PATH_MAX + 1]; /* symlinks */
};

enum { FS_PEND_DEL = 1, FS_PEND_COPY = 2 };

struct fs_pending {
	uint64_t seq;
	/* In a cluster, where its commit stands among every node's
	 * (db_commit_order; fs_pending_order sets it): the records of two
	 * queues that touch a key run in this order.  0 unknown. */
	uint64_t order;
	uint32_t op;
	uint64_t ino;
	char src[STORE_KEY_MAX + 1];
	char dst[STORE_KEY_MAX + 1]; /* COPY only */
};

/* A deferred job for the worker threads (blocking cache/store calls). */
struct fs_listing; /* listing.c */

struct fs_job {
	struct fs_job *next;
	void (*fn)(struct fs *fs, void *arg);
	void *arg;
};

#define FS_WORKERS 2
#define FS_RELIST_SLOTS 64 /* event listings queued, one per directory */
/* strict.c: passes in flight, one uploading while one commits. */
#define FS_STRICT_THREADS 4
#define FS_ASYNC_WINDOW_MS 50 /* async exports' window by default */
/* At SIGTERM the last flush waits this long for work that does not move
 * (the store away): what is left goes up after the next start. */
#define FS_CLOSE_FLUSH_MS 10000

struct fs {
	struct fs_opts opts;
	struct db *db;
	struct cache *cache;
	struct store *store;
	/* The longest store key a name may make (store_key_max): a change
	 * that would go past it is -ENAMETOOLONG at once. */
	size_t key_max;
	db_table dbi_inodes, dbi_dirents, dbi_cookies, dbi_keys, dbi_meta,
		dbi_pending, dbi_work, dbi_mpu, dbi_mpu_intent, dbi_links,
		dbi_linkids;
	uint64_t nsid; /* this namespace's id, in link ids (links.c) */
	/* Handed out before the create commits (so the cache file exists
	 * first); the apply persists meta.next_ino past it.  In a cluster
	 * the numbers come in blocks of the cluster's counter: [next_ino,
	 * ino_end) under ino_lock, the next block fetched by a worker once
	 * half of this one is used (ino_next_first, 0: none yet). */
	atomic_uint_fast64_t next_ino;
	pthread_mutex_t ino_lock;
	uint64_t ino_end, ino_next_first;
	bool ino_fetching;

	/* Worker pool: listings and cache I/O deferred off the db writer. */
	pthread_mutex_t job_lock;
	pthread_cond_t job_wake;
	struct fs_job *job_head, **job_tail;
	bool job_stop;
	int nworkers;
	pthread_t workers[FS_WORKERS];

	/* Syncer: sync_lock is held for a whole pass, so the store sees one
	 * writer (the thread or fs_flush) at a time. */
	pthread_mutex_t sync_lock;
	pthread_mutex_t sync_wlock; /* guards sync_stop, sync_nudged and
				       the condvar */
	pthread_cond_t sync_wake;
	bool sync_stop;
	bool sync_nudged; /* a pass is wanted now (fs_sync_nudge) */
	/* A WRITE across this offset makes its file one that goes up
	 * while it is written (fs_early_cut; 0: none does).  Set before
	 * the syncer starts, read-only after. */
	uint64_t early_cut;
	bool sync_started;
	/* strict.c: the files clients wait for, and its thread. */
	pthread_mutex_t strict_lock;
	pthread_cond_t strict_wake;
	struct strict_req *strict_head;
	bool strict_stop, strict_started;
	pthread_t strict_threads[FS_STRICT_THREADS];
	int nstrict;
	uint32_t backoff_ms;
	pthread_t syncer;
	_Atomic unsigned uploads_busy; /* files going up now (item_run) */
	/* Files uploaded by a strict pass whose commit is on the way
	 * (syncer.c: no pass takes them meanwhile), under commit_lock. */
	pthread_mutex_t commit_lock;
	uint64_t *committing;
	size_t ncommitting, committing_cap;
	/* Store outages (syncer.c): how many ended that a pass has seen,
	 * the names counter then, when the last one ended and the
	 * conflicts counter then (under sync_lock), and its figures (also
	 * under outage_lock, for ctl status). */
	uint64_t outages_seen, outage_names0, outage_back_ms, outage_conflicts0;
	pthread_mutex_t outage_lock;
	struct fs_outage_stat outage;
	/* Uploads of files still being written (early.c); the list under
	 * early_lock, the rest under sync_lock. */
	pthread_mutex_t early_lock;
	struct fs_early *early;

	/* Directories whose listing an event queued that has not started
	 * (revalidate.c): more events for one of them wait for it. */
	pthread_mutex_t relist_lock;
	uint64_t relist[FS_RELIST_SLOTS];
	/* Listings callers wait for (listing.c). */
	pthread_mutex_t listing_lock;
	struct fs_listing *listings;
	/* How many of them are first listings (changed under listing_lock):
	 * at 0, the READDIR and GETATTR paths skip the lock. */
	atomic_uint nprogressive;

	/* Work a change's done() still does after its answer went out (a
	 * removed file's cache recycling): fs_close waits for none left. */
	atomic_uint after_answer;

	/* Store work failing for good (failures.c). */
	pthread_mutex_t fail_lock;
	struct fs_fail *fails;

	/* Cluster (takeover.c, owner.c): a takeover sweep is queued;
	 * fs_write_epoch; no more jobs once closing.  pend_next: the next
	 * pending seq of this node (pending.c; the db writer's). */
	atomic_bool sweep_queued;
	atomic_uint_fast64_t write_epoch;
	atomic_bool running, closing; /* between workers up and fs_close */
	uint64_t pend_next;

	/* async.c: an async export's deferred flushes. */
	struct fs_async *async;

	/* pending.c's meter of the queue, for its oldest record's age and
	 * its rate (ctl status, the metrics): when records were queued (a
	 * stamp per second at most, of the first record queued in it), and
	 * how many ran (pend_runs: samples of the count, one per 2 s). */
	pthread_mutex_t pend_meter_lock;
	struct fs_pend_stamp *pend_stamps;
	size_t npend_stamps, pend_stamps_cap;
	uint64_t pend_open_ms; /* records older than this fs: since then */
	atomic_uint_fast64_t pend_done;
	struct fs_pend_run {
		uint64_t ms, done;
	} pend_runs[32];
	unsigned pend_run_next;
};

/*
 * A change of the namespace for a call of ctx (NULL: the gateway's own):
 * done() once it is durable (db_submit), or for an async export's call
 * once it is in LMDB, durable within the window (db_submit_lazy).
 */
static inline void fs_submit(struct fs *fs, const struct fs_ctx *ctx,
			     db_apply_fn apply, db_done_fn done, void *arg)
{
	if (ctx && ctx->async)
		db_submit_lazy(fs->db, apply, done, arg);
	else
		db_submit(fs->db, apply, done, arg);
}

/*
 * A change's done() for a removal: answer (done(arg, err)), then, if
 * drop, recycle ino's cache file, which the client need not wait for;
 * counted in fs->after_answer, so that a close the answer lets through
 * waits for it (fs_close).
 */
void fs_answer_then_drop(struct fs *fs, uint64_t ino, bool drop,
			 fs_done_fn done, void *arg, int err);

/* async.c: the thread of an async export's deferred flushes, with a
 * window of window_ms (0: FS_ASYNC_WINDOW_MS); also the database's lazy
 * window.  Stopped after flushing what was asked for.  0 or -errno. */
int fs_async_start(struct fs *fs, uint32_t window_ms);
void fs_async_stop(struct fs *fs);
/* An async export's COMMIT or stable WRITE was answered: every cache
 * file (data, name, chunk journal) is made durable when the window of
 * the first such answer ends, with one flush. */
void fs_async_defer(struct fs *fs);

/*
 * conflict.c: an upload of snap (a record of key, size bytes of data)
 * was refused because the store holds another version (why -ESTALE) or
 * none (-ENOENT).  Settles it as conflict.c says (ours aside, uploaded
 * again, or theirs wins), logged and counted.  0, or the error that
 * leaves the upload to be tried again.  Under sync_lock.
 */
int fs_conflict(struct fs *fs, const struct fs_inode *snap, const char *key,
		uint64_t size, int why);
/*
 * conflict.c: snap (of key) was made while the store was away, and
 * another writer made its name the other kind meanwhile (a file where
 * snap is a directory, a directory where it is a file).  Theirs stays;
 * ours moves to NAME.conflict-<node>-<time>, logged and counted, and is
 * uploaded there; the directory is listed again.  A directory of ours
 * with anything below it in the store already stays where it is (both
 * kept: the listing shows the directory): 1.  0 when moved, or the
 * error that leaves the upload to be tried again.  Under sync_lock.
 */
int fs_conflict_kind(struct fs *fs, const struct fs_inode *snap,
		     const char *key);

/*
 * conflict.c: the COPY p (a renamed file's object to its new key) found
 * another writer's object at p->dst.  Theirs stays; if p->dst is still
 * the file's first name, the file moves to a sibling name
 * (NAME.conflict-<node>-<time>) and p's record is rewritten to copy
 * there, its new key in aside_key: 0 (logged, counted, the directory
 * listed again).  1 when p->dst is not the file's name now (moved on,
 * removed, another name of it, a directory): nothing changed.  Under
 * sync_lock.
 */
int fs_conflict_copy(struct fs *fs, const struct fs_pending *p,
		     char aside_key[STORE_KEY_MAX + 1]);

/* Big-endian u64s in table keys (so keys sort by number). */
static inline void fs_put_be64(unsigned char *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (unsigned char)v;
}

static inline uint64_t fs_get_be64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* A done callback for work whose result no one waits for. */
void fs_done_nothing(void *arg, int err);

/* Time now, ns since the epoch / ms. */
int64_t fs_now_ns(void);
uint64_t fs_now_ms(void);
/*
 * The same, to the clock tick (a few ms), for TTL checks on the hot path
 * (LOOKUP, GETATTR): a fifth of the cost.  Never for times that are
 * compared with each other for order (listing starts, upload times): two
 * within one tick would be equal.
 */
uint64_t fs_now_coarse_ms(void);
struct timespec fs_ns_to_ts(int64_t ns);
int64_t fs_ts_to_ns(const struct timespec *ts);

/* A directory listed from the store within the TTL (--dir-ttl). */
bool fs_listing_fresh(struct fs *fs, const struct fs_inode *in);

/*
 * ino's object in the store is not the version its record names
 * (someone else wrote it): its directory is listed again now, in the
 * background, which takes the new version in and drops the cached bytes
 * of the old one (revalidate.c).
 */
void fs_store_changed(struct fs *fs, uint64_t ino);

/* The version of its object a fetch for in pins (NULL: none in the store
 * yet), for struct cache_obj. */
static inline const char *fs_obj_etag(const struct fs_inode *in)
{
	return (in->flags & FS_F_IN_STORE) && in->etag[0] ? in->etag : NULL;
}

/* inode.c: special files (FIFO, socket, devices). */
/* The S_IFMT bits of type, as the store's mode carries them (s3fs's way). */
uint32_t fs_type_ifmt(uint32_t type);
/* FS_FIFO, FS_SOCK, FS_CHR or FS_BLK for a mode with those S_IFMT bits,
 * else 0 (a regular file, or a mode without a type). */
uint32_t fs_special_type(uint32_t mode);
/* A device's number lives in the record's verf (used otherwise only by
 * EXCLUSIVE-created regular files): major, then minor. */
void fs_rdev_set(struct fs_inode *in, uint32_t major, uint32_t minor);
void fs_rdev_get(const struct fs_inode *in, uint32_t *major, uint32_t *minor);
/* The Linux dev_t of a device (x-amz-meta-rdev), and back. */
uint64_t fs_rdev_dev(const struct fs_inode *in);
void fs_rdev_from_dev(struct fs_inode *in, uint64_t dev);

/* inode.c: records. */
/* A record's bytes (from the "inodes" table) into *out.  0 or -EIO. */
int fs_inode_decode(uint64_t ino, const struct db_val *v, struct fs_inode *out);
/* How a cluster shares the "inodes" table: the records' part (project,
 * merge); the reaction to another node's change (changed, ctx) is
 * owner.c's, which fs_open adds. */
extern const struct db_share_ops fs_inode_share;
int fs_inode_get(struct fs *fs, struct db_txn *txn, uint64_t ino,
		 struct fs_inode *out);
int fs_inode_put(struct fs *fs, struct db_txn *txn, const struct fs_inode *in);
int fs_inode_del(struct fs *fs, struct db_txn *txn, uint64_t ino);
/* This node's own counters and marks ("meta" table).  0, -ENOENT. */
int fs_meta_get_u64(struct fs *fs, struct db_txn *txn, const char *name,
		    uint64_t *out);
int fs_meta_put_u64(struct fs *fs, struct db_txn *txn, const char *name,
		    uint64_t val);
/* sync_item.c: whether wid (an object's store_meta.wid) is an upload of
 * inode ino of this namespace, by any node of it. */
bool fs_wid_names(const struct fs *fs, const char *wid, uint64_t ino);
/* The persisted inode counter (unchanged when there is none yet). */
int fs_meta_next_ino(struct fs *fs, uint64_t *next);
/* Persist next_ino past ino (apply of a create). */
int fs_meta_note_ino(struct fs *fs, struct db_txn *txn, uint64_t ino);
/* A fresh inode number; 0 when a cluster's block is late (-EAGAIN). */
uint64_t fs_ino_alloc(struct fs *fs);
/* A cluster's first block of inode numbers (fs_open).  0 or -errno. */
int fs_ino_blocks_start(struct fs *fs);
int fs_meta_init(struct fs *fs, struct db_txn *txn);
/*
 * Record the DIRTY flags in in and in the work index.  Only the record:
 * a file's caller took its ownership first (fs_owner_take, takeover.c: in
 * a cluster one node writes a file back), in the same txn.
 */
int fs_inode_mark(struct fs *fs, struct db_txn *txn, struct fs_inode *in,
		  uint32_t dirty);
/* Drop the inode from the work index if it is clean. */
int fs_work_sync(struct fs *fs, struct db_txn *txn, const struct fs_inode *in);

/* attr.c */
void fs_attr_fill(struct fs *fs, const struct fs_inode *in,
		  struct fs_attr *out);
void fs_wcc_before(struct fs *fs, const struct fs_inode *in,
		   struct fs_wcc *wcc);
void fs_wcc_after(struct fs *fs, const struct fs_inode *in, struct fs_wcc *wcc);
/* Reads the inode in txn and fills wcc->after if it exists. */
void fs_wcc_after_txn(struct fs *fs, struct db_txn *txn, uint64_t ino,
		      struct fs_wcc *wcc);
/* The effective ctime (record or cache overlay). */
int64_t fs_inode_ctime(struct fs *fs, const struct fs_inode *in);

/* key.c */
int fs_key_build(struct fs *fs, struct db_txn *txn, uint64_t ino, char *buf,
		 size_t cap);
/* Store key of an object: dirs get the trailing '/'. */
int fs_obj_key(struct fs *fs, struct db_txn *txn, const struct fs_inode *in,
	       char *buf, size_t cap);
int fs_keys_get(struct fs *fs, struct db_txn *txn, const char *key,
		uint64_t *ino);
int fs_keys_put(struct fs *fs, struct db_txn *txn, const char *key,
		uint64_t ino);
int fs_keys_del(struct fs *fs, struct db_txn *txn, const char *key);

/* perm.c: want is a mask of R_OK, W_OK, X_OK. */
int fs_perm(const struct fs_ctx *ctx, const struct fs_inode *in, int want);
/* perm.c: S_ISVTX rule for removing or renaming victim from dir. */
int fs_sticky_check(const struct fs_ctx *ctx, const struct fs_inode *dir,
		    const struct fs_inode *victim);
bool fs_in_group(const struct fs_ctx *ctx, uint32_t gid);
/*
 * perm.c: the set-id bits a change of a file by someone not privileged
 * takes away (Linux should_remove_suid): S_ISUID, and S_ISGID when the
 * group may execute (without it S_ISGID marks mandatory locking, and
 * stays).  fs_kill_setid() clears them in the record; fs_setid_killable()
 * says whether there are any, so a WRITE asks the writer only then.
 */
bool fs_setid_killable(const struct fs_inode *in);
void fs_kill_setid(struct fs_inode *in);

/* dir.c */
int fs_name_check(const char *name, bool for_change);
/*
 * fs_name_check() of a name a change creates in dir (CREATE, MKDIR,
 * SYMLINK, MKNOD, LINK, a RENAME's target): also -EINVAL for a name the
 * store keeps for itself (store_key_reserved() at the root), whose data
 * could never be uploaded.
 */
int fs_name_creatable(uint64_t dir, const char *name);
int fs_dirent_get(struct fs *fs, struct db_txn *txn, uint64_t dir,
		  const char *name, uint64_t *ino, uint64_t *cookie);
/* A "dirents" entry (key k, value v, as a cursor reads them) into its
 * directory, name and inode.  0 or -EIO. */
int fs_dirent_decode(const struct db_val *k, const struct db_val *v,
		     uint64_t *dir, char name[FS_NAME_MAX + 1], uint64_t *ino);
/* Adds an entry with a fresh cookie from dir's counter; updates *dir. */
int fs_dirent_add(struct fs *fs, struct db_txn *txn, struct fs_inode *dir,
		  const char *name, uint64_t ino);
int fs_dirent_remove(struct fs *fs, struct db_txn *txn, struct fs_inode *dir,
		     const char *name);
/* 0 if dir has no entries, -ENOTEMPTY otherwise. */
int fs_dir_empty(struct fs *fs, struct db_txn *txn, uint64_t dir);
/* The entry after *cookie (which it advances); -ENOENT at the end. */
int fs_dir_next(struct fs *fs, struct db_txn *txn, uint64_t dir,
		uint64_t *cookie, uint64_t *ino, char name[FS_NAME_MAX + 1]);
/*
 * The start of a change in directory ino (CREATE, REMOVE, LINK...): its
 * record into *out and wcc's before and after filled (the after stays
 * right for an error); -ENOTDIR, or -EACCES without write and search
 * permission.  0 or -errno.
 */
int fs_dir_change_begin(struct fs *fs, struct db_txn *txn,
			const struct fs_ctx *ctx, uint64_t ino,
			struct fs_wcc *wcc, struct fs_inode *out);
/* Marks a changed directory: mtime/ctime now, verifier bumped. */
void fs_dir_touch(struct fs_inode *dir, int64_t now);

/* links.c: a file's names past its first (hard links). */
enum { FS_LINK_IN_STORE = 1u << 0 }; /* the name's object exists */
struct fs_link {
	uint64_t ino, parent;
	uint32_t flags;
	uint64_t synced_ms; /* when its object last got there */
	char etag[STORE_ETAG_MAX];
	char name[FS_NAME_MAX + 1];
};
/* The link dir/name of ino.  0, -ENOENT or -errno. */
int fs_link_get(struct fs *fs, struct db_txn *txn, uint64_t ino,
		uint64_t parent, const char *name, struct fs_link *out);
int fs_link_put(struct fs *fs, struct db_txn *txn, const struct fs_link *l);
int fs_link_del(struct fs *fs, struct db_txn *txn, uint64_t ino,
		uint64_t parent, const char *name);
/* fn(arg, link) for each link of ino until fn returns non-zero (that is
 * returned).  0 or -errno. */
int fs_link_each(struct fs *fs, struct db_txn *txn, uint64_t ino,
		 int (*fn)(void *arg, const struct fs_link *l), void *arg);
/* The first link of ino (in key order).  0, -ENOENT. */
int fs_link_first(struct fs *fs, struct db_txn *txn, uint64_t ino,
		  struct fs_link *out);
/* The link of in whose object key is key.  0, -ENOENT (none: perhaps the
 * first name's), -errno. */
int fs_link_of_key(struct fs *fs, struct db_txn *txn, const struct fs_inode *in,
		   const char *key, struct fs_link *out);
/* Whether dir/name is in's first name (the record's), not a link. */
bool fs_name_is_first(const struct fs_inode *in, uint64_t dir,
		      const char *name);
/* The store key of name in dir ('/' appended for a directory). */
int fs_name_key(struct fs *fs, struct db_txn *txn, uint64_t dir,
		const char *name, bool is_dir, char *buf, size_t cap);
/*
 * Remove dir/name, one of in's names but not its last: its entry, its
 * link (the first name: another takes its place) and, queue_delete, its
 * object (a pending DEL; else only its "keys" entry goes).  in is put;
 * dir is changed, for the caller to put.  name must not point into in
 * (the first name's removal gives in another).  0 or -errno.
 */
int fs_name_drop(struct fs *fs, struct db_txn *txn, struct fs_inode *dir,
		 struct fs_inode *in, const char *name, bool queue_delete);
/* The link id every name of a file with several carries in the store
 * (store_meta.link): this namespace's id and the inode. */
void fs_link_id(const struct fs *fs, uint64_t ino, char out[STORE_LINK_MAX]);
/*
 * A listing found dir/name (key, size bytes, ETag etag, its metadata's
 * link id link) not in the namespace: if a file already imported carried
 * that link id and has that size, dir/name becomes another name of it
 * (*ino); else -ENOENT, and the caller imports a new file, then records
 * it with fs_linkid_note().  0 or -errno.
 */
int fs_linkid_join(struct fs *fs, struct db_txn *txn, struct fs_inode *dir,
		   const char *name, const char *key, uint64_t size,
		   const char *etag, const char *link, uint64_t synced_ms,
		   uint64_t *ino);
int fs_linkid_note(struct fs *fs, struct db_txn *txn, const char *link,
		   uint64_t ino);

/*
 * listing.c: listings in progress and their waiters.  A waiter's after
 * is a cookie (woken once entries past it are merged, or at the end),
 * FS_WAIT_NEXT (the next page merged, or the end) or FS_WAIT_DONE (the
 * end only).  done(arg, err) runs once, on the listing's thread, or not
 * at all where a call returns 2 (ready now: the caller goes on itself).
 */
#define FS_WAIT_DONE UINT64_MAX
#define FS_WAIT_NEXT (UINT64_MAX - 1)
/* Join dir's listing, or register a new one (1: the caller starts it and
 * ends it with fs_listing_end); 0 joined, 2 ready now, -ENOMEM. */
int fs_listing_start(struct fs *fs, uint64_t dir, bool progressive,
		     uint64_t after, fs_done_fn done, void *arg);
/* Join dir's listing (FS_WAIT_NEXT: a progressive one only): 0 joined,
 * 2 ready now, -ENOENT none in progress, -ENOMEM. */
int fs_listing_join(struct fs *fs, uint64_t dir, uint64_t after,
		    fs_done_fn done, void *arg);
/* Is a first listing of dir merging pages?  *since_ms: when asked for. */
bool fs_listing_progressive(struct fs *fs, uint64_t dir, uint64_t *since_ms);
/* A page of dir's listing is merged; dir's next cookie is now this. */
void fs_listing_progress(struct fs *fs, uint64_t dir, uint64_t next_cookie);
/* dir's listing is over (merged, or err): every waiter is called. */
void fs_listing_end(struct fs *fs, uint64_t dir, int err);

/* unlink.c: the one place a name goes (remove, rename, revalidation). */
/* fs_name_drop, or fs_unlink_inode for a victim's last name (*gone). */
int fs_unlink_name(struct fs *fs, struct db_txn *txn, struct fs_inode *dir,
		   struct fs_inode *victim, const char *name, bool queue_delete,
		   bool *gone);
/* Drop an inode and its entry, queueing store deletes (queue_delete). */
int fs_unlink_inode(struct fs *fs, struct db_txn *txn, struct fs_inode *dir,
		    struct fs_inode *victim, bool queue_delete);

/* pending.c: the queue of store moves and deletes. */
/* A record's seq holds its node's id from this bit up. */
#define FS_PEND_NODE_SHIFT 40
/* Queue op (in a change's txn, on the db writer).  0 or -errno. */
int fs_pending_add(struct fs *fs, struct db_txn *txn, uint32_t op, uint64_t ino,
		   const char *src, const char *dst);
/* Rewrite record seq (it keeps its place in the order). */
int fs_pending_set(struct fs *fs, struct db_txn *txn, uint64_t seq, uint32_t op,
		   uint64_t ino, const char *src, const char *dst);
int fs_pending_decode(const struct db_val *k, const struct db_val *v,
		      struct fs_pending *out);
/* Where this node's numbering goes on (fs_open, after db_start). */
int fs_pending_init(struct fs *fs);
/* The node whose record seq is. */
uint32_t fs_pending_node(uint64_t seq);
/* Whether node's records are to be run by a node that outlives it: a
 * dead node's, or the records of a gateway alone that became a cluster
 * (node 0).  Which node runs them: the one holding the claim
 * (db_queue_runnable; before each store request). */
bool fs_pending_adoptable(struct fs *fs, uint32_t node);
/*
 * fn(arg, rec) for the records this node runs or is to run, in the order
 * it runs them (the adopted ones first, then its own), until fn returns
 * non-zero (returned): its own, and those of the nodes whose queue it
 * holds the claim to or sees down.  A record runs only while
 * db_queue_runnable() says so for its node.  0 or -errno.
 */
int fs_pending_each(struct fs *fs, struct db_txn *txn,
		    int (*fn)(void *arg, const struct fs_pending *p),
		    void *arg);
/* The same for every node's records, in seq order (fsck: what is in
 * flux whoever runs it). */
int fs_pending_each_any(struct fs *fs, struct db_txn *txn,
			int (*fn)(void *arg, const struct fs_pending *p),
			void *arg);
/* How many records this node has to run. */
int fs_pending_count(struct fs *fs, struct db_txn *txn, uint64_t *n);
/* A stamp of when a record was queued, for the queue's age. */
struct fs_pend_stamp {
	uint64_t seq, ms;
};
/* n records ran (sync_pending.c): counted for the queue's rate. */
void fs_pending_ran(struct fs *fs, uint64_t n);
/*
 * The queue's meter: *age_ms of its oldest record of this node (0: none
 * or not known: another node's), *rate records run a second over about
 * the last minute.
 */
void fs_pending_meter(struct fs *fs, struct db_txn *txn, uint64_t *age_ms,
		      double *rate);
/* The queue's head is record head (UINT64_MAX: the queue is empty):
 * the stamps of the records gone before it are let go (the syncer's
 * passes; the meter never grows with the records run). */
void fs_pending_prune(struct fs *fs, uint64_t head);
/* Free the meter (fs_close). */
void fs_pending_meter_free(struct fs *fs);
/* p->order, as txn sees it (db_commit_order of its record). */
void fs_pending_order(struct fs *fs, struct db_txn *txn, struct fs_pending *p);
/*
 * fn(arg, rec) for the records of the queues fs_pending_each() leaves
 * out: the other live nodes', that another node runs.  This node's own
 * records that touch one of their keys must not overtake them (their
 * order says which came first).  0 or -errno.
 */
int fs_pending_each_foreign(struct fs *fs, struct db_txn *txn,
			    int (*fn)(void *arg, const struct fs_pending *p),
			    void *arg);
/* Whether any node's record concerns ino (*node: whose, if not NULL). */
bool fs_pending_of(struct fs *fs, struct db_txn *txn, uint64_t ino,
		   uint32_t *node);
/* Whether any node's record is a COPY into key (not there yet). */
bool fs_pending_copy_into(struct fs *fs, struct db_txn *txn, const char *key);
/* Whether any node's record is a COPY from key (an error counts as yes). */
bool fs_pending_copy_from(struct fs *fs, struct db_txn *txn, const char *key);

/* worker.c */
int fs_workers_start(struct fs *fs);
/* Run what is queued and stop; later jobs run inline on their caller. */
void fs_workers_stop(struct fs *fs);
/* Once nothing can queue a job any more (after db_stop). */
void fs_workers_free(struct fs *fs);
/* The most threads fs_each_parallel runs at once. */
#define FS_PARALLEL_MAX 16
/*
 * fn(arg, i) for every i in [0, n), on up to par threads at once (par
 * capped at FS_PARALLEL_MAX; the caller's thread is one of them, and
 * does all of it if no thread can start).  Returns once all have run.
 * For blocking store requests of distinct objects, which a store answers
 * faster many at a time.
 */
void fs_each_parallel(size_t n, size_t par, void (*fn)(void *arg, size_t i),
		      void *arg);
/* Run fn(fs, arg) on a worker thread.  On -ENOMEM runs it inline. */
void fs_defer(struct fs *fs, void (*fn)(struct fs *, void *), void *arg);

/* io.c: -EAGAIN (JUKEBOX) while new data must wait: too much dirty data
 * in the cache (opts.max_dirty).  0 otherwise, the store down or not. */
int fs_backpressure(struct fs *fs);

/* failures.c: store work that retrying alone cannot fix. */
/* Whether err may go away by itself (store down, busy, no memory). */
bool fs_err_transient(int err);
/* what ("upload", "delete", "copy") of key failed with err (not
 * transient): reported once, counted, and backed off. */
void fs_fail_note(struct fs *fs, const char *what, const char *key, int err);
/* key's work succeeded: forget (and log) its failures. */
void fs_fail_clear(struct fs *fs, const char *key);
/* Whether key's work waits for its backoff now. */
bool fs_fail_wait(struct fs *fs, const char *key);
/* The failing count and the oldest failure into out. */
void fs_fail_stat(struct fs *fs, struct fs_dirty_stat *out);
/* fn(arg, what, key, err, count) for each key failing for good now,
 * called without the lock (on a copy).  0 or -ENOMEM (then none). */
int fs_fail_each(struct fs *fs,
		 void (*fn)(void *arg, const char *what, const char *key,
			    int err, uint64_t count),
		 void *arg);
void fs_fail_free(struct fs *fs);

/* owner.c: one writer per file in a cluster, the rules. */
/*
 * in is about to become dirty here (in a change's txn): make this node
 * its owner, or -EAGAIN when another node owns it (in->owner).  Asks
 * nothing of that node: fs_owner_take does.
 */
int fs_owner_claim(struct fs *fs, struct fs_inode *in);
/* in is clean again here: it has no owner any more. */
void fs_owner_release(struct fs *fs, struct fs_inode *in);
/*
 * At a cluster start: files this node has changes of (its work index)
 * that have no owner become its (after a migration, or a crash between
 * the two commits); one owned by another node is logged.  Blocks.
 */
int fs_owner_reconcile(struct fs *fs);
/*
 * Another node's change made in (this node's record after it, dirty
 * here) someone else's: drop this node's changes of it (never blocks).
 */
void fs_owner_lost(struct fs *fs, const struct fs_inode *in);
/*
 * db_share_ops.changed of the "inodes" table (ctx: the struct fs; set by
 * fs_open): what another node's change of an inode means here.  Cached
 * data of a file another node uploaded anew or removed is dropped; a
 * file this node owned and another took over is fs_owner_lost.  On the
 * db writer, after the change is durable here.
 */
void fs_owner_inode_changed(void *ctx, db_table tbl, const struct db_val *key,
			    const struct db_val *before,
			    const struct db_val *after);

/* syncer.c: the write-back thread (fs_open starts it before strict.c's
 * threads, fs_close stops it after them). */
int fs_syncer_start(struct fs *fs);
/* Run the pending records this node runs, now.  Blocks.  0 or -errno. */
int fs_sync_pending(struct fs *fs);
/* The syncer runs a pass now rather than at its next tick (a file just
 * became one that goes up while it is written).  Takes sync_wlock for a
 * moment; never waits for a pass.  Only between fs_syncer_start and
 * fs_syncer_stop. */
void fs_sync_nudge(struct fs *fs);
void fs_syncer_stop(struct fs *fs);

/* strict.c: files clients wait to see in the store (--strict-commit) */
/*
 * Write ino (and every pending record before it) to the store soon, with
 * the other files asked for meanwhile, and then done(arg, 0), or -EAGAIN
 * (a store error, or a file that never holds still: the client retries),
 * -ENOMEM; on strict.c's thread.  Never blocks.
 */
void fs_sync_async(struct fs *fs, uint64_t ino, fs_done_fn done, void *arg);
/* fs_sync_async, waiting for it.  Blocks: worker threads only. */
int fs_sync_inode(struct fs *fs, uint64_t ino);
/* Its threads: started after the syncer's, stopped before (fs_open,
 * fs_close). */
int fs_strict_start(struct fs *fs);
void fs_strict_stop(struct fs *fs);

/* takeover.c: what this node does about other nodes' files (in a
 * cluster; above write-back, whose uploads it asks for). */
/*
 * fs_owner_claim, and when another node owns in, ask it to let go
 * (fs_owner_ask): -EAGAIN then, which the client retries.
 */
int fs_owner_take(struct fs *fs, struct fs_inode *in);
/* Ask node owner to upload ino now and let it go, or, if it is dead,
 * take its files over soon (never blocks). */
void fs_owner_ask(struct fs *fs, uint32_t owner, uint64_t ino);
/* db_msg_fn for the messages of other nodes ("release INO"): upload the
 * file now (fs_sync_inode), on a worker. */
void fs_owner_on_message(void *ctx, uint32_t from, const char *msg);
/*
 * Take over the files of nodes that are down (db_node_up false): soon,
 * on a worker (coalesced; never blocks).  Also db_node_fn's handler.
 */
void fs_owner_sweep_kick(struct fs *fs);
void fs_owner_on_node_down(void *ctx, uint32_t node);

#endif
