/*
 * db/pg.c - the cluster's shared records in PostgreSQL, over libpq.
 *
 * Schema (versioned in mapfs_meta; created by the first node, under an
 * advisory lock so that two first nodes do not race):
 *   mapfs_meta     name -> value: schema_version, store_url, cluster_id
 *   mapfs_clock    the one row whose seq numbers every commit, in order
 *   mapfs_records  (tbl, k) -> v, ver: the shared tables' records
 *   mapfs_log      (seq, tbl, k) -> v (NULL: deleted), node: what each
 *                  commit wrote, for the other nodes to apply
 *   mapfs_nodes    name -> id, instance, addr, lease_until, applied
 *   mapfs_counters name -> next: the inode numbers
 *   mapfs_secrets  name -> value: the handle key
 *   mapfs_locks    ino -> state: every file's NLM locks, requests, shares
 *   mapfs_lock_hosts  host address -> what it holds, over all files
 *
 * A commit is one call of mapfs_commit(): it locks the clock row (so
 * commits are serial, and seq has no gaps and follows commit order),
 * checks every read's version against the record's, and either returns
 * the current records of the stale ones and changes nothing, or writes
 * the records with ver = the next seq, logs them and NOTIFYs mapfs_log.
 * One round trip, durable when it returns (synchronous_commit).
 *
 * Three connections: the writer's (commits), the follower's (LISTEN,
 * reading the log, the lease), and a service one (ids, secrets) under a
 * mutex.  The follower applies every commit after the local applied seq
 * in seq order, whole commits at a time; it wakes on NOTIFY and at least
 * every FOLLOW_POLL_MS.  A replica that is new, of another cluster, or
 * behind the log's oldest entry (pruned) is loaded whole from a snapshot.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "common/log.h"
#include "db_int.h"

#define SCHEMA_VERSION 1
#define FOLLOW_POLL_MS 1000
#define FOLLOW_BATCH 256      /* commits applied in one local txn */
#define SNAPSHOT_PAGE 10000   /* records per page of a full copy */
#define LOG_KEEP_S 600        /* log entries kept at least this long */
#define RECONNECT_MIN_MS 1000 /* between attempts of a connection */
#define START_BACKOFF_MAX_MS 10000

/* Element types of binary arrays. */
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_TEXT 25

struct pgc {
	PGconn *c;
	const char *name; /* for messages */
	uint64_t last_try_ms;
};

struct db_pg {
	struct db *db;
	struct db_cluster_opts o;
	char instance[33];
	char cluster_id[33];
	uint32_t node_id;

	struct pgc wr; /* the writer's */
	bool wr_up;    /* the last commit got an answer */

	pthread_mutex_t svc_lock;
	struct pgc svc;

	struct pgc fol;
	pthread_t follower;
	bool follower_started;
	int stop_pipe[2];
	/* The last commit applied here (also in _meta): the follower's and,
	 * after a stale commit, the writer's catch-up move it, only up. */
	uint64_t applied;
	uint64_t lease_next_ms;
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

static uint64_t now_ms(void)
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

/* Every connection's session settings. */
static int conn_setup(PGconn *c)
{
	PGresult *r = PQexec(c, "SET synchronous_commit = on;"
				"SET max_parallel_workers_per_gather = 0;"
				"SET statement_timeout = '30s';"
				"SET client_min_messages = warning");
	int rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : -EIO;

	PQclear(r);
	return rc;
}

/* Connect p now; 0, -EAGAIN (not there), -EINVAL (fatal; logged). */
static int pgc_connect(struct db_pg *pg, struct pgc *p, bool quiet)
{
	char msg[512], safe[512];

	if (p->c)
		PQfinish(p->c);
	p->last_try_ms = now_ms();
	p->c = PQconnectdb(pg->o.url);
	if (p->c && PQstatus(p->c) == CONNECTION_OK && !conn_setup(p->c))
		return 0;
	pq_msg(p->c, msg, sizeof(msg));
	url_safe(pg->o.url, safe, sizeof(safe));
	PQfinish(p->c);
	p->c = NULL;
	if (conn_fatal(msg)) {
		log_error("cluster: PostgreSQL at %s refused us: %s", safe,
			  msg);
		return -EINVAL;
	}
	if (!quiet)
		log_warn("cluster: PostgreSQL at %s does not answer (%s)", safe,
			 msg);
	return -EAGAIN;
}

/* A live connection, reconnecting at most every RECONNECT_MIN_MS. */
static PGconn *pgc_get(struct db_pg *pg, struct pgc *p)
{
	if (p->c && PQstatus(p->c) == CONNECTION_OK)
		return p->c;
	if (p->c)
		PQreset(p->c);
	if (p->c && PQstatus(p->c) == CONNECTION_OK && !conn_setup(p->c))
		return p->c;
	if (now_ms() - p->last_try_ms < RECONNECT_MIN_MS)
		return NULL;
	return pgc_connect(pg, p, true) ? NULL : p->c;
}

static void pgc_close(struct pgc *p)
{
	if (p->c)
		PQfinish(p->c);
	p->c = NULL;
}

/* Whether a result is an error that a new connection (or the database
 * coming back) may cure: -EAGAIN; else -EIO. */
static int res_err(PGconn *c, PGresult *r, const char *what)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	static _Atomic uint64_t read_only_logged_ms;
	char msg[512];

