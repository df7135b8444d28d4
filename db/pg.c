/*
 * db/pg.c - the cluster's records in PostgreSQL, over libpq: connections,
 * the schema, the node and its lease, commits, and reading the change log.
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
 *   mapfs_counters name -> next: the inode numbers
 *   mapfs_secrets, mapfs_locks, mapfs_lock_hosts, mapfs_notes: pgsvc.c
 *
 * A commit is one call of mapfs_commit2(): it locks the records it
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
#include "pg_int.h"

#define SCHEMA_VERSION 2
#define LOG_KEEP_S 600        /* log entries and tokens kept this long */
#define RECONNECT_MIN_MS 1000 /* between attempts of a connection */
#define START_BACKOFF_MAX_MS 10000
#define FOLLOW_PAGE 2000       /* records handed over at a time */
#define FOLLOW_POLL_MS 1000    /* the log is read at least this often */
#define DOUBT_WAIT_MAX_MS 2000 /* for a lost commit's backend to end */
#define DOUBT_GIVEUP_MS 5000   /* to learn whether a lost commit landed */
#define PRUNE_EVERY_MS 10000   /* how often a node prunes the log */

struct db_pg {
	struct db_cluster_opts o;
	char instance[33];
	/* This process's id in the log (its own commits the follower
	 * skips); a new one once a commit's answer is lost, so that the
	 * follower applies that commit should it have landed. */
	atomic_uint inst_id;
	/* Commits numbered above this are read again by the next follow,
	 * whoever made them (UINT64_MAX: none): a lost commit whose fate
	 * stayed unknown, which the follower may have passed over as this
	 * process's own before the id changed. */
	_Atomic uint64_t rescan_seq;
	char cluster_id[33];
	uint32_t node_id;
	struct db_pg_sinks sinks;
	atomic_bool wr_up; /* the last commit got an answer (commit threads) */
	atomic_bool abandon;

	pthread_mutex_t svc_lock;
	struct pgc svc;

	/* The notifier (notifier_main). */
	pthread_t notifier;
	bool notifier_started;
	pthread_mutex_t n_lock;
	pthread_cond_t n_cond;
	bool n_pending, n_stop;
	struct pgc ntf;

	struct pgc fol;
	bool listening;
	uint64_t lease_next_ms, prune_next_ms;
	/* Until when this node's lease surely holds, by this clock (ms). */
	uint64_t held_until_ms;
	/* Renewing without a gap since (ms; 0: the last renewal failed),
	 * and the last renewal that went through. */
	uint64_t renewing_since_ms, renewed_ms;
	/* Membership as last read (the follower's): ids of the nodes whose
	 * lease ran out, sorted. */
	pthread_mutex_t nodes_lock;
	uint32_t *down;
	size_t ndown;
	bool nodes_known;
};

struct db_pg_conn {
	struct db_pg *pg;
	struct pgc p;
	uint64_t last_seq; /* of its last commit: a later one is above */
};

uint64_t db_pg_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The URL without a password, for messages. */
static void url_safe(const char *url, char *out, size_t cap)
{
	const char *at = strchr(url, '@'), *scheme = strstr(url, "://");
	const char *colon;

	snprintf(out, cap, "%s", url);
	if (!at || !scheme || at < scheme)
		return;
	colon = memchr(scheme + 3, ':', (size_t)(at - scheme - 3));
	if (colon)
		snprintf(out, cap, "%.*s%s", (int)(colon - url), url, at);
	char *q = strstr(out, "password=");

	if (q) /* a password in the query string */
		snprintf(q, cap - (size_t)(q - out), "password=***");
}

/* A message of libpq on one line (it ends them with newlines). */
static const char *pq_msg(const PGconn *c, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s", c ? PQerrorMessage(c) : "out of memory");
	for (char *p = buf; *p; p++)
		if (*p == '\n')
			*p = *(p + 1) ? ' ' : '\0';
	return buf;
}

