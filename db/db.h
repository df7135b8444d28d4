/*
 * db/db.h - the metadata engine under fs/ (namespace) and cache/ (data
 * journal): tables of byte keys and values, read snapshots, and one
 * group-commit writer.
 *
 * Why a room of its own: the namespace and the write-back journal must be
 * committed together and durably, by one writer thread that groups the
 * pending changes of all cores into one transaction (one fsync for a burst
 * of creates).  Both fs/ and cache/ sit above it; it knows no inode or
 * chunk layout, only "apply this function inside the next write txn".
 *
 * The engine is LMDB (db/lmdb.c), and no LMDB type leaves this room.
 * Reads: every thread gets its own reusable read snapshot, so readers
 * never take a lock and never wait for the writer.
 *
 * A cluster (db_cluster_opts: PostgreSQL) adds nothing to the read path:
 * the tables opened DB_SHARED become a local replica of records kept in
 * PostgreSQL.  A group's changes to them commit there first, checked
 * against the versions its reads saw (optimistic concurrency: a group
 * that read a record another node changed meanwhile is run again on the
 * fresh record, so its closures must be safe to run twice), and every
 * node applies the others' commits from the change log within
 * milliseconds.  Reads never wait for the database; writes to shared
 * tables answer -EAGAIN while it is unreachable.
 *
 * Errors are negative errno: -ENOENT (no such key), -EEXIST (a put that
 * must not overwrite), -ENOSPC (the database is full), -EIO (corrupt),
 * -EAGAIN (no reader slot), -ENOMEM.
 */
#ifndef MAPFS_DB_H
#define MAPFS_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct db;
struct db_txn;    /* a read snapshot or a write transaction */
struct db_cursor; /* a position in one table of a txn */

/* A table of a db, from db_table_open(). */
typedef unsigned db_table;

/*
 * A key or a value.  What a read returns points into the database and
 * stays valid until the txn ends or the next write in it, whichever is
 * first.  Laid out as LMDB's MDB_val, so the engine passes it through.
 */
struct db_val {
	size_t size;
	void *data;
};

/* Flags of db_table_open(). */
enum {
	DB_INTKEY = 1u << 0, /* keys are native uint64_t, in numeric order */
	DB_SHARED = 1u << 1, /* replicated through the cluster, if any */
};

/*
 * How a DB_SHARED table's values are shared (db_table_open_shared).  A
 * value may hold fields that are the node's own (what it must still
 * upload, when it last listed): project() keeps what the cluster shares,
 * merge() rebuilds a local value from shared bytes and the local value
 * (NULL: none); either NULL means "the whole value".  changed() runs on
 * the writer thread after another node's change to the table is durable
 * here, with the local values before and after (NULL: none); it must not
 * wait for db_write().  Values fit in max bytes.
 */
struct db_share_ops {
	int (*project)(const struct db_val *local, void *out, size_t cap,
		       size_t *len);
	int (*merge)(const struct db_val *shared, const struct db_val *local,
		     void *out, size_t cap, size_t *len);
	void (*changed)(void *ctx, db_table tbl, const struct db_val *key,
			const struct db_val *before,
			const struct db_val *after);
	void *ctx;
	size_t max;
};

/* Where the cluster is, and who this node is in it. */
struct db_cluster_opts {
	const char *url;       /* libpq URI: postgres://user@host:port/db */
	const char *node;      /* this gateway's name, unique in the cluster */
	const char *store_url; /* every node must serve this same store */
	const char *addr;      /* where its NFS service listens, for peers */
	uint32_t lease_ms;     /* a node silent this long is gone */
};

/* Flags of db_put(). */
enum {
	DB_NOOVERWRITE = 1u << 0, /* -EEXIST if the key is there */
	DB_APPEND = 1u << 1,      /* the key sorts after every other: faster */
};

/* Positions of db_cursor_get(). */
enum db_cursor_op {
	DB_FIRST,     /* the first entry */
	DB_LAST,      /* the last entry */
	DB_NEXT,      /* the entry after the current one */
	DB_SET_RANGE, /* the first entry whose key is >= *key */
};

/*
 * Open (creating if needed) the engine in directory dir with the given
 * map size (bytes) and at most maxtables tables.  Returns 0 or -errno:
 * -EBUSY when another process (or open) has dir.  The writer thread
 * starts here.
 */
int db_open(const char *dir, size_t mapsize, unsigned maxtables,
	    struct db **out);

/* db_open_flags' flags. */
enum {
	/*
	 * Commits are not flushed to disk (no fdatasync before a change is
	 * answered), for a state that another copy holds whole: a cluster
	 * node whose COMMIT waits for the store.  A crash of the process
	 * loses nothing; a crash of the machine may tear the files, and the
	 * next open, seeing another boot, starts empty (db_dropped).
	 */
	DB_OPEN_UNFLUSHED = 1,
};

