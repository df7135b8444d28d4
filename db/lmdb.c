/*
 * db/lmdb.c - the local engine: an LMDB environment, its tables, per-thread
 * read snapshots and write transactions.  It knows nothing of the writer
 * thread or of a cluster: the writer watches a change's reads and writes
 * through the observer it sets on the change's transaction (db_obs).
 *
 * Reads: every thread gets its own reusable read snapshot, so readers
 * never take a lock and never wait for a writer.
 */
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
#include "lmdb_int.h"
#include "metrics/metrics.h"
#include "wal_int.h"

_Static_assert(sizeof(struct db_val) == sizeof(MDB_val) &&
		       offsetof(struct db_val, size) ==
			       offsetof(MDB_val, mv_size) &&
		       offsetof(struct db_val, data) ==
			       offsetof(MDB_val, mv_data),
	       "struct db_val is passed to LMDB as an MDB_val");

/* The layers' own tables beside the caller's (_vers, _meta). */
#define DB_OWN_TABLES 3

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

static void envs_add(struct db *db);
static void envs_del(struct db *db);

/* ---- commits not flushed (DB_OPEN_UNFLUSHED) ----------------------------
 *
 * LMDB without MDB_NOSYNC flushes every commit (its pages, then its meta
 * page).  Without the flushes a crash of the process still loses nothing
 * (the kernel has every write, in order), but a crash of the machine can
 * leave the files torn: a meta page on disk whose pages are not.  So an
 * environment opened unflushed leaves a note, UNFLUSHED_NOTE, naming the
 * machine's boot, flushed before its first commit and removed once a
 * clean close flushed everything.  An open that finds the note of another
 * boot cannot trust the files and starts empty (db_dropped()).
 */
#define UNFLUSHED_NOTE "unflushed"

/* This boot of the machine as the kernel names it, or "" if unknown. */
static void boot_id(char *out, size_t cap)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	out[0] = '\0';
	if (f) {
		if (!fgets(out, (int)cap, f))
			out[0] = '\0';
		fclose(f);
	}
	out[strcspn(out, "\n")] = '\0';
}

/* dir/name into out; -ENAMETOOLONG if it does not fit. */
static int dir_path(const char *dir, const char *name, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* fsync directory dir, so that a name made or removed in it is durable. */
static int dir_sync(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd))
		rc = -errno;
	close(fd);
	return rc;
}

/*
 * Before the environment opens (the directory's lock held): if an
 * unflushed open of an earlier boot left its note, remove the
 * environment's files (*dropped).  A note of this boot means only the
 * process died: the files are whole.  0 or -errno.
 */
static int unflushed_check(const char *dir, bool *dropped)
{
	static const char *const files[] = { "data.mdb", "lock.mdb",
					     UNFLUSHED_NOTE, "wal",
					     "wal.ckpt" };
	char note[4096], was[64] = "", now[64];
	FILE *f;
	int rc;

	*dropped = false;
	if ((rc = dir_path(dir, UNFLUSHED_NOTE, note, sizeof(note))))
		return rc;
	if (!(f = fopen(note, "re")))
		return errno == ENOENT ? 0 : -errno;
	if (!fgets(was, sizeof(was), f))
		was[0] = '\0';
	fclose(f);
	was[strcspn(was, "\n")] = '\0';
	boot_id(now, sizeof(now));
	if (now[0] && !strcmp(was, now))
		return 0;
	log_warn("state %s: the machine restarted while its last commits "
		 "were not flushed (boot %s, now %s): the files may be torn; "
		 "starting from an empty database",
		 dir, was[0] ? was : "?", now[0] ? now : "?");
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char p[4096];

		if ((rc = dir_path(dir, files[i], p, sizeof(p))))
			return rc;
		if (unlink(p) && errno != ENOENT)
			return -errno;
	}
	*dropped = true;
	return dir_sync(dir);
}

/*
 * After the environment opened.  Unflushed: the note of this boot is on
 * disk before the first commit that is not flushed.  Flushed: whatever an
 * unflushed open of this boot left is flushed now, then its note goes.
 */
