/*
 * fs/conflict.c - an upload met another writer's version of its key.
 *
 * Every upload states what it is based on (syncer.c: If-Match the ETag
 * the record last saw, If-None-Match: * for a new key), so the store
 * refuses one that would overwrite a version we never saw.  What then:
 *
 * - Someone else wrote the key (-ESTALE): their object stays at its key.
 *   Ours moves to a sibling name in the same directory,
 *   "NAME.conflict-<node>-<UTC time>", which the next pass uploads as a
 *   new key; the inode (and so the NFS handle, and a client's open file)
 *   goes with it.  The directory is listed again at once, so the other
 *   writer's object appears under NAME.
 * - Someone else deleted the key while we had changes (-ENOENT on an
 *   If-Match): ours is uploaded again under its name, as a new key.
 * - Either way our version can be rebuilt only from what the cache holds:
 *   a file changed here in part, whose other parts were never local, has
 *   those parts only in the version that is gone.  Then the other
 *   writer's state wins (their object, or the deletion), our changes are
 *   dropped, and that is logged as an error with the bytes lost.
 *
 * A 412 of our own earlier try (its answer lost, or its commit to the
 * namespace failed) never comes here: every try of one version carries
 * the same write id (syncer.c wid_of), and the store takes an object
 * with it for ours.  Each outcome is logged and counted
 * (mapfs_conflicts_total{outcome=...}, `mapfs-gw ctl status`).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cache/cache.h"
#include "common/log.h"
#include "db/db.h"
#include "metrics/metrics.h"
#include "fs_int.h"

#define CONFLICT_NAME_TRIES 100

enum conflict_kind {
	CONFLICT_ASIDE,    /* ours to a sibling name */
	CONFLICT_REUPLOAD, /* deleted by others: ours goes up again */
	CONFLICT_LOST,     /* ours cannot be rebuilt: theirs wins */
};

struct conflict_op {
	struct fs *fs;
	const struct fs_inode *snap; /* the record the upload was of */
	const char *key;
	enum conflict_kind kind;
	char aside[FS_NAME_MAX + 1]; /* CONFLICT_ASIDE: the name it got */
	uint64_t parent;
	bool applied; /* false: removed or moved meanwhile, nothing done */
};

/*
 * "NAME.conflict-<node>-<time>[-<n>]", within FS_NAME_MAX (NAME is cut
 * to fit), for try n (0: no suffix).
 */
