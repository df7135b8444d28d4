/*
 * fs/ops_create.c - CREATE, MKDIR, SYMLINK, MKNOD.
 *
 * A new regular file gets its (empty) cache file before the namespace
 * change is submitted, so "DIRTY_DATA implies local" holds from the first
 * commit on; the inode number is taken from the in-memory counter for that
 * reason, and a create that turns out not to be needed drops the file.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "db/db.h"
#include "fs_int.h"

struct create_op {
	struct fs *fs;
	struct fs_ctx ctx;
	uint64_t dir;
	char name[FS_NAME_MAX + 1];
	uint32_t type;
	enum fs_create_how how;
	struct fs_sattr sattr;
	uint8_t verf[8];
	char target[FS_PATH_MAX + 1];
	uint32_t major, minor; /* devices */
	uint64_t new_ino;
	uint64_t existing; /* UNCHECKED / EXCLUSIVE retry: the inode found */
	uint64_t *ino_out;
	struct fs_attr *attr_out;
	struct fs_wcc *dir_wcc;
	fs_done_fn done;
	void *arg;
};

/* May a caller who creates a file give it these owners? (chown rules) */
static int owner_check(const struct fs_ctx *ctx, const struct fs_sattr *sa)
{
	if (ctx->uid == 0)
		return 0;
	if ((sa->mask & FS_SET_UID) && sa->uid != ctx->uid)
		return -EPERM;
	if ((sa->mask & FS_SET_GID) && !fs_in_group(ctx, sa->gid))
		return -EPERM;
	return 0;
}

/* Would dir/name (plus '/' for a directory) fit in a store key? */
static int key_fits(struct fs *fs, struct db_txn *txn, uint64_t dir,
		    const char *name, bool is_dir)
{
	char key[STORE_KEY_MAX + 2];

	return fs_name_key(fs, txn, dir, name, is_dir, key, sizeof(key));
}

/* An existing entry: which outcome the create mode asks for. */
static int create_existing(struct create_op *op, const struct fs_inode *ex)
{
	if (op->type != FS_REG)
		return -EEXIST;
	switch (op->how) {
	case FS_CREATE_GUARDED:
		return -EEXIST;
	case FS_CREATE_EXCLUSIVE:
		/* RFC 1813 3.3.8: a retransmission finds its own verifier. */
		if (ex->type == FS_REG && (ex->flags & FS_F_EXCL) &&
		    !memcmp(ex->verf, op->verf, sizeof(op->verf)))
			break;
		return -EEXIST;
	case FS_CREATE_UNCHECKED:
		if (ex->type == FS_DIR)
			return -EISDIR;
		if (ex->type != FS_REG)
			return -EEXIST;
		break;
	}
	op->existing = ex->ino;
	return 0;
}

static void new_inode(struct create_op *op, const struct fs_inode *dir,
		      struct fs_inode *in)
{
	int64_t now = fs_now_ns();
	const struct fs_sattr *sa = &op->sattr;

	memset(in, 0, sizeof(*in));
	in->ino = op->new_ino;
	in->gen = FS_GEN;
	in->type = op->type;
	in->uid = (sa->mask & FS_SET_UID) ? sa->uid : op->ctx.uid;
	in->gid = (sa->mask & FS_SET_GID) ? sa->gid : op->ctx.gid;
	in->atime = in->mtime = in->ctime = now;
	if (sa->mask & FS_SET_ATIME)
		in->atime = fs_ts_to_ns(&sa->atime);
	if (sa->mask & FS_SET_MTIME)
		in->mtime = fs_ts_to_ns(&sa->mtime);
	in->parent = dir->ino;
	strcpy(in->name, op->name);
	in->nlink = 1;
	switch (op->type) {
	case FS_REG:
		in->mode = 0644;
		in->flags = FS_F_DIRTY_DATA;
		if (op->how == FS_CREATE_EXCLUSIVE) {
			in->flags |= FS_F_EXCL;
			memcpy(in->verf, op->verf, sizeof(in->verf));
		}
		break;
	case FS_DIR:
		in->mode = 0755;
		in->nlink = 2;
		in->next_cookie = FS_COOKIE_FIRST;
		in->dir_ver = 1;
		/* Its prefix is new: nothing to list until the TTL runs out. */
		in->listed_at_ms = fs_now_ms();
		in->flags = FS_F_DIRTY_META; /* the marker "dir/" */
		break;
	case FS_LNK:
		in->mode = 0777;
		in->flags = FS_F_DIRTY_META;
		strcpy(in->target, op->target);
		break;
	case FS_CHR:
	case FS_BLK:
		fs_rdev_set(in, op->major, op->minor);
		/* fall through */
	case FS_FIFO:
	case FS_SOCK:
		in->mode = 0644;
		in->flags = FS_F_DIRTY_META; /* a zero-byte object */
		break;
	}
	if (sa->mask & FS_SET_MODE)
		in->mode = sa->mode & 07777;
	if (store_down(op->fs->store))
		in->flags |= FS_F_MADE_AWAY;
}

