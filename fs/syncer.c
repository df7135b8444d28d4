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
 * Data goes up from the cache file: files up to store_put_max() with one
 * PUT (past STORE_PUT_MAX_DEFAULT only if all of it is local), larger
 * ones as a multipart upload whose parts run in parallel.  A
 * part whose bytes all equal the old object's (no dirty chunk, nothing
 * cut) is copied from it in the store (UploadPartCopy) instead of being
 * fetched and sent again; a backend without part-copy gets the bytes.
 * Chunks an upload needs that are not local are fetched first, part by
 * part, so memory holds at most one chunk per fetch worker, never the
 * file; from before that fetch until the bytes are sent the file's
 * chunks are pinned against eviction (a punched chunk would go up as
 * zeros over the only other copy of its bytes).
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
#define SYNC_BACKOFF_MAX_MS 10000
/* While the store is down, one store_probe() per this, and no pass. */
#define SYNC_PROBE_MS 1000
#define SYNC_FLUSH_RETRIES 5
#define SYNC_FLUSH_IDLE_MAX 500 /* passes without progress: ~10 s */
#define SYNC_INODE_TRIES 100    /* ~2 s of passes for one strict COMMIT */
/* Uploads of files up to SYNC_SMALL_MAX run many at once, as many as
 * the store takes (store_put_parallel, at most FS_PARALLEL_MAX); bigger
 * ones one at a time (each is a multipart upload with its own threads). */
#define SYNC_SMALL_MAX (8ull << 20)

struct sync_snap {
	struct fs_pending *pend;
	size_t npend;
	struct sync_item *items;
	size_t nitems;
};

/* cache_fetch with loop -1 completes inline: keep its result. */
static void sync_res_done(void *arg, long res)
{
	*(long *)arg = res;
}

static void snap_free(struct sync_snap *s)
{
	free(s->pend);
	free(s->items);
}

static int snap_pend(void *arg, const struct fs_pending *p)
{
	struct sync_snap *s = arg;

	s->pend[s->npend++] = *p;
	return s->npend == SYNC_BATCH;
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

/* Add ino to s->items if it is still there (with its key and cache
 * stats); a removed inode is skipped. */
static int snap_item(struct fs *fs, struct db_txn *txn, struct sync_snap *s,
		     uint64_t ino)
{
	struct sync_item *it = &s->items[s->nitems];
	int rc = fs_inode_get(fs, txn, ino, &it->in);

	if (rc == -ESTALE)
		return 0; /* removed: its work entry went with it */
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
	s->pend = calloc(SYNC_BATCH, sizeof(*s->pend));
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
	rc = fs_pending_each(fs, txn, snap_pend, s);
	if (rc == 1)
		rc = 0; /* a batch is full */
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
	if (rc)
		snap_free(s);
	return rc;
}

/* Anything left to do?  (pending records plus dirty inodes) */
static int work_left(struct fs *fs, size_t *n)
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
	return rc;
}

void sync_meta_of(const struct fs *fs, const struct sync_item *it,
		  struct store_meta *m)
{
	int64_t mtime = it->in.mtime;

	if (it->in.type == FS_REG && (it->in.flags & FS_F_DIRTY_DATA) &&
	    it->have_cs)
		mtime = fs_ts_to_ns(&it->cs.mtime);
	*m = (struct store_meta){ .has_mode = true,
				  .has_uid = true,
				  .has_gid = true,
				  .has_mtime = true,
				  .mode = it->in.mode,
				  .uid = it->in.uid,
				  .gid = it->in.gid,
				  .mtime_ns = mtime,
				  .symlink = it->in.type == FS_LNK };
	/* FIFOs, sockets and devices say what they are, as s3fs does. */
	if (fs_special_type(fs_type_ifmt(it->in.type))) {
		m->mode |= fs_type_ifmt(it->in.type);
		m->has_rdev = it->in.type == FS_CHR || it->in.type == FS_BLK;
		m->rdev = m->has_rdev ? fs_rdev_dev(&it->in) : 0;
	}
	/* Every name of a file with several says which file (links.c). */
	if (it->in.type != FS_DIR && it->in.nlink > 1)
		fs_link_id(fs, it->in.ino, m->link);
}