	/* A database that went read-only (a demoted primary, a standby
	 * named by mistake, default_transaction_read_only): changes wait
	 * and are retried; say why, once every 30 s. */
	if (state && !strcmp(state, "25006")) {
		uint64_t now = now_ms(),
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

struct pbuf {
	unsigned char *p;
	size_t len, cap;
	bool bad;
};

static void pb_add(struct pbuf *b, const void *d, size_t n)
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

static void pb_u32(struct pbuf *b, uint32_t v)
{
	v = htonl(v);
	pb_add(b, &v, 4);
}

static void pb_u64(struct pbuf *b, uint64_t v)
{
	pb_u32(b, (uint32_t)(v >> 32));
	pb_u32(b, (uint32_t)v);
}

/* A one-dimensional array header of n elements of type oid. */
static void pb_array(struct pbuf *b, uint32_t oid, size_t n)
{
	pb_u32(b, 1); /* dimensions */
	pb_u32(b, 1); /* has nulls (allowed) */
	pb_u32(b, oid);
	pb_u32(b, (uint32_t)n);
	pb_u32(b, 1); /* lower bound */
}

static void pb_elem(struct pbuf *b, const void *d, size_t n)
{
	if (!d) {
		pb_u32(b, 0xffffffffu); /* NULL */
		return;
	}
	pb_u32(b, (uint32_t)n);
	pb_add(b, d, n);
}

static uint64_t get_u64(const char *p)
{
	uint32_t hi, lo;

	memcpy(&hi, p, 4);
	memcpy(&lo, p + 4, 4);
	return (uint64_t)ntohl(hi) << 32 | ntohl(lo);
}

/* Column col of row i as an int8 (binary result). */
static uint64_t col_u64(const PGresult *r, int i, int col)
{
	if (PQgetisnull(r, i, col) || PQgetlength(r, i, col) != 8)
		return 0;
	return get_u64(PQgetvalue(r, i, col));
}

/* ---- the schema ---------------------------------------------------------- */

static const char schema_sql[] =
	"CREATE TABLE IF NOT EXISTS mapfs_meta ("
	"  name text PRIMARY KEY, value text NOT NULL);"
	"CREATE TABLE IF NOT EXISTS mapfs_clock ("
	"  id int PRIMARY KEY CHECK (id = 1), seq bigint NOT NULL);"
	"INSERT INTO mapfs_clock VALUES (1, 0) ON CONFLICT DO NOTHING;"
	"CREATE TABLE IF NOT EXISTS mapfs_records ("
	"  tbl text NOT NULL, k bytea NOT NULL, v bytea NOT NULL,"
	"  ver bigint NOT NULL, PRIMARY KEY (tbl, k));"
	"CREATE TABLE IF NOT EXISTS mapfs_log ("
	"  seq bigint NOT NULL, tbl text NOT NULL, k bytea NOT NULL, v bytea,"
	"  node int NOT NULL, at timestamptz NOT NULL DEFAULT now(),"
	"  PRIMARY KEY (seq, tbl, k));"
	"CREATE TABLE IF NOT EXISTS mapfs_nodes ("
	"  id serial PRIMARY KEY, name text UNIQUE NOT NULL,"
	"  instance text NOT NULL, addr text NOT NULL,"
	"  lease_until timestamptz NOT NULL, started timestamptz NOT NULL,"
	"  applied bigint NOT NULL DEFAULT 0);"
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
	"CREATE OR REPLACE FUNCTION mapfs_commit(p_node int,"
	"    rt text[], rk bytea[], rv bigint[],"
	"    wt text[], wk bytea[], wv bytea[])"
	"  RETURNS TABLE (seq bigint, t text, k bytea, v bytea, ver bigint)"
	"  LANGUAGE plpgsql AS $f$"
	"#variable_conflict use_column\n"
	"DECLARE s bigint;"
	"BEGIN"
	"  PERFORM 1 FROM mapfs_clock c WHERE c.id = 1 FOR UPDATE;"
	"  RETURN QUERY"
	"    SELECT 0::bigint, r.t, r.k, m.v, coalesce(m.ver, 0)"
	"      FROM unnest(rt, rk, rv) AS r(t, k, ver)"
	"      LEFT JOIN mapfs_records m ON m.tbl = r.t AND m.k = r.k"
	"     WHERE coalesce(m.ver, 0) <> r.ver;"
	"  IF FOUND THEN RETURN; END IF;"
	"  UPDATE mapfs_clock c SET seq = c.seq + 1 WHERE c.id = 1"
	"    RETURNING c.seq INTO s;"
	"  DELETE FROM mapfs_records m USING unnest(wt, wk, wv) AS w(t, k, v)"
	"   WHERE w.v IS NULL AND m.tbl = w.t AND m.k = w.k;"
	"  INSERT INTO mapfs_records AS m (tbl, k, v, ver)"
	"    SELECT w.t, w.k, w.v, s FROM unnest(wt, wk, wv) AS w(t, k, v)"
	"     WHERE w.v IS NOT NULL"
	"    ON CONFLICT (tbl, k) DO UPDATE SET v = EXCLUDED.v, ver = s;"
	"  INSERT INTO mapfs_log (seq, tbl, k, v, node)"
	"    SELECT s, w.t, w.k, w.v, p_node FROM unnest(wt, wk, wv) AS w(t, "
	"k, v);"
	"  PERFORM pg_notify('mapfs_log', s::text);"
	"  RETURN QUERY SELECT s, NULL::text, NULL::bytea, NULL::bytea,"
	"    NULL::bigint;"
	"END $f$;";

/* One statement with text parameters; the result, or NULL (logged). */
static PGresult *exec_text(PGconn *c, const char *sql, int n,
			   const char *const *params, ExecStatusType want)
{
	PGresult *r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(r) != want) {
		res_err(c, r, sql);
		PQclear(r);
		return NULL;
	}
	return r;
}

/* Create or check the schema; the store URL and cluster id.  0/-errno. */
static int schema_check(struct db_pg *pg, PGconn *c)
{
	char ver[16], id[33];
	unsigned char rnd[16];
	const char *p[3];
	PGresult *r;
	int rc = -EIO;
	FILE *f;

	snprintf(ver, sizeof(ver), "%d", SCHEMA_VERSION);
	r = PQexec(c, "BEGIN; SELECT pg_advisory_xact_lock(7270315)");
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		res_err(c, r, "lock the schema");
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
	} else {
		/* A missing table is an error that aborts the txn. */
		PQclear(r);
		r = PQexec(c, "ROLLBACK; BEGIN;"
			      "SELECT pg_advisory_xact_lock(7270315)");
		PQclear(r);
	}
	r = PQexec(c, schema_sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		rc = res_err(c, r, "create the schema");
		PQclear(r);
		goto out;
	}
	PQclear(r);
	f = fopen("/dev/urandom", "r");
	if (!f || fread(rnd, 1, sizeof(rnd), f) != sizeof(rnd)) {
		if (f)
			fclose(f);
		goto out;
	}
	fclose(f);
	for (int i = 0; i < 16; i++)
		snprintf(id + 2 * i, 3, "%02x", rnd[i]);
	p[0] = ver;
	p[1] = pg->o.store_url;
	p[2] = id;
	r = exec_text(c,
		      "INSERT INTO mapfs_meta VALUES ('schema_version', $1),"
		      " ('store_url', $2), ('cluster_id', $3)"
		      " ON CONFLICT (name) DO NOTHING",
		      3, p, PGRES_COMMAND_OK);
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

