/*
 * db/lmdb.c - the metadata engine on LMDB: the environment, tables,
 * per-thread read snapshots, and the group-commit writer.
 *
 * One writer thread owns every write transaction.  Changes queued by any
 * thread are applied in arrival order, each in its own nested transaction
 * (so one failing change does not undo the others), and the whole group is
 * committed with one fsync.  A burst of creates from many cores therefore
 * costs one disk flush, not one each.
 *
 * In a cluster (db_int.h) the group's writes to shared tables are
 * committed in PostgreSQL before the local transaction: a group whose
 * reads were stale is aborted here, the fresh records are applied, and
 * it runs again; while the database does not answer, the changes that
 * touch shared tables fail with -EAGAIN and the others still commit.
 * Each shared record's version sits beside it in the "_vers" table (only
 * the writer reads it, inside write transactions), the applied log
 * sequence and the cluster's id in "_meta".
 */
#include "db.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "db_int.h"
#include "metrics/metrics.h"

/* Most changes one transaction groups, so a flood cannot starve done(). */
#define DB_GROUP_MAX 4096
/* Runs of a group whose reads were stale before it runs change by change. */
#define DB_STALE_RETRIES 3

_Static_assert(sizeof(struct db_val) == sizeof(MDB_val) &&
		       offsetof(struct db_val, size) ==
			       offsetof(MDB_val, mv_size) &&
		       offsetof(struct db_val, data) ==
			       offsetof(MDB_val, mv_data),
	       "struct db_val is passed to LMDB as an MDB_val");

/* A read snapshot or a write transaction: the LMDB txn under it. */
struct db_txn {
	MDB_txn *mdb;
	struct db *db;
	struct db_track *track; /* a write txn of a clustered node, else NULL */
};

struct db_cursor {
	MDB_cursor *mdb;
	struct db_txn *txn;
	unsigned tbl;
};

struct db_op {
	struct db_op *next;
	db_apply_fn apply;
	db_done_fn done;
	void *arg;
	int err;
	bool shared; /* it wrote a shared record (this run) */
	bool local;  /* a replica change (remote apply): never tracked */
};

struct db {
	MDB_env *env;
	int lock_fd; /* flock'ed: one process per directory */
	uint64_t id; /* tells a thread's cached read txn which env it is for */
	struct db_tinfo tables[DB_TABLES_MAX];
	MDB_dbi vers, meta; /* internal tables (cluster) */

	/* Every thread's cached read txn, so db_close can free them all. */
	pthread_mutex_t readers_lock;
	MDB_txn **readers;
	size_t nreaders, readers_cap;

	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct db_op *head, **tail;
	bool stopping;
	pthread_t writer;

	/* The cluster, once db_start() joined it. */
	struct db_cluster_opts *copts;
	db_msg_fn on_msg;
	void *on_msg_ctx;
	struct {
		db_node_fn fn;
		void *ctx;
	} on_down[DB_NODE_HANDLERS];
	pthread_mutex_t on_down_lock;
	struct db_pg *pg;
	struct db_track track; /* the writer's, reused group after group */
};

/*
 * The calling thread's reusable read transaction.  A thread only ever
 * reuses it for the env it was made for; nesting is counted so helpers
 * that each open a read see one snapshot.
 */
struct db_reader {
	uint64_t db_id;
	struct db_txn txn;
	unsigned depth;
};

static __thread struct db_reader tl_reader;

/* An MDB_* return code as -errno. */
static int db_err(int rc)
{
	switch (rc) {
	case MDB_SUCCESS:
		return 0;
	case MDB_NOTFOUND:
		return -ENOENT;
	case MDB_KEYEXIST:
		return -EEXIST;
	case MDB_MAP_FULL:
	case MDB_TXN_FULL:
		return -ENOSPC;
	case MDB_READERS_FULL:
		return -EAGAIN;
	case MDB_CORRUPTED:
	case MDB_PAGE_NOTFOUND:
	case MDB_PANIC:
	case MDB_BAD_TXN:
		return -EIO;
	default:
		return rc > 0 ? -rc : -EIO;
	}
}

/* ---- versions of shared records -------------------------------------- */

/* The "_vers" key of (tbl, key): the table's name, a NUL, the key. */
static size_t vers_key(const struct db *db, unsigned tbl,
		       const struct db_val *key, unsigned char *buf, size_t cap)
{
	size_t nl = strlen(db->tables[tbl].name) + 1;

	if (nl + key->size > cap)
		return 0;
	memcpy(buf, db->tables[tbl].name, nl);
	memcpy(buf + nl, key->data, key->size);
	return nl + key->size;
}

/* The version of a shared record here; 0: none (absent, or never seen). */
static uint64_t vers_get(struct db *db, MDB_txn *txn, unsigned tbl,
			 const struct db_val *key)
{
	unsigned char kb[DB_TABLE_NAME_MAX + 512];
	MDB_val k = { vers_key(db, tbl, key, kb, sizeof(kb)), kb }, v;
	uint64_t ver;

	if (!k.mv_size || mdb_get(txn, db->vers, &k, &v) ||
	    v.mv_size != sizeof(ver))
		return 0;
	memcpy(&ver, v.mv_data, sizeof(ver));
	return ver;
}

