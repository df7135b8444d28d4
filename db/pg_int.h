/*
 * db/pg_int.h - the cluster engine (pg.c, pg_schema.c, pg_commit.c,
 * pg_log.c, pgsvc.c): the cluster's records in PostgreSQL over libpq.
 * It knows nothing of LMDB: it takes and gives records (table names,
 * keys, values, versions) and snapshots.
 *
 * A commit (db_pg_commit) runs on a connection of its own (struct
 * db_pg_conn; a node has several, so several commits are in flight at
 * once); the follower's connection reads the change log and keeps the
 * node's lease; a service connection, under a mutex, does the rest
 * (ids, secrets, notes, messages, locks: pgsvc.c).
 */
#ifndef MAPFS_DB_PG_INT_H
#define MAPFS_DB_PG_INT_H

#include <libpq-fe.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/bytebuf.h"
#include "snap_int.h"
#include "track_int.h"

struct db_pg;
struct db_pg_conn;

/* Where what the follower's connection hears goes (completions: they
 * carry a message or a node's death back to whoever opened the engine). */
struct db_pg_sinks {
	void (*message)(void *ctx, uint32_t from, const char *msg);
	void (*node_down)(void *ctx, uint32_t node);
	void *ctx;
};

/*
 * Connect (retrying an unreachable server with backoff, saying why),
 * check or create (or upgrade) the schema, check the store URL, and
 * register the node as instance (32 hex digits: the same state directory
 * is the same instance), refused while another live instance holds its
 * name.  A wrong password, a missing database, a newer schema, another
 * store URL or a live node of the same name are -EINVAL/-EPROTO with the
 * reason logged.  Blocks.
 */
int db_pg_open(const struct db_cluster_opts *o, const char *instance,
	       const struct db_pg_sinks *sinks, struct db_pg **out);
/* Give the node's name up (at once free for a restart), disconnect. */
void db_pg_close(struct db_pg *pg);

uint32_t db_pg_node_id(const struct db_pg *pg);
const char *db_pg_cluster_id(const struct db_pg *pg);
/* This process's own id in the log: its commits the follower skips. */
uint32_t db_pg_instance_id(const struct db_pg *pg);

/* ---- commits (pg_commit.c) ---- */

/* A connection for commits, connected now (0, -EAGAIN: not reachable). */
int db_pg_conn_open(struct db_pg *pg, struct db_pg_conn **out);
void db_pg_conn_close(struct db_pg_conn *c);

/*
 * Commit the writes of t (db_track_final'ed: each with the version it
 * replaces) if every read and every write's version is still the
 * cluster's, with token (unique to this instance: a lost answer is asked
 * for, never run twice; unless the database stays away for seconds:
 * then -EAGAIN, and the follower applies it should it have landed).
 * tnames[tbl] names the tables.  Commits on
 * disjoint records run in parallel; ones that share a record wait for
 * each other in PostgreSQL.  Returns 0 with *seq (the commit's number,
 * the records' new version), -ESTALE (a record changed or a commit in
 * flight held it: nothing written; *stale is a snapshot that shows what
 * did, for the follower to pass before the change runs again), -EAGAIN
 * (not committed: the database away, read-only, refusing; logged), or
 * -EIO.  An answer lost with the connection is asked for (the token)
 * once the database answers again, a few seconds at most.
 */
int db_pg_commit(struct db_pg_conn *c, const struct db_track *t,
		 const char *const *tnames, uint64_t token, uint64_t *seq,
		 struct db_snap *stale);

/* Wake every commit waiting to learn a lost answer: the node stops. */
void db_pg_commit_abandon(struct db_pg *pg);

/* Whether the last commit got an answer (status). */
bool db_pg_up(struct db_pg *pg);

/* ---- the log (pg_log.c) ---- */

/*
 * Read the commits that `from` did not see (but this instance's own),
 * on the follower's connection: page(ctx, recs, n) gets them in commit
 * order, whole commits only (a page never splits one); the first
 * non-zero return stops.  *to becomes the snapshot read at.  *behind:
 * the log was pruned past `from` (load the records whole instead).
 * 0 or -errno (-EAGAIN: not connected).
 */
int db_pg_follow(struct db_pg *pg, const struct db_snap *from,
		 int (*page)(void *ctx, const struct db_remote *recs, size_t n),
		 void *ctx, struct db_snap *to, bool *behind);

/*
 * Every record, in one snapshot (*at), in pages: page(ctx, recs, n,
 * first, last).  0 or -errno.
 */
int db_pg_snapshot(struct db_pg *pg,
		   int (*page)(void *ctx, const struct db_remote *recs,
			       size_t n, bool first, bool last),
		   void *ctx, struct db_snap *at);

/* The follower reads the log at least this often, NOTIFY or not (the
 * engine's lease and pruning count on it). */
