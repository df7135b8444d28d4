/*
 * db/pg_commit.c - commits: one call of mapfs_commit3() on a connection
 * of the committer's own, with its token; a commit whose answer was lost
 * with its connection is asked about (did it land?) instead of being run
 * again; stale reads come back with a snapshot that shows them.
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

/* ---- commits ----------------------------------------------------------- */

/* A committer's session: what mapfs_commit3() needs, set once rather than
 * on every call (pg_schema.c).  A lock wait over a second is a conflict
 * (run again); index lookups only, planned once: a plan the statistics
 * of a small table chose (a seq scan, hash or merge join) would read the
 * whole table of records for every commit.  The call itself is prepared
 * once too (parsing and planning it each time cost ~40 us a commit). */
#define COMMIT_SESSION_SQL                                                   \
	"SET lock_timeout = '1s';"                                           \
	"SET enable_seqscan = off;"                                          \
	"SET enable_hashjoin = off;"                                         \
	"SET enable_mergejoin = off;"                                        \
	"SET plan_cache_mode = force_generic_plan;"                          \
	"PREPARE mapfs_commit (int, int, bigint, text[], bytea[], bigint[]," \
	" text[], bytea[], bytea[], bigint[]) AS SELECT * FROM"              \
	" mapfs_commit3($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"

int db_pg_conn_open(struct db_pg *pg, struct db_pg_conn **out)
{
	static atomic_uint next;
	struct db_pg_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->pg = pg;
	snprintf(c->p.name, sizeof(c->p.name), "mapfs-gw %u.%u.%u", pg->node_id,
		 pg->inst_id, atomic_fetch_add(&next, 1));
	c->p.session = COMMIT_SESSION_SQL;
	*out = c;
	return db_pg_pgc_connect(pg, &c->p, true) == -EINVAL ? -EINVAL : 0;
}

void db_pg_conn_close(struct db_pg_conn *c)
{
	if (!c)
		return;
	db_pg_pgc_close(&c->p);
	free(c);
}

void db_pg_commit_abandon(struct db_pg *pg)
{
	atomic_store(&pg->abandon, true);
}

bool db_pg_up(struct db_pg *pg)
{
	return atomic_load(&pg->wr_up);
}

static void say_down(struct db_pg *pg)
{
	if (atomic_exchange(&pg->wr_up, false))
		log_warn("cluster: PostgreSQL does not answer: changes of the "
			 "namespace answer JUKEBOX until it does");
}

/* A snapshot of now on c, or an empty one (the caller runs again at
 * once). */
static void snap_now(PGconn *c, struct db_snap *s)
{
	PGresult *r = PQexec(c, "SELECT pg_current_snapshot()::text");

	db_snap_free(s);
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
		db_snap_parse(s, PQgetvalue(r, 0, 0));
	PQclear(r);
}

/* This process's later commits get a new id in the log: the follower
 * takes those made under the old one as another node's. */
static void inst_bump(struct db_pg *pg)
{
	uint32_t inst = (atomic_load(&pg->inst_id) + 1) & 0x7fffffffu;

	atomic_store(&pg->inst_id, inst ? inst : 1);
}

/* The next follow reads again every commit numbered above seq. */
static void rescan_from(struct db_pg *pg, uint64_t seq)
{
	uint64_t cur = atomic_load(&pg->rescan_seq);

	while (seq < cur &&
	       !atomic_compare_exchange_weak(&pg->rescan_seq, &cur, seq))
		;
}

/* A WARNING while a commit of ours ran (arg: its flag).  The one it can
 * get is that its wait for the synchronous standby was cut off (an
 * operator's pg_cancel_backend): committed on this server, maybe not on
 * the standby.  Logged. */
static void commit_notice(void *arg, const PGresult *res)
{
	const char *sev =
		PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

	if (sev && !strcmp(sev, "WARNING"))
		*(bool *)arg = true;
	log_warn("cluster: PostgreSQL says: %s", msg ? msg : "(nothing)");
}