static int vers_put(struct db *db, MDB_txn *txn, unsigned tbl,
		    const struct db_val *key, uint64_t ver)
{
	unsigned char kb[DB_TABLE_NAME_MAX + 512];
	MDB_val k = { vers_key(db, tbl, key, kb, sizeof(kb)), kb };
	MDB_val v = { sizeof(ver), &ver };

	if (!k.mv_size)
		return -ENAMETOOLONG;
	return db_err(mdb_put(txn, db->vers, &k, &v, 0));
}

static int vers_del(struct db *db, MDB_txn *txn, unsigned tbl,
		    const struct db_val *key)
{
	unsigned char kb[DB_TABLE_NAME_MAX + 512];
	MDB_val k = { vers_key(db, tbl, key, kb, sizeof(kb)), kb };
	int rc = k.mv_size ? mdb_del(txn, db->vers, &k, NULL) : 0;

	return rc == MDB_NOTFOUND ? 0 : db_err(rc);
}

static int meta_raise_seq(struct db *db, MDB_txn *txn, uint64_t v);

static bool tracked(const struct db_txn *txn, unsigned tbl)
{
	return txn->track && tbl < DB_TABLES_MAX && txn->db->tables[tbl].shared;
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

/* ---- the writer ------------------------------------------------------ */

static void op_run(struct db *db, MDB_txn *parent, struct db_op *op)
{
	struct db_txn child = { .db = db };
	size_t before = db->track.nwrites;

	op->shared = false;
	op->err = db_err(mdb_txn_begin(db->env, parent, 0, &child.mdb));
	if (op->err)
		return;
	if (db->pg && !op->local)
		child.track = &db->track;
	op->err = op->apply ? op->apply(&child, op->arg) : 0;
	if (op->err) {
		mdb_txn_abort(child.mdb);
		db_track_truncate(&db->track, before);
		return;
	}
	op->err = db_err(mdb_txn_commit(child.mdb));
	if (op->err)
		db_track_truncate(&db->track, before);
	else
		op->shared = db->track.nwrites > before;
}

/* The versions of what a group committed (seq) beside the records. */
static int vers_commit(struct db *db, MDB_txn *txn, uint64_t seq)
{
	const struct db_track *t = &db->track;
	int rc = 0;

	for (size_t i = 0; !rc && i < t->nwrites; i++) {
		const struct db_rec *r = &t->writes[i];
		struct db_val k = { r->klen, (void *)db_rec_key(t, r) };

		rc = vers_put(db, txn, r->tbl, &k, seq);
	}
	return rc;
}

/*
 * Run a group in one LMDB txn and, in a cluster, commit its shared
 * writes in PostgreSQL first.  Returns the LMDB commit result; -ESTALE
 * (the stale records were applied: run the group again), or -EAGAIN
 * (the cluster did not take the shared writes: run it again without
 * the ops that made them).
 */
static int group_try(struct db *db, struct db_op *ops)
{
	struct db_stale stale = { 0 };
	bool shared = false;
	uint64_t seq = 0;
	MDB_txn *txn;
	int rc = db_err(mdb_txn_begin(db->env, NULL, 0, &txn));

	if (rc)
		return rc;
	db_track_reset(&db->track);
	for (struct db_op *op = ops; op; op = op->next) {
		op_run(db, txn, op);
		shared |= op->shared;
	}
	if (shared) {
		uint64_t t0 = metrics_now_ns();

		rc = db_track_final(&db->track);
		if (!rc) {
			rc = db_pg_commit(db->pg, &db->track, &seq, &stale);
			metrics_inc(rc == -ESTALE ? MET_CLUSTER_STALE
						  : MET_CLUSTER_COMMITS);
			metrics_add(MET_CLUSTER_COMMIT_US,
				    (metrics_now_ns() - t0) / 1000);
		}
		if (!rc)
			rc = vers_commit(db, txn, seq);
		if (rc) {
			mdb_txn_abort(txn);
			if (rc == -ESTALE) {
				int arc = db_apply_remote(db, stale.recs,
							  stale.n, 0);

				if (!arc)
					arc = db_pg_catch_up(db->pg);
				if (arc)
					rc = arc;
			}
			db_pg_stale_free(&stale);
			return rc;
		}
	}
	rc = db_err(mdb_txn_commit(txn)); /* syncs: the group is durable */
	metrics_inc(MET_DB_COMMITS);
	return rc;
}

/* Unlink the ops that made shared writes into *failed. */
static struct db_op *group_split(struct db_op *ops, struct db_op **failed)
{
	struct db_op *keep = NULL, **kt = &keep, **ft = failed;

	while (ops) {
		struct db_op *next = ops->next;

		ops->next = NULL;
		if (ops->shared) {
			*ft = ops;
			ft = &ops->next;
		} else {
			*kt = ops;
			kt = &ops->next;
		}
		ops = next;
	}
	return keep;
}

static void group_done(struct db_op *ops, int rc)
{
	while (ops) {
		struct db_op *next = ops->next;

		metrics_inc(MET_DB_CHANGES);
		if (ops->done)
			ops->done(ops->arg, rc ? rc : ops->err);
		free(ops);
		ops = next;
	}
}

static void db_run_group(struct db *db, struct db_op *ops)
{
	struct db_op *failed = NULL;
	int rc, tries = 0;

	for (;;) {
		rc = group_try(db, ops);
		if (rc == -ESTALE && ++tries < DB_STALE_RETRIES)
			continue;
		if (rc == -ESTALE && ops && ops->next) {
			/* Contended: each change on its own, in order. */
			struct db_op *rest = ops->next;

			ops->next = NULL;
			db_run_group(db, ops);
			db_run_group(db, rest);
			return;
		}
		if (rc == -EAGAIN && !failed) {
			/* The cluster is down: what touched only this node's
			 * tables still commits. */
			ops = group_split(ops, &failed);
			if (ops)
				continue;
		}
		break;
	}
	group_done(failed, -EAGAIN);
	group_done(ops, rc == -ESTALE ? -EAGAIN : rc);
}

static void *db_writer_main(void *p)
{
	struct db *db = p;

	pthread_mutex_lock(&db->lock);
	for (;;) {
		while (!db->head && !db->stopping)
			pthread_cond_wait(&db->wake, &db->lock);
		if (!db->head)
			break; /* stopping and drained */
		struct db_op *group = db->head, **end = &db->head;
		for (int n = 0; *end && n < DB_GROUP_MAX; n++)
			end = &(*end)->next;
		db->head = *end;
		*end = NULL;
		if (!db->head)
			db->tail = &db->head;
		pthread_mutex_unlock(&db->lock);
		db_run_group(db, group);
		pthread_mutex_lock(&db->lock);
	}
	pthread_mutex_unlock(&db->lock);
	return NULL;
}

/* ---- open and close --------------------------------------------------- */

int db_open(const char *dir, size_t mapsize, unsigned maxtables,
	    struct db **out)
{
	static uint64_t next_id; /* distinct ids across opens in one process */
	struct db *db = calloc(1, sizeof(*db));
	char lockpath[4096];
	int rc;

	if (!db)
		return -ENOMEM;
	if (mkdir(dir, 0700) && errno != EEXIST) {
		rc = -errno;
		goto out_free;
	}
	/* LMDB lets processes share an env; a gateway's state must not be
	 * (two writers of one cache, one node name twice): the second one
	 * is refused.  The lock goes with the process, however it ends. */
	rc = snprintf(lockpath, sizeof(lockpath), "%s/gateway.lock", dir);
	if (rc < 0 || (size_t)rc >= sizeof(lockpath)) {
		rc = -ENAMETOOLONG;
		goto out_free;
	}
	db->lock_fd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (db->lock_fd < 0) {
		rc = -errno;
		goto out_free;
	}
	if (flock(db->lock_fd, LOCK_EX | LOCK_NB)) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		goto out_lock;
	}
	rc = db_err(mdb_env_create(&db->env));
	if (rc)
		goto out_lock;
	/* Two internal tables beside the caller's. */
	if ((rc = db_err(mdb_env_set_mapsize(db->env, mapsize))) ||
	    (rc = db_err(mdb_env_set_maxdbs(db->env, maxtables + 2))) ||
	    (rc = db_err(mdb_env_set_maxreaders(db->env, 1024))))
		goto out_env;
	/* MDB_NOTLS: read txns belong to our per-thread cache, not to LMDB's. */
	rc = db_err(mdb_env_open(db->env, dir, MDB_NOTLS, 0600));
	if (rc)
		goto out_env;
	db->id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
	db_track_init(&db->track);
	pthread_mutex_init(&db->on_down_lock, NULL);
	pthread_mutex_init(&db->lock, NULL);
	pthread_cond_init(&db->wake, NULL);
	pthread_mutex_init(&db->readers_lock, NULL);
	db->tail = &db->head;
	rc = -pthread_create(&db->writer, NULL, db_writer_main, db);
	if (rc)
		goto out_sync;
	*out = db;
	return 0;

out_sync:
	pthread_mutex_destroy(&db->readers_lock);
	pthread_cond_destroy(&db->wake);
	pthread_mutex_destroy(&db->lock);
	pthread_mutex_destroy(&db->on_down_lock);
out_env:
	mdb_env_close(db->env);
out_lock:
	close(db->lock_fd);
out_free:
	free(db);
	return rc;
}

