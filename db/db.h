/*
 * db/db.h - the LMDB environment shared by fs/ (namespace) and cache/
 * (data journal), and its group-commit writer.
 *
 * Why a room of its own: the namespace and the write-back journal must be
 * committed together and durably, by one writer thread that groups the
 * pending changes of all cores into one transaction (one fsync for a burst
 * of creates).  Both fs/ and cache/ sit above it; it knows no inode or
 * chunk layout, only "apply this function inside the next write txn".
 *
 * Reads: every thread gets its own reusable read transaction (MDB_NOTLS +
 * reset/renew), so readers never take a lock.
 */
#ifndef MAPFS_DB_H
#define MAPFS_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <lmdb.h>

struct db;

/*
 * Open (creating if needed) the environment in directory dir with the
 * given map size (bytes) and at most maxdbs named databases.  Returns 0 or
 * -errno.  The writer thread starts here.
 */
int db_open(const char *dir, size_t mapsize, unsigned maxdbs, struct db **out);

/* Flush pending writes, stop the writer thread, close the env. */
void db_close(struct db *db);

MDB_env *db_env(struct db *db);

/*
 * Open (creating) the named database with mdb flags (MDB_INTEGERKEY, ...).
 * Call during start-up, before concurrent use.  Returns 0 or -errno.
 */
int db_dbi(struct db *db, const char *name, unsigned flags, MDB_dbi *out);

/*
 * Begin a read transaction for the calling thread (cheap: a per-thread
 * txn is renewed).  Must be ended with db_read_end() on the same thread
 * before the thread calls db_read_begin() again.  Returns 0 or -errno.
 */
int db_read_begin(struct db *db, MDB_txn **txn);
void db_read_end(struct db *db, MDB_txn *txn);

/*
 * A change to apply inside the next group-commit transaction.  apply runs
 * on the writer thread inside its own nested transaction: returning
 * non-zero (-errno) aborts just that change.  done runs on the writer
 * thread after the whole group is committed and synced to disk (err is the
 * apply result, or the commit error).  Either may be NULL.
 */
typedef int (*db_apply_fn)(MDB_txn *txn, void *arg);
typedef void (*db_done_fn)(void *arg, int err);

/* Queue a change; never blocks on I/O.  arg is owned by the caller. */
void db_submit(struct db *db, db_apply_fn apply, db_done_fn done, void *arg);

/*
 * Queue a change and wait until it is durable.  For threads that may block
 * (start-up, workers); never call it from an event loop.  Returns the
 * apply result or the commit error.
 */
int db_write(struct db *db, db_apply_fn apply, void *arg);

/* Map an MDB_* return code to -errno. */
int db_err(int mdb_rc);

#endif
