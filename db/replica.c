/*
 * db/replica.c - a node's local replica of the cluster's records: their
 * versions ("_vers"), what a change read and wrote of them, the
 * committers that send changes to PostgreSQL, and the follower that
 * brings the other nodes' commits in (replica_int.h).
 *
 * Each shared record's version sits beside it in "_vers": the number of
 * the commit that last wrote it.  A change's reads carry the versions
 * they saw and its writes the versions they replace; PostgreSQL checks
 * them all.  A deleted record keeps its version there (a tombstone, so
 * that an older copy of it read again is skipped), listed in "_tombs" by
 * version until no log entry older than it is left to read.  The
 * follower's position, the cluster this replica is of and this node's
 * instance are texts in "_meta".
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "lmdb_int.h"
#include "metrics/metrics.h"
#include "replica_int.h"

#define COMMITTERS 4          /* commits of this node in flight at once */
#define FOLLOW_POLL_MS 1000   /* the log is read at least this often */
#define RETRY_MS 1000         /* after a failed read of the log */
#define FOLLOW_GATHER_US 2000 /* a read of the log waits for more commits */
#define TOMBS_EVERY_MS 60000  /* tombstones past the log dropped this often */
#define TOMBS_BATCH 4096      /* ... at most this many per transaction */

/* A change another node made, kept for its table's changed() hook. */
struct db_seen {
	unsigned tbl;
	struct db_val key, before, after; /* malloc'd; data NULL: none */
};

struct db_replica {
	struct db *db;
	struct db_pg *pg;
	unsigned vers, meta, tombs; /* "_vers", "_meta", "_tombs" */
	const char *tnames[DB_TABLES_MAX];
	size_t vmax; /* the largest value a shared table's hooks make */

	void (*wake)(void *ctx);
	void *wake_ctx;
	/* When the log was last read to its end and applied (monotonic ms;
	 * the follower's, read by the metrics). */
	_Atomic uint64_t followed_ms;

	/* The committers and their queue. */
	pthread_mutex_t cq_lock;
	pthread_cond_t cq_wake;
	struct db_commit *cq_head, **cq_tail;
	bool cq_stop;
	unsigned ncommitters;
	pthread_t committers[COMMITTERS];
	struct db_pg_conn *conns[COMMITTERS];
	atomic_uint_fast64_t token_next;

	/* The follower: its batches for the writer, its position. */
	pthread_t follower;
	bool follower_started;
	int stop_pipe[2];
	pthread_mutex_t f_lock;
	pthread_cond_t f_cond;
	struct db_remote_batch *rb_head, **rb_tail;
	bool f_stop;
	struct db_snap cursor; /* applied whole, under f_lock */
	char cursor_text[DB_SNAP_TEXT_MAX];
};

/* ---- versions and texts ------------------------------------------------ */

/* The "_vers" key of (tbl, key): the table's name, a NUL, the key. */
static size_t vers_key(const struct db_replica *rep, unsigned tbl,
		       const struct db_val *key, unsigned char *buf, size_t cap)
{
	size_t nl = strlen(rep->db->tables[tbl].name) + 1;

	if (nl + key->size > cap)
		return 0;
	memcpy(buf, rep->db->tables[tbl].name, nl);
	memcpy(buf + nl, key->data, key->size);
	return nl + key->size;
}

/* The version of a shared record here; 0: none (absent, or never seen). */
static uint64_t vers_get(struct db_replica *rep, struct db_txn *txn,
			 unsigned tbl, const struct db_val *key)
{
	unsigned char kb[DB_TABLE_NAME_MAX + 512];
	struct db_val k = { vers_key(rep, tbl, key, kb, sizeof(kb)), kb }, v;
	uint64_t ver;

	if (!k.size || db_raw_get(txn, rep->vers, &k, &v) ||
	    v.size != sizeof(ver))
		return 0;
	memcpy(&ver, v.data, sizeof(ver));
	return ver;
}

static int vers_put(struct db_replica *rep, struct db_txn *txn, unsigned tbl,
		    const struct db_val *key, uint64_t ver)
{
	unsigned char kb[DB_TABLE_NAME_MAX + 512];
	struct db_val k = { vers_key(rep, tbl, key, kb, sizeof(kb)), kb };
	struct db_val v = { sizeof(ver), &ver };

	if (!k.size)
		return -ENAMETOOLONG;
	return db_raw_put(txn, rep->vers, &k, &v, 0);
}

/* The record (tbl, key) deleted by commit ver: its tombstone. */
static int tomb_put(struct db_replica *rep, struct db_txn *txn, unsigned tbl,
		    const struct db_val *key, uint64_t ver)
{
	unsigned char kb[8 + DB_TABLE_NAME_MAX + 512];
	struct db_val k = { vers_key(rep, tbl, key, kb + 8, sizeof(kb) - 8),
			    kb },
		      none = { 0, kb };
	int rc = vers_put(rep, txn, tbl, key, ver);

	if (rc || !k.size)
		return rc;
	for (int i = 0; i < 8; i++) /* big-endian: in version order */
		kb[i] = (unsigned char)(ver >> (56 - 8 * i));
	k.size += 8;
	return db_raw_put(txn, rep->tombs, &k, &none, 0);
}

