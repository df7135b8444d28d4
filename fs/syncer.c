/*
 * fs/syncer.c - write-back: makes the store match the namespace.
 *
 * One pass takes one read snapshot of the pending records and of the
 * dirty inodes (with their keys and cache-file stats), runs the pending
 * records in seq order, one at a time, and only when all of them
 * succeeded uploads the dirty inodes of that snapshot (small files up to
 * FS_PARALLEL_MAX at once: they are of distinct keys).  Because only this
 * code writes to the store, and a pass starts only after the last one
 * ended, the store replays the namespace's history in order: a delete of
 * key K can never overtake a later upload to K.  An upload whose inode
 * moved or vanished after the snapshot left an object at a stale key: it
 * is deleted unless some inode lives at that key now (that inode's own
 * upload or copy will overwrite it, later).
 *
 * A dirty inode is cleaned only if its cache file (size, mtime, write
 * count) and record ctime did not change since the snapshot; an
 * upload of a file that changed meanwhile is simply repeated.  Cleaning
 * also clears the dirty chunks in cache/, in the same transaction.
 *
 * While store_down() (any operation of the gateway saw the store stop
 * answering), passes stop and a probe runs every SYNC_PROBE_MS instead;
 * the first answer starts a pass at once, without the backoff that
 * failed passes otherwise build up.
 *
 * A file goes up once it has been quiet for upload_delay, or for only
 * SYNC_MIN_QUIET_MS once the cache's dirty data passes half of max_dirty
 * (the size threshold), or at a flush.
 *
 * One file's trip to the store (its upload, its conflicts, its links'
 * copies, then its record) is sync_item.c's.
 *
 * A multipart upload is journaled (db "mpu") before its first part and
 * forgotten after it is completed or aborted, so the uploads a crash cut
 * short are aborted when the syncer starts again; the file is still
 * dirty, so its upload is simply made again.  The id is only known once
 * CreateMultipartUpload answered, so an intent (db "mpu_intent", the
 * key) is journaled before it and replaced by the id in one transaction:
 * an intent still there means an upload of that key may exist that we
 * never learnt the id of (a crash in between, or a lost answer).  Such
 * uploads are found with ListMultipartUploads and aborted, at start and
 * before the key's next multipart upload.  Files must be quiet for
 * SYNC_MIN_QUIET_MS even when flushing (not to upload a file in the
 * middle of a burst of writes), but for the one file a strict COMMIT or
 * stable WRITE waits for (strict.c): its client asked for it now.
 * A write racing an upload is never lost either way: the upload's commit
 * leaves the file dirty unless its size, write count (wseq) and mtime
 * are still what the snapshot saw (cs_equal).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "common/log.h"
#include "db/db.h"
#include "metrics/metrics.h"
#include "fs_int.h"
#include "sync_int.h"

#define SYNC_PERIOD_MS 200
#define SYNC_MIN_QUIET_MS 50
#define SYNC_BATCH 256
#define SYNC_STALE_BATCH 1024 /* stale work entries dropped a pass */
/* Queued store records a pass runs at most (sync_pending.c's waves). */
#define SYNC_PEND_BATCH 1024
/* A strict pass runs the queue only while it is this short. */
#define SYNC_STRICT_PEND_MAX 64
#define SYNC_BACKOFF_MAX_MS 10000
/* While the store is down, one store_probe() per this, and no pass. */
#define SYNC_PROBE_MS 1000
#define SYNC_INODE_TRIES 100 /* ~2 s of passes for one strict COMMIT */

struct sync_snap {
	struct fs_pending *pend;
	size_t npend;
	struct sync_item *items;
	size_t nitems;
	/* The keys queued records still touch: of those past the pass's
	 * batch, then also of the batch's that did not run (sorted hashes,
	 * sync_key_hash).  No upload to one of them overtakes its record. */
	uint64_t *queued;
	size_t nqueued, queued_cap;
	bool queued_oom; /* the set is incomplete: no upload this pass */
	/* The other live nodes' records (fs_pending_each_foreign). */
	struct sync_foreign foreign;
	struct fs *fs;      /* (for the walks) */
	struct db_txn *txn; /* the snapshot's, while it is taken */
	/* Work entries with nothing to do (snap_stale): dropped, a count. */
	uint64_t stale[SYNC_STALE_BATCH];
	size_t nstale, dropped;
};