/* See sync_int.h. */
int sync_fetch_pinned(struct fs *fs, const struct sync_item *it, uint64_t off,
		      uint64_t len, struct cache_pin **pin)
{
	long res = 0;
	int rc = cache_pin(fs->cache, it->in.ino, it->in.size, pin);

	if (rc)
		return rc;
	cache_fetch(fs->cache, -1, it->in.ino,
		    &(struct cache_obj){ .key = it->key,
					 .size = it->in.size,
					 .etag = fs_obj_etag(&it->in) },
		    off, len, false, sync_res_done, &res);
	if (res) {
		cache_unpin(*pin);
		*pin = NULL;
	}
	return (int)res;
}

/*
 * The id of the version of it an upload sends: this node, this
 * namespace, the inode (together the writer, see own_earlier), and
 * what changes with every change of it and outlives a restart (the cache
 * file's size and mtime, to the ns, while its data is dirty; the record's
 * ctime).  Every try of one version has the same id, also after a crash
 * between an upload and its commit, so one whose answer was lost is
 * known as ours by the next (store_cond.wid), not taken for another
 * writer's (which made a spurious conflict copy of our own version, and
 * left the older one at the name: found by test_e2e_cache's kill -9 loop
 * under ThreadSanitizer's timing).  Not the write count: a restart
 * resets it.
 */
static void wid_of(struct fs *fs, const struct sync_item *it,
		   char wid[STORE_WID_MAX])
{
	uint64_t h = 14695981039346656037ull;
	uint64_t v[4] = { (uint64_t)it->in.ctime, 0, 0, 0 };

	if ((it->in.flags & FS_F_DIRTY_DATA) && it->have_cs) {
		v[1] = it->cs.size;
		v[2] = (uint64_t)it->cs.mtime.tv_sec;
		v[3] = (uint64_t)it->cs.mtime.tv_nsec;
	}
	for (size_t i = 0; i < sizeof(v); i++)
		h = (h ^ ((const unsigned char *)v)[i]) * 1099511628211ull;
	snprintf(wid, STORE_WID_MAX,
		 "%08" PRIx32 "-%016" PRIx64 "-%" PRIx64 "-%016" PRIx64,
		 db_node_id(fs->db), fs->nsid, it->in.ino, h);
}

/*
 * What the upload of it is based on: the version the record last saw, or
 * none (a new key).  Directory markers hold nothing to lose: always.  A
 * record from before ETags were kept cannot say: always.
 */
static void cond_of(struct fs *fs, const struct sync_item *it,
		    struct store_cond *c)
{
	memset(c, 0, sizeof(*c));
	if (it->in.type == FS_DIR)
		c->kind = STORE_IF_ANY;
	else if (!(it->in.flags & FS_F_IN_STORE))
		c->kind = STORE_IF_NONE;
	else if (it->in.etag[0])
		c->kind = STORE_IF_MATCH;
	memcpy(c->etag, it->in.etag, sizeof(c->etag));
	wid_of(fs, it, c->wid);
}

/*
 * The size of it's data as the upload sends it: the cache file's while
 * its data is dirty here, else the record's.
 */
static uint64_t item_size(const struct sync_item *it)
{
	return (it->in.flags & FS_F_DIRTY_DATA) && it->have_cs ? it->cs.size
							       : it->in.size;
}

/*
 * The store operation for one dirty inode, if the store still holds the
 * version it is based on (else -ESTALE, or -ENOENT if that is gone).
 * -ENODATA: not possible now.
 */
