/*
 * db/writer_cluster.c - the writer's work in a cluster (writer.c runs the
 * thread and the groups alone).
 *
 * In a cluster a group's changes of shared records must be committed in
 * PostgreSQL first, and waiting for that round trip with the group's
 * transaction open would keep every other change waiting.  So the writer
 * runs the group, learns from each change's transaction (the engine's
 * observer) which keys it touched and what it wrote, and aborts it.  The
 * changes fall into independent sets (two changes that share a key one of
 * them writes are in one set): a set without a shared write is written
 * again at once; each set with one becomes a cluster commit, sent to one
 * of the replica's committers, several in flight at once.  Until its
 * answer its keys are locked: a later change that writes a key it touched,
 * or touches a key it wrote, waits for it (so nothing here builds on a
 * change the cluster may still refuse), and so does a batch of the
 * follower's.  Once the cluster took it, its writes are made here again,
 * exactly as the change made them, in the next local transaction (one
 * fsync for every answer of that moment), with the commit's version; the
 * next group runs on top of them in that transaction and its commits
 * leave before it flushes (writer_cluster_run).  A
 * commit that met a newer record runs again once the follower applied what
 * made it stale; one the cluster did not take answers -EAGAIN for the
 * changes that wrote shared records, and the others run again.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "writer_priv.h"

/* Runs of a change that keep meeting newer records before -EAGAIN. */
#define DB_STALE_MAX 8

