/*
 * db/lmdb.c - the metadata engine on LMDB: the environment, tables,
 * per-thread read snapshots, and the group-commit writer.
 *
 * One writer thread owns every write transaction.  Changes queued by any
 * thread are applied in arrival order, each in its own nested transaction
 * (so one failing change does not undo the others), and the whole group is
 * committed with one fsync.  A burst of creates from many cores therefore
 * costs one disk flush, not one each.
 */
#include "db/db.h"

#include <errno.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "metrics/metrics.h"

/* Most changes one transaction groups, so a flood cannot starve done(). */
#define DB_GROUP_MAX 4096

_Static_assert(sizeof(struct db_val) == sizeof(MDB_val) &&
		       offsetof(struct db_val, size) == offsetof(MDB_val, mv_size) &&
		       offsetof(struct db_val, data) == offsetof(MDB_val, mv_data),
	       "struct db_val is passed to LMDB as an MDB_val");

/* A read snapshot or a write transaction: the LMDB txn under it. */
struct db_txn {
	MDB_txn *mdb;
};

struct db_cursor {
	MDB_cursor *mdb;
};

struct db_op {
	struct db_op *next;
	db_apply_fn apply;
	db_done_fn done;
	void *arg;
	int err;
};

struct db {
	MDB_env *env;
	uint64_t id; /* tells a thread's cached read txn which env it is for */

	/* Every thread's cached read txn, so db_close can free them all. */
	pthread_mutex_t readers_lock;
	MDB_txn **readers;
	size_t nreaders, readers_cap;

	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct db_op *head, **tail;
	bool stopping;
	pthread_t writer;
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

static void db_run_group(struct db *db, struct db_op *ops)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(db->env, NULL, 0, &txn);

	if (rc == MDB_SUCCESS) {
		for (struct db_op *op = ops; op; op = op->next) {
			struct db_txn child;

			op->err = db_err(mdb_txn_begin(db->env, txn, 0,
						       &child.mdb));
			if (op->err)
				continue;
			op->err = op->apply ? op->apply(&child, op->arg) : 0;
			if (op->err)
				mdb_txn_abort(child.mdb);
			else
				op->err = db_err(mdb_txn_commit(child.mdb));
		}
		rc = mdb_txn_commit(txn); /* syncs: the group is durable */
		metrics_inc(MET_DB_COMMITS);
	}
	while (ops) {
		struct db_op *next = ops->next;

		metrics_inc(MET_DB_CHANGES);
		if (ops->done)
			ops->done(ops->arg, rc ? db_err(rc) : ops->err);
		free(ops);
		ops = next;
	}
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

int db_open(const char *dir, size_t mapsize, unsigned maxtables,
	    struct db **out)
{
	static uint64_t next_id; /* distinct ids across opens in one process */
	struct db *db = calloc(1, sizeof(*db));
	int rc;

	if (!db)
		return -ENOMEM;
	if (mkdir(dir, 0700) && errno != EEXIST) {
		rc = -errno;
		goto out_free;
	}
	rc = db_err(mdb_env_create(&db->env));
	if (rc)
		goto out_free;
	if ((rc = db_err(mdb_env_set_mapsize(db->env, mapsize))) ||
	    (rc = db_err(mdb_env_set_maxdbs(db->env, maxtables))) ||
	    (rc = db_err(mdb_env_set_maxreaders(db->env, 1024))))
		goto out_env;
	/* MDB_NOTLS: read txns belong to our per-thread cache, not to LMDB's. */
	rc = db_err(mdb_env_open(db->env, dir, MDB_NOTLS, 0600));
	if (rc)
		goto out_env;
	db->id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
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
out_env:
	mdb_env_close(db->env);
out_free:
	free(db);
	return rc;
}

void db_close(struct db *db)
{
	if (!db)
		return;
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
	free(db);
}

int db_table_open(struct db *db, const char *name, unsigned flags,
		  db_table *out)
{
	MDB_txn *txn;
	MDB_dbi dbi;
	int rc = mdb_txn_begin(db->env, NULL, 0, &txn);

	if (rc)
		return db_err(rc);
	rc = mdb_dbi_open(txn, name,
			  ((flags & DB_INTKEY) ? MDB_INTEGERKEY : 0) | MDB_CREATE,
			  &dbi);
	*out = dbi;
	if (rc) {
		mdb_txn_abort(txn);
		return db_err(rc);
	}
	return db_err(mdb_txn_commit(txn));
}

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
		r->txn.mdb = NULL;
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
	return db_err(mdb_get(txn->mdb, tbl, (MDB_val *)key, (MDB_val *)val));
}

int db_put(struct db_txn *txn, db_table tbl, const struct db_val *key,
	   const struct db_val *val, unsigned flags)
{
	unsigned f = ((flags & DB_NOOVERWRITE) ? MDB_NOOVERWRITE : 0) |
		     ((flags & DB_APPEND) ? MDB_APPEND : 0);

	return db_err(mdb_put(txn->mdb, tbl, (MDB_val *)key, (MDB_val *)val,
			      f));
}

int db_del(struct db_txn *txn, db_table tbl, const struct db_val *key)
{
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

int db_cursor_get(struct db_cursor *cur, struct db_val *key,
		  struct db_val *val, enum db_cursor_op op)
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
	return db_err(mdb_cursor_del(cur->mdb, 0));
}

void db_submit(struct db *db, db_apply_fn apply, db_done_fn done, void *arg)
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
	pthread_mutex_lock(&db->lock);
	*db->tail = op;
	db->tail = &op->next;
	pthread_cond_signal(&db->wake);
	pthread_mutex_unlock(&db->lock);
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

int db_write(struct db *db, db_apply_fn apply, void *arg)
{
	struct db_wait w = { .apply = apply, .arg = arg };

	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	db_submit(db, apply ? db_wait_apply : NULL, db_wait_done, &w);
	pthread_mutex_lock(&w.lock);
	while (!w.done)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	pthread_cond_destroy(&w.cond);
	pthread_mutex_destroy(&w.lock);
	return w.err;
}
