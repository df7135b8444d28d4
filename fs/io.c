/*
 * fs/io.c - READ, WRITE and COMMIT through cache/.
 *
 * Chunks that are not readable (-ENODATA) are fetched from the store at
 * the inode's key, only those the request touches (plus readahead, which
 * cache/ adds), then the I/O is retried; a chunk evicted again in between
 * is fetched again, a few times at most.  A WRITE needs only the chunks
 * it covers in part (read-modify-write); the object itself is never
 * downloaded whole for it.  A WRITE to a dirty file touches no LMDB of
 * fs/; the first WRITE to a clean file commits DIRTY_DATA before the data
 * goes in (so a crash never leaves changed local data that the namespace
 * believes clean) and does its cache I/O on a worker: the db writer must
 * not block and cannot use an event loop's ring.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "common/log.h"
#include "db/db.h"
#include "fs_int.h"

/* Largest object a store key can hold (S3: 5 TiB). */
#define FS_FILE_MAX (5ull << 40)
/* Fetches of one request before it answers JUKEBOX (eviction races). */
#define FS_IO_TRIES 4
/* A -ESTALE with the record unchanged: fetched again, pinned, so often. */
#define FS_IO_STALE_AGAIN 2

struct io_op {
	struct fs *fs;
	int loop;
	uint64_t ino;
	uint64_t off;
	size_t len;
	void *buf;        /* READ into a buffer */
	int pipe_fd;      /* READ into a pipe, if >= 0 */
	const void *data; /* WRITE */
	enum fs_stable stable;
	struct io_obj *obj; /* built for a fetch (a miss) only */
	uint64_t size;      /* the record's, for a fetch */
	int tries;
	uint32_t owner;     /* cluster: the node whose changes it has, 0 none */
	uint64_t etag_hash; /* of the record's ETag when the op began */
	bool was_dirty, marked;
	bool kill_setid;     /* a WRITE that must take set-id away first */
	bool async;          /* an async export's: stable data deferred */
	uint8_t stale_again; /* -ESTALE fetches again, the record unchanged */
	uint64_t mark_epoch; /* the cache's clean epoch the mark saw */
	size_t *nread;
	bool *eof;
	struct fs_attr *attr;
	enum fs_stable *committed;
	struct fs_wcc *wcc;
	fs_done_fn done;
	void *arg;
};

/* A short summary of an ETag, to tell whether the object changed. */
static uint64_t etag_hash(const char *etag)
{
	uint64_t h = 14695981039346656037ull;

	for (; *etag; etag++)
		h = (h ^ (unsigned char)*etag) * 1099511628211ull;
	return h;
}

/* See fs.h. */
void fs_dirty_room(struct fs *fs, uint64_t *dirty, uint64_t *limit)
{
	struct cache_usage u;

	cache_usage(fs->cache, &u);
	*dirty = u.dirty;
	*limit = fs->opts.max_dirty;
}

int fs_backpressure(struct fs *fs)
{
	struct cache_usage u;

	/* The store being down is no reason: the cache and the journal
	 * keep the changes until it is back (up to max_dirty). */
	if (!fs->opts.max_dirty)
		return 0;
	cache_usage(fs->cache, &u);
	return u.dirty >= fs->opts.max_dirty ? -EAGAIN : 0;
}

_Static_assert(sizeof(struct io_op) <= sizeof(struct fs_io),
	       "struct fs_io must hold an io_op");
_Static_assert(_Alignof(struct io_op) <= _Alignof(struct fs_io),
	       "struct fs_io must align an io_op");

/* The op lives in the caller's room: nothing is allocated per I/O. */
static struct io_op *io_op_of(struct fs_io *io)
{
	return (struct io_op *)(void *)io->room;
}

/* The end: the op's room is the caller's again once done runs. */
static void io_free(struct io_op *op, int err)
{
	fs_done_fn done = op->done;
	void *arg = op->arg;

	free(op->obj);
	op->obj = NULL;
	done(arg, err);
}