static int unflushed_note(struct db *db)
{
	char note[4096], now[64];
	int fd, rc;

	if ((rc = dir_path(db->dir, UNFLUSHED_NOTE, note, sizeof(note))))
		return rc;
	if (!db->unflushed) {
		if (access(note, F_OK))
			return errno == ENOENT ? 0 : -errno;
		if ((rc = db_err(mdb_env_sync(db->env, 1))))
			return rc;
		if (unlink(note))
			return -errno;
		return dir_sync(db->dir);
	}
	boot_id(now, sizeof(now));
	if (!now[0]) {
		/* Without the boot's name a torn file could not be told. */
		log_warn("state %s: the machine's boot id is unknown: every "
			 "commit is flushed",
			 db->dir);
		db->unflushed = false;
		return 0; /* the log flushes them (db_wal_open) */
	}
	fd = open(note, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = dprintf(fd, "%s\n", now) < 0 || fsync(fd) ? -errno : 0;
	close(fd);
	if (!rc)
		rc = dir_sync(db->dir);
	return rc; /* MDB_NOSYNC since the open */
}

/* A clean close of an unflushed environment: flushed, the note gone. */
static void unflushed_close(struct db *db)
{
	char note[4096];
	int rc;

	if (!db->unflushed)
		return;
	if ((rc = db_err(mdb_env_sync(db->env, 1))) ||
	    (rc = dir_path(db->dir, UNFLUSHED_NOTE, note, sizeof(note))) ||
	    (unlink(note) && (rc = -errno)) || (rc = dir_sync(db->dir)))
		log_warn("state %s: flushing at close: %s (the next start "
			 "after a restart of the machine loads it again)",
			 db->dir, strerror(-rc));
}

/* ---- the environment ------------------------------------------------- */

int db_env_open(struct db *db, const char *dir, size_t mapsize,
		unsigned maxtables, bool unflushed)
{
	static uint64_t next_id; /* distinct ids across opens in one process */
	char lockpath[4096];
	int rc;

	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	/* LMDB lets processes share an env; a gateway's state must not be
	 * (two writers of one cache, one node name twice): the second one
	 * is refused.  The lock goes with the process, however it ends. */
	rc = snprintf(lockpath, sizeof(lockpath), "%s/gateway.lock", dir);
	if (rc < 0 || (size_t)rc >= sizeof(lockpath))
		return -ENAMETOOLONG;
	db->lock_fd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (db->lock_fd < 0)
		return -errno;
	if (flock(db->lock_fd, LOCK_EX | LOCK_NB)) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		goto out_lock;
	}
	if ((rc = unflushed_check(dir, &db->dropped)))
		goto out_lock;
	if (!(db->dir = strdup(dir))) {
		rc = -ENOMEM;
		goto out_lock;
	}
	db->unflushed = unflushed;
	rc = db_err(mdb_env_create(&db->env));
	if (rc)
		goto out_lock;
	if ((rc = db_err(mdb_env_set_mapsize(db->env, mapsize))) ||
	    (rc = db_err(
		     mdb_env_set_maxdbs(db->env, maxtables + DB_OWN_TABLES))) ||
	    (rc = db_err(mdb_env_set_maxreaders(db->env, 1024))))
		goto out_env;
	/* The log (wal.c) makes each commit durable, not LMDB; what a
	 * crash left in it is replayed whichever way this open goes. */
	if ((rc = db_wal_prepare(dir)))
		goto out_env;
	/* MDB_NOTLS: read txns belong to our per-thread cache, not to LMDB's. */
	rc = db_err(mdb_env_open(db->env, dir, MDB_NOTLS | MDB_NOSYNC, 0600));
	if (!rc)
		rc = unflushed_note(db);
	pthread_mutex_init(&db->wal_lock, NULL);
	if (!rc)
		rc = db_wal_open(db, !db->unflushed);
	if (rc) {
		pthread_mutex_destroy(&db->wal_lock);
		goto out_env;
	}
	db->id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
	pthread_mutex_init(&db->readers_lock, NULL);
	envs_add(db);
	return 0;

out_env:
	mdb_env_close(db->env);
	db->env = NULL;
out_lock:
	free(db->dir);
	db->dir = NULL;
	close(db->lock_fd);
	db->lock_fd = -1;
	return rc;
}

