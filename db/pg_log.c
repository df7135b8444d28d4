/*
 * db/pg_log.c - reading the change log by snapshot (the follower's
 * connection, which also keeps the node's lease and hears the NOTIFYs),
 * and the whole namespace at once (a new replica).
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

/* ---- the log ------------------------------------------------------------- */

/* Records of a single-row result, buffered into whole commits. */
struct pages {
	PGresult **rows; /* one result per row, seq ascending */
	size_t n, cap;
	struct db_remote *recs;
};

static void pages_clear(struct pages *p, size_t from)
{
	for (size_t i = from; i < p->n; i++)
		PQclear(p->rows[i]);
	p->n = from;
}

/* Records of the first k rows, their columns from col on: table, key,
 * value, version and, where age is set, the commit's age. */
static int pages_recs(struct pages *p, size_t k, int col, bool age)
{
	struct db_remote *v = realloc(p->recs, (k ? k : 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	p->recs = v;
	for (size_t i = 0; i < k; i++) {
		PGresult *r = p->rows[i];

		v[i] = (struct db_remote){
			.tname = PQgetvalue(r, 0, col),
			.key = PQgetvalue(r, 0, col + 1),
			.klen = (size_t)PQgetlength(r, 0, col + 1),
			.val = PQgetisnull(r, 0, col + 2)
				       ? NULL
				       : PQgetvalue(r, 0, col + 2),
			.vlen = (size_t)PQgetlength(r, 0, col + 2),
			.ver = db_pg_col_u64(r, 0, col + 3),
			.age_us = age ? db_pg_col_u64(r, 0, col + 4) : 0,
		};
	}
	return 0;
}

static int pages_push(struct pages *p, PGresult *r)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 256;
		PGresult **q = realloc(p->rows, cap * sizeof(*q));

		if (!q)
			return -ENOMEM;
		p->rows = q;
		p->cap = cap;
	}
	p->rows[p->n++] = r;
	return 0;
}

static void pages_free(struct pages *p)
{
	pages_clear(p, 0);
	free(p->rows);
	free(p->recs);
}

/* Drain what is left of a query in single-row mode. */
static void drain(PGconn *c)
{
	PGresult *r;

	while ((r = PQgetResult(c)))
		PQclear(r);
}

/*
 * The follower's session: its read of the log prepared once and planned
 * once (planning it cost PostgreSQL ~200 us a read, more than running
 * it: a follower reads the log after every other gateway's commit).  The
 * one plan must never scan the whole log (kept LOG_KEEP_S, it can hold
 * hundreds of thousands of commits) whatever its parameters, so this
 * session does not scan tables sequentially: its other statements (the
 * lease, the log's pruning, one meta row) go by index anyway, and the
 * read of every record (a new replica) allows it for itself.
 */
const char db_pg_follow_session[] =
	"SET enable_seqscan = off;"
	"SET plan_cache_mode = force_generic_plan;"
	"PREPARE mapfs_follow (bigint[], bigint, int, bigint) AS"
	" SELECT s.snap, s.pruned, l.seq, x.t, x.k, x.v, l.seq,"
	" greatest(0, (extract(epoch FROM clock_timestamp() - l.at)"
	"  * 1e6)::bigint)"
	" FROM (SELECT pg_current_snapshot()::text AS snap,"
	"  (SELECT value FROM mapfs_meta WHERE name = 'pruned_xid')"
	"  AS pruned) s"
	" LEFT JOIN mapfs_log l ON (l.xid = ANY($1) OR l.xid >= $2"
	"  OR l.seq > $4) AND l.inst <> $3"
	" LEFT JOIN LATERAL unnest(l.t, l.k, l.v) AS x(t, k, v) ON true"
	" ORDER BY l.seq";

/* Allow (or forbid again) the follower's session sequential scans:
 * 0, or -EAGAIN with the connection no longer trusted. */
static int session_seqscan(PGconn *c, bool on)
{
	PGresult *r = PQexec(c, on ? "SET enable_seqscan = on"
				   : "SET enable_seqscan = off");
	int rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : -EAGAIN;

	PQclear(r);
	return rc;
}

/* The follower's connection, LISTENing; NULL when not connected. */
static PGconn *fol_conn(struct db_pg *pg)
{
	PGconn *c = db_pgc_get(pg, &pg->fol);

	if (!c) {
		pg->listening = false;
		return NULL;
	}
	if (!pg->listening) {
		PGresult *r = PQexec(c, "LISTEN mapfs_log; LISTEN mapfs_msg");

		pg->listening = PQresultStatus(r) == PGRES_COMMAND_OK;
		PQclear(r);
	}
	return pg->listening ? c : NULL;
}