/*
 * The inode for READ/WRITE: a regular file the caller may access.  The
 * owner may read and write a file whatever its mode bits, as NFS servers
 * do so that a file created read-only can still be written (RFC 1813 4.4).
 */
static int io_prepare(struct fs *fs, const struct fs_ctx *ctx, uint64_t ino,
		      int want, struct io_op *op, struct fs_inode *in)
{
	struct db_txn *txn;
	int rc = db_read_begin(fs->db, &txn);

	if (rc)
		return rc;
	rc = fs_inode_get(fs, txn, ino, in);
	if (rc)
		goto out_end;
	if (op->wcc)
		fs_wcc_before(fs, in, op->wcc);
	if (op->attr)
		fs_attr_fill(fs, in, op->attr);
	if (in->type != FS_REG) {
		rc = in->type == FS_DIR ? -EISDIR : -EINVAL;
		goto out_end;
	}
	if (ctx->uid != in->uid && (rc = fs_perm(ctx, in, want)))
		goto out_end;
	op->size = in->size;
	op->owner = in->owner;
	op->etag_hash = etag_hash(in->etag);
	op->was_dirty = in->flags & FS_F_DIRTY_DATA;
	op->kill_setid =
		(want & W_OK) && ctx->uid != 0 && fs_setid_killable(in);
out_end:
	db_read_end(fs->db, txn);
	return rc;
}

static void read_start(struct io_op *op);

/*
 * After a fetch: was the object replaced meanwhile (another node's
 * upload, a listing that saw another writer)?  The record then says so,
 * and the chunks just fetched may be the old object's: they are dropped
 * and op starts over on the new record.  True when it did.
 */
static bool io_refetch(struct io_op *op)
{
	struct db_txn *txn;
	struct fs_inode in;
	bool changed;

	if (db_read_begin(op->fs->db, &txn))
		return false;
	changed = !fs_inode_get(op->fs, txn, op->ino, &in) &&
		  !(in.flags & FS_F_DIRTY_DATA) &&
		  (in.size != op->size || etag_hash(in.etag) != op->etag_hash);
	db_read_end(op->fs->db, txn);
	if (!changed)
		return false;
	cache_drop(op->fs->cache, op->ino);
	op->size = in.size;
	op->owner = in.owner;
	op->etag_hash = etag_hash(in.etag);
	return true;
}

/* op's object as the record says now: 0, or -errno. */
static int io_reload(struct io_op *op)
{
	struct db_txn *txn;
	struct fs_inode in;
	int rc = db_read_begin(op->fs->db, &txn);

	if (rc)
		return rc;
	rc = fs_inode_get(op->fs, txn, op->ino, &in);
	db_read_end(op->fs->db, txn);
	if (rc)
		return rc;
	op->size = in.size;
	op->owner = in.owner;
	op->etag_hash = etag_hash(in.etag);
	return 0;
}

/* What a fetch GETs: the object and the version the record knows. */
struct io_obj {
	char key[STORE_KEY_MAX + 1];
	char etag[STORE_ETAG_MAX]; /* "": not in the store yet */
};

/*
 * Whether the version a fetch of op met, not the one it pinned, may be
 * our own (the record now, in one snapshot): the file has changes here
 * not uploaded yet, data or attributes (an upload of ours between its PUT
 * or its copy onto itself and its commit), or the record names another
 * version than the pinned one (that upload committed meanwhile; checked
 * in the same snapshot, so a commit between two looks cannot hide it).
 */
static bool io_ours_moving(struct io_op *op)
{
	const char *etag;
	struct db_txn *txn;
	struct fs_inode in;
	bool ours = false;

	if (db_read_begin(op->fs->db, &txn))
		return false;
	if (!fs_inode_get(op->fs, txn, op->ino, &in)) {
		etag = fs_obj_etag(&in) ? fs_obj_etag(&in) : "";
		ours = (in.flags & (FS_F_DIRTY_DATA | FS_F_DIRTY_META)) ||
		       (op->obj && strcmp(etag, op->obj->etag) != 0);
	}
	db_read_end(op->fs->db, txn);
	return ours;
}

