/*
 * fs/takeover.c - in a cluster, what this node does about other nodes'
 * files (owner.c has the rules).
 *
 * A change of a file another node owns asks that node to upload it now
 * and let it go (fs_owner_take, fs_owner_ask: a message through the
 * database); this node does the same when asked (fs_owner_on_message:
 * the strict path's upload, fs_sync_inode).
 *
 * When a node dies its files must not wait for it: once its lease ran
 * out (db_node_up false), any other node takes them over (the sweep):
 * it first runs the dead node's queued store moves and deletes (they
 * are shared records, see pending.c), then, per file, asks the store
 * what reached it (HEAD) and makes the record say so; the file becomes
 * the taker's with only its attributes to rewrite, or, if nothing ever
 * reached the store, with the record's size of zeros to upload.  What
 * the dead node had not made stable is gone (with --cluster-commit store
 * that is only data no COMMIT or stable WRITE was answered for; the
 * clients resend it, their write verifier having changed with the node).
 *
 * The sweep also takes back this node's own files that the cluster says
 * are its and its disk knows nothing of: a change commits in PostgreSQL
 * first, then here, and a node killed in between finds them when it
 * starts (the sweep runs then), the same way.
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
#include "s3/store.h"

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

void fs_owner_ask(struct fs *fs, uint32_t owner, uint64_t ino)
{
	struct release_req *r;

	/* A dead owner uploads nothing: its files are taken over; nor
	 * does this node a file it lost its change of (fs_owner_claim). */
	if (owner == db_node_id(fs->db) || !db_node_up(fs->db, owner)) {
		fs_owner_sweep_kick(fs);
		return;
	}
	r = malloc(sizeof(*r));
	/* Off the caller's thread: the db writer or a loop. */
	if (r) {
		*r = (struct release_req){ .owner = owner, .ino = ino };
		fs_defer(fs, release_send_job, r);
	}
}

int fs_owner_take(struct fs *fs, struct fs_inode *in)
{
	int rc = fs_owner_claim(fs, in);

	if (rc == -EAGAIN)
		fs_owner_ask(fs, in->owner, in->ino);
	return rc;
}

/*
 * Whether in is a file to take over from its owner `from`: a regular file
 * of a node that is down, or this node's with no change of it here (its
 * last change here was lost: the cluster's commit landed, this node's own
 * did not, as when it is killed between the two).
 */
static bool adoptable(struct fs *fs, const struct fs_inode *in, uint32_t from)
{
	if (in->type != FS_REG || !in->owner || in->owner != from)
		return false;
	if (from == db_node_id(fs->db))
		return !(in->flags & FS_F_DIRTY);
	return !db_node_up(fs->db, from);
}

struct release_job {
	struct fs *fs;
	uint64_t ino;
};

static void release_job(struct fs *fs, void *arg)
{
	struct release_job *j = arg;
	int rc = fs_sync_inode(fs, j->ino);
	struct db_txn *txn;
	struct fs_inode in;

	if (rc)
		log_debug("fs: upload of %" PRIu64 " asked by another node: %s",
			  j->ino, strerror(-rc));
	/* Nothing here to upload, and still this node's: its change here
	 * was lost; the sweep takes it back and lets it go. */
	if (!rc && !db_read_begin(fs->db, &txn)) {
		if (!fs_inode_get(fs, txn, j->ino, &in) &&
		    adoptable(fs, &in, db_node_id(fs->db)))
			fs_owner_sweep_kick(fs);
		db_read_end(fs->db, txn);
	}
	free(j);
}

void fs_owner_on_message(void *ctx, uint32_t from, const char *msg)
{
	struct fs *fs = ctx;
	struct release_job *j;
	uint64_t ino;

	(void)from;
	if (!atomic_load(&fs->running) || atomic_load(&fs->closing) ||
	    sscanf(msg, "release %" SCNu64, &ino) != 1 || !ino)
		return;
	j = malloc(sizeof(*j));
	if (!j)
		return;
	*j = (struct release_job){ .fs = fs, .ino = ino };
	fs_defer(fs, release_job, j);
}

/* ---- taking over the files of a dead node -------------------------------- */

