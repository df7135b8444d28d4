/*
 * fs/ops_link.c - LINK (RFC 1813 3.3.15): another name for a file.
 *
 * The new name is a link record (links.c) and an entry; its object is
 * made in the store by copying the file's first object there: a COPY
 * queued now when that object exists (so it runs in namespace order,
 * before anything done to the names later), else by the upload that
 * makes the first one (FS_F_DIRTY_LINKS keeps the file in the work index
 * until every name has its object).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db/db.h"
#include "fs_int.h"

struct link_op {
	struct fs *fs;
	struct fs_ctx ctx;
	uint64_t ino, dir;
	char name[FS_NAME_MAX + 1];
	struct fs_attr *attr;
	struct fs_wcc *dir_wcc;
	fs_done_fn done;
	void *arg;
};

/*
 * Who may give a file another name: its owner or root; anyone else only
 * for a regular file they may read and write that is neither set-user-
 * ID nor set-group-ID-executable (Linux's fs.protected_hardlinks, which
 * knfsd applies too): no planting a second name for someone else's
 * setuid program or private file.
 */
static int link_allowed(const struct fs_ctx *ctx, const struct fs_inode *in)
{
	if (ctx->uid == 0 || ctx->uid == in->uid)
		return 0;
	if (in->type != FS_REG || (in->mode & S_ISUID) ||
	    (in->mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
		return -EPERM;
	return fs_perm(ctx, in, R_OK | W_OK) ? -EPERM : 0;
}

static int link_apply(struct db_txn *txn, void *p)
{
	struct link_op *op = p;
	struct fs *fs = op->fs;
	char from[STORE_KEY_MAX + 2], to[STORE_KEY_MAX + 2];
	struct fs_inode dir, in;
	struct fs_link l;
	uint64_t other;
	int rc = fs_dir_change_begin(fs, txn, &op->ctx, op->dir, op->dir_wcc,
				     &dir);

	if (rc || (rc = fs_inode_get(fs, txn, op->ino, &in)))
		return rc;
	if (in.type == FS_DIR)
		return -EPERM; /* link(2): no second name for a directory */
	if ((rc = link_allowed(&op->ctx, &in)))
		return rc;
	rc = fs_dirent_get(fs, txn, op->dir, op->name, &other, NULL);
	if (rc == 0)
		return -EEXIST;
	if (rc != -ENOENT)
		return rc;
	if (in.nlink >= FS_LINK_MAX)
		return -EMLINK;
	if ((rc = fs_name_key(fs, txn, op->dir, op->name, false, to,
			      sizeof(to))) ||
	    (rc = fs_obj_key(fs, txn, &in, from, sizeof(from))))
		return rc;
	memset(&l, 0, sizeof(l));
	l.ino = in.ino;
	l.parent = op->dir;
	strcpy(l.name, op->name);
	if ((rc = fs_dirent_add(fs, txn, &dir, op->name, in.ino)) ||
	    (rc = fs_link_put(fs, txn, &l)) ||
	    (rc = fs_inode_put(fs, txn, &dir)))
		return rc;
	in.nlink++;
	in.ctime = fs_now_ns();
	/* The first name's object learns the link id too (a copy onto
	 * itself), when it gets its first link. */
	if ((in.flags & FS_F_IN_STORE) && in.nlink == 2 &&
	    (rc = fs_pending_add(fs, txn, FS_PEND_COPY, in.ino, from, from)))
		return rc;
	if (in.flags & FS_F_IN_STORE)
		rc = fs_pending_add(fs, txn, FS_PEND_COPY, in.ino, from, to);
	else if (!(rc = fs_owner_take(fs, &in)))
		rc = fs_inode_mark(fs, txn, &in, FS_F_DIRTY_LINKS);
	if (rc || (rc = fs_inode_put(fs, txn, &in)))
		return rc;
	if (op->attr)
		fs_attr_fill(fs, &in, op->attr);
	fs_wcc_after(fs, &dir, op->dir_wcc);
	return 0;
}

static void link_done(void *p, int err)
{
	struct link_op *op = p;

	op->done(op->arg, err);
	free(op);
}

/* See fs.h. */
void fs_link(struct fs *fs, const struct fs_ctx *ctx, uint64_t ino,
	     uint64_t dir, const char *name, struct fs_attr *attr,
	     struct fs_wcc *dir_wcc, fs_done_fn done, void *arg)
{
	struct link_op *op;
	int rc;

	if (dir_wcc)
		memset(dir_wcc, 0, sizeof(*dir_wcc));
	rc = fs->opts.read_only ? -EROFS : fs_name_creatable(dir, name);
	if (!rc && !(op = calloc(1, sizeof(*op))))
		rc = -ENOMEM;
	if (rc) {
		if (dir_wcc && fs_getattr(fs, dir, &dir_wcc->after) == 0)
			dir_wcc->after_ok = true;
		done(arg, rc);
		return;
	}
	*op = (struct link_op){ .fs = fs,
				.ctx = *ctx,
				.ino = ino,
				.dir = dir,
				.attr = attr,
				.dir_wcc = dir_wcc,
				.done = done,
				.arg = arg };
	strcpy(op->name, name);
	fs_submit(fs, &op->ctx, link_apply, link_done, op);
}