/*
 * A fetch's error as the client should see it.  A missing object while
 * store work is still queued is most likely a rename whose COPY has not
 * run yet (the chunks never local are still at the old key): retry
 * later (JUKEBOX) rather than fail the I/O.  So is one whose changes
 * another node of the cluster holds (not uploaded yet): it is asked to
 * upload now.
 */
static int fetch_err(struct io_op *op, long res)
{
	struct fs *fs = op->fs;
	struct db_txn *txn;
	uint32_t node = 0;
	bool queued = false;

	/* Someone else replaced the object: no mix of two versions; the
	 * directory is listed again to take the new one in.  But the new
	 * version may be our own upload, before or just after its commit:
	 * the client tries again (JUKEBOX) and by then the record names it,
	 * rather than losing its handle. */
	if (res == -ESTALE) {
		if (io_ours_moving(op))
			return -EAGAIN;
		fs_store_changed(fs, op->ino);
		return -ESTALE;
	}
	if (res == -ENOENT && op->owner && op->owner != db_node_id(fs->db)) {
		fs_owner_ask(fs, op->owner, op->ino);
		return -EAGAIN;
	}
	if (res != -ENOENT || db_read_begin(fs->db, &txn))
		return (int)res;
	queued = fs_pending_of(fs, txn, op->ino, &node);
	db_read_end(fs->db, txn);
	/* A dead node's move: the sweep runs it. */
	if (queued && fs_pending_adoptable(fs, node))
		fs_owner_sweep_kick(fs);
	return queued ? -EAGAIN : (int)res;
}

/*
 * The object op's chunks come from, as the record says now (a hit never
 * needs it).  A dirty file's chunks that were never local are its
 * object's too, of the version it was last in step with.
 */
static int io_obj_load(struct io_op *op)
{
	struct db_txn *txn;
	struct fs_inode in;
	int rc;

	if (!op->obj && !(op->obj = malloc(sizeof(*op->obj))))
		return -ENOMEM;
	rc = db_read_begin(op->fs->db, &txn);
	if (rc)
		return rc;
	rc = fs_key_build(op->fs, txn, op->ino, op->obj->key,
			  sizeof(op->obj->key));
	if (!rc)
		rc = fs_inode_get(op->fs, txn, op->ino, &in);
	db_read_end(op->fs->db, txn);
	if (!rc)
		snprintf(op->obj->etag, sizeof(op->obj->etag), "%s",
			 fs_obj_etag(&in) ? fs_obj_etag(&in) : "");
	return rc;
}

/* Fetch what op's range lacks, then done (with for_write: the edges). */
static void io_fetch(struct io_op *op, bool for_write, cache_done_fn done)
{
	int rc = io_obj_load(op);

	if (rc) {
		done(op, rc);
		return;
	}
	cache_fetch(op->fs->cache, op->loop, op->ino,
		    &(struct cache_obj){ .key = op->obj->key,
					 .size = op->size,
					 .etag = op->obj->etag },
		    op->off, op->len, for_write, done, op);
}

/*
 * Whether the version the record names now is not the one op's fetch
 * pinned (an upload of a file with changes here committed meanwhile:
 * its chunks never local are the same bytes in the new version).
 */
static bool io_pin_moved(struct io_op *op)
{
	char pinned[STORE_ETAG_MAX];

	if (!op->obj)
		return false;
	memcpy(pinned, op->obj->etag, sizeof(pinned));
	return !io_obj_load(op) && strcmp(pinned, op->obj->etag) != 0;
}

/*
 * A fetch met another version of the object than the one it pinned: if
 * the record moved on meanwhile (an upload, a listing), fetch again, of
 * the new one.  If it did not, the GET that failed may still not have
 * been about our version: the chunks were being fetched for another
 * waiter pinned to an older one (the syncer reading a file's chunks never
 * local from an older snapshot of the record), whose pin the cache entry
 * held; fetched again, pinned to ours, they come.  So that is tried
 * FS_IO_STALE_AGAIN times; a real replacement by another writer fails
 * each time.  True when it fetches again.
 */
