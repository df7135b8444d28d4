/*
 * db/pgsvc.c - the cluster's services beside the namespace, on the
 * service connection (one at a time, under its mutex): inode number
 * blocks, secrets, messages between nodes, notes a node leaves for
 * whoever outlives it, NLM locks, and growing a gateway into a cluster.
 *
 * Schema (pg_schema.c creates it):
 *   mapfs_counters name -> next: the inode numbers
 *   mapfs_secrets  name -> value: the handle key
 *   mapfs_locks    ino -> state: a file's NLM locks, requests, shares
 *   mapfs_lock_hosts  host address -> what it holds, over all files
 *   mapfs_notes    (node, kind, note)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/log.h"
#include "pg_int.h"

#define MIGRATE_BATCH 5000

int db_pg_send(struct db_pg *pg, uint32_t to, const char *msg)
{
	char payload[DB_MSG_MAX + 32];
	const char *p[1] = { payload };
	PGconn *c = db_pg_svc_lock(pg);
	PGresult *r;
	int rc = -EAGAIN;

	snprintf(payload, sizeof(payload), "%u %u %s", to, db_pg_node_id(pg),
		 msg);
	if (c) {
		r = PQexecParams(c, "SELECT pg_notify('mapfs_msg', $1)", 1,
				 NULL, p, NULL, NULL, 0);
		rc = PQresultStatus(r) == PGRES_TUPLES_OK
			     ? 0
			     : db_pg_res_err(c, r, "send");
		PQclear(r);
	}
	db_pg_svc_unlock(pg);
	return rc;
}

/* See pg_int.h. */
int db_pg_peers_live(struct db_pg *pg, db_peer_fn fn, void *ctx)
{
	PGconn *c = db_pg_svc_lock(pg);
	PGresult *r;
	int rc = -EAGAIN;

	if (c) {
		r = PQexec(c, "SELECT id, name, live FROM mapfs_nodes"
			      " WHERE lease_until > now() AND live IS NOT NULL"
			      " ORDER BY id");
		rc = PQresultStatus(r) == PGRES_TUPLES_OK
			     ? 0
			     : db_pg_res_err(c, r, "live view");
		for (int i = 0; !rc && i < PQntuples(r); i++)
			fn(ctx,
			   (uint32_t)strtoul(PQgetvalue(r, i, 0), NULL, 10),
			   PQgetvalue(r, i, 1), PQgetvalue(r, i, 2));
		PQclear(r);
	}
	db_pg_svc_unlock(pg);
	return rc;
}

/* One statement on the service connection with params; -EAGAIN if down. */
static int svc_exec(struct db_pg *pg, const char *sql, int n,
		    const char *const *params)
{
	PGconn *c = db_pg_svc_lock(pg);
	PGresult *r;
	int rc = -EAGAIN;

	if (c) {
		r = PQexecParams(c, sql, n, NULL, params, NULL, NULL, 0);
		rc = PQresultStatus(r) == PGRES_COMMAND_OK
			     ? 0
			     : db_pg_res_err(c, r, "note");
		PQclear(r);
	}
	db_pg_svc_unlock(pg);
	return rc;
}

int db_pg_note(struct db_pg *pg, const char *kind, const char *note, bool add)
{
	char id[16];
	const char *p[3] = { id, kind, note };

	snprintf(id, sizeof(id), "%u", db_pg_node_id(pg));
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
	PGconn *c = db_pg_svc_lock(pg);
	PGresult *r = NULL;
	int rc = -EAGAIN;

	snprintf(id, sizeof(id), "%u", node);
	if (c) {
		r = PQexecParams(c,
				 "DELETE FROM mapfs_notes WHERE node = $1"
				 " AND kind = $2 RETURNING note",
				 2, NULL, p, NULL, NULL, 0);
		rc = PQresultStatus(r) == PGRES_TUPLES_OK
			     ? 0
			     : db_pg_res_err(c, r, "notes");
	}
	db_pg_svc_unlock(pg);
	for (int i = 0; !rc && i < PQntuples(r); i++)
		fn(ctx, PQgetvalue(r, i, 0));
	PQclear(r);
	return rc;
}