/*
 * Whether a failed connection is a mistake of the configuration (wrong
 * password, user or database, a bad URL) rather than a server not there.
 */
static bool conn_fatal(const char *msg)
{
	static const char *const fatal[] = {
		"password authentication failed",
		"no password supplied",
		"does not exist",
		"invalid connection option",
		"invalid URI",
		"invalid integer value",
		"authentication failed",
		"missing \"=\"",
		"invalid sslmode",
	};

	for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		if (strstr(msg, fatal[i]))
			return true;
	return false;
}

/* What the server says besides answers (a backend terminated, a shutdown
 * coming): the log's, at debug, on one line. */
static void notice_log(void *arg, const char *msg)
{
	char buf[512];
	size_t n;

	(void)arg;
	snprintf(buf, sizeof(buf), "%s", msg);
	n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	log_debug("cluster: PostgreSQL says: %s", buf);
}

/* Every connection's session settings. */
static int conn_setup(PGconn *c)
{
	/* jit: compiling a plan takes 100+ ms, the statements here take
	 * less than one; and the commit function's plans, which forbid
	 * sequential scans, look expensive enough to be compiled. */
	PGresult *r = PQexec(c, "SET synchronous_commit = on;"
				"SET jit = off;"
				"SET max_parallel_workers_per_gather = 0;"
				"SET statement_timeout = '30s';"
				"SET client_min_messages = warning");
	int rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : -EIO;

	PQclear(r);
	return rc;
}

int db_pg_connect_url(const char *url, PGconn **out)
{
	char msg[512], safe[512];
	PGconn *c = PQconnectdb(url);

	if (c)
		PQsetNoticeProcessor(c, notice_log, NULL);
	if (c && PQstatus(c) == CONNECTION_OK && !conn_setup(c)) {
		*out = c;
		return 0;
	}
	pq_msg(c, msg, sizeof(msg));
	url_safe(url, safe, sizeof(safe));
	PQfinish(c);
	*out = NULL;
	if (conn_fatal(msg)) {
		log_error("cluster: PostgreSQL at %s refused us: %s", safe,
			  msg);
		return -EINVAL;
	}
	log_debug("cluster: PostgreSQL at %s does not answer (%s)", safe, msg);
	return -EAGAIN;
}

/* The name the connection gives itself (application_name): a commit
 * whose answer was lost finds its backend by it.  0 or -EIO. */
static int pgc_name(struct pgc *p)
{
	char sql[96];
	PGresult *r;
	int rc;

	if (!p->name[0])
		return 0;
	snprintf(sql, sizeof(sql), "SET application_name = '%s'", p->name);
	r = PQexec(p->c, sql);
	rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : -EIO;
	PQclear(r);
	return rc;
}

/* Connect p now; 0, -EAGAIN (not there), -EINVAL (fatal; logged). */
static int pgc_connect(struct db_pg *pg, struct pgc *p, bool quiet)
{
	char safe[512];
	int rc;

	if (p->c)
		PQfinish(p->c);
	p->last_try_ms = db_pg_now_ms();
	rc = db_pg_connect_url(pg->o.url, &p->c);
	if (!rc && pgc_name(p)) {
		PQfinish(p->c);
		p->c = NULL;
		rc = -EAGAIN;
	}
	if (rc == -EAGAIN && !quiet) {
		url_safe(pg->o.url, safe, sizeof(safe));
		log_warn("cluster: PostgreSQL at %s does not answer", safe);
	}
	return rc;
}

PGconn *db_pgc_get(struct db_pg *pg, struct pgc *p)
{
	if (p->c && PQstatus(p->c) == CONNECTION_OK)
		return p->c;
	if (p->c)
		PQreset(p->c);
	if (p->c && PQstatus(p->c) == CONNECTION_OK && !conn_setup(p->c) &&
	    !pgc_name(p))
		return p->c;
	if (db_pg_now_ms() - p->last_try_ms < RECONNECT_MIN_MS)
		return NULL;
	return pgc_connect(pg, p, true) ? NULL : p->c;
}

