/*
 * fs/ops_rename.c - RENAME (RFC 1813 3.3.14) with POSIX rules.
 *
 * In the store an object cannot be renamed: it is copied to its new key
 * and the old key deleted.  The rename transaction queues a COPY and a DEL
 * for the renamed object and, for a directory, for every object in its
 * subtree (walked from LMDB), so the store replays the rename in order
 * after the reply and a crash resumes it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "db/db.h"
#include "fs_int.h"

struct rename_op {
	struct fs *fs;
	struct fs_ctx ctx;
	uint64_t from_dir, to_dir;
	char from_name[FS_NAME_MAX + 1], to_name[FS_NAME_MAX + 1];
	uint64_t replaced;  /* target inode removed, for its cache file */
	bool replaced_gone; /* its last name: the cache file goes too */
	uint32_t replaced_type;
	struct fs_wcc *from_wcc, *to_wcc;
	fs_done_fn done;
	void *arg;
};

/* -EINVAL if dir is ino or below it (a directory into its own subtree). */
static int subtree_check(struct fs *fs, struct db_txn *txn, uint64_t ino,
			 uint64_t dir)
{
	struct fs_inode in;

	for (int depth = 0;; depth++) {
		if (dir == ino)
			return -EINVAL;
		if (dir == FS_ROOT_INO)
			return 0;
		if (depth > STORE_KEY_MAX)
			return -EIO;
		int rc = fs_inode_get(fs, txn, dir, &in);

		if (rc)
			return rc;
		dir = in.parent;
	}
}

/* Queue COPY old -> new and DEL old for an object that is in the store. */
static int queue_move(struct fs *fs, struct db_txn *txn, uint64_t ino,
		      const char *old_key, const char *new_key)
{
	int rc = fs_pending_add(fs, txn, FS_PEND_COPY, ino, old_key, new_key);

	return rc ? rc
		  : fs_pending_add(fs, txn, FS_PEND_DEL, ino, old_key, NULL);
}

/* Whether dir's entry name (n bytes) of child has its object in the
 * store: the inode's, or for another name of a file, its link's. */
static bool name_in_store(struct fs *fs, struct db_txn *txn,
			  const struct fs_inode *child, uint64_t dir,
			  const char *name, size_t n)
{
	char nm[FS_NAME_MAX + 1];
	struct fs_link l;

	if (n > FS_NAME_MAX)
		return false;
	memcpy(nm, name, n);
	nm[n] = '\0';
	if (child->type == FS_DIR || fs_name_is_first(child, dir, nm))
		return child->flags & FS_F_IN_STORE;
	return !fs_link_get(fs, txn, child->ino, dir, nm, &l) &&
	       (l.flags & FS_LINK_IN_STORE);
}

/*
 * Queue the moves of everything below dir, whose old and new key
 * prefixes (ending in '/') are in ok and nk, each of capacity
 * STORE_KEY_MAX + 1; the buffers are restored on return.
 */
static int queue_subtree(struct fs *fs, struct db_txn *txn, uint64_t dir,
			 char *ok, char *nk)
{
	unsigned char kb[8];
	struct db_cursor *cur;
	struct db_val k, v;
	size_t ol = strlen(ok), nl = strlen(nk);
	int rc = db_cursor_open(txn, fs->dbi_dirents, &cur);

	if (rc)
		return rc;
	fs_put_be64(kb, dir);
	k = (struct db_val){ 8, kb };
	for (int op = DB_SET_RANGE;; op = DB_NEXT) {
		struct fs_inode child;
		uint64_t ino;

		rc = db_cursor_get(cur, &k, &v, op);
		if (rc == -ENOENT ||
		    (!rc && (k.size <= 8 || memcmp(k.data, kb, 8)))) {
			rc = 0;
			break;
		}
		if (rc || v.size < sizeof(ino)) {
			rc = rc ? rc : -EIO;
			break;
		}
		memcpy(&ino, v.data, sizeof(ino));
		size_t n = k.size - 8;
		bool is_dir;

		rc = fs_inode_get(fs, txn, ino, &child);
		if (rc)
			break;
		is_dir = child.type == FS_DIR;
		if (ol + n + is_dir > fs->key_max ||
		    nl + n + is_dir > fs->key_max) {
			rc = -ENAMETOOLONG;
			break;
		}
		memcpy(ok + ol, (char *)k.data + 8, n);
		memcpy(nk + nl, (char *)k.data + 8, n);
		ok[ol + n] = nk[nl + n] = '/';
		ok[ol + n + is_dir] = nk[nl + n + is_dir] = '\0';
		if (name_in_store(fs, txn, &child, dir, (char *)k.data + 8, n))
			rc = queue_move(fs, txn, ino, ok, nk);
		if (!rc && is_dir)
			rc = queue_subtree(fs, txn, ino, ok, nk);
		ok[ol] = nk[nl] = '\0';
		if (rc)
			break;
	}
	db_cursor_close(cur);
	return rc;
}