static int vers_del(struct db_replica *rep, struct db_txn *txn, unsigned tbl,
		    const struct db_val *key)
{
	unsigned char kb[DB_TABLE_NAME_MAX + 512];
	struct db_val k = { vers_key(rep, tbl, key, kb, sizeof(kb)), kb };

	int rc = k.size ? db_raw_del(txn, rep->vers, &k) : 0;

	return rc == -ENOENT ? 0 : rc;
}

/* A text of _meta into buf ("" if none), in txn or a read snapshot. */
static int text_get(struct db *db, unsigned meta, const char *name, char *buf,
		    size_t cap)
{
	struct db_txn *t;
	struct db_val k = { strlen(name), (void *)name }, v;
	int rc = db_read_begin(db, &t);

	if (rc)
		return rc;
	buf[0] = '\0';
	rc = db_raw_get(t, meta, &k, &v);
	if (!rc && v.size < cap) {
		memcpy(buf, v.data, v.size);
		buf[v.size] = '\0';
	}
	db_read_end(db, t);
	return rc == -ENOENT ? 0 : rc;
}

static int text_put(struct db_txn *t, unsigned meta, const char *name,
		    const char *val)
{
	struct db_val k = { strlen(name), (void *)name },
		      v = { strlen(val), (void *)val };

	return db_raw_put(t, meta, &k, &v, 0);
}

/* One text in a transaction of its own (start-up, stop).  0 or -errno. */
static int text_write(struct db *db, unsigned meta, const char *name,
		      const char *val)
{
	struct db_txn t;
	int rc = db_txn_begin(db, NULL, NULL, &t);

	if (rc)
		return rc;
	rc = text_put(&t, meta, name, val);
	if (rc) {
		db_txn_abort(&t);
		return rc;
	}
	return db_txn_commit(&t);
}

/* The shared part of a local value (the whole of it without a hook). */
static int project(const struct db_tinfo *ti, const struct db_val *local,
		   unsigned char *buf, struct db_val *out)
{
	size_t len;
	int rc;

	if (!ti->ops.project) {
		*out = *local;
		return 0;
	}
	rc = ti->ops.project(local, buf, ti->ops.max, &len);
	*out = (struct db_val){ len, buf };
	return rc;
}

/* ---- tracking ------------------------------------------------------------ */

uint64_t db_replica_ver(struct db_replica *rep, struct db_txn *txn,
			unsigned tbl, const struct db_val *key)
{
	struct db_val v;

	/* A deleted record keeps its version here (so that an older copy
	 * of it is never applied again), but in the cluster it is absent:
	 * version 0. */
	if (db_raw_get(txn, tbl, key, &v) == -ENOENT)
		return 0;
	return vers_get(rep, txn, tbl, key);
}

size_t db_replica_val_max(const struct db_replica *rep)
{
	return rep->vmax;
}

int db_replica_change(struct db_replica *rep, struct db_txn *txn, unsigned tbl,
		      const struct db_val *key, const struct db_val *val,
		      unsigned char *buf, struct db_val *shared, bool *changes)
{
	struct db_tinfo *ti = &rep->db->tables[tbl];
	struct db_val old, sold;
	int rc = db_raw_get(txn, tbl, key, &old);
	bool had = !rc;

	*changes = false;
	if (rc && rc != -ENOENT)
		return rc;
	if (!val) {
		*changes = had;
		return 0;
	}
	if ((rc = project(ti, val, buf, shared)))
		return rc;
	/* A put that leaves the shared part as it was (only the node's own
	 * fields changed) is not the cluster's business. */
	if (had) {
		unsigned char *b1 =
			ti->ops.project ? malloc(ti->ops.max) : NULL;

		if (ti->ops.project && !b1)
			return -ENOMEM;
		rc = project(ti, &old, b1, &sold);
		*changes = rc || sold.size != shared->size ||
			   memcmp(sold.data, shared->data, shared->size);
		free(b1);
		return rc;
	}
	*changes = true;
	return 0;
}

/* ---- commits ------------------------------------------------------------- */

struct committer {
	struct db_replica *rep;
	struct db_pg_conn *conn;
};

static void *commit_loop(void *arg)
{
	struct committer *cm = arg;
	struct db_replica *rep = cm->rep;

	pthread_mutex_lock(&rep->cq_lock);
	for (;;) {
		while (!rep->cq_head && !rep->cq_stop)
			pthread_cond_wait(&rep->cq_wake, &rep->cq_lock);
		struct db_commit *c = rep->cq_head;

		if (!c)
			break; /* stopping and drained */
		rep->cq_head = c->next;
		if (!rep->cq_head)
			rep->cq_tail = &rep->cq_head;
		pthread_mutex_unlock(&rep->cq_lock);
		uint64_t token =
			(uint64_t)db_pg_instance_id(rep->pg) << 32 |
			(uint32_t)atomic_fetch_add(&rep->token_next, 1);

		c->rc = db_pg_commit(cm->conn, &c->track, rep->tnames, token,
				     &c->seq, &c->stale);
		c->done(c->ctx, c);
		pthread_mutex_lock(&rep->cq_lock);
	}
	pthread_mutex_unlock(&rep->cq_lock);
	free(cm);
	return NULL;
}