#define DB_PG_FOLLOW_POLL_MS 1000

/*
 * Wait up to timeout_ms for a change of the log by another process (a
 * NOTIFY; this process's own do not end the wait) or stop_fd readable;
 * meanwhile delivers messages (to the sinks) and keeps the lease (its
 * renewal publishes applied_xmin, the oldest transaction whose commits
 * this node may still lack, for the pruning of the log).  Returns 1 when
 * stop_fd is readable, else 0.
 */
int db_pg_wait(struct db_pg *pg, int stop_fd, int timeout_ms,
	       uint64_t applied_xmin);

/* Renew the lease if it is due (the follower waiting for the writer). */
void db_pg_keep_lease(struct db_pg *pg, uint64_t applied_xmin);

/* Whether this node's lease surely holds; whether node is up. */
bool db_pg_lease_held(struct db_pg *pg);
bool db_pg_node_up(struct db_pg *pg, uint32_t node);
/* Whether this node holds the claim to run queue's store work, and its
 * last runner's fence is over (runnable); or holds it at all (claimed). */
bool db_pg_queue_runnable(struct db_pg *pg, uint32_t queue);
bool db_pg_queue_claimed(struct db_pg *pg, uint32_t queue);

/* ---- services (pgsvc.c), on the service connection ---- */

int db_pg_alloc_ids(struct db_pg *pg, uint64_t n, uint64_t *first);

/* The number of the oldest commit the log still holds (or the next one,
 * if it holds none): no commit numbered below is ever read again.  0 or
 * -errno. */
int db_pg_log_oldest(struct db_pg *pg, uint64_t *seq);
int db_pg_secret(struct db_pg *pg, const char *name, void *buf, size_t len);
int db_pg_send(struct db_pg *pg, uint32_t to, const char *msg);
/* db_cluster_peers_live (db.h), on the service connection. */
int db_pg_peers_live(struct db_pg *pg, db_peer_fn fn, void *ctx);
int db_pg_note(struct db_pg *pg, const char *kind, const char *note, bool add);
int db_pg_notes_take(struct db_pg *pg, uint32_t node, const char *kind,
		     void (*fn)(void *ctx, const char *note), void *ctx);
int db_pg_lock_edit(struct db_pg *pg, uint64_t ino, db_lock_edit_fn edit,
		    void *ctx, uint64_t host_max);
int db_pg_lock_files(struct db_pg *pg, uint64_t **inos, size_t *n);

/*
 * Grow a gateway into the empty cluster database of o: each(ctx, put,
 * pctx) calls put(pctx, rec) for every shared record; with the handle key
 * and the inode counter.  -ENOTEMPTY if it holds a namespace already.
 * *cluster_id (33 bytes) gets the cluster's id.
 */
int db_pg_migrate(const struct db_cluster_opts *o, const void *key, size_t klen,
		  uint64_t next_id,
		  int (*each)(void *ctx,
			      int (*put)(void *pctx,
					 const struct db_remote *rec),
			      void *pctx),
		  void *ctx, char *cluster_id);

/* ---- what pg.c and the others share with pgsvc.c ---- */

/* A connection and when it was last tried. */
struct pgc {
	PGconn *c;
	uint64_t last_try_ms;
	char name[64]; /* its application_name ("": PostgreSQL's default) */
	const char *session; /* SQL run once connected (NULL: none) */
};

/* A live connection of p, reconnecting at most once a second. */
PGconn *db_pgc_get(struct db_pg *pg, struct pgc *p);
/* -EAGAIN for what a new connection or time may cure (logged once for
 * a database that refuses writes), -EIO for the rest (logged). */
int db_pg_res_err(PGconn *c, PGresult *r, const char *what);
/* The service connection, locked; *c NULL if not connected. */
PGconn *db_pg_svc_lock(struct db_pg *pg);
void db_pg_svc_unlock(struct db_pg *pg);
/* Connect o's database alone (no node): 0, -EAGAIN, -EINVAL (logged). */
int db_pg_connect_url(const char *url, PGconn **out);
/* Check or create the schema with store_url; *cluster_id (33). */
int db_pg_schema(PGconn *c, const char *store_url, char *cluster_id);
uint64_t db_pg_now_ms(void);

/* Binary parameters in a bytebuf (common/bytebuf.h): a value, an array
 * header, an element. */
void db_pb_u32(struct bytebuf *b, uint32_t v);
void db_pb_u64(struct bytebuf *b, uint64_t v);
void db_pb_array(struct bytebuf *b, uint32_t oid, size_t n);
void db_pb_elem(struct bytebuf *b, const void *d, size_t n);
uint64_t db_pg_col_u64(const PGresult *r, int i, int col);

#define DB_OID_BYTEA 17
#define DB_OID_INT8 20
#define DB_OID_TEXT 25

#endif
