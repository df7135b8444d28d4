/*
 * db/replica_vers.c - the bottom of the replica: each shared record's
 * version ("_vers", the number of the commit that last wrote it), the
 * tombstones of deleted ones ("_tombs"), the replica's texts ("_meta":
 * the follower's position, the cluster it is of, this node's instance),
 * and the shared part of a local value (a table's project hook).
 */
#include <errno.h>
#include <fcntl.h>
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
#include "replica_priv.h"

/* The "_vers" key of (tbl, key): the table's name, a NUL, the key. */
size_t replica_vers_key(const struct db_replica *rep, unsigned tbl,
			const struct db_val *key, unsigned char *buf,
			size_t cap)
{
	size_t nl = strlen(rep->db->tables[tbl].name) + 1;

	if (nl + key->size > cap)
		return 0;
	memcpy(buf, rep->db->tables[tbl].name, nl);
	memcpy(buf + nl, key->data, key->size);
	return nl + key->size;
}

/* The version of a shared record here; 0: none (absent, or never seen). */
uint64_t replica_vers_get(struct db_replica *rep, struct db_txn *txn,
			  unsigned tbl, const struct db_val *key)
{
	unsigned char kb[DB_TABLE_NAME_MAX + 512];
	struct db_val k = { replica_vers_key(rep, tbl, key, kb, sizeof(kb)),
			    kb },
		      v;
	uint64_t ver;

	if (!k.size || db_raw_get(txn, rep->vers, &k, &v) ||
	    v.size != sizeof(ver))
		return 0;
	memcpy(&ver, v.data, sizeof(ver));
	return ver;
}

int replica_vers_put(struct db_replica *rep, struct db_txn *txn, unsigned tbl,
		     const struct db_val *key, uint64_t ver)
{
	unsigned char kb[DB_TABLE_NAME_MAX + 512];
	struct db_val k = { replica_vers_key(rep, tbl, key, kb, sizeof(kb)),
			    kb };
	struct db_val v = { sizeof(ver), &ver };

	if (!k.size)
		return -ENAMETOOLONG;
	return db_raw_put(txn, rep->vers, &k, &v, 0);
}

/* The record (tbl, key) deleted by commit ver: its tombstone. */
int replica_tomb_put(struct db_replica *rep, struct db_txn *txn, unsigned tbl,
		     const struct db_val *key, uint64_t ver)
{
	unsigned char kb[8 + DB_TABLE_NAME_MAX + 512];
	struct db_val k = { replica_vers_key(rep, tbl, key, kb + 8,
					     sizeof(kb) - 8),
			    kb },
		      none = { 0, kb };
	int rc = replica_vers_put(rep, txn, tbl, key, ver);

	if (rc || !k.size)
		return rc;
	for (int i = 0; i < 8; i++) /* big-endian: in version order */
		kb[i] = (unsigned char)(ver >> (56 - 8 * i));
	k.size += 8;
	return db_raw_put(txn, rep->tombs, &k, &none, 0);
}

int replica_vers_del(struct db_replica *rep, struct db_txn *txn, unsigned tbl,
		     const struct db_val *key)
{
	unsigned char kb[DB_TABLE_NAME_MAX + 512];
	struct db_val k = { replica_vers_key(rep, tbl, key, kb, sizeof(kb)),
			    kb };

	int rc = k.size ? db_raw_del(txn, rep->vers, &k) : 0;

	return rc == -ENOENT ? 0 : rc;
}

/* A text of _meta into buf ("" if none), in txn or a read snapshot. */
int replica_text_get(struct db *db, unsigned meta, const char *name, char *buf,
		     size_t cap)
{
	struct db_txn *t;
	struct db_val k = { strlen(name), (void *)name }, v;
	int rc = db_read_begin(db, &t);

	if (rc)
		return rc;
	buf[0] = '\0';
	rc = db_raw_get(t, meta, &k, &v);
	if (!rc && v.size < cap) {
		memcpy(buf, v.data, v.size);
		buf[v.size] = '\0';
	}
	db_read_end(db, t);
	return rc == -ENOENT ? 0 : rc;
}

int replica_text_put(struct db_txn *t, unsigned meta, const char *name,
		     const char *val)
{
	struct db_val k = { strlen(name), (void *)name },
		      v = { strlen(val), (void *)val };

	return db_raw_put(t, meta, &k, &v, 0);
}

/* One text in a transaction of its own (start-up, stop).  0 or -errno. */
int replica_text_write(struct db *db, unsigned meta, const char *name,
		       const char *val)
{
	struct db_txn t;
	int rc = db_txn_begin(db, NULL, NULL, &t);

	if (rc)
		return rc;
	rc = replica_text_put(&t, meta, name, val);
	if (rc) {
		db_txn_abort(&t);
		return rc;
	}
	return db_txn_commit(&t);
}

/* The shared part of a local value (the whole of it without a hook). */
int replica_project(const struct db_tinfo *ti, const struct db_val *local,
		    unsigned char *buf, struct db_val *out)
{
	size_t len;
	int rc;

	if (!ti->ops.project) {
		*out = *local;
		return 0;
	}
	rc = ti->ops.project(local, buf, ti->ops.max, &len);
	*out = (struct db_val){ len, buf };
	return rc;
}

/* The largest value a shared table's hooks make. */
size_t replica_max_val(const struct db *db)
{
	size_t max = 0;

	for (int i = 0; i < DB_TABLES_MAX; i++)
		if (db->tables[i].ops.max > max)
			max = db->tables[i].ops.max;
	return max;
}