/*
 * Whether what this server committed so far is also on its synchronous
 * standby, should it have one: a commit of our own, made after, that
 * waits for the standby as every commit does (a transactional WAL
 * message: no table, no lock), covers every commit before it.
 *
 * Needed where a commit landed but its wait for the standby may have
 * been cut off: PostgreSQL then keeps it here, "committed locally, but
 * might not have been replicated", and says so only in a WARNING.  A
 * failover to the standby would lose a change already answered.  That
 * happens to a commit whose backend was ended or cancelled in that wait:
 * by an operator, or by commit_doubt when the backend entered the wait
 * just after the doubt looked (it leaves one it sees waiting alone).
 * Blocks, as a commit does, for as long as the standby does not answer.
 * 0 once the standby has it, or -EAGAIN (the connection failed, or this
 * wait was cut off too).
 */
static int standby_has_it(PGconn *c)
{
	bool warned = false;
	PQnoticeReceiver was = PQsetNoticeReceiver(c, commit_notice, &warned);
	PGresult *r = PQexec(
		c, "SELECT pg_logical_emit_message(true, 'mapfs-gw', 'sync')");
	int rc = PQresultStatus(r) == PGRES_TUPLES_OK && !warned ? 0 : -EAGAIN;

	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		log_warn("cluster: could not learn whether the standby has a "
			 "commit: %s",
			 PQerrorMessage(c));
	PQclear(r);
	PQsetNoticeReceiver(c, was, NULL);
	return rc;
}

/*
 * The commit's answer was lost with its connection: whether it landed.
 * First this process takes a new id in the log, so that the follower
 * applies the commit like another node's should it land (or have landed)
 * unseen here; versions make a second apply a no-op.  Once connected
 * again, the backend that ran it must be gone (it may still be
 * committing), then its token says.  Gives up after DOUBT_GIVEUP_MS, or
 * when the node stops: then the follower reads again what came after
 * this connection's last commit (it may have passed the commit over as
 * this process's own).  0 (*seq), or -EAGAIN (it did not land, or
 * nobody knows: logged).
 */
static int commit_doubt(struct db_pg_conn *dc, int old_pid, uint64_t token,
			uint64_t *seq)
{
	struct db_pg *pg = dc->pg;
	char node[16], tok[32], pid[16], after[32];
	const char *p[3] = { node, tok, after }, *pp[2] = { pid, dc->p.name };
	uint64_t t0 = db_pg_now_ms();
	PGresult *r;
	PGconn *c;

	snprintf(node, sizeof(node), "%u", pg->node_id);
	snprintf(tok, sizeof(tok), "%" PRId64, (int64_t)token);
	snprintf(pid, sizeof(pid), "%d", old_pid);
	snprintf(after, sizeof(after), "%" PRIu64, dc->last_seq);
	log_warn("cluster: the answer to a commit was lost with its "
		 "connection: asking the database whether it landed");
	inst_bump(pg);
	for (;;) {
		if (atomic_load(&pg->abandon) ||
		    db_pg_now_ms() - t0 >= DOUBT_GIVEUP_MS) {
			/* Should it have landed, the follower applies it and
			 * the replica stays the cluster's.  Its callers get
			 * JUKEBOX; a retry may find its own change done. */
			rescan_from(pg, dc->last_seq);
			log_error("cluster: the database did not answer for "
				  "%u ms: not knowing whether a commit landed "
				  "(token %s); its changes answer JUKEBOX, and "
				  "the follower applies it if it did",
				  DOUBT_GIVEUP_MS, tok);
			return -EAGAIN;
		}
		c = db_pgc_get(pg, &dc->p);
		if (!c) {
			usleep(200 * 1000);
			continue;
		}
		/* The old backend may still be running the commit.  Not
		 * one waiting for the synchronous standby: ended there, its
		 * commit would stay here only, visible, "not replicated",
		 * and a failover would take it from every replica that
		 * applied it meanwhile.  Left alone, it shows only once the
		 * standby has it (then the follower applies it). */
		r = PQexecParams(c,
				 "SELECT pg_terminate_backend(pid) FROM"
				 " pg_stat_activity WHERE pid = $1"
				 " AND application_name = $2"
				 " AND pid <> pg_backend_pid()"
				 " AND wait_event IS DISTINCT FROM 'SyncRep'",
				 2, NULL, pp, NULL, NULL, 0);
		PQclear(r);
		r = PQexecParams(c,
				 "SELECT count(*) FROM pg_stat_activity"
				 " WHERE pid = $1 AND application_name = $2"
				 " AND pid <> pg_backend_pid()",
				 2, NULL, pp, NULL, NULL, 0);
		bool gone = PQresultStatus(r) == PGRES_TUPLES_OK &&
			    !strcmp(PQgetvalue(r, 0, 0), "0");

		PQclear(r);
		if (!gone && db_pg_now_ms() - t0 < DOUBT_WAIT_MAX_MS) {
			usleep(50 * 1000);
			continue;
		}
		/* It was numbered after this connection's last commit. */
		r = PQexecParams(c,
				 "SELECT seq FROM mapfs_log WHERE node = $1"
				 " AND tok = $2 AND seq > $3",
				 3, NULL, p, NULL, NULL, 1);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			PQclear(r);
			usleep(200 * 1000);
			continue;
		}
		bool landed = PQntuples(r) == 1;

		if (landed)
			*seq = db_pg_col_u64(r, 0, 0);
		else if (!gone) /* still running: it may land yet */
			rescan_from(pg, dc->last_seq);
		PQclear(r);
		/* Ended above in its wait for the standby, it may be here
		 * only: answered only once the standby has it too. */
		if (landed && standby_has_it(c)) {
			usleep(200 * 1000);
			continue;
		}
		log_info("cluster: that commit %s",
			 landed ? "landed" : "did not land");
		return landed ? 0 : -EAGAIN;
	}
}

