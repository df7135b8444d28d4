/*
 * db/db.c - the room's door (db.h): open and close the engine and its
 * writer, join and leave the cluster, and the cluster's services.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lmdb_int.h"
#include "replica_int.h"
#include "writer_int.h"

int db_open(const char *dir, size_t mapsize, unsigned maxtables,
	    struct db **out)
{
	return db_open_flags(dir, mapsize, maxtables, 0, out);
}

bool db_dropped(const struct db *db)
{
	return db->dropped;
}

bool db_unflushed(const struct db *db)
{
	return db->unflushed;
}

int db_open_flags(const char *dir, size_t mapsize, unsigned maxtables,
		  unsigned flags, struct db **out)
{
	struct db *db = calloc(1, sizeof(*db));
	int rc;

	if (!db)
		return -ENOMEM;
	db->lock_fd = -1;
	pthread_mutex_init(&db->on_down_lock, NULL);
	rc = db_env_open(db, dir, mapsize, maxtables,
			 (flags & DB_OPEN_UNFLUSHED) != 0);
	if (!rc) {
		rc = db_writer_start(db);
		if (rc)
			db_env_close(db);
	}
	if (rc) {
		pthread_mutex_destroy(&db->on_down_lock);
		free(db);
		return rc;
	}
	*out = db;
	return 0;
}

static void copts_free(struct db_cluster_opts *o)
{
	if (!o)
		return;
	free((char *)o->url);
	free((char *)o->node);
	free((char *)o->store_url);
	free((char *)o->addr);
	free(o);
}

void db_close(struct db *db)
{
	if (!db)
		return;
	db_stop(db);
	db_writer_stop(db);
	db_env_close(db);
	pthread_mutex_destroy(&db->on_down_lock);
	copts_free(db->copts);
	free(db);
}

int db_cluster(struct db *db, const struct db_cluster_opts *o)
{
	struct db_cluster_opts *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	*c = *o;
	c->url = strdup(o->url);
	c->node = strdup(o->node);
	c->store_url = strdup(o->store_url ? o->store_url : "");
	c->addr = strdup(o->addr ? o->addr : "");
	if (!c->url || !c->node || !c->store_url || !c->addr) {
		copts_free(c);
		return -ENOMEM;
	}
	copts_free(db->copts);
	db->copts = c;
	return 0;
}

/* What the cluster's follower hears (completions carrying it back). */
static void deliver_message(void *ctx, uint32_t from, const char *msg)
{
	struct db *db = ctx;

	if (db->on_msg)
		db->on_msg(db->on_msg_ctx, from, msg);
}

static void deliver_down(void *ctx, uint32_t node)
{
	struct db *db = ctx;

	/* Held while they run: a handler removed is not running after. */
	pthread_mutex_lock(&db->on_down_lock);
	for (int i = 0; i < DB_NODE_HANDLERS; i++)
		if (db->on_down[i].fn)
			db->on_down[i].fn(db->on_down[i].ctx, node);
	pthread_mutex_unlock(&db->on_down_lock);
}

int db_start(struct db *db)
{
	struct db_pg_sinks sinks = { deliver_message, deliver_down, db };
	int rc;

	if (!db->copts)
		return 0;
	rc = db_replica_open(db, db->copts, &sinks, &db->rep);
	if (!rc)
		db_writer_cluster(db, db->rep);
	return rc;
}

void db_stop(struct db *db)
{
	struct db_replica *rep = db->rep;

	if (!rep)
		return;
	db_replica_stop_follower(rep);
	/* Commits in flight get their answers (one still asking whether a
	 * lost answer landed gives up), then the writer commits alone. */
	db_pg_commit_abandon(db_replica_pg(rep));
	db_writer_cluster(db, NULL);
	db->rep = NULL;
	db_replica_close(rep);
}

bool db_clustered(const struct db *db)
{
	return db->copts != NULL;
}

static struct db_pg *pg_of(struct db *db)
{
	return db->rep ? db_replica_pg(db->rep) : NULL;
}

uint32_t db_node_id(const struct db *db)
{
	return db->rep ? db_pg_node_id(db_replica_pg(db->rep)) : 0;
}

int db_alloc_ids(struct db *db, uint64_t n, uint64_t *first)
{
	struct db_pg *pg = pg_of(db);

	return pg ? db_pg_alloc_ids(pg, n, first) : -ENOTSUP;
}

