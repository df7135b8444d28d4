/*
 * db/pg.c - the cluster's records in PostgreSQL, over libpq: the node and
 * its lease, opening and closing the engine, the notifier.  Connections
 * and statements are pg_conn.c's (the bottom), the schema pg_schema.c's,
 * commits pg_commit.c's, reading the change log pg_log.c's (pg_priv.h:
 * what they share).
 *
 * Schema (versioned in mapfs_meta; created or upgraded by the first node,
 * under an advisory lock so that two first nodes do not race):
 *   mapfs_meta     name -> value: schema_version, store_url, cluster_id,
 *                  pruned_xid (the log holds no entry of a transaction
 *                  below it that a node may lack)
 *   mapfs_records  (tbl, k) -> v, ver: the shared tables' records
 *   mapfs_log      one entry per commit: seq, the transaction that wrote
 *                  it (xid), node, inst (the process), tok (its token:
 *                  a node that lost the answer asks for it), at, and
 *                  what it wrote: t[], k[], v[] (NULL: deleted)
 *   mapfs_seq      numbers the commits (the records' versions)
 *   mapfs_nodes    name -> id, instance, addr, lease_until, applied
 *   mapfs_runners  who runs each node's queued store work: pg_runners.c
 *   mapfs_counters name -> next: the inode numbers
 *   mapfs_secrets, mapfs_locks, mapfs_lock_hosts, mapfs_notes: pgsvc.c
 *
 * A commit is one call of mapfs_commit3(): it locks the records it
 * writes (row locks, in one order: two commits of the same records wait
 * for each other, never deadlock), takes share locks on the ones it only
 * read (waiting briefly: a commit in flight on them makes this one
 * stale), checks every version, and either returns the current records
 * of the stale ones with a snapshot that shows them, or writes the
 * records with ver = nextval(mapfs_seq) and logs them, with its
 * transaction id and its token, in one entry.  Nothing every commit takes in turn: commits
 * of disjoint records run at once and share PostgreSQL's WAL flushes.
 * The NOTIFY that wakes the followers is sent after the commit by the
 * notifier, in a transaction of its own that does not wait for the disk
 * (a NOTIFY in the commit would hold PostgreSQL's queue lock through its
 * flush and make every commit of the cluster wait for the one before
 * it), one for all the commits that ended meanwhile.
 *
 * The log is followed by snapshot (snap_int.h): a follower's position is
 * the snapshot it last read at, and it next reads the entries of the
 * transactions that snapshot did not see.  A commit still in flight is
 * never skipped: it is read once it is visible, whatever its number.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "metrics/metrics.h"
#include "pg_priv.h"

/* The notifier's session: its one statement, prepared. */
#define NOTIFY_SESSION_SQL                                  \
	"PREPARE mapfs_notify (text) AS SELECT set_config(" \
	" 'synchronous_commit', 'off', true), pg_notify('mapfs_log', $1)"

/* ---- the node and its lease ---------------------------------------------- */

static int node_register(struct db_pg *pg, PGconn *c, char *holder, size_t cap)
{
	char lease[32];
	const char *p[4] = { pg->o.node, pg->instance, pg->o.addr, lease };
	PGresult *r;

	snprintf(lease, sizeof(lease), "%u milliseconds", pg->o.lease_ms);
	r = db_pg_exec_text(
		c,
		"INSERT INTO mapfs_nodes (name, instance, addr,"
		"  lease_until, started)"
		" VALUES ($1, $2, $3, now() + $4::interval, now())"
		" ON CONFLICT (name) DO UPDATE SET"
		"  instance = EXCLUDED.instance, addr = EXCLUDED.addr,"
		"  lease_until = EXCLUDED.lease_until,"
		"  started = EXCLUDED.started"
		" WHERE mapfs_nodes.lease_until < now()"
		"  OR mapfs_nodes.instance = EXCLUDED.instance"
		" RETURNING id",
		4, p, PGRES_TUPLES_OK);
	if (!r)
		return -EAGAIN;
	if (PQntuples(r) == 1) {
		pg->node_id = (uint32_t)atoi(PQgetvalue(r, 0, 0));
		PQclear(r);
		return 0;
	}
	PQclear(r);
	r = db_pg_exec_text(
		c,
		"SELECT addr || ', lease until ' || lease_until::text"
		" FROM mapfs_nodes WHERE name = $1",
		1, p, PGRES_TUPLES_OK);
	snprintf(holder, cap, "%s",
		 r && PQntuples(r) ? PQgetvalue(r, 0, 0) : "?");
	PQclear(r);
	return -EBUSY;
}

/*
 * Renew the lease and publish the oldest transaction whose commits this
 * node may still lack, and its live view's figures (ctl stats on the
 * others); now and then prune what every live node has: log
 * entries (and tokens) older than LOG_KEEP_S below that.  0 or -errno.
 */