/* db_open with DB_OPEN_* flags. */
int db_open_flags(const char *dir, size_t mapsize, unsigned maxtables,
		  unsigned flags, struct db **out);

/*
 * Whether the open found the state torn by a crash of the machine while
 * it was unflushed, and started from an empty one: what else was kept
 * beside it (the cache's files) must go too.
 */
bool db_dropped(const struct db *db);

/* Whether commits are not flushed (DB_OPEN_UNFLUSHED): what is kept
 * beside the database need not be flushed either. */
bool db_unflushed(const struct db *db);

/* Flush pending writes, stop the writer thread, close. */
void db_close(struct db *db);

/*
 * Join the cluster at db_start() (o is copied).  Call before db_start;
 * without it the node is alone.  0 or -errno.
 */
int db_cluster(struct db *db, const struct db_cluster_opts *o);

/*
 * Open (creating) table name with DB_* flags.  Call during start-up,
 * before db_start() and concurrent use.  Returns 0 or -errno.
 */
int db_table_open(struct db *db, const char *name, unsigned flags,
		  db_table *out);

/* db_table_open() of a DB_SHARED table with its sharing rules. */
int db_table_open_shared(struct db *db, const char *name, unsigned flags,
			 const struct db_share_ops *ops, db_table *out);

/*
 * Every table is open: in a cluster, connect (retrying an unreachable
 * database, saying why), check the schema and the store, register the
 * node, bring the local replica up to date (a full copy if it is new or
 * too far behind) and start following the others' changes.  Blocks.
 * 0, or -errno with the reason logged (a wrong password, another store,
 * a newer schema, a live node of the same name: -EINVAL or -EPROTO).
 */
int db_start(struct db *db);

/*
 * Leave the cluster: stop following the others (no more changed() hooks
 * or messages after it returns) and give the node's name up.  Writes
 * still run, alone.  Call before freeing what the hooks use.  No-op when
 * alone or already stopped.
 */
void db_stop(struct db *db);

/*
 * Locks in a cluster (NLM): every file's lock state is one record, changed
 * in one transaction under a row lock.  edit gets the current state
 * (NULL, 0: none) and makes the new one (*outlen 0: none; *out malloc'd,
 * freed here) and what each host then holds more or less (*deltas, n
 * entries, malloc'd, freed here).  A host past host_max things held:
 * -ENOLCK and nothing changes.  edit may run again (a retry); it must
 * leave no trace of a run that is not the last.  Blocks for a few round
 * trips.  -ENOTSUP when alone, -EAGAIN while the database is down.
 */
struct db_host_delta {
	uint8_t host[16];
	int64_t delta;
};
typedef int (*db_lock_edit_fn)(void *ctx, const void *state, size_t len,
			       void **out, size_t *outlen,
			       struct db_host_delta **deltas, size_t *ndeltas);
int db_lock_edit(struct db *db, uint64_t ino, db_lock_edit_fn edit, void *ctx,
		 uint64_t host_max);

/* The files that have lock state (malloc'd into *inos).  0 or -errno. */
int db_lock_files(struct db *db, uint64_t **inos, size_t *n);