static int upload(struct fs *fs, struct sync_item *it, struct store_info *out)
{
	struct store_cond c;
	struct store_meta m;
	uint64_t size;
	int fd, rc;

	sync_meta_of(fs, it, &m);
	cond_of(fs, it, &c);
	fs_early_wid(fs, it->in.ino, c.wid);
	memcpy(m.wid, c.wid, sizeof(m.wid));
	switch (it->in.type) {
	case FS_DIR:
	case FS_FIFO:
	case FS_SOCK:
	case FS_CHR:
	case FS_BLK:
		return store_put_if(fs->store, it->key, "", 0, &m, &c, out);
	case FS_LNK:
		return store_put_if(fs->store, it->key, it->in.target,
				    strlen(it->in.target), &m, &c, out);
	case FS_REG:
		break;
	default:
		return -EIO;
	}
	/* Only the attributes changed: the store rewrites them itself. */
	if (!(it->in.flags & FS_F_DIRTY_DATA) && (it->in.flags & FS_F_IN_STORE))
		return store_copy_if(fs->store, it->key, it->key, &m, &c, out);
	rc = cache_open_fd(fs->cache, it->in.ino, &fd);
	if (rc)
		return rc;
	size = item_size(it);
	/* Most of it may be up already (early.c). */
	rc = fs_early_finish(fs, it, fd, size, &m, &c, out);
	if (rc != 1)
		goto out_close;
	/*
	 * One PUT up to the store's cut, but past the default one only for
	 * data that is all here: a rewrite of a big object that is mostly
	 * in the store goes as parts the store copies itself, instead of
	 * coming into the cache whole first.
	 */
	if (size > store_put_max(fs->store) ||
	    (size > STORE_PUT_MAX_DEFAULT &&
	     !cache_range_local(fs->cache, it->in.ino, 0, size))) {
		rc = sync_put_multipart(fs, it, fd, size, &m, &c, out);
	} else {
		struct cache_pin *pin;

		rc = sync_fetch_pinned(fs, it, 0, size, &pin);
		if (!rc) {
			rc = store_put_fd_if(fs->store, it->key, fd, size, &m,
					     &c, out);
			cache_unpin(pin);
		}
	}
out_close:
	cache_close_fd(fs->cache, it->in.ino, fd);
	return rc;
}

/* Does some inode live at store key key now (so it will rewrite it)? */
static bool key_occupied(struct fs *fs, struct db_txn *txn, const char *key)
{
	char name[FS_NAME_MAX + 1];
	uint64_t ino = FS_ROOT_INO;
	struct fs_inode in;
	const char *p = key;
	size_t len = strlen(key);
	bool want_dir = len && key[len - 1] == '/';

	if (want_dir)
		len--;
	while (p < key + len) {
		const char *e = memchr(p, '/', (size_t)(key + len - p));
		size_t n = e ? (size_t)(e - p) : (size_t)(key + len - p);

		if (n == 0 || n > FS_NAME_MAX)
			return false;
		memcpy(name, p, n);
		name[n] = '\0';
		if (fs_dirent_get(fs, txn, ino, name, &ino, NULL))
			return false;
		p += n + (e != NULL);
	}
	return fs_inode_get(fs, txn, ino, &in) == 0 &&
	       (in.type == FS_DIR) == want_dir;
}

/* A name of a file past its first whose object an upload made. */
struct link_copy {
	uint64_t parent;
	char name[FS_NAME_MAX + 1];
	char key[STORE_KEY_MAX + 2];
	char etag[STORE_ETAG_MAX];
};

struct upload_commit {
	struct fs *fs;
	struct sync_item *it;
	struct store_info *info;
	struct link_copy *links; /* made: their records learn it */
	size_t nlinks;
	uint64_t t0; /* ms, when its sync began */
};

/* The links copied (uc->links) are in the store: say so in their records. */
static int links_commit(struct db_txn *txn, struct upload_commit *uc)
{
	struct fs *fs = uc->fs;
	int rc;

	for (size_t i = 0; i < uc->nlinks; i++) {
		const struct link_copy *lc = &uc->links[i];
		struct fs_link l;

		rc = fs_link_get(fs, txn, uc->it->in.ino, lc->parent, lc->name,
				 &l);
		if (rc == -ENOENT)
			continue; /* removed or renamed meanwhile */
		if (rc)
			return rc;
		l.flags |= FS_LINK_IN_STORE;
		l.synced_ms = fs_now_ms();
		memcpy(l.etag, lc->etag, sizeof(l.etag));
		if ((rc = fs_link_put(fs, txn, &l)) ||
		    (rc = fs_keys_put(fs, txn, lc->key, l.ino)))
			return rc;
	}
	return 0;
}

/*
 * The data and mtime are as the snapshot saw them.  Not the ctime: chunks
 * fetched for the upload itself move it.  wseq counts every write and
 * truncate; SETATTR of the mtime shows in mtime.
 */
