/*
 * db/db_int.h - what the files of db/ share; not for other rooms.
 *
 * lmdb.c is the engine every gateway runs: LMDB tables, snapshots and the
 * group-commit writer.  In a cluster (--meta postgres://...) the tables
 * opened DB_SHARED are a local replica of records kept in PostgreSQL
 * (pg.c): a group's writes to them are committed there first, checked
 * against the versions its reads saw (track.c), and other gateways'
 * commits arrive through the change log and are applied here.
 */
#ifndef MAPFS_DB_INT_H
#define MAPFS_DB_INT_H

#include <lmdb.h>
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

/* ---- track.c: the records a group read and wrote ------------------- */

/* One record: a table, a key, a value (writes; NULL data: deleted) or a
 * version (reads).  key/val point into the track's arena. */
struct db_rec {
	unsigned tbl; /* db_table */
	size_t koff, klen;
	size_t voff, vlen;
	bool del;
	uint64_t ver;
};

struct db_track {
	struct db_rec *reads, *writes;
	size_t nreads, nwrites, capr, capw;
	unsigned char *arena;
	size_t alen, acap;
	/* Reads already recorded (open addressing over reads[] + 1). */
	uint32_t *rhash;
	size_t rhcap;
};

void db_track_init(struct db_track *t);
void db_track_reset(struct db_track *t);
void db_track_free(struct db_track *t);

/* Record a read of (tbl, key) at version ver (once per key).  0/-ENOMEM. */
int db_track_read(struct db_track *t, unsigned tbl, const struct db_val *key,
		  uint64_t ver);

/* Append a write (val NULL: a delete).  0 or -ENOMEM. */
int db_track_write(struct db_track *t, unsigned tbl, const struct db_val *key,
		   const struct db_val *val);

/* Forget the writes after the first n (a nested txn was aborted). */
void db_track_truncate(struct db_track *t, size_t nwrites);

/*
 * Reduce the writes to the last one per key, in first-write order (the
 * arrays shrink in place).  0 or -ENOMEM.
 */
int db_track_final(struct db_track *t);

static inline const void *db_rec_key(const struct db_track *t,
				     const struct db_rec *r)
{
	return t->arena + r->koff;
}

static inline const void *db_rec_val(const struct db_track *t,
				     const struct db_rec *r)
{
	return t->arena + r->voff;
}

/* ---- pg.c: the cluster ------------------------------------------------ */

struct db_pg;

/* A record another node committed (or the current one of a stale read). */
struct db_remote {
	unsigned tbl;
	const void *key;
	size_t klen;
	const void *val; /* NULL: deleted or absent */
	size_t vlen;
	uint64_t ver;
};

/*
 * Connect, check or create the schema, check the store URL, register the
 * node (refused while another live instance holds its name), and start
 * the change listener and the lease heartbeat.  Blocks until connected
 * (retrying an unreachable server with backoff, saying why); a wrong
 * password, a missing database, a newer schema, another store URL or a
 * live node of the same name are -EINVAL/-EPROTO with the reason logged.
 */
int db_pg_open(struct db *db, const struct db_cluster_opts *o,
	       struct db_pg **out);
void db_pg_close(struct db_pg *pg);
/* Stop following (the thread applies through the writer: first). */
void db_pg_stop_follower(struct db_pg *pg);

/* Result of a commit: 0, -ESTALE (*stale filled: the current records of
 * the stale reads, applied by the caller), -EAGAIN (the database did not
 * take it: down, read-only, a failover; nothing committed), -errno. */
struct db_stale {
	struct db_remote *recs;
	size_t n;
	void *owner; /* freed by db_pg_stale_free */
};
int db_pg_commit(struct db_pg *pg, const struct db_track *t, uint64_t *seq,
		 struct db_stale *stale);
void db_pg_stale_free(struct db_stale *s);

/*
 * From the writer thread, after a stale commit: apply every commit of the
 * log not applied here yet (the records a stale group's changes rest on
 * may be more than the ones it read).  0 or -errno.
 */
int db_pg_catch_up(struct db_pg *pg);

/* Whether the commit connection is up (for status). */
bool db_pg_up(struct db_pg *pg);

uint32_t db_pg_node_id(const struct db_pg *pg);
int db_pg_send(struct db_pg *pg, uint32_t to, const char *msg);

/* The message handler (lmdb.c keeps it; pg.c calls it). */
void db_deliver(struct db *db, uint32_t from, const char *msg);
/* The node-down handler, likewise. */
void db_deliver_down(struct db *db, uint32_t node);
bool db_pg_node_up(struct db_pg *pg, uint32_t node);
int db_pg_note(struct db_pg *pg, const char *kind, const char *note, bool add);
int db_pg_notes_take(struct db_pg *pg, uint32_t node, const char *kind,
		     void (*fn)(void *ctx, const char *note), void *ctx);
bool db_pg_lease_held(struct db_pg *pg);
int db_pg_alloc_ids(struct db_pg *pg, uint64_t n, uint64_t *first);
int db_pg_secret(struct db_pg *pg, const char *name, void *buf, size_t len);

/* ---- lmdb.c, for pg.c ------------------------------------------------- */

/* The table called name, or -1 (not shared here). */
int db_shared_table(struct db *db, const char *name);
const char *db_table_name(struct db *db, unsigned tbl);

/*
 * Apply other nodes' records (each only if newer than the local one),
 * and set the applied sequence to seq (0: leave it), in one local
 * transaction on the writer thread; the tables' changed hooks run after
 * it is durable.  Blocks.  0 or -errno.
 */
int db_apply_remote(struct db *db, const struct db_remote *recs, size_t n,
		    uint64_t seq);

/*
 * Every record of the shared tables, in one snapshot, as the cluster
 * shares it (projected): fn(ctx, rec) for each; the first non-zero
 * return stops the walk.  *count first gets the number of records.
 */
int db_each_shared(struct db *db, uint64_t *count,
		   int (*fn)(void *ctx, const struct db_remote *rec),
		   void *ctx);

/* Mark this replica as cluster id's at seq: every shared record's
 * version = seq.  0 or -errno. */
int db_mark_replica(struct db *db, const char *id, uint64_t seq);

int db_pg_lock_edit(struct db_pg *pg, uint64_t ino, db_lock_edit_fn edit,
		    void *ctx, uint64_t host_max);
int db_pg_lock_files(struct db_pg *pg, uint64_t **inos, size_t *n);

int db_pg_migrate(struct db *db, const struct db_cluster_opts *o,
		  const void *key, size_t klen, uint64_t next_id,
		  db_progress_fn progress, void *ctx);

/* Whether every shared table is empty (a replica never filled). */
bool db_shared_empty(struct db *db);

/* Replace every shared table with recs (a full copy), seq applied. */
int db_load_snapshot(struct db *db, const struct db_remote *recs, size_t n,
		     uint64_t seq, bool first, bool last);

/* The applied sequence (0: none yet) and the cluster this replica is of. */
int db_local_seq(struct db *db, uint64_t *seq);
int db_local_cluster(struct db *db, char *id, size_t cap);
int db_set_local_cluster(struct db *db, const char *id);
/* A text of this replica's own (buf empty: none).  0 or -errno. */
int db_local_text(struct db *db, const char *name, char *buf, size_t cap);
int db_set_local_text(struct db *db, const char *name, const char *val);

#endif
