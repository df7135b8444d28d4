/*
 * db/snap_int.h - a PostgreSQL snapshot (pg_snapshot: xmin, xmax and the
 * transactions in progress), the position of a node in the change log.
 *
 * A log entry carries the id of the transaction that wrote it.  Reading
 * the log under snapshot S shows exactly the entries of the transactions
 * S sees as committed; the next read under S' needs only the entries of
 * the transactions S did not see: those in progress at S (its xip) and
 * those that began after it (>= its xmax).  So a follower never misses a
 * commit still in flight, and no counter or lock orders the commits.
 */
#ifndef MAPFS_DB_SNAP_INT_H
#define MAPFS_DB_SNAP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DB_SNAP_TEXT_MAX 4096

struct db_snap {
	uint64_t xmin, xmax;
	uint64_t *xip; /* malloc'd, ascending */
	size_t nxip;
	/*
	 * As a follower's position, also the highest commit number it has
	 * (0: none known).  A crash or a failover of PostgreSQL may hand a
	 * transaction id out again that never became durable (an aborted
	 * transaction's, one whose commit did not wait for the disk), and
	 * a snapshot from before took it as finished; the commit numbers
	 * of mapfs_seq never go back for a durable commit, so every commit
	 * after such an event is also one numbered above this.
	 */
	uint64_t seq;
};

/* Parse "[seq/]xmin:xmax:xip1,xip2,..." (pg_snapshot's text, and a
 * position's) into *s (its xip replaced; seq 0 without it).  0, -EINVAL,
 * -ENOMEM. */
int db_snap_parse(struct db_snap *s, const char *text);

/* The text form into buf ("seq/..." when seq is known; cap bytes,
 * DB_SNAP_TEXT_MAX is enough for 300 transactions in progress; more are
 * -ENAMETOOLONG). */
int db_snap_format(const struct db_snap *s, char *buf, size_t cap);

/* *dst = a copy of src.  0 or -ENOMEM. */
int db_snap_copy(struct db_snap *dst, const struct db_snap *src);
void db_snap_free(struct db_snap *s);

/* Whether everything snapshot s saw as committed, a shows too: a was
 * taken no earlier than s.  An empty s (xmax 0) is covered by anything. */
bool db_snap_covers(const struct db_snap *a, const struct db_snap *s);

#endif