/* How far a long operation got (done of total units). */
typedef void (*db_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/*
 * Grow a gateway alone into a cluster: copy its shared tables (every
 * table open DB_SHARED, as the cluster shares them) into the empty
 * database o->url for the store o->store_url, with the handle key (so
 * clients' handles stay valid) and the inode counter at next_id, and
 * make this state directory the new cluster's first replica.  Its own
 * tables (pending uploads, the cache's journal) stay as they are.
 * Blocks; progress(ctx, done, total) now and then.  0, -ENOTEMPTY (the
 * database holds a cluster already: nothing written), -errno (logged).
 */
int db_migrate(struct db *db, const struct db_cluster_opts *o, const void *key,
	       size_t klen, uint64_t next_id, db_progress_fn progress,
	       void *ctx);

/* Whether the node is in a cluster (db_cluster() was called). */
bool db_clustered(const struct db *db);

/* This node's id in the cluster (1..), 0 when alone. */
uint32_t db_node_id(const struct db *db);

/*
 * n fresh ids of the cluster's one counter (inode numbers), never handed
 * out before to any node: *first .. *first + n - 1.  Blocks for one
 * round trip.  -ENOTSUP when alone, -EAGAIN while the database is down.
 */
int db_alloc_ids(struct db *db, uint64_t n, uint64_t *first);

/*
 * The cluster's secret called name (len bytes), made at random by the
 * first node that asks.  Blocks.  -ENOTSUP when alone.
 */
int db_secret(struct db *db, const char *name, void *buf, size_t len);

/* Whether the cluster's database answered the last commit (status). */
bool db_cluster_up(struct db *db);

/*
 * How far this node's replica may be behind the cluster's log: the ms
 * since its follower last read the log to its end and applied it (it
 * does at least every second, and at once after each commit it is
 * told of).  0 when alone or before the first read.  Any thread.
 */
uint64_t db_cluster_replica_age_ms(struct db *db);

/*
 * The cluster's live gateways (this one included) as each published
 * itself with its last lease renewal: fn(ctx, node id, name, text) with
 * the text its
 * metrics_live_format() made (a gateway that published none is left
 * out).  Blocks for one round trip.  -ENOTSUP when alone, -EAGAIN while
 * the database is down.
 */
typedef void (*db_peer_fn)(void *ctx, uint32_t node, const char *name,
			   const char *live);
int db_cluster_peers_live(struct db *db, db_peer_fn fn, void *ctx);

/*
 * A short text message (up to DB_MSG_MAX bytes) to node `to` (0: every
 * other node), through the database (NOTIFY): delivered to the handler
 * that node registered with db_on_message(), on its follower thread,
 * within milliseconds; lost if the node is down.  Blocks for one round
 * trip.  -ENOTSUP when alone, -EAGAIN while the database is down.
 */
#define DB_MSG_MAX 200
int db_send(struct db *db, uint32_t to, const char *msg);

/* The handler of messages to this node: must not block for long. */
typedef void (*db_msg_fn)(void *ctx, uint32_t from, const char *msg);
void db_on_message(struct db *db, db_msg_fn fn, void *ctx);

/*
 * Membership, as this node last read it (with each lease renewal, every
 * third of a lease; no round trip here).  A node is down once its lease
 * ran out by the database's clock.  True for this node, for a node alone,
 * and for any node not known to be down (before the first reading too).
 */
bool db_node_up(struct db *db, uint32_t node);

/*
 * fn(ctx, node) on the follower thread each time a node is first seen
 * down (at start: each node down then).  It must not block for long
 * (a round trip or two).  Up to DB_NODE_HANDLERS handlers; fn NULL
 * removes ctx's.
 */
#define DB_NODE_HANDLERS 4
typedef void (*db_node_fn)(void *ctx, uint32_t node);
void db_on_node_down(struct db *db, db_node_fn fn, void *ctx);

/*
 * Notes a node leaves in the cluster for whoever outlives it: short
 * texts of a kind (NLM: "nsm", the hosts to tell when a gateway dies).
 * Adding one that is there, or removing one that is not, is no error.
 * Block for a round trip; -ENOTSUP when alone, -EAGAIN while the
 * database is down.
 */
int db_note_add(struct db *db, const char *kind, const char *note);
int db_note_del(struct db *db, const char *kind, const char *note);
/*
 * Take the notes of that kind that node left (a dead one's): each is
 * removed and given to fn(ctx, note) once, to one caller only, however
 * many take at once.  0 or -errno.
 */
int db_notes_take(struct db *db, uint32_t node, const char *kind,
		  void (*fn)(void *ctx, const char *note), void *ctx);

/*
 * Whether this node's own lease surely still holds: its last renewal was
 * sent less than 3/4 of a lease ago by this machine's clock.  Once false,
 * other nodes may soon take over what this one owns: writes to the store
 * wait (fencing).  Always true for a node alone.
 */
bool db_lease_held(struct db *db);

/*
 * The number of the cluster commit that last wrote the shared record key
 * of tbl, as txn sees it: of two commits one of which read or wrote what
 * the other wrote, on any nodes, the later one has the higher number.
 * 0 for a node alone or a record not there.  No round trip.
 */
uint64_t db_commit_order(struct db *db, struct db_txn *txn, db_table tbl,
			 const struct db_val *key);

/*
 * The queues of store work (fs/pending.c's records, numbered by the node
 * that queued them): one node runs a queue at a time, by a claim in the
 * database renewed with its lease (db/pg_runners.c): its own node while
 * it lives, else one node that sees it down.  Runnable: this node holds
 * the claim to queue, surely (by this machine's clock), and the fence
 * after its last runner is over (a request that runner sent must have
 * landed); check it right before each store request.  Claimed: it holds
 * the claim, fence over or not.  Both always true for a node alone; no
 * round trip.
 */
bool db_queue_runnable(struct db *db, uint32_t queue);
bool db_queue_claimed(struct db *db, uint32_t queue);

/*
 * What the local engine holds, for gauges and alerts: each of these must
 * come back to its level after the work is done (nothing counts up
 * without bound).  Safe from any thread.
 */
struct db_usage {
	uint64_t map_bytes;       /* LMDB's map: the most the file may hold */
	uint64_t map_used_bytes;  /* its pages in use (the file's high water) */
	unsigned readers;         /* reader slots taken: threads' snapshots */
	unsigned readers_max;     /* of the table's */
	bool log_on;              /* commits made durable by the log (wal.c) */
	bool log_failed;          /* the log was given up after an error: LMDB
				    flushes every commit (slower, still safe) */
	uint64_t log_ckpt_age_ms; /* since its last checkpoint (log_on) */
	uint64_t log_failures;    /* checkpoints or records that failed */
};
void db_usage(struct db *db, struct db_usage *u);

/*
 * Begin a read snapshot for the calling thread (cheap: a per-thread txn
 * is renewed).  Must be ended with db_read_end() on the same thread;
 * nested begins on one thread share one snapshot.  Returns 0 or -errno.
 */
int db_read_begin(struct db *db, struct db_txn **txn);
void db_read_end(struct db *db, struct db_txn *txn);

/* The value of key in tbl into *val.  0, -ENOENT, or -errno. */
int db_get(struct db_txn *txn, db_table tbl, const struct db_val *key,
	   struct db_val *val);

/* Write key -> val in tbl (a write txn).  0, -EEXIST, or -errno. */
int db_put(struct db_txn *txn, db_table tbl, const struct db_val *key,
	   const struct db_val *val, unsigned flags);

/* Delete key from tbl (a write txn).  0, -ENOENT, or -errno. */
int db_del(struct db_txn *txn, db_table tbl, const struct db_val *key);

/* The number of entries of tbl.  0 or -errno. */
int db_count(struct db_txn *txn, db_table tbl, uint64_t *n);

/* A cursor on tbl, closed with db_cursor_close() before the txn ends. */
int db_cursor_open(struct db_txn *txn, db_table tbl, struct db_cursor **out);
void db_cursor_close(struct db_cursor *cur);

/*
 * Move the cursor (op) and read the entry there into *key and *val
 * (DB_SET_RANGE reads *key first).  0, or -ENOENT past the end.
 */
int db_cursor_get(struct db_cursor *cur, struct db_val *key, struct db_val *val,
		  enum db_cursor_op op);

/* Delete the entry at the cursor (a write txn).  0 or -errno. */
int db_cursor_del(struct db_cursor *cur);

/*
 * A change to apply inside the next group-commit transaction.  apply runs
 * on the writer thread inside its own nested transaction: returning
 * non-zero (-errno) aborts just that change.  done runs on the writer
 * thread after the whole group is committed and synced to disk (err is the
 * apply result, or the commit error).  Either may be NULL.
 */
typedef int (*db_apply_fn)(struct db_txn *txn, void *arg);
typedef void (*db_done_fn)(void *arg, int err);

/* Queue a change; never blocks on I/O.  arg is owned by the caller. */
void db_submit(struct db *db, db_apply_fn apply, db_done_fn done, void *arg);

/*
 * db_submit() whose done() may run before the change is durable (an
 * async export's, as knfsd's `async`): once it is in LMDB and its
 * record written to the log, unflushed.  The writer flushes the log
 * within the lazy window (db_set_lazy_window) of the first such commit,
 * and any durable commit or checkpoint before that flushes it too.  A
 * crash of the process loses nothing (the kernel has every write, in
 * order); a crash of the machine may lose the last window's changes,
 * whole and in order: the log replays up to the first one missing, so
 * the namespace is never torn.  Where commits are not logged (a cluster,
 * an unflushed node, the log given up) it is db_submit().
 */
void db_submit_lazy(struct db *db, db_apply_fn apply, db_done_fn done,
		    void *arg);

/*
 * db_submit_lazy() for a change nobody waits for (the cache's journal
 * records of a removal, of fetched chunks): it never makes a commit of
 * its own while other changes come, but goes with the next group, or
 * with one of its own when the lazy window since the first such change
 * queued is over.  Its done() runs then.  Whoever needs it durable
 * submits a durable change after it: the queue's order takes both in
 * one group or this one first.
 */
void db_submit_background(struct db *db, db_apply_fn apply, db_done_fn done,
			  void *arg);

/* The lazy window in ms (1..10,000; default 50): before the writer
 * starts taking lazy changes. */
void db_set_lazy_window(struct db *db, uint32_t ms);

/*
 * Queue a change and wait until it is durable.  For threads that may block
 * (start-up, workers); never call it from an event loop.  Returns the
 * apply result or the commit error.
 */
int db_write(struct db *db, db_apply_fn apply, void *arg);

#endif