void db_env_close(struct db *db)
{
	/* Threads that read are stopped by now; their txns are freed here
	 * (a thread that exits later finds the env gone). */
	envs_del(db);
	for (size_t i = 0; i < db->nreaders; i++)
		mdb_txn_abort(db->readers[i]);
	free(db->readers);
	db->readers = NULL;
	db->nreaders = 0;
	pthread_mutex_destroy(&db->readers_lock);
	db_wal_close(db);
	pthread_mutex_destroy(&db->wal_lock);
	unflushed_close(db);
	mdb_env_close(db->env);
	db->env = NULL;
	free(db->dir);
	db->dir = NULL;
	close(db->lock_fd);
	db->lock_fd = -1;
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
	/* Not logged: a record that names the table makes it again. */
	rc = db_err(mdb_txn_commit(txn));
	if (!rc)
		db_wal_table(db, *out, name, mdb_flags);
	return rc;
}

int db_env_table(struct db *db, const char *name, unsigned *out)
{
	MDB_dbi dbi;
	int rc;

	if (name[0] != '_')
		return -EINVAL;
	rc = dbi_open(db, name, 0, &dbi);
	if (!rc)
		*out = dbi;
	return rc;
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

/* ---- write transactions ----------------------------------------------- */

int db_txn_begin(struct db *db, struct db_txn *parent, const struct db_obs *obs,
		 struct db_txn *out)
{
	*out = (struct db_txn){
		.db = db, .obs = obs, .nested = parent != NULL, .parent = parent
	};
	return db_err(mdb_txn_begin(db->env, parent ? parent->mdb : NULL, 0,
				    &out->mdb));
}

int db_txn_commit(struct db_txn *t)
{
	struct db *db = t->db;
	int rc;

	if (t->nested || !db->wal) {
		rc = db_err(mdb_txn_commit(t->mdb));
		if (t->nested && !rc)
			db_wal_merge(t->parent, t);
		else
			db_wal_discard(t);
		/* Without the log (given up) a top-level commit flushes its
		 * pages, then its meta page. */
		if (!t->nested && !db->unflushed)
			metrics_add(MET_FLUSH_DB, 2);
		t->mdb = NULL;
		return rc;
	}
	/* The record follows LMDB's order of commits. */
	pthread_mutex_lock(&db->wal_lock);
	rc = db_err(mdb_txn_commit(t->mdb));
	if (!rc)
		rc = db_wal_commit(db, t);
	else
		db_wal_discard(t);
	pthread_mutex_unlock(&db->wal_lock);
	t->mdb = NULL;
	return rc;
}

void db_txn_abort(struct db_txn *t)
{
	if (t->mdb)
		mdb_txn_abort(t->mdb);
	t->mdb = NULL;
	db_wal_discard(t);
}

int db_raw_get(struct db_txn *t, unsigned tbl, const struct db_val *key,
	       struct db_val *val)
{
	return db_err(mdb_get(t->mdb, tbl, (MDB_val *)key, (MDB_val *)val));
}

static unsigned mdb_flags_of(unsigned flags)
{
	return ((flags & DB_NOOVERWRITE) ? MDB_NOOVERWRITE : 0) |
	       ((flags & DB_APPEND) ? MDB_APPEND : 0);
}

int db_raw_put(struct db_txn *t, unsigned tbl, const struct db_val *key,
	       const struct db_val *val, unsigned flags)
{
	int rc = db_err(mdb_put(t->mdb, tbl, (MDB_val *)key, (MDB_val *)val,
				mdb_flags_of(flags)));

	if (!rc)
		db_wal_put(t, tbl, key, val);
	return rc;
}

int db_raw_del(struct db_txn *t, unsigned tbl, const struct db_val *key)
{
	int rc = mdb_del(t->mdb, tbl, (MDB_val *)key, NULL);

	if (!rc)
		db_wal_del(t, tbl, key);
	return rc == MDB_NOTFOUND ? 0 : db_err(rc);
}

int db_raw_drop(struct db_txn *t, unsigned tbl)
{
	int rc = db_err(mdb_drop(t->mdb, tbl, 0));

	if (!rc)
		db_wal_drop(t, tbl);
	return rc;
}

int db_raw_count(struct db_txn *t, unsigned tbl, uint64_t *n)
{
	MDB_stat st;
	int rc = db_err(mdb_stat(t->mdb, tbl, &st));

	*n = rc ? 0 : st.ms_entries;
	return rc;
}

int db_raw_each(struct db *db, struct db_txn *t, unsigned tbl,
		int (*fn)(void *ctx, const struct db_val *key,
			  const struct db_val *val),
		void *ctx)
{
	struct db_txn *rt = t;
	MDB_cursor *c = NULL;
	MDB_val k, v;
	int rc = t ? 0 : db_read_begin(db, &rt);

	if (rc)
		return rc;
	rc = db_err(mdb_cursor_open(rt->mdb, tbl, &c));
	for (int op = MDB_FIRST; !rc && !mdb_cursor_get(c, &k, &v, op);
	     op = MDB_NEXT)
		rc = fn(ctx, (struct db_val *)&k, (struct db_val *)&v);
	if (c)
		mdb_cursor_close(c);
	if (!t)
		db_read_end(db, rt);
	return rc;
}

/* ---- reads ------------------------------------------------------------- *
 *
 * A thread's read txn holds one of LMDB's reader slots (MDB_NOTLS: the
 * slot is the txn's, not the thread's) from its first read until it is
 * aborted.  Threads come and go (each pass of parallel uploads starts
 * its own): a slot left by every thread that ever read filled the table
 * (1,024) after ~16,000 uploads, and every read and checkpoint after
 * that failed with MDB_READERS_FULL.  So a thread's exit gives its slot
 * back (reader_key's destructor), and so does a switch to another env
 * or a failed renew.  The open envs are listed so that an exit after
 * db_close, which aborts what is left, touches nothing freed.
 */

static pthread_mutex_t envs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct db *envs; /* open environments, through db->env_next */
static pthread_once_t reader_once = PTHREAD_ONCE_INIT;
static pthread_key_t reader_key;
static bool reader_key_ok;

/* Give r's txn back: out of its env's list, its slot freed.  The env
 * may be closed already: then db_env_close aborted it. */
static void reader_release(struct db_reader *r)
{
	MDB_txn *txn = r->txn.mdb;

	r->txn.mdb = NULL;
	r->depth = 0;
	if (!txn)
		goto out;
	pthread_mutex_lock(&envs_lock);
	for (struct db *db = envs; db; db = db->env_next) {
		if (db->id != r->db_id)
			continue;
		pthread_mutex_lock(&db->readers_lock);
		for (size_t i = 0; i < db->nreaders; i++) {
			if (db->readers[i] != txn)
				continue;
			db->readers[i] = db->readers[--db->nreaders];
			mdb_txn_abort(txn);
			break;
		}
		pthread_mutex_unlock(&db->readers_lock);
		break;
	}
	pthread_mutex_unlock(&envs_lock);
out:
	r->db_id = 0;
}

/* Thread exit (reader_key's value is the thread's tl_reader). */
static void reader_exit(void *p)
{
	reader_release(p);
}

static void reader_key_init(void)
{
	reader_key_ok = pthread_key_create(&reader_key, reader_exit) == 0;
}

static void envs_add(struct db *db)
{
	pthread_mutex_lock(&envs_lock);
	db->env_next = envs;
	envs = db;
	pthread_mutex_unlock(&envs_lock);
}

static void envs_del(struct db *db)
{
	pthread_mutex_lock(&envs_lock);
	for (struct db **p = &envs; *p; p = &(*p)->env_next)
		if (*p == db) {
			*p = db->env_next;
			break;
		}
	pthread_mutex_unlock(&envs_lock);
}

/* A new read txn for the calling thread: registered with db, and given
 * back when the thread exits.  0 or an MDB_* code. */
static int reader_new(struct db *db, struct db_reader *r)
{
	int rc;

	pthread_once(&reader_once, reader_key_init);
	/* Without the exit's hook a thread's slot would outlive it. */
	if (!reader_key_ok || pthread_setspecific(reader_key, r))
		return ENOMEM;
	r->db_id = db->id;
	r->txn = (struct db_txn){ .db = db };
	rc = mdb_txn_begin(db->env, NULL, MDB_RDONLY, &r->txn.mdb);
	if (rc)
		return rc;
	pthread_mutex_lock(&db->readers_lock);
	if (db->nreaders == db->readers_cap) {
		size_t cap = db->readers_cap ? db->readers_cap * 2 : 16;
		MDB_txn **n = realloc(db->readers, cap * sizeof(*n));

		if (!n) {
			pthread_mutex_unlock(&db->readers_lock);
			mdb_txn_abort(r->txn.mdb);
			r->txn.mdb = NULL;
			return ENOMEM;
		}
		db->readers = n;
		db->readers_cap = cap;
	}
	db->readers[db->nreaders++] = r->txn.mdb;
	pthread_mutex_unlock(&db->readers_lock);
	return 0;
}

static int count_reader(const char *msg, void *ctx)
{
	/* One line per slot in use, after a header line. */
	if (strncmp(msg, "(no active", 10) != 0)
		(*(unsigned *)ctx)++;
	return 0;
}

void db_usage(struct db *db, struct db_usage *u)
{
	MDB_envinfo info = { 0 };
	MDB_stat st = { 0 };
	unsigned lines = 0, max = 0;

	*u = (struct db_usage){ 0 };
	mdb_env_info(db->env, &info);
	mdb_env_stat(db->env, &st);
	mdb_env_get_maxreaders(db->env, &max);
	mdb_reader_list(db->env, count_reader, &lines);
	u->map_bytes = info.me_mapsize;
	u->map_used_bytes = (uint64_t)(info.me_last_pgno + 1) * st.ms_psize;
	u->readers = lines ? lines - 1 : 0;
	u->readers_max = max;
	pthread_mutex_lock(&db->wal_lock);
	db_wal_usage(db, u);
	pthread_mutex_unlock(&db->wal_lock);
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
		reader_release(r); /* another env's, if any */
		rc = reader_new(db, r);
	}
	if (rc) {
		reader_release(r);
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

	/* What a change decided on is the writer's to know of. */
	if (txn->obs && (!rc || rc == -ENOENT)) {
		int orc = txn->obs->read(txn->obs->ctx, txn, tbl, key);

		if (orc)
			return orc;
	}
	return rc;
}

/* ---- writes ------------------------------------------------------------ */

int db_put(struct db_txn *txn, db_table tbl, const struct db_val *key,
	   const struct db_val *val, unsigned flags)
{
	struct db_val old;
	int rc;

	if (!txn->obs)
		return db_raw_put(txn, tbl, key, val, flags);
	/* A put that must not overwrite and would: a read that found it. */
	if ((flags & DB_NOOVERWRITE) && !db_raw_get(txn, tbl, key, &old)) {
		rc = txn->obs->read(txn->obs->ctx, txn, tbl, key);
		return rc ? rc : -EEXIST;
	}
	if ((rc = txn->obs->write(txn->obs->ctx, txn, tbl, key, val, flags)))
		return rc;
	return db_raw_put(txn, tbl, key, val, flags);
}

int db_del(struct db_txn *txn, db_table tbl, const struct db_val *key)
{
	int rc;

	if (txn->obs &&
	    (rc = txn->obs->write(txn->obs->ctx, txn, tbl, key, NULL, 0)))
		return rc;
	rc = db_err(mdb_del(txn->mdb, tbl, (MDB_val *)key, NULL));
	if (!rc)
		db_wal_del(txn, tbl, key);
	return rc;
}

int db_count(struct db_txn *txn, db_table tbl, uint64_t *n)
{
	return db_raw_count(txn, tbl, n);
}

struct db_cursor {
	MDB_cursor *mdb;
	struct db_txn *txn;
	unsigned tbl;
};

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
	const struct db_obs *obs = cur->txn->obs;
	MDB_val k, v;
	int rc = db_err(mdb_cursor_get(cur->mdb, &k, &v, MDB_GET_CURRENT));

	if (!rc && obs)
		rc = obs->write(obs->ctx, cur->txn, cur->tbl,
				(struct db_val *)&k, NULL, 0);
	if (rc)
		return rc;
	/* Logged first: the key is gone from the page once deleted (a
	 * delete that fails fails its change, whose txn is aborted). */
	db_wal_del(cur->txn, cur->tbl, (struct db_val *)&k);
	return db_err(mdb_cursor_del(cur->mdb, 0));
}