static void pgc_close(struct pgc *p)
{
	if (p->c)
		PQfinish(p->c);
	p->c = NULL;
}

int db_pg_res_err(PGconn *c, PGresult *r, const char *what)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	static _Atomic uint64_t read_only_logged_ms;
	char msg[512];

	/* A database that went read-only (a demoted primary, a standby
	 * named by mistake, default_transaction_read_only): changes wait
	 * and are retried; say why, once every 30 s. */
	if (state && !strcmp(state, "25006")) {
		uint64_t now = db_pg_now_ms(),
			 last = atomic_load(&read_only_logged_ms);

		if ((!last || now - last >= 30000) &&
		    atomic_compare_exchange_strong(&read_only_logged_ms, &last,
						   now))
			log_warn("cluster: the database refuses writes (%s): "
				 "changes wait (clients get NFS3ERR_JUKEBOX) "
				 "until it takes them again",
				 pq_msg(c, msg, sizeof(msg)));
	}
	if (!c || PQstatus(c) != CONNECTION_OK || !state ||
	    !strncmp(state, "08", 2) ||  /* connection exception */
	    !strncmp(state, "53", 2) ||  /* insufficient resources */
	    !strncmp(state, "57P", 3) || /* admin shutdown, crash */
	    !strcmp(state, "25006") ||   /* read-only transaction */
	    !strcmp(state, "40001") ||   /* serialization failure */
	    !strcmp(state, "40P01") ||   /* deadlock */
	    !strcmp(state, "55P03") ||   /* lock not available */
	    !strcmp(state, "57014"))     /* statement timeout */
		return -EAGAIN;
	log_error("cluster: %s: %s", what, pq_msg(c, msg, sizeof(msg)));
	return -EIO;
}

/* ---- binary parameters and results ------------------------------------ */

