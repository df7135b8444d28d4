/*
 * fs/ops_remove.c - REMOVE and RMDIR: the permission checks, then the
 * name goes as every removal's does (unlink.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "db/db.h"
#include "fs_int.h"

struct remove_op {
	struct fs *fs;
	struct fs_ctx ctx;
	uint64_t dir;
	char name[FS_NAME_MAX + 1];
	bool rmdir;
	bool gone; /* the victim's last name went: so does its cache file */
	uint64_t victim;
	uint32_t victim_type;
	struct fs_wcc *dir_wcc;
	fs_done_fn done;
	void *arg;
};

static int remove_apply(struct db_txn *txn, void *p)
{
	struct remove_op *op = p;
	struct fs *fs = op->fs;
	struct fs_inode dir, victim;
	uint64_t ino;
	int rc = fs_dir_change_begin(fs, txn, &op->ctx, op->dir, op->dir_wcc,
				     &dir);

	if (rc)
		return rc;
	rc = fs_dirent_get(fs, txn, op->dir, op->name, &ino, NULL);
	if (rc)
		return rc;
	rc = fs_inode_get(fs, txn, ino, &victim);
	if (rc)
		return rc == -ESTALE ? -EIO : rc;
	if (op->rmdir && victim.type != FS_DIR)
		return -ENOTDIR;
	if (!op->rmdir && victim.type == FS_DIR)
		return -EISDIR; /* RFC 1813 3.3.12: REMOVE is not for dirs */
	if ((rc = fs_sticky_check(&op->ctx, &dir, &victim)))
		return rc;
	if (op->rmdir && (rc = fs_dir_empty(fs, txn, victim.ino)))
		return rc;
	if ((rc = fs_unlink_name(fs, txn, &dir, &victim, op->name, true,
				 &op->gone)) ||
	    (rc = fs_inode_put(fs, txn, &dir)))
		return rc;
	op->victim = victim.ino;
	op->victim_type = victim.type;
	fs_wcc_after(fs, &dir, op->dir_wcc);
	return 0;
}

static void remove_done(void *p, int err)
{
	struct remove_op *op = p;

	fs_answer_then_drop(op->fs, op->victim,
			    !err && op->gone && op->victim_type == FS_REG,
			    op->done, op->arg, err);
	free(op);
}

static void remove_common(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
			  const char *name, bool rmdir, struct fs_wcc *dir_wcc,
			  fs_done_fn done, void *arg)
{
	struct remove_op *op;
	int rc;

	if (dir_wcc)
		memset(dir_wcc, 0, sizeof(*dir_wcc));
	rc = fs->opts.read_only ? -EROFS : fs_name_check(name, true);
	if (rc) {
		if (dir_wcc && fs_getattr(fs, dir, &dir_wcc->after) == 0)
			dir_wcc->after_ok = true;
		done(arg, rc);
		return;
	}
	op = calloc(1, sizeof(*op));
	if (!op) {
		done(arg, -ENOMEM);
		return;
	}
	*op = (struct remove_op){ .fs = fs,
				  .ctx = *ctx,
				  .dir = dir,
				  .rmdir = rmdir,
				  .dir_wcc = dir_wcc,
				  .done = done,
				  .arg = arg };
	strcpy(op->name, name);
	fs_submit(fs, &op->ctx, remove_apply, remove_done, op);
}

/* See fs_int.h.  The cache file's rename or unlink (writer thread) goes
 * after the answer: the name is gone, so nothing reaches the file
 * meanwhile but a stale handle's READ, which the namespace answers
 * first. */
void fs_answer_then_drop(struct fs *fs, uint64_t ino, bool drop,
			 fs_done_fn done, void *arg, int err)
{
	if (drop)
		atomic_fetch_add(&fs->after_answer, 1);
	done(arg, err);
	if (drop) {
		cache_drop(fs->cache, ino);
		atomic_fetch_sub(&fs->after_answer, 1);
	}
}

/* REMOVE (RFC 1813 3.3.12): a directory gets -EISDIR. */
void fs_remove(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
	       const char *name, struct fs_wcc *dir_wcc, fs_done_fn done,
	       void *arg)
{
	remove_common(fs, ctx, dir, name, false, dir_wcc, done, arg);
}

/* RMDIR (RFC 1813 3.3.13): "." and ".." are -EINVAL, a file -ENOTDIR. */
void fs_rmdir(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
	      const char *name, struct fs_wcc *dir_wcc, fs_done_fn done,
	      void *arg)
{
	remove_common(fs, ctx, dir, name, true, dir_wcc, done, arg);
}
