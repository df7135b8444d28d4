/*
 * db/pg_conn.c - the bottom of the PostgreSQL engine: connecting (the
 * URL said without its password, the session's settings, a name per
 * connection that a lost answer's check can find), a statement's error
 * said once and sorted into "try again" or not, binary parameters and
 * columns.  Everything else of the engine runs on these.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
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
 * whose answer was lost finds its backend by it; then its own session
 * settings.  0 or -EIO. */
static int pgc_name(struct pgc *p)
{
	char sql[96];
	PGresult *r;
	int rc = 0;

	if (p->name[0]) {
		snprintf(sql, sizeof(sql), "SET application_name = '%s'",
			 p->name);
		r = PQexec(p->c, sql);
		rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : -EIO;
		PQclear(r);
	}
	if (!rc && p->session) {
		r = PQexec(p->c, p->session);
		rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : -EIO;
		PQclear(r);
	}
	return rc;
}

/* Connect p now; 0, -EAGAIN (not there), -EINVAL (fatal; logged). */
int db_pg_pgc_connect(struct db_pg *pg, struct pgc *p, bool quiet)
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
	return db_pg_pgc_connect(pg, p, true) ? NULL : p->c;
}

void db_pg_pgc_close(struct pgc *p)
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

void db_pb_u32(struct bytebuf *b, uint32_t v)
{
	v = htonl(v);
	bytebuf_add(b, &v, 4);
}

void db_pb_u64(struct bytebuf *b, uint64_t v)
{
	db_pb_u32(b, (uint32_t)(v >> 32));
	db_pb_u32(b, (uint32_t)v);
}

void db_pb_array(struct bytebuf *b, uint32_t oid, size_t n)
{
	db_pb_u32(b, 1); /* dimensions */
	db_pb_u32(b, 1); /* has nulls (allowed) */
	db_pb_u32(b, oid);
	db_pb_u32(b, (uint32_t)n);
	db_pb_u32(b, 1); /* lower bound */
}

void db_pb_elem(struct bytebuf *b, const void *d, size_t n)
{
	if (!d) {
		db_pb_u32(b, 0xffffffffu); /* NULL */
		return;
	}
	db_pb_u32(b, (uint32_t)n);
	bytebuf_add(b, d, n);
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

/* One statement with text parameters; the result, or NULL (logged). */
PGresult *db_pg_exec_text(PGconn *c, const char *sql, int n,
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
