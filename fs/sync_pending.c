/*
 * fs/sync_pending.c - the syncer's queued store work (pending.c's
 * records), run at the start of each pass: a DEL of a key whose inode
 * went or moved, a COPY of a renamed or linked object to its new key
 * (conditional for a file: another writer's object there stays, and ours
 * goes aside, conflict.c), each dropped once the store confirmed it.
 *
 * At the store's speed (issue 49): a pass's records run in waves, many
 * at a time.  A record waits only for the earlier ones that touch one of
 * its keys where one of the two writes it (a COPY reads its source and
 * writes its target, a DEL writes its key): a key's DEL after the COPY
 * that reads it, a replaced target's DEL before the COPY onto it, a
 * chain of renames in order.  A wave's COPYs run on up to
 * store_put_parallel() threads, its DELs as one multi-object DELETE
 * (1,000 keys a request on S3), and the records that ran are dropped in
 * one commit.  Waves of up to PEND_WAVE_MAX records for up to
 * PEND_PASS_MS a pass, then the pass's uploads: new files do not wait
 * for a whole backlog.  A record that fails keeps every later one that touches
 * its keys queued; the others go on.  Before, one record at a time, each
 * with a durable commit of its own: a renamed directory reached the
 * bucket at ~20 objects a second.
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
#include "metrics/metrics.h"
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
 * The metadata a COPY gives its new object: the source's (*out NULL), but
 * for a file with several names the record's with the link id, so each
 * name says which file it is (links.c).  0 or -errno (the database).
 */
static int copy_meta(struct fs *fs, uint64_t ino, struct store_meta *m,
		     const struct store_meta **out)
{
	struct sync_item it = { .have_cs = false };
	struct db_txn *txn;
	int rc = db_read_begin(fs->db, &txn);

	*out = NULL;
	if (rc)
		return rc;
	rc = fs_inode_get(fs, txn, ino, &it.in);
	db_read_end(fs->db, txn);
	if (rc == -ESTALE)
		return 0; /* the file is gone */
	if (rc || it.in.type == FS_DIR || it.in.nlink < 2)
		return rc;
	sync_meta_of(fs, &it, m);
	*out = m;
	return 0;
}

/*
 * Is dst what an earlier try of copying src there left (its answer
 * lost)?  The same bytes: the same size, and the same ETag or the same
 * write id in the metadata (a copy keeps the source's): 1.  -ENOENT when
 * src is gone: the record's COPY and the DEL after it ran already, by
 * another node that ran this record too (one that took this node for
 * dead while it was stopped, or this node's records for a dead one's),
 * and dst is that copy; it is no other writer's object.  0 otherwise.
 */
static int copy_landed(struct fs *fs, const char *src, const char *dst)
{
	struct store_info a, b;
	int rc = store_head(fs->store, src, &a);

	if (rc == -ENOENT)
		return -ENOENT;
	if (rc || store_head(fs->store, dst, &b))
		return 0;
	return a.size == b.size &&
	       (!strcmp(a.etag, b.etag) ||
		(a.meta.wid[0] && !strcmp(a.meta.wid, b.meta.wid)));
}

/*
 * Does dst hold an upload of the record's own file (its write id, or its
 * link id, names this namespace and the inode)?  In a cluster the file's upload to its
 * new name can come before the rename's COPY ran: the node that took the
 * file over from one cut off uploads it to the key its record has now,
 * while the cut-off node's COPY of the old object is still to run.  That
 * object is this file's newer version, no other writer's: the COPY has
 * nothing to do.  Before, the file moved aside as a conflict with itself
 * (found by the fault campaign, issue 48).
 */
static bool own_upload_at(struct fs *fs, const struct fs_pending *p)
{
	char link[STORE_LINK_MAX];
	struct store_info b;

	if (store_head(fs->store, p->dst, &b))
		return false;
	/* A file with several names: its objects carry its link id in
	 * place of a write id (sync_meta_of, copy_meta). */
	fs_link_id(fs, p->ino, link);
	return fs_wid_names(fs, b.meta.wid, p->ino) ||
	       (b.meta.link[0] && !strcmp(b.meta.link, link));
}