void db_replica_commit(struct db_replica *rep, struct db_commit *c)
{
	c->next = NULL;
	pthread_mutex_lock(&rep->cq_lock);
	*rep->cq_tail = c;
	rep->cq_tail = &c->next;
	pthread_cond_signal(&rep->cq_wake);
	pthread_mutex_unlock(&rep->cq_lock);
}

unsigned db_replica_committers(const struct db_replica *rep)
{
	return rep->ncommitters;
}

int db_replica_committed(struct db_replica *rep, struct db_txn *txn,
			 const struct db_track *t, uint64_t seq)
{
	int rc = 0;

	/* A delete too: its version stays, as another node's would. */
	for (size_t i = 0; !rc && i < t->nwrites; i++) {
		const struct db_rec *r = &t->writes[i];
		struct db_val k = { r->klen, (void *)db_rec_key(t, r) };

		rc = r->del ? tomb_put(rep, txn, r->tbl, &k, seq)
			    : vers_put(rep, txn, r->tbl, &k, seq);
	}
	/* The follower's numbers cover this node's own commits too. */
	pthread_mutex_lock(&rep->f_lock);
	if (seq > rep->cursor.seq)
		rep->cursor.seq = seq;
	pthread_mutex_unlock(&rep->f_lock);
	return rc;
}

bool db_replica_covers(struct db_replica *rep, const struct db_snap *s)
{
	bool yes;

	pthread_mutex_lock(&rep->f_lock);
	yes = db_snap_covers(&rep->cursor, s);
	pthread_mutex_unlock(&rep->f_lock);
	return yes;
}

/* ---- applying other nodes' commits --------------------------------------- */

static int dup_val(struct db_val *out, const void *p, size_t n)
{
	out->size = n;
	out->data = NULL;
	if (!p)
		return 0;
	out->data = malloc(n ? n : 1);
	if (!out->data)
		return -ENOMEM;
	memcpy(out->data, p, n);
	return 0;
}

static void seen_free(struct db_remote_batch *b)
{
	for (size_t i = 0; i < b->nseen; i++) {
		free(b->seen[i].key.data);
		free(b->seen[i].before.data);
		free(b->seen[i].after.data);
	}
	free(b->seen);
	b->seen = NULL;
	b->nseen = 0;
}

/* One record into the replica (if newer), remembered for changed(). */
static int remote_one(struct db_replica *rep, struct db_txn *txn,
		      struct db_remote_batch *b, const struct db_remote *r,
		      bool replace, unsigned char *buf)
{
	struct db_tinfo *ti = &rep->db->tables[r->tbl];
	struct db_val key = { r->klen, (void *)r->key }, old, nv;
	struct db_seen *s = &b->seen[b->nseen];
	bool had;
	int rc;

	if (!replace && r->ver && r->ver <= vers_get(rep, txn, r->tbl, &key))
		return 0; /* this node has it already (or newer) */
	rc = db_raw_get(txn, r->tbl, &key, &old);
	if (rc && rc != -ENOENT)
		return rc;
	had = !rc;
	if (r->val) {
		struct db_val sv = { r->vlen, (void *)r->val };

		if (ti->ops.merge) {
			size_t len;

			rc = ti->ops.merge(&sv, had ? &old : NULL, buf,
					   ti->ops.max, &len);
			if (rc)
				return rc;
			nv = (struct db_val){ len, buf };
		} else {
			nv = sv;
		}
	}
	if (ti->ops.changed) {
		memset(s, 0, sizeof(*s));
		s->tbl = r->tbl;
		if ((rc = dup_val(&s->key, key.data, key.size)) ||
		    (rc = dup_val(&s->before, had ? old.data : NULL,
				  had ? old.size : 0)) ||
		    (rc = dup_val(&s->after, r->val ? nv.data : NULL,
				  r->val ? nv.size : 0))) {
			free(s->key.data);
			free(s->before.data);
			return rc;
		}
		b->nseen++;
	}
	if (r->val)
		rc = db_raw_put(txn, r->tbl, &key, &nv, 0);
	else if (had)
		rc = db_raw_del(txn, r->tbl, &key);
	if (rc)
		return rc;
	if (r->ver && !r->val)
		return tomb_put(rep, txn, r->tbl, &key, r->ver);
	if (r->ver)
		return vers_put(rep, txn, r->tbl, &key, r->ver);
	return vers_del(rep, txn, r->tbl, &key); /* absent in the cluster */
}

static size_t max_val(const struct db *db)
{
	size_t max = 0;

	for (int i = 0; i < DB_TABLES_MAX; i++)
		if (db->tables[i].ops.max > max)
			max = db->tables[i].ops.max;
	return max;
}

/* Apply recs[0..n) in txn; replace: empty the shared tables first. */
static int apply_recs(struct db_replica *rep, struct db_txn *txn,
		      struct db_remote_batch *b, bool replace)
{
	unsigned char *buf = malloc(max_val(rep->db) + 1);
	int rc = 0;

	seen_free(b);
	b->seen = calloc(b->n ? b->n : 1, sizeof(*b->seen));
	if (!buf || !b->seen) {
		free(buf);
		return -ENOMEM;
	}
	for (int i = 0; replace && !rc && i < DB_TABLES_MAX; i++)
		if (rep->db->tables[i].shared)
			rc = db_raw_drop(txn, (unsigned)i);
	if (replace && !rc)
		rc = db_raw_drop(txn, rep->vers);
	if (replace && !rc)
		rc = db_raw_drop(txn, rep->tombs);
	for (size_t i = 0; !rc && i < b->n; i++)
		rc = remote_one(rep, txn, b, &b->recs[i], replace, buf);
	free(buf);
	return rc;
}