		if (!strcmp(n, "store_url") && strcmp(v, pg->o.store_url)) {
			log_error(
				"cluster: this cluster serves the store %s; "
				"this gateway was given %s: every gateway of a "
				"cluster must use the same --store",
				v, pg->o.store_url);
			rc = -EINVAL;
		} else if (!strcmp(n, "cluster_id")) {
			snprintf(pg->cluster_id, sizeof(pg->cluster_id), "%s",
				 v);
		}
	}
	PQclear(r);
out:
	r = PQexec(c, rc ? "ROLLBACK" : "COMMIT");
	if (!rc && PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = res_err(c, r, "commit the schema");
	PQclear(r);
	return rc;
}

static uint64_t applied_get(struct db_pg *pg)
{
	return __atomic_load_n(&pg->applied, __ATOMIC_ACQUIRE);
}

static void applied_raise(struct db_pg *pg, uint64_t seq)
{
	uint64_t cur = applied_get(pg);

	while (seq > cur &&
	       !__atomic_compare_exchange_n(&pg->applied, &cur, seq, false,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
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

/* Renew the lease and publish what this node applied.  0 or -errno. */
static int node_renew(struct db_pg *pg, PGconn *c)
{
	char lease[32], id[16], applied[32];
	const char *p[4] = { id, pg->instance, lease, applied };
	PGresult *r;
	int rc = 0;

	snprintf(lease, sizeof(lease), "%u milliseconds", pg->o.lease_ms);
	snprintf(id, sizeof(id), "%u", pg->node_id);
	snprintf(applied, sizeof(applied), "%" PRIu64, applied_get(pg));
	r = exec_text(
		c,
		"UPDATE mapfs_nodes SET lease_until = now() + $3::interval,"
		"  applied = $4 WHERE id = $1 AND instance = $2",
		4, p, PGRES_COMMAND_OK);
	if (!r)
		return -EAGAIN;
	if (strcmp(PQcmdTuples(r), "1")) {
		log_error("cluster: node %s (id %u) was taken over by another "
			  "instance after its lease ran out",
			  pg->o.node, pg->node_id);
		rc = -EBUSY;
	}
	PQclear(r);
	/* What every live node applied, and old enough, is not needed. */
	r = PQexec(c, "DELETE FROM mapfs_log WHERE at < now() - interval '"
		      "600 seconds' AND seq < (SELECT coalesce(min(applied), 0)"
		      " FROM mapfs_nodes WHERE lease_until > now())");
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
	    now_ms() - pg->renewing_since_ms <
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
		db_deliver_down(pg->db, fresh[i]);
	}
	free(fresh);
}

/* Renew the lease (and with it, read who is down); when to do it next. */
static void lease_tick(struct db_pg *pg, PGconn *c)
{
	uint64_t sent = now_ms();

	if (node_renew(pg, c) == 0) {
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
	return now_ms() < __atomic_load_n(&pg->held_until_ms, __ATOMIC_ACQUIRE);
}

/* ---- the follower -------------------------------------------------------- */

/* Records of a result (tbl, k, v, ver columns from col on), as remotes. */
static int recs_of(struct db_pg *pg, const PGresult *r, int col,
		   struct db_remote **out, size_t *n)
{
	size_t rows = (size_t)PQntuples(r), k = 0;
	struct db_remote *v = calloc(rows ? rows : 1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < rows; i++) {
		int t = db_shared_table(pg->db, PQgetvalue(r, (int)i, col));

		if (t < 0)
			continue; /* a table this version does not share */
		v[k] = (struct db_remote){
			.tbl = (unsigned)t,
			.key = PQgetvalue(r, (int)i, col + 1),
			.klen = (size_t)PQgetlength(r, (int)i, col + 1),
			.val = PQgetisnull(r, (int)i, col + 2)
				       ? NULL
				       : PQgetvalue(r, (int)i, col + 2),
			.vlen = (size_t)PQgetlength(r, (int)i, col + 2),
			.ver = col_u64(r, (int)i, col + 3),
		};
		k++;
	}
	*out = v;
	*n = k;
	return 0;
}

/* Load every shared record (a full copy) at one snapshot.  0/-errno. */
static int snapshot_load(struct db_pg *pg, PGconn *c)
{
	uint64_t seq, total = 0;
	bool first = true;
	PGresult *r;
	int rc = -EAGAIN;

	r = PQexec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
	PQclear(r);
	r = PQexecParams(c, "SELECT seq FROM mapfs_clock WHERE id = 1", 0, NULL,
			 NULL, NULL, NULL, 1);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		res_err(c, r, "read the clock");
		PQclear(r);
		goto out;
	}
	seq = col_u64(r, 0, 0);
	PQclear(r);
	r = PQexec(c, "DECLARE snap NO SCROLL CURSOR FOR SELECT tbl, k, v, ver"
		      " FROM mapfs_records");
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		rc = res_err(c, r, "read the records");
		PQclear(r);
		goto out;
	}
	PQclear(r);
	for (;;) {
		struct db_remote *recs;
		size_t n;

		char fetch[64];

		snprintf(fetch, sizeof(fetch), "FETCH %d FROM snap",
			 SNAPSHOT_PAGE);
		r = PQexecParams(c, fetch, 0, NULL, NULL, NULL, NULL, 1);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			rc = res_err(c, r, "read the records");
			PQclear(r);
			goto out;
		}
		bool last = PQntuples(r) < SNAPSHOT_PAGE;

		rc = recs_of(pg, r, 0, &recs, &n);
		if (!rc)
			rc = db_load_snapshot(pg->db, recs, n, seq, first,
					      last);
		free(recs);
		total += (uint64_t)PQntuples(r);
		PQclear(r);
		if (rc)
			goto out;
		first = false;
		if (last)
			break;
	}
	applied_raise(pg, seq);
	log_info("cluster: loaded the namespace: %" PRIu64
		 " records at seq %" PRIu64,
		 total, seq);
out:
	r = PQexec(c, "ROLLBACK");
	PQclear(r);
	return rc;
}

