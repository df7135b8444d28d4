/*
 * db/replica_follow.c - the other nodes' commits into this replica: the
 * follower thread reads the log by snapshot (db_pg_follow) as commits are
 * announced, turns each commit into a batch the writer applies in its
 * next local transaction (db_replica_take, _apply, _applied), loads the
 * whole namespace when the replica is new or behind the log, and prunes
 * the tombstones no log entry can still need.
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
#include "metrics/metrics.h"
#include "replica_priv.h"

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

	if (!replace && r->ver &&
	    r->ver <= replica_vers_get(rep, txn, r->tbl, &key))
		return 0; /* this node has it already (or newer) */
	rc = db_raw_get(txn, r->tbl, &key, &old);
	if (rc && rc != -ENOENT)
		return rc;
	had = !rc;
	rc = 0; /* a delete of a record not here is done already */
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
		return replica_tomb_put(rep, txn, r->tbl, &key, r->ver);
	if (r->ver)
		return replica_vers_put(rep, txn, r->tbl, &key, r->ver);
	return replica_vers_del(rep, txn, r->tbl,
				&key); /* absent in the cluster */
}

/* Apply recs[0..n) in txn; replace: empty the shared tables first. */
static int apply_recs(struct db_replica *rep, struct db_txn *txn,
		      struct db_remote_batch *b, bool replace)
{
	unsigned char *buf = malloc(replica_max_val(rep->db) + 1);
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
		rc = replica_text_put(txn, rep->meta, "cursor", cur);
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
	bool queued;

	/* The follower runs already: it reads the hook under f_lock, and a
	 * batch it queued before there was one is announced now. */
	pthread_mutex_lock(&rep->f_lock);
	rep->wake = wake;
	rep->wake_ctx = ctx;
	queued = rep->rb_head != NULL;
	pthread_mutex_unlock(&rep->f_lock);
	if (wake && queued)
		wake(ctx);
}

/* Tell the writer (its hook, if set) that the follower has something or
 * moved. */
static void wake_writer(struct db_replica *rep)
{
	void (*wake)(void *ctx);
	void *ctx;

	pthread_mutex_lock(&rep->f_lock);
	wake = rep->wake;
	ctx = rep->wake_ctx;
	pthread_mutex_unlock(&rep->f_lock);
	if (wake)
		wake(ctx);
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
	wake_writer(rep);
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
	wake_writer(rep);
}

/* Load every record whole (a new replica, or one behind the log). */
int replica_load_all(struct db_replica *rep)
{
	struct follow_ctx fc = { rep, true };
	struct db_snap at = { 0 };
	char text[DB_SNAP_TEXT_MAX];
	int rc = db_pg_snapshot(rep->pg, snapshot_page, &fc, &at);

	if (!rc)
		rc = db_snap_format(&at, text, sizeof(text));
	if (!rc)
		rc = replica_text_write(rep->db, rep->meta, "cursor", text);
	if (!rc)
		rc = replica_text_write(rep->db, rep->meta, "cluster",
					db_pg_cluster_id(rep->pg));
	if (!rc)
		cursor_set(rep, &at);
	db_snap_free(&at);
	return rc;
}

/* Read the log past the position and apply it.  0 or -errno. */
int replica_follow_once(struct db_replica *rep, bool direct)
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
		rc = direct ? replica_load_all(rep) : -ESTALE;
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

void *replica_follower_main(void *arg)
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
		int rc = replica_follow_once(rep, false);

		if (rc)
			log_debug("cluster: reading the log: %d", rc);

		/* Behind the log while serving: a full copy goes through
		 * the writer like any batch, but all at once is simpler and
		 * rare (a node away for longer than the log is kept). */
		if (rc == -ESTALE)
			rc = replica_load_all(rep);
		wait = rc ? RETRY_MS : DB_PG_FOLLOW_POLL_MS;
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