int db_replica_apply(struct db_replica *rep, struct db_txn *txn,
		     struct db_remote_batch *b)
{
	char cur[DB_SNAP_TEXT_MAX];
	int rc = apply_recs(rep, txn, b, false);

	/* The follower's last whole position goes with what it applied. */
	pthread_mutex_lock(&rep->f_lock);
	snprintf(cur, sizeof(cur), "%s", rep->cursor_text);
	pthread_mutex_unlock(&rep->f_lock);
	if (!rc && cur[0])
		rc = text_put(txn, rep->meta, "cursor", cur);
	return rc;
}

/* The tables' hooks for what b changed (its txn is durable). */
static void seen_hooks(struct db_replica *rep, struct db_remote_batch *b)
{
	for (size_t i = 0; i < b->nseen; i++) {
		struct db_seen *s = &b->seen[i];
		struct db_tinfo *ti = &rep->db->tables[s->tbl];

		if (ti->ops.changed)
			ti->ops.changed(ti->ops.ctx, s->tbl, &s->key,
					s->before.data ? &s->before : NULL,
					s->after.data ? &s->after : NULL);
	}
	seen_free(b);
}

void db_replica_applied(struct db_replica *rep, struct db_remote_batch *b,
			int err)
{
	bool orphan;

	if (!err)
		seen_hooks(rep, b);
	seen_free(b);
	pthread_mutex_lock(&rep->f_lock);
	b->err = err;
	b->done = true;
	orphan = b->abandoned;
	pthread_cond_broadcast(&rep->f_cond);
	pthread_mutex_unlock(&rep->f_lock);
	if (orphan)
		free(b);
}

struct db_remote_batch *db_replica_take(struct db_replica *rep)
{
	struct db_remote_batch *b;

	pthread_mutex_lock(&rep->f_lock);
	b = rep->rb_head;
	if (b) {
		rep->rb_head = b->next;
		if (!rep->rb_head)
			rep->rb_tail = &rep->rb_head;
		b->next = NULL;
	}
	pthread_mutex_unlock(&rep->f_lock);
	return b;
}

void db_replica_batch_keys(const struct db_remote_batch *b,
			   void (*fn)(void *ctx, unsigned tbl, const void *key,
				      size_t klen),
			   void *ctx)
{
	for (size_t i = 0; i < b->n; i++)
		fn(ctx, b->recs[i].tbl, b->recs[i].key, b->recs[i].klen);
}

void db_replica_set_wake(struct db_replica *rep, void (*wake)(void *ctx),
			 void *ctx)
{
	rep->wake = wake;
	rep->wake_ctx = ctx;
}

/* ---- the follower ---------------------------------------------------------- */

/* The table a record of the cluster is of here; -1: not shared here. */
static int table_of(struct db_replica *rep, const char *name)
{
	for (int i = 0; i < DB_TABLES_MAX; i++)
		if (rep->tnames[i] && !strcmp(rep->tnames[i], name))
			return i;
	return -1;
}

/* A batch owning copies of recs (the tables this version shares). */
static struct db_remote_batch *batch_of(struct db_replica *rep,
					const struct db_remote *recs, size_t n)
{
	size_t bytes = 0, k = 0;
	struct db_remote_batch *b;
	unsigned char *p;

	for (size_t i = 0; i < n; i++)
		bytes += recs[i].klen + (recs[i].val ? recs[i].vlen : 0);
	b = calloc(1, sizeof(*b) + n * sizeof(*b->recs) + bytes + 1);
	if (!b)
		return NULL;
	b->recs = (struct db_remote *)(b + 1);
	p = (unsigned char *)(b->recs + n);
	for (size_t i = 0; i < n; i++) {
		int t = table_of(rep, recs[i].tname);

		if (t < 0)
			continue; /* a table this version does not share */
		b->recs[k] = recs[i];
		b->recs[k].tname = rep->tnames[t];
		b->recs[k].tbl = (unsigned)t;
		memcpy(p, recs[i].key, recs[i].klen);
		b->recs[k].key = p;
		p += recs[i].klen;
		if (recs[i].val) {
			memcpy(p, recs[i].val, recs[i].vlen);
			b->recs[k].val = p;
			p += recs[i].vlen;
		}
		k++;
	}
	b->n = k;
	return b;
}

/* Hand b to the writer and wait until it applied it: its error. */
static int hand_over(struct db_replica *rep, struct db_remote_batch *b)
{
	int rc;

	pthread_mutex_lock(&rep->f_lock);
	*rep->rb_tail = b;
	rep->rb_tail = &b->next;
	pthread_mutex_unlock(&rep->f_lock);
	if (rep->wake)
		rep->wake(rep->wake_ctx);
	pthread_mutex_lock(&rep->f_lock);
	while (!b->done && !rep->f_stop) {
		/* A commit of this node's may hold keys b writes for a
		 * while: the lease must not lapse meanwhile. */
		struct timespec ts;
		uint64_t xmin = rep->cursor.xmin;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 300 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (pthread_cond_timedwait(&rep->f_cond, &rep->f_lock, &ts) ==
		    ETIMEDOUT) {
			pthread_mutex_unlock(&rep->f_lock);
			db_pg_keep_lease(rep->pg, xmin);
			pthread_mutex_lock(&rep->f_lock);
		}
	}
	rc = b->done ? b->err : -ECANCELED;
	/* Left to whoever holds it: the writer (applied) or close. */
	b->abandoned = !b->done;
	pthread_mutex_unlock(&rep->f_lock);
	if (rc != -ECANCELED)
		free(b);
	return rc;
}