/*
 * Apply the commits after pg->applied, FOLLOW_BATCH at a time, until none
 * is left.  *behind: the log no longer has the next one (pruned): a full
 * copy is needed.  0 or -errno.
 */
static int follow_catch_up(struct db_pg *pg, PGconn *c, bool *behind)
{
	*behind = false;
	for (;;) {
		uint64_t applied = applied_get(pg);
		char from[32], to[32];
		const char *p[2] = { from, to };
		struct db_remote *recs;
		uint64_t top = 0;
		PGresult *r;
		size_t n;
		int rc;

		snprintf(from, sizeof(from), "%" PRIu64, applied);
		snprintf(to, sizeof(to), "%" PRIu64, applied + FOLLOW_BATCH);
		r = PQexecParams(c,
				 "SELECT seq, tbl, k, v, seq FROM mapfs_log"
				 " WHERE seq > $1 AND seq <= $2 ORDER BY seq",
				 2, NULL, p, NULL, NULL, 1);
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			rc = res_err(c, r, "read the change log");
			PQclear(r);
			return rc;
		}
		if (PQntuples(r) == 0) {
			/* Nothing new, or what is new was pruned away: the
			 * log then starts past us (a commit racing this
			 * read is simply read next time). */
			PQclear(r);
			r = PQexecParams(
				c,
				"SELECT (SELECT min(seq) FROM mapfs_log),"
				" (SELECT seq FROM mapfs_clock)",
				0, NULL, NULL, NULL, NULL, 1);
			if (PQresultStatus(r) == PGRES_TUPLES_OK &&
			    PQntuples(r) == 1 &&
			    (PQgetisnull(r, 0, 0)
				     ? col_u64(r, 0, 1) > applied
				     : col_u64(r, 0, 0) > applied + 1))
				*behind =
					true; /* commits we can no longer read */
			PQclear(r);
			return 0;
		}
		if (col_u64(r, 0, 0) != applied + 1) {
			/* Commits are serial: a later one is only visible
			 * after the earlier: the earlier was pruned. */
			PQclear(r);
			*behind = true;
			return 0;
		}
		top = col_u64(r, PQntuples(r) - 1, 0);
		rc = recs_of(pg, r, 1, &recs, &n);
		if (!rc)
			rc = db_apply_remote(pg->db, recs, n, top);
		free(recs);
		PQclear(r);
		if (rc)
			return rc;
		applied_raise(pg, top);
	}
}

int db_pg_catch_up(struct db_pg *pg)
{
	PGconn *c = pgc_get(pg, &pg->wr);
	bool behind;
	int rc;

	if (!c)
		return -EAGAIN;
	rc = follow_catch_up(pg, c, &behind);
	/* Pruned: the follower loads a copy; the stale records were
	 * applied already, so the group can run again meanwhile. */
	return rc;
}