static bool cs_equal(const struct cache_stat *a, const struct cache_stat *b)
{
	return a->size == b->size && a->wseq == b->wseq &&
	       a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec;
}

static int upload_commit_apply(struct db_txn *txn, void *arg)
{
	struct upload_commit *uc = arg;
	struct fs *fs = uc->fs;
	struct sync_item *it = uc->it;
	char key[STORE_KEY_MAX + 2];
	struct cache_stat cs;
	struct fs_inode in;
	int rc = fs_inode_get(fs, txn, it->in.ino, &in);
	bool gone = rc == -ESTALE;

	if (rc && !gone)
		return rc;
	if (!gone && it->in.ino != FS_ROOT_INO &&
	    (rc = fs_obj_key(fs, txn, &in, key, sizeof(key))))
		return rc;
	if (gone && it->in.ino == FS_ROOT_INO)
		return -EIO;
	if (it->in.ino != FS_ROOT_INO && (gone || strcmp(key, it->key))) {
		/* Gone or moved since the snapshot: the object is stale. */
		if (key_occupied(fs, txn, it->key))
			return 0;
		return fs_pending_add(fs, txn, FS_PEND_DEL, it->in.ino, it->key,
				      NULL);
	}
	if (it->in.ino != FS_ROOT_INO) {
		in.flags |= FS_F_IN_STORE;
		in.flags &= ~(uint32_t)FS_F_MADE_AWAY;
		if (in.type == FS_DIR)
			in.flags |= FS_F_MARKER;
		in.synced_ms = fs_now_ms();
		snprintf(in.etag, sizeof(in.etag), "%s", uc->info->etag);
		if ((rc = fs_keys_put(fs, txn, it->key, in.ino)))
			return rc;
	}
	if ((rc = links_commit(txn, uc)))
		return rc;
	/* A LINK since the snapshot moved the ctime: its name may lack
	 * its object yet. */
	if (in.ctime == it->in.ctime)
		in.flags &= ~(it->in.flags &
			      (uint32_t)(FS_F_DIRTY_META | FS_F_DIRTY_LINKS));
	if ((it->in.flags & FS_F_DIRTY_DATA) && it->have_cs &&
	    cache_stat(fs->cache, in.ino, &cs) == 0 && cs_equal(&cs, &it->cs) &&
	    !(rc = cache_clean(fs->cache, txn, in.ino, cs.wseq, cs.size))) {
		/* Clean again: the record is the authority from now on. */
		in.flags &= ~(uint32_t)FS_F_DIRTY_DATA;
		in.size = cs.size;
		in.mtime = fs_ts_to_ns(&cs.mtime);
		if (fs_ts_to_ns(&cs.ctime) > in.ctime)
			in.ctime = fs_ts_to_ns(&cs.ctime);
	} else if (rc && rc != -EBUSY) {
		return rc;
	}
	fs_owner_release(fs, &in);
	if ((rc = fs_inode_put(fs, txn, &in)))
		return rc;
	return fs_work_sync(fs, txn, &in);
}

/*
 * The version it's upload is based on, as the record says now: a COPY
 * of this pass (a rename) gave it a new one after the snapshot.  -EAGAIN
 * if it moved or went meanwhile (the next pass sees it as it is).
 */
static int item_base_refresh(struct fs *fs, struct sync_item *it)
{
	char key[STORE_KEY_MAX + 2];
	struct fs_inode in;
	struct db_txn *txn;
	int rc = db_read_begin(fs->db, &txn);

	if (rc)
		return rc;
	rc = fs_inode_get(fs, txn, it->in.ino, &in);
	if (!rc)
		rc = fs_obj_key(fs, txn, &in, key, sizeof(key));
	db_read_end(fs->db, txn);
	if (rc || strcmp(key, it->key))
		return -EAGAIN;
	memcpy(it->in.etag, in.etag, sizeof(it->in.etag));
	it->in.flags = (it->in.flags & ~(uint32_t)FS_F_IN_STORE) |
		       (in.flags & FS_F_IN_STORE);
	return 0;
}