int db_pg_alloc_ids(struct db_pg *pg, uint64_t n, uint64_t *first)
{
	char num[32];
	const char *p[1] = { num };
	PGconn *c = db_pg_svc_lock(pg);
	PGresult *r;
	int rc = -EAGAIN;

	snprintf(num, sizeof(num), "%" PRIu64, n);
	if (c) {
		r = PQexecParams(c,
				 "UPDATE mapfs_counters SET next = next + $1"
				 " WHERE name = 'ino' RETURNING next - $1",
				 1, NULL, p, NULL, NULL, 1);
		if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
			*first = db_pg_col_u64(r, 0, 0);
			rc = 0;
		} else {
			rc = db_pg_res_err(c, r, "allocate inode numbers");
		}
		PQclear(r);
	}
	db_pg_svc_unlock(pg);
	return rc;
}

int db_pg_log_oldest(struct db_pg *pg, uint64_t *seq)
{
	PGconn *c = db_pg_svc_lock(pg);
	PGresult *r;
	int rc = -EAGAIN;

	if (c) {
		r = PQexecParams(c,
				 "SELECT coalesce((SELECT min(seq) FROM"
				 " mapfs_log), (SELECT last_value FROM"
				 " mapfs_seq))",
				 0, NULL, NULL, NULL, NULL, 1);
		if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
			*seq = db_pg_col_u64(r, 0, 0);
			rc = 0;
		} else {
			rc = db_pg_res_err(c, r, "the log's oldest commit");
		}
		PQclear(r);
	}
	db_pg_svc_unlock(pg);
	return rc;
}

int db_pg_secret(struct db_pg *pg, const char *name, void *buf, size_t len)
{
	unsigned char *rnd = malloc(len);
	const char *vals[2] = { name, (const char *)rnd };
	int lens[2] = { 0, (int)len }, fmts[2] = { 0, 1 };
	PGconn *c;
	PGresult *r;
	int rc = -EAGAIN;

	if (!rnd)
		return -ENOMEM;
	if (getrandom(rnd, len, 0) != (ssize_t)len) {
		free(rnd);
		return -EIO;
	}
	c = db_pg_svc_lock(pg);
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
			rc = db_pg_res_err(c, r, "read the cluster's secret");
		}
		PQclear(r);
	}
	db_pg_svc_unlock(pg);
	memset(rnd, 0, len);
	free(rnd);
	return rc;
}

/* ---- growing a gateway into a cluster ------------------------------------ */

struct migrate {
	PGconn *c;
	struct bytebuf a[3];
	size_t n;
};

static int migrate_flush(struct migrate *m)
{
	struct bytebuf h[3] = { { 0 } };
	const char *vals[3];
	int lens[3], fmts[3] = { 1, 1, 1 };
	PGresult *r;
	int rc = 0;

	if (!m->n)
		return 0;
	/* The element arrays with their headers in front. */
	db_pb_array(&h[0], DB_OID_TEXT, m->n);
	db_pb_array(&h[1], DB_OID_BYTEA, m->n);
	db_pb_array(&h[2], DB_OID_BYTEA, m->n);
	for (int i = 0; i < 3; i++) {
		bytebuf_add(&h[i], m->a[i].p, m->a[i].len);
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
			rc = db_pg_res_err(m->c, r, "copy the records");
		PQclear(r);
	}
	for (int i = 0; i < 3; i++) {
		free(h[i].p);
		m->a[i].len = 0;
	}
	m->n = 0;
	return rc;
}

static int migrate_one(void *ctx, const struct db_remote *rec)
{
	struct migrate *m = ctx;

	db_pb_elem(&m->a[0], rec->tname, strlen(rec->tname));
	db_pb_elem(&m->a[1], rec->key, rec->klen);
	db_pb_elem(&m->a[2], rec->val, rec->vlen);
	return ++m->n == MIGRATE_BATCH ? migrate_flush(m) : 0;
}