/* Apply b at once in a transaction of its own (start-up: nothing else
 * changes the tables yet). */
static int apply_now(struct db_replica *rep, struct db_remote_batch *b,
		     bool replace)
{
	struct db_txn t;
	int rc = db_txn_begin(rep->db, NULL, NULL, &t);

	if (rc)
		return rc;
	rc = apply_recs(rep, &t, b, replace);
	if (rc)
		db_txn_abort(&t);
	else
		rc = db_txn_commit(&t);
	if (!rc)
		seen_hooks(rep, b);
	seen_free(b);
	return rc;
}

struct follow_ctx {
	struct db_replica *rep;
	bool direct; /* start-up: apply here, not through the writer */
};

/* Each commit of recs (its records are adjacent, one version) applied
 * now, applied_ns after it was read: its lag into the histogram. */
static void lag_observe(const struct db_remote *recs, size_t n,
			uint64_t applied_ns)
{
	for (size_t i = 0; i < n; i++)
		if (!i || recs[i].ver != recs[i - 1].ver)
			metrics_observe(MET_H_CLUSTER_APPLY_LAG,
					recs[i].age_us * 1000 + applied_ns);
}

static int follow_page(void *ctx, const struct db_remote *recs, size_t n)
{
	struct follow_ctx *fc = ctx;
	struct db_remote_batch *b = batch_of(fc->rep, recs, n);
	int rc;

	if (!b)
		return -ENOMEM;
	if (!b->n) {
		free(b);
		return 0;
	}
	if (!fc->direct) {
		uint64_t t0 = metrics_now_ns();

		rc = hand_over(fc->rep, b);
		log_debug("cluster: applied %zu records of the log in %" PRIu64
			  " ms",
			  n, (metrics_now_ns() - t0) / 1000000);
		if (!rc)
			lag_observe(recs, n, metrics_now_ns() - t0);
		return rc;
	}
	rc = apply_now(fc->rep, b, false);
	free(b);
	return rc;
}

static int snapshot_page(void *ctx, const struct db_remote *recs, size_t n,
			 bool first, bool last)
{
	struct follow_ctx *fc = ctx;
	struct db_remote_batch *b = batch_of(fc->rep, recs, n);
	int rc;

	(void)last;
	if (!b)
		return -ENOMEM;
	rc = apply_now(fc->rep, b, first);
	free(b);
	return rc;
}

/* The position moves to `to`: applied whole.  Persisted with the next
 * batch applied (or at stop); a restart may read some commits again,
 * which the versions skip. */
static void cursor_set(struct db_replica *rep, struct db_snap *to)
{
	char text[DB_SNAP_TEXT_MAX];

	pthread_mutex_lock(&rep->f_lock);
	if (rep->cursor.seq > to->seq) /* this node's own commits */
		to->seq = rep->cursor.seq;
	if (db_snap_format(to, text, sizeof(text)))
		text[0] = '\0'; /* too long to keep: read again from older */
	db_snap_free(&rep->cursor);
	rep->cursor = *to;
	*to = (struct db_snap){ 0 };
	if (text[0])
		snprintf(rep->cursor_text, sizeof(rep->cursor_text), "%s",
			 text);
	pthread_mutex_unlock(&rep->f_lock);
	if (rep->wake)
		rep->wake(rep->wake_ctx);
}

/* Load every record whole (a new replica, or one behind the log). */
static int load_all(struct db_replica *rep)
{
	struct follow_ctx fc = { rep, true };
	struct db_snap at = { 0 };
	char text[DB_SNAP_TEXT_MAX];
	int rc = db_pg_snapshot(rep->pg, snapshot_page, &fc, &at);

	if (!rc)
		rc = db_snap_format(&at, text, sizeof(text));
	if (!rc)
		rc = text_write(rep->db, rep->meta, "cursor", text);
	if (!rc)
		rc = text_write(rep->db, rep->meta, "cluster",
				db_pg_cluster_id(rep->pg));
	if (!rc)
		cursor_set(rep, &at);
	db_snap_free(&at);
	return rc;
}

/* Read the log past the position and apply it.  0 or -errno. */
static int follow_once(struct db_replica *rep, bool direct)
{
	struct follow_ctx fc = { rep, direct };
	struct db_snap from = { 0 }, to = { 0 };
	bool behind = false;
	int rc;

	pthread_mutex_lock(&rep->f_lock);
	rc = db_snap_copy(&from, &rep->cursor);
	pthread_mutex_unlock(&rep->f_lock);
	if (!rc)
		rc = db_pg_follow(rep->pg, &from, follow_page, &fc, &to,
				  &behind);
	if (!rc && behind) {
		log_warn("cluster: this replica is behind the change log's "
			 "oldest entry: loading the namespace again");
		rc = direct ? load_all(rep) : -ESTALE;
	} else if (!rc) {
		cursor_set(rep, &to);
		atomic_store(&rep->followed_ms, metrics_now_ns() / 1000000);
	}
	db_snap_free(&from);
	db_snap_free(&to);
	return rc;
}