/* The links of a file as the record says now, each with its key. */
struct links_read {
	struct fs *fs;
	struct db_txn *txn;
	struct fs_link *v;
	char (*keys)[STORE_KEY_MAX + 2];
	size_t n, cap;
};

static int links_read_fn(void *arg, const struct fs_link *l)
{
	struct links_read *lr = arg;

	if (lr->n == lr->cap) {
		size_t cap = lr->cap ? lr->cap * 2 : 4;
		struct fs_link *v = realloc(lr->v, cap * sizeof(*v));
		char(*k)[STORE_KEY_MAX + 2];

		if (!v)
			return -ENOMEM;
		lr->v = v;
		if (!(k = realloc(lr->keys, cap * sizeof(*k))))
			return -ENOMEM;
		lr->keys = k;
		lr->cap = cap;
	}
	lr->v[lr->n] = *l;
	if (fs_name_key(lr->fs, lr->txn, l->parent, l->name, false,
			lr->keys[lr->n], sizeof(lr->keys[0])))
		return 0; /* its directory went meanwhile: not this name */
	lr->n++;
	return 0;
}

/* Another writer's object is at link l's key: that name is theirs now,
 * a file of its own (the listing brings it in); the others keep ours. */
struct link_split {
	struct fs *fs;
	const struct fs_link *l;
};

static int link_split_apply(struct db_txn *txn, void *arg)
{
	struct link_split *ls = arg;
	struct fs *fs = ls->fs;
	struct fs_inode in, dir;
	struct fs_link now;
	int rc = fs_link_get(fs, txn, ls->l->ino, ls->l->parent, ls->l->name,
			     &now);

	if (rc == -ENOENT)
		return 0;
	if (rc || (rc = fs_inode_get(fs, txn, ls->l->ino, &in)) ||
	    (rc = fs_inode_get(fs, txn, ls->l->parent, &dir)) ||
	    (rc = fs_name_drop(fs, txn, &dir, &in, now.name, false)))
		return rc;
	return fs_inode_put(fs, txn, &dir);
}

/*
 * Make the objects of the file's other names (hard links, links.c): a
 * copy in the store of the first name's object, just uploaded (all of
 * them), or, uploaded false, only the names that have none yet.  Each
 * copy is conditional on the version that name's record last saw, so
 * another writer's object there is never overwritten: that name splits
 * off instead.  The copies made are listed in uc for the commit.
 */
static int links_copy(struct fs *fs, struct sync_item *it, bool uploaded,
		      struct upload_commit *uc)
{
	struct links_read lr = { .fs = fs };
	struct store_meta m;
	struct store_cond c;
	int rc = db_read_begin(fs->db, &lr.txn);

	if (rc)
		return rc;
	rc = fs_link_each(fs, lr.txn, it->in.ino, links_read_fn, &lr);
	db_read_end(fs->db, lr.txn);
	if (!rc && lr.n && !(uc->links = calloc(lr.n, sizeof(*uc->links))))
		rc = -ENOMEM;
	sync_meta_of(fs, it, &m);
	cond_of(fs, it, &c);
	fs_early_wid(fs, it->in.ino, c.wid);
	memcpy(m.wid, c.wid, sizeof(m.wid));
	for (size_t i = 0; !rc && i < lr.n; i++) {
		const struct fs_link *l = &lr.v[i];
		struct link_copy *lc = &uc->links[uc->nlinks];
		struct store_info info;

		if (!uploaded && (l->flags & FS_LINK_IN_STORE))
			continue;
		c.kind = !(l->flags & FS_LINK_IN_STORE) ? STORE_IF_NONE
			 : l->etag[0]                   ? STORE_IF_MATCH
							: STORE_IF_ANY;
		memcpy(c.etag, l->etag, sizeof(c.etag));
		rc = store_copy_if(fs->store, it->key, lr.keys[i], &m, &c,
				   &info);
		if (rc == -ESTALE ||
		    (rc == -ENOENT && c.kind == STORE_IF_MATCH)) {
			log_warn(
				"fs: %s, another name of %s, was %s by someone "
				"else: it is a file of its own now; the other "
				"names keep ours",
				lr.keys[i], it->key,
				rc == -ESTALE ? "written" : "deleted");
			rc = db_write(fs->db, link_split_apply,
				      &(struct link_split){ fs, l });
			if (!rc)
				fs_revalidate(fs, NULL, l->parent, true,
					      fs_done_nothing, NULL);
			continue;
		}
		if (rc)
			break;
		lc->parent = l->parent;
		strcpy(lc->name, l->name);
		strcpy(lc->key, lr.keys[i]);
		memcpy(lc->etag, info.etag, sizeof(lc->etag));
		uc->nlinks++;
	}
	free(lr.v);
	free(lr.keys);
	return rc;
}