static void copts_free(struct db_cluster_opts *o)
{
	if (!o)
		return;
	free((char *)o->url);
	free((char *)o->node);
	free((char *)o->store_url);
	free((char *)o->addr);
	free(o);
}

void db_close(struct db *db)
{
	if (!db)
		return;
	db_stop(db);
	pthread_mutex_lock(&db->lock);
	db->stopping = true;
	pthread_cond_signal(&db->wake);
	pthread_mutex_unlock(&db->lock);
	pthread_join(db->writer, NULL);
	/* Threads that read are stopped by now; their txns are freed here. */
	for (size_t i = 0; i < db->nreaders; i++)
		mdb_txn_abort(db->readers[i]);
	free(db->readers);
	pthread_mutex_destroy(&db->readers_lock);
	mdb_env_close(db->env);
	pthread_cond_destroy(&db->wake);
	pthread_mutex_destroy(&db->lock);
	pthread_mutex_destroy(&db->on_down_lock);
	db_track_free(&db->track);
	copts_free(db->copts);
	close(db->lock_fd);
	free(db);
}

static int dbi_open(struct db *db, const char *name, unsigned mdb_flags,
		    MDB_dbi *out)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(db->env, NULL, 0, &txn);

	if (rc)
		return db_err(rc);
	rc = mdb_dbi_open(txn, name, mdb_flags | MDB_CREATE, out);
	if (rc) {
		mdb_txn_abort(txn);
		return db_err(rc);
	}
	return db_err(mdb_txn_commit(txn));
}