/* Tombstones of versions below `below`, collected by tombs_prune. */
struct tomb_walk {
	uint64_t below;
	size_t n;
	struct db_val keys[TOMBS_BATCH];
};

static int tomb_collect(void *ctx, const struct db_val *key,
			const struct db_val *val)
{
	struct tomb_walk *w = ctx;
	const unsigned char *k = key->data;
	uint64_t ver = 0;

	(void)val;
	if (key->size < 8 || w->n == TOMBS_BATCH)
		return 1;
	for (int i = 0; i < 8; i++)
		ver = ver << 8 | k[i];
	if (ver >= w->below)
		return 1;
	w->keys[w->n].data = malloc(key->size);
	if (!w->keys[w->n].data)
		return -ENOMEM;
	memcpy(w->keys[w->n].data, key->data, key->size);
	w->keys[w->n++].size = key->size;
	return 0;
}

/*
 * Drop the tombstones of versions below `below` (no log entry that old
 * is left: nothing older can be read again), unless the record was
 * written since.  A batch at a time.  0 or -errno.
 */
static int tombs_prune(struct db_replica *rep, uint64_t below)
{
	struct tomb_walk *w = calloc(1, sizeof(*w));
	size_t total = 0;
	int rc = w ? 0 : -ENOMEM;

	while (!rc) {
		struct db_txn t;

		w->below = below;
		w->n = 0;
		if ((rc = db_txn_begin(rep->db, NULL, NULL, &t)))
			break;
		rc = db_raw_each(rep->db, &t, rep->tombs, tomb_collect, w);
		rc = rc == 1 ? 0 : rc;
		for (size_t i = 0; !rc && i < w->n; i++) {
			struct db_val vk = { w->keys[i].size - 8,
					     (char *)w->keys[i].data + 8 },
				      v;
			const unsigned char *k = w->keys[i].data;
			uint64_t ver = 0, cur;

			for (int j = 0; j < 8; j++)
				ver = ver << 8 | k[j];
			if (!db_raw_get(&t, rep->vers, &vk, &v) &&
			    v.size == sizeof(cur) &&
			    (memcpy(&cur, v.data, sizeof(cur)), cur == ver))
				rc = db_raw_del(&t, rep->vers, &vk);
			if (!rc)
				rc = db_raw_del(&t, rep->tombs, &w->keys[i]);
		}
		for (size_t i = 0; i < w->n; i++)
			free(w->keys[i].data);
		if (rc) {
			db_txn_abort(&t);
			break;
		}
		if ((rc = db_txn_commit(&t)))
			break;
		total += w->n;
		if (w->n < TOMBS_BATCH)
			break;
	}
	free(w);
	if (total)
		log_debug("cluster: %zu tombstones older than the log dropped",
			  total);
	return rc;
}

static void *follower_main(void *arg)
{
	struct db_replica *rep = arg;
	uint64_t tombs_next = 0; /* once at start, then every minute */
	int wait = 0;

	for (;;) {
		uint64_t xmin;

		pthread_mutex_lock(&rep->f_lock);
		xmin = rep->cursor.xmin;
		pthread_mutex_unlock(&rep->f_lock);
		if (db_pg_wait(rep->pg, rep->stop_pipe[0], wait, xmin))
			break;
		/* Woken by a commit: the ones right behind it come with it
		 * (one read of the log, one local commit, for all). */
		usleep(FOLLOW_GATHER_US);
		int rc = follow_once(rep, false);

		if (rc)
			log_debug("cluster: reading the log: %d", rc);

		/* Behind the log while serving: a full copy goes through
		 * the writer like any batch, but all at once is simpler and
		 * rare (a node away for longer than the log is kept). */
		if (rc == -ESTALE)
			rc = load_all(rep);
		wait = rc ? RETRY_MS : FOLLOW_POLL_MS;
		if (!rc && db_pg_now_ms() >= tombs_next) {
			uint64_t below;

			tombs_next = db_pg_now_ms() + TOMBS_EVERY_MS;
			if (!db_pg_log_oldest(rep->pg, &below) &&
			    (rc = tombs_prune(rep, below)))
				log_warn("cluster: dropping old tombstones: %s",
					 strerror(-rc));
		}
	}
	return NULL;
}

/* ---- open and close ------------------------------------------------------ */

static int start_threads(struct db_replica *rep)
{
	for (unsigned i = 0; i < COMMITTERS; i++) {
		struct committer *cm = calloc(1, sizeof(*cm));
		int rc;

		if (!cm)
			return -ENOMEM;
		cm->rep = rep;
		rc = db_pg_conn_open(rep->pg, &rep->conns[i]);
		if (!rc)
			cm->conn = rep->conns[i];
		if (rc || pthread_create(&rep->committers[i], NULL, commit_loop,
					 cm)) {
			free(cm);
			return rc ? rc : -EAGAIN;
		}
		rep->ncommitters++;
	}
	if (pipe2(rep->stop_pipe, O_CLOEXEC) ||
	    pthread_create(&rep->follower, NULL, follower_main, rep))
		return -EAGAIN;
	rep->follower_started = true;
	return 0;
}