static bool io_refetch_stale(struct io_op *op, long res, bool for_write,
			     cache_done_fn done)
{
	if (res != -ESTALE || op->tries >= FS_IO_TRIES)
		return false;
	if (!io_refetch(op) && !io_pin_moved(op) &&
	    op->stale_again++ >= FS_IO_STALE_AGAIN)
		return false;
	op->tries++;
	io_fetch(op, for_write, done);
	return true;
}

static void read_fetched(void *p, long res)
{
	struct io_op *op = p;

	if (io_refetch_stale(op, res, false, read_fetched))
		return;
	if (res < 0) {
		log_debug("fs: fetch for a read of %" PRIu64 ": %s", op->ino,
			  strerror((int)-res));
		io_free(op, fetch_err(op, res));
		return;
	}
	if (io_refetch(op)) {
		log_debug("fs: %" PRIu64 " changed under a read's fetch",
			  op->ino);
		if (op->tries++ < FS_IO_TRIES)
			io_fetch(op, false, read_fetched);
		else
			io_free(op, -EAGAIN);
		return;
	}
	read_start(op);
}

static void read_cb(void *p, long res)
{
	struct io_op *op = p;
	struct fs_attr a;
	int rc;

	if (res == -ENODATA && op->tries++ < FS_IO_TRIES) {
		io_fetch(op, false, read_fetched);
		return;
	}
	if (res < 0) {
		log_debug("fs: read of %" PRIu64 " @%" PRIu64 ": %s (tries %d)",
			  op->ino, op->off, strerror((int)-res), op->tries);
		io_free(op, res == -ENODATA ? -EAGAIN : (int)res);
		return;
	}
	rc = fs_getattr(op->fs, op->ino, &a);
	if (rc) {
		io_free(op, rc);
		return;
	}
	*op->nread = (size_t)res;
	*op->eof = op->off + (uint64_t)res >= a.size;
	if (op->attr)
		*op->attr = a;
	io_free(op, 0);
}

static void read_start(struct io_op *op)
{
	if (op->pipe_fd >= 0)
		cache_splice(op->fs->cache, op->loop, op->ino, op->off, op->len,
			     op->pipe_fd, read_cb, op);
	else
		cache_read(op->fs->cache, op->loop, op->ino, op->off, op->len,
			   op->buf, read_cb, op);
}

/* READ (RFC 1813 3.3.6) into buf, or into pipe_fd if >= 0. */
static void read_begin(struct fs *fs, struct fs_io *io,
		       const struct fs_ctx *ctx, uint64_t ino, uint64_t off,
		       size_t count, void *buf, int pipe_fd, size_t *nread,
		       bool *eof, struct fs_attr *attr, fs_done_fn done,
		       void *arg)
{
	struct io_op *op = io_op_of(io);
	struct fs_inode in;
	int rc;

	*op = (struct io_op){ .fs = fs,
			      .loop = ctx->loop,
			      .ino = ino,
			      .off = off,
			      .len = count,
			      .buf = buf,
			      .pipe_fd = pipe_fd,
			      .nread = nread,
			      .eof = eof,
			      .attr = attr,
			      .done = done,
			      .arg = arg };
	rc = io_prepare(fs, ctx, ino, R_OK, op, &in);
	if (rc) {
		io_free(op, rc);
		return;
	}
	read_start(op);
}

void fs_read(struct fs *fs, struct fs_io *io, const struct fs_ctx *ctx,
	     uint64_t ino, uint64_t off, size_t count, void *buf, size_t *nread,
	     bool *eof, struct fs_attr *attr, fs_done_fn done, void *arg)
{
	read_begin(fs, io, ctx, ino, off, count, buf, -1, nread, eof, attr,
		   done, arg);
}

void fs_read_splice(struct fs *fs, struct fs_io *io, const struct fs_ctx *ctx,
		    uint64_t ino, uint64_t off, size_t count, int pipe_fd,
		    size_t *nread, bool *eof, struct fs_attr *attr,
		    fs_done_fn done, void *arg)
{
	read_begin(fs, io, ctx, ino, off, count, NULL, pipe_fd, nread, eof,
		   attr, done, arg);
}

