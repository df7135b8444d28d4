/*
 * db/replica_priv.h - what the replica's files share: the replica itself,
 * its versions and texts (replica_vers.c, the bottom), the follower that
 * applies the other nodes' commits (replica_follow.c), and the commits and
 * the opening of a replica (replica.c, on top).  Private to those files.
 */
#ifndef MAPFS_DB_REPLICA_PRIV_H
#define MAPFS_DB_REPLICA_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "lmdb_int.h"
#include "replica_int.h"

#define COMMITTERS 4          /* commits of this node in flight at once */
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

/* replica_vers.c */

/* The "_vers" key of (tbl, key): the table's name, a NUL, the key. */
size_t replica_vers_key(const struct db_replica *rep, unsigned tbl,
			const struct db_val *key, unsigned char *buf,
			size_t cap);

/* The version of a shared record here; 0: none (absent, or never seen). */
uint64_t replica_vers_get(struct db_replica *rep, struct db_txn *txn,
			  unsigned tbl, const struct db_val *key);

/* Its version, ver, beside the record (a write of commit ver). */
int replica_vers_put(struct db_replica *rep, struct db_txn *txn, unsigned tbl,
		     const struct db_val *key, uint64_t ver);

/* The record (tbl, key) deleted by commit ver: its tombstone. */
int replica_tomb_put(struct db_replica *rep, struct db_txn *txn, unsigned tbl,
		     const struct db_val *key, uint64_t ver);

/* Forget its version (the record is gone, its tombstone too). */
int replica_vers_del(struct db_replica *rep, struct db_txn *txn, unsigned tbl,
		     const struct db_val *key);

/* A text of _meta into buf ("" if none), in txn or a read snapshot. */
int replica_text_get(struct db *db, unsigned meta, const char *name, char *buf,
		     size_t cap);

/* A text of _meta, in txn t. */
int replica_text_put(struct db_txn *t, unsigned meta, const char *name,
		     const char *val);

/* One text in a transaction of its own (start-up, stop).  0 or -errno. */
int replica_text_write(struct db *db, unsigned meta, const char *name,
		       const char *val);

/* The shared part of a local value (the whole of it without a hook). */
int replica_project(const struct db_tinfo *ti, const struct db_val *local,
		    unsigned char *buf, struct db_val *out);

/* The largest value a shared table's hooks make. */
size_t replica_max_val(const struct db *db);

/* replica_follow.c */

/* Load every record whole (a new replica, or one behind the log). */
int replica_load_all(struct db_replica *rep);

/* Read the log past the position and apply it.  0 or -errno. */
int replica_follow_once(struct db_replica *rep, bool direct);

/* The follower thread (arg: the replica): reads the log as commits are
 * announced (or every DB_PG_FOLLOW_POLL_MS) and hands batches to the
 * writer; prunes tombstones now and then; ends at f_stop. */
void *replica_follower_main(void *arg);

#endif