static int node_renew(struct db_pg *pg, PGconn *c, uint64_t applied_xmin)
{
	char lease[32], id[16], applied[32], live[METRICS_LIVE_TEXT];
	const char *p[5] = { id, pg->instance, lease, applied, live };
	struct metrics_live l;
	PGresult *r;
	int rc = 0;

	snprintf(lease, sizeof(lease), "%u milliseconds", pg->o.lease_ms);
	snprintf(id, sizeof(id), "%u", pg->node_id);
	snprintf(applied, sizeof(applied), "%" PRIu64, applied_xmin);
	if (metrics_live(&l))
		live[0] = '\0';
	else
		metrics_live_format(&l, live, sizeof(live));
	r = db_pg_exec_text(
		c,
		"UPDATE mapfs_nodes SET lease_until = now() + $3::interval,"
		"  applied = $4, live = nullif($5, '')"
		" WHERE id = $1 AND instance = $2",
		5, p, PGRES_COMMAND_OK);
	if (!r)
		return -EAGAIN;
	if (strcmp(PQcmdTuples(r), "1")) {
		log_error("cluster: node %s (id %u) was taken over by another "
			  "instance after its lease ran out",
			  pg->o.node, pg->node_id);
		rc = -EBUSY;
	}
	PQclear(r);
	if (db_pg_now_ms() < pg->prune_next_ms)
		return rc;
	pg->prune_next_ms = db_pg_now_ms() + PRUNE_EVERY_MS;
	r = PQexec(c, "WITH d AS (DELETE FROM mapfs_log WHERE at < now() -"
		      "  interval '600 seconds' AND xid < (SELECT"
		      "  coalesce(min(applied), 0) FROM mapfs_nodes"
		      "  WHERE lease_until > now()) RETURNING xid)"
		      " INSERT INTO mapfs_meta"
		      " SELECT 'pruned_xid', (max(xid) + 1)::text FROM d"
		      " HAVING count(*) > 0"
		      " ON CONFLICT (name) DO UPDATE SET value ="
		      "  greatest(mapfs_meta.value::bigint,"
		      "  EXCLUDED.value::bigint)::text");
	PQclear(r);
	return rc;
}

