/*
 * db/track_int.h - the records one change (or a group of them) read and
 * wrote, as the cluster shares them: the reads with the versions they saw,
 * the writes in order (reduced to the last value per key for a commit).
 * Keys and values live in one arena, so thousands of records cost a few
 * reallocations, not an allocation each.  Tables are named by their
 * number here (db_table); the layers above map them to names.
 */
#ifndef MAPFS_DB_TRACK_INT_H
#define MAPFS_DB_TRACK_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db_int.h"

/* One record: a table, a key, a value (writes; del: deleted) or a version
 * (reads; for a write: the version it replaces).  key/val point into the
 * track's arena. */
struct db_rec {
	unsigned tbl;
	size_t koff, klen;
	size_t voff, vlen;
	bool del;
	bool written; /* a read whose key the writes change (db_track_final) */
	uint64_t ver;
};

struct db_track {
	struct db_rec *reads, *writes;
	size_t nreads, nwrites, capr, capw;
	unsigned char *arena;
	size_t alen, acap;
	/* Reads already recorded (open addressing over reads[] + 1). */
	uint32_t *rhash;
	size_t rhcap;
};

void db_track_init(struct db_track *t);
void db_track_reset(struct db_track *t);
void db_track_free(struct db_track *t);

/* Record a read of (tbl, key) at version ver (the first of a key counts:
 * later ones are ignored).  0/-ENOMEM. */
int db_track_read(struct db_track *t, unsigned tbl, const struct db_val *key,
		  uint64_t ver);

/* The version the first read of (tbl, key) saw: true if there was one. */
bool db_track_read_ver(const struct db_track *t, unsigned tbl,
		       const struct db_val *key, uint64_t *ver);

/* Append a write (val NULL: a delete).  0 or -ENOMEM. */
int db_track_write(struct db_track *t, unsigned tbl, const struct db_val *key,
		   const struct db_val *val);

/*
 * Reduce the writes to the last one per key, in first-write order (the
 * arrays shrink in place), each with the version its first read saw as
 * the one it replaces (and that read marked written).  0 or -ENOMEM.
 */
int db_track_final(struct db_track *t);

static inline const void *db_rec_key(const struct db_track *t,
				     const struct db_rec *r)
{
	return t->arena + r->koff;
}

static inline const void *db_rec_val(const struct db_track *t,
				     const struct db_rec *r)
{
	return t->arena + r->voff;
}

/* A record of the cluster (another node's change, or a current record):
 * its table by name, as PostgreSQL holds it. */
struct db_remote {
	const char *tname;
	unsigned tbl; /* filled by the replica: this node's table */
	const void *key;
	size_t klen;
	const void *val; /* NULL: deleted or absent */
	size_t vlen;
	uint64_t ver;
	uint64_t age_us; /* following the log: its commit's age when read */
};

#endif
