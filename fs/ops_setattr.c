/*
 * fs/ops_setattr.c - SETATTR (RFC 1813 3.3.2).
 *
 * The record changes in one transaction, which also marks the inode dirty
 * (its object's metadata, or data, must be rewritten in the store).  A
 * size change needs the data local: a file that is not is fetched first,
 * except for truncation to 0, which just starts an empty local file.  The
 * cache file is changed after the commit, on a worker thread, and flushed
 * before the reply (an async export: within its window), for while the
 * file is dirty its cache file is the authority for its size and times.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "db/db.h"
#include "fs_int.h"

struct setattr_op {
	struct fs *fs;
	struct fs_ctx ctx;
	uint64_t ino;
	struct fs_sattr sa;
	bool guarded;
	int64_t guard_ns;
	bool cache_create, cache_trunc, cache_mtime;
	struct timespec mtime; /* for the cache file */
	/* Held from the commit until the cache file shows the change: no
	 * upload of the file as it was cleans the record meanwhile. */
	struct cache_change *change;
	struct fs_wcc *wcc;
	struct fs_wcc local_wcc; /* when the caller passed none */
	fs_done_fn done;
	void *arg;
};

/* Who may change what: chmod(2), chown(2), utimes(2), truncate(2). */
static int setattr_perm(const struct fs_ctx *ctx, const struct fs_inode *in,
			const struct fs_sattr *sa)
{
	bool root = ctx->uid == 0, owner = root || ctx->uid == in->uid;

	if ((sa->mask & FS_SET_MODE) && !owner)
		return -EPERM;
	/* Only the owner may even name the owner it has (chown_ok() in
	 * Linux): a non-owner's chown to the present uid is EPERM too. */
	if ((sa->mask & FS_SET_UID) && !root && (!owner || sa->uid != in->uid))
		return -EPERM;
	if ((sa->mask & FS_SET_GID) && !root &&
	    !(owner && (sa->gid == in->gid || fs_in_group(ctx, sa->gid))))
		return -EPERM;
	if ((sa->mask & (FS_SET_ATIME | FS_SET_MTIME)) && !owner)
		return -EPERM;
	if ((sa->mask & (FS_SET_ATIME_NOW | FS_SET_MTIME_NOW)) && !owner &&
	    fs_perm(ctx, in, W_OK))
		return -EACCES;
	if (sa->mask & FS_SET_SIZE) {
		if (in->type == FS_DIR)
			return -EISDIR;
		if (in->type != FS_REG)
			return -EINVAL;
		return fs_perm(ctx, in, W_OK);
	}
	return 0;
}

static void setattr_record(struct setattr_op *op, struct fs_inode *in,
			   int64_t now)
{
	const struct fs_sattr *sa = &op->sa;
	bool root = op->ctx.uid == 0;

	if (sa->mask & FS_SET_MODE) {
		in->mode = sa->mode & 07777;
		/* chmod(2): a non-member may not keep the set-gid bit. */
		if (!root && !fs_in_group(&op->ctx, in->gid))
			in->mode &= ~(uint32_t)S_ISGID;
	}
	/* chown(2) of anything but a directory drops set-id, whoever asks
	 * (knfsd: nfsd_sanitize_attrs); truncate(2) by all but root. */
	if (((sa->mask & (FS_SET_UID | FS_SET_GID)) && in->type != FS_DIR) ||
	    ((sa->mask & FS_SET_SIZE) && !root))
		fs_kill_setid(in);
	if (sa->mask & FS_SET_UID)
		in->uid = sa->uid;
	if (sa->mask & FS_SET_GID)
		in->gid = sa->gid;
	if (sa->mask & FS_SET_ATIME)
		in->atime = fs_ts_to_ns(&sa->atime);
	if (sa->mask & FS_SET_ATIME_NOW)
		in->atime = now;
	if (sa->mask & (FS_SET_MTIME | FS_SET_MTIME_NOW)) {
		in->mtime = (sa->mask & FS_SET_MTIME) ? fs_ts_to_ns(&sa->mtime)
						      : now;
		op->mtime = fs_ns_to_ts(in->mtime);
	}
	if (sa->mask & FS_SET_SIZE) {
		in->size = sa->size;
		if (!(sa->mask & (FS_SET_MTIME | FS_SET_MTIME_NOW)))
			in->mtime = now; /* truncate(2) changes mtime */
	}
	in->ctime = now;
}

