/*
 * fs/sync_int.h - what the syncer (syncer.c) shares with one file's trip
 * to the store (sync_item.c), the uploads it starts early (early.c) and
 * the passes clients wait for (strict.c).  Private to fs/; all of it runs
 * under fs->sync_lock, on the syncer's thread, a flush's or strict.c's,
 * but for sync_item_commit().
 */
#ifndef MAPFS_FS_SYNC_INT_H
#define MAPFS_FS_SYNC_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "cache/cache.h"
#include "fs_int.h"
#include "s3/store.h"

/* Multipart parts: at least this (all but the last), at most so many. */
#define MPU_PART_MIN (16ull << 20)
#define MPU_PARTS_MAX 10000
#define MPU_THREADS 8

/* One dirty inode of a pass's snapshot. */
struct sync_item {
	struct fs_inode in;
	char key[STORE_KEY_MAX + 2];
	bool have_cs;
	struct cache_stat cs;
	int64_t quiet_since;
	bool due; /* this pass uploads it */
};

/*
 * strict.c's pass: take(ctx, &inos) runs once sync_lock is held and hands
 * over the dirty inodes to send (the caller's memory, sorted here; 0: no
 * pass), so that every file asked for while the last pass held the lock
 * goes in this one.  Their uploads run under sync_lock; their records are
 * committed after it is let go, while the next pass uploads (the store
 * still sees one pass at a time, in order).  A file whose commit is still
 * on the way is left out (the caller sees it dirty and asks again).
 * *progress: whether it did anything; the first store or database error
 * (the work stays queued).
 */
int fs_sync_taken(struct fs *fs, size_t (*take)(void *ctx, uint64_t **inos),
		  void *ctx, bool *progress);

/* Uploads of files up to SYNC_SMALL_MAX run many at once, as many as
 * the store takes (store_put_parallel, at most FS_PARALLEL_MAX); bigger
 * ones one at a time (each is a multipart upload with its own threads). */
#define SYNC_SMALL_MAX (8ull << 20)

/* The bytes an upload of it sends (the cache file's, when dirty). */
uint64_t sync_item_size(const struct sync_item *it);

/* sync_item.c: what one item's commit needs, from its store half. */
struct upload_commit {
	struct fs *fs;
	struct sync_item *it;
	struct store_info *info;
	struct link_copy *links; /* made: their records learn it */
	size_t nlinks;
	uint64_t t0; /* ms, when its sync began */
};

/*
 * sync_item.c: the store's half of it's sync (under sync_lock): its
 * upload (or its conflict settled) and its links' copies.  0: uc (fs, it,
 * info and t0 set by the caller) is ready for sync_item_commit, which
 * frees what it holds; 1: done, nothing to commit; or an error (uc holds
 * nothing then).
 */
int sync_item_store(struct fs *fs, struct sync_item *it,
		    struct upload_commit *uc);

/* The record's half: it is in the store as uc says (its commit; needs no
 * sync_lock).  0 or -errno. */
int sync_item_commit(struct fs *fs, struct upload_commit *uc);

/* sync_data.c: the metadata the object of it gets (mode, owner, mtime,
 * link id). */
void sync_meta_of(const struct fs *fs, const struct sync_item *it,
		  struct store_meta *m);

/*
 * sync_data.c: make [off, off + len) of the item's cache file local for an
 * upload that
 * reads it from there, and keep it so (*pin, for cache_unpin) until the
 * read is done: a chunk evicted meanwhile would go up as zeros, over the
 * only other copy of its bytes.
 */
int sync_fetch_pinned(struct fs *fs, const struct sync_item *it, uint64_t off,
		      uint64_t len, struct cache_pin **pin);

/*
 * Start a multipart upload of key with meta, journaled (db "mpu") so
 * that a crash's leftovers are aborted at the next start: *upload_id is
 * the caller's to free, and to end with sync_mpu_end().  0 or -errno.
 */
int sync_mpu_begin(struct fs *fs, const char *key,
		   const struct store_meta *meta, char **upload_id);

/* The upload is completed, or else aborted; either way forgotten. */
void sync_mpu_end(struct fs *fs, const char *key, const char *upload_id,
		  bool completed);

/* Parts of a multipart upload to send (sync_mpu_parts). */
struct sync_parts {
	const char *upload_id;
	int fd;            /* the cache file (cache_open_fd) */
	uint64_t size;     /* the data's: the last part is cut there */
	uint64_t part;     /* bytes of each part */
	int first, nparts; /* parts [first, nparts), 0-based */
	char (*etags)[STORE_ETAG_MAX]; /* part i's ETag at [i] */
	/* A part whose bytes are the old object's is copied in the store
	 * instead of sent (counted in copied). */
	bool copy_ok;
	int copied;
	/* Hooks, each NULL or called under the parts' lock with arg.
	 * more: once every part so far is taken, the new part count (etags
	 * must hold it), so a file still growing keeps the threads busy;
	 * nparts: none yet (asked again shortly), -1: no more (the threads
	 * end).  take: part i is next; false skips it (already up), true
	 * reads and sends it now.  done: part i went (rc 0) or failed. */
	int (*more)(void *arg, int nparts);
	bool (*take)(void *arg, int i);
	void (*done)(void *arg, int i, int rc);
	void *arg;
};