static void write_fetched(void *p, long res);

static void write_finish(struct io_op *op, int err)
{
	if (!err)
		*op->committed = op->stable;
	if (op->wcc && fs_getattr(op->fs, op->ino, &op->wcc->after) == 0)
		op->wcc->after_ok = true;
	io_free(op, err);
}

/* The data is on this node's disk; the reply waits for the upload.  A
 * store that cannot take it now answers -EAGAIN: the client resends
 * the WRITE (the same bytes again, harmless). */
static void write_stored(void *p, int err)
{
	write_finish(p, err);
}

static void write_cb(void *p, long res)
{
	struct io_op *op = p;

	if (res == -ENODATA && op->tries++ < FS_IO_TRIES) {
		io_fetch(op, true, write_fetched);
		return;
	}
	/* Uploaded and cleaned since io_prepare read the record dirty:
	 * marked again first (cache_write), else its bytes would never go. */
	if (res == -EUCLEAN && op->tries++ < FS_IO_TRIES) {
		op->was_dirty = op->marked = false;
		/* The version that upload made, if its commit is in: the
		 * mark then needs no fresh fetch (mark_dirty_apply). */
		io_reload(op);
		io_fetch(op, true, write_fetched);
		return;
	}
	if (res == -EUCLEAN)
		res = -EAGAIN;
	if (res < 0) {
		io_free(op, res == -ENODATA ? -EAGAIN : (int)res);
		return;
	}
	/* This WRITE made its file big enough to go up while it is written
	 * (early.c): the upload starts now, not at the syncer's next tick.
	 * A sequential writer crosses the cut once. */
	if (op->fs->early_cut && op->off <= op->fs->early_cut &&
	    op->off + op->len > op->fs->early_cut)
		fs_sync_nudge(op->fs);
	/* --strict-commit: a stable WRITE is a COMMIT of its own, and stable
	 * means in the store (a client that sends one WRITE FILE_SYNC for
	 * its fsync never sends a COMMIT). */
	if (op->stable != FS_UNSTABLE && op->fs->opts.strict_commit) {
		fs_sync_async(op->fs, op->ino, write_stored, op);
		return;
	}
	/* An async export's stable WRITE: flushed within the window. */
	if (op->stable != FS_UNSTABLE && op->async) {
		fs_async_defer(op->fs);
		write_finish(op, 0);
		return;
	}
	write_finish(op, 0);
}

static void write_data(struct io_op *op)
{
	bool sync = op->stable != FS_UNSTABLE &&
		    (!op->async || op->fs->opts.strict_commit);

	cache_write(op->fs->cache, op->loop, op->ino, op->off, op->data,
		    op->len, sync, write_cb, op);
}

static void write_job(struct fs *fs, void *p)
{
	struct io_op *op = p;

	(void)fs;
	op->loop = -1; /* a worker thread: the cache write runs inline */
	write_data(op);
}

static int mark_dirty_apply(struct db_txn *txn, void *p)
{
	struct io_op *op = p;
	struct fs_inode in;
	int rc = fs_inode_get(op->fs, txn, op->ino, &in);

	if (rc)
		return rc;
	/*
	 * Upload commits clean the cache in this thread's transactions too,
	 * so none comes between this read and the record being dirty here;
	 * one after it (in this group, before mark_dirty_done) moves the
	 * epoch on, and the write must mark again (-EUCLEAN).
	 */
	op->mark_epoch = cache_clean_epoch(op->fs->cache, op->ino);
	if (in.flags & FS_F_DIRTY_DATA)
		return 0;
	/*
	 * The object changed since the write's fetch: another node's
	 * upload that this replica had not applied when the write began
	 * (the commit then ran again on the fresh record), or another
	 * writer.  The chunks fetched, or taken as past the object's end,
	 * are the old object's: marking now would upload them (zeros where
	 * the new object has bytes).  The write starts over.
	 */
	if (in.size != op->size || etag_hash(in.etag) != op->etag_hash)
		return -ESTALE;
	/* DIRTY_DATA promises a cache entry: it may have gone (dropped). */
	if (!cache_is_local(op->fs->cache, in.ino))
		return -EAGAIN;
	if ((rc = fs_owner_take(op->fs, &in)) ||
	    (rc = fs_inode_mark(op->fs, txn, &in, FS_F_DIRTY_DATA)))
		return rc;
	return fs_inode_put(op->fs, txn, &in);
}