/* Replace an existing target: the type rules of rename(2). */
static int rename_replace(struct rename_op *op, struct db_txn *txn,
			  struct fs_inode *tdir, const struct fs_inode *src,
			  uint64_t tino)
{
	struct fs *fs = op->fs;
	struct fs_inode tgt;
	int rc = fs_inode_get(fs, txn, tino, &tgt);

	if (rc)
		return rc == -ESTALE ? -EIO : rc;
	if (src->type == FS_DIR && tgt.type != FS_DIR)
		return -ENOTDIR;
	if (src->type != FS_DIR && tgt.type == FS_DIR)
		return -EISDIR;
	if (tgt.type == FS_DIR && (rc = fs_dir_empty(fs, txn, tgt.ino)))
		return rc;
	if ((rc = fs_sticky_check(&op->ctx, tdir, &tgt)))
		return rc;
	rc = fs_unlink_name(fs, txn, tdir, &tgt, op->to_name, true,
			    &op->replaced_gone);
	if (rc)
		return rc;
	op->replaced = tgt.ino;
	op->replaced_type = tgt.type;
	return 0;
}

static int rename_apply(struct db_txn *txn, void *p)
{
	struct rename_op *op = p;
	struct fs *fs = op->fs;
	struct fs_inode fdir_rec, tdir_rec, src;
	bool same_dir = op->from_dir == op->to_dir;
	struct fs_inode *fdir = &fdir_rec, *tdir = same_dir ? fdir : &tdir_rec;
	char old_key[STORE_KEY_MAX + 2], new_key[STORE_KEY_MAX + 2];
	uint64_t sino, tino;
	int rc;

	if ((rc = fs_inode_get(fs, txn, op->from_dir, fdir)))
		return rc;
	fs_wcc_before(fs, fdir, op->from_wcc);
	fs_wcc_after(fs, fdir, op->from_wcc);
	if (!same_dir && (rc = fs_inode_get(fs, txn, op->to_dir, tdir)))
		return rc;
	fs_wcc_before(fs, tdir, op->to_wcc);
	fs_wcc_after(fs, tdir, op->to_wcc);
	if (fdir->type != FS_DIR || tdir->type != FS_DIR)
		return -ENOTDIR;
	if ((rc = fs_perm(&op->ctx, fdir, W_OK | X_OK)) ||
	    (rc = fs_perm(&op->ctx, tdir, W_OK | X_OK)))
		return rc;
	if ((rc = fs_dirent_get(fs, txn, op->from_dir, op->from_name, &sino,
				NULL)))
		return rc;
	if ((rc = fs_inode_get(fs, txn, sino, &src)))
		return rc == -ESTALE ? -EIO : rc;
	if ((rc = fs_sticky_check(&op->ctx, fdir, &src)))
		return rc;
	if (same_dir && !strcmp(op->from_name, op->to_name))
		return 0;
	/* A directory moved to another parent has its ".." rewritten: its
	 * mover must be able to write it (vfs_rename).  Linux's client
	 * leaves every write check on a directory to the server. */
	if (src.type == FS_DIR && !same_dir &&
	    (rc = fs_perm(&op->ctx, &src, W_OK)))
		return rc;
	if (src.type == FS_DIR &&
	    (rc = subtree_check(fs, txn, src.ino, op->to_dir)))
		return rc;
	rc = fs_dirent_get(fs, txn, op->to_dir, op->to_name, &tino, NULL);
	if (rc == 0 && tino == sino)
		return 0; /* two names of one inode: POSIX says do nothing */
	if (rc == 0)
		rc = rename_replace(op, txn, tdir, &src, tino);
	else if (rc == -ENOENT)
		rc = 0;
	if (rc)
		return rc;
	/* Another name of a file (links.c) moves its link, not the inode's
	 * first name. */
	bool is_dir = src.type == FS_DIR,
	     first = is_dir ||
		     fs_name_is_first(&src, op->from_dir, op->from_name);
	struct fs_link l;

	if (!first && (rc = fs_link_get(fs, txn, src.ino, op->from_dir,
					op->from_name, &l)))
		return rc == -ENOENT ? -EIO : rc;
	if ((rc = fs_name_key(fs, txn, op->from_dir, op->from_name, is_dir,
			      old_key, sizeof(old_key))) ||
	    (rc = fs_dirent_remove(fs, txn, fdir, op->from_name)) ||
	    (rc = fs_dirent_add(fs, txn, tdir, op->to_name, src.ino)))
		return rc;
	if (src.type == FS_DIR && !same_dir) {
		fdir->nlink--;
		tdir->nlink++;
	}
	if (fdir->ino != FS_ROOT_INO && !(fdir->flags & FS_F_MARKER) &&
	    (rc = fs_inode_mark(fs, txn, fdir, FS_F_DIRTY_META)))
		return rc;
	if (first) {
		src.parent = op->to_dir;
		strcpy(src.name, op->to_name);
	} else {
		if ((rc = fs_link_del(fs, txn, src.ino, l.parent, l.name)))
			return rc;
		l.parent = op->to_dir;
		strcpy(l.name, op->to_name);
		if ((rc = fs_link_put(fs, txn, &l)))
			return rc;
	}
	/* Another name of a stored file whose COPY has not run yet (LINK
	 * queued it; in a cluster perhaps on a node whose queue waits):
	 * the new name gets its object as a LINK gives one, a COPY from the
	 * first name's, queued now (so it runs before a later DELETE of
	 * that name); the queued copy to the old name then has nothing to
	 * do (sync_pending.c), and should it have run meanwhile, its
	 * object goes.  Before, nothing was queued for such a name: it
	 * never had an object. */
	bool link_unstored = !first && !(l.flags & FS_LINK_IN_STORE) &&
			     (src.flags & FS_F_IN_STORE);

	src.ctime = fs_now_ns();
	if ((rc = fs_inode_put(fs, txn, fdir)) ||
	    (!same_dir && (rc = fs_inode_put(fs, txn, tdir))) ||
	    (rc = fs_inode_put(fs, txn, &src)))
		return rc;
	if ((rc = fs_name_key(fs, txn, op->to_dir, op->to_name, is_dir, new_key,
			      sizeof(new_key))))
		return rc;
	if ((first ? (src.flags & FS_F_IN_STORE)
		   : (l.flags & FS_LINK_IN_STORE)) &&
	    (rc = queue_move(fs, txn, src.ino, old_key, new_key)))
		return rc;
	if (link_unstored) {
		char from[STORE_KEY_MAX + 2];

		if ((rc = fs_obj_key(fs, txn, &src, from, sizeof(from))) ||
		    (rc = fs_pending_add(fs, txn, FS_PEND_COPY, src.ino, from,
					 new_key)) ||
		    (rc = fs_pending_add(fs, txn, FS_PEND_DEL, src.ino, old_key,
					 NULL)))
			return rc;
	}
	if (src.type == FS_DIR &&
	    (rc = queue_subtree(fs, txn, src.ino, old_key, new_key)))
		return rc;
	fs_wcc_after(fs, fdir, op->from_wcc);
	fs_wcc_after(fs, tdir, op->to_wcc);
	return 0;
}