/*
 * The COPY of a renamed or linked object to its new key.  A file's goes
 * only where no object is (every DEL of a target it replaced ran before
 * it): an object another writer put at the new name meanwhile, during a
 * store outage say, stays theirs, and ours moves aside
 * (fs_conflict_copy), the record then copying there (pc->p follows).  A
 * directory's marker holds nothing to lose, and another name of a file
 * or a file renamed on since cannot move aside here: those copy as
 * before, over what is there.  1: dst holds the file's own upload
 * (own_upload_at), nothing copied.
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
	rc = copy_landed(fs, p->src, p->dst);
	log_debug("fs: copy %s -> %s: the target is there: landed %d", p->src,
		  p->dst, rc);
	if (rc == 1)
		return store_copy(fs->store, p->src, p->dst, meta, &pc->info);
	if (rc)
		return rc; /* the source gone: pend_store says what then */
	if (own_upload_at(fs, p))
		return 1;
	rc = fs_conflict_copy(fs, p, pc->aside.dst);
	log_debug("fs: copy %s -> %s: conflict %d aside %s", p->src, p->dst, rc,
		  pc->aside.dst);
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

/*
 * Is a COPY's target needed no more?  No name of the file is at that key
 * now (it was removed, or renamed on, or the file is gone), and no queued
 * COPY reads from it (a chain of renames goes through it).  Then the
 * object copied there would only be deleted again, by a record queued
 * after this one: in a cluster perhaps another node's, run already (a
 * link made on one node, removed through another while the first one's
 * queue waited): the copy would put back a removed name's object for
 * good.  Found by the fault campaign (issue 48, seed 3).
 */
static bool copy_target_unneeded(struct fs *fs, const struct fs_pending *p)
{
	char key[STORE_KEY_MAX + 2];
	struct fs_inode in;
	struct fs_link l;
	struct db_txn *txn;
	bool unneeded = false;
	int rc;

	if (db_read_begin(fs->db, &txn))
		return false;
	rc = fs_inode_get(fs, txn, p->ino, &in);
	if (rc == -ESTALE)
		unneeded = true; /* the file is gone */
	else if (!rc && !fs_obj_key(fs, txn, &in, key, sizeof(key)))
		unneeded = strcmp(key, p->dst) &&
			   fs_link_of_key(fs, txn, &in, p->dst, &l) == -ENOENT;
	if (unneeded)
		unneeded = !fs_pending_copy_from(fs, txn, p->dst);
	db_read_end(fs->db, txn);
	return unneeded;
}

/* The store's half of one record (no commit).  0 or -errno. */
static int pend_store(struct fs *fs, struct pend_commit *pc)
{
	const struct fs_pending *p = pc->p;
	const struct store_meta *meta;
	struct store_meta m;
	int rc;

	if (p->op == FS_PEND_DEL)
		return store_delete(fs->store, p->src);
	if (p->op != FS_PEND_COPY)
		return -EIO;
	if (copy_target_unneeded(fs, p))
		return 0; /* pc->copied stays false: nothing is known there */
	if ((rc = copy_meta(fs, p->ino, &m, &meta)))
		return rc;
	/* A copy onto itself gives the object its link id; the file has one
	 * name again (the link removed before it ran): nothing to give.
	 * Before, the store refused the copy (S3: an object copied onto
	 * itself must change its metadata) and it failed for good. */
	if (!meta && !strcmp(p->src, p->dst))
		return 0;
	rc = pend_copy(fs, p, meta, pc);
	pc->copied = rc == 0;
	if (rc == 1)
		return 0; /* the file's own upload is there: nothing to copy */
	if (rc == -ENOENT)
		rc = copy_source_coming(fs, p->src) ? -EAGAIN : 0;
	return rc;
}