static int create_apply(struct db_txn *txn, void *p)
{
	struct create_op *op = p;
	struct fs *fs = op->fs;
	struct fs_inode dir, in;
	uint64_t ino;
	int rc = fs_dir_change_begin(fs, txn, &op->ctx, op->dir, op->dir_wcc,
				     &dir);

	if (rc)
		return rc;
	rc = fs_dirent_get(fs, txn, op->dir, op->name, &ino, NULL);
	if (rc == 0) {
		rc = fs_inode_get(fs, txn, ino, &in);
		if (rc)
			return rc == -ESTALE ? -EIO : rc;
		rc = create_existing(op, &in);
		if (!rc) {
			*op->ino_out = in.ino;
			if (op->attr_out)
				fs_attr_fill(fs, &in, op->attr_out);
		}
		return rc;
	}
	if (rc != -ENOENT)
		return rc;
	if ((rc = owner_check(&op->ctx, &op->sattr)) ||
	    (rc = key_fits(fs, txn, op->dir, op->name, op->type == FS_DIR)))
		return rc;
	new_inode(op, &dir, &in);
	rc = fs_dirent_add(fs, txn, &dir, op->name, in.ino);
	if (rc)
		return rc;
	if (op->type == FS_DIR)
		dir.nlink++;
	if ((rc = fs_inode_put(fs, txn, &dir)) ||
	    (rc = fs_owner_take(fs, &in)) ||
	    (rc = fs_inode_mark(fs, txn, &in, in.flags)) ||
	    (rc = fs_inode_put(fs, txn, &in)) ||
	    (rc = fs_meta_note_ino(fs, txn, in.ino)))
		return rc;
	*op->ino_out = in.ino;
	if (op->attr_out)
		fs_attr_fill(fs, &in, op->attr_out);
	fs_wcc_after(fs, &dir, op->dir_wcc);
	return 0;
}

static void create_free(struct create_op *op, int err)
{
	op->done(op->arg, err);
	free(op);
}

/* UNCHECKED on an existing file: the sattr applies as a SETATTR. */
static void create_setattr_done(void *p, int err)
{
	struct create_op *op = p;

	if (!err && op->attr_out)
		err = fs_getattr(op->fs, op->existing, op->attr_out);
	create_free(op, err);
}

static void create_setattr_job(struct fs *fs, void *p)
{
	struct create_op *op = p;

	op->ctx.loop = -1; /* a worker thread: cache I/O runs inline */
	fs_setattr(fs, &op->ctx, op->existing, &op->sattr, NULL, NULL,
		   create_setattr_done, op);
}

static void create_done(void *p, int err)
{
	struct create_op *op = p;

	if (op->type == FS_REG && (err || op->existing))
		cache_drop(op->fs->cache, op->new_ino);
	if (!err && op->existing && op->how == FS_CREATE_UNCHECKED &&
	    op->sattr.mask) {
		fs_defer(op->fs, create_setattr_job, op);
		return;
	}
	create_free(op, err);
}

