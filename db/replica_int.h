/*
 * db/replica_int.h - a node's local replica of the cluster's records
 * (replica.c), for the writer above it.
 *
 * The tables opened DB_SHARED hold, in LMDB, the records PostgreSQL
 * keeps, each with the version (the number of the commit that wrote it)
 * in the table "_vers".  A change's reads and writes of them are tracked
 * (db_replica_ver/change) and committed in PostgreSQL by one of the
 * node's committers (db_replica_commit), several at once; the writer then
 * writes them here and db_replica_committed() gives them the commit's
 * version.  Other nodes' commits come from the follower thread as
 * batches the writer applies (db_replica_take/apply/applied); the
 * follower's position (a snapshot, "_meta" cursor) moves once a whole
 * read of the log is applied, and db_replica_covers() tells the writer
 * when a change that met a newer record may run again.
 */
#ifndef MAPFS_DB_REPLICA_INT_H
#define MAPFS_DB_REPLICA_INT_H

#include "db_int.h"
#include "pg_int.h"
#include "snap_int.h"
#include "track_int.h"

struct db_replica;

/*
 * Join the cluster: connect, register the node, bring the local replica
 * up to date (a full copy if it is new, of another cluster, or behind the
 * log), start the committers and the follower.  Blocks.  0, or -errno
 * with the reason logged.
 */
int db_replica_open(struct db *db, const struct db_cluster_opts *o,
		    const struct db_pg_sinks *sinks, struct db_replica **out);

/* Stop the follower: no batch is handed over and no sink called after. */
void db_replica_stop_follower(struct db_replica *rep);

/* Stop the committers (a commit waiting to learn a lost answer gives up)
 * and leave the cluster.  Nothing may be in flight afterwards. */
void db_replica_close(struct db_replica *rep);

struct db_pg *db_replica_pg(struct db_replica *rep);
/* How long ago the follower last read the log to its end and applied
 * it (ms; 0 before the first time).  Any thread. */
uint64_t db_replica_age_ms(struct db_replica *rep);

/*
 * A completion (set by the writer): a commit's answer or a batch of the
 * follower's is waiting; runs on a committer's or the follower's thread.
 */
void db_replica_set_wake(struct db_replica *rep, void (*wake)(void *ctx),
			 void *ctx);

/* ---- tracking, on the writer's thread ---- */

/* The version of a shared record this replica has, as a commit expects
 * it (0: none, or deleted). */
uint64_t db_replica_ver(struct db_replica *rep, struct db_txn *txn,
			unsigned tbl, const struct db_val *key);

/* The bytes db_replica_change() may put in its buf. */
size_t db_replica_val_max(const struct db_replica *rep);

/*
 * A write of a shared record (val NULL: a delete), before it is made in
 * txn: *shared the value as the cluster shares it (projected, in buf of
 * db_replica_val_max() bytes); *changes false when the cluster's part
 * stays as it was (only the node's own fields change, or a delete of
 * nothing).  0 or -errno.
 */
int db_replica_change(struct db_replica *rep, struct db_txn *txn, unsigned tbl,
		      const struct db_val *key, const struct db_val *val,
		      unsigned char *buf, struct db_val *shared, bool *changes);

/* ---- commits ---- */

struct db_commit {
	struct db_commit *next;
	struct db_track track; /* the change, db_track_final'ed */
	/* The answer (db_pg_commit): rc 0 with seq, -ESTALE with stale,
	 * -EAGAIN, -EIO. */
	int rc;
	uint64_t seq;
	struct db_snap stale;
	/* Completion: on a committer's thread, once the answer is known. */
	void (*done)(void *ctx, struct db_commit *c);
	void *ctx;
};

/* Queue c for a committer.  c is the caller's until done(c) ran. */
void db_replica_commit(struct db_replica *rep, struct db_commit *c);

/* The committers' number (commits that may be in flight at once). */
unsigned db_replica_committers(const struct db_replica *rep);

/* In the writer's txn that writes a committed change here: its records
 * get the commit's version.  0 or -errno. */
int db_replica_committed(struct db_replica *rep, struct db_txn *txn,
			 const struct db_track *t, uint64_t seq);

/* Whether the follower has applied everything snapshot s shows. */
bool db_replica_covers(struct db_replica *rep, const struct db_snap *s);

/* ---- other nodes' commits ---- */

struct db_seen;

/* A page of other nodes' commits, whole commits only. */
struct db_remote_batch {
	struct db_remote_batch *next;
	struct db_remote *recs;
	size_t n;
	int err; /* what applying it gave */
	bool done;
	bool abandoned; /* the follower stopped waiting: applied() frees it */
	struct db_seen *seen; /* changes made, for the tables' hooks */
	size_t nseen;
};

/* The next batch to apply (NULL: none); the writer's, until applied. */
struct db_remote_batch *db_replica_take(struct db_replica *rep);

/*
 * Apply b in txn (each record only if newer than this replica's; the
 * node's own fields of a record kept, db_share_ops.merge), with the
 * follower's last whole position.
 */
int db_replica_apply(struct db_replica *rep, struct db_txn *txn,
		     struct db_remote_batch *b);

/* b's txn committed (err 0) or failed: the tables' changed() hooks run
 * (on success), and b goes back to the follower. */
void db_replica_applied(struct db_replica *rep, struct db_remote_batch *b,
			int err);

/* The records b writes, for the writer's locks: fn(ctx, tbl, key) for
 * each. */
void db_replica_batch_keys(const struct db_remote_batch *b,
			   void (*fn)(void *ctx, unsigned tbl, const void *key,
				      size_t klen),
			   void *ctx);

/* ---- a gateway alone growing into a cluster ---- */

/* See db_migrate (db.h).  Blocks. */
int db_replica_migrate(struct db *db, const struct db_cluster_opts *o,
		       const void *key, size_t klen, uint64_t next_id,
		       db_progress_fn progress, void *ctx);

/* Whether every shared table is empty (a replica never filled). */
bool db_replica_shared_empty(struct db *db);

#endif