int db_table_open_shared(struct db *db, const char *name, unsigned flags,
			 const struct db_share_ops *ops, db_table *out)
{
	MDB_dbi dbi;
	int rc;

	if (strlen(name) >= DB_TABLE_NAME_MAX || name[0] == '_')
		return -EINVAL;
	rc = dbi_open(db, name, (flags & DB_INTKEY) ? MDB_INTEGERKEY : 0, &dbi);
	if (rc)
		return rc;
	if (dbi >= DB_TABLES_MAX)
		return -ENFILE;
	struct db_tinfo *ti = &db->tables[dbi];

	snprintf(ti->name, sizeof(ti->name), "%s", name);
	ti->open = true;
	ti->shared = (flags & DB_SHARED) != 0;
	if (ops)
		ti->ops = *ops;
	*out = dbi;
	return 0;
}

int db_table_open(struct db *db, const char *name, unsigned flags,
		  db_table *out)
{
	return db_table_open_shared(db, name, flags, NULL, out);
}

int db_cluster(struct db *db, const struct db_cluster_opts *o)
{
	struct db_cluster_opts *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	*c = *o;
	c->url = strdup(o->url);
	c->node = strdup(o->node);
	c->store_url = strdup(o->store_url ? o->store_url : "");
	c->addr = strdup(o->addr ? o->addr : "");
	if (!c->url || !c->node || !c->store_url || !c->addr) {
		copts_free(c);
		return -ENOMEM;
	}
	copts_free(db->copts);
	db->copts = c;
	return 0;
}

int db_start(struct db *db)
{
	int rc;

	if (!db->copts)
		return 0;
	if ((rc = dbi_open(db, "_vers", 0, &db->vers)) ||
	    (rc = dbi_open(db, "_meta", 0, &db->meta)))
		return rc;
	return db_pg_open(db, db->copts, &db->pg);
}

static int db_write_as(struct db *db, db_apply_fn apply, void *arg, bool local);

static int detach_fn(struct db_txn *t, void *arg)
{
	(void)arg;
	t->db->pg = NULL; /* on the writer: it commits alone from here on */
	return 0;
}

void db_stop(struct db *db)
{
	struct db_pg *pg = db->pg;

	if (!pg)
		return;
	db_pg_stop_follower(pg);
	db_write_as(db, detach_fn, NULL, true);
	db_pg_close(pg);
}

bool db_clustered(const struct db *db)
{
	return db->copts != NULL;
}

uint32_t db_node_id(const struct db *db)
{
	return db->pg ? db_pg_node_id(db->pg) : 0;
}

int db_alloc_ids(struct db *db, uint64_t n, uint64_t *first)
{
	return db->pg ? db_pg_alloc_ids(db->pg, n, first) : -ENOTSUP;
}

int db_lock_edit(struct db *db, uint64_t ino, db_lock_edit_fn edit, void *ctx,
		 uint64_t host_max)
{
	return db->pg ? db_pg_lock_edit(db->pg, ino, edit, ctx, host_max)
		      : -ENOTSUP;
}

int db_lock_files(struct db *db, uint64_t **inos, size_t *n)
{
	return db->pg ? db_pg_lock_files(db->pg, inos, n) : -ENOTSUP;
}

int db_secret(struct db *db, const char *name, void *buf, size_t len)
{
	return db->pg ? db_pg_secret(db->pg, name, buf, len) : -ENOTSUP;
}

bool db_cluster_up(struct db *db)
{
	return !db->pg || db_pg_up(db->pg);
}

int db_send(struct db *db, uint32_t to, const char *msg)
{
	if (strlen(msg) > DB_MSG_MAX)
		return -EMSGSIZE;
	return db->pg ? db_pg_send(db->pg, to, msg) : -ENOTSUP;
}

void db_on_message(struct db *db, db_msg_fn fn, void *ctx)
{
	db->on_msg = fn;
	db->on_msg_ctx = ctx;
}

void db_deliver(struct db *db, uint32_t from, const char *msg)
{
	if (db->on_msg)
		db->on_msg(db->on_msg_ctx, from, msg);
}

bool db_node_up(struct db *db, uint32_t node)
{
	return !db->pg || db_pg_node_up(db->pg, node);
}

void db_on_node_down(struct db *db, db_node_fn fn, void *ctx)
{
	pthread_mutex_lock(&db->on_down_lock);
	for (int i = 0; i < DB_NODE_HANDLERS; i++)
		if (db->on_down[i].ctx == ctx || (fn && !db->on_down[i].fn)) {
			db->on_down[i].fn = fn;
			db->on_down[i].ctx = fn ? ctx : NULL;
			if (fn)
				break;
		}
	pthread_mutex_unlock(&db->on_down_lock);
}

void db_deliver_down(struct db *db, uint32_t node)
{
	/* Held while they run: a handler removed is not running after. */
	pthread_mutex_lock(&db->on_down_lock);
	for (int i = 0; i < DB_NODE_HANDLERS; i++)
		if (db->on_down[i].fn)
			db->on_down[i].fn(db->on_down[i].ctx, node);
	pthread_mutex_unlock(&db->on_down_lock);
}