static uint64_t key_hash(unsigned tbl, const void *key, size_t klen)
{
	const unsigned char *p = key;
	uint64_t h = 14695981039346656037ull ^ tbl;

	for (size_t i = 0; i < klen; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h ? h : 1; /* 0 marks an empty slot */
}

/* n bytes of p appended to arena b: their offset, (size_t)-1 if b could
 * not grow (it stays so: common/bytebuf.h). */
static size_t arena_put(struct bytebuf *b, const void *p, size_t n)
{
	size_t off = b->len;

	if (n)
		bytebuf_add(b, p, n);
	return b->bad ? (size_t)-1 : off;
}

/* Room for one more element of size sz in *v (n used, *cap). */
static int grow(void *v, size_t n, size_t *cap, size_t sz)
{
	void **pv = v;

	if (n < *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 256;
	void *q = realloc(*pv, nc * sz);

	if (!q)
		return -ENOMEM;
	*pv = q;
	*cap = nc;
	return 0;
}

/* key, and val unless NULL, into g's arena at *koff and *voff; -ENOMEM. */
static int kv_put(struct group *g, const struct db_val *key,
		  const struct db_val *val, size_t *koff, size_t *voff)
{
	*koff = arena_put(&g->a, key->data, key->size);
	if (*koff == (size_t)-1)
		return -ENOMEM;
	if (val &&
	    (*voff = arena_put(&g->a, val->data, val->size)) == (size_t)-1)
		return -ENOMEM;
	return 0;
}

/* ---- what a change touches: the observer ----------------------------- */

static void fp_add(struct group *g, unsigned tbl, const struct db_val *key,
		   bool w)
{
	if (grow(&g->fp, g->nfp, &g->capfp, sizeof(*g->fp))) {
		g->oom = -ENOMEM;
		return;
	}
	g->fp[g->nfp++] =
		(struct fpk){ key_hash(tbl, key->data, key->size), w };
}

static int rec_add(struct group *g, unsigned tbl, const struct db_val *key,
		   const struct db_val *val, bool write, uint64_t ver)
{
	struct rec *r;
	size_t koff, voff = 0;

	if (grow(&g->recs, g->nrecs, &g->caprecs, sizeof(*g->recs)))
		return -ENOMEM;
	if (kv_put(g, key, val, &koff, &voff))
		return -ENOMEM;
	r = &g->recs[g->nrecs++];
	*r = (struct rec){ .tbl = tbl,
			   .write = write,
			   .del = write && !val,
			   .ver = ver,
			   .koff = koff,
			   .klen = key->size,
			   .voff = voff,
			   .vlen = val ? val->size : 0 };
	return 0;
}

static int obs_read(void *ctx, struct db_txn *txn, unsigned tbl,
		    const struct db_val *key)
{
	struct db_writer *w = ctx;
	struct group *g = &w->g;

	fp_add(g, tbl, key, false);
	if (!w->db->tables[tbl].shared)
		return g->oom;
	/* What a change decided on is checked at its commit. */
	return rec_add(g, tbl, key, NULL, false,
		       db_replica_ver(w->rep, txn, tbl, key));
}

static int obs_write(void *ctx, struct db_txn *txn, unsigned tbl,
		     const struct db_val *key, const struct db_val *val,
		     unsigned flags)
{
	struct db_writer *w = ctx;
	struct group *g = &w->g;
	struct capw *c;
	size_t koff, voff = 0;

	fp_add(g, tbl, key, true);
	if (w->db->tables[tbl].shared) {
		struct db_val sv;
		bool changes;
		int rc = db_replica_change(w->rep, txn, tbl, key, val, g->vbuf,
					   &sv, &changes);

		if (rc)
			return rc;
		if (changes) {
			/* The version it replaces is checked with it. */
			rc = rec_add(g, tbl, key, NULL, false,
				     db_replica_ver(w->rep, txn, tbl, key));
			if (!rc)
				rc = rec_add(g, tbl, key, val ? &sv : NULL,
					     true, 0);
			if (rc)
				return rc;
			g->cur->shared = true;
		}
	}
	if (grow(&g->caps, g->ncaps, &g->capcaps, sizeof(*g->caps)))
		return -ENOMEM;
	if (kv_put(g, key, val, &koff, &voff))
		return -ENOMEM;
	c = &g->caps[g->ncaps++];
	(void)flags;
	*c = (struct capw){ .tbl = tbl,
			    .del = !val,
			    .koff = koff,
			    .klen = key->size,
			    .voff = voff,
			    .vlen = val ? val->size : 0 };
	return g->oom;
}

/* ---- the keys of the commits in flight --------------------------------- */

static struct fpk *lock_slot(struct fpk *t, size_t cap, uint64_t h)
{
	size_t i = h & (cap - 1);

	while (t[i].h && t[i].h != h)
		i = (i + 1) & (cap - 1);
	return &t[i];
}

/* b holds the keys of its changes (a written key as written). */
static int locks_build(struct wbatch *b, const struct group *g)
{
	size_t n = 0, cap = 16;

	for (struct db_op *op = b->ops; op; op = op->next)
		n += op->fp1 - op->fp0;
	while (cap < n * 2 + 2)
		cap *= 2;
	b->locks = calloc(cap, sizeof(*b->locks));
	if (!b->locks)
		return -ENOMEM;
	b->lcap = cap;
	for (struct db_op *op = b->ops; op; op = op->next)
		for (size_t i = op->fp0; i < op->fp1; i++) {
			struct fpk *s = lock_slot(b->locks, cap, g->fp[i].h);

			s->h = g->fp[i].h;
			s->w |= g->fp[i].w;
		}
	return 0;
}

/* Whether touching key h (w: writing it) must wait for a commit in
 * flight: it wrote h, or touched h and this writes it. */
static bool locked(const struct db_writer *w, uint64_t h, bool wr)
{
	for (struct wbatch *b = w->inflight; b; b = b->in_flight) {
		const struct fpk *s = lock_slot(b->locks, b->lcap, h);

		if (s->h && (s->w || wr))
			return true;
	}
	return false;
}

static bool op_locked(const struct db_writer *w, const struct db_op *op)
{
	for (size_t i = op->fp0; i < op->fp1; i++)
		if (locked(w, w->g.fp[i].h, w->g.fp[i].w))
			return true;
	return false;
}

static void batch_free(struct wbatch *b)
{
	free(b->caps);
	free(b->a.p);
	free(b->locks);
	db_track_free(&b->c.track);
	db_snap_free(&b->c.stale);
	free(b);
}

/* ---- a group, in a cluster ------------------------------------------------- */

/*
 * Run op in a nested txn of parent, watched.  Returns 0 with op kept in
 * parent (its records in g), 1 when a commit in flight holds a key it
 * touched (undone: it waits), or 0 with op->err set (failed, undone).
 */
static int op_run(struct db_writer *w, struct db_txn *parent, struct db_op *op)
{
	struct group *g = &w->g;
	struct db_txn child;
	bool waits = false;

	g->cur = op;
	op->shared = false;
	op->fp0 = g->nfp;
	op->rec0 = g->nrecs;
	op->cap0 = g->ncaps;
	g->oom = 0;
	op->err = db_txn_begin(w->db, parent, &w->obs, &child);
	if (!op->err) {
		op->err = op->apply ? op->apply(&child, op->arg) : 0;
		if (!op->err && g->oom)
			op->err = g->oom;
	}
	op->fp1 = g->nfp;
	if (!op->err)
		waits = op_locked(w, op);
	if (!op->err && !waits)
		op->err = db_txn_commit(&child);
	else if (child.mdb)
		db_txn_abort(&child);
	if (op->err || waits) {
		g->nfp = op->fp0;
		g->nrecs = op->rec0;
		g->ncaps = op->cap0;
		op->fp1 = op->fp0;
		op->shared = false;
		return waits ? 1 : 0;
	}
	op->rec1 = g->nrecs;
	op->cap1 = g->ncaps;
	return 0;
}

static size_t uf_find(struct group *g, size_t i)
{
	while (g->ops[i]->uf != i) {
		g->ops[i]->uf = g->ops[g->ops[i]->uf]->uf;
		i = g->ops[i]->uf;
	}
	return i;
}

static void uf_union(struct group *g, size_t a, size_t b)
{
	a = uf_find(g, a);
	b = uf_find(g, b);
	if (a != b)
		g->ops[a > b ? a : b]->uf = a < b ? a : b;
}

/* Changes that share a key one of them writes are one set: union them.
 * ops[i] for the changes that ran (kept). */
static int sets_find(struct group *g)
{
	struct slot {
		uint64_t h;
		size_t first;
		bool w;
	} * t;
	size_t cap = 16;

	for (size_t i = 0; i < g->n; i++)
		g->ops[i]->uf = i;
	while (cap < g->nfp * 2 + 2)
		cap *= 2;
	t = calloc(cap, sizeof(*t));
	if (!t)
		return -ENOMEM;
	/* Which keys some change writes. */
	for (size_t i = 0; i < g->n; i++)
		for (size_t k = g->ops[i]->fp0; k < g->ops[i]->fp1; k++) {
			size_t j = g->fp[k].h & (cap - 1);

			while (t[j].h && t[j].h != g->fp[k].h)
				j = (j + 1) & (cap - 1);
			if (!t[j].h) {
				t[j].h = g->fp[k].h;
				t[j].first = i;
			}
			t[j].w |= g->fp[k].w;
		}
	/* Every change that touched a written key joins its first one. */
	for (size_t i = 0; i < g->n; i++)
		for (size_t k = g->ops[i]->fp0; k < g->ops[i]->fp1; k++) {
			size_t j = g->fp[k].h & (cap - 1);

			while (t[j].h != g->fp[k].h)
				j = (j + 1) & (cap - 1);
			if (t[j].w)
				uf_union(g, i, t[j].first);
		}
	free(t);
	return 0;
}

/* Move op's writes (and for a shared set, its records) into b. */
static int batch_take(struct wbatch *b, const struct group *g, struct db_op *op)
{
	for (size_t i = op->cap0; i < op->cap1; i++) {
		const struct capw *c = &g->caps[i];
		struct capw *n;

		n = realloc(b->caps, (b->ncaps + 1) * sizeof(*n));
		if (!n)
			return -ENOMEM;
		b->caps = n;
		n = &b->caps[b->ncaps];
		*n = *c;
		n->koff = arena_put(&b->a, g->a.p + c->koff, c->klen);
		n->voff = arena_put(&b->a, g->a.p + c->voff, c->vlen);
		if (n->koff == (size_t)-1 || n->voff == (size_t)-1)
			return -ENOMEM;
		b->ncaps++;
	}
	if (!b->shared)
		return 0;
	for (size_t i = op->rec0; i < op->rec1; i++) {
		const struct rec *r = &g->recs[i];
		struct db_val k = { r->klen, g->a.p + r->koff },
			      v = { r->vlen, g->a.p + r->voff };
		int rc = r->write ? db_track_write(&b->c.track, r->tbl, &k,
						   r->del ? NULL : &v)
				  : db_track_read(&b->c.track, r->tbl, &k,
						  r->ver);

		if (rc)
			return rc;
	}
	return 0;
}

static void commit_answered(void *ctx, struct db_commit *c);

/* Send b to the cluster: its keys are locked until the answer. */
static void batch_send(struct db_writer *w, struct wbatch *b)
{
	b->in_flight = w->inflight;
	w->inflight = b;
	w->ninflight++;
	b->c.done = commit_answered;
	b->c.ctx = b;
	b->sent_ns = metrics_now_ns();
	db_replica_commit(w->rep, &b->c);
}

static struct wbatch *batch_new(struct db_writer *w, bool shared)
{
	struct wbatch *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->w = w;
	b->shared = shared;
	db_track_init(&b->c.track);
	return b;
}

/* Most commits one group makes (more sets share them). */
#define DB_SETS_MAX 16

/*
 * The group's sets: each with a shared write a cluster commit (one per
 * committer free, sets beyond that sharing one), the others written here
 * at once.  rc: how finding the sets went.
 */
static void batches_send(struct db_writer *w, int rc)
{
	struct group *g = &w->g;
	struct wbatch *bs[DB_SETS_MAX + 1] = { 0 }; /* [0]: written at once */
	struct db_op **tails[DB_SETS_MAX + 1];
	unsigned k = db_replica_committers(w->rep), next = 0;
	size_t *slot = calloc(g->n ? g->n : 1, sizeof(*slot));
	bool *shared = calloc(g->n ? g->n : 1, sizeof(*shared));

	k = k > w->ninflight ? k - w->ninflight : 1;
	if (k > DB_SETS_MAX)
		k = DB_SETS_MAX;
	if (!rc && (!slot || !shared))
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < g->n; i++)
		shared[uf_find(g, i)] |= g->ops[i]->shared;
	for (size_t i = 0; !rc && i < g->n; i++)
		if (uf_find(g, i) == i)
			slot[i] = shared[i] ? 1 + (next++ % k) : 0;
	for (size_t i = 0; i < g->n; i++) {
		struct db_op *op = g->ops[i];
		size_t s = rc ? 0 : slot[uf_find(g, i)];

		if (!rc && !bs[s]) {
			bs[s] = batch_new(w, s != 0);
			if (bs[s])
				tails[s] = &bs[s]->ops;
			else
				rc = -ENOMEM;
		}
		if (rc) {
			op_done(op, rc);
			continue;
		}
		op->next = NULL;
		*tails[s] = op;
		tails[s] = &op->next;
		rc = batch_take(bs[s], g, op);
	}
	for (unsigned i = 0; i <= k; i++) {
		struct wbatch *b = bs[i];

		if (!b)
			continue;
		if (!rc && b->shared)
			rc = db_track_final(&b->c.track);
		if (!rc && b->shared)
			rc = locks_build(b, g);
		if (rc) {
			ops_done(b->ops, rc);
			b->ops = NULL;
			batch_free(b);
		} else if (b->shared) {
			batch_send(w, b);
		} else {
			*w->ready_tail = b;
			w->ready_tail = &b->next;
			w->again = true;
		}
	}
	free(slot);
	free(shared);
}

/*
 * Run a group in a child of p (the step's local transaction, holding the
 * answers written there first), learn its sets and send them.  A group
 * without a shared write is committed into p: its changes go to *local,
 * answered once p is durable.
 */
static void group_run(struct db_writer *w, struct db_txn *p, struct db_op *ops,
		      struct db_op **local)
{
	struct group *g = &w->g;
	struct db_op *failed = NULL, **ft = &failed;
	struct db_txn txn;
	bool shared = false;
	int rc;

	g->n = g->nfp = g->nrecs = g->ncaps = 0;
	g->a.len = 0;
	g->a.bad = false;
	if (g->vcap < db_replica_val_max(w->rep)) {
		unsigned char *v = realloc(g->vbuf, db_replica_val_max(w->rep));

		if (!v) {
			ops_done(ops, -ENOMEM);
			return;
		}
		g->vbuf = v;
		g->vcap = db_replica_val_max(w->rep);
	}
	rc = db_txn_begin(w->db, p, NULL, &txn);
	if (rc) {
		ops_done(ops, rc);
		return;
	}
	while (ops) {
		struct db_op *op = ops;

		ops = op->next;
		op->next = NULL;
		switch (op_run(w, &txn, op)) {
		case 1: /* a commit in flight holds its keys */
			*w->deferred_tail = op;
			w->deferred_tail = &op->next;
			break;
		default:
			if (op->err) {
				*ft = op;
				ft = &op->next;
				break;
			}
			if (grow(&g->ops, g->n, &g->cap, sizeof(*g->ops))) {
				op->err = -ENOMEM;
				*ft = op;
				ft = &op->next;
				break;
			}
			g->ops[g->n++] = op;
			shared |= op->shared;
		}
	}
	if (!shared) {
		/* Nothing for the cluster: p's commit is this group's. */
		rc = db_txn_commit(&txn);
		for (size_t i = 0; i < g->n; i++) {
			struct db_op *op = g->ops[i];

			if (rc)
				op->err = rc;
			op->next = NULL;
			*local = op;
			local = &op->next;
		}
		ops_done(failed, 0);
		return;
	}
	db_txn_abort(&txn);
	ops_done(failed, 0);
	batches_send(w, sets_find(g));
}

/* ---- answers and the local commit ---------------------------------------- */

static void commit_answered(void *ctx, struct db_commit *c)
{
	struct wbatch *b = ctx;
	struct db_writer *w = b->w;

	(void)c;
	pthread_mutex_lock(&w->lock);
	b->next = w->answered;
	w->answered = b;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
}

static void inflight_remove(struct db_writer *w, struct wbatch *b)
{
	for (struct wbatch **p = &w->inflight; *p; p = &(*p)->in_flight)
		if (*p == b) {
			*p = b->in_flight;
			w->ninflight--;
			return;
		}
}

/* A commit's answer: written here next, run again later, or failed. */
static void answer(struct db_writer *w, struct wbatch *b)
{
	struct db_op *ops = b->ops, *again = NULL, **at = &again;

	inflight_remove(w, b);
	log_debug("db: a commit of %zu records: %d (seq %" PRIu64
		  ") in %" PRIu64 " us",
		  b->c.track.nwrites, b->c.rc, b->c.seq,
		  (metrics_now_ns() - b->sent_ns) / 1000);
	metrics_add(MET_CLUSTER_COMMIT_US,
		    (metrics_now_ns() - b->sent_ns) / 1000);
	b->next = NULL;
	if (!b->c.rc) {
		metrics_inc(MET_CLUSTER_COMMITS);
		*w->ready_tail = b;
		w->ready_tail = &b->next;
		return;
	}
	b->ops = NULL;
	if (b->c.rc == -ESTALE) {
		/* Met a newer record: again once the follower has it. */
		struct swait *s = calloc(1, sizeof(*s));

		metrics_inc(MET_CLUSTER_STALE);
		while (ops) {
			struct db_op *op = ops;

			ops = op->next;
			op->next = NULL;
			if (++op->stale > DB_STALE_MAX) {
				op_done(op, -EAGAIN);
			} else {
				*at = op;
				at = &op->next;
			}
		}
		if (s && again) {
			s->snap = b->c.stale;
			b->c.stale = (struct db_snap){ 0 };
			s->ops = again;
			s->next = w->swaits;
			w->swaits = s;
		} else {
			free(s);
			requeue(w, again);
		}
		batch_free(b);
		return;
	}
	/* Not taken: what wrote shared records fails; the rest runs again. */
	while (ops) {
		struct db_op *op = ops;

		ops = op->next;
		op->next = NULL;
		if (op->shared) {
			op_done(op, b->c.rc);
		} else {
			*at = op;
			at = &op->next;
		}
	}
	requeue(w, again);
	batch_free(b);
}

/* Whether a batch of the follower's touches a key a commit in flight
 * holds. */
struct rkey {
	const struct db_writer *w;
	bool hit;
};

static void rkey_check(void *ctx, unsigned tbl, const void *key, size_t klen)
{
	struct rkey *r = ctx;

	if (!r->hit && locked(r->w, key_hash(tbl, key, klen), true))
		r->hit = true;
}

/*
 * Write into txn what is ready: the sets written at once, the commits the
 * cluster took (their writes made again, with the commit's version), and
 * the follower's batches no commit in flight holds a key of (in their
 * order).  They are taken off the writer into *readyp and *remotep, to be
 * answered by local_done() once txn commits, whatever rc says (txn NULL:
 * only taken, to be answered with an error).
 */
static int local_write(struct db_writer *w, struct db_txn *txn,
		       struct wbatch **readyp, struct db_remote_batch **remotep)
{
	struct wbatch *ready = w->ready;
	struct db_remote_batch *remote = NULL, **rt = &remote;
	int rc = 0;

	while (w->remote) {
		struct rkey r = { w, false };

		db_replica_batch_keys(w->remote, rkey_check, &r);
		if (r.hit) {
			log_debug("db: a batch of the follower's waits for a "
				  "commit in flight");
			break; /* it and every later one wait */
		}
		struct db_remote_batch *b = w->remote;

		w->remote = b->next;
		b->next = NULL;
		*rt = b;
		rt = &b->next;
	}
	if (!w->remote)
		w->remote_tail = &w->remote;
	w->ready = NULL;
	w->ready_tail = &w->ready;
	*readyp = ready;
	*remotep = remote;
	if (!txn)
		return 0;
	for (struct wbatch *b = ready; !rc && b; b = b->next) {
		for (size_t i = 0; !rc && i < b->ncaps; i++) {
			const struct capw *c = &b->caps[i];
			struct db_val k = { c->klen, b->a.p + c->koff },
				      v = { c->vlen, b->a.p + c->voff };

			rc = c->del ? db_raw_del(txn, c->tbl, &k)
				    : db_raw_put(txn, c->tbl, &k, &v, 0);
			if (rc == -ENOENT) /* gone already: as asked */
				rc = 0;
		}
		if (!rc && b->shared)
			rc = db_replica_committed(w->rep, txn, &b->c.track,
						  b->c.seq);
	}
	for (struct db_remote_batch *b = remote; !rc && b; b = b->next)
		rc = db_replica_apply(w->rep, txn, b);
	return rc;
}

/* What local_write() took, answered with its transaction's result rc. */
static void local_done(struct db_writer *w, int rc, struct wbatch *ready,
		       struct db_remote_batch *remote)
{
	while (ready) {
		struct wbatch *b = ready;

		ready = b->next;
		ops_done(b->ops, rc);
		b->ops = NULL;
		batch_free(b);
	}
	while (remote) {
		struct db_remote_batch *b = remote;

		remote = b->next;
		b->next = NULL;
		db_replica_applied(w->rep, b, rc);
	}
}

/* Changes that waited for the follower: go once it passed their mark. */
static void swaits_check(struct db_writer *w)
{
	for (struct swait **p = &w->swaits; *p;) {
		struct swait *s = *p;

		if (w->rep && !db_replica_covers(w->rep, &s->snap)) {
			p = &s->next;
			continue;
		}
		*p = s->next;
		requeue(w, s->ops);
		db_snap_free(&s->snap);
		free(s);
	}
}

/* See writer_priv.h. */
void writer_cluster_step(struct db_writer *w, struct wbatch *answered,
			 bool poked)
{
	bool freed = answered != NULL;

	while (answered) {
		struct wbatch *b = answered;

		answered = b->next;
		answer(w, b);
	}
	if (poked && w->rep) {
		struct db_remote_batch *b;

		while ((b = db_replica_take(w->rep))) {
			*w->remote_tail = b;
			w->remote_tail = &b->next;
		}
	}
	/* Their keys are free: what waited for them runs in this step. */
	if (freed)
		undefer(w);
}

/*
 * See writer_priv.h.  The order is what lets the cluster's commits follow
 * each other without waiting for this disk: the answers are written into
 * p first, the group runs on top of them and its commits leave for
 * PostgreSQL (which holds what they build on already), and only then
 * does p flush, while they are in flight.  Nothing is answered before p
 * is durable.
 */
void writer_cluster_run(struct db_writer *w, struct db_op *ops)
{
	struct wbatch *ready = NULL;
	struct db_remote_batch *remote = NULL;
	struct db_op *local = NULL;
	struct db_txn p;
	size_t answers = 0;
	int rc = db_txn_begin(w->db, NULL, NULL, &p);
	int wrc = local_write(w, rc ? NULL : &p, &ready, &remote);

	if (rc || wrc) {
		if (!rc) {
			db_txn_abort(&p);
			rc = wrc;
		}
		if (ready || remote)
			log_error("db: writing committed changes failed (%d): "
				  "they answer an error",
				  rc);
		local_done(w, rc, ready, remote);
		ready = NULL;
		remote = NULL;
		/* The group is not theirs: it runs in a transaction of its
		 * own if one begins. */
		if (wrc)
			rc = db_txn_begin(w->db, NULL, NULL, &p);
		if (rc) {
			ops_done(ops, rc);
			goto out;
		}
	}
	if (ops)
		group_run(w, &p, ops, &local);
	if (ready || remote || local) {
		rc = db_txn_commit(&p); /* syncs */
		metrics_inc(MET_DB_COMMITS);
		if (rc)
			log_error("db: a local commit failed (%d): its changes "
				  "answer an error",
				  rc);
	} else {
		db_txn_abort(&p);
	}
	/* The linger waits for what the cluster's answers call out:
	 * arrivals from now on. */
	for (struct wbatch *b = ready; b; b = b->next)
		for (struct db_op *op = b->ops; op; op = op->next)
			answers += !op->background;
	if (answers)
		expect_from_now(w, answers);
	local_done(w, rc, ready, remote);
	ops_done(local, rc);
out:
	swaits_check(w);
}

/* Leave the cluster once nothing is in flight: the follower's batches
 * and waits are dropped (they run again, alone). */
void writer_cluster_detach(struct db_writer *w)
{
	while (w->remote) {
		struct db_remote_batch *b = w->remote;

		w->remote = b->next;
		b->next = NULL;
		db_replica_applied(w->rep, b, -ECANCELED);
	}
	w->remote_tail = &w->remote;
	while (w->swaits) {
		struct swait *s = w->swaits;

		w->swaits = s->next;
		requeue(w, s->ops);
		db_snap_free(&s->snap);
		free(s);
	}
	undefer(w);
}

/* See writer_priv.h. */
void writer_cluster_init(struct db_writer *w)
{
	w->obs = (struct db_obs){ obs_read, obs_write, w };
	w->ready_tail = &w->ready;
	w->deferred_tail = &w->deferred;
	w->remote_tail = &w->remote;
}

/* See writer_priv.h. */
void writer_cluster_fini(struct db_writer *w)
{
	struct group *g = &w->g;

	free(g->ops);
	free(g->fp);
	free(g->recs);
	free(g->caps);
	free(g->a.p);
	free(g->vbuf);
}
