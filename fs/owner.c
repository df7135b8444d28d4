/*
 * fs/owner.c - in a cluster, one writer per file: the rules.
 *
 * A regular file with changes not yet in the store belongs to one node,
 * its owner (fs_inode.owner, shared): only that node's cache holds the
 * changes, and only it uploads them.  The owner is set in the same commit
 * that makes the file dirty (fs_owner_claim, through takeover.c's
 * fs_owner_take, which the operation calls right before fs_inode_mark:
 * CREATE, the first WRITE or a truncate or SETATTR of a clean file,
 * LINK; a conflict's copy claims its new file here directly), so two
 * nodes can never both make it dirty: the second one's commit reads the
 * first one's owner (or, if its replica was behind, is refused as stale
 * and runs again on the fresh record) and answers -EAGAIN, which the
 * client retries (NFS3ERR_JUKEBOX).  The upload that leaves the file
 * clean clears the owner (fs_owner_release).
 *
 * Directories and symlinks have no owner: their objects (a marker, a
 * target) carry no data another node could overwrite.  A node alone has
 * id 0 and nothing here changes what it does.
 *
 * A node cut off (not dead) stops writing to the store once its own
 * lease may have run out (db_lease_held), before anyone may take over;
 * when it is back and sees a file it had changes of taken over, it drops
 * them and moves its write verifier (fs_write_epoch), so that its clients
 * resend what it had not made stable.  What stays open: a PUT already
 * in flight when the lease ran out lands after the takeover (conditional
 * PUT would close that; see docs/CLUSTER.md).
 *
 * What a node does for the others (uploads a file another node asked
 * for, asks an owner, takes over a dead node's files) drives write-back,
 * which sits above these rules: takeover.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "common/log.h"
#include "db/db.h"
#include "fs_int.h"

int fs_owner_claim(struct fs *fs, struct fs_inode *in)
{
	uint32_t me = db_node_id(fs->db);

	if (!me || in->type != FS_REG)
		return 0;
	/* The cluster says this node's, and nothing of it is dirty here:
	 * the commit that made it so landed and this node's own did not
	 * (it stopped in between).  Not changed here until the sweep has
	 * taken it back (takeover.c), which drops what the cache holds. */
	if (in->owner == me)
		return in->flags & FS_F_DIRTY ? 0 : -EAGAIN;
	if (!in->owner) {
		in->owner = me;
		return 0;
	}
	return -EAGAIN;
}

void fs_owner_release(struct fs *fs, struct fs_inode *in)
{
	if (!(in->flags & FS_F_DIRTY) && in->owner == db_node_id(fs->db))
		in->owner = 0;
}

/* ---- changes this node lost ---------------------------------------------- */

static void lost_say(const struct fs *fs, uint64_t ino)
{
	if (fs->opts.strict_commit)
		log_warn("fs: %" PRIu64 " was taken over while this node was "
			 "cut off: its changes here that no client had "
			 "committed are dropped (the clients resend them)",
			 ino);
	else
		log_error("fs: %" PRIu64 " was taken over while this node was "
			  "cut off: its changes here are dropped, COMMITted "
			  "ones too (--cluster-commit local)",
			  ino);
}

/* Clear in's dirty state here (its cache data goes after the commit). */
static int drop_changes(struct fs *fs, struct db_txn *txn, struct fs_inode *in)
{
	int rc;

	in->flags &= ~(uint32_t)FS_F_DIRTY;
	if ((rc = fs_inode_put(fs, txn, in)))
		return rc;
	return fs_work_sync(fs, txn, in);
}

/* After changes were dropped: the cache data, and the verifier moves. */
static void dropped(struct fs *fs, uint64_t ino)
{
	cache_drop(fs->cache, ino);
	atomic_fetch_add(&fs->write_epoch, 1);
	lost_say(fs, ino);
}

struct lost_job {
	struct fs *fs;
	uint64_t ino;
	bool dropped;
};

static int lost_apply(struct db_txn *txn, void *arg)
{
	struct lost_job *j = arg;
	struct fs *fs = j->fs;
	struct fs_inode in;
	int rc = fs_inode_get(fs, txn, j->ino, &in);

	j->dropped = false;
	if (rc)
		return rc == -ESTALE ? 0 : rc;
	if (in.owner == db_node_id(fs->db) || !(in.flags & FS_F_DIRTY))
		return 0; /* ours again, or nothing left to drop */
	j->dropped = true;
	return drop_changes(fs, txn, &in);
}