int db_note_add(struct db *db, const char *kind, const char *note)
{
	return db->pg ? db_pg_note(db->pg, kind, note, true) : -ENOTSUP;
}

int db_note_del(struct db *db, const char *kind, const char *note)
{
	return db->pg ? db_pg_note(db->pg, kind, note, false) : -ENOTSUP;
}

int db_notes_take(struct db *db, uint32_t node, const char *kind,
		  void (*fn)(void *ctx, const char *note), void *ctx)
{
	return db->pg ? db_pg_notes_take(db->pg, node, kind, fn, ctx)
		      : -ENOTSUP;
}

bool db_lease_held(struct db *db)
{
	return !db->pg || db_pg_lease_held(db->pg);
}

/* ---- reads ------------------------------------------------------------- */

static int db_reader_register(struct db *db, MDB_txn *txn)
{
	int rc = 0;

	pthread_mutex_lock(&db->readers_lock);
	if (db->nreaders == db->readers_cap) {
		size_t cap = db->readers_cap ? db->readers_cap * 2 : 16;
		MDB_txn **n = realloc(db->readers, cap * sizeof(*n));

		if (!n) {
			rc = -ENOMEM;
			goto out_unlock;
		}
		db->readers = n;
		db->readers_cap = cap;
	}
	db->readers[db->nreaders++] = txn;
out_unlock:
	pthread_mutex_unlock(&db->readers_lock);
	return rc;
}

int db_read_begin(struct db *db, struct db_txn **txn)
{
	struct db_reader *r = &tl_reader;
	int rc;

	if (r->db_id == db->id && r->depth > 0) {
		r->depth++;
		*txn = &r->txn;
		return 0;
	}
	if (r->db_id == db->id && r->txn.mdb) {
		rc = mdb_txn_renew(r->txn.mdb);
	} else {
		/* A txn left from a closed env is forgotten, never touched. */
		r->db_id = db->id;
		r->txn = (struct db_txn){ .db = db };
		rc = mdb_txn_begin(db->env, NULL, MDB_RDONLY, &r->txn.mdb);
		if (rc == MDB_SUCCESS && db_reader_register(db, r->txn.mdb)) {
			mdb_txn_abort(r->txn.mdb);
			rc = ENOMEM;
		}
	}
	if (rc) {
		/* A failed renew leaves the txn registered; db_close frees it. */
		r->txn.mdb = NULL;
		r->db_id = 0;
		return db_err(rc);
	}
	r->depth = 1;
	*txn = &r->txn;
	return 0;
}

void db_read_end(struct db *db, struct db_txn *txn)
{
	struct db_reader *r = &tl_reader;

	if (r->db_id != db->id || txn != &r->txn || r->depth == 0)
		return;
	if (--r->depth == 0)
		mdb_txn_reset(txn->mdb);
}

int db_get(struct db_txn *txn, db_table tbl, const struct db_val *key,
	   struct db_val *val)
{
	int rc = db_err(mdb_get(txn->mdb, tbl, (MDB_val *)key, (MDB_val *)val));

	/* What a change decided on is checked at its commit. */
	if (tracked(txn, tbl) && (!rc || rc == -ENOENT)) {
		int trc = db_track_read(txn->track, tbl, key,
					vers_get(txn->db, txn->mdb, tbl, key));

		if (trc)
			return trc;
	}
	return rc;
}

/* ---- writes ------------------------------------------------------------ */

/*
 * Track a write of key in a shared table: val NULL is a delete.  A put
 * that leaves the shared part as it was (only the node's own fields
 * changed) is not the cluster's business.
 */
static int track_put(struct db_txn *txn, unsigned tbl, const struct db_val *key,
		     const struct db_val *val)
{
	struct db_tinfo *ti = &txn->db->tables[tbl];
	struct db_val old, sold, snew;
	unsigned char *b1 = NULL, *b2 = NULL;
	int rc =
		db_err(mdb_get(txn->mdb, tbl, (MDB_val *)key, (MDB_val *)&old));
	bool had = !rc;

	if (rc && rc != -ENOENT)
		return rc;
	if (!val)
		return had ? db_track_write(txn->track, tbl, key, NULL) : 0;
	if (ti->ops.project) {
		b1 = malloc(ti->ops.max);
		b2 = malloc(ti->ops.max);
		if (!b1 || !b2) {
			rc = -ENOMEM;
			goto out_free;
		}
	}
	if ((rc = project(ti, val, b2, &snew)))
		goto out_free;
	if (had && !(rc = project(ti, &old, b1, &sold)) &&
	    sold.size == snew.size && !memcmp(sold.data, snew.data, snew.size))
		goto out_free; /* the shared part did not change */
	if (!rc)
		rc = db_track_write(txn->track, tbl, key, &snew);
out_free:
	free(b1);
	free(b2);
	return rc;
}

int db_put(struct db_txn *txn, db_table tbl, const struct db_val *key,
	   const struct db_val *val, unsigned flags)
{
	unsigned f = ((flags & DB_NOOVERWRITE) ? MDB_NOOVERWRITE : 0) |
		     ((flags & DB_APPEND) ? MDB_APPEND : 0);
	int rc;

	if (tracked(txn, tbl) && (rc = track_put(txn, tbl, key, val)))
		return rc;
	return db_err(
		mdb_put(txn->mdb, tbl, (MDB_val *)key, (MDB_val *)val, f));
}

