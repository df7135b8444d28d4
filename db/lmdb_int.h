/*
 * db/lmdb_int.h - the local engine (lmdb.c) for the layers above it: the
 * environment, write transactions, and reads and writes that no observer
 * sees (the layers' own bookkeeping).  What db.h promises of reads,
 * db_get/put/del and cursors is lmdb.c's too.
 */
#ifndef MAPFS_DB_LMDB_INT_H
#define MAPFS_DB_LMDB_INT_H

#include "db_int.h"

/*
 * Open (creating) the environment in dir for db: the directory's lock
 * (-EBUSY: another process has it), map size, at most maxtables tables of
 * the caller's beside the layers' own, commits flushed or not
 * (DB_OPEN_UNFLUSHED; db->dropped if it was found torn and started
 * empty).  0 or -errno.
 */
int db_env_open(struct db *db, const char *dir, size_t mapsize,
		unsigned maxtables, bool unflushed);

/* Close it; every thread that read has stopped.  Frees their txns. */
void db_env_close(struct db *db);

/* A table of the layers' own (name begins with '_'), made if missing. */
int db_env_table(struct db *db, const char *name, unsigned *out);

/*
 * Begin a write transaction, inside parent (a nested one) or alone
 * (parent NULL: LMDB lets one run at a time; a second waits).  obs, if
 * any, is told of every read and write made through db_get/put/del and
 * cursors on it.  0 or -errno.
 */
int db_txn_begin(struct db *db, struct db_txn *parent, const struct db_obs *obs,
		 struct db_txn *out);
/* Commit (a top-level one durably, unless the environment is unflushed:
 * then the kernel has it, and a crash of the machine may lose it).  0 or
 * -errno. */
int db_txn_commit(struct db_txn *t);
void db_txn_abort(struct db_txn *t);

/* Unobserved get, put (flags of db_put) and delete (-ENOENT is 0). */
int db_raw_get(struct db_txn *t, unsigned tbl, const struct db_val *key,
	       struct db_val *val);
int db_raw_put(struct db_txn *t, unsigned tbl, const struct db_val *key,
	       const struct db_val *val, unsigned flags);
int db_raw_del(struct db_txn *t, unsigned tbl, const struct db_val *key);

/* Empty a table (a full copy of the cluster replaces them).  0/-errno. */
int db_raw_drop(struct db_txn *t, unsigned tbl);

/*
 * fn(ctx, key, val) for every entry of tbl in a read snapshot (or the
 * given txn, if not NULL); the first non-zero return stops the walk.
 */
int db_raw_each(struct db *db, struct db_txn *t, unsigned tbl,
		int (*fn)(void *ctx, const struct db_val *key,
			  const struct db_val *val),
		void *ctx);

/* The number of entries of tbl in t.  0 or -errno. */
int db_raw_count(struct db_txn *t, unsigned tbl, uint64_t *n);

#endif