/* The first name of a file with several is another writer's now. */
struct first_split {
	struct fs *fs;
	const struct sync_item *it;
};

static int first_split_apply(struct db_txn *txn, void *arg)
{
	const struct first_split *fsa = arg;
	struct fs *fs = fsa->fs;
	char key[STORE_KEY_MAX + 2], name[FS_NAME_MAX + 1];
	struct fs_inode in, dir;
	int rc = fs_inode_get(fs, txn, fsa->it->in.ino, &in);

	if (rc)
		return rc == -ESTALE ? 0 : rc;
	/* Moved or unlinked meanwhile: the next pass sees it as it is. */
	if ((rc = fs_obj_key(fs, txn, &in, key, sizeof(key))) ||
	    strcmp(key, fsa->it->key) || in.nlink < 2)
		return rc;
	/* (A copy: fs_name_drop gives in the next name.) */
	memcpy(name, in.name, sizeof(name));
	if ((rc = fs_inode_get(fs, txn, in.parent, &dir)) ||
	    (rc = fs_name_drop(fs, txn, &dir, &in, name, false)))
		return rc;
	return fs_inode_put(fs, txn, &dir);
}

/*
 * The upload of a file with several names met another writer's version
 * (or their delete) at its first name: as for another name (links_copy),
 * that name splits off, theirs, and the file goes on under its others,
 * the next pass uploading it to the one that takes the first's place
 * (its object holds the file's older bytes, so even chunks never cached
 * here are not lost).  0, or the error that leaves it for later.
 */
static int first_split(struct fs *fs, struct sync_item *it, int why)
{
	int rc;

	log_warn("fs: %s, one of several names of one file, was %s by "
		 "someone else: it is theirs now; the file goes on under its "
		 "other names",
		 it->key, why == -ESTALE ? "written" : "deleted");
	rc = db_write(fs->db, first_split_apply,
		      &(struct first_split){ fs, it });
	if (!rc)
		fs_revalidate(fs, NULL, it->in.parent, true, fs_done_nothing,
			      NULL);
	return rc;
}

/*
 * An upload refused because the key holds another version: if that one
 * carries this file's own writer id (namespace, node, inode: the text of
 * wid_of before its last '-'), it is an earlier upload of this file
 * whose commit a crash kept from the record, and the file was written
 * again since (found by test_e2e_cache's kill -9 loop under
 * ThreadSanitizer: the newer version went aside as a conflict, the name
 * showing the older one).  Not another writer's: the record's base
 * becomes that version, so the next try replaces it.  True if so.
 */
static bool own_earlier(struct fs *fs, struct sync_item *it)
{
	char wid[STORE_WID_MAX];
	struct store_info si;
	const char *dash;

	wid_of(fs, it, wid);
	dash = strrchr(wid, '-');
	if (!dash || store_head(fs->store, it->key, &si) ||
	    strncmp(si.meta.wid, wid, (size_t)(dash - wid) + 1))
		return false;
	log_info("fs: %s holds an earlier upload of this file whose commit "
		 "was lost: replaced",
		 it->key);
	snprintf(it->in.etag, sizeof(it->in.etag), "%s", si.etag);
	it->in.flags |= FS_F_IN_STORE;
	return true;
}

/*
 * A name made while the store was away (FS_F_MADE_AWAY), before its
 * first upload: did another writer make it the other kind meanwhile?
 * For a directory ("d/"), an object "d"; for anything else ("f"), keys
 * under "f/".  -EEXIST if so, 0 if not, or the store's error.
 */
