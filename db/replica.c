/*
 * db/replica.c - a node's local replica of the cluster's records: what a
 * change read and wrote of them, the committers that send changes to
 * PostgreSQL, opening and closing the replica, and a gateway alone
 * growing into a cluster (replica_int.h).  Versions and texts are
 * replica_vers.c's; the follower that brings the other nodes' commits in
 * is replica_follow.c's.
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
#include "metrics/metrics.h"
#include "replica_priv.h"

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
	return replica_vers_get(rep, txn, tbl, key);
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
	if ((rc = replica_project(ti, val, buf, shared)))
		return rc;
	/* A put that leaves the shared part as it was (only the node's own
	 * fields changed) is not the cluster's business. */
	if (had) {
		unsigned char *b1 =
			ti->ops.project ? malloc(ti->ops.max) : NULL;

		if (ti->ops.project && !b1)
			return -ENOMEM;
		rc = replica_project(ti, &old, b1, &sold);
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

		rc = r->del ? replica_tomb_put(rep, txn, r->tbl, &k, seq)
			    : replica_vers_put(rep, txn, r->tbl, &k, seq);
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
		char name[16];

		snprintf(name, sizeof(name), "db-commit-%d", i);
		pthread_setname_np(rep->committers[i], name);
		rep->ncommitters++;
	}
	if (pipe2(rep->stop_pipe, O_CLOEXEC) ||
	    pthread_create(&rep->follower, NULL, replica_follower_main, rep))
		return -EAGAIN;
	pthread_setname_np(rep->follower, "db-follow");
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
	rep->vmax = replica_max_val(db) + 1;
	if ((rc = db_env_table(db, "_vers", &rep->vers)) ||
	    (rc = db_env_table(db, "_meta", &rep->meta)) ||
	    (rc = db_env_table(db, "_tombs", &rep->tombs)))
		goto fail;
	/* The same state directory is the same instance: only one process
	 * has it (the engine's lock), so a restart takes its name back at
	 * once instead of waiting for its old lease to run out. */
	if ((rc = replica_text_get(db, rep->meta, "instance", local,
				   sizeof(local))))
		goto fail;
	if (strlen(local) != 32) {
		if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
			rc = -EIO;
			goto fail;
		}
		for (int i = 0; i < 16; i++)
			snprintf(local + 2 * i, 3, "%02x", rnd[i]);
		if ((rc = replica_text_write(db, rep->meta, "instance", local)))
			goto fail;
	}
	if ((rc = db_pg_open(o, local, sinks, &rep->pg)))
		goto fail;
	/* The replica: this cluster's and up to date, or loaded whole. */
	if ((rc = replica_text_get(db, rep->meta, "cluster", local,
				   sizeof(local))) ||
	    (rc = replica_text_get(db, rep->meta, "cursor", cursor,
				   sizeof(cursor))))
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
		rc = replica_load_all(rep);
	} else {
		snprintf(rep->cursor_text, sizeof(rep->cursor_text), "%s",
			 cursor);
		rc = replica_follow_once(rep, true);
	}
	if (!rc)
		rc = start_threads(rep);
	if (rc)
		goto fail;
	/* The follower runs now and moves the cursor under f_lock. */
	char at[sizeof(rep->cursor_text)];

	pthread_mutex_lock(&rep->f_lock);
	snprintf(at, sizeof(at), "%s", rep->cursor_text);
	pthread_mutex_unlock(&rep->f_lock);
	log_info("cluster: node %s (id %u) in cluster %.8s, at %s", o->node,
		 db_pg_node_id(rep->pg), db_pg_cluster_id(rep->pg), at);
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
		replica_text_write(rep->db, rep->meta, "cursor",
				   rep->cursor_text);
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
	int rc = replica_project(ti, val, w->buf, &sv);

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
	return replica_vers_put(m->rep, m->txn, m->tbl, key, 1);
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
		rc = replica_text_put(&t, rep.meta, "cluster", cluster_id);
	if (!rc)
		rc = replica_text_put(&t, rep.meta, "cursor", "1:1:");
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
	w.buf = malloc(replica_max_val(db) + 1);
	if (!w.buf)
		return -ENOMEM;
	rc = db_pg_migrate(o, key, klen, next_id, migrate_each, &w, cluster_id);
	free(w.buf);
	return rc ? rc : mark_replica(db, cluster_id);
}