/* The commit's parameters: reads not written, and the writes with the
 * versions they replace. */
static int commit_params(const struct db_track *t, const char *const *tnames,
			 struct bytebuf a[7])
{
	size_t nr = 0;

	for (size_t i = 0; i < t->nreads; i++)
		nr += !t->reads[i].written;
	db_pb_array(&a[0], DB_OID_TEXT, nr);
	db_pb_array(&a[1], DB_OID_BYTEA, nr);
	db_pb_array(&a[2], DB_OID_INT8, nr);
	for (size_t i = 0; i < t->nreads; i++) {
		const struct db_rec *rec = &t->reads[i];

		if (rec->written) /* checked with its write */
			continue;
		db_pb_elem(&a[0], tnames[rec->tbl], strlen(tnames[rec->tbl]));
		db_pb_elem(&a[1], db_rec_key(t, rec), rec->klen);
		db_pb_u32(&a[2], 8);
		db_pb_u64(&a[2], rec->ver);
	}
	db_pb_array(&a[3], DB_OID_TEXT, t->nwrites);
	db_pb_array(&a[4], DB_OID_BYTEA, t->nwrites);
	db_pb_array(&a[5], DB_OID_BYTEA, t->nwrites);
	db_pb_array(&a[6], DB_OID_INT8, t->nwrites);
	for (size_t i = 0; i < t->nwrites; i++) {
		const struct db_rec *rec = &t->writes[i];

		db_pb_elem(&a[3], tnames[rec->tbl], strlen(tnames[rec->tbl]));
		db_pb_elem(&a[4], db_rec_key(t, rec), rec->klen);
		db_pb_elem(&a[5], rec->del ? NULL : db_rec_val(t, rec),
			   rec->vlen);
		db_pb_u32(&a[6], 8);
		db_pb_u64(&a[6], rec->ver);
	}
	for (int i = 0; i < 7; i++)
		if (a[i].bad)
			return -ENOMEM;
	return 0;
}

/* Whether a failed call's connection went away: its answer may be lost. */
static bool conn_lost(PGconn *c, PGresult *r)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

	return PQstatus(c) != CONNECTION_OK || !state ||
	       !strncmp(state, "08", 2) || !strncmp(state, "57P", 3);
}

/* Whether a failed commit met another commit of the same records (it
 * waited for it, or gave up waiting): run again once the follower saw
 * what that one did. */
static bool conflict_state(const char *state)
{
	return state && (!strcmp(state, "23505") || /* unique violation */
			 !strcmp(state, "40001") || /* serialization */
			 !strcmp(state, "40P01") || /* deadlock */
			 !strcmp(state, "55P03"));  /* lock timeout */
}

/* A commit in doubt asked about (commit_doubt), its outcome noted. */
static int commit_ask(struct db_pg_conn *dc, int pid, uint64_t token,
		      uint64_t *seq)
{
	int rc = commit_doubt(dc, pid, token, seq);

	if (rc)
		say_down(dc->pg);
	else
		dc->last_seq = *seq;
	return rc;
}