int db_pg_follow(struct db_pg *pg, const struct db_snap *from,
		 int (*page)(void *ctx, const struct db_remote *recs, size_t n),
		 void *ctx, struct db_snap *to, bool *behind)
{
	struct bytebuf xip = { 0 };
	struct pages pp = { 0 };
	char xmax[32], inst[16], seq[32];
	const char *vals[4];
	int lens[4] = { 0 }, fmts[4] = { 1, 0, 0, 0 };
	uint64_t top = from->seq, rescan = atomic_load(&pg->rescan_seq);
	bool first = true;
	PGconn *c = fol_conn(pg);
	PGresult *r;
	int rc = 0;

	*behind = false;
	if (!c)
		return -EAGAIN;
	db_pb_array(&xip, DB_OID_INT8, from->nxip);
	for (size_t i = 0; i < from->nxip; i++) {
		db_pb_u32(&xip, 8);
		db_pb_u64(&xip, from->xip[i]);
	}
	if (xip.bad)
		return -ENOMEM;
	snprintf(xmax, sizeof(xmax), "%" PRIu64, from->xmax);
	snprintf(inst, sizeof(inst), "%u", db_pg_instance_id(pg));
	snprintf(seq, sizeof(seq), "%" PRIu64,
		 rescan < from->seq ? rescan : from->seq);
	vals[0] = (const char *)xip.p;
	lens[0] = (int)xip.len;
	vals[1] = xmax;
	vals[2] = inst;
	vals[3] = seq;
	/* The snapshot and the entries it newly shows, in one statement
	 * (mapfs_follow above: one snapshot): the transactions `from` saw
	 * in progress or after it, and any commit numbered above `from`'s
	 * (an id handed out again after a crash or a failover:
	 * snap_int.h). */
	if (!PQsendQueryPrepared(c, "mapfs_follow", 4, vals, lens, fmts, 1) ||
	    !PQsetSingleRowMode(c)) {
		free(xip.p);
		drain(c);
		return -EAGAIN;
	}
	free(xip.p);
	while ((r = PQgetResult(c))) {
		ExecStatusType st = PQresultStatus(r);

		if (st == PGRES_TUPLES_OK) { /* the end */
			PQclear(r);
			continue;
		}
		if (st != PGRES_SINGLE_TUPLE) {
			rc = rc ? rc : db_pg_res_err(c, r, "read the log");
			PQclear(r);
			continue;
		}
		if (rc) {
			PQclear(r);
			continue;
		}
		if (first) {
			first = false;
			/* Text columns: the snapshot and the pruned mark. */
			rc = db_snap_parse(to, PQgetvalue(r, 0, 0));
			if (!rc && !PQgetisnull(r, 0, 1) && from->xmax &&
			    strtoull(PQgetvalue(r, 0, 1), NULL, 10) >
				    from->xmin)
				*behind = true;
			if (rc || *behind) {
				PQclear(r);
				rc = rc ? rc : 1;
				continue;
			}
		}
		if (PQgetisnull(r, 0, 2)) { /* no entry: the LEFT JOIN's row */
			PQclear(r);
			continue;
		}
		if (db_pg_col_u64(r, 0, 2) > top)
			top = db_pg_col_u64(r, 0, 2);
		/* A page ends between two commits: a commit is never split. */
		if (pp.n >= FOLLOW_PAGE &&
		    db_pg_col_u64(r, 0, 2) !=
			    db_pg_col_u64(pp.rows[pp.n - 1], 0, 2)) {
			rc = pages_recs(&pp, pp.n, 3, true);
			if (!rc)
				rc = page(ctx, pp.recs, pp.n);
			pages_clear(&pp, 0);
		}
		if (!rc && (rc = pages_push(&pp, r)))
			PQclear(r);
	}
	if (!rc && pp.n) {
		rc = pages_recs(&pp, pp.n, 3, true);
		if (!rc)
			rc = page(ctx, pp.recs, pp.n);
	}
	pages_free(&pp);
	to->seq = top;
	if (!rc && rescan != UINT64_MAX) /* read again: done (unless asked
					   * anew meanwhile) */
		atomic_compare_exchange_strong(&pg->rescan_seq, &rescan,
					       UINT64_MAX);
	if (rc == 1) /* behind: not an error */
		rc = 0;
	return rc;
}

