/*
 * fs/owner.c - in a cluster, one writer per file.
 *
 * A regular file with changes not yet in the store belongs to one node,
 * its owner (fs_inode.owner, shared): only that node's cache holds the
 * changes, and only it uploads them.  The owner is set in the same commit
 * that makes the file dirty (fs_inode_mark: CREATE, the first WRITE or a
 * truncate or SETATTR of a clean file), so two nodes can never both make
 * it dirty: the second one's commit reads the first one's owner (or, if
 * its replica was behind, is refused as stale and runs again on the
 * fresh record) and answers -EAGAIN, which the client retries
 * (NFS3ERR_JUKEBOX), after asking the owner to upload the file now and let
 * it go.  The upload that leaves the file clean clears the owner.
 *
 * Directories and symlinks have no owner: their objects (a marker, a
 * target) carry no data another node could overwrite.  A node alone has
 * id 0 and nothing here changes what it does.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "db/db.h"
#include "fs/fs_int.h"

struct release_req {
	uint32_t owner;
	uint64_t ino;
};

static void release_send_job(struct fs *fs, void *arg)
{
	struct release_req *r = arg;
	char msg[64];
	int rc;

	snprintf(msg, sizeof(msg), "release %" PRIu64, r->ino);
	rc = db_send(fs->db, r->owner, msg);
	if (rc)
		log_debug("fs: asking node %u to release %" PRIu64 ": %s",
			  r->owner, r->ino, strerror(-rc));
	free(r);
}

int fs_owner_take(struct fs *fs, struct fs_inode *in)
{
	uint32_t me = db_node_id(fs->db);

	if (!me || in->type != FS_REG || in->owner == me)
		return 0;
	if (!in->owner) {
		in->owner = me;
		return 0;
	}
	fs_owner_ask(fs, in->owner, in->ino);
	return -EAGAIN;
}

void fs_owner_ask(struct fs *fs, uint32_t owner, uint64_t ino)
{
	struct release_req *r = malloc(sizeof(*r));

	/* Off the caller's thread: the db writer or a loop. */
	if (r) {
		*r = (struct release_req){ .owner = owner, .ino = ino };
		fs_defer(fs, release_send_job, r);
	}
}

void fs_owner_release(struct fs *fs, struct fs_inode *in)
{
	if (!(in->flags & FS_F_DIRTY) && in->owner == db_node_id(fs->db))
		in->owner = 0;
}

struct release_job {
	struct fs *fs;
	uint64_t ino;
};

static void release_job(struct fs *fs, void *arg)
{
	struct release_job *j = arg;
	int rc = fs_sync_inode(fs, j->ino);

	if (rc)
		log_debug("fs: upload of %" PRIu64 " asked by another node: %s",
			  j->ino, strerror(-rc));
	free(j);
}

void fs_owner_on_message(void *ctx, uint32_t from, const char *msg)
{
	struct fs *fs = ctx;
	struct release_job *j;
	uint64_t ino;

	(void)from;
	if (sscanf(msg, "release %" SCNu64, &ino) != 1 || !ino)
		return;
	j = malloc(sizeof(*j));
	if (!j)
		return;
	*j = (struct release_job){ .fs = fs, .ino = ino };
	fs_defer(fs, release_job, j);
}

static int reconcile_apply(struct db_txn *txn, void *arg)
{
	struct fs *fs = arg;
	uint32_t me = db_node_id(fs->db);
	struct db_cursor *cur;
	struct db_val k, v;
	int rc = db_cursor_open(txn, fs->dbi_work, &cur), mrc;

	if (rc)
		return rc;
	for (int op = DB_FIRST; !(mrc = db_cursor_get(cur, &k, &v, op));
	     op = DB_NEXT) {
		struct fs_inode in;
		uint64_t ino;

		memcpy(&ino, k.data, sizeof(ino));
		if (fs_inode_get(fs, txn, ino, &in) || in.type != FS_REG ||
		    !(in.flags & FS_F_DIRTY) || in.owner == me)
			continue;
		if (in.owner) {
			log_warn("fs: %" PRIu64 " has changes here but belongs "
				 "to node %u: they wait until it lets go",
				 ino, in.owner);
			continue;
		}
		in.owner = me;
		if ((rc = fs_inode_put(fs, txn, &in)))
			break;
	}
	db_cursor_close(cur);
	return rc ? rc : (mrc == -ENOENT ? 0 : mrc);
}

int fs_owner_reconcile(struct fs *fs)
{
	return db_write(fs->db, reconcile_apply, fs);
}