struct adopt {
	struct fs *fs;
	uint64_t ino;
	uint32_t from; /* the dead owner, or this node (lost here) */
	char key[STORE_KEY_MAX + 2];
	int head; /* store_head's answer for key */
	struct store_info info;
	bool zeros; /* made a local file of zeros for it */
	bool taken;
};

static int adopt_apply(struct db_txn *txn, void *arg)
{
	struct adopt *a = arg;
	struct fs *fs = a->fs;
	char key[STORE_KEY_MAX + 2];
	struct fs_inode in;
	int rc = fs_inode_get(fs, txn, a->ino, &in);

	a->taken = false;
	if (rc)
		return rc == -ESTALE ? 0 : rc;
	/* Taken already (or its node is back, or, this node's, dirty
	 * here), or moved since the HEAD: nothing here; a later sweep sees
	 * it again if need be. */
	if (!adoptable(fs, &in, a->from) ||
	    fs_obj_key(fs, txn, &in, key, sizeof(key)) || strcmp(key, a->key))
		return 0;
	in.owner = 0;
	in.flags &= ~(uint32_t)FS_F_DIRTY;
	if (a->head == 0) {
		/* What reached the store is the file now; its attributes
		 * (the record's, maybe newer) are written to it again. */
		in.size = a->info.size;
		snprintf(in.etag, sizeof(in.etag), "%s", a->info.etag);
		in.flags |= FS_F_IN_STORE;
		in.synced_ms = fs_now_ms();
		if ((rc = fs_keys_put(fs, txn, key, in.ino)) ||
		    (rc = fs_owner_claim(fs, &in)) ||
		    (rc = fs_inode_mark(fs, txn, &in, FS_F_DIRTY_META)))
			return rc;
	} else {
		/* Nothing reached the store: the record's size of zeros,
		 * from the local file made for it. */
		in.flags &= ~(uint32_t)FS_F_IN_STORE;
		if (!a->zeros)
			return -EAGAIN;
		if ((rc = fs_owner_claim(fs, &in)) ||
		    (rc = fs_inode_mark(fs, txn, &in, FS_F_DIRTY)))
			return rc;
	}
	a->taken = true;
	return fs_inode_put(fs, txn, &in);
}

/* Take ino over from its dead owner.  0, or -errno to try it later. */
static int adopt_one(struct fs *fs, uint64_t ino, uint32_t from)
{
	struct adopt a = { .fs = fs, .ino = ino, .from = from };
	struct fs_inode in;
	struct db_txn *txn;
	int rc = db_read_begin(fs->db, &txn);

	if (rc)
		return rc;
	rc = fs_inode_get(fs, txn, ino, &in);
	if (!rc && !adoptable(fs, &in, from))
		rc = -ESTALE; /* nothing to do any more */
	if (!rc && fs_pending_of(fs, txn, ino, NULL))
		rc = -EAGAIN; /* its object is still on the move */
	if (!rc)
		rc = fs_obj_key(fs, txn, &in, a.key, sizeof(a.key));
	db_read_end(fs->db, txn);
	if (rc)
		return rc == -ESTALE ? 0 : rc;
	/* A file never uploaded may be after all: its owner's upload
	 * landed and the commit that would say so did not (the owner cut
	 * off from the database mid-way).  That object, of this very file,
	 * is its version now; before, zeros went up, met it, and the file
	 * moved aside as a conflict with its own upload (found by the fault
	 * campaign, issue 48).  Another writer's object there stays theirs
	 * (the zeros' upload then goes aside, conflict.c). */
	a.head = store_head(fs->store, a.key, &a.info);
	if (a.head && a.head != -ENOENT)
		return a.head; /* the store does not answer: later */
	if (!a.head && !(in.flags & FS_F_IN_STORE) &&
	    !fs_wid_names(fs, a.info.meta.wid, ino))
		a.head = -ENOENT;
	cache_drop(fs->cache, ino); /* whatever it held is not the file */
	if (a.head == -ENOENT) {
		struct timespec mt = fs_ns_to_ts(in.mtime);

		rc = cache_create(fs->cache, ino);
		if (!rc)
			rc = cache_truncate(fs->cache, ino, in.size);
		if (!rc)
			rc = cache_set_mtime(fs->cache, ino, &mt);
		if (rc) {
			cache_drop(fs->cache, ino);
			return rc;
		}
		a.zeros = true;
	}
	rc = db_write(fs->db, adopt_apply, &a);
	if (a.zeros && (rc || !a.taken))
		cache_drop(fs->cache, ino);
	if (!rc && a.taken && from == db_node_id(fs->db)) {
		log_warn("fs: took back %s: the cluster has this node's change "
			 "of it and this node did not keep it (it stopped in "
			 "between); %s",
			 a.key,
			 a.head == 0 ? "as in the store now"
				     : "none of it had reached the store: "
				       "zeros of its size go up");
	} else if (!rc && a.taken) {
		if (a.head == 0)
			log_info(
				"fs: took over %s from node %u (dead): %" PRIu64
				" bytes as in the store",
				a.key, from, a.info.size);
		else
			log_warn(
				"fs: took over %s from node %u (dead): none of "
				"it had reached the store; %" PRIu64
				" bytes of zeros go up",
				a.key, from, in.size);
	}
	return rc;
}