static void create_common(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
			  const char *name, uint32_t type,
			  enum fs_create_how how, const struct fs_sattr *sattr,
			  const uint8_t verf[8], const char *target,
			  uint32_t major, uint32_t minor, uint64_t *ino,
			  struct fs_attr *attr, struct fs_wcc *dir_wcc,
			  fs_done_fn done, void *arg)
{
	struct create_op *op;
	int rc;

	if (dir_wcc)
		memset(dir_wcc, 0, sizeof(*dir_wcc));
	if (fs->opts.read_only) {
		done(arg, -EROFS);
		return;
	}
	rc = fs_name_creatable(dir, name);
	if (!rc && target && strlen(target) > FS_PATH_MAX)
		rc = -ENAMETOOLONG;
	if (!rc && target && !target[0])
		rc = -EINVAL;
	if (rc) {
		done(arg, rc);
		return;
	}
	op = calloc(1, sizeof(*op));
	if (!op) {
		done(arg, -ENOMEM);
		return;
	}
	*op = (struct create_op){ .fs = fs,
				  .ctx = *ctx,
				  .dir = dir,
				  .type = type,
				  .how = how,
				  .major = major,
				  .minor = minor,
				  .ino_out = ino,
				  .attr_out = attr,
				  .dir_wcc = dir_wcc,
				  .done = done,
				  .arg = arg };
	strcpy(op->name, name);
	if (sattr)
		op->sattr = *sattr;
	if (how == FS_CREATE_EXCLUSIVE) {
		/* RFC 1813 3.3.8: no attributes with EXCLUSIVE; SETATTR follows. */
		op->sattr.mask = 0;
		memcpy(op->verf, verf, sizeof(op->verf));
	}
	if (target)
		strcpy(op->target, target);
	op->new_ino = fs_ino_alloc(fs);
	if (!op->new_ino) {
		create_free(op, -EAGAIN); /* a cluster's numbers are late */
		return;
	}
	if (type == FS_REG) {
		rc = cache_create(fs->cache, op->new_ino);
		if (!rc && (op->sattr.mask & FS_SET_SIZE) && op->sattr.size)
			rc = cache_truncate(fs->cache, op->new_ino,
					    op->sattr.size);
		if (!rc && (op->sattr.mask & FS_SET_MTIME))
			rc = cache_set_mtime(fs->cache, op->new_ino,
					     &op->sattr.mtime);
		if (rc) {
			cache_drop(fs->cache, op->new_ino);
			create_free(op, rc);
			return;
		}
	}
	fs_submit(fs, &op->ctx, create_apply, create_done, op);
}

/* CREATE (RFC 1813 3.3.8). */
void fs_create(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
	       const char *name, enum fs_create_how how,
	       const struct fs_sattr *sattr, const uint8_t verf[8],
	       uint64_t *ino, struct fs_attr *attr, struct fs_wcc *dir_wcc,
	       fs_done_fn done, void *arg)
{
	static const uint8_t zero[8];
	int rc = fs_backpressure(fs);

	/* A new file is new dirty data: it waits like a WRITE does. */
	if (rc) {
		if (dir_wcc)
			memset(dir_wcc, 0, sizeof(*dir_wcc));
		done(arg, rc);
		return;
	}
	create_common(fs, ctx, dir, name, FS_REG, how, sattr,
		      verf ? verf : zero, NULL, 0, 0, ino, attr, dir_wcc, done,
		      arg);
}

/* MKDIR (RFC 1813 3.3.9): -EEXIST for any existing name. */
void fs_mkdir(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
	      const char *name, const struct fs_sattr *sattr, uint64_t *ino,
	      struct fs_attr *attr, struct fs_wcc *dir_wcc, fs_done_fn done,
	      void *arg)
{
	create_common(fs, ctx, dir, name, FS_DIR, FS_CREATE_GUARDED, sattr,
		      NULL, NULL, 0, 0, ino, attr, dir_wcc, done, arg);
}

/* SYMLINK (RFC 1813 3.3.10): the object's body will be the target. */
void fs_symlink(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
		const char *name, const char *target,
		const struct fs_sattr *sattr, uint64_t *ino,
		struct fs_attr *attr, struct fs_wcc *dir_wcc, fs_done_fn done,
		void *arg)
{
	create_common(fs, ctx, dir, name, FS_LNK, FS_CREATE_GUARDED, sattr,
		      NULL, target, 0, 0, ino, attr, dir_wcc, done, arg);
}

/*
 * MKNOD (RFC 1813 3.3.11): a FIFO, socket or device becomes a zero-byte
 * object whose mode carries the type (and x-amz-meta-rdev the device
 * number), as s3fs stores them.  Devices only for root (after squashing):
 * -EPERM otherwise, as mknod(2) without CAP_MKNOD.
 */
void fs_mknod(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
	      const char *name, enum fs_type type, const struct fs_sattr *sattr,
	      uint32_t major, uint32_t minor, uint64_t *ino,
	      struct fs_attr *attr, struct fs_wcc *dir_wcc, fs_done_fn done,
	      void *arg)
{
	int rc = 0;

	if (!fs_special_type(fs_type_ifmt(type)))
		rc = -EINVAL; /* nfsd sends only these; BADTYPE is its own */
	else if ((type == FS_CHR || type == FS_BLK) && ctx->uid != 0)
		rc = -EPERM;
	if (rc) {
		if (dir_wcc)
			memset(dir_wcc, 0, sizeof(*dir_wcc));
		if (dir_wcc && fs_getattr(fs, dir, &dir_wcc->after) == 0)
			dir_wcc->after_ok = true;
		done(arg, fs->opts.read_only ? -EROFS : rc);
		return;
	}
	create_common(fs, ctx, dir, name, type, FS_CREATE_GUARDED, sattr, NULL,
		      NULL, major, minor, ino, attr, dir_wcc, done, arg);
}