int db_pg_snapshot(struct db_pg *pg,
		   int (*page)(void *ctx, const struct db_remote *recs,
			       size_t n, bool first, bool last),
		   void *ctx, struct db_snap *at)
{
	struct pages pp = { 0 };
	bool first_row = true, first_page = true;
	uint64_t total = 0;
	PGconn *c = fol_conn(pg);
	PGresult *r;
	int rc = 0;

	if (!c)
		return -EAGAIN;
	/* Every record: a sequential scan is the plan (the session forbids
	 * it for the log's reads). */
	if (session_seqscan(c, true))
		return -EAGAIN;
	if (!PQsendQueryParams(c,
			       "SELECT s.snap, m.tbl, m.k, m.v, m.ver FROM"
			       " (SELECT pg_current_snapshot()::text AS snap) s"
			       " LEFT JOIN mapfs_records m ON true",
			       0, NULL, NULL, NULL, NULL, 1) ||
	    !PQsetSingleRowMode(c)) {
		drain(c);
		return -EAGAIN;
	}
	while ((r = PQgetResult(c))) {
		ExecStatusType st = PQresultStatus(r);

		if (st == PGRES_TUPLES_OK) {
			PQclear(r);
			continue;
		}
		if (st != PGRES_SINGLE_TUPLE || rc) {
			if (!rc)
				rc = db_pg_res_err(c, r, "read the records");
			PQclear(r);
			continue;
		}
		if (first_row) {
			first_row = false;
			rc = db_snap_parse(at, PQgetvalue(r, 0, 0));
		}
		if (rc || PQgetisnull(r, 0, 1)) {
			PQclear(r);
			continue;
		}
		if (db_pg_col_u64(r, 0, 4) > at->seq)
			at->seq = db_pg_col_u64(r, 0, 4);
		if (pp.n >= FOLLOW_PAGE) {
			rc = pages_recs(&pp, pp.n, 1, false);
			if (!rc)
				rc = page(ctx, pp.recs, pp.n, first_page,
					  false);
			first_page = false;
			total += pp.n;
			pages_clear(&pp, 0);
		}
		if (!rc && (rc = pages_push(&pp, r)))
			PQclear(r);
	}
	if (!rc) {
		rc = pages_recs(&pp, pp.n, 1, false);
		if (!rc)
			rc = page(ctx, pp.recs, pp.n, first_page, true);
		total += pp.n;
	}
	pages_free(&pp);
	if (session_seqscan(c, false)) {
		/* Not to be left allowed: a new session forbids it again. */
		db_pg_pgc_close(&pg->fol);
		pg->listening = false;
		rc = rc ? rc : -EAGAIN;
	}
	if (!rc)
		log_info("cluster: loaded the namespace: %" PRIu64 " records",
			 total);
	return rc;
}

/* "TO FROM TEXT": to this node (or all), not from it. */
static void msg_deliver(struct db_pg *pg, const char *payload)
{
	unsigned to, from;
	int n = 0;

	if (sscanf(payload, "%u %u %n", &to, &from, &n) != 2 || !n)
		return;
	if ((to && to != pg->node_id) || from == pg->node_id)
		return;
	if (pg->sinks.message)
		pg->sinks.message(pg->sinks.ctx, from, payload + n);
}

/* Handle the notifications libpq holds; how many ask for a read of the
 * log (not those of this process's own commits: its replica has them,
 * and the next read, at the latest DB_PG_FOLLOW_POLL_MS on, moves past
 * them). */
static int notifies_drain(struct db_pg *pg, PGconn *c)
{
	PGnotify *nt;
	int n = 0;

	while ((nt = PQnotifies(c))) {
		char *end;
		unsigned long from = strtoul(nt->extra, &end, 10);

		if (!strcmp(nt->relname, "mapfs_msg"))
			msg_deliver(pg, nt->extra);
		else if (!nt->extra[0] || *end || from != db_pg_instance_id(pg))
			n++; /* another's (or a gateway's that does not say) */
		PQfreemem(nt);
	}
	return n;
}

void db_pg_keep_lease(struct db_pg *pg, uint64_t applied_xmin)
{
	PGconn *c = fol_conn(pg);

	if (c && db_pg_now_ms() >= pg->lease_next_ms)
		db_pg_lease_tick(pg, c, applied_xmin);
}

int db_pg_wait(struct db_pg *pg, int stop_fd, int timeout_ms,
	       uint64_t applied_xmin)
{
	PGconn *c = fol_conn(pg);
	struct pollfd pf[2] = { { .fd = stop_fd, .events = POLLIN } };
	int nfds = 1, wait = timeout_ms;
	uint64_t now;

	if (c) {
		if (db_pg_now_ms() >= pg->lease_next_ms)
			db_pg_lease_tick(pg, c, applied_xmin);
		/* A NOTIFY read while the log (or the lease) was read is in
		 * libpq already, not on the socket. */
		PQconsumeInput(c);
		if (notifies_drain(pg, c))
			wait = 0;
		pf[1] = (struct pollfd){ .fd = PQsocket(c), .events = POLLIN };
		nfds = 2;
	}
	now = db_pg_now_ms();
	/* Short leases (tests) renew more often than the poll. */
	if (nfds == 2 && pg->lease_next_ms < now + (uint64_t)wait)
		wait = pg->lease_next_ms > now ? (int)(pg->lease_next_ms - now)
					       : 0;
	/* Until a NOTIFY that asks for a read (not this process's own), the
	 * time, or stop_fd. */
	for (uint64_t until = now + (uint64_t)wait;;) {
		if (poll(pf, (nfds_t)nfds, wait) <= 0)
			return 0;
		if (pf[0].revents & POLLIN)
			return 1;
		if (nfds == 2 && pf[1].revents) {
			/* A connection gone: the read that follows says so. */
			if (!PQconsumeInput(c) || notifies_drain(pg, c))
				return 0;
		}
		now = db_pg_now_ms();
		if (now >= until)
			return 0;
		wait = (int)(until - now);
	}
}