uint64_t sync_key_hash(const char *key)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	while (*key)
		h = (h ^ (uint8_t)*key++) * 0x100000001b3ull;
	return h;
}

static void foreign_key(struct sync_foreign *f, const char *key, uint64_t order,
			bool write)
{
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 256;
		struct sync_foreign_key *k = realloc(f->k, cap * sizeof(*k));

		if (!k) {
			f->oom = true;
			return;
		}
		f->k = k;
		f->cap = cap;
	}
	f->k[f->n++] =
		(struct sync_foreign_key){ sync_key_hash(key), order, write };
}

void sync_foreign_add(struct sync_foreign *f, const struct fs_pending *p)
{
	foreign_key(f, p->src, p->order, p->op == FS_PEND_DEL);
	if (p->op == FS_PEND_COPY)
		foreign_key(f, p->dst, p->order, true);
}

static int cmp_foreign(const void *a, const void *b)
{
	const struct sync_foreign_key *x = a, *y = b;

	return x->h < y->h ? -1 : x->h > y->h;
}

void sync_foreign_sort(struct sync_foreign *f)
{
	if (f->n > 1)
		qsort(f->k, f->n, sizeof(*f->k), cmp_foreign);
}

void sync_foreign_free(struct sync_foreign *f)
{
	free(f->k);
	*f = (struct sync_foreign){ 0 };
}

/* Does another node's record that came first (a lower order; one of an
 * unknown order counts as first; p's unknown: none) touch key, one of
 * the two writing it? */
static bool foreign_first(const struct sync_foreign *f, const char *key,
			  uint64_t order, bool write)
{
	uint64_t h = sync_key_hash(key);
	size_t lo = 0, hi = f->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (f->k[mid].h < h)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < f->n && f->k[lo].h == h; lo++)
		if ((write || f->k[lo].write) && f->k[lo].order < order)
			return true;
	return false;
}

/* Must p wait for another node's record (f) that came before it? */
static bool foreign_before(const struct sync_foreign *f,
			   const struct fs_pending *p)
{
	if (!f || (!f->n && !f->oom))
		return false;
	if (f->oom)
		return true;
	return foreign_first(f, p->src, p->order, p->op == FS_PEND_DEL) ||
	       (p->op == FS_PEND_COPY &&
		foreign_first(f, p->dst, p->order, true));
}

/* A pass runs waves for this long at most, each of at most so many
 * records: the uploads after them (new files) do not wait behind a
 * renamed directory's thousands of records for more than about this. */
#define PEND_PASS_MS 500
#define PEND_WAVE_MAX 256

/* Record states in a batch's run. */
#define PEND_TODO 1
#define PEND_WAVE 2 /* in the wave being run */
/* Not this node's to run now (db_queue_runnable): another node holds its
 * queue, or the fence after its last runner is not over; or another
 * node's record that came first touches its keys (foreign_before).  It
 * stays queued, and the records after it that touch its keys wait too. */
#define PEND_FENCED 3

struct pend_batch {
	struct fs *fs;
	const struct fs_pending *p;
	size_t n;
	int *st;                /* per record: PEND_*, 0 done, or -errno */
	uint64_t (*h)[2];       /* its keys' hashes: src, dst (COPY) */
	struct pend_commit *pc; /* per record */
	size_t *wave, nwave;    /* the wave's records, in order */
	size_t *dels, ndels;    /* of them the DELs */
	bool queues;            /* records of more than one node's queue */
};