void db_pb_add(struct pbuf *b, const void *d, size_t n)
{
	if (b->bad)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		unsigned char *q;

		while (cap < b->len + n)
			cap *= 2;
		q = realloc(b->p, cap);
		if (!q) {
			b->bad = true;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
}

void db_pb_u32(struct pbuf *b, uint32_t v)
{
	v = htonl(v);
	db_pb_add(b, &v, 4);
}

void db_pb_u64(struct pbuf *b, uint64_t v)
{
	db_pb_u32(b, (uint32_t)(v >> 32));
	db_pb_u32(b, (uint32_t)v);
}

void db_pb_array(struct pbuf *b, uint32_t oid, size_t n)
{
	db_pb_u32(b, 1); /* dimensions */
	db_pb_u32(b, 1); /* has nulls (allowed) */
	db_pb_u32(b, oid);
	db_pb_u32(b, (uint32_t)n);
	db_pb_u32(b, 1); /* lower bound */
}

void db_pb_elem(struct pbuf *b, const void *d, size_t n)
{
	if (!d) {
		db_pb_u32(b, 0xffffffffu); /* NULL */
		return;
	}
	db_pb_u32(b, (uint32_t)n);
	db_pb_add(b, d, n);
}

static uint64_t get_u64(const char *p)
{
	uint32_t hi, lo;

	memcpy(&hi, p, 4);
	memcpy(&lo, p + 4, 4);
	return (uint64_t)ntohl(hi) << 32 | ntohl(lo);
}

uint64_t db_pg_col_u64(const PGresult *r, int i, int col)
{
	if (PQgetisnull(r, i, col) || PQgetlength(r, i, col) != 8)
		return 0;
	return get_u64(PQgetvalue(r, i, col));
}

/* ---- the schema ---------------------------------------------------------- */

static const char schema_sql[] =
	"CREATE TABLE IF NOT EXISTS mapfs_meta ("
	"  name text PRIMARY KEY, value text NOT NULL);"
	/* Version 1 numbered commits here, under its row lock. */
	"CREATE TABLE IF NOT EXISTS mapfs_clock ("
	"  id int PRIMARY KEY CHECK (id = 1), seq bigint NOT NULL);"
	"INSERT INTO mapfs_clock VALUES (1, 0) ON CONFLICT DO NOTHING;"
	"CREATE TABLE IF NOT EXISTS mapfs_records ("
	"  tbl text NOT NULL, k bytea NOT NULL, v bytea NOT NULL,"
	"  ver bigint NOT NULL, PRIMARY KEY (tbl, k));"
	/* Version 1's log: one entry per record; this one is one per
	 * commit.  Its replicas load the namespace again. */
	"DO $d$ BEGIN"
	"  IF EXISTS (SELECT 1 FROM information_schema.columns"
	"    WHERE table_name = 'mapfs_log' AND column_name = 'tbl'"
	"    AND table_schema = current_schema()) THEN"
	"    DROP TABLE mapfs_log; END IF; END $d$;"
	"DROP TABLE IF EXISTS mapfs_tokens;"
	"CREATE TABLE IF NOT EXISTS mapfs_log ("
	"  seq bigint NOT NULL, xid bigint NOT NULL, node int NOT NULL,"
	"  inst int NOT NULL, tok bigint NOT NULL,"
	"  at timestamptz NOT NULL DEFAULT now(),"
	"  t text[] NOT NULL, k bytea[] NOT NULL, v bytea[] NOT NULL);"
	"CREATE INDEX IF NOT EXISTS mapfs_log_xid ON mapfs_log (xid);"
	"CREATE INDEX IF NOT EXISTS mapfs_log_seq ON mapfs_log (seq);"
	/* Pruning finds the old entries by time: a BRIN index costs
	 * almost nothing on a table written in time order. */
	"CREATE INDEX IF NOT EXISTS mapfs_log_at ON mapfs_log USING brin (at);"
	"CREATE SEQUENCE IF NOT EXISTS mapfs_seq;"
	"SELECT setval('mapfs_seq', (SELECT seq FROM mapfs_clock))"
	" WHERE (SELECT seq FROM mapfs_clock) > (SELECT last_value FROM"
	"  mapfs_seq);"
	"CREATE TABLE IF NOT EXISTS mapfs_nodes ("
	"  id serial PRIMARY KEY, name text UNIQUE NOT NULL,"
	"  instance text NOT NULL, addr text NOT NULL,"
	"  lease_until timestamptz NOT NULL, started timestamptz NOT NULL,"
	"  applied bigint NOT NULL DEFAULT 0);"
	/* What each gateway's live view shows of it (ctl stats), published
	 * with its lease; added in place (a gateway without it ignores
	 * it, so the schema's version stays). */
	"ALTER TABLE mapfs_nodes ADD COLUMN IF NOT EXISTS live text;"
	"CREATE TABLE IF NOT EXISTS mapfs_counters ("
	"  name text PRIMARY KEY, next bigint NOT NULL);"
	"INSERT INTO mapfs_counters VALUES ('ino', 2) ON CONFLICT DO NOTHING;"
	"CREATE TABLE IF NOT EXISTS mapfs_secrets ("
	"  name text PRIMARY KEY, value bytea NOT NULL);"
	"CREATE TABLE IF NOT EXISTS mapfs_locks ("
	"  ino bigint PRIMARY KEY, state bytea NOT NULL);"
	"CREATE TABLE IF NOT EXISTS mapfs_lock_hosts ("
	"  host bytea PRIMARY KEY, n bigint NOT NULL);"
	"CREATE TABLE IF NOT EXISTS mapfs_notes ("
	"  node int NOT NULL, kind text NOT NULL, note text NOT NULL,"
	"  PRIMARY KEY (node, kind, note));"
	/* Version 1's commit: a gateway of that version must not write. */
	"DROP FUNCTION IF EXISTS mapfs_commit(int, text[], bytea[], bigint[],"
	"  text[], bytea[], bytea[]);"
	"CREATE OR REPLACE FUNCTION mapfs_commit2(p_node int, p_inst int,"
	"    p_tok bigint, rt text[], rk bytea[], rv bigint[],"
	"    wt text[], wk bytea[], wv bytea[], wx bigint[])"
	"  RETURNS TABLE (seq bigint, t text, k bytea, v bytea, ver bigint,"
	"    snap text)"
	/* Index lookups only, whatever the statistics said when the
	 * plans were cached: a seq scan, hash or merge join would read the
	 * whole table of records for every commit. */
	"  LANGUAGE plpgsql SET lock_timeout = '1s'"
	"  SET enable_seqscan = off SET enable_hashjoin = off"
	"  SET enable_mergejoin = off"
	"  AS $f$"
	"#variable_conflict use_column\n"
	"DECLARE s bigint;"
	"BEGIN"
	"  PERFORM 1 FROM unnest(wt, wk) AS w(t, k)"
	"    JOIN mapfs_records m ON m.tbl = w.t AND m.k = w.k"
	"    ORDER BY w.t, w.k FOR UPDATE OF m;"
	"  IF cardinality(rt) > 0 THEN"
	"    PERFORM 1 FROM unnest(rt, rk) AS r(t, k)"
	"      JOIN mapfs_records m ON m.tbl = r.t AND m.k = r.k"
	"      ORDER BY r.t, r.k FOR SHARE OF m;"
	"  END IF;"
	"  RETURN QUERY"
	"    SELECT 0::bigint, x.t, x.k, m.v, coalesce(m.ver, 0),"
	"           pg_current_snapshot()::text"
	"      FROM (SELECT * FROM unnest(rt, rk, rv)"
	"            UNION ALL SELECT * FROM unnest(wt, wk, wx)) AS x(t, k, "
	"ver)"
	"      LEFT JOIN mapfs_records m ON m.tbl = x.t AND m.k = x.k"
	"     WHERE coalesce(m.ver, 0) <> x.ver;"
	"  IF FOUND THEN RETURN; END IF;"
	"  s := nextval('mapfs_seq');"
	"  IF array_position(wv, NULL) IS NOT NULL THEN"
	"    DELETE FROM mapfs_records m USING unnest(wt, wk, wv) AS w(t, k, v)"
	"     WHERE w.v IS NULL AND m.tbl = w.t AND m.k = w.k;"
	"  END IF;"
	"  IF EXISTS (SELECT 1 FROM unnest(wx) AS x WHERE x <> 0) THEN"
	"    UPDATE mapfs_records m SET v = w.v, ver = s"
	"      FROM unnest(wt, wk, wv, wx) AS w(t, k, v, x)"
	"     WHERE w.v IS NOT NULL AND w.x <> 0 AND m.tbl = w.t"
	"       AND m.k = w.k;"
	"  END IF;"
	"  INSERT INTO mapfs_records (tbl, k, v, ver)"
	"    SELECT w.t, w.k, w.v, s FROM unnest(wt, wk, wv, wx)"
	"      AS w(t, k, v, x) WHERE w.v IS NOT NULL AND w.x = 0"
	"     ORDER BY w.t, w.k;"
	"  INSERT INTO mapfs_log VALUES (s, pg_current_xact_id()::text::bigint,"
	"    p_node, p_inst, p_tok, now(), wt, wk, wv);"
	"  RETURN QUERY SELECT s, NULL::text, NULL::bytea, NULL::bytea,"
	"    NULL::bigint, NULL::text;"
	"END $f$;";

/* One statement with text parameters; the result, or NULL (logged). */
static PGresult *exec_text(PGconn *c, const char *sql, int n,
			   const char *const *params, ExecStatusType want)
{
	PGresult *r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(r) != want) {
		db_pg_res_err(c, r, sql);
		PQclear(r);
		return NULL;
	}
	return r;
}

