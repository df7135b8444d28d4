/*
 * fs/ops_remove.c - REMOVE and RMDIR, and the unlinking of an inode that
 * RENAME (a replaced target) and revalidation (deleted out of band) share.
 * A file with other names (links.c) only loses the one removed.
 *
 * A removed inode whose object is in the store gets a pending DEL of its
 * key in the same transaction; its "keys" entry stays until the syncer
 * deleted the object, so a listing taken meanwhile does not re-import it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "db/db.h"
#include "fs/fs_int.h"

int fs_unlink_inode(struct fs *fs, struct db_txn *txn, struct fs_inode *dir,
		    struct fs_inode *victim, bool queue_delete)
{
	char key[STORE_KEY_MAX + 2];
	int rc = fs_obj_key(fs, txn, victim, key, sizeof(key));

	if (rc)
		return rc;
	rc = fs_dirent_remove(fs, txn, dir, victim->name);
	if (rc)
		return rc;
	if (victim->type == FS_DIR && dir->nlink > 2)
		dir->nlink--;
	if (!queue_delete)
		rc = fs_keys_del(fs, txn, key);
	else if (victim->flags & FS_F_IN_STORE)
		rc = fs_pending_add(fs, txn, FS_PEND_DEL, victim->ino, key,
				    NULL);
	if (rc)
		return rc;
	/*
	 * A directory known only as a common prefix vanishes from the store
	 * with its last object: give it a marker so it outlives its children.
	 */
	if (queue_delete && dir->ino != FS_ROOT_INO &&
	    !(dir->flags & FS_F_MARKER)) {
		rc = fs_inode_mark(fs, txn, dir, FS_F_DIRTY_META);
		if (rc)
			return rc;
	}
	return fs_inode_del(fs, txn, victim->ino);
}

/*
 * Sticky directories (S_ISVTX): only the owner of the directory or of
 * the entry (or root) may remove or rename it.
 */
int fs_sticky_check(const struct fs_ctx *ctx, const struct fs_inode *dir,
		    const struct fs_inode *victim)
{
	if (!(dir->mode & S_ISVTX) || ctx->uid == 0 || ctx->uid == dir->uid ||
	    ctx->uid == victim->uid)
		return 0;
	return -EPERM;
}

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

	if (!err && op->gone && op->victim_type == FS_REG)
		cache_drop(op->fs->cache, op->victim);
	op->done(op->arg, err);
	free(op);
}

static void remove_common(struct fs *fs, const struct fs_ctx *ctx,
			  uint64_t dir, const char *name, bool rmdir,
			  struct fs_wcc *dir_wcc, fs_done_fn done, void *arg)
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
	*op = (struct remove_op){ .fs = fs, .ctx = *ctx, .dir = dir,
				  .rmdir = rmdir, .dir_wcc = dir_wcc,
				  .done = done, .arg = arg };
	strcpy(op->name, name);
	db_submit(fs->db, remove_apply, remove_done, op);
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