static void lost_run(struct fs *fs, void *arg)
{
	struct lost_job *j = arg;

	if (db_write(fs->db, lost_apply, j) == 0 && j->dropped)
		dropped(fs, j->ino);
	free(j);
}

void fs_owner_lost(struct fs *fs, const struct fs_inode *in)
{
	struct lost_job *j;

	/* Before fs_open is done, fs_owner_reconcile sees it instead. */
	if (!atomic_load(&fs->running) || atomic_load(&fs->closing) ||
	    !(j = malloc(sizeof(*j))))
		return;
	*j = (struct lost_job){ .fs = fs, .ino = in->ino };
	fs_defer(fs, lost_run, j);
}

void fs_owner_inode_changed(void *ctx, db_table tbl, const struct db_val *key,
			    const struct db_val *before,
			    const struct db_val *after)
{
	struct fs *fs = ctx;
	struct fs_inode b, a;
	uint64_t ino;

	(void)tbl;
	if (key->size != sizeof(ino) || !before)
		return;
	memcpy(&ino, key->data, sizeof(ino));
	if (fs_inode_decode(ino, before, &b) || b.type != FS_REG)
		return;
	if (!after) {
		cache_drop(fs->cache, ino);
		return;
	}
	if (fs_inode_decode(ino, after, &a))
		return;
	/* Taken over while this node was cut off: its changes are void. */
	if ((a.flags & FS_F_DIRTY) && b.owner &&
	    b.owner == db_node_id(fs->db) && a.owner != b.owner) {
		fs_owner_lost(fs, &a);
		return;
	}
	if (!(a.flags & FS_F_DIRTY_DATA) &&
	    (a.size != b.size || strcmp(a.etag, b.etag)))
		cache_drop(fs->cache, ino);
}

/* ---- at start ----------------------------------------------------------- */

struct reconcile {
	struct fs *fs;
	uint64_t *dropped;
	size_t ndropped, cap;
};

static int reconcile_apply(struct db_txn *txn, void *arg)
{
	struct reconcile *r = arg;
	struct fs *fs = r->fs;
	uint32_t me = db_node_id(fs->db);
	struct db_cursor *cur;
	struct db_val k, v;
	uint64_t joined = 0;
	int rc = fs_meta_get_u64(fs, txn, "cluster_joined", &joined), mrc;

	if (rc && rc != -ENOENT)
		return rc;
	r->ndropped = 0;
	if ((rc = db_cursor_open(txn, fs->dbi_work, &cur)))
		return rc;
	for (int op = DB_FIRST; !(mrc = db_cursor_get(cur, &k, &v, op));
	     op = DB_NEXT) {
		struct fs_inode in;
		uint64_t ino;

		memcpy(&ino, k.data, sizeof(ino));
		if (fs_inode_get(fs, txn, ino, &in) || in.type != FS_REG ||
		    !(in.flags & FS_F_DIRTY) || in.owner == me)
			continue;
		if (!in.owner && !joined) {
			/* A gateway alone until now (meta migrate): its
			 * changes are its own. */
			in.owner = me;
			rc = fs_inode_put(fs, txn, &in);
		} else {
			/* The owner is set with the first change and cleared
			 * by the upload that leaves it clean: another owner,
			 * or none after a join, means it was taken over. */
			if (r->ndropped == r->cap) {
				size_t cap = r->cap ? r->cap * 2 : 64;
				uint64_t *d =
					realloc(r->dropped, cap * sizeof(*d));

				if (!d) {
					rc = -ENOMEM;
					break;
				}
				r->dropped = d;
				r->cap = cap;
			}
			r->dropped[r->ndropped++] = ino;
			rc = drop_changes(fs, txn, &in);
		}
		if (rc)
			break;
	}
	db_cursor_close(cur);
	if (!rc && !joined)
		rc = fs_meta_put_u64(fs, txn, "cluster_joined", 1);
	return rc ? rc : (mrc == -ENOENT ? 0 : mrc);
}

int fs_owner_reconcile(struct fs *fs)
{
	struct reconcile r = { .fs = fs };
	int rc = db_write(fs->db, reconcile_apply, &r);

	for (size_t i = 0; !rc && i < r.ndropped; i++)
		dropped(fs, r.dropped[i]);
	free(r.dropped);
	return rc;
}
uint64_t fs_write_epoch(struct fs *fs)
{
	return atomic_load_explicit(&fs->write_epoch, memory_order_relaxed);
}