static int setattr_apply(struct db_txn *txn, void *p)
{
	struct setattr_op *op = p;
	struct fs *fs = op->fs;
	struct fs_inode in;
	int rc = fs_inode_get(fs, txn, op->ino, &in);

	if (rc)
		return rc;
	fs_wcc_before(fs, &in, op->wcc);
	fs_wcc_after(fs, &in, op->wcc);
	if (op->guarded && fs_inode_ctime(fs, &in) != op->guard_ns)
		return -ECANCELED;
	if (!op->sa.mask)
		return 0;
	rc = setattr_perm(&op->ctx, &in, &op->sa);
	if (rc)
		return rc;
	setattr_record(op, &in, fs_now_ns());
	uint32_t dirty = FS_F_DIRTY_META;

	if (op->sa.mask & FS_SET_SIZE) {
		dirty |= FS_F_DIRTY_DATA;
		if (cache_is_local(fs->cache, in.ino))
			op->cache_trunc = true;
		else if (op->sa.size == 0)
			op->cache_create = true;
		else
			return -EAGAIN; /* dropped since made local: retry */
	}
	if ((rc = fs_owner_take(fs, &in)) ||
	    (rc = fs_inode_mark(fs, txn, &in, dirty)))
		return rc;
	/* While dirty the cache file holds the mtime: it must get it too. */
	op->cache_mtime = in.type == FS_REG && (in.flags & FS_F_DIRTY_DATA) &&
			  (op->sa.mask & (FS_SET_MTIME | FS_SET_MTIME_NOW));
	rc = fs_inode_put(fs, txn, &in);
	if (rc)
		return rc;
	/* Once: an apply may run again on a fresher record (a cluster). */
	if ((op->cache_trunc || op->cache_mtime) && !op->change)
		op->change = cache_change_begin(fs->cache, in.ino);
	fs_wcc_after(fs, &in, op->wcc);
	return 0;
}

static void setattr_free(struct setattr_op *op, int err)
{
	op->done(op->arg, err);
	free(op);
}

static void setattr_cache_job(struct fs *fs, void *p)
{
	struct setattr_op *op = p;
	int rc = 0;

	if (op->cache_create)
		rc = cache_create(fs->cache, op->ino);
	else if (op->cache_trunc)
		rc = cache_truncate(fs->cache, op->ino, op->sa.size);
	if (!rc && op->cache_mtime)
		rc = cache_set_mtime(fs->cache, op->ino, &op->mtime);
	/*
	 * While dirty the cache file is the authority for the size and the
	 * times: the reply promises them, as the commit did the record's.
	 * A sync export flushes the file now (and its name, after a
	 * truncation to 0 made a new one); an async export's window does.
	 */
	if (!rc && (op->cache_create || op->cache_trunc || op->cache_mtime)) {
		if (op->ctx.async)
			fs_async_defer(fs);
		else
			rc = cache_file_durable(fs->cache, op->ino);
	}
	cache_change_done(op->change);
	if (op->wcc && fs_getattr(fs, op->ino, &op->wcc->after) == 0)
		op->wcc->after_ok = true;
	setattr_free(op, rc);
}

static void setattr_done(void *p, int err)
{
	struct setattr_op *op = p;

	if (!err && (op->cache_create || op->cache_trunc || op->cache_mtime)) {
		fs_defer(op->fs, setattr_cache_job, op);
		return;
	}
	cache_change_done(op->change); /* the commit failed */
	setattr_free(op, err);
}

static void setattr_fetched(void *p, long res)
{
	struct setattr_op *op = p;

	if (res < 0) {
		setattr_free(op, (int)res);
		return;
	}
	fs_submit(op->fs, &op->ctx, setattr_apply, setattr_done, op);
}

/* SETATTR: see fs.h.  wcc is filled on success and failure. */
void fs_setattr(struct fs *fs, const struct fs_ctx *ctx, uint64_t ino,
		const struct fs_sattr *sattr,
		const struct timespec *guard_ctime, struct fs_wcc *wcc,
		fs_done_fn done, void *arg)
{
	char key[STORE_KEY_MAX + 1];
	struct setattr_op *op;
	struct fs_inode in;
	struct db_txn *txn;
	int rc;

	if (wcc)
		memset(wcc, 0, sizeof(*wcc));
	if (fs->opts.read_only) {
		if (wcc && fs_getattr(fs, ino, &wcc->after) == 0)
			wcc->after_ok = true;
		done(arg, -EROFS);
		return;
	}
	op = calloc(1, sizeof(*op));
	if (!op) {
		done(arg, -ENOMEM);
		return;
	}
	*op = (struct setattr_op){ .fs = fs,
				   .ctx = *ctx,
				   .ino = ino,
				   .sa = *sattr,
				   .wcc = wcc,
				   .done = done,
				   .arg = arg };
	if (guard_ctime) {
		op->guarded = true;
		op->guard_ns = fs_ts_to_ns(guard_ctime);
	}
	if (!(sattr->mask & FS_SET_SIZE) || sattr->size == 0 ||
	    cache_is_local(fs->cache, ino)) {
		fs_submit(fs, &op->ctx, setattr_apply, setattr_done, op);
		return;
	}
	/* Changing the size of data that is not here: make it local (no
	 * download: the cut or the zeros past the end need no data). */
	rc = db_read_begin(fs->db, &txn);
	if (rc) {
		setattr_free(op, rc);
		return;
	}
	rc = fs_inode_get(fs, txn, ino, &in);
	if (!rc && in.type != FS_REG)
		rc = in.type == FS_DIR ? -EISDIR : -EINVAL;
	if (!rc)
		rc = fs_key_build(fs, txn, ino, key, sizeof(key));
	db_read_end(fs->db, txn);
	if (rc) {
		if (wcc && rc != -ESTALE &&
		    fs_getattr(fs, ino, &wcc->after) == 0)
			wcc->after_ok = true;
		setattr_free(op, rc);
		return;
	}
	cache_fetch(fs->cache, ctx->loop, ino,
		    &(struct cache_obj){ .key = key,
					 .size = in.size,
					 .etag = fs_obj_etag(&in) },
		    0, 0, false, setattr_fetched, op);
}