/* A statement that must go through; the result, or NULL (logged). */
static PGresult *exec_ok(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);

	if (PQresultStatus(r) != PGRES_COMMAND_OK &&
	    PQresultStatus(r) != PGRES_TUPLES_OK) {
		db_pg_res_err(c, r, sql);
		PQclear(r);
		return NULL;
	}
	return r;
}

int db_pg_migrate(const struct db_cluster_opts *o, const void *key, size_t klen,
		  uint64_t next_id,
		  int (*each)(void *ctx,
			      int (*put)(void *pctx,
					 const struct db_remote *rec),
			      void *pctx),
		  void *ctx, char *cluster_id)
{
	struct migrate m = { 0 };
	char num[32];
	const char *p[2];
	int lens[2] = { 0, (int)klen }, fmts[2] = { 0, 1 };
	PGresult *r;
	int rc = db_pg_connect_url(o->url, &m.c);

	if (rc)
		goto out;
	if ((rc = db_pg_schema(m.c, o->store_url, cluster_id)))
		goto out;
	r = PQexec(m.c, "SELECT (SELECT count(*) FROM mapfs_records),"
			" (SELECT count(*) FROM mapfs_log)");
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		rc = db_pg_res_err(m.c, r, "look at the target");
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
	rc = each(ctx, migrate_one, &m);
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
			rc = db_pg_res_err(m.c, r, "set the inode counter");
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
			rc = db_pg_res_err(m.c, r, "copy the handle key");
		PQclear(r);
	}
	/* The copied records are version 1: commits number from 2. */
	if (!rc && !(r = exec_ok(m.c, "SELECT setval('mapfs_seq', 1)")))
		rc = -EIO;
	else if (!rc)
		PQclear(r);
	r = PQexec(m.c, rc ? "ROLLBACK" : "COMMIT");
	if (!rc && PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = db_pg_res_err(m.c, r, "commit the copy");
	PQclear(r);
out:
	for (int i = 0; i < 3; i++)
		free(m.a[i].p);
	PQfinish(m.c);
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
		rc = db_pg_res_err(c, r, "read the locks");
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
			rc = db_pg_res_err(c, r, "count a host's locks");
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
			rc = db_pg_res_err(c, r, "write the locks");
		PQclear(r);
	}
out:
	r = PQexec(c, rc ? "ROLLBACK" : "COMMIT");
	if (!rc && PQresultStatus(r) != PGRES_COMMAND_OK)
		rc = db_pg_res_err(c, r, "commit the locks");
	PQclear(r);
	free(out);
	free(d);
	return rc;
}

int db_pg_lock_edit(struct db_pg *pg, uint64_t ino, db_lock_edit_fn edit,
		    void *ctx, uint64_t host_max)
{
	int rc = -EAGAIN;

	for (int i = 0; i < 3 && rc == -EAGAIN; i++) {
		PGconn *c = db_pg_svc_lock(pg);

		if (c)
			rc = lock_edit_try(c, ino, edit, ctx, host_max);
		db_pg_svc_unlock(pg);
		if (!c)
			break;
	}
	return rc;
}

int db_pg_lock_files(struct db_pg *pg, uint64_t **inos, size_t *n)
{
	PGconn *c = db_pg_svc_lock(pg);
	PGresult *r;
	int rc = -EAGAIN;

	if (c) {
		r = PQexecParams(c, "SELECT ino FROM mapfs_locks", 0, NULL,
				 NULL, NULL, NULL, 1);
		if (PQresultStatus(r) == PGRES_TUPLES_OK) {
			size_t k = (size_t)PQntuples(r);

			*inos = calloc(k ? k : 1, sizeof(**inos));
			rc = *inos ? 0 : -ENOMEM;
			for (size_t i = 0; !rc && i < k; i++)
				(*inos)[i] = db_pg_col_u64(r, (int)i, 0);
			*n = rc ? 0 : k;
		} else {
			rc = db_pg_res_err(c, r, "list the locked files");
		}
		PQclear(r);
	}
	db_pg_svc_unlock(pg);
	return rc;
}
