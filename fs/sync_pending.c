/*
 * fs/sync_pending.c - the syncer's queued store work (pending.c's
 * records), run in their order at the start of each pass: a DEL of a key
 * whose inode went or moved, a COPY of a renamed or linked object to its
 * new key (conditional for a file: another writer's object there stays,
 * and ours goes aside, conflict.c), each dropped once the store
 * confirmed it.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "common/log.h"
#include "db/db.h"
#include "fs_int.h"
#include "sync_int.h"

struct pend_commit {
	struct fs *fs;
	const struct fs_pending *p;
	bool copied; /* COPY found its source and placed the object */
	struct store_info info;  /* the copy's */
	struct fs_pending aside; /* p, moved aside by a conflict */
};

static int pend_commit_apply(struct db_txn *txn, void *arg)
{
	struct pend_commit *pc = arg;
	struct fs *fs = pc->fs;
	const struct fs_pending *p = pc->p;
	uint64_t seq = p->seq;
	struct db_val k = { sizeof(seq), &seq };
	char key[STORE_KEY_MAX + 2];
	struct fs_inode in;
	int rc = db_del(txn, fs->dbi_pending, &k);

	if (rc == -ENOENT)
		return 0; /* another node ran it too (adopted), and first */
	if (rc)
		return rc;
	if (p->op == FS_PEND_DEL)
		return fs_keys_del(fs, txn, p->src);
	if (!pc->copied)
		return 0;
	/* Known as ours even if the inode went or moved on meanwhile: the
	 * records queued after this one take the object away in order. */
	rc = fs_keys_put(fs, txn, p->dst, p->ino);
	if (rc || fs_inode_get(fs, txn, p->ino, &in))
		return rc;
	if (fs_obj_key(fs, txn, &in, key, sizeof(key)))
		return 0;
	if (strcmp(key, p->dst)) {
		/* A copy to another name of the file (LINK, or a rename of
		 * that name): its object is there now. */
		struct fs_link l;

		if (fs_link_of_key(fs, txn, &in, p->dst, &l))
			return 0;
		l.flags |= FS_LINK_IN_STORE;
		l.synced_ms = fs_now_ms();
		memcpy(l.etag, pc->info.etag, sizeof(l.etag));
		return fs_link_put(fs, txn, &l);
	}
	in.synced_ms = fs_now_ms();
	/* A copy is a new version (its ETag may differ): reads pin it. */
	if (pc->info.etag[0])
		memcpy(in.etag, pc->info.etag, sizeof(in.etag));
	return fs_inode_put(fs, txn, &in);
}

/*
 * A COPY's source is missing: deleted out of band (nothing to move), or
 * not there yet because another node's COPY into it has not run (a file
 * renamed on one node and again on another): then wait for that one.
 */
static bool copy_source_coming(struct fs *fs, const char *src)
{
	struct db_txn *txn;
	bool coming;

	if (!db_clustered(fs->db) || db_read_begin(fs->db, &txn))
		return false;
	coming = fs_pending_copy_into(fs, txn, src);
	db_read_end(fs->db, txn);
	return coming;
}

/*
 * The metadata a COPY gives its new object: the source's (NULL), but for
 * a file with several names the record's with the link id, so each name
 * says which file it is (links.c).
 */
static const struct store_meta *copy_meta(struct fs *fs, uint64_t ino,
					  struct store_meta *m)
{
	struct sync_item it = { .have_cs = false };
	struct db_txn *txn;
	int rc;

	if (db_read_begin(fs->db, &txn))
		return NULL;
	rc = fs_inode_get(fs, txn, ino, &it.in);
	db_read_end(fs->db, txn);
	if (rc || it.in.type == FS_DIR || it.in.nlink < 2)
		return NULL;
	sync_meta_of(fs, &it, m);
	return m;
}

/*
 * Is dst what an earlier try of copying src there left (its answer
 * lost)?  The same bytes: the same size, and the same ETag or the same
 * write id in the metadata (a copy keeps the source's).
 */
static bool copy_landed(struct fs *fs, const char *src, const char *dst)
{
	struct store_info a, b;

	if (store_head(fs->store, src, &a) || store_head(fs->store, dst, &b))
		return false;
	return a.size == b.size &&
	       (!strcmp(a.etag, b.etag) ||
		(a.meta.wid[0] && !strcmp(a.meta.wid, b.meta.wid)));
}

/*
 * The COPY of a renamed or linked object to its new key.  A file's goes
 * only where no object is (every DEL of a target it replaced ran before
 * it): an object another writer put at the new name meanwhile, during a
 * store outage say, stays theirs, and ours moves aside
 * (fs_conflict_copy), the record then copying there (pc->p follows).  A
 * directory's marker holds nothing to lose, and another name of a file
 * or a file renamed on since cannot move aside here: those copy as
 * before, over what is there.
 */
static int pend_copy(struct fs *fs, const struct fs_pending *p,
		     const struct store_meta *meta, struct pend_commit *pc)
{
	struct store_cond c = { .kind = STORE_IF_NONE };
	size_t dl = strlen(p->dst);
	int rc;

	/* (A copy onto itself gives a linked file's object its link id.) */
	if ((dl && p->dst[dl - 1] == '/') || !strcmp(p->src, p->dst))
		c.kind = STORE_IF_ANY;
	rc = store_copy_if(fs->store, p->src, p->dst, meta, &c, &pc->info);
	if (rc != -ESTALE)
		return rc;
	if (copy_landed(fs, p->src, p->dst))
		return store_copy(fs->store, p->src, p->dst, meta, &pc->info);
	rc = fs_conflict_copy(fs, p, pc->aside.dst);
	if (rc < 0)
		return rc;
	if (rc == 1)
		return store_copy(fs->store, p->src, p->dst, meta, &pc->info);
	pc->aside.seq = p->seq;
	pc->aside.op = p->op;
	pc->aside.ino = p->ino;
	strcpy(pc->aside.src, p->src);
	pc->p = &pc->aside;
	return store_copy_if(fs->store, p->src, pc->aside.dst, meta, &c,
			     &pc->info);
}

/* See sync_int.h. */
int sync_run_pending(struct fs *fs, const struct fs_pending *p)
{
	struct pend_commit pc = { .fs = fs, .p = p };
	struct store_meta m;
	int rc;

	/* A node whose lease may have run out writes nothing (owner.c). */
	if (!db_lease_held(fs->db))
		return -EAGAIN;
	if (p->op == FS_PEND_DEL) {
		rc = store_delete(fs->store, p->src);
	} else if (p->op == FS_PEND_COPY) {
		rc = pend_copy(fs, p, copy_meta(fs, p->ino, &m), &pc);
		pc.copied = rc == 0;
		if (rc == -ENOENT)
			rc = copy_source_coming(fs, p->src) ? -EAGAIN : 0;
	} else {
		rc = -EIO;
	}
	if (rc)
		return rc;
	return db_write(fs->db, pend_commit_apply, &pc);
}