int db_pg_commit(struct db_pg_conn *dc, const struct db_track *t,
		 const char *const *tnames, uint64_t token, uint64_t *seq,
		 struct db_snap *stale)
{
	struct db_pg *pg = dc->pg;
	struct bytebuf a[7] = { { 0 } };
	char node[16], inst[16], tok[32];
	const char *vals[10];
	int lens[10], fmts[10], pid;
	PGconn *c;
	PGresult *r = NULL;
	PQnoticeReceiver was;
	bool warned;
	int rc;

	/* A server that closed the connection (a shutdown, a crash seen by
	 * the kernel) is found before sending: then nothing was sent, and
	 * the change simply did not land.  (One read may take only what it
	 * said before closing: the end shows on the next.) */
	for (int i = 0; i < 3 && dc->p.c && PQstatus(dc->p.c) == CONNECTION_OK;
	     i++)
		if (!PQconsumeInput(dc->p.c))
			break;
	c = db_pgc_get(pg, &dc->p);

	if (!c) {
		say_down(pg);
		return -EAGAIN;
	}
	if ((rc = commit_params(t, tnames, a)))
		goto out;
	snprintf(node, sizeof(node), "%u", pg->node_id);
	snprintf(inst, sizeof(inst), "%u", db_pg_instance_id(pg));
	snprintf(tok, sizeof(tok), "%" PRId64, (int64_t)token);
	vals[0] = node;
	vals[1] = inst;
	vals[2] = tok;
	for (int i = 0; i < 3; i++) {
		lens[i] = 0;
		fmts[i] = 0;
	}
	for (int i = 0; i < 7; i++) {
		vals[i + 3] = (const char *)a[i].p;
		lens[i + 3] = (int)a[i].len;
		fmts[i + 3] = 1;
	}
	pid = PQbackendPID(c);
	warned = false;
	was = PQsetNoticeReceiver(c, commit_notice, &warned);
	r = PQexecPrepared(c, "mapfs_commit", 10, vals, lens, fmts, 1);
	PQsetNoticeReceiver(c, was, NULL);
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) >= 1) {
		if (!atomic_exchange(&pg->wr_up, true))
			log_info("cluster: PostgreSQL answers again");
		*seq = db_pg_col_u64(r, 0, 0);
		/* Its wait for the standby cut off: landed here; answered
		 * once the standby has it, else as a commit in doubt. */
		if (*seq && warned && standby_has_it(c)) {
			PQclear(r);
			r = NULL;
			*seq = 0;
			rc = commit_ask(dc, pid, token, seq);
			goto out;
		}
		if (*seq) {
			dc->last_seq = *seq;
			db_pg_notify_kick(pg);
			rc = 0;
		} else {
			/* Stale reads: what shows them. */
			for (int i = 0; i < PQntuples(r) && i < 4; i++) {
				char hex[33] = "";
				const unsigned char *k =
					(const unsigned char *)PQgetvalue(r, i,
									  2);
				int kl = PQgetlength(r, i, 2);

				for (int j = 0; j < kl && j < 16; j++)
					snprintf(hex + 2 * j, 3, "%02x", k[j]);
				log_debug(
					"cluster: stale: %s %s now at %" PRIu64,
					PQgetvalue(r, i, 1), hex,
					db_pg_col_u64(r, i, 4));
			}
			rc = db_snap_parse(stale, PQgetvalue(r, 0, 5));
			rc = rc == -ENOMEM ? rc : -ESTALE;
		}
		goto out;
	}
	if (conn_lost(c, r)) {
		PQclear(r);
		r = NULL;
		rc = commit_ask(dc, pid, token, seq);
		goto out;
	}
	const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);

	if (conflict_state(state)) {
		/* Again once the follower saw what the other commit did; but
		 * a lock wait that timed out met a transaction still open,
		 * with nothing to see yet: again at once (an empty mark), its
		 * second waited already.  Waiting for the follower's next
		 * read there, up to its poll's second a try when nothing else
		 * commits, made a change behind a held lock answer JUKEBOX
		 * after ~14 s instead of ~9 (test_e2e_cluster "a record
		 * locked by another session", under ASan in CI). */
		if (strcmp(state, "55P03"))
			snap_now(c, stale);
		rc = -ESTALE;
		goto out;
	}
	rc = db_pg_res_err(c, r, "commit");
	if (PQstatus(c) != CONNECTION_OK)
		say_down(pg);
	else
		atomic_store(&pg->wr_up, true); /* it answered, with an error */
out:
	PQclear(r);
	for (int i = 0; i < 7; i++)
		free(a[i].p);
	return rc;
}