static bool id_in(const uint32_t *ids, size_t n, uint32_t id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (ids[mid] == id)
			return true;
		if (ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/*
 * Read which nodes are down; tell of each one newly so.  Only once this
 * node has itself renewed without a miss for a lease and the time a
 * node takes to reconnect: after an outage of the database every lease
 * has run out, and the others must have had their chance to renew.
 */
static void nodes_refresh(struct db_pg *pg, PGconn *c)
{
	char me[16];
	const char *p[1] = { me };
	uint32_t *down, *fresh, *old;
	size_t n, nfresh = 0;
	PGresult *r;
	uint64_t settle =
		pg->o.lease_ms + 2 * RECONNECT_MIN_MS + DB_PG_FOLLOW_POLL_MS;

	if (!pg->renewing_since_ms ||
	    db_pg_now_ms() - pg->renewing_since_ms < settle)
		return;
	snprintf(me, sizeof(me), "%u", pg->node_id);
	r = db_pg_exec_text(
		c,
		"SELECT id FROM mapfs_nodes WHERE lease_until < now()"
		" AND id <> $1 ORDER BY id",
		1, p, PGRES_TUPLES_OK);
	if (!r)
		return;
	n = (size_t)PQntuples(r);
	down = calloc(n + 1, sizeof(*down));
	fresh = calloc(n + 1, sizeof(*fresh));
	if (!down || !fresh) {
		free(down);
		free(fresh);
		PQclear(r);
		return;
	}
	for (size_t i = 0; i < n; i++)
		down[i] = (uint32_t)strtoul(PQgetvalue(r, (int)i, 0), NULL, 10);
	PQclear(r);
	pthread_mutex_lock(&pg->nodes_lock);
	for (size_t i = 0; i < n; i++)
		if (!pg->nodes_known || !id_in(pg->down, pg->ndown, down[i]))
			fresh[nfresh++] = down[i];
	old = pg->down;
	pg->down = down;
	pg->ndown = n;
	pg->nodes_known = true;
	pthread_mutex_unlock(&pg->nodes_lock);
	free(old);
	for (size_t i = 0; i < nfresh; i++) {
		log_info("cluster: node %u is down (its lease ran out)",
			 fresh[i]);
		if (pg->sinks.node_down)
			pg->sinks.node_down(pg->sinks.ctx, fresh[i]);
	}
	free(fresh);
}

/* Renew the lease (and with it, read who is down); when to do it next. */
void db_pg_lease_tick(struct db_pg *pg, PGconn *c, uint64_t applied_xmin)
{
	uint64_t sent = db_pg_now_ms();

	if (node_renew(pg, c, applied_xmin) == 0) {
		__atomic_store_n(&pg->held_until_ms,
				 sent + pg->o.lease_ms - pg->o.lease_ms / 4,
				 __ATOMIC_RELEASE);
		/* A gap of half a lease (no connection) counts as a miss. */
		if (pg->renewing_since_ms &&
		    sent - pg->renewed_ms > pg->o.lease_ms / 2)
			pg->renewing_since_ms = 0;
		if (!pg->renewing_since_ms) {
			/* Back after a gap: who is down is unknown again
			 * (none, until the others had their chance). */
			pg->renewing_since_ms = sent;
			pthread_mutex_lock(&pg->nodes_lock);
			pg->ndown = 0;
			pthread_mutex_unlock(&pg->nodes_lock);
		}
		pg->renewed_ms = sent;
	} else {
		pg->renewing_since_ms = 0;
	}
	nodes_refresh(pg, c);
	if (pg->renewed_ms == sent)
		db_pg_runners_tick(pg, c, sent);
	pg->lease_next_ms = sent + pg->o.lease_ms / 3;
}

bool db_pg_node_up(struct db_pg *pg, uint32_t node)
{
	bool down;

	if (node == pg->node_id)
		return true;
	pthread_mutex_lock(&pg->nodes_lock);
	down = id_in(pg->down, pg->ndown, node);
	pthread_mutex_unlock(&pg->nodes_lock);
	return !down;
}

bool db_pg_lease_held(struct db_pg *pg)
{
	return db_pg_now_ms() <
	       __atomic_load_n(&pg->held_until_ms, __ATOMIC_ACQUIRE);
}

/* ---- open and close ------------------------------------------------------ */

static void copts_free(struct db_cluster_opts *o)
{
	free((char *)o->url);
	free((char *)o->node);
	free((char *)o->store_url);
	free((char *)o->addr);
}

int db_pg_open(const struct db_cluster_opts *o, const char *instance,
	       const struct db_pg_sinks *sinks, struct db_pg **out)
{
	struct db_pg *pg = calloc(1, sizeof(*pg));
	uint32_t backoff = 500;
	char holder[256];
	uint64_t waited = 0;
	int rc;

	if (!pg)
		return -ENOMEM;
	pg->o = (struct db_cluster_opts){ .url = strdup(o->url),
					  .node = strdup(o->node),
					  .store_url = strdup(o->store_url),
					  .addr = strdup(o->addr),
					  .lease_ms = o->lease_ms };
	pthread_mutex_init(&pg->svc_lock, NULL);
	pthread_mutex_init(&pg->nodes_lock, NULL);
	pthread_mutex_init(&pg->n_lock, NULL);
	pthread_cond_init(&pg->n_cond, NULL);
	if (sinks)
		pg->sinks = *sinks;
	snprintf(pg->instance, sizeof(pg->instance), "%s", instance);
	/* The log's id of this process: a fresh one at every start, so a
	 * restarted node applies what its last life committed. */
	uint32_t inst = 0;

	while (!(inst &= 0x7fffffffu)) /* an int in the log */
		if (getrandom(&inst, sizeof(inst), 0) != sizeof(inst))
			inst = (uint32_t)db_pg_now_ms();
	atomic_store(&pg->inst_id, inst);
	atomic_store(&pg->rescan_seq, UINT64_MAX);
	if (!pg->o.url || !pg->o.node || !pg->o.store_url || !pg->o.addr) {
		rc = -ENOMEM;
		goto fail;
	}
	/* Unreachable: retry with backoff, saying so; misconfigured: stop. */
	while ((rc = db_pg_pgc_connect(pg, &pg->svc, false)) == -EAGAIN) {
		log_info("cluster: retrying in %u ms", backoff);
		usleep(backoff * 1000);
		backoff = backoff * 2 > START_BACKOFF_MAX_MS
				  ? START_BACKOFF_MAX_MS
				  : backoff * 2;
	}
	if (rc)
		goto fail;
	if ((rc = db_pg_schema(pg->svc.c, pg->o.store_url, pg->cluster_id))) {
		rc = rc == -EAGAIN ? -EIO : rc;
		goto fail;
	}
	/* The name: a live other instance holds it for its lease. */
	while ((rc = node_register(pg, pg->svc.c, holder, sizeof(holder))) ==
		       -EBUSY &&
	       waited < (uint64_t)o->lease_ms + 1000) {
		if (!waited)
			log_warn("cluster: node name %s is held (%s); waiting "
				 "for its lease to run out",
				 o->node, holder);
		usleep(250 * 1000);
		waited += 250;
	}
	if (rc == -EBUSY) {
		log_error("cluster: node name %s is in use by a running "
			  "gateway (%s): give this one another --node",
			  o->node, holder);
		rc = -EINVAL;
		goto fail;
	}
	if (rc) {
		rc = -EIO;
		goto fail;
	}
	atomic_store(&pg->wr_up, true);
	pg->fol.session = db_pg_follow_session;
	pg->ntf.session = NOTIFY_SESSION_SQL;
	if ((rc = db_pg_pgc_connect(pg, &pg->fol, false))) {
		rc = rc == -EAGAIN ? -EIO : rc;
		goto fail;
	}
	db_pg_lease_tick(pg, pg->fol.c, 0);
	if (pthread_create(&pg->notifier, NULL, db_pg_notifier_main, pg)) {
		rc = -EAGAIN;
		goto fail;
	}
	pg->notifier_started = true;
	pthread_setname_np(pg->notifier, "db-notify");
	*out = pg;
	return 0;
fail:
	db_pg_close(pg);
	return rc;
}

void db_pg_close(struct db_pg *pg)
{
	if (!pg)
		return;
	if (pg->notifier_started) {
		pthread_mutex_lock(&pg->n_lock);
		pg->n_stop = true;
		pthread_cond_signal(&pg->n_cond);
		pthread_mutex_unlock(&pg->n_lock);
		pthread_join(pg->notifier, NULL);
	}
	/* The name is free at once for a restart. */
	if (pg->node_id && db_pgc_get(pg, &pg->svc)) {
		char id[16];
		const char *p[2] = { id, pg->instance };
		PGresult *r;

		db_pg_runners_release(pg, pg->svc.c);
		snprintf(id, sizeof(id), "%u", pg->node_id);
		r = PQexecParams(pg->svc.c,
				 "UPDATE mapfs_nodes SET lease_until = now()"
				 " WHERE id = $1 AND instance = $2",
				 2, NULL, p, NULL, NULL, 0);
		PQclear(r);
	}
	db_pg_pgc_close(&pg->svc);
	db_pg_pgc_close(&pg->fol);
	db_pg_pgc_close(&pg->ntf);
	pthread_cond_destroy(&pg->n_cond);
	pthread_mutex_destroy(&pg->n_lock);
	pthread_mutex_destroy(&pg->svc_lock);
	pthread_mutex_destroy(&pg->nodes_lock);
	free(pg->down);
	free(pg->runs);
	copts_free(&pg->o);
	free(pg);
}

uint32_t db_pg_node_id(const struct db_pg *pg)
{
	return pg->node_id;
}

const char *db_pg_cluster_id(const struct db_pg *pg)
{
	return pg->cluster_id;
}

uint32_t db_pg_instance_id(const struct db_pg *pg)
{
	return atomic_load(&((struct db_pg *)pg)->inst_id);
}

PGconn *db_pg_svc_lock(struct db_pg *pg)
{
	pthread_mutex_lock(&pg->svc_lock);
	return db_pgc_get(pg, &pg->svc);
}

void db_pg_svc_unlock(struct db_pg *pg)
{
	pthread_mutex_unlock(&pg->svc_lock);
}

/* The followers are woken (soon, by the notifier). */
void db_pg_notify_kick(struct db_pg *pg)
{
	pthread_mutex_lock(&pg->n_lock);
	pg->n_pending = true;
	pthread_cond_signal(&pg->n_cond);
	pthread_mutex_unlock(&pg->n_lock);
}

/*
 * The notifier: one NOTIFY for every commit of this node that finished
 * before it is sent (commits that end while one is sent get the next),
 * its payload this process's id in the log,
 * in a transaction that does not wait for the disk, on a connection of
 * its own: the commits do not wait for it, and it never holds
 * PostgreSQL's notification lock through a flush.
 */
void *db_pg_notifier_main(void *arg)
{
	struct db_pg *pg = arg;

	pthread_mutex_lock(&pg->n_lock);
	for (;;) {
		while (!pg->n_pending && !pg->n_stop)
			pthread_cond_wait(&pg->n_cond, &pg->n_lock);
		if (pg->n_stop)
			break;
		pg->n_pending = false;
		pthread_mutex_unlock(&pg->n_lock);
		PGconn *c = db_pgc_get(pg, &pg->ntf);

		if (c) {
			/* The payload says whose commits: a follower does not
			 * read the log for its own process's alone. */
			char inst[16];
			const char *p[1] = { inst };
			PGresult *r;

			snprintf(inst, sizeof(inst), "%u",
				 db_pg_instance_id(pg));
			r = PQexecPrepared(c, "mapfs_notify", 1, p, NULL, NULL,
					   0);
			PQclear(r);
		}
		pthread_mutex_lock(&pg->n_lock);
	}
	pthread_mutex_unlock(&pg->n_lock);
	return NULL;
}