static void snap_free(struct sync_snap *s)
{
	free(s->pend);
	free(s->items);
	free(s->queued);
	sync_foreign_free(&s->foreign);
}

static void queued_add(struct sync_snap *s, const char *key)
{
	if (s->nqueued == s->queued_cap) {
		size_t cap = s->queued_cap ? s->queued_cap * 2 : 256;
		uint64_t *n = realloc(s->queued, cap * sizeof(*n));

		if (!n) {
			s->queued_oom = true;
			return;
		}
		s->queued = n;
		s->queued_cap = cap;
	}
	s->queued[s->nqueued++] = sync_key_hash(key);
}

static void queued_add_record(struct sync_snap *s, const struct fs_pending *p)
{
	queued_add(s, p->src);
	if (p->op == FS_PEND_COPY)
		queued_add(s, p->dst);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Might a queued record touch key?  (A false yes delays an upload by a
 * pass; a set that could not be kept says yes to everything.) */
static bool queued_has(const struct sync_snap *s, const char *key)
{
	uint64_t h = sync_key_hash(key);
	size_t lo = 0, hi = s->nqueued;

	if (s->queued_oom)
		return true;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s->queued[mid] == h)
			return true;
		if (s->queued[mid] < h)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* The first SYNC_PEND_BATCH records into the pass; the keys of the rest
 * into the queued set. */
static int snap_pend(void *arg, const struct fs_pending *p)
{
	struct sync_snap *s = arg;

	if (s->npend < SYNC_PEND_BATCH) {
		s->pend[s->npend] = *p;
		fs_pending_order(s->fs, s->txn, &s->pend[s->npend++]);
	} else {
		queued_add_record(s, p);
	}
	return 0;
}

/* Another live node's record: no upload to its keys, and the pass's
 * records keep their order with it. */
static int snap_foreign(void *arg, const struct fs_pending *p)
{
	struct sync_snap *s = arg;
	struct fs_pending o = *p;

	queued_add_record(s, p);
	fs_pending_order(s->fs, s->txn, &o);
	sync_foreign_add(&s->foreign, &o);
	return 0;
}

/* Which dirty inodes a pass takes: NULL all (that are due); else the n
 * in inos (ascending), at once (clients wait for them); n 0: none. */
struct sync_only {
	const uint64_t *inos;
	size_t n;
};

static bool only_has(const struct sync_only *o, uint64_t ino)
{
	size_t lo = 0, hi = o->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (o->inos[mid] == ino)
			return true;
		if (o->inos[mid] < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

static int cmp_ino(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Files a strict pass uploaded whose records are being committed (with
 * sync_lock let go, so that the next pass's uploads overlap those
 * commits): no pass takes them until their commit is done, or it would
 * upload them again from a record that does not know the first upload.
 * Added under sync_lock; a snapshot (under sync_lock too) reads the set
 * before its txn begins, so a file not in it has its commit in the
 * snapshot.
 */
static int committing_add(struct fs *fs, uint64_t ino)
{
	int rc = 0;

	pthread_mutex_lock(&fs->commit_lock);
	if (fs->ncommitting == fs->committing_cap) {
		size_t cap = fs->committing_cap ? 2 * fs->committing_cap : 64;
		uint64_t *v = realloc(fs->committing, cap * sizeof(*v));

		if (v) {
			fs->committing = v;
			fs->committing_cap = cap;
		} else {
			rc = -ENOMEM;
		}
	}
	if (!rc)
		fs->committing[fs->ncommitting++] = ino;
	pthread_mutex_unlock(&fs->commit_lock);
	return rc;
}

static void committing_del(struct fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->commit_lock);
	for (size_t i = 0; i < fs->ncommitting; i++)
		if (fs->committing[i] == ino) {
			fs->committing[i] = fs->committing[--fs->ncommitting];
			break;
		}
	pthread_mutex_unlock(&fs->commit_lock);
}

/* A sorted copy of the set, for a snapshot (NULL, *n 0: empty). */
static uint64_t *committing_copy(struct fs *fs, size_t *n)
{
	uint64_t *v = NULL;

	pthread_mutex_lock(&fs->commit_lock);
	*n = 0;
	if (fs->ncommitting && (v = malloc(fs->ncommitting * sizeof(*v)))) {
		memcpy(v, fs->committing, fs->ncommitting * sizeof(*v));
		*n = fs->ncommitting;
	}
	pthread_mutex_unlock(&fs->commit_lock);
	if (*n > 1)
		qsort(v, *n, sizeof(*v), cmp_ino);
	return v;
}

/*
 * A work entry whose record is gone or clean: noted in s->stale, for
 * snap_drop_stale.  A removal or an upload here takes the entry with it;
 * in a cluster another node's (its REMOVE, or its upload of a file it
 * took over) changes the record and not this node's work table, whose
 * entry then pointed at nothing to do, for ever: the syncer skipped it,
 * and `flush` waited for it until it gave up.
 */
static void snap_stale(struct sync_snap *s, uint64_t ino)
{
	if (s->nstale < SYNC_STALE_BATCH)
		s->stale[s->nstale++] = ino;
}

/* Add ino to s->items if it is still there and dirty (with its key and
 * cache stats); a removed or clean inode is noted as stale. */
static int snap_item(struct fs *fs, struct db_txn *txn, struct sync_snap *s,
		     uint64_t ino)
{
	struct sync_item *it = &s->items[s->nitems];
	int rc = fs_inode_get(fs, txn, ino, &it->in);

	if (rc == -ESTALE || (!rc && !(it->in.flags & FS_F_DIRTY))) {
		snap_stale(s, ino);
		return 0;
	}
	if (!rc && ino != FS_ROOT_INO)
		rc = fs_obj_key(fs, txn, &it->in, it->key, sizeof(it->key));
	if (rc)
		return rc;
	it->quiet_since = it->in.ctime;
	if (it->in.type == FS_REG && cache_stat(fs->cache, ino, &it->cs) == 0) {
		it->have_cs = true;
		if (fs_ts_to_ns(&it->cs.ctime) > it->quiet_since)
			it->quiet_since = fs_ts_to_ns(&it->cs.ctime);
	}
	s->nitems++;
	return 0;
}

struct stale_drop {
	struct fs *fs;
	struct sync_snap *s;
};

/* The entries s->stale still stale in txn (record gone, or clean) go. */
static int stale_apply(struct db_txn *txn, void *arg)
{
	struct stale_drop *d = arg;
	struct fs *fs = d->fs;

	d->s->dropped = 0;
	for (size_t i = 0; i < d->s->nstale; i++) {
		uint64_t ino = d->s->stale[i];
		struct db_val k = { sizeof(ino), &ino };
		struct fs_inode in;
		int rc = fs_inode_get(fs, txn, ino, &in);

		if (!rc && (in.flags & FS_F_DIRTY))
			continue; /* dirty again meanwhile: work to do */
		if (rc && rc != -ESTALE)
			return rc;
		rc = db_del(txn, fs->dbi_work, &k);
		if (rc && rc != -ENOENT)
			return rc;
		d->s->dropped += !rc;
	}
	return 0;
}

/* Drop the stale work entries snap_take found (0 or -errno). */
static int snap_drop_stale(struct fs *fs, struct sync_snap *s)
{
	struct stale_drop d = { fs, s };

	if (!s->nstale)
		return 0;
	int rc = db_write(fs->db, stale_apply, &d);

	if (!rc && s->dropped)
		log_debug("fs: %zu work entries with nothing to do dropped",
			  s->dropped);
	return rc;
}

/*
 * The pending records and the dirty inodes of one read snapshot, up to
 * SYNC_BATCH of each: the first ones of the work table, or (only) the
 * inodes asked for that are dirty, wherever they are in it (a pass for
 * a client's COMMIT must not depend on how many others are dirty).
 */
static int snap_take(struct fs *fs, struct sync_snap *s,
		     const struct sync_only *only)
{
	struct db_cursor *cur = NULL;
	struct db_txn *txn;
	struct db_val k, v;
	struct sync_only busy;
	int rc;

	memset(s, 0, sizeof(*s));
	s->pend = calloc(SYNC_PEND_BATCH, sizeof(*s->pend));
	s->items = calloc(SYNC_BATCH, sizeof(*s->items));
	if (!s->pend || !s->items) {
		snap_free(s);
		return -ENOMEM;
	}
	busy.inos = committing_copy(fs, &busy.n);
	rc = db_read_begin(fs->db, &txn);
	if (rc) {
		free((void *)busy.inos);
		snap_free(s);
		return rc;
	}
	s->fs = fs;
	s->txn = txn;
	rc = fs_pending_each(fs, txn, snap_pend, s);
	if (!rc)
		rc = fs_pending_each_foreign(fs, txn, snap_foreign, s);
	sync_foreign_sort(&s->foreign);
	for (size_t i = 0; only && !rc && i < only->n && s->nitems < SYNC_BATCH;
	     i++) {
		uint64_t ino = only->inos[i];

		if (only_has(&busy, ino))
			continue; /* its commit is on the way */
		k = (struct db_val){ sizeof(ino), &ino };
		rc = db_get(txn, fs->dbi_work, &k, &v);
		rc = rc == -ENOENT ? 0 /* clean */
		     : rc          ? rc
				   : snap_item(fs, txn, s, ino);
	}
	if (!rc && !only)
		rc = db_cursor_open(txn, fs->dbi_work, &cur);
	for (int op = DB_FIRST; cur && !rc && s->nitems < SYNC_BATCH;
	     op = DB_NEXT) {
		uint64_t ino;
		int mrc = db_cursor_get(cur, &k, &v, op);

		if (mrc) {
			rc = mrc == -ENOENT ? 0 : mrc;
			break;
		}
		memcpy(&ino, k.data, sizeof(ino));
		if (!only_has(&busy, ino))
			rc = snap_item(fs, txn, s, ino);
	}
	if (cur)
		db_cursor_close(cur);
	db_read_end(fs->db, txn);
	free((void *)busy.inos);
	if (!rc)
		rc = snap_drop_stale(fs, s);
	if (rc)
		snap_free(s);
	return rc;
}

/* Let the queue's meter forget the records gone: those before the first
 * of this node's in the snapshot (adopted ones, another node's, come
 * first), or all when the snapshot has none of its own and nothing past
 * the batch either. */
static void prune_stamps(struct fs *fs, const struct sync_snap *s)
{
	uint32_t me = db_node_id(fs->db);

	for (size_t i = 0; i < s->npend; i++)
		if (fs_pending_node(s->pend[i].seq) == me) {
			fs_pending_prune(fs, s->pend[i].seq);
			return;
		}
	if (!s->nqueued && !s->queued_oom)
		fs_pending_prune(fs, UINT64_MAX);
}

/* Anything left to do?  (pending records plus dirty inodes; *pend the
 * records alone, if not NULL) */
static int work_left(struct fs *fs, size_t *n, size_t *pend)
{
	uint64_t a, b;
	struct db_txn *txn;
	int rc = db_read_begin(fs->db, &txn);

	if (rc)
		return rc;
	rc = fs_pending_count(fs, txn, &a);
	if (!rc)
		rc = db_count(txn, fs->dbi_work, &b);
	db_read_end(fs->db, txn);
	if (!rc)
		*n = a + b;
	if (!rc && pend)
		*pend = a;
	return rc;
}

/* An item's sync between sync_item_store() and sync_item_commit(). */
struct item_state {
	struct store_info info;
	struct upload_commit uc;
	bool staged; /* uploaded; its commit comes after sync_lock */
};

struct sync_run {
	struct fs *fs;
	struct sync_item *items;
	size_t n;
	/* A strict pass's (sync_pass with later): items[0, n) are committed
	 * once sync_lock is let go, st[i] holding what item i's commit
	 * needs; NULL: each item is committed in its turn. */
	struct item_state *st;
	atomic_int first;     /* the first transient error */
	atomic_bool progress; /* something was uploaded */
};

/* A pass's second half (strict.c's passes): its snapshot and run. */
struct sync_later {
	struct sync_snap s;
	struct sync_run run;
	size_t par;
};

static void item_result(struct sync_run *run, struct sync_item *it, int rc)
{
	struct fs *fs = run->fs;
	int zero = 0;

	if (rc == -ENODATA)
		return; /* its cache file is being set up: later */
	if (rc && !fs_err_transient(rc)) {
		/* Its own backoff: the others' uploads go on. */
		fs_fail_note(fs, "upload", it->key, rc);
		return;
	}
	if (rc) {
		log_debug("fs: upload %s: %s", it->key, strerror(-rc));
		atomic_compare_exchange_strong(&run->first, &zero, rc);
		return;
	}
	fs_fail_clear(fs, it->key);
	atomic_store(&run->progress, true);
}

/* Item i of run (i >= run->n: a big one, alone, after them). */
static void item_run(struct sync_run *run, size_t i)
{
	struct fs *fs = run->fs;
	struct sync_item *it = &run->items[i];
	struct item_state one, *st = run->st && i < run->n ? &run->st[i] : &one;
	int rc;

	st->info = (struct store_info){ 0 };
	st->uc = (struct upload_commit){
		.fs = fs, .it = it, .info = &st->info, .t0 = fs_now_ms()
	};
	atomic_fetch_add(&fs->uploads_busy, 1);
	rc = sync_item_store(fs, it, &st->uc);
	atomic_fetch_sub(&fs->uploads_busy, 1);
	if (!rc && st != &one && !committing_add(fs, it->in.ino)) {
		st->staged = true;
		return;
	}
	if (!rc)
		rc = sync_item_commit(fs, &st->uc);
	else if (rc == 1)
		rc = 0;
	item_result(run, it, rc);
}

static void run_one(void *p, size_t i)
{
	item_run(p, i);
}

/* A strict pass's second half: item i's commit, if it waits for it. */
static void commit_one(void *p, size_t i)
{
	struct sync_run *run = p;
	struct item_state *st = &run->st[i];
	int rc;

	if (!st->staged)
		return;
	rc = sync_item_commit(run->fs, &st->uc);
	committing_del(run->fs, run->items[i].in.ino);
	item_result(run, &run->items[i], rc);
}

/* See fs.h. */
unsigned fs_uploads_in_flight(struct fs *fs)
{
	return atomic_load(&fs->uploads_busy);
}

/*
 * One pass (of the dirty inodes `only` names; the pending records always
 * all run first).  *progress tells whether anything was done.  Returns
 * the first store or database error (the work stays queued).
 */
/*
 * One pass (under sync_lock).  With later (a strict pass of strict.c's,
 * only set): the small files are uploaded but not committed; later holds
 * what sync_pass_finish() commits once sync_lock is let go, so that the
 * next pass's uploads overlap this pass's commits in the database (the
 * store still sees one pass's writes at a time, in order).  The return
 * and *progress are then sync_pass_finish()'s.
 */
static int sync_pass(struct fs *fs, bool flushing, const struct sync_only *only,
		     bool *progress, struct sync_later *later)
{
	int64_t delay = (int64_t)(flushing ? 0 : fs->opts.upload_delay_ms);
	struct sync_snap snap, *sp = later ? &later->s : &snap;
	int rc;

	*progress = false;
	/* Files clients wait for (strict.c): at once. */
	bool waited_for = only && only->n;

	if (delay < SYNC_MIN_QUIET_MS && !waited_for)
		delay = SYNC_MIN_QUIET_MS;
	uint64_t conflicts0 = fs_conflicts_now();

	fs_outage_check(fs, conflicts0);
	rc = snap_take(fs, sp, only);
	if (rc)
		return rc;
	if (!only && !sp->npend && !sp->nitems)
		fs_outage_replayed(fs);
	if (sp->dropped)
		*progress = true; /* (sync_run_pending only ever sets it) */
	if (!only)
		prune_stamps(fs, sp);
	/* The queued store records first, many at a time; an upload to a
	 * key that one still touches (past this batch, or failed) waits.
	 * A pass clients wait for (a strict COMMIT) runs them only when
	 * few are queued (a file renamed, then committed): behind a
	 * renamed directory's thousands it would wait for them all; its
	 * files go up unless a record touches their keys. */
	bool *ran = calloc(sp->npend ? sp->npend : 1, sizeof(*ran));
	bool behind = waited_for && sp->npend > SYNC_STRICT_PEND_MAX;
	int prc = !ran     ? -ENOMEM
		  : behind ? 0
			   : sync_run_pending(fs, sp->pend, sp->npend,
					      &sp->foreign, ran, progress);

	for (size_t i = 0; i < sp->npend; i++)
		if (!ran || !ran[i])
			queued_add_record(sp, &sp->pend[i]);
	free(ran);
	if (sp->nqueued)
		qsort(sp->queued, sp->nqueued, sizeof(*sp->queued), cmp_u64);
	int64_t now = fs_now_ns();
	struct cache_usage u;

	/* Past half the dirty limit, files go up as soon as they pause,
	 * before writers start getting JUKEBOX. */
	cache_usage(fs->cache, &u);
	if (fs->opts.max_dirty && u.dirty >= fs->opts.max_dirty / 2 &&
	    !waited_for)
		delay = SYNC_MIN_QUIET_MS;
	struct sync_run one = { .fs = fs }, *run = later ? &later->run : &one;
	size_t nsmall = 0;

	*run = (struct sync_run){ .fs = fs };
	atomic_init(&run->first, prc);
	atomic_init(&run->progress, false);
	/* Due ones: the small first (to run in parallel), then the big. */
	for (size_t i = 0; i < sp->nitems; i++) {
		struct sync_item *it = &sp->items[i];

		it->due = false;
		if ((only && !only_has(only, it->in.ino)) ||
		    now - it->quiet_since < delay * 1000000 ||
		    (!flushing && fs_fail_wait(fs, it->key)) ||
		    queued_has(sp, it->key))
			continue;
		/* Another node's to upload (its changes may be newer). */
		if (it->in.type == FS_REG && it->in.owner &&
		    it->in.owner != db_node_id(fs->db))
			continue;
		it->due = true;
		if (sync_item_size(it) <= SYNC_SMALL_MAX) {
			struct sync_item tmp = sp->items[nsmall];

			sp->items[nsmall++] = *it;
			*it = tmp;
		}
	}
	run->items = sp->items;
	run->n = nsmall;
	if (later && nsmall)
		run->st = calloc(nsmall, sizeof(*run->st)); /* NULL: in turn */
	/* Files clients wait for go up together whatever the store likes
	 * best alone: each upload's commit is a round trip of the database
	 * in a cluster, and the store's flushes are shared too. */
	unsigned par = store_put_parallel(fs->store);

	if (waited_for && par < only->n)
		par = only->n < FS_PARALLEL_MAX ? (unsigned)only->n
						: FS_PARALLEL_MAX;
	fs_each_parallel(run->n, par, run_one, run);
	for (size_t i = nsmall; i < sp->nitems; i++)
		if (sp->items[i].due)
			item_run(run, i);
	/* Big files still being written: their complete parts go now. */
	for (size_t i = 0; !only && i < sp->nitems; i++)
		if (!sp->items[i].due)
			fs_early_step(fs, &sp->items[i]);
	if (!only && sp->nitems < SYNC_BATCH)
		fs_early_sweep(fs, sp->items, sp->nitems);
	fs_outage_check(fs, conflicts0);
	/* A full batch that moved: the next pass at once, not a period
	 * later (a renamed directory's records drain at the store's pace). */
	if (!flushing && !only && *progress &&
	    (sp->npend == SYNC_PEND_BATCH || sp->nitems == SYNC_BATCH))
		fs_sync_nudge(fs);
	/* The pending records' progress counts too (a pass of only those
	 * said "none": a flush of many renames gave up while they ran). */
	if (*progress)
		atomic_store(&run->progress, true);
	if (later) {
		later->par = par;
		return 0;
	}
	snap_free(sp);
	*progress = atomic_load(&run->progress);
	return atomic_load(&run->first);
}

/*
 * A strict pass's second half, sync_lock let go: the commits of the files
 * it uploaded, in parallel (they share the db writer's group commits and,
 * in a cluster, go to PostgreSQL together).  Frees what later holds.
 */
static int sync_pass_finish(struct sync_later *later, bool *progress)
{
	struct sync_run *run = &later->run;

	if (run->st)
		fs_each_parallel(run->n, later->par, commit_one, run);
	free(run->st);
	snap_free(&later->s);
	*progress = atomic_load(&run->progress);
	return atomic_load(&run->first);
}

static void *syncer_main(void *p)
{
	struct fs *fs = p;
	/* A short upload delay is not rounded up to a whole period. */
	uint32_t period = fs->opts.upload_delay_ms < SYNC_PERIOD_MS
				  ? fs->opts.upload_delay_ms
				  : SYNC_PERIOD_MS;

	/* Under sync_lock: a flush must not start an upload meanwhile. */
	pthread_mutex_lock(&fs->sync_lock);
	sync_mpu_recover(fs);
	pthread_mutex_unlock(&fs->sync_lock);
	if (period < SYNC_MIN_QUIET_MS)
		period = SYNC_MIN_QUIET_MS;
	pthread_mutex_lock(&fs->sync_wlock);
	while (!fs->sync_stop) {
		struct timespec ts;
		bool down = store_down(fs->store);
		uint32_t wait = down ? SYNC_PROBE_MS : period + fs->backoff_ms;
		bool progress;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += wait / 1000;
		ts.tv_nsec += (long)(wait % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (!fs->sync_nudged)
			pthread_cond_timedwait(&fs->sync_wake, &fs->sync_wlock,
					       &ts);
		fs->sync_nudged = false;
		if (fs->sync_stop)
			break;
		pthread_mutex_unlock(&fs->sync_wlock);
		if (down && store_probe(fs->store)) {
			/* Still down: no pass (it could only fail). */
			pthread_mutex_lock(&fs->sync_wlock);
			continue;
		}
		pthread_mutex_lock(&fs->sync_lock);
		int rc = sync_pass(fs, false, NULL, &progress, NULL);

		pthread_mutex_unlock(&fs->sync_lock);
		pthread_mutex_lock(&fs->sync_wlock);
		if (rc && !store_down(fs->store)) {
			fs->backoff_ms =
				fs->backoff_ms ? fs->backoff_ms * 2 : 200;
			if (fs->backoff_ms > SYNC_BACKOFF_MAX_MS)
				fs->backoff_ms = SYNC_BACKOFF_MAX_MS;
		} else {
			fs->backoff_ms = 0;
		}
	}
	pthread_mutex_unlock(&fs->sync_wlock);
	return NULL;
}

int fs_syncer_start(struct fs *fs)
{
	int rc;

	pthread_mutex_init(&fs->sync_lock, NULL);
	pthread_mutex_init(&fs->sync_wlock, NULL);
	pthread_mutex_init(&fs->commit_lock, NULL);
	pthread_mutex_init(&fs->early_lock, NULL);
	pthread_mutex_init(&fs->outage_lock, NULL);
	pthread_cond_init(&fs->sync_wake, NULL);
	fs->early_cut = fs_early_cut(fs);
	rc = -pthread_create(&fs->syncer, NULL, syncer_main, fs);
	if (rc) {
		pthread_mutex_destroy(&fs->early_lock);
		pthread_cond_destroy(&fs->sync_wake);
		pthread_mutex_destroy(&fs->sync_wlock);
		pthread_mutex_destroy(&fs->sync_lock);
		pthread_mutex_destroy(&fs->commit_lock);
		return rc;
	}
	pthread_setname_np(fs->syncer, "fs-syncer");
	fs->sync_started = true;
	return 0;
}

/* See fs_int.h. */
void fs_sync_nudge(struct fs *fs)
{
	pthread_mutex_lock(&fs->sync_wlock);
	fs->sync_nudged = true;
	pthread_cond_signal(&fs->sync_wake);
	pthread_mutex_unlock(&fs->sync_wlock);
}

void fs_syncer_stop(struct fs *fs)
{
	if (!fs->sync_started)
		return;
	pthread_mutex_lock(&fs->sync_wlock);
	fs->sync_stop = true;
	pthread_cond_signal(&fs->sync_wake);
	pthread_mutex_unlock(&fs->sync_wlock);
	pthread_join(fs->syncer, NULL);
	pthread_mutex_lock(&fs->sync_lock);
	fs_early_stop(fs);
	pthread_mutex_unlock(&fs->sync_lock);
	pthread_mutex_destroy(&fs->early_lock);
	pthread_cond_destroy(&fs->sync_wake);
	pthread_mutex_destroy(&fs->sync_wlock);
	pthread_mutex_destroy(&fs->sync_lock);
	pthread_mutex_destroy(&fs->commit_lock);
	free(fs->committing);
	fs->committing = NULL;
	fs->ncommitting = fs->committing_cap = 0;
	fs->sync_started = false;
}

/*
 * See fs.h.  Passes run (ignoring upload_delay) until nothing is dirty or
 * pending; a store error is retried a few times with backoff before it is
 * returned.
 */
/* Why a flush that made no progress gives up, into why. */
static int flush_stuck(struct fs *fs, int rc, uint64_t still_ms, size_t pend,
		       char *why, size_t cap)
{
	struct fs_dirty_stat f = { 0 };

	fs_fail_stat(fs, &f);
	if (store_down(fs->store)) {
		snprintf(why, cap,
			 "the store does not answer: nothing went up for "
			 "%" PRIu64 " s (ctl status; the changes stay here "
			 "and go up once it answers)",
			 still_ms / 1000);
		return -EAGAIN;
	}
	if (f.failing) {
		snprintf(why, cap,
			 "%" PRIu64 " file(s) fail for good, \"%s\" longest: "
			 "%s (ctl status; the log has each one)",
			 f.failing, f.failing_key, strerror(-f.failing_err));
		return f.failing_err ? f.failing_err : -EIO;
	}
	if (rc) {
		snprintf(why, cap,
			 "the store keeps failing: %s; nothing went up for "
			 "%" PRIu64 " s",
			 strerror(-rc), still_ms / 1000);
		return rc;
	}
	if (pend && db_clustered(fs->db)) {
		snprintf(why, cap,
			 "%zu queued store move(s) or delete(s) wait for "
			 "another gateway: its records that came first, or the "
			 "fence of a queue this one took over; nothing went up "
			 "for %" PRIu64 " s",
			 pend, still_ms / 1000);
		return -EAGAIN;
	}
	snprintf(why, cap,
		 "files are changed without pause: nothing could go up for "
		 "%" PRIu64 " s",
		 still_ms / 1000);
	return -EAGAIN;
}

int fs_flush(struct fs *fs)
{
	return fs_flush_wait(fs, 2000, NULL, NULL, 0);
}

int fs_flush_wait(struct fs *fs, uint32_t patience_ms,
		  const atomic_bool *cancel, char *why, size_t cap)
{
	char none[8];
	uint64_t last = fs_now_ms();
	unsigned failures = 0;
	size_t left, pend = 0;
	int rc = 0;

	if (!why) {
		why = none;
		cap = sizeof(none);
	}
	why[0] = '\0';
	if (!patience_ms)
		patience_ms = FS_FLUSH_PATIENCE_MS;
	pthread_mutex_lock(&fs->sync_lock);
	for (;;) {
		struct fs_dirty_stat f = { 0 };
		bool progress;

		rc = work_left(fs, &left, &pend);
		if (rc) {
			snprintf(why, cap, "reading the namespace: %s",
				 strerror(-rc));
			break;
		}
		if (left == 0)
			break;
		if (cancel && atomic_load(cancel)) {
			snprintf(why, cap, "stopped");
			rc = -ECANCELED;
			break;
		}
		rc = sync_pass(fs, true, NULL, &progress, NULL);
		uint64_t now = fs_now_ms();

		if (progress) {
			last = now;
			failures = 0;
			continue;
		}
		/* Nothing moved.  What is left only fails for good: no
		 * need to wait for it. */
		fs_fail_stat(fs, &f);
		if ((f.failing && left <= f.failing) ||
		    now - last >= patience_ms) {
			rc = flush_stuck(fs, rc, now - last, pend, why, cap);
			break;
		}
		failures += rc != 0;
		usleep(rc ? 100000u * (failures < 10 ? failures : 10) : 20000);
	}
	pthread_mutex_unlock(&fs->sync_lock);
	return rc;
}

int fs_sync_pending(struct fs *fs)
{
	bool progress = true;
	int rc = 0;

	struct sync_only none = { NULL, 0 };

	/* Passes for no inode at all: the pending records alone. */
	for (int i = 0; i < SYNC_INODE_TRIES && progress && !rc; i++) {
		pthread_mutex_lock(&fs->sync_lock);
		rc = sync_pass(fs, true, &none, &progress, NULL);
		pthread_mutex_unlock(&fs->sync_lock);
	}
	return rc;
}

/* See sync_int.h. */
int fs_sync_taken(struct fs *fs, size_t (*take)(void *ctx, uint64_t **inos),
		  void *ctx, bool *progress)
{
	struct sync_only only = { NULL, 0 };
	struct sync_later later;
	uint64_t *inos = NULL;
	int rc = 0;

	*progress = false;
	pthread_mutex_lock(&fs->sync_lock);
	only.n = take(ctx, &inos);
	if (only.n > 1) {
		qsort(inos, only.n, sizeof(*inos), cmp_ino); /* only_has */
		/* One item per file: two requests for one file (two COMMITs,
		 * or a COMMIT and another node's request to let go) made two
		 * uploads of it in parallel, the later PUT replacing the
		 * object whose ETag the record kept. */
		size_t k = 1;

		for (size_t i = 1; i < only.n; i++)
			if (inos[i] != inos[k - 1])
				inos[k++] = inos[i];
		only.n = k;
	}
	only.inos = inos;
	if (only.n)
		rc = sync_pass(fs, true, &only, progress, &later);
	pthread_mutex_unlock(&fs->sync_lock);
	if (only.n && !rc)
		rc = sync_pass_finish(&later, progress);
	return rc;
}