int db_pg_schema(PGconn *c, const char *store_url, char *cluster_id)
{
	char ver[16], id[33];
	unsigned char rnd[16];
	const char *p[3];
	PGresult *r;
	int rc = -EIO;

	snprintf(ver, sizeof(ver), "%d", SCHEMA_VERSION);
	r = PQexec(c, "BEGIN; SELECT pg_advisory_xact_lock(7270315)");
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_pg_res_err(c, r, "lock the schema");
		PQclear(r);
		return -EAGAIN;
	}
	PQclear(r);
	r = PQexec(c, "SELECT value FROM mapfs_meta WHERE name = "
		      "'schema_version'");
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
		int have = atoi(PQgetvalue(r, 0, 0));

		PQclear(r);
		if (have > SCHEMA_VERSION) {
			log_error(
				"cluster: the database's schema is version %d, "
				"newer than this mapfs-gw's (%d): upgrade this "
				"gateway",
				have, SCHEMA_VERSION);
			rc = -EPROTO;
			goto out;
		}
		if (have < SCHEMA_VERSION)
			log_warn(
				"cluster: upgrading the database's schema "
				"from version %d to %d: every gateway of the "
				"cluster must run this version (older ones can "
				"no longer commit)",
				have, SCHEMA_VERSION);
	} else {
		/* A missing table is an error that aborts the txn. */
		PQclear(r);
		r = PQexec(c, "ROLLBACK; BEGIN;"
			      "SELECT pg_advisory_xact_lock(7270315)");
		PQclear(r);
	}
	r = PQexec(c, schema_sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK &&
	    PQresultStatus(r) != PGRES_TUPLES_OK) {
		rc = db_pg_res_err(c, r, "create the schema");
		PQclear(r);
		goto out;
	}
	PQclear(r);
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		goto out;
	for (int i = 0; i < 16; i++)
		snprintf(id + 2 * i, 3, "%02x", rnd[i]);
	p[0] = ver;
	p[1] = store_url;
	p[2] = id;
	r = exec_text(c,
		      "INSERT INTO mapfs_meta VALUES ('schema_version', $1),"
		      " ('store_url', $2), ('cluster_id', $3)"
		      " ON CONFLICT (name) DO NOTHING;",
		      3, p, PGRES_COMMAND_OK);
	if (!r)
		goto out;
	PQclear(r);
	r = exec_text(c,
		      "UPDATE mapfs_meta SET value = $1"
		      " WHERE name = 'schema_version'",
		      1, p, PGRES_COMMAND_OK);
	if (!r)
		goto out;
	PQclear(r);
	r = exec_text(c, "SELECT name, value FROM mapfs_meta", 0, NULL,
		      PGRES_TUPLES_OK);
	if (!r)
		goto out;
	rc = 0;
	for (int i = 0; i < PQntuples(r); i++) {
		const char *n = PQgetvalue(r, i, 0), *v = PQgetvalue(r, i, 1);

		if (!strcmp(n, "store_url") && strcmp(v, store_url)) {
			log_error(
				"cluster: this cluster serves the store %s; "
				"this gateway was given %s: every gateway of a "
				"cluster must use the same --store",
				v, store_url);
			rc = -EINVAL;
		} else if (!strcmp(n, "cluster_id")) {
			snprintf(cluster_id, 33, "%s", v);
		}
	}
	PQclear(r);