static void rename_done(void *p, int err)
{
	struct rename_op *op = p;

	fs_answer_then_drop(op->fs, op->replaced,
			    !err && op->replaced && op->replaced_gone &&
				    op->replaced_type == FS_REG,
			    op->done, op->arg, err);
	free(op);
}

/* RENAME: see fs.h; both directories' wcc are filled. */
void fs_rename(struct fs *fs, const struct fs_ctx *ctx, uint64_t from_dir,
	       const char *from_name, uint64_t to_dir, const char *to_name,
	       struct fs_wcc *from_wcc, struct fs_wcc *to_wcc, fs_done_fn done,
	       void *arg)
{
	struct rename_op *op;
	int rc;

	if (from_wcc)
		memset(from_wcc, 0, sizeof(*from_wcc));
	if (to_wcc)
		memset(to_wcc, 0, sizeof(*to_wcc));
	rc = fs->opts.read_only ? -EROFS : fs_name_check(from_name, true);
	if (!rc)
		rc = fs_name_creatable(to_dir, to_name);
	if (rc) {
		if (from_wcc && fs_getattr(fs, from_dir, &from_wcc->after) == 0)
			from_wcc->after_ok = true;
		if (to_wcc && fs_getattr(fs, to_dir, &to_wcc->after) == 0)
			to_wcc->after_ok = true;
		done(arg, rc);
		return;
	}
	op = calloc(1, sizeof(*op));
	if (!op) {
		done(arg, -ENOMEM);
		return;
	}
	*op = (struct rename_op){ .fs = fs,
				  .ctx = *ctx,
				  .from_dir = from_dir,
				  .to_dir = to_dir,
				  .from_wcc = from_wcc,
				  .to_wcc = to_wcc,
				  .done = done,
				  .arg = arg };
	strcpy(op->from_name, from_name);
	strcpy(op->to_name, to_name);
	fs_submit(fs, &op->ctx, rename_apply, rename_done, op);
}