/* Bring the replica up to date: the log, or a full copy.  0/-errno. */
static int follow_sync(struct db_pg *pg, PGconn *c)
{
	bool behind;
	int rc = follow_catch_up(pg, c, &behind);

	if (!rc && behind) {
		log_warn("cluster: this replica is behind the change log's "
			 "oldest entry: loading the namespace again");
		rc = snapshot_load(pg, c);
	}
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
	db_deliver(pg->db, from, payload + n);
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

static void *follower_main(void *arg)
{
	struct db_pg *pg = arg;
	bool listening = false;

	for (;;) {
		PGconn *c = pgc_get(pg, &pg->fol);
		struct pollfd pf[2] = { { .fd = pg->stop_pipe[0],
					  .events = POLLIN } };
		int nfds = 1;

		if (c && !listening) {
			PGresult *r =
				PQexec(c, "LISTEN mapfs_log; LISTEN mapfs_msg");

			listening = PQresultStatus(r) == PGRES_COMMAND_OK;
			PQclear(r);
		}
		if (c && listening) {
			/* A NOTIFY that arrives while the sync's queries run
			 * is read by libpq then, not left on the socket: look
			 * again before sleeping on it. */
			PQconsumeInput(c);
			notifies_drain(pg, c);
			do {
				if (follow_sync(pg, c)) {
					listening = false; /* reconnect */
					break;
				}
			} while (notifies_drain(pg, c));
			if (now_ms() >= pg->lease_next_ms)
				lease_tick(pg, c);
			pf[1] = (struct pollfd){ .fd = PQsocket(c),
						 .events = POLLIN };
			nfds = 2;
		} else {
			listening = false;
		}
		uint64_t now = now_ms();
		int wait = FOLLOW_POLL_MS;

		/* Short leases (tests) renew more often than the poll. */
		if (nfds == 2 && pg->lease_next_ms < now + (uint64_t)wait)
			wait = pg->lease_next_ms > now
				       ? (int)(pg->lease_next_ms - now)
				       : 0;
		if (poll(pf, (nfds_t)nfds, wait) > 0 &&
		    (pf[0].revents & POLLIN))
			break;
	}
	return NULL;
}

/* ---- open ---------------------------------------------------------------- */

static int open_fail(struct db_pg *pg, int rc)
{
	db_pg_close(pg);
	return rc;
}

int db_pg_open(struct db *db, const struct db_cluster_opts *o,
	       struct db_pg **out)
{
	struct db_pg *pg = calloc(1, sizeof(*pg));
	uint32_t backoff = 500;
	char local_id[64], holder[256];
	unsigned char rnd[16];
	uint64_t seq, waited = 0;
	FILE *f;
	int rc;

	if (!pg)
		return -ENOMEM;
	pg->db = db;
	pg->o = *o;
	pg->stop_pipe[0] = pg->stop_pipe[1] = -1;
	pthread_mutex_init(&pg->svc_lock, NULL);
	pthread_mutex_init(&pg->nodes_lock, NULL);
	f = fopen("/dev/urandom", "r");
	if (!f || fread(rnd, 1, sizeof(rnd), f) != sizeof(rnd)) {
		if (f)
			fclose(f);
		return open_fail(pg, -EIO);
	}
	fclose(f);
	for (int i = 0; i < 16; i++)
		snprintf(pg->instance + 2 * i, 3, "%02x", rnd[i]);
	/* The same state directory is the same instance: only one process
	 * has it (db_open's lock), so a restart takes its name back at once
	 * instead of waiting for its old lease to run out. */
	if ((rc = db_local_text(db, "instance", local_id, sizeof(local_id))))
		return open_fail(pg, rc);
	if (strlen(local_id) == 32)
		memcpy(pg->instance, local_id, 33);
	/* Unreachable: retry with backoff, saying so; misconfigured: stop. */
	while ((rc = pgc_connect(pg, &pg->wr, false)) == -EAGAIN) {
		log_info("cluster: retrying in %u ms", backoff);
		usleep(backoff * 1000);
		backoff = backoff * 2 > START_BACKOFF_MAX_MS
				  ? START_BACKOFF_MAX_MS
				  : backoff * 2;
	}
	if (rc)
		return open_fail(pg, rc);
	if ((rc = schema_check(pg, pg->wr.c)))
		return open_fail(pg, rc == -EAGAIN ? -EIO : rc);
	/* The name: a live other instance holds it for its lease. */
	while ((rc = node_register(pg, pg->wr.c, holder, sizeof(holder))) ==
		       -EBUSY &&
	       waited < (uint64_t)o->lease_ms + 1000) {
		if (!waited)
			log_warn("cluster: node name %s is held (%s); waiting "
				 "for "
				 "its lease to run out",
				 o->node, holder);
		usleep(250 * 1000);
		waited += 250;
	}
	if (rc == -EBUSY) {
		log_error("cluster: node name %s is in use by a running "
			  "gateway (%s): give this one another --node",
			  o->node, holder);
		return open_fail(pg, -EINVAL);
	}
	if (rc)
		return open_fail(pg, -EIO);
	if ((rc = db_set_local_text(db, "instance", pg->instance)))
		return open_fail(pg, rc);
	pg->wr_up = true;
	if ((rc = pgc_connect(pg, &pg->svc, false)) ||
	    (rc = pgc_connect(pg, &pg->fol, false)))
		return open_fail(pg, rc == -EAGAIN ? -EIO : rc);
	/* The replica: this cluster's and up to date, or loaded whole. */
	if ((rc = db_local_cluster(db, local_id, sizeof(local_id))) ||
	    (rc = db_local_seq(db, &seq)))
		return open_fail(pg, rc);
	if (!local_id[0] && !db_shared_empty(db)) {
		/* Loading the cluster's namespace would replace it. */
		log_error(
			"cluster: this state directory holds the namespace of "
			"a gateway on its own: `mapfs-gw meta migrate` copies "
			"it "
			"into an empty cluster; to join this cluster, give the "
			"gateway an empty --state");
		return open_fail(pg, -EINVAL);
	}
	if (strcmp(local_id, pg->cluster_id) || !seq) {
		rc = snapshot_load(pg, pg->fol.c);
		if (!rc)
			rc = db_set_local_cluster(db, pg->cluster_id);
	} else {
		applied_raise(pg, seq);
		rc = follow_sync(pg, pg->fol.c);
	}
	if (rc)
		return open_fail(pg, rc);
	lease_tick(pg, pg->fol.c);
	if (pipe2(pg->stop_pipe, O_CLOEXEC) ||
	    pthread_create(&pg->follower, NULL, follower_main, pg))
		return open_fail(pg, -errno ? -errno : -EAGAIN);
	pg->follower_started = true;
	log_info("cluster: node %s (id %u) in cluster %.8s, applied seq "
		 "%" PRIu64,
		 o->node, pg->node_id, pg->cluster_id, applied_get(pg));
	*out = pg;
	return 0;
}

void db_pg_stop_follower(struct db_pg *pg)
{
	if (!pg || !pg->follower_started)
		return;
	if (write(pg->stop_pipe[1], "x", 1) != 1) {
		/* the follower also stops at its next poll */
	}
	pthread_join(pg->follower, NULL);
	pg->follower_started = false;
}

void db_pg_close(struct db_pg *pg)
{
	if (!pg)
		return;
	db_pg_stop_follower(pg);
	if (pg->stop_pipe[0] >= 0)
		close(pg->stop_pipe[0]);
	if (pg->stop_pipe[1] >= 0)
		close(pg->stop_pipe[1]);
	/* The name is free at once for a restart. */
	if (pg->node_id && pgc_get(pg, &pg->svc)) {
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
	pgc_close(&pg->wr);
	pgc_close(&pg->svc);
	pgc_close(&pg->fol);
	pthread_mutex_destroy(&pg->svc_lock);
	pthread_mutex_destroy(&pg->nodes_lock);
	free(pg->down);
	free(pg);
}

/* ---- commits ----------------------------------------------------------- */

int db_pg_commit(struct db_pg *pg, const struct db_track *t, uint64_t *seq,
		 struct db_stale *stale)
{
	struct pbuf a[6] = { { 0 } };
	char node[16];
	const char *vals[7];
	int lens[7], fmts[7];
	PGconn *c = pgc_get(pg, &pg->wr);
	PGresult *r;
	int rc;

	memset(stale, 0, sizeof(*stale));
	if (!c) {
		if (pg->wr_up)
			log_warn("cluster: PostgreSQL does not answer: changes "
				 "of the namespace answer JUKEBOX until it "
				 "does");
		pg->wr_up = false;
		return -EAGAIN;
	}
	pb_array(&a[0], OID_TEXT, t->nreads);
	pb_array(&a[1], OID_BYTEA, t->nreads);
	pb_array(&a[2], OID_INT8, t->nreads);
	for (size_t i = 0; i < t->nreads; i++) {
		const struct db_rec *rec = &t->reads[i];
		const char *tn = db_table_name(pg->db, rec->tbl);

		pb_elem(&a[0], tn, strlen(tn));
		pb_elem(&a[1], db_rec_key(t, rec), rec->klen);
		pb_u32(&a[2], 8);
		pb_u64(&a[2], rec->ver);
	}
	pb_array(&a[3], OID_TEXT, t->nwrites);
	pb_array(&a[4], OID_BYTEA, t->nwrites);
	pb_array(&a[5], OID_BYTEA, t->nwrites);
	for (size_t i = 0; i < t->nwrites; i++) {
		const struct db_rec *rec = &t->writes[i];
		const char *tn = db_table_name(pg->db, rec->tbl);

		pb_elem(&a[3], tn, strlen(tn));
		pb_elem(&a[4], db_rec_key(t, rec), rec->klen);
		pb_elem(&a[5], rec->del ? NULL : db_rec_val(t, rec), rec->vlen);
	}
	for (int i = 0; i < 6; i++)
		if (a[i].bad) {
			rc = -ENOMEM;
			goto out;
		}
	snprintf(node, sizeof(node), "%u", pg->node_id);
	vals[0] = node;
	lens[0] = 0;
	fmts[0] = 0;
	for (int i = 0; i < 6; i++) {
		vals[i + 1] = (const char *)a[i].p;
		lens[i + 1] = (int)a[i].len;
		fmts[i + 1] = 1;
	}
	r = PQexecParams(c,
			 "SELECT * FROM mapfs_commit($1, $2, $3, $4, $5,"
			 " $6, $7)",
			 7, NULL, vals, lens, fmts, 1);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) < 1) {
		rc = res_err(c, r, "commit");
		PQclear(r);
		if (rc == -EAGAIN && pg->wr_up && PQstatus(c) != CONNECTION_OK)
			log_warn("cluster: PostgreSQL does not answer: changes "
				 "of the namespace answer JUKEBOX until it "
				 "does");
		pg->wr_up = PQstatus(c) == CONNECTION_OK;
		goto out;
	}
	if (!pg->wr_up)
		log_info("cluster: PostgreSQL answers again");
	pg->wr_up = true;
	*seq = col_u64(r, 0, 0);
	if (*seq) {
		PQclear(r);
		rc = 0;
		goto out;
	}
	/* Stale reads: the current records, to be applied and run again. */
	rc = recs_of(pg, r, 1, &stale->recs, &stale->n);
	if (rc) {
		PQclear(r);
		goto out;
	}
	stale->owner = r;
	rc = -ESTALE;
out:
	for (int i = 0; i < 6; i++)
		free(a[i].p);
	return rc;
}