int db_replica_open(struct db *db, const struct db_cluster_opts *o,
		    const struct db_pg_sinks *sinks, struct db_replica **out)
{
	struct db_replica *rep = calloc(1, sizeof(*rep));
	char local[64], cursor[DB_SNAP_TEXT_MAX];
	unsigned char rnd[16];
	int rc;

	if (!rep)
		return -ENOMEM;
	rep->db = db;
	rep->stop_pipe[0] = rep->stop_pipe[1] = -1;
	pthread_mutex_init(&rep->cq_lock, NULL);
	pthread_cond_init(&rep->cq_wake, NULL);
	pthread_mutex_init(&rep->f_lock, NULL);
	pthread_cond_init(&rep->f_cond, NULL);
	rep->cq_tail = &rep->cq_head;
	rep->rb_tail = &rep->rb_head;
	for (int i = 0; i < DB_TABLES_MAX; i++)
		if (db->tables[i].open && db->tables[i].shared)
			rep->tnames[i] = db->tables[i].name;
	rep->vmax = max_val(db) + 1;
	if ((rc = db_env_table(db, "_vers", &rep->vers)) ||
	    (rc = db_env_table(db, "_meta", &rep->meta)) ||
	    (rc = db_env_table(db, "_tombs", &rep->tombs)))
		goto fail;
	/* The same state directory is the same instance: only one process
	 * has it (the engine's lock), so a restart takes its name back at
	 * once instead of waiting for its old lease to run out. */
	if ((rc = text_get(db, rep->meta, "instance", local, sizeof(local))))
		goto fail;
	if (strlen(local) != 32) {
		if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
			rc = -EIO;
			goto fail;
		}
		for (int i = 0; i < 16; i++)
			snprintf(local + 2 * i, 3, "%02x", rnd[i]);
		if ((rc = text_write(db, rep->meta, "instance", local)))
			goto fail;
	}
	if ((rc = db_pg_open(o, local, sinks, &rep->pg)))
		goto fail;
	/* The replica: this cluster's and up to date, or loaded whole. */
	if ((rc = text_get(db, rep->meta, "cluster", local, sizeof(local))) ||
	    (rc = text_get(db, rep->meta, "cursor", cursor, sizeof(cursor))))
		goto fail;
	if (!local[0] && !db_replica_shared_empty(db)) {
		/* Loading the cluster's namespace would replace it. */
		log_error(
			"cluster: this state directory holds the namespace of "
			"a gateway on its own: `mapfs-gw meta migrate` copies "
			"it into an empty cluster; to join this cluster, give "
			"the gateway an empty --state");
		rc = -EINVAL;
		goto fail;
	}
	if (strcmp(local, db_pg_cluster_id(rep->pg)) || !cursor[0] ||
	    db_snap_parse(&rep->cursor, cursor)) {
		rc = load_all(rep);
	} else {
		snprintf(rep->cursor_text, sizeof(rep->cursor_text), "%s",
			 cursor);
		rc = follow_once(rep, true);
	}
	if (!rc)
		rc = start_threads(rep);
	if (rc)
		goto fail;
	log_info("cluster: node %s (id %u) in cluster %.8s, at %s", o->node,
		 db_pg_node_id(rep->pg), db_pg_cluster_id(rep->pg),
		 rep->cursor_text);
	*out = rep;
	return 0;
fail:
	db_replica_stop_follower(rep);
	db_replica_close(rep);
	return rc == -EAGAIN ? -EIO : rc;
}

void db_replica_stop_follower(struct db_replica *rep)
{
	if (!rep)
		return;
	pthread_mutex_lock(&rep->f_lock);
	rep->f_stop = true;
	pthread_cond_broadcast(&rep->f_cond);
	pthread_mutex_unlock(&rep->f_lock);
	if (rep->follower_started) {
		if (write(rep->stop_pipe[1], "x", 1) != 1) {
			/* it also stops at its next poll */
		}
		pthread_join(rep->follower, NULL);
		rep->follower_started = false;
	}
	/* Where it got to, for the next start. */
	if (rep->cursor_text[0] && rep->meta)
		text_write(rep->db, rep->meta, "cursor", rep->cursor_text);
}

void db_replica_close(struct db_replica *rep)
{
	if (!rep)
		return;
	if (rep->pg)
		db_pg_commit_abandon(rep->pg);
	pthread_mutex_lock(&rep->cq_lock);
	rep->cq_stop = true;
	pthread_cond_broadcast(&rep->cq_wake);
	pthread_mutex_unlock(&rep->cq_lock);
	for (unsigned i = 0; i < rep->ncommitters; i++)
		pthread_join(rep->committers[i], NULL);
	for (unsigned i = 0; i < COMMITTERS; i++)
		db_pg_conn_close(rep->conns[i]);
	if (rep->stop_pipe[0] >= 0)
		close(rep->stop_pipe[0]);
	if (rep->stop_pipe[1] >= 0)
		close(rep->stop_pipe[1]);
	/* Batches the writer never took (it stopped first). */
	for (struct db_remote_batch *b = rep->rb_head, *n; b; b = n) {
		n = b->next;
		free(b);
	}
	db_pg_close(rep->pg);
	db_snap_free(&rep->cursor);
	pthread_cond_destroy(&rep->f_cond);
	pthread_mutex_destroy(&rep->f_lock);
	pthread_cond_destroy(&rep->cq_wake);
	pthread_mutex_destroy(&rep->cq_lock);
	free(rep);
}

