/*
 * db/db_int.h - what every file of db/ shares; not for other rooms.
 *
 * db/ is in layers (docs/ARCHITECTURE.md, "db layers"), each calling only
 * the ones below it through their private header X_int.h:
 *
 *   track, snap   records a change read and wrote; PostgreSQL snapshots
 *   lmdb          the local engine: LMDB tables, read snapshots, write
 *                 transactions whose reads and writes an observer is told
 *                 of; knows nothing of a cluster
 *   pg            the cluster engine: PostgreSQL over libpq (schema,
 *                 commits, the change log, nodes, services); knows
 *                 nothing of LMDB
 *   replica       a node's local replica of the cluster's records: their
 *                 versions, following the log into LMDB, the committers
 *                 that send changes to PostgreSQL
 *   writer        the one thread that changes LMDB: groups of changes,
 *                 alone committed at once, in a cluster committed there
 *                 first (several in flight) and then here
 *   db            the room's door (db.h): open, close, the cluster's
 *                 services
 *
 * This header holds what the layers share: the engine's struct db, a
 * write or read transaction, and the tables.
 */
#ifndef MAPFS_DB_INT_H
#define MAPFS_DB_INT_H

#include <errno.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db.h"

#define DB_TABLES_MAX 32
#define DB_TABLE_NAME_MAX 32

/* What the engine knows of one table. */
struct db_tinfo {
	char name[DB_TABLE_NAME_MAX];
	bool open;
	bool shared; /* DB_SHARED: replicated through the cluster */
	struct db_share_ops ops;
};

/*
 * What a write transaction's reads and writes are told to (lmdb.c calls
 * it; the writer sets it): the writer learns from it which records a
 * change touched and what it wrote, the cluster what it must check and
 * send.  read runs after a lookup (found or not), write before a put or
 * a delete (val NULL); a non-zero return fails that call.
 */
struct db_obs {
	int (*read)(void *ctx, struct db_txn *txn, unsigned tbl,
		    const struct db_val *key);
	int (*write)(void *ctx, struct db_txn *txn, unsigned tbl,
		     const struct db_val *key, const struct db_val *val,
		     unsigned flags);
	void *ctx;
};

/* An MDB_* return code as -errno: the one table (lmdb.c and wal.c). */
static inline int db_err(int rc)
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

/* A read snapshot or a write transaction: the LMDB txn under it. */
struct wal_buf;

struct db_txn {
	MDB_txn *mdb;
	struct db *db;
	const struct db_obs *obs; /* write txns the writer watches, else NULL */
	bool nested;              /* a write txn inside another */
	struct db_txn *parent;    /* nested: the one it commits into */
	struct wal_buf *wb;       /* its changes for the log (wal.c) */
	bool lost;                /* one could not be kept there */
	bool lazy; /* top-level: its record need not be flushed before the
		      commit returns (db_submit_lazy) */
};

struct db_writer;
struct db_replica;
struct db_wal;

struct db {
	/* lmdb.c: the engine */
	MDB_env *env;
	char *dir;                /* the environment's directory */
	bool unflushed;           /* DB_OPEN_UNFLUSHED: commits not flushed */
	bool dropped;             /* found torn at open and started empty */
	int lock_fd;              /* flock'ed: one process per directory */
	struct db_wal *wal;       /* wal.c: commits logged, or NULL */
	pthread_mutex_t wal_lock; /* a top-level commit and its record */
	bool wal_failed;          /* the log given up after an error */
	uint64_t wal_failures;    /* its checkpoints or records that failed */
	uint64_t id; /* tells a thread's cached read txn which env it is for */
	struct db_tinfo tables[DB_TABLES_MAX];
	pthread_mutex_t readers_lock;
	MDB_txn **readers; /* threads' read txns, one slot each */
	size_t nreaders, readers_cap;
	struct db *env_next; /* lmdb.c's list of open environments */

	/* writer.c: the thread that changes the tables */
	struct db_writer *w;

	/* replica.c and db.c: the cluster, once db_start() joined it */
	struct db_cluster_opts *copts;
	struct db_replica *rep;
	db_msg_fn on_msg;
	void *on_msg_ctx;
	struct {
		db_node_fn fn;
		void *ctx;
	} on_down[DB_NODE_HANDLERS];
	pthread_mutex_t on_down_lock;
};

#endif