static void mark_dirty_done(void *p, int err)
{
	struct io_op *op = p;

	if (err == -ESTALE) {
		/* See mark_dirty_apply: drop the old chunks, fetch anew. */
		cache_drop(op->fs->cache, op->ino);
		if (op->tries++ < FS_IO_TRIES && io_reload(op) == 0) {
			op->marked = false;
			io_fetch(op, true, write_fetched);
			return;
		}
		err = -EAGAIN; /* the client retries */
	}
	if (err) {
		if (op->wcc &&
		    fs_getattr(op->fs, op->ino, &op->wcc->after) == 0)
			op->wcc->after_ok = true;
		io_free(op, err);
		return;
	}
	cache_marked(op->fs->cache, op->ino, op->mark_epoch);
	fs_defer(op->fs, write_job, op);
}

static void write_fetched(void *p, long res)
{
	struct io_op *op = p;

	if (io_refetch_stale(op, res, true, write_fetched))
		return;
	if (res < 0) {
		io_free(op, fetch_err(op, res));
		return;
	}
	if (op->was_dirty || op->marked) {
		write_data(op);
		return;
	}
	op->marked = true;
	if (op->async)
		db_submit_lazy(op->fs->db, mark_dirty_apply, mark_dirty_done,
			       op);
	else
		db_submit(op->fs->db, mark_dirty_apply, mark_dirty_done, op);
}

/*
 * A WRITE by anyone but root takes the set-id bits away before its data
 * goes in (Linux: file_remove_privs), in a commit of its own: GETATTR
 * shows it at once, and the object's metadata gets it with the upload.
 * Rare (a set-id file written by a user), so the common WRITE pays one
 * test of the mode it has read anyway.
 */
static int kill_setid_apply(struct db_txn *txn, void *p)
{
	struct io_op *op = p;
	struct fs_inode in;
	int rc = fs_inode_get(op->fs, txn, op->ino, &in);

	if (rc || !fs_setid_killable(&in))
		return rc;
	fs_kill_setid(&in);
	in.ctime = fs_now_ns();
	if ((rc = fs_owner_take(op->fs, &in)) ||
	    (rc = fs_inode_mark(op->fs, txn, &in, FS_F_DIRTY_META)))
		return rc;
	return fs_inode_put(op->fs, txn, &in);
}

static void kill_setid_done(void *p, int err)
{
	struct io_op *op = p;

	if (err) {
		if (op->wcc &&
		    fs_getattr(op->fs, op->ino, &op->wcc->after) == 0)
			op->wcc->after_ok = true;
		io_free(op, err);
		return;
	}
	/* As after a mark: the data goes in on a worker, never on the db
	 * writer's thread, which must not wait for the cache. */
	if (op->was_dirty)
		fs_defer(op->fs, write_job, op);
	else
		io_fetch(op, true, write_fetched);
}

/* WRITE (RFC 1813 3.3.7); the write verifier is nfsd's. */
void fs_write(struct fs *fs, struct fs_io *io, const struct fs_ctx *ctx,
	      uint64_t ino, uint64_t off, const void *data, size_t len,
	      enum fs_stable stable, enum fs_stable *committed,
	      struct fs_wcc *wcc, fs_done_fn done, void *arg)
{
	struct io_op *op = io_op_of(io);
	struct fs_inode in;
	int rc;

