/*
 * db/pg_runners.c - who runs each node's queue of store work (the records
 * of fs/pending.c: the DELs and COPYs a namespace change leaves for the
 * store).  One node at a time, by a claim in mapfs_runners:
 *
 *   mapfs_runners  queue (a node's id; 0: the gateway alone's, after a
 *                  migration) -> runner (node id), inst, run_until,
 *                  fence_until
 *
 * Each node claims, with every lease renewal, its own queue and the
 * queues of the nodes it sees down (and 0's).  A claim goes to a node
 * only while the one before it ran out (run_until, by the database's
 * clock), and a down node's only while that node is still down: a node
 * that comes back gets its queue again once its adopter's claim lapses.
 * The claim holds, by this node's clock, for 3/4 of a lease from the
 * renewal's start, as the lease does (db_pg_lease_held).
 *
 * Before, every node that saw a node down ran its records, and so did
 * that node itself when it came back from a pause: two runs of one
 * record, in either order with the records after it, put a removed
 * name's object back (found by the fault campaign, issue 48, seed 3).
 *
 * A store request a runner started just before its claim lapsed (a
 * process paused past its lease, a request held up in the network) can
 * still land after it.  A node that takes a queue from another runner
 * therefore waits RUN_FENCE_LEASES leases past that runner's run_until
 * (fence_until) before it runs a record: a request must land within that
 * long of the claim's end.  The same runner renewing keeps its fence.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "pg_priv.h"

#define RUN_FENCE_LEASES 2

/* The queues to claim: this node's, 0's, and those of the nodes down. */
static void queues_wanted(struct db_pg *pg, char *buf, size_t cap)
{
	size_t len = (size_t)snprintf(buf, cap, "{%u,0", pg->node_id);

	pthread_mutex_lock(&pg->nodes_lock);
	for (size_t i = 0; i < pg->ndown && len + 16 < cap; i++)
		len += (size_t)snprintf(buf + len, cap - len, ",%u",
					pg->down[i]);
	pthread_mutex_unlock(&pg->nodes_lock);
	snprintf(buf + len, cap - len, "}");
}

static struct db_pg_run *run_find(struct db_pg_run *runs, size_t n,
				  uint32_t queue)
{
	for (size_t i = 0; i < n; i++)
		if (runs[i].queue == queue)
			return &runs[i];
	return NULL;
}

void db_pg_runners_tick(struct db_pg *pg, PGconn *c, uint64_t sent)
{
	char me[16], lease[32], fence[32], *queues;
	const char *p[5] = { me, pg->instance, lease, fence, NULL };
	struct db_pg_run *runs, *old;
	size_t cap = 64 + 12 * (pg->ndown + 2), n, nold;
	uint64_t got;
	PGresult *r;

	queues = malloc(cap);
	if (!queues)
		return;
	queues_wanted(pg, queues, cap);
	p[4] = queues;
	snprintf(me, sizeof(me), "%u", pg->node_id);
	snprintf(lease, sizeof(lease), "%u milliseconds", pg->o.lease_ms);
	snprintf(fence, sizeof(fence), "%u milliseconds",
		 RUN_FENCE_LEASES * pg->o.lease_ms);
	r = db_pg_exec_text(
		c,
		"INSERT INTO mapfs_runners AS r"
		"  (queue, runner, inst, run_until, fence_until)"
		" SELECT q, $1, $2, now() + $3::interval, now()"
		"  FROM unnest($5::int[]) AS q"
		"  WHERE q = $1::int OR NOT EXISTS (SELECT 1 FROM mapfs_nodes n"
		"   WHERE n.id = q AND n.lease_until > now())"
		" ON CONFLICT (queue) DO UPDATE SET"
		"  runner = EXCLUDED.runner, inst = EXCLUDED.inst,"
		"  run_until = EXCLUDED.run_until,"
		"  fence_until = CASE WHEN r.runner = EXCLUDED.runner"
		"   AND r.inst = EXCLUDED.inst THEN r.fence_until"
		"   ELSE r.run_until + $4::interval END"
		"  WHERE (r.runner = EXCLUDED.runner AND r.inst = "
		"EXCLUDED.inst)"
		"   OR r.run_until < now()"
		" RETURNING queue, greatest(0, ceil(extract(epoch FROM"
		"  fence_until - now()) * 1000))::bigint",
		5, p, PGRES_TUPLES_OK);
	free(queues);
	if (!r)
		return; /* the claims lapse by the clock */
	got = db_pg_now_ms();
	n = (size_t)PQntuples(r);
	runs = calloc(n ? n : 1, sizeof(*runs));
	if (!runs) {
		PQclear(r);
		return;
	}
	pthread_mutex_lock(&pg->nodes_lock);
	for (size_t i = 0; i < n; i++) {
		struct db_pg_run *was;

		runs[i].queue =
			(uint32_t)strtoul(PQgetvalue(r, (int)i, 0), NULL, 10);
		runs[i].held_until_ms =
			sent + pg->o.lease_ms - pg->o.lease_ms / 4;
		runs[i].from_ms =
			got + strtoull(PQgetvalue(r, (int)i, 1), NULL, 10);
		was = run_find(pg->runs, pg->nruns, runs[i].queue);
		if (runs[i].queue != pg->node_id &&
		    (!was || was->held_until_ms <= sent))
			log_info("cluster: this node runs node %u's queued "
				 "store work%s",
				 runs[i].queue,
				 runs[i].from_ms > got
					 ? " once its last runner's fence is "
					   "over"
					 : "");
	}
	old = pg->runs;
	nold = pg->nruns;
	pg->runs = runs;
	pg->nruns = n;
	for (size_t i = 0; i < nold; i++)
		if (old[i].queue != pg->node_id &&
		    old[i].held_until_ms > sent &&
		    !run_find(runs, n, old[i].queue))
			log_info("cluster: node %u's queued store work is no "
				 "longer this node's to run",
				 old[i].queue);
	pthread_mutex_unlock(&pg->nodes_lock);
	free(old);
	PQclear(r);
}

/* Does this node hold the claim to queue, surely (and, with fenced, is
 * the fence after its last runner over)? */
static bool run_held(struct db_pg *pg, uint32_t queue, bool fenced)
{
	uint64_t now = db_pg_now_ms();
	struct db_pg_run *run;
	bool ok;

	pthread_mutex_lock(&pg->nodes_lock);
	run = run_find(pg->runs, pg->nruns, queue);
	ok = run && now < run->held_until_ms &&
	     (!fenced || now >= run->from_ms);
	pthread_mutex_unlock(&pg->nodes_lock);
	return ok;
}

bool db_pg_queue_runnable(struct db_pg *pg, uint32_t queue)
{
	return run_held(pg, queue, true);
}

bool db_pg_queue_claimed(struct db_pg *pg, uint32_t queue)
{
	return run_held(pg, queue, false);
}

void db_pg_runners_release(struct db_pg *pg, PGconn *c)
{
	char me[16];
	const char *p[2] = { me, pg->instance };
	PGresult *r;

	snprintf(me, sizeof(me), "%u", pg->node_id);
	/* Nothing of this process is in flight any more: no fence. */
	r = PQexecParams(c,
			 "UPDATE mapfs_runners SET run_until = now() -"
			 "  interval '1 day', fence_until = now()"
			 " WHERE runner = $1::int AND inst = $2",
			 2, NULL, p, NULL, NULL, 0);
	PQclear(r);
	pthread_mutex_lock(&pg->nodes_lock);
	free(pg->runs);
	pg->runs = NULL;
	pg->nruns = 0;
	pthread_mutex_unlock(&pg->nodes_lock);
}