/* Do records i and j (any order) touch one key, one of them writing? */
static bool pend_conflict(const struct pend_batch *b, size_t i, size_t j)
{
	const struct fs_pending *a = &b->p[i], *c = &b->p[j];
	const uint64_t *ha = b->h[i], *hc = b->h[j];
	bool acp = a->op == FS_PEND_COPY, ccp = c->op == FS_PEND_COPY;

	/* A COPY's target and a DEL's key are written; a COPY's source is
	 * only read, and two reads never conflict. */
	if (ha[0] == hc[0] && (!acp || !ccp) && !strcmp(a->src, c->src))
		return true;
	if (acp && ha[1] == hc[0] && !strcmp(a->dst, c->src))
		return true;
	if (ccp && hc[1] == ha[0] && !strcmp(c->dst, a->src))
		return true;
	return acp && ccp && ha[1] == hc[1] && !strcmp(a->dst, c->dst);
}

/* Does record j come before record i?  In one queue, by its place in
 * it; of two queues, by their commits' order (unknown: by place). */
static bool pend_before(const struct pend_batch *b, size_t j, size_t i)
{
	const struct fs_pending *a = &b->p[j], *c = &b->p[i];

	if (j == i)
		return false;
	if (fs_pending_node(a->seq) != fs_pending_node(c->seq) && a->order &&
	    c->order)
		return a->order < c->order;
	return j < i;
}

/* The next wave: each record still to run that no earlier record not
 * done (waiting, in this wave, or failed) conflicts with.  Its size. */
static size_t pend_wave(struct pend_batch *b)
{
	b->nwave = b->ndels = 0;
	for (size_t i = 0; i < b->n; i++) {
		bool wait = false;

		if (b->st[i] != PEND_TODO)
			continue;
		if (b->nwave == PEND_WAVE_MAX)
			break; /* the rest wait for the next wave */
		for (size_t j = 0; j < (b->queues ? b->n : i) && !wait; j++)
			wait = b->st[j] != 0 && pend_before(b, j, i) &&
			       pend_conflict(b, i, j);
		if (wait)
			continue;
		b->st[i] = PEND_WAVE;
		b->wave[b->nwave++] = i;
		if (b->p[i].op == FS_PEND_DEL)
			b->dels[b->ndels++] = i;
	}
	return b->nwave;
}

/* May this node run record p now?  (Right before its store request.) */
static bool pend_runnable(struct fs *fs, const struct fs_pending *p)
{
	return db_queue_runnable(fs->db, fs_pending_node(p->seq));
}

static void pend_copy_one(void *arg, size_t k)
{
	struct pend_batch *b = arg;
	size_t i = b->wave[k];

	if (b->p[i].op == FS_PEND_DEL)
		return; /* with the wave's other DELs */
	b->st[i] = !pend_runnable(b->fs, &b->p[i]) ? PEND_FENCED
		   : fs_fail_wait(b->fs, b->p[i].src)
			   ? -EAGAIN
			   : pend_store(b->fs, &b->pc[i]);
}

static void pend_del_one(void *arg, size_t k)
{
	struct pend_batch *b = arg;
	size_t i = b->dels[k];

	b->st[i] = pend_store(b->fs, &b->pc[i]);
}

/* The wave's DELs: one multi-object DELETE (per 1,000 keys); if it
 * fails, one at a time, so each record knows its own answer. */
static void pend_dels(struct pend_batch *b, unsigned par)
{
	const char **keys = calloc(b->ndels ? b->ndels : 1, sizeof(*keys));
	size_t n = 0;

	for (size_t k = 0; k < b->ndels; k++) {
		size_t i = b->dels[k];

		if (!pend_runnable(b->fs, &b->p[i])) {
			b->st[i] = PEND_FENCED;
			continue;
		}
		if (fs_fail_wait(b->fs, b->p[i].src)) {
			b->st[i] = -EAGAIN; /* backing off: not now */
			continue;
		}
		b->dels[n++] = i;
	}
	b->ndels = n;
	for (size_t k = 0; keys && k < n; k++)
		keys[k] = b->p[b->dels[k]].src;
	if (keys && n > 1 && !store_delete_many(b->fs->store, keys, n)) {
		for (size_t k = 0; k < n; k++)
			b->st[b->dels[k]] = 0;
	} else {
		fs_each_parallel(n, par, pend_del_one, b);
	}
	free(keys);
}