static void aside_name(const char *name, uint32_t node, int n,
		       char out[FS_NAME_MAX + 1])
{
	char tail[80];
	struct tm tm;
	time_t now = time(NULL);
	size_t nl = strlen(name), tl;

	gmtime_r(&now, &tm);
	tl = (size_t)snprintf(tail, sizeof(tail),
			      ".conflict-%" PRIu32
			      "-%04d%02d%02dT%02d%02d%02dZ",
			      node, tm.tm_year + 1900, tm.tm_mon + 1,
			      tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
	if (n)
		tl += (size_t)snprintf(tail + tl, sizeof(tail) - tl, "-%d", n);
	if (nl + tl > FS_NAME_MAX)
		nl = FS_NAME_MAX - tl;
	snprintf(out, FS_NAME_MAX + 1, "%.*s%s", (int)nl, name, tail);
}

/* Move in (in dir) to a free sibling name; the name is op->aside. */
static int move_aside(struct conflict_op *op, struct db_txn *txn,
		      struct fs_inode *dir, struct fs_inode *in)
{
	struct fs *fs = op->fs;
	uint64_t other;
	int rc = 0;

	for (int n = 0; n < CONFLICT_NAME_TRIES; n++) {
		aside_name(in->name, db_node_id(fs->db), n, op->aside);
		rc = fs_dirent_get(fs, txn, dir->ino, op->aside, &other, NULL);
		if (rc == -ENOENT)
			break;
		if (rc)
			return rc;
	}
	if (rc != -ENOENT)
		return -EEXIST;
	if ((rc = fs_dirent_remove(fs, txn, dir, in->name)) ||
	    (rc = fs_dirent_add(fs, txn, dir, op->aside, in->ino)))
		return rc;
	strcpy(in->name, op->aside);
	return fs_inode_put(fs, txn, dir);
}

static int conflict_apply(struct db_txn *txn, void *arg)
{
	struct conflict_op *op = arg;
	struct fs *fs = op->fs;
	char key[STORE_KEY_MAX + 2];
	struct fs_inode in, dir;
	uint64_t owner;
	int rc = fs_inode_get(fs, txn, op->snap->ino, &in);

	op->applied = false; /* (a cluster commit may run this again) */
	if (rc)
		return rc == -ESTALE ? 0 : rc; /* removed meanwhile: nothing */
	if ((rc = fs_obj_key(fs, txn, &in, key, sizeof(key))))
		return rc;
	/* Moved meanwhile: its next upload, to the new key, will tell. */
	if (strcmp(key, op->key))
		return 0;
	op->parent = in.parent;
	if (op->kind == CONFLICT_LOST) {
		/* Theirs wins: clean, as of a version older than any listing,
		 * so the forced listing after this takes theirs in (or
		 * removes the name, if they deleted it). */
		in.flags &= ~(uint32_t)FS_F_DIRTY;
		in.flags |= FS_F_IN_STORE;
		in.synced_ms = 0;
		fs_owner_release(fs, &in);
		if ((rc = fs_inode_put(fs, txn, &in)) ||
		    (rc = fs_work_sync(fs, txn, &in)))
			return rc;
		op->applied = true;
		return 0;
	}
	/* Ours goes up again as a new key: all of it, attributes too. */
	if (!fs_keys_get(fs, txn, key, &owner) && owner == in.ino &&
	    (rc = fs_keys_del(fs, txn, key)))
		return rc;
	in.flags &= ~(uint32_t)FS_F_IN_STORE;
	in.etag[0] = '\0';
	/* This node's upload met the conflict, so the file is this node's
	 * (or was taken over while it was cut off, and its changes here
	 * are dropped: -EAGAIN, nothing to ask the taker). */
	if ((rc = fs_owner_claim(fs, &in)) ||
	    (rc = fs_inode_mark(fs, txn, &in,
				in.type == FS_REG
					? FS_F_DIRTY_DATA | FS_F_DIRTY_META
					: FS_F_DIRTY_META)))
		return rc;
	if (op->kind == CONFLICT_ASIDE) {
		if ((rc = fs_inode_get(fs, txn, in.parent, &dir)) ||
		    (rc = move_aside(op, txn, &dir, &in)))
			return rc;
	}
	in.ctime = fs_now_ns();
	if ((rc = fs_inode_put(fs, txn, &in)))
		return rc;
	op->applied = true;
	return 0;
}

static void conflict_log(const struct conflict_op *op, uint64_t lost_bytes,
			 int why)
{
	switch (op->kind) {
	case CONFLICT_ASIDE:
		metrics_inc(MET_CONFLICTS_ASIDE);
		log_warn("fs: %s was written by someone else while it had "
			 "changes here: theirs stays at %s, ours goes to %s in "
			 "the same directory",
			 op->key, op->key, op->aside);
		break;
	case CONFLICT_REUPLOAD:
		metrics_inc(MET_CONFLICTS_REUPLOADED);
		log_warn("fs: %s was deleted by someone else while it had "
			 "changes here: ours is uploaded again",
			 op->key);
		break;
	case CONFLICT_LOST:
		metrics_inc(MET_CONFLICTS_LOST);
		log_error("fs: %s was %s by someone else while it had changes "
			  "here, and parts of our version (of %" PRIu64
			  " bytes) "
			  "were never cached, so it cannot be rebuilt: theirs "
			  "wins, our changes to it are dropped",
			  op->key, why == -ENOENT ? "deleted" : "replaced",
			  lost_bytes);
		break;
	}
}

/*
 * See fs_int.h.  snap is the record the upload was of, key its key, why
 * the store's answer (-ESTALE: another version is there; -ENOENT: none).
 */
int fs_conflict(struct fs *fs, const struct fs_inode *snap, const char *key,
		uint64_t size, int why)
{
	struct conflict_op op = { .fs = fs, .snap = snap, .key = key };
	struct store_info info;
	uint64_t lost = 0;
	bool whole;
	int rc;

	/* What is there now.  A -ENOENT may also have been an upload id the
	 * store forgot: only a key that is gone is a deletion. */
	rc = store_head(fs->store, key, &info);
	if (rc && rc != -ENOENT)
		return rc;
	log_debug("fs: upload of %s refused (%s): the store has %s, the "
		  "record %s",
		  key, strerror(-why), rc ? "nothing" : info.etag, snap->etag);
	if (why == -ENOENT && !rc)
		return -EAGAIN;
	if (rc == -ENOENT)
		why = -ENOENT; /* replaced, then deleted: it is gone now */
	whole = snap->type != FS_REG ||
		cache_range_local(fs->cache, snap->ino, 0, size);
	op.kind = !whole           ? CONFLICT_LOST
		  : why == -ENOENT ? CONFLICT_REUPLOAD
				   : CONFLICT_ASIDE;
	if (!whole)
		lost = size;
	rc = db_write(fs->db, conflict_apply, &op);
	if (rc || !op.applied)
		return rc; /* not applied: the next pass sees it as it is */
	conflict_log(&op, lost, why);
	if (op.kind == CONFLICT_LOST)
		cache_drop(fs->cache, snap->ino);
	/* The other writer's object (or its absence) into the namespace. */
	fs_revalidate(fs, NULL, op.parent, true, fs_done_nothing, NULL);
	return 0;
}

struct copy_conflict {
	struct fs *fs;
	const struct fs_pending *p;
	char *aside_key; /* STORE_KEY_MAX + 1 */
	struct conflict_op op;
	bool applied; /* false: the record is not the file's name now */
};

static int copy_conflict_apply(struct db_txn *txn, void *arg)
{
	struct copy_conflict *cc = arg;
	struct fs *fs = cc->fs;
	const struct fs_pending *p = cc->p;
	char key[STORE_KEY_MAX + 2];
	struct fs_inode in, dir;
	size_t dl;
	int rc = fs_inode_get(fs, txn, p->ino, &in);

	cc->applied = false; /* (a cluster commit may run this again) */
	if (rc)
		return rc == -ESTALE ? 0 : rc;
	if ((rc = fs_obj_key(fs, txn, &in, key, sizeof(key))))
		return rc;
	if (strcmp(key, p->dst) || in.type == FS_DIR)
		return 0; /* moved on, or another name of it: as it was */
	if ((rc = fs_inode_get(fs, txn, in.parent, &dir)) ||
	    (rc = move_aside(&cc->op, txn, &dir, &in)))
		return rc;
	in.ctime = fs_now_ns();
	if ((rc = fs_inode_put(fs, txn, &in)))
		return rc;
	/* The new key: the directory's part of dst, then the aside name. */
	dl = (size_t)(strrchr(p->dst, '/') ? strrchr(p->dst, '/') - p->dst + 1
					   : 0);
	if (dl + strlen(cc->op.aside) > fs->key_max)
		return -ENAMETOOLONG;
	snprintf(cc->aside_key, STORE_KEY_MAX + 1, "%.*s%s", (int)dl, p->dst,
		 cc->op.aside);
	if ((rc = fs_pending_set(fs, txn, p->seq, p->op, p->ino, p->src,
				 cc->aside_key)))
		return rc;
	cc->op.parent = in.parent;
	cc->applied = true;
	return 0;
}

/* See fs_int.h. */
int fs_conflict_copy(struct fs *fs, const struct fs_pending *p,
		     char aside_key[STORE_KEY_MAX + 1])
{
	struct copy_conflict cc = { .fs = fs, .p = p, .aside_key = aside_key };
	int rc;

	cc.op.fs = fs;
	cc.op.key = p->dst;
	cc.op.kind = CONFLICT_ASIDE;
	rc = db_write(fs->db, copy_conflict_apply, &cc);
	if (rc)
		return rc;
	if (!cc.applied)
		return 1;
	metrics_inc(MET_CONFLICTS_ASIDE);
	log_warn("fs: %s was made by someone else while our rename to it "
		 "waited for the store: theirs stays at %s, ours goes to %s "
		 "in the same directory",
		 p->dst, p->dst, cc.op.aside);
	fs_revalidate(fs, NULL, cc.op.parent, true, fs_done_nothing, NULL);
	return 0;
}

/* Is anything below dir in the store (or too much to look at: true)? */
static bool below_in_store(struct fs *fs, struct db_txn *txn, uint64_t dir,
			   int depth, size_t *budget)
{
	char name[FS_NAME_MAX + 1];
	uint64_t cookie = 0, ino;
	struct fs_inode in;

	if (depth > 64)
		return true;
	while (fs_dir_next(fs, txn, dir, &cookie, &ino, name) == 0) {
		if (!*budget)
			return true;
		(*budget)--;
		if (fs_inode_get(fs, txn, ino, &in))
			continue;
		if ((in.flags & FS_F_IN_STORE) ||
		    (in.type == FS_DIR &&
		     below_in_store(fs, txn, ino, depth + 1, budget)))
			return true;
	}
	return false;
}

struct kind_op {
	struct conflict_op op;
	bool kept; /* a directory with something below in the store */
};

static int kind_apply(struct db_txn *txn, void *arg)
{
	struct kind_op *k = arg;
	struct fs *fs = k->op.fs;
	char key[STORE_KEY_MAX + 2];
	struct fs_inode in, dir;
	size_t budget = 10000;
	int rc = fs_inode_get(fs, txn, k->op.snap->ino, &in);

	k->op.applied = k->kept = false; /* (a cluster commit may rerun) */
	if (rc)
		return rc == -ESTALE ? 0 : rc;
	if ((rc = fs_obj_key(fs, txn, &in, key, sizeof(key))))
		return rc;
	if (strcmp(key, k->op.key) || (in.flags & FS_F_IN_STORE))
		return 0; /* moved or uploaded meanwhile: as it is now */
	in.flags &= ~(uint32_t)FS_F_MADE_AWAY;
	if (in.type == FS_DIR && below_in_store(fs, txn, in.ino, 0, &budget)) {
		k->kept = true;
		return fs_inode_put(fs, txn, &in);
	}
	if ((rc = fs_inode_get(fs, txn, in.parent, &dir)) ||
	    (rc = move_aside(&k->op, txn, &dir, &in)))
		return rc;
	in.ctime = fs_now_ns();
	if ((rc = fs_inode_put(fs, txn, &in)))
		return rc;
	k->op.parent = in.parent;
	k->op.applied = true;
	return 0;
}

/* See fs_int.h. */
int fs_conflict_kind(struct fs *fs, const struct fs_inode *snap,
		     const char *key)
{
	struct kind_op k = { .op = { .fs = fs,
				     .snap = snap,
				     .key = key,
				     .kind = CONFLICT_ASIDE } };
	int rc = db_write(fs->db, kind_apply, &k);

	if (rc)
		return rc;
	if (k.kept) {
		log_warn("fs: %s: another writer made a file of this name "
			 "while the store was away, and our directory has "
			 "objects in the store already: both stay, the "
			 "directory is shown",
			 key);
		return 1;
	}
	if (!k.op.applied)
		return 0;
	metrics_inc(MET_CONFLICTS_ASIDE);
	log_warn("fs: %s was made %s by someone else while the store was "
		 "away, and here %s: theirs stays, ours goes to %s in the "
		 "same directory",
		 key, snap->type == FS_DIR ? "a file" : "a directory",
		 snap->type == FS_DIR ? "a directory" : "a file", k.op.aside);
	fs_revalidate(fs, NULL, k.op.parent, true, fs_done_nothing, NULL);
	return 0;
}
