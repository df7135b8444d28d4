/*
 * fs/cachectl.c - what an operator does to the cache (admin/: ctl warm,
 * evict, status): the namespace decides which data may be fetched or
 * dropped and knows the backlog; the cache moves the bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "db/db.h"
#include "fs_int.h"

/* A blocking cache_fetch (loop -1) completes inline, into *arg. */
static void warm_done(void *arg, long result)
{
	*(long *)arg = result;
}

int fs_warm(struct fs *fs, uint64_t ino, bool *fetched)
{
	char key[STORE_KEY_MAX + 1];
	struct cache_stat before, after;
	struct fs_inode in;
	struct db_txn *txn;
	long res = 0;
	int rc;

	*fetched = false;
	rc = db_read_begin(fs->db, &txn);
	if (rc)
		return rc;
	rc = fs_inode_get(fs, txn, ino, &in);
	/* Dirty data is local by definition; a new file has no object yet. */
	if (!rc && (in.type != FS_REG || (in.flags & FS_F_DIRTY_DATA) ||
		    !(in.flags & FS_F_IN_STORE))) {
		db_read_end(fs->db, txn);
		return 0;
	}
	if (!rc)
		rc = fs_key_build(fs, txn, ino, key, sizeof(key));
	db_read_end(fs->db, txn);
	if (rc)
		return rc;
	if (cache_stat(fs->cache, ino, &before))
		before.blocks_bytes = 0;
	/* As a READ miss does, for every chunk: only missing ones are got. */
	cache_fetch(fs->cache, -1, ino,
		    &(struct cache_obj){ .key = key,
					 .size = in.size,
					 .etag = fs_obj_etag(&in) },
		    0, in.size, false, warm_done, &res);
	if (res < 0)
		return (int)res;
	*fetched = cache_stat(fs->cache, ino, &after) == 0 &&
		   after.blocks_bytes > before.blocks_bytes;
	return 0;
}

struct evict_op {
	struct fs *fs;
	uint64_t ino;
	uint64_t freed;
};

/*
 * In the writer's transaction: the same thread applies the clean ->
 * dirty transition of a WRITE (fs/io.c), which then finds the data gone
 * and answers EAGAIN (JUKEBOX) so that the client retries on fetched data.
 */
static int evict_apply(struct db_txn *txn, void *arg)
{
	struct evict_op *op = arg;
	struct cache_stat cs;
	struct fs_inode in;
	int rc = fs_inode_get(op->fs, txn, op->ino, &in);

	if (rc)
		return rc;
	if (in.type != FS_REG)
		return in.type == FS_DIR ? -EISDIR : -EINVAL;
	/* Dirty metadata is uploaded from the local data too. */
	if ((in.flags & FS_F_DIRTY) || !(in.flags & FS_F_IN_STORE))
		return -EBUSY;
	if (cache_stat(op->fs->cache, op->ino, &cs))
		return 0; /* not local */
	rc = cache_drop(op->fs->cache, op->ino);
	if (!rc)
		op->freed = cs.blocks_bytes;
	return rc;
}

int fs_evict(struct fs *fs, uint64_t ino, uint64_t *freed)
{
	struct evict_op op = { .fs = fs, .ino = ino };
	int rc = db_write(fs->db, evict_apply, &op);

	*freed = rc ? 0 : op.freed;
	return rc;
}

int fs_dirty_stat(struct fs *fs, struct fs_dirty_stat *out)
{
	struct db_cursor *cur;
	struct db_txn *txn;
	struct db_val k, v;
	int rc, mrc;

	memset(out, 0, sizeof(*out));
	fs_fail_stat(fs, out);
	rc = db_read_begin(fs->db, &txn);
	if (rc)
		return rc;
	rc = fs_pending_count(fs, txn, &out->pending);
	if (!rc)
		fs_pending_meter(fs, txn, &out->pending_age_ms,
				 &out->pending_rate);
	if (!rc) {
		rc = db_cursor_open(txn, fs->dbi_work, &cur);
	}
	if (rc)
		goto out_end;
	for (int op = DB_FIRST; !(mrc = db_cursor_get(cur, &k, &v, op));
	     op = DB_NEXT) {
		struct fs_inode in;
		struct cache_stat cs;
		int64_t changed;
		uint64_t ino;

		memcpy(&ino, k.data, sizeof(ino));
		if (fs_inode_get(fs, txn, ino, &in) || !(in.flags & FS_F_DIRTY))
			continue;
		out->files++;
		changed = in.ctime;
		/* While dirty, the cache file is the authority (fs_int.h). */
		if (in.type == FS_REG && (in.flags & FS_F_DIRTY_DATA) &&
		    cache_stat(fs->cache, ino, &cs) == 0) {
			out->bytes += cs.size;
			if (fs_ts_to_ns(&cs.ctime) > changed)
				changed = fs_ts_to_ns(&cs.ctime);
		}
		if (!out->oldest_ns || changed < out->oldest_ns)
			out->oldest_ns = changed;
	}
	db_cursor_close(cur);
	if (mrc != -ENOENT)
		rc = mrc;
out_end:
	db_read_end(fs->db, txn);
	return rc;
}
