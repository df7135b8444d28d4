/*
 * fs/unlink.c - the one place a name goes, whoever removes it: REMOVE and
 * RMDIR (ops_remove.c), RENAME over a target (ops_rename.c), and a
 * listing that finds an object deleted out of band (revalidate.c).  A file
 * with other names (links.c) only loses the one removed; its last name
 * takes the inode with it.
 *
 * A removed inode whose object is in the store gets a pending DEL of its
 * key in the same transaction; its "keys" entry stays until the syncer
 * deleted the object, so a listing taken meanwhile does not re-import it.
 */
#include <errno.h>
#include <stdbool.h>

#include "db/db.h"
#include "fs_int.h"

/* See fs_int.h. */
int fs_unlink_name(struct fs *fs, struct db_txn *txn, struct fs_inode *dir,
		   struct fs_inode *victim, const char *name, bool queue_delete,
		   bool *gone)
{
	*gone = victim->type == FS_DIR || victim->nlink < 2;
	if (!*gone)
		return fs_name_drop(fs, txn, dir, victim, name, queue_delete);
	return fs_unlink_inode(fs, txn, dir, victim, queue_delete);
}

/* See fs_int.h. */
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