void db_pg_stale_free(struct db_stale *s)
{
	free(s->recs);
	PQclear(s->owner);
	memset(s, 0, sizeof(*s));
}

bool db_pg_up(struct db_pg *pg)
{
	return pg->wr_up;
}

uint32_t db_pg_node_id(const struct db_pg *pg)
{
	return pg->node_id;
}

int db_pg_send(struct db_pg *pg, uint32_t to, const char *msg)
{
	char payload[DB_MSG_MAX + 32];
	const char *p[1] = { payload };
	PGconn *c;
	PGresult *r;
	int rc = -EAGAIN;

	snprintf(payload, sizeof(payload), "%u %u %s", to, pg->node_id, msg);
	pthread_mutex_lock(&pg->svc_lock);
	c = pgc_get(pg, &pg->svc);
	if (c) {
		r = PQexecParams(c, "SELECT pg_notify('mapfs_msg', $1)", 1,
				 NULL, p, NULL, NULL, 0);
		rc = PQresultStatus(r) == PGRES_TUPLES_OK
			     ? 0
			     : res_err(c, r, "send");
		PQclear(r);
	}
	pthread_mutex_unlock(&pg->svc_lock);
	return rc;
}

/* ---- notes ---------------------------------------------------------------- */

/* One statement on the service connection with params; -EAGAIN if down. */
static int svc_exec(struct db_pg *pg, const char *sql, int n,
		    const char *const *params)
{
	PGconn *c;
	PGresult *r;
	int rc = -EAGAIN;

	pthread_mutex_lock(&pg->svc_lock);
	c = pgc_get(pg, &pg->svc);
	if (c) {
		r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
		rc = PQresultStatus(r) == PGRES_COMMAND_OK
			     ? 0
			     : res_err(c, r, "note");
		PQclear(r);
	}
	pthread_mutex_unlock(&pg->svc_lock);
	return rc;
}

int db_pg_note(struct db_pg *pg, const char *kind, const char *note, bool add)
{
	char id[16];
	const char *p[3] = { id, kind, note };

	snprintf(id, sizeof(id), "%u", pg->node_id);
	return svc_exec(pg,
			add ? "INSERT INTO mapfs_notes VALUES ($1, $2, $3)"
			      " ON CONFLICT DO NOTHING"
			    : "DELETE FROM mapfs_notes WHERE node = $1"
			      " AND kind = $2 AND note = $3",
			3, p);
}

int db_pg_notes_take(struct db_pg *pg, uint32_t node, const char *kind,
		     void (*fn)(void *ctx, const char *note), void *ctx)
{
	char id[16];
	const char *p[2] = { id, kind };
	PGconn *c;
	PGresult *r = NULL;
	int rc = -EAGAIN;

	snprintf(id, sizeof(id), "%u", node);
	pthread_mutex_lock(&pg->svc_lock);
	c = pgc_get(pg, &pg->svc);
	if (c) {
		r = PQexecParams(c,
				 "DELETE FROM mapfs_notes WHERE node = $1"
				 " AND kind = $2 RETURNING note",
				 2, NULL, p, NULL, NULL, 0);
		rc = PQresultStatus(r) == PGRES_TUPLES_OK
			     ? 0
			     : res_err(c, r, "notes");
	}
	pthread_mutex_unlock(&pg->svc_lock);
	for (int i = 0; !rc && i < PQntuples(r); i++)
		fn(ctx, PQgetvalue(r, i, 0));
	PQclear(r);
	return rc;
}

/* ---- cluster services ---------------------------------------------------- */

int db_pg_alloc_ids(struct db_pg *pg, uint64_t n, uint64_t *first)
{
	char num[32];
	const char *p[1] = { num };
	PGconn *c;
	PGresult *r;
	int rc = -EAGAIN;

	snprintf(num, sizeof(num), "%" PRIu64, n);
	pthread_mutex_lock(&pg->svc_lock);
	c = pgc_get(pg, &pg->svc);
	if (c) {
		r = PQexecParams(c,
				 "UPDATE mapfs_counters SET next = next + $1"
				 " WHERE name = 'ino' RETURNING next - $1",
				 1, NULL, p, NULL, NULL, 1);
		if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
			*first = col_u64(r, 0, 0);
			rc = 0;
		} else {
			rc = res_err(c, r, "allocate inode numbers");
		}
		PQclear(r);
	}
	pthread_mutex_unlock(&pg->svc_lock);
	return rc;
}