struct pend_commits {
	struct pend_batch *b;
	const size_t *idx;
	size_t n;
};

static int pend_commits_apply(struct db_txn *txn, void *arg)
{
	struct pend_commits *c = arg;
	int rc = 0;

	for (size_t k = 0; k < c->n && !rc; k++)
		rc = pend_commit_apply(txn, &c->b->pc[c->idx[k]]);
	return rc;
}

/* Drop the wave's records that ran in one commit (or, if it fails, one
 * commit each, so that one bad record keeps only itself). */
static void pend_commit_wave(struct pend_batch *b)
{
	struct pend_commits c = { .b = b, .idx = b->wave };
	size_t n = 0;

	for (size_t k = 0; k < b->nwave; k++)
		if (b->st[b->wave[k]] == 0)
			b->wave[n++] = b->wave[k];
	c.n = n;
	if (!n || !db_write(b->fs->db, pend_commits_apply, &c))
		return;
	for (size_t k = 0; k < n; k++) {
		size_t i = b->wave[k];

		b->st[i] = db_write(b->fs->db, pend_commit_apply, &b->pc[i]);
	}
}

/* See sync_int.h. */
int sync_run_pending(struct fs *fs, const struct fs_pending *p, size_t n,
		     const struct sync_foreign *f, bool *ran, bool *progress)
{
	struct pend_batch b = { .fs = fs, .p = p, .n = n };
	unsigned par = store_put_parallel(fs->store);
	uint64_t nran = 0;
	int first = 0;

	for (size_t i = 0; i < n; i++)
		ran[i] = false;
	if (!n)
		return 0;
	/* A node whose lease may have run out writes nothing (owner.c). */
	if (!db_lease_held(fs->db))
		return -EAGAIN;
	b.st = calloc(n, sizeof(*b.st));
	b.h = calloc(n, sizeof(*b.h));
	b.pc = calloc(n, sizeof(*b.pc));
	b.wave = calloc(n, sizeof(*b.wave));
	b.dels = calloc(n, sizeof(*b.dels));
	if (!b.st || !b.h || !b.pc || !b.wave || !b.dels) {
		first = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		b.st[i] = PEND_TODO;
		b.h[i][0] = sync_key_hash(p[i].src);
		b.h[i][1] =
			p[i].op == FS_PEND_COPY ? sync_key_hash(p[i].dst) : 0;
		b.pc[i] = (struct pend_commit){ .fs = fs, .p = &p[i] };
		if (!pend_runnable(fs, &p[i]) || foreign_before(f, &p[i]))
			b.st[i] = PEND_FENCED;
		b.queues |=
			fs_pending_node(p[i].seq) != fs_pending_node(p[0].seq);
	}
	uint64_t t0 = fs_now_ms();

	while (fs_now_ms() - t0 < PEND_PASS_MS && pend_wave(&b)) {
		fs_each_parallel(b.nwave, par, pend_copy_one, &b);
		pend_dels(&b, par);
		pend_commit_wave(&b);
	}
	for (size_t i = 0; i < n; i++) {
		const char *what = p[i].op == FS_PEND_DEL ? "delete" : "copy";
		int rc = b.st[i];

		if (rc == 0) {
			ran[i] = true;
			*progress = true;
			nran++;
			fs_fail_clear(fs, p[i].src);
			continue;
		}
		if (rc == PEND_TODO || rc == PEND_FENCED)
			continue; /* behind one that failed; not ours now */
		log_debug("fs: store %s %s: %s", what, p[i].src, strerror(-rc));
		if (!fs_err_transient(rc))
			fs_fail_note(fs, what, p[i].src, rc);
		if (!first)
			first = rc;
	}
	fs_pending_ran(fs, nran);
	metrics_add(MET_PENDING_DONE, nran);
out:
	free(b.st);
	free(b.h);
	free(b.pc);
	free(b.wave);
	free(b.dels);
	return first;
}