/* The files to take over (adoptable), with their owners (malloc'd). */
static int orphans(struct fs *fs, uint64_t **inos, uint32_t **owners, size_t *n)
{
	struct db_cursor *cur;
	struct db_txn *txn;
	struct db_val k, v;
	size_t cap = 0;
	int rc = db_read_begin(fs->db, &txn), mrc = 0;

	*inos = NULL;
	*owners = NULL;
	*n = 0;
	if (rc)
		return rc;
	rc = db_cursor_open(txn, fs->dbi_inodes, &cur);
	if (rc) {
		db_read_end(fs->db, txn);
		return rc;
	}
	for (int op = DB_FIRST; !(mrc = db_cursor_get(cur, &k, &v, op));
	     op = DB_NEXT) {
		struct fs_inode in;
		uint64_t ino;

		if (k.size != sizeof(ino))
			continue;
		memcpy(&ino, k.data, sizeof(ino));
		if (fs_inode_decode(ino, &v, &in) ||
		    !adoptable(fs, &in, in.owner))
			continue;
		if (*n == cap) {
			size_t c2 = cap ? cap * 2 : 64;
			uint64_t *i2 = realloc(*inos, c2 * sizeof(**inos));
			uint32_t *o2 =
				i2 ? realloc(*owners, c2 * sizeof(**owners))
				   : NULL;

			if (i2)
				*inos = i2;
			if (!i2 || !o2) {
				rc = -ENOMEM;
				break;
			}
			*owners = o2;
			cap = c2;
		}
		(*inos)[*n] = ino;
		(*owners)[(*n)++] = in.owner;
	}
	db_cursor_close(cur);
	db_read_end(fs->db, txn);
	if (!rc && mrc && mrc != -ENOENT)
		rc = mrc;
	return rc;
}

static void sweep_job(struct fs *fs, void *arg)
{
	uint64_t *inos;
	uint32_t *owners;
	size_t n, taken = 0, later = 0;
	int rc;

	(void)arg;
	atomic_store(&fs->sweep_queued, false);
	/* The dead nodes' moves and deletes first: objects where their
	 * records say. */
	rc = fs_sync_pending(fs);
	if (rc)
		log_debug("fs: a dead node's store work: %s", strerror(-rc));
	rc = orphans(fs, &inos, &owners, &n);
	if (rc) {
		log_warn("fs: listing the files of dead nodes: %s",
			 strerror(-rc));
		free(inos);
		free(owners);
		return;
	}
	for (size_t i = 0; i < n && !atomic_load(&fs->closing); i++) {
		rc = adopt_one(fs, inos[i], owners[i]);
		if (rc)
			later++;
		else
			taken++;
	}
	if (n)
		log_info("fs: files of dead nodes (or lost here): %zu taken "
			 "over, %zu later",
			 taken, later);
	free(inos);
	free(owners);
}

void fs_owner_sweep_kick(struct fs *fs)
{
	if (!db_clustered(fs->db) || !atomic_load(&fs->running) ||
	    atomic_load(&fs->closing) ||
	    atomic_exchange(&fs->sweep_queued, true))
		return;
	fs_defer(fs, sweep_job, NULL);
}

void fs_owner_on_node_down(void *ctx, uint32_t node)
{
	(void)node;
	fs_owner_sweep_kick(ctx);
}