int db_pg_secret(struct db_pg *pg, const char *name, void *buf, size_t len)
{
	unsigned char *rnd = malloc(len);
	const char *vals[2] = { name, (const char *)rnd };
	int lens[2] = { 0, (int)len }, fmts[2] = { 0, 1 };
	PGconn *c;
	PGresult *r;
	FILE *f;
	int rc = -EAGAIN;

	if (!rnd)
		return -ENOMEM;
	f = fopen("/dev/urandom", "r");
	if (!f || fread(rnd, 1, len, f) != len) {
		if (f)
			fclose(f);
		free(rnd);
		return -EIO;
	}
	fclose(f);
	pthread_mutex_lock(&pg->svc_lock);
	c = pgc_get(pg, &pg->svc);
	if (c) {
		/* The first node's random value wins; every node reads it. */
		r = PQexecParams(
			c,
			"WITH ins AS (INSERT INTO mapfs_secrets"
			"  VALUES ($1, $2) ON CONFLICT DO NOTHING"
			"  RETURNING value)"
			" SELECT value FROM ins UNION ALL"
			" SELECT value FROM mapfs_secrets WHERE name = $1",
			2, NULL, vals, lens, fmts, 1);
		if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) >= 1 &&
		    (size_t)PQgetlength(r, 0, 0) == len) {
			memcpy(buf, PQgetvalue(r, 0, 0), len);
			rc = 0;
		} else if (PQresultStatus(r) == PGRES_TUPLES_OK) {
			rc = -EIO;
		} else {
			rc = res_err(c, r, "read the cluster's secret");
		}
		PQclear(r);
	}
	pthread_mutex_unlock(&pg->svc_lock);
	memset(rnd, 0, len);
	free(rnd);
	return rc;
}

/* ---- growing a gateway into a cluster ------------------------------------ */

#define MIGRATE_BATCH 5000

struct migrate {
	struct db_pg *pg;
	PGconn *c;
	struct pbuf a[3];
	size_t n;
	uint64_t done, total;
	db_progress_fn progress;
	void *ctx;
};

static int migrate_flush(struct migrate *m)
{
	struct pbuf h[3] = { { 0 } };
	const char *vals[3];
	int lens[3], fmts[3] = { 1, 1, 1 };
	PGresult *r;
	int rc = 0;

	if (!m->n)
		return 0;
	/* The element arrays with their headers in front. */
	pb_array(&h[0], OID_TEXT, m->n);
	pb_array(&h[1], OID_BYTEA, m->n);
	pb_array(&h[2], OID_BYTEA, m->n);
	for (int i = 0; i < 3; i++) {
		pb_add(&h[i], m->a[i].p, m->a[i].len);
		if (h[i].bad || m->a[i].bad)
			rc = -ENOMEM;
		vals[i] = (const char *)h[i].p;
		lens[i] = (int)h[i].len;
	}
	if (!rc) {
		r = PQexecParams(m->c,
				 "INSERT INTO mapfs_records (tbl, k, v, ver)"
				 " SELECT t, k, v, 1 FROM unnest($1::text[],"
				 " $2::bytea[], $3::bytea[]) AS w(t, k, v)",
				 3, NULL, vals, lens, fmts, 0);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			rc = res_err(m->c, r, "copy the records");
		PQclear(r);
	}
	for (int i = 0; i < 3; i++) {
		free(h[i].p);
		m->a[i].len = 0;
	}
	m->done += m->n;
	m->n = 0;
	if (m->progress)
		m->progress(m->ctx, m->done, m->total);
	return rc;
}

static int migrate_one(void *ctx, const struct db_remote *rec)
{
	struct migrate *m = ctx;
	const char *tn = db_table_name(m->pg->db, rec->tbl);

	pb_elem(&m->a[0], tn, strlen(tn));
	pb_elem(&m->a[1], rec->key, rec->klen);
	pb_elem(&m->a[2], rec->val, rec->vlen);
	return ++m->n == MIGRATE_BATCH ? migrate_flush(m) : 0;
}

static PGresult *exec_ok(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);

	if (PQresultStatus(r) != PGRES_COMMAND_OK &&
	    PQresultStatus(r) != PGRES_TUPLES_OK) {
		res_err(c, r, sql);
		PQclear(r);
		return NULL;
	}
	return r;
}

