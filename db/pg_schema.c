/*
 * db/pg_schema.c - the cluster's schema in PostgreSQL (the tables and
 * mapfs_commit2(), pg.c's comment says what each holds): created by the
 * first node, upgraded in place, checked against the store URL, under an
 * advisory lock so that two first nodes do not race.
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

/* ---- the schema ---------------------------------------------------------- */

/* The commit's signature and its body: one for mapfs_commit2 and 3. */
#define COMMIT_SIG                                                           \
	"(p_node int, p_inst int,"                                           \
	"    p_tok bigint, rt text[], rk bytea[], rv bigint[],"              \
	"    wt text[], wk bytea[], wv bytea[], wx bigint[])"                \
	"  RETURNS TABLE (seq bigint, t text, k bytea, v bytea, ver bigint," \
	"    snap text)"                                                     \
	"  LANGUAGE plpgsql"

#define COMMIT_BODY                                                            \
	"#variable_conflict use_column\n"                                      \
	"DECLARE s bigint;"                                                    \
	"BEGIN"                                                                \
	"  PERFORM 1 FROM unnest(wt, wk) AS w(t, k)"                           \
	"    JOIN mapfs_records m ON m.tbl = w.t AND m.k = w.k"                \
	"    ORDER BY w.t, w.k FOR UPDATE OF m;"                               \
	"  IF cardinality(rt) > 0 THEN"                                        \
	"    PERFORM 1 FROM unnest(rt, rk) AS r(t, k)"                         \
	"      JOIN mapfs_records m ON m.tbl = r.t AND m.k = r.k"              \
	"      ORDER BY r.t, r.k FOR SHARE OF m;"                              \
	"  END IF;"                                                            \
	"  RETURN QUERY"                                                       \
	"    SELECT 0::bigint, x.t, x.k, m.v, coalesce(m.ver, 0),"             \
	"           pg_current_snapshot()::text"                               \
	"      FROM (SELECT * FROM unnest(rt, rk, rv)"                         \
	"            UNION ALL SELECT * FROM unnest(wt, wk, wx)) AS x(t, k, "  \
	"ver)"                                                                 \
	"      LEFT JOIN mapfs_records m ON m.tbl = x.t AND m.k = x.k"         \
	"     WHERE coalesce(m.ver, 0) <> x.ver;"                              \
	"  IF FOUND THEN RETURN; END IF;"                                      \
	"  s := nextval('mapfs_seq');"                                         \
	"  IF array_position(wv, NULL) IS NOT NULL THEN"                       \
	"    DELETE FROM mapfs_records m USING unnest(wt, wk, wv) AS w(t, k, " \
	"v)"                                                                   \
	"     WHERE w.v IS NULL AND m.tbl = w.t AND m.k = w.k;"                \
	"  END IF;"                                                            \
	"  IF EXISTS (SELECT 1 FROM unnest(wx) AS x WHERE x <> 0) THEN"        \
	"    UPDATE mapfs_records m SET v = w.v, ver = s"                      \
	"      FROM unnest(wt, wk, wv, wx) AS w(t, k, v, x)"                   \
	"     WHERE w.v IS NOT NULL AND w.x <> 0 AND m.tbl = w.t"              \
	"       AND m.k = w.k;"                                                \
	"  END IF;"                                                            \
	"  INSERT INTO mapfs_records (tbl, k, v, ver)"                         \
	"    SELECT w.t, w.k, w.v, s FROM unnest(wt, wk, wv, wx)"              \
	"      AS w(t, k, v, x) WHERE w.v IS NOT NULL AND w.x = 0"             \
	"     ORDER BY w.t, w.k;"                                              \
	"  INSERT INTO mapfs_log VALUES (s, "                                  \
	"pg_current_xact_id()::text::bigint,"                                  \
	"    p_node, p_inst, p_tok, now(), wt, wk, wv);"                       \
	"  RETURN QUERY SELECT s, NULL::text, NULL::bytea, NULL::bytea,"       \
	"    NULL::bigint, NULL::text;"                                        \
	"END "

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
	/* Who runs each node's queued store work (pg_runners.c); added in
	 * place: a gateway without it runs a down node's records as
	 * before, unfenced. */
	"CREATE TABLE IF NOT EXISTS mapfs_runners ("
	"  queue int PRIMARY KEY, runner int NOT NULL, inst text NOT NULL,"
	"  run_until timestamptz NOT NULL, fence_until timestamptz NOT NULL);"
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
	/* The commit of this version's gateways: the settings it needs
	 * are its committers' sessions' (pg_commit.c, COMMIT_SESSION_SQL),
	 * set once; SET clauses here cost every call about 100 us of the
	 * primary's CPU, a third of a one-create commit (bench/RESULTS.md). */
	"CREATE OR REPLACE FUNCTION mapfs_commit3" COMMIT_SIG
	"  AS $f$" COMMIT_BODY "$f$;"
	/* The same for the gateways of the release before, whose sessions
	 * do not set them: index lookups only, whatever the statistics
	 * said when the plans were cached (a seq scan, hash or merge join
	 * would read the whole table of records for every commit). */
	"CREATE OR REPLACE FUNCTION mapfs_commit2" COMMIT_SIG
	"  SET lock_timeout = '1s'"
	"  SET enable_seqscan = off SET enable_hashjoin = off"
	"  SET enable_mergejoin = off"
	"  AS $f$" COMMIT_BODY "$f$;";

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
	r = db_pg_exec_text(
		c,
		"INSERT INTO mapfs_meta VALUES ('schema_version', $1),"
		" ('store_url', $2), ('cluster_id', $3)"
		" ON CONFLICT (name) DO NOTHING;",
		3, p, PGRES_COMMAND_OK);
	if (!r)
		goto out;
	PQclear(r);
	r = db_pg_exec_text(c,
			    "UPDATE mapfs_meta SET value = $1"
			    " WHERE name = 'schema_version'",
			    1, p, PGRES_COMMAND_OK);
	if (!r)
		goto out;
	PQclear(r);
	r = db_pg_exec_text(c, "SELECT name, value FROM mapfs_meta", 0, NULL,
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