	if (wcc)
		memset(wcc, 0, sizeof(*wcc));
	*op = (struct io_op){ .fs = fs,
			      .loop = ctx->loop,
			      .ino = ino,
			      .off = off,
			      .len = len,
			      .data = data,
			      .stable = stable,
			      .async = ctx->async,
			      .committed = committed,
			      .wcc = wcc,
			      .done = done,
			      .arg = arg };
	rc = fs->opts.read_only ? -EROFS : 0;
	if (!rc && (off > FS_FILE_MAX || len > FS_FILE_MAX - off))
		rc = -EFBIG;
	/* Bounded: the client retries (JUKEBOX) until the uploader caught up. */
	if (!rc)
		rc = fs_backpressure(fs);
	if (!rc)
		rc = io_prepare(fs, ctx, ino, W_OK, op, &in);
	if (rc) {
		if (wcc && fs_getattr(fs, ino, &wcc->after) == 0)
			wcc->after_ok = true;
		io_free(op, rc);
		return;
	}
	if (op->kill_setid) {
		fs_submit(fs, ctx, kill_setid_apply, kill_setid_done, op);
		return;
	}
	if (op->was_dirty) {
		write_data(op);
		return;
	}
	/* Makes the inode local and reads the chunks the write covers in
	 * part; completes at once when there is nothing to fetch. */
	io_fetch(op, true, write_fetched);
}

static void commit_finish(struct io_op *op, int err)
{
	if (op->wcc && fs_getattr(op->fs, op->ino, &op->wcc->after) == 0)
		op->wcc->after_ok = true;
	io_free(op, err);
}

static void commit_stored(void *p, int err)
{
	commit_finish(p, err);
}

static void commit_cb(void *p, long res)
{
	struct io_op *op = p;

	/* --strict-commit: stable means in the store, not only on disk. */
	if (res >= 0 && op->fs->opts.strict_commit) {
		fs_sync_async(op->fs, op->ino, commit_stored, op);
		return;
	}
	commit_finish(op, res < 0 ? (int)res : 0);
}

/*
 * COMMIT (RFC 1813 3.3.21): data written so far is stable.  Metadata is
 * durable already (every change commits before its reply), so only a
 * dirty file's cache data (and its chunk journal) needs a sync; with
 * strict_commit the file is then uploaded before the reply.
 */
void fs_commit(struct fs *fs, struct fs_io *io, const struct fs_ctx *ctx,
	       uint64_t ino, struct fs_wcc *wcc, fs_done_fn done, void *arg)
{
	struct io_op *op;
	struct fs_inode in;
	struct db_txn *txn;
	int rc;

	if (wcc)
		memset(wcc, 0, sizeof(*wcc));
	rc = db_read_begin(fs->db, &txn);
	if (rc) {
		done(arg, rc);
		return;
	}
	rc = fs_inode_get(fs, txn, ino, &in);
	db_read_end(fs->db, txn);
	if (rc) {
		done(arg, rc);
		return;
	}
	fs_wcc_before(fs, &in, wcc);
	if (in.type != FS_REG ||
	    !(in.flags &
	      (fs->opts.strict_commit ? FS_F_DIRTY : FS_F_DIRTY_DATA))) {
		fs_wcc_after(fs, &in, wcc);
		done(arg, in.type == FS_DIR ? -EISDIR : 0);
		return;
	}
	op = io_op_of(io);
	*op = (struct io_op){ .fs = fs,
			      .loop = ctx->loop,
			      .ino = ino,
			      .wcc = wcc,
			      .done = done,
			      .arg = arg };
	if (!(in.flags & FS_F_DIRTY_DATA)) {
		/* strict_commit, only attributes to write: nothing to sync. */
		fs_sync_async(fs, ino, commit_stored, op);
		return;
	}
	/* An async export: answered now, the file flushed in the window
	 * (with --strict-commit a COMMIT still waits for the store). */
	if (ctx->async && !fs->opts.strict_commit) {
		fs_async_defer(fs);
		commit_finish(op, 0);
		return;
	}
	cache_sync(fs->cache, ctx->loop, ino, commit_cb, op);
}