int db_del(struct db_txn *txn, db_table tbl, const struct db_val *key)
{
	int rc;

	if (tracked(txn, tbl) && (rc = track_put(txn, tbl, key, NULL)))
		return rc;
	return db_err(mdb_del(txn->mdb, tbl, (MDB_val *)key, NULL));
}

int db_count(struct db_txn *txn, db_table tbl, uint64_t *n)
{
	MDB_stat st;
	int rc = db_err(mdb_stat(txn->mdb, tbl, &st));

	*n = rc ? 0 : st.ms_entries;
	return rc;
}

int db_cursor_open(struct db_txn *txn, db_table tbl, struct db_cursor **out)
{
	struct db_cursor *c = malloc(sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	c->txn = txn;
	c->tbl = tbl;
	rc = db_err(mdb_cursor_open(txn->mdb, tbl, &c->mdb));
	if (rc) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void db_cursor_close(struct db_cursor *cur)
{
	if (!cur)
		return;
	mdb_cursor_close(cur->mdb);
	free(cur);
}

int db_cursor_get(struct db_cursor *cur, struct db_val *key, struct db_val *val,
		  enum db_cursor_op op)
{
	static const MDB_cursor_op ops[] = {
		[DB_FIRST] = MDB_FIRST,
		[DB_LAST] = MDB_LAST,
		[DB_NEXT] = MDB_NEXT,
		[DB_SET_RANGE] = MDB_SET_RANGE,
	};

	return db_err(mdb_cursor_get(cur->mdb, (MDB_val *)key, (MDB_val *)val,
				     ops[op]));
}

int db_cursor_del(struct db_cursor *cur)
{
	int rc;

	if (tracked(cur->txn, cur->tbl)) {
		MDB_val k, v;

		rc = db_err(mdb_cursor_get(cur->mdb, &k, &v, MDB_GET_CURRENT));
		if (!rc)
			rc = track_put(cur->txn, cur->tbl, (struct db_val *)&k,
				       NULL);
		if (rc)
			return rc;
	}
	return db_err(mdb_cursor_del(cur->mdb, 0));
}

/* ---- queueing ---------------------------------------------------------- */

static void db_queue(struct db *db, db_apply_fn apply, db_done_fn done,
		     void *arg, bool local)
{
	struct db_op *op = calloc(1, sizeof(*op));

	if (!op) {
		if (done)
			done(arg, -ENOMEM);
		return;
	}
	op->apply = apply;
	op->done = done;
	op->arg = arg;
	op->local = local;
	pthread_mutex_lock(&db->lock);
	*db->tail = op;
	db->tail = &op->next;
	pthread_cond_signal(&db->wake);
	pthread_mutex_unlock(&db->lock);
}

void db_submit(struct db *db, db_apply_fn apply, db_done_fn done, void *arg)
{
	db_queue(db, apply, done, arg, false);
}

struct db_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int err;
	db_apply_fn apply;
	void *arg;
};

static int db_wait_apply(struct db_txn *txn, void *p)
{
	struct db_wait *w = p;

	return w->apply(txn, w->arg);
}

static void db_wait_done(void *p, int err)
{
	struct db_wait *w = p;

	pthread_mutex_lock(&w->lock);
	w->err = err;
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static int db_write_as(struct db *db, db_apply_fn apply, void *arg, bool local)
{
	struct db_wait w = { .apply = apply, .arg = arg };

	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	db_queue(db, apply ? db_wait_apply : NULL, db_wait_done, &w, local);
	pthread_mutex_lock(&w.lock);
	while (!w.done)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	pthread_cond_destroy(&w.cond);
	pthread_mutex_destroy(&w.lock);
	return w.err;
}

int db_write(struct db *db, db_apply_fn apply, void *arg)
{
	return db_write_as(db, apply, arg, false);
}

/* ---- the replica (for pg.c) -------------------------------------------- */

int db_shared_table(struct db *db, const char *name)
{
	for (int i = 0; i < DB_TABLES_MAX; i++)
		if (db->tables[i].open && db->tables[i].shared &&
		    !strcmp(db->tables[i].name, name))
			return i;
	return -1;
}

const char *db_table_name(struct db *db, unsigned tbl)
{
	return tbl < DB_TABLES_MAX ? db->tables[tbl].name : "";
}

/* A change another node made, kept for its table's changed() hook. */
struct db_seen {
	unsigned tbl;
	struct db_val key, before, after; /* malloc'd; data NULL: none */
};

struct remote_apply {
	struct db *db;
	const struct db_remote *recs;
	size_t n;
	uint64_t seq;
	bool replace; /* a snapshot's first page: empty the tables first */
	struct db_seen *seen;
	size_t nseen;
};

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

static void seen_free(struct remote_apply *ra)
{
	for (size_t i = 0; i < ra->nseen; i++) {
		free(ra->seen[i].key.data);
		free(ra->seen[i].before.data);
		free(ra->seen[i].after.data);
	}
	free(ra->seen);
	ra->seen = NULL;
	ra->nseen = 0;
}

/* Raise the applied seq in _meta (two appliers: it never goes down). */
static int meta_raise_seq(struct db *db, MDB_txn *txn, uint64_t v)
{
	MDB_val k = { 3, "seq" }, d;
	uint64_t cur = 0;

	if (!mdb_get(txn, db->meta, &k, &d) && d.mv_size == sizeof(cur))
		memcpy(&cur, d.mv_data, sizeof(cur));
	if (cur >= v)
		return 0;
	d = (MDB_val){ sizeof(v), &v };
	return db_err(mdb_put(txn, db->meta, &k, &d, 0));
}

/* One record into the replica (if newer), remembered for changed(). */
static int remote_one(struct remote_apply *ra, MDB_txn *txn,
		      const struct db_remote *r, unsigned char *buf)
{
	struct db *db = ra->db;
	struct db_tinfo *ti = &db->tables[r->tbl];
	struct db_val key = { r->klen, (void *)r->key }, old, nv;
	struct db_seen *s = &ra->seen[ra->nseen];
	bool had;
	int rc;

	if (!ra->replace && r->ver && r->ver <= vers_get(db, txn, r->tbl, &key))
		return 0; /* this node has it already (or newer) */
	rc = db_err(mdb_get(txn, r->tbl, (MDB_val *)&key, (MDB_val *)&old));
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
	ra->nseen++;
	if (r->val)
		rc = db_err(mdb_put(txn, r->tbl, (MDB_val *)&key,
				    (MDB_val *)&nv, 0));
	else if (had)
		rc = db_err(mdb_del(txn, r->tbl, (MDB_val *)&key, NULL));
	if (rc)
		return rc;
	if (r->ver)
		return vers_put(db, txn, r->tbl, &key, r->ver);
	return vers_del(db, txn, r->tbl, &key); /* absent in the cluster */
}

static int remote_apply_fn(struct db_txn *t, void *arg)
{
	struct remote_apply *ra = arg;
	struct db *db = ra->db;
	unsigned char *buf = NULL;
	size_t max = 0;
	int rc = 0;

	seen_free(ra); /* a group run again starts over */
	if (ra->replace) {
		for (int i = 0; !rc && i < DB_TABLES_MAX; i++)
			if (db->tables[i].shared)
				rc = db_err(mdb_drop(t->mdb, i, 0));
		if (!rc)
			rc = db_err(mdb_drop(t->mdb, db->vers, 0));
		if (rc)
			return rc;
	}
	for (int i = 0; i < DB_TABLES_MAX; i++)
		if (db->tables[i].ops.max > max)
			max = db->tables[i].ops.max;
	ra->seen = calloc(ra->n ? ra->n : 1, sizeof(*ra->seen));
	buf = malloc(max ? max : 1);
	if (!ra->seen || !buf) {
		free(buf);
		return -ENOMEM;
	}
	for (size_t i = 0; !rc && i < ra->n; i++)
		rc = remote_one(ra, t->mdb, &ra->recs[i], buf);
	free(buf);
	if (!rc && ra->seq)
		rc = meta_raise_seq(db, t->mdb, ra->seq);
	return rc;
}

static int apply_as_local(struct db *db, struct remote_apply *ra)
{
	int rc;

	/* From the writer thread itself (a stale group): run inline. */
	if (pthread_equal(pthread_self(), db->writer)) {
		MDB_txn *txn;
		struct db_txn t = { .db = db };

		rc = db_err(mdb_txn_begin(db->env, NULL, 0, &txn));
		if (rc)
			return rc;
		t.mdb = txn;
		rc = remote_apply_fn(&t, ra);
		if (rc)
			mdb_txn_abort(txn);
		else
			rc = db_err(mdb_txn_commit(txn));
	} else {
		rc = db_write_as(db, remote_apply_fn, ra, true);
	}
	/* Now durable: tell the tables' owners what changed. */
	for (size_t i = 0; !rc && i < ra->nseen; i++) {
		struct db_seen *s = &ra->seen[i];
		struct db_tinfo *ti = &db->tables[s->tbl];

		if (ti->ops.changed)
			ti->ops.changed(ti->ops.ctx, s->tbl, &s->key,
					s->before.data ? &s->before : NULL,
					s->after.data ? &s->after : NULL);
	}
	seen_free(ra);
	return rc;
}

int db_apply_remote(struct db *db, const struct db_remote *recs, size_t n,
		    uint64_t seq)
{
	struct remote_apply ra = { .db = db, .recs = recs, .n = n, .seq = seq };

	return apply_as_local(db, &ra);
}

int db_load_snapshot(struct db *db, const struct db_remote *recs, size_t n,
		     uint64_t seq, bool first, bool last)
{
	struct remote_apply ra = { .db = db,
				   .recs = recs,
				   .n = n,
				   .seq = last ? seq : 0,
				   .replace = first };

	return apply_as_local(db, &ra);
}

int db_each_shared(struct db *db, uint64_t *count,
		   int (*fn)(void *ctx, const struct db_remote *rec), void *ctx)
{
	unsigned char *buf = NULL;
	struct db_txn *t;
	int rc = db_read_begin(db, &t);

	if (rc)
		return rc;
	*count = 0;
	for (int i = 0; i < DB_TABLES_MAX; i++) {
		MDB_stat st;

		if (db->tables[i].shared && !mdb_stat(t->mdb, i, &st))
			*count += st.ms_entries;
	}
	for (int i = 0; !rc && i < DB_TABLES_MAX; i++) {
		struct db_tinfo *ti = &db->tables[i];
		MDB_cursor *c = NULL;
		MDB_val k, v;

		if (!ti->shared)
			continue;
		free(buf);
		buf = ti->ops.max ? malloc(ti->ops.max) : NULL;
		if (ti->ops.max && !buf) {
			rc = -ENOMEM;
			break;
		}
		rc = db_err(mdb_cursor_open(t->mdb, i, &c));
		for (int op = MDB_FIRST; !rc && !mdb_cursor_get(c, &k, &v, op);
		     op = MDB_NEXT) {
			struct db_val sv;

			rc = project(ti, (struct db_val *)&v, buf, &sv);
			if (!rc)
				rc = fn(ctx,
					&(struct db_remote){ .tbl = (unsigned)i,
							     .key = k.mv_data,
							     .klen = k.mv_size,
							     .val = sv.data,
							     .vlen = sv.size,
							     .ver = 1 });
		}
		if (c)
			mdb_cursor_close(c);
	}
	free(buf);
	db_read_end(db, t);
	return rc;
}

struct mark_op {
	const char *id;
	uint64_t seq;
};

static int mark_fn(struct db_txn *t, void *arg)
{
	struct mark_op *m = arg;
	struct db *db = t->db;
	MDB_val k = { 7, "cluster" }, v = { strlen(m->id), (void *)m->id };
	int rc = db_err(mdb_put(t->mdb, db->meta, &k, &v, 0));

	for (int i = 0; !rc && i < DB_TABLES_MAX; i++) {
		MDB_cursor *c = NULL;
		MDB_val rk, rv;

		if (!db->tables[i].shared)
			continue;
		rc = db_err(mdb_cursor_open(t->mdb, i, &c));
		for (int op = MDB_FIRST;
		     !rc && !mdb_cursor_get(c, &rk, &rv, op); op = MDB_NEXT)
			rc = vers_put(db, t->mdb, (unsigned)i,
				      (struct db_val *)&rk, m->seq);
		if (c)
			mdb_cursor_close(c);
	}
	return rc ? rc : meta_raise_seq(db, t->mdb, m->seq);
}

int db_mark_replica(struct db *db, const char *id, uint64_t seq)
{
	struct mark_op m = { id, seq };
	int rc;

	if ((rc = dbi_open(db, "_vers", 0, &db->vers)) ||
	    (rc = dbi_open(db, "_meta", 0, &db->meta)))
		return rc;
	return db_write_as(db, mark_fn, &m, true);
}

int db_migrate(struct db *db, const struct db_cluster_opts *o, const void *key,
	       size_t klen, uint64_t next_id, db_progress_fn progress,
	       void *ctx)
{
	return db_pg_migrate(db, o, key, klen, next_id, progress, ctx);
}

bool db_shared_empty(struct db *db)
{
	struct db_txn *t;
	bool empty = true;

	if (db_read_begin(db, &t))
		return false;
	for (int i = 0; empty && i < DB_TABLES_MAX; i++) {
		MDB_stat st;

		if (db->tables[i].shared && !mdb_stat(t->mdb, i, &st))
			empty = st.ms_entries == 0;
	}
	db_read_end(db, t);
	return empty;
}

int db_local_seq(struct db *db, uint64_t *seq)
{
	struct db_txn *t;
	MDB_val k = { 3, "seq" }, v;
	int rc = db_read_begin(db, &t);

	if (rc)
		return rc;
	*seq = 0;
	rc = mdb_get(t->mdb, db->meta, &k, &v);
	if (!rc && v.mv_size == sizeof(*seq))
		memcpy(seq, v.mv_data, sizeof(*seq));
	db_read_end(db, t);
	return rc && rc != MDB_NOTFOUND ? db_err(rc) : 0;
}

int db_local_text(struct db *db, const char *name, char *buf, size_t cap)
{
	struct db_txn *t;
	MDB_val k = { strlen(name), (void *)name }, v;
	int rc = db_read_begin(db, &t);

	if (rc)
		return rc;
	buf[0] = '\0';
	rc = mdb_get(t->mdb, db->meta, &k, &v);
	if (!rc && v.mv_size < cap) {
		memcpy(buf, v.mv_data, v.mv_size);
		buf[v.mv_size] = '\0';
	}
	db_read_end(db, t);
	return rc && rc != MDB_NOTFOUND ? db_err(rc) : 0;
}

struct local_text {
	const char *name, *val;
};

static int set_text_fn(struct db_txn *t, void *arg)
{
	struct local_text *lt = arg;
	MDB_val k = { strlen(lt->name), (void *)lt->name },
		v = { strlen(lt->val), (void *)lt->val };

	return db_err(mdb_put(t->mdb, t->db->meta, &k, &v, 0));
}

int db_set_local_text(struct db *db, const char *name, const char *val)
{
	struct local_text lt = { name, val };

	return db_write_as(db, set_text_fn, &lt, true);
}

int db_local_cluster(struct db *db, char *id, size_t cap)
{
	return db_local_text(db, "cluster", id, cap);
}

int db_set_local_cluster(struct db *db, const char *id)
{
	return db_set_local_text(db, "cluster", id);
}