int db_pg_migrate(struct db *db, const struct db_cluster_opts *o,
		  const void *key, size_t klen, uint64_t next_id,
		  db_progress_fn progress, void *ctx)
{
	struct db_pg *pg = calloc(1, sizeof(*pg));
	struct migrate m = { .pg = pg, .progress = progress, .ctx = ctx };
	char num[32];
	const char *p[2];
	int lens[2] = { 0, (int)klen }, fmts[2] = { 0, 1 };
	PGresult *r;
	int rc;

	if (!pg)
		return -ENOMEM;
	pg->db = db;
	pg->o = *o;
	rc = pgc_connect(pg, &pg->wr, false);
	if (rc)
		goto out;
	m.c = pg->wr.c;
	if ((rc = schema_check(pg, m.c)))
		goto out;
	r = PQexec(m.c, "SELECT (SELECT count(*) FROM mapfs_records),"
			" (SELECT seq FROM mapfs_clock)");
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		rc = res_err(m.c, r, "look at the target");
		PQclear(r);
		goto out;
	}
	if (atoll(PQgetvalue(r, 0, 0)) || atoll(PQgetvalue(r, 0, 1))) {
		log_error("cluster: the database at the target holds a "
			  "namespace already (%s records): nothing copied",
			  PQgetvalue(r, 0, 0));
		PQclear(r);
		rc = -ENOTEMPTY;
		goto out;
	}
	PQclear(r);
	if (!(r = exec_ok(m.c, "BEGIN"))) {
		rc = -EIO;
		goto out;
	}
	PQclear(r);
	rc = db_each_shared(db, &m.total, migrate_one, &m);
	if (!rc)
		rc = migrate_flush(&m);
	snprintf(num, sizeof(num), "%" PRIu64, next_id);
	p[0] = num;
	if (!rc) {
		r = PQexecParams(
			m.c,
			"UPDATE mapfs_counters SET next ="
			" greatest(next, $1::bigint) WHERE name = 'ino'",
			1, NULL, p, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			rc = res_err(m.c, r, "set the inode counter");
		PQclear(r);
	}
	p[0] = "handle";
	p[1] = key;
	if (!rc && key) {
		r = PQexecParams(m.c,
				 "INSERT INTO mapfs_secrets VALUES ($1, $2)"
				 " ON CONFLICT (name) DO UPDATE SET"
				 " value = EXCLUDED.value",
				 2, NULL, p, lens, fmts, 0);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			rc = res_err(m.c, r, "copy the handle key");
		PQclear(r);
	}
	if (!rc && !(r = exec_ok(m.c, "UPDATE mapfs_clock SET seq = 1")))
		rc = -EIO;
	else if (!rc)
		PQclear(r);
	r = PQexec(m.c, rc ? "ROLLBACK" : "COMMIT");
	if (!rc && PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = res_err(m.c, r, "commit the copy");
	PQclear(r);
	/* This replica is the cluster's from here: its records at seq 1. */
	if (!rc)
		rc = db_mark_replica(db, pg->cluster_id, 1);
out:
	for (int i = 0; i < 3; i++)
		free(m.a[i].p);
	pgc_close(&pg->wr);
	free(pg);
	return rc;
}

/* ---- locks ----------------------------------------------------------- */

/* One try of db_pg_lock_edit on c, in a transaction of its own. */
static int lock_edit_try(PGconn *c, uint64_t ino, db_lock_edit_fn edit,
			 void *ctx, uint64_t host_max)
{
	char num[32], max[32];
	const char *p[3] = { num };
	int lens[3] = { 0 }, fmts[3] = { 0 };
	struct db_host_delta *d = NULL;
	size_t nd = 0, outlen = 0;
	void *out = NULL;
	PGresult *r;
	int rc;

	snprintf(num, sizeof(num), "%" PRIu64, ino);
	snprintf(max, sizeof(max), "%" PRIu64, host_max);
	r = PQexec(c, "BEGIN");
	PQclear(r);
	/* The row first (so that FOR UPDATE has one to lock), then its lock. */
	r = PQexecParams(c,
			 "INSERT INTO mapfs_locks VALUES ($1, ''::bytea)"
			 " ON CONFLICT DO NOTHING",
			 1, NULL, p, NULL, NULL, 0);
	PQclear(r);
	r = PQexecParams(c,
			 "SELECT state FROM mapfs_locks WHERE ino = $1"
			 " FOR UPDATE",
			 1, NULL, p, NULL, NULL, 1);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		rc = res_err(c, r, "read the locks");
		PQclear(r);
		goto out;
	}
	rc = edit(ctx, PQgetlength(r, 0, 0) ? PQgetvalue(r, 0, 0) : NULL,
		  (size_t)PQgetlength(r, 0, 0), &out, &outlen, &d, &nd);
	PQclear(r);
	for (size_t i = 0; !rc && i < nd; i++) {
		char delta[32];

		if (!d[i].delta)
			continue;
		snprintf(delta, sizeof(delta), "%" PRId64, d[i].delta);
		p[0] = (const char *)d[i].host;
		lens[0] = 16;
		fmts[0] = 1;
		p[1] = delta;
		p[2] = max;
		r = PQexecParams(
			c,
			"INSERT INTO mapfs_lock_hosts VALUES ($1, $2)"
			" ON CONFLICT (host) DO UPDATE SET"
			"  n = mapfs_lock_hosts.n + EXCLUDED.n"
			" RETURNING n, n > $3::bigint AND $2::bigint > 0",
			3, NULL, p, lens, fmts, 0);
		if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
			rc = res_err(c, r, "count a host's locks");
		else if (!strcmp(PQgetvalue(r, 0, 1), "t"))
			rc = -ENOLCK;
		PQclear(r);
	}
	if (!rc) {
		p[0] = num;
		lens[0] = 0;
		fmts[0] = 0;
		p[1] = out;
		lens[1] = (int)outlen;
		fmts[1] = 1;
		r = outlen ? PQexecParams(c,
					  "UPDATE mapfs_locks SET state = $2"
					  " WHERE ino = $1",
					  2, NULL, p, lens, fmts, 0)
			   : PQexecParams(c,
					  "DELETE FROM mapfs_locks"
					  " WHERE ino = $1",
					  1, NULL, p, NULL, NULL, 0);
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			rc = res_err(c, r, "write the locks");
		PQclear(r);
	}
out:
	r = PQexec(c, rc ? "ROLLBACK" : "COMMIT");
	if (!rc && PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = res_err(c, r, "commit the locks");
	PQclear(r);
	free(out);
	free(d);
	return rc;
}

int db_pg_lock_edit(struct db_pg *pg, uint64_t ino, db_lock_edit_fn edit,
		    void *ctx, uint64_t host_max)
{
	int rc = -EAGAIN;

	pthread_mutex_lock(&pg->svc_lock);
	for (int i = 0; i < 3 && rc == -EAGAIN; i++) {
		PGconn *c = pgc_get(pg, &pg->svc);

		if (!c)
			break;
		rc = lock_edit_try(c, ino, edit, ctx, host_max);
	}
	pthread_mutex_unlock(&pg->svc_lock);
	return rc;
}

int db_pg_lock_files(struct db_pg *pg, uint64_t **inos, size_t *n)
{
	PGconn *c;
	PGresult *r;
	int rc = -EAGAIN;

	pthread_mutex_lock(&pg->svc_lock);
	c = pgc_get(pg, &pg->svc);
	if (c) {
		r = PQexecParams(c, "SELECT ino FROM mapfs_locks", 0, NULL,
				 NULL, NULL, NULL, 1);
		if (PQresultStatus(r) == PGRES_TUPLES_OK) {
			size_t k = (size_t)PQntuples(r);

			*inos = calloc(k ? k : 1, sizeof(**inos));
			rc = *inos ? 0 : -ENOMEM;
			for (size_t i = 0; !rc && i < k; i++)
				(*inos)[i] = col_u64(r, (int)i, 0);
			*n = rc ? 0 : k;
		} else {
			rc = res_err(c, r, "list the locked files");
		}
		PQclear(r);
	}
	pthread_mutex_unlock(&pg->svc_lock);
	return rc;
}