static int other_kind(struct fs *fs, const struct sync_item *it)
{
	char k[STORE_KEY_MAX + 2];
	size_t n = strlen(it->key);
	struct store_page page = { 0 };
	struct store_info info;
	int rc;

	if (!n || n > STORE_KEY_MAX - 1)
		return 0;
	memcpy(k, it->key, n + 1);
	if (it->in.type == FS_DIR) {
		if (k[n - 1] == '/')
			k[n - 1] = '\0';
		rc = store_head(fs->store, k, &info);
		return rc == -ENOENT ? 0 : rc ? rc : -EEXIST;
	}
	k[n] = '/';
	k[n + 1] = '\0';
	rc = store_list(fs->store, k, '/', NULL, 1, &page);
	if (!rc && (page.nentries || page.nprefixes))
		rc = -EEXIST;
	store_page_free(&page);
	return rc;
}

/*
 * The store's part of an item's sync: its upload (or its conflict
 * settled) and its links' copies.  0: uc is ready for item_commit (which
 * frees what it holds); 1: done, nothing to commit; or an error (uc
 * holds nothing then).
 */
static int item_store(struct fs *fs, struct sync_item *it,
		      struct upload_commit *uc)
{
	struct store_info *info = uc->info;
	/* Data or attributes to send; else only names to make (LINK). */
	bool uploading = (it->in.flags & (FS_F_DIRTY_DATA | FS_F_DIRTY_META)) ||
			 !(it->in.flags & FS_F_IN_STORE);
	int rc = 0;

	/* A node whose lease may have run out writes nothing (owner.c). */
	if (!db_lease_held(fs->db))
		return -EAGAIN;
	if (it->in.ino != FS_ROOT_INO) /* the root has no object */
		rc = item_base_refresh(fs, it);
	if (!rc && (it->in.flags & FS_F_MADE_AWAY) &&
	    !(it->in.flags & FS_F_IN_STORE) &&
	    (rc = other_kind(fs, it)) == -EEXIST) {
		rc = fs_conflict_kind(fs, &it->in, it->key);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return 1; /* moved aside: the next pass uploads it */
		rc = 0;
	}
	if (!rc && it->in.ino != FS_ROOT_INO && uploading)
		rc = upload(fs, it, info);
	else if (!rc)
		snprintf(info->etag, sizeof(info->etag), "%s", it->in.etag);
	if (rc == -ESTALE && own_earlier(fs, it))
		rc = upload(fs, it, info);
	/* Someone else wrote (or deleted) the key meanwhile. */
	if (rc == -ESTALE ||
	    (rc == -ENOENT && (it->in.flags & FS_F_IN_STORE))) {
		rc = it->in.type != FS_DIR && it->in.nlink > 1
			     ? first_split(fs, it, rc)
			     : fs_conflict(fs, &it->in, it->key, item_size(it),
					   rc);
		return rc ? rc : 1;
	}
	if (!rc && it->in.type != FS_DIR && it->in.ino != FS_ROOT_INO)
		rc = links_copy(fs, it, uploading, uc);
	if (rc) {
		free(uc->links);
		uc->links = NULL;
		return rc;
	}
	/* Up in full: an upload of its first parts is of no use now. */
	fs_early_forget(fs, it->in.ino);
	return 0;
}

/* The record's part: the item is in the store as uc says. */
static int item_commit(struct fs *fs, struct upload_commit *uc)
{
	int rc;

	log_debug("fs: uploaded %s (%" PRIu64 " bytes) in %" PRIu64 " ms",
		  uc->it->key, uc->info->size, fs_now_ms() - uc->t0);
	rc = db_write(fs->db, upload_commit_apply, uc);
	free(uc->links);
	uc->links = NULL;
	return rc;
}

/*
 * The uploads of one pass: items[0, n) run on up to FS_PARALLEL_MAX
 * threads at once (small files: many PUTs in flight fill the store,
 * where one at a time waits a round trip each; their commits share the
 * db writer's group commits), the rest one at a time after them.
 * Uploads of one snapshot are of distinct keys, so their order does not
 * matter; the pending records (deletes, copies) all ran before.
 */