int db_lock_edit(struct db *db, uint64_t ino, db_lock_edit_fn edit, void *ctx,
		 uint64_t host_max)
{
	struct db_pg *pg = pg_of(db);

	return pg ? db_pg_lock_edit(pg, ino, edit, ctx, host_max) : -ENOTSUP;
}

int db_lock_files(struct db *db, uint64_t **inos, size_t *n)
{
	struct db_pg *pg = pg_of(db);

	return pg ? db_pg_lock_files(pg, inos, n) : -ENOTSUP;
}

int db_secret(struct db *db, const char *name, void *buf, size_t len)
{
	struct db_pg *pg = pg_of(db);

	return pg ? db_pg_secret(pg, name, buf, len) : -ENOTSUP;
}

bool db_cluster_up(struct db *db)
{
	struct db_pg *pg = pg_of(db);

	return !pg || db_pg_up(pg);
}

/* See db.h. */
uint64_t db_cluster_replica_age_ms(struct db *db)
{
	return db->rep ? db_replica_age_ms(db->rep) : 0;
}

/* See db.h. */
int db_cluster_peers_live(struct db *db, db_peer_fn fn, void *ctx)
{
	struct db_pg *pg = pg_of(db);

	return pg ? db_pg_peers_live(pg, fn, ctx) : -ENOTSUP;
}

int db_send(struct db *db, uint32_t to, const char *msg)
{
	struct db_pg *pg = pg_of(db);

	if (strlen(msg) > DB_MSG_MAX)
		return -EMSGSIZE;
	return pg ? db_pg_send(pg, to, msg) : -ENOTSUP;
}

void db_on_message(struct db *db, db_msg_fn fn, void *ctx)
{
	db->on_msg = fn;
	db->on_msg_ctx = ctx;
}

bool db_node_up(struct db *db, uint32_t node)
{
	struct db_pg *pg = pg_of(db);

	return !pg || db_pg_node_up(pg, node);
}

void db_on_node_down(struct db *db, db_node_fn fn, void *ctx)
{
	pthread_mutex_lock(&db->on_down_lock);
	for (int i = 0; i < DB_NODE_HANDLERS; i++)
		if (db->on_down[i].ctx == ctx || (fn && !db->on_down[i].fn)) {
			db->on_down[i].fn = fn;
			db->on_down[i].ctx = fn ? ctx : NULL;
			if (fn)
				break;
		}
	pthread_mutex_unlock(&db->on_down_lock);
}

int db_note_add(struct db *db, const char *kind, const char *note)
{
	struct db_pg *pg = pg_of(db);

	return pg ? db_pg_note(pg, kind, note, true) : -ENOTSUP;
}

int db_note_del(struct db *db, const char *kind, const char *note)
{
	struct db_pg *pg = pg_of(db);

	return pg ? db_pg_note(pg, kind, note, false) : -ENOTSUP;
}

int db_notes_take(struct db *db, uint32_t node, const char *kind,
		  void (*fn)(void *ctx, const char *note), void *ctx)
{
	struct db_pg *pg = pg_of(db);

	return pg ? db_pg_notes_take(pg, node, kind, fn, ctx) : -ENOTSUP;
}

uint64_t db_commit_order(struct db *db, struct db_txn *txn, db_table tbl,
			 const struct db_val *key)
{
	return db->rep ? db_replica_ver(db->rep, txn, tbl, key) : 0;
}

bool db_queue_runnable(struct db *db, uint32_t queue)
{
	struct db_pg *pg = pg_of(db);

	return !pg || db_pg_queue_runnable(pg, queue);
}

bool db_queue_claimed(struct db *db, uint32_t queue)
{
	struct db_pg *pg = pg_of(db);

	return !pg || db_pg_queue_claimed(pg, queue);
}

bool db_lease_held(struct db *db)
{
	struct db_pg *pg = pg_of(db);

	return !pg || db_pg_lease_held(pg);
}

int db_migrate(struct db *db, const struct db_cluster_opts *o, const void *key,
	       size_t klen, uint64_t next_id, db_progress_fn progress,
	       void *ctx)
{
	return db_replica_migrate(db, o, key, klen, next_id, progress, ctx);
}