/* See replica_int.h. */
uint64_t db_replica_age_ms(struct db_replica *rep)
{
	uint64_t t = atomic_load(&rep->followed_ms),
		 now = metrics_now_ns() / 1000000;

	return t && now > t ? now - t : 0;
}

struct db_pg *db_replica_pg(struct db_replica *rep)
{
	return rep->pg;
}

/* ---- a gateway alone growing into a cluster ------------------------------ */

bool db_replica_shared_empty(struct db *db)
{
	struct db_txn *t;
	bool empty = true;

	if (db_read_begin(db, &t))
		return false;
	for (int i = 0; empty && i < DB_TABLES_MAX; i++) {
		uint64_t n;

		if (db->tables[i].shared && !db_raw_count(t, (unsigned)i, &n))
			empty = n == 0;
	}
	db_read_end(db, t);
	return empty;
}

struct migrate_walk {
	struct db *db;
	int (*put)(void *pctx, const struct db_remote *rec);
	void *pctx;
	unsigned tbl;
	unsigned char *buf;
	uint64_t done, total;
	db_progress_fn progress;
	void *ctx;
};

static int migrate_rec(void *ctx, const struct db_val *key,
		       const struct db_val *val)
{
	struct migrate_walk *w = ctx;
	struct db_tinfo *ti = &w->db->tables[w->tbl];
	struct db_val sv;
	int rc = project(ti, val, w->buf, &sv);

	if (!rc)
		rc = w->put(w->pctx, &(struct db_remote){ .tname = ti->name,
							  .tbl = w->tbl,
							  .key = key->data,
							  .klen = key->size,
							  .val = sv.data,
							  .vlen = sv.size,
							  .ver = 1 });
	if (!rc && w->progress && ++w->done % 5000 == 0)
		w->progress(w->ctx, w->done, w->total);
	return rc;
}

static int migrate_each(void *ctx,
			int (*put)(void *pctx, const struct db_remote *rec),
			void *pctx)
{
	struct migrate_walk *w = ctx;
	int rc = 0;

	w->put = put;
	w->pctx = pctx;
	for (int i = 0; !rc && i < DB_TABLES_MAX; i++) {
		if (!w->db->tables[i].shared)
			continue;
		w->tbl = (unsigned)i;
		rc = db_raw_each(w->db, NULL, (unsigned)i, migrate_rec, w);
	}
	if (!rc && w->progress)
		w->progress(w->ctx, w->done, w->total);
	return rc;
}

struct mark {
	struct db_replica *rep;
	struct db_txn *txn;
	unsigned tbl;
};

static int mark_rec(void *ctx, const struct db_val *key,
		    const struct db_val *val)
{
	struct mark *m = ctx;

	(void)val;
	return vers_put(m->rep, m->txn, m->tbl, key, 1);
}

/* This replica is the cluster's from here: its records at version 1,
 * the whole log still to read ("1:1:"). */
static int mark_replica(struct db *db, const char *cluster_id)
{
	struct db_replica rep = { .db = db };
	struct db_txn t;
	struct mark m = { &rep, &t, 0 };
	int rc;

	if ((rc = db_env_table(db, "_vers", &rep.vers)) ||
	    (rc = db_env_table(db, "_meta", &rep.meta)) ||
	    (rc = db_txn_begin(db, NULL, NULL, &t)))
		return rc;
	for (int i = 0; !rc && i < DB_TABLES_MAX; i++) {
		if (!db->tables[i].shared)
			continue;
		m.tbl = (unsigned)i;
		rc = db_raw_each(db, &t, (unsigned)i, mark_rec, &m);
	}
	if (!rc)
		rc = text_put(&t, rep.meta, "cluster", cluster_id);
	if (!rc)
		rc = text_put(&t, rep.meta, "cursor", "1:1:");
	if (rc) {
		db_txn_abort(&t);
		return rc;
	}
	return db_txn_commit(&t);
}

int db_replica_migrate(struct db *db, const struct db_cluster_opts *o,
		       const void *key, size_t klen, uint64_t next_id,
		       db_progress_fn progress, void *ctx)
{
	struct migrate_walk w = { .db = db, .progress = progress, .ctx = ctx };
	char cluster_id[33] = "";
	struct db_txn *t;
	int rc = db_read_begin(db, &t);

	if (rc)
		return rc;
	for (int i = 0; i < DB_TABLES_MAX; i++) {
		uint64_t n;

		if (db->tables[i].shared && !db_raw_count(t, (unsigned)i, &n))
			w.total += n;
	}
	db_read_end(db, t);
	w.buf = malloc(max_val(db) + 1);
	if (!w.buf)
		return -ENOMEM;
	rc = db_pg_migrate(o, key, klen, next_id, migrate_each, &w, cluster_id);
	free(w.buf);
	return rc ? rc : mark_replica(db, cluster_id);
}