/*
 * Send p's parts of it's data from p->fd, MPU_THREADS at a time; p->nparts
 * is how far more() took it.  The first error, or 0.
 */
int sync_mpu_parts(struct fs *fs, const struct sync_item *it,
		   struct sync_parts *p);

/*
 * early.c: a big file still being written goes up while it is written.
 * Its complete parts leave as a multipart upload from the pass that sees
 * them (fs_early_step, for an item not yet due); when the file is due,
 * its upload (fs_early_finish) sends only the parts not sent or changed
 * since, and completes.  See early.c for the rules.
 */
void fs_early_step(struct fs *fs, const struct sync_item *it);

/*
 * The offset a file's WRITEs cross when it becomes one that goes up while
 * it is written (larger than the store's one-PUT cut and EARLY_MIN); 0
 * when no file does (--no-early-upload, a store that takes one request
 * at a time).  The write path wakes the syncer there (fs->early_cut).
 */
uint64_t fs_early_cut(struct fs *fs);

/*
 * The upload of it (due now) from the parts already sent, when there are
 * any: 0 (the object is in, *out describes it), -errno, or 1 when it has
 * none (the caller uploads as usual).  m and c are the object's metadata
 * and the upload's condition.
 */
int fs_early_finish(struct fs *fs, const struct sync_item *it, int fd,
		    uint64_t size, const struct store_meta *m,
		    const struct store_cond *c, struct store_info *out);

/*
 * The write id an upload of ino uses when an early completion of it may
 * have reached the store without our learning it (into wid; else wid is
 * left alone), so that its object is known as ours.
 */
void fs_early_wid(struct fs *fs, uint64_t ino, char wid[STORE_WID_MAX]);

/* ino went up (its commit is in): nothing early is left of it. */
void fs_early_forget(struct fs *fs, uint64_t ino);

/*
 * After a pass whose snapshot held every dirty inode (items[0, n)):
 * abort the early uploads of files not among them (removed, or clean).
 */
void fs_early_sweep(struct fs *fs, const struct sync_item *items, size_t n);

/* Abort every early upload (the syncer stops). */
void fs_early_stop(struct fs *fs);

/*
 * sync_pending.c: run the queued store records p[0, n) (DELs and COPYs,
 * in the queue's order) many at a time, keeping the order of those that
 * touch a key in common (within a queue its own; across queues, and with
 * the other nodes' records f, their commits'), for about half a second at most, and drop each
 * once the store confirmed it (ran[i]; *progress set if any did).  0, or the first error: the
 * record that failed and the later ones that touch its keys stay
 * queued (fs_fail_note for an error retrying cannot fix).
 */
struct sync_foreign;
int sync_run_pending(struct fs *fs, const struct fs_pending *p, size_t n,
		     const struct sync_foreign *f, bool *ran, bool *progress);

/*
 * The keys that the queued records of the other live nodes touch (each
 * run by its own node), for a pass's records to keep their order with
 * (sync_pending.c): the records of two queues that touch a key in common,
 * one of them writing it, run in their commits' order (fs_pending.order).
 * Before, each queue kept only its own order: a link made on one node
 * and its first name removed through another had the removal's DELETE
 * run while the link's COPY from that name waited (its node paused, or
 * cut off), and the link's object was never made; a DELETE of an old
 * file's key ran after a new file's upload to it.
 */
struct sync_foreign_key {
	uint64_t h;     /* sync_key_hash of the key */
	uint64_t order; /* the record's (fs_pending.order) */
	bool write;     /* a DEL's key, a COPY's target (else its source) */
};
struct sync_foreign {
	struct sync_foreign_key *k; /* sorted by h */
	size_t n, cap;
	bool oom; /* incomplete: every record waits */
};
/* Add p's keys; sort once all are in. */
void sync_foreign_add(struct sync_foreign *f, const struct fs_pending *p);
void sync_foreign_sort(struct sync_foreign *f);
void sync_foreign_free(struct sync_foreign *f);

/* A store key's 64-bit hash (FNV-1a), for sets of keys. */
uint64_t sync_key_hash(const char *key);

/*
 * sync_mpu.c: upload fd (size bytes, it's data) to it->key as a
 * multipart upload, completed on cond; and, once at start, abort the
 * uploads a crash left behind.
 */
int sync_put_multipart(struct fs *fs, const struct sync_item *it, int fd,
		       uint64_t size, const struct store_meta *meta,
		       const struct store_cond *cond, struct store_info *out);
void sync_mpu_recover(struct fs *fs);

/*
 * outage.c, under sync_lock: fs_outage_check() at the start and the end
 * of every pass (an outage that ended since the last look is said, with
 * conflicts0 the conflicts counter before its changes went up);
 * fs_outage_replayed() when a pass finds nothing to do (the replay of an
 * outage, if one is under way, is done); fs_conflicts_now() the
 * conflicts counted so far, all outcomes.
 */
void fs_outage_check(struct fs *fs, uint64_t conflicts0);
void fs_outage_replayed(struct fs *fs);
uint64_t fs_conflicts_now(void);

#endif
