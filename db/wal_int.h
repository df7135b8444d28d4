/*
 * db/wal_int.h - the local engine's log (wal.c) for lmdb.c: a commit of
 * an environment opened flushed is made durable by one record of its
 * puts and deletes, flushed once, instead of LMDB's two flushes.
 */
#ifndef MAPFS_DB_WAL_INT_H
#define MAPFS_DB_WAL_INT_H

#include "db_int.h"

/* A transaction's changes as the log will hold them (wal.c's). */
struct wal_buf {
	uint8_t *p;
	size_t len, cap;
	uint64_t nops;
	int oom; /* a change could not be kept: its commit checkpoints */
};

/* Before LMDB opens dir: if a meta page is newer than the last
 * checkpoint, both become the checkpoint's (the log replays the rest).
 * 0 or -errno. */
int db_wal_prepare(const char *dir);
/*
 * After it opened (MDB_NOSYNC): replay what the log holds past the
 * checkpoint and checkpoint.  With logging, log every commit from now
 * on (db->wal, the log made if missing); without (an unflushed
 * environment), the log's files are removed once the checkpoint made
 * everything durable: a later crash must not go back to it.  0 or
 * -errno (then db->wal is NULL).
 */
int db_wal_open(struct db *db, bool logging);
/* Checkpoint and stop logging (every write txn is done). */
void db_wal_close(struct db *db);
/* dbi is table name (LMDB flags flags): the log names it so. */
void db_wal_table(struct db *db, unsigned dbi, const char *name,
		  unsigned flags);
/* A change made in t (it succeeded in LMDB): kept for t's record. */
void db_wal_put(struct db_txn *t, unsigned dbi, const struct db_val *k,
		const struct db_val *v);
void db_wal_del(struct db_txn *t, unsigned dbi, const struct db_val *k);
void db_wal_drop(struct db_txn *t, unsigned dbi);
/* child committed into parent / t aborted: its changes follow. */
void db_wal_merge(struct db_txn *parent, struct db_txn *child);
void db_wal_discard(struct db_txn *t);
/*
 * t, top-level, committed in LMDB (not flushed): its record appended and
 * flushed (t->lazy: appended only; db_wal_flush), or a checkpoint made; t's changes are let go either way.  The
 * caller holds db->wal_lock from before LMDB's commit, so records follow
 * LMDB's order.  0 or -errno.
 */
int db_wal_commit(struct db *db, struct db_txn *t);
/* Whether a lazy commit's record is written and not yet flushed. */
bool db_wal_unflushed(struct db *db);
/* Flush the records of lazy commits (takes db->wal_lock).  0 or -errno
 * (then the log is given up, LMDB synced). */
int db_wal_flush(struct db *db);
/* The log's part of db_usage (under db->wal_lock). */
void db_wal_usage(struct db *db, struct db_usage *u);

#endif
