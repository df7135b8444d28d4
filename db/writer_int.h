/*
 * db/writer_int.h - the one thread that changes the tables (writer.c), for
 * the room's door above it.  db_submit() and db_write() (db.h) are its.
 */
#ifndef MAPFS_DB_WRITER_INT_H
#define MAPFS_DB_WRITER_INT_H

#include "db_int.h"
#include "replica_int.h"

/* Start the writer thread of db.  0 or -errno. */
int db_writer_start(struct db *db);

/* Finish every change queued, stop the thread, free it. */
void db_writer_stop(struct db *db);

/*
 * From now on changes of shared tables are committed in the cluster
 * through rep first (rep NULL: alone again, once the commits in flight
 * have their answers).  Blocks until the writer switched.
 */
void db_writer_cluster(struct db *db, struct db_replica *rep);

#endif