out:
	r = PQexec(c, rc ? "ROLLBACK" : "COMMIT");
	if (!rc && PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = db_pg_res_err(c, r, "commit the schema");
	PQclear(r);
	return rc;
}

/* ---- the node and its lease ---------------------------------------------- */

static int node_register(struct db_pg *pg, PGconn *c, char *holder, size_t cap)
{
	char lease[32];
	const char *p[4] = { pg->o.node, pg->instance, pg->o.addr, lease };
	PGresult *r;

	snprintf(lease, sizeof(lease), "%u milliseconds", pg->o.lease_ms);
	r = exec_text(c,
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
	r = exec_text(c,
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
	r = exec_text(
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

	if (!pg->renewing_since_ms ||
	    db_pg_now_ms() - pg->renewing_since_ms <
		    pg->o.lease_ms + 2 * RECONNECT_MIN_MS + FOLLOW_POLL_MS)
		return;
	snprintf(me, sizeof(me), "%u", pg->node_id);
	r = exec_text(c,
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
static void lease_tick(struct db_pg *pg, PGconn *c, uint64_t applied_xmin)
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

static void *notifier_main(void *arg);

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
	while ((rc = pgc_connect(pg, &pg->svc, false)) == -EAGAIN) {
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
	if ((rc = pgc_connect(pg, &pg->fol, false))) {
		rc = rc == -EAGAIN ? -EIO : rc;
		goto fail;
	}
	lease_tick(pg, pg->fol.c, 0);
	if (pthread_create(&pg->notifier, NULL, notifier_main, pg)) {
		rc = -EAGAIN;
		goto fail;
	}
	pg->notifier_started = true;
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

		snprintf(id, sizeof(id), "%u", pg->node_id);
		r = PQexecParams(pg->svc.c,
				 "UPDATE mapfs_nodes SET lease_until = now()"
				 " WHERE id = $1 AND instance = $2",
				 2, NULL, p, NULL, NULL, 0);
		PQclear(r);
	}
	pgc_close(&pg->svc);
	pgc_close(&pg->fol);
	pgc_close(&pg->ntf);
	pthread_cond_destroy(&pg->n_cond);
	pthread_mutex_destroy(&pg->n_lock);
	pthread_mutex_destroy(&pg->svc_lock);
	pthread_mutex_destroy(&pg->nodes_lock);
	free(pg->down);
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

/* ---- commits ----------------------------------------------------------- */

int db_pg_conn_open(struct db_pg *pg, struct db_pg_conn **out)
{
	static atomic_uint next;
	struct db_pg_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->pg = pg;
	snprintf(c->p.name, sizeof(c->p.name), "mapfs-gw %u.%u.%u", pg->node_id,
		 pg->inst_id, atomic_fetch_add(&next, 1));
	*out = c;
	return pgc_connect(pg, &c->p, true) == -EINVAL ? -EINVAL : 0;
}

void db_pg_conn_close(struct db_pg_conn *c)
{
	if (!c)
		return;
	pgc_close(&c->p);
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

/* The followers are woken (soon, by the notifier). */
static void notify_kick(struct db_pg *pg)
{
	pthread_mutex_lock(&pg->n_lock);
	pg->n_pending = true;
	pthread_cond_signal(&pg->n_cond);
	pthread_mutex_unlock(&pg->n_lock);
}

/*
 * The notifier: one NOTIFY for every commit of this node that finished
 * before it is sent (commits that end while one is sent get the next),
 * in a transaction that does not wait for the disk, on a connection of
 * its own: the commits do not wait for it, and it never holds
 * PostgreSQL's notification lock through a flush.
 */
static void *notifier_main(void *arg)
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
			PGresult *r = PQexec(
				c, "SELECT set_config('synchronous_commit',"
				   " 'off', true), pg_notify('mapfs_log', '')");

			PQclear(r);
		}
		pthread_mutex_lock(&pg->n_lock);
	}
	pthread_mutex_unlock(&pg->n_lock);
	return NULL;
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
		/* The old backend may still be running the commit. */
		r = PQexecParams(c,
				 "SELECT pg_terminate_backend(pid) FROM"
				 " pg_stat_activity WHERE pid = $1"
				 " AND application_name = $2"
				 " AND pid <> pg_backend_pid()",
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
		log_info("cluster: that commit %s",
			 landed ? "landed" : "did not land");
		return landed ? 0 : -EAGAIN;
	}
}

/* The commit's parameters: reads not written, and the writes with the
 * versions they replace. */
static int commit_params(const struct db_track *t, const char *const *tnames,
			 struct pbuf a[7])
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

int db_pg_commit(struct db_pg_conn *dc, const struct db_track *t,
		 const char *const *tnames, uint64_t token, uint64_t *seq,
		 struct db_snap *stale)
{
	struct db_pg *pg = dc->pg;
	struct pbuf a[7] = { { 0 } };
	char node[16], inst[16], tok[32];
	const char *vals[10];
	int lens[10], fmts[10], pid;
	PGconn *c;
	PGresult *r = NULL;
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
	r = PQexecParams(c,
			 "SELECT * FROM mapfs_commit2($1, $2, $3, $4, $5, $6,"
			 " $7, $8, $9, $10)",
			 10, NULL, vals, lens, fmts, 1);
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) >= 1) {
		if (!atomic_exchange(&pg->wr_up, true))
			log_info("cluster: PostgreSQL answers again");
		*seq = db_pg_col_u64(r, 0, 0);
		if (*seq) {
			dc->last_seq = *seq;
			notify_kick(pg);
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
		rc = commit_doubt(dc, pid, token, seq);
		if (rc)
			say_down(pg);
		else
			dc->last_seq = *seq;
		goto out;
	}
	if (conflict_state(PQresultErrorField(r, PG_DIAG_SQLSTATE))) {
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
	struct pbuf xip = { 0 };
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
	/* The snapshot and the entries it newly shows, in one statement (one
	 * snapshot): the transactions `from` saw in progress or after it,
	 * and any commit numbered above `from`'s (an id handed out again
	 * after a crash or a failover: snap_int.h). */
	if (!PQsendQueryParams(
		    c,
		    "SELECT s.snap, s.pruned, l.seq, x.t, x.k, x.v, l.seq,"
		    " greatest(0, (extract(epoch FROM clock_timestamp() - l.at)"
		    "  * 1e6)::bigint)"
		    " FROM (SELECT pg_current_snapshot()::text AS snap,"
		    "  (SELECT value FROM mapfs_meta WHERE name = 'pruned_xid')"
		    "  AS pruned) s"
		    " LEFT JOIN mapfs_log l ON (l.xid = ANY($1::bigint[])"
		    "  OR l.xid >= $2::bigint OR l.seq > $4::bigint)"
		    "  AND l.inst <> $3::int"
		    " LEFT JOIN LATERAL unnest(l.t, l.k, l.v) AS x(t, k, v)"
		    "  ON true"
		    " ORDER BY l.seq",
		    4, NULL, vals, lens, fmts, 1) ||
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

/* Handle the notifications libpq holds; how many there were. */
static int notifies_drain(struct db_pg *pg, PGconn *c)
{
	PGnotify *nt;
	int n = 0;

	while ((nt = PQnotifies(c))) {
		if (!strcmp(nt->relname, "mapfs_msg"))
			msg_deliver(pg, nt->extra);
		PQfreemem(nt);
		n++;
	}
	return n;
}

void db_pg_keep_lease(struct db_pg *pg, uint64_t applied_xmin)
{
	PGconn *c = fol_conn(pg);

	if (c && db_pg_now_ms() >= pg->lease_next_ms)
		lease_tick(pg, c, applied_xmin);
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
			lease_tick(pg, c, applied_xmin);
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
	if (poll(pf, (nfds_t)nfds, wait) > 0) {
		if (pf[0].revents & POLLIN)
			return 1;
		if (nfds == 2 && (pf[1].revents & POLLIN)) {
			PQconsumeInput(c);
			notifies_drain(pg, c);
		}
	}
	return 0;
}