/* An item's sync between item_store() and item_commit(). */
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
	rc = item_store(fs, it, &st->uc);
	atomic_fetch_sub(&fs->uploads_busy, 1);
	if (!rc && st != &one && !committing_add(fs, it->in.ino)) {
		st->staged = true;
		return;
	}
	if (!rc)
		rc = item_commit(fs, &st->uc);
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
	rc = item_commit(run->fs, &st->uc);
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
	for (size_t i = 0; i < sp->npend; i++) {
		const struct fs_pending *pd = &sp->pend[i];
		const char *what = pd->op == FS_PEND_DEL ? "delete" : "copy";

		rc = fs_fail_wait(fs, pd->src) ? -EAGAIN
					       : sync_run_pending(fs, pd);
		if (rc) {
			/* Later work must not overtake this record. */
			log_debug("fs: store %s %s: %s", what, pd->src,
				  strerror(-rc));
			if (!fs_err_transient(rc))
				fs_fail_note(fs, what, pd->src, rc);
			snap_free(sp);
			return rc;
		}
		fs_fail_clear(fs, pd->src);
		*progress = true;
	}
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
	atomic_init(&run->first, 0);
	atomic_init(&run->progress, false);
	/* Due ones: the small first (to run in parallel), then the big. */
	for (size_t i = 0; i < sp->nitems; i++) {
		struct sync_item *it = &sp->items[i];

		it->due = false;
		if ((only && !only_has(only, it->in.ino)) ||
		    now - it->quiet_since < delay * 1000000 ||
		    (!flushing && fs_fail_wait(fs, it->key)))
			continue;
		/* Another node's to upload (its changes may be newer). */
		if (it->in.type == FS_REG && it->in.owner &&
		    it->in.owner != db_node_id(fs->db))
			continue;
		it->due = true;
		if (item_size(it) <= SYNC_SMALL_MAX) {
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
	if (later) {
		/* The pending records' progress counts too. */
		if (*progress)
			atomic_store(&run->progress, true);
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
	fs->sync_started = true;
	rc = fs_strict_start(fs);
	if (rc)
		fs_syncer_stop(fs);
	return rc;
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
	fs_strict_stop(fs);
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
int fs_flush(struct fs *fs)
{
	int rc = 0, failures = 0, idle = 0;
	size_t left;
	bool progress;

	pthread_mutex_lock(&fs->sync_lock);
	for (;;) {
		rc = work_left(fs, &left);
		if (rc || left == 0)
			break;
		rc = sync_pass(fs, true, NULL, &progress, NULL);
		if (rc) {
			if (++failures > SYNC_FLUSH_RETRIES)
				break;
			usleep(100000u * (unsigned)failures);
			continue;
		}
		failures = 0;
		idle = progress ? 0 : idle + 1;
		if (idle > SYNC_FLUSH_IDLE_MAX) {
			rc = -EAGAIN; /* files that never hold still */
			break;
		}
		if (!progress)
			usleep(20000);
	}
	pthread_mutex_unlock(&fs->sync_lock);
	return rc;
}

int fs_sync_pending(struct fs *fs)
{
	bool progress = true;
	int rc = 0;

	/* Passes for no inode at all: the pending records alone. */
	for (int i = 0; i < SYNC_INODE_TRIES && progress && !rc; i++)
		rc = fs_sync_some(fs, NULL, 0, &progress);
	return rc;
}

/* See sync_int.h. */
int fs_sync_taken(struct fs *fs,
		  size_t (*take)(void *ctx, const uint64_t **inos), void *ctx,
		  bool *progress)
{
	struct sync_only only = { NULL, 0 };
	struct sync_later later;
	int rc = 0;

	*progress = false;
	pthread_mutex_lock(&fs->sync_lock);
	only.n = take(ctx, &only.inos);
	if (only.n)
		rc = sync_pass(fs, true, &only, progress, &later);
	pthread_mutex_unlock(&fs->sync_lock);
	if (only.n && !rc)
		rc = sync_pass_finish(&later, progress);
	return rc;
}

/* See sync_int.h. */
int fs_sync_some(struct fs *fs, const uint64_t *inos, size_t n, bool *progress)
{
	struct sync_only only = { inos, n };
	int rc;

	pthread_mutex_lock(&fs->sync_lock);
	rc = sync_pass(fs, true, &only, progress, NULL);
	pthread_mutex_unlock(&fs->sync_lock);
	return rc;
}
