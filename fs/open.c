/*
 * fs/open.c - opening and closing the namespace: the named databases, the
 * root directory, the worker pool and the syncer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>

#include "common/log.h"
#include "db/db.h"
#include "fs_int.h"

/*
 * This namespace's id (link ids, links.c): made at random once and kept
 * in "meta"; a cluster's is the cluster's (db_secret, fs_open).
 */
static int nsid_init(struct fs *fs, struct db_txn *txn)
{
	int rc = fs_meta_get_u64(fs, txn, "nsid", &fs->nsid);

	if (rc != -ENOENT)
		return rc;
	if (getrandom(&fs->nsid, sizeof(fs->nsid), 0) != sizeof(fs->nsid))
		return -EIO;
	return fs_meta_put_u64(fs, txn, "nsid", fs->nsid);
}

static int open_init_apply(struct db_txn *txn, void *p)
{
	struct fs *fs = p;
	struct fs_inode root;
	int rc = fs_meta_init(fs, txn);

	if (!rc && !db_clustered(fs->db))
		rc = nsid_init(fs, txn);
	if (rc)
		return rc;
	rc = fs_inode_get(fs, txn, FS_ROOT_INO, &root);
	if (rc != -ESTALE)
		return rc;
	/* First use: the root, to be listed at its first access (import). */
	memset(&root, 0, sizeof(root));
	root.ino = FS_ROOT_INO;
	root.gen = FS_GEN;
	root.type = FS_DIR;
	root.mode = 0755;
	root.uid = fs->opts.default_uid;
	root.gid = fs->opts.default_gid;
	root.nlink = 2;
	root.atime = root.mtime = root.ctime = fs_now_ns();
	root.parent = FS_ROOT_INO;
	root.next_cookie = FS_COOKIE_FIRST;
	root.dir_ver = 1;
	root.flags = FS_F_IN_STORE;
	return fs_inode_put(fs, txn, &root);
}

/* The tables: the namespace and the queued store work are the cluster's,
 * the rest this node's. */
static int fs_tables_open(struct fs *fs, const struct db_share_ops *inodes)
{
	struct db *db = fs->db;
	int rc;

	if ((rc = db_table_open_shared(db, "inodes", DB_INTKEY | DB_SHARED,
				       inodes, &fs->dbi_inodes)) ||
	    (rc = db_table_open(db, "dirents", DB_SHARED, &fs->dbi_dirents)) ||
	    (rc = db_table_open(db, "dircookies", DB_SHARED,
				&fs->dbi_cookies)) ||
	    (rc = db_table_open(db, "keys", DB_SHARED, &fs->dbi_keys)) ||
	    (rc = db_table_open(db, "meta", 0, &fs->dbi_meta)) ||
	    (rc = db_table_open(db, "pending", DB_INTKEY | DB_SHARED,
				&fs->dbi_pending)) ||
	    (rc = db_table_open(db, "work", DB_INTKEY, &fs->dbi_work)) ||
	    (rc = db_table_open(db, "mpu", 0, &fs->dbi_mpu)) ||
	    (rc = db_table_open(db, "mpu_intent", 0, &fs->dbi_mpu_intent)) ||
	    (rc = db_table_open(db, "links", DB_SHARED, &fs->dbi_links)) ||
	    (rc = db_table_open(db, "linkids", DB_SHARED, &fs->dbi_linkids)))
		return rc;
	return 0;
}

/* See fs.h.  db, cache and store stay the caller's. */
int fs_open(const struct fs_opts *opts, struct db *db, struct cache *cache,
	    struct store *store, struct fs **out)
{
	struct fs *fs = calloc(1, sizeof(*fs));
	int rc;

	if (!fs)
		return -ENOMEM;
	fs->opts = *opts;
	fs->db = db;
	fs->cache = cache;
	fs->store = store;
	fs->key_max = store_key_max(store);
	struct db_share_ops inodes = fs_inode_share;

	inodes.changed = fs_owner_inode_changed;
	inodes.ctx = fs;
	pthread_mutex_init(&fs->fail_lock, NULL);
	pthread_mutex_init(&fs->pend_meter_lock, NULL);
	fs->pend_open_ms = fs_now_ms();
	pthread_mutex_init(&fs->relist_lock, NULL);
	pthread_mutex_init(&fs->listing_lock, NULL);
	atomic_init(&fs->nprogressive, 0);
	pthread_mutex_init(&fs->ino_lock, NULL);
	if ((rc = fs_tables_open(fs, &inodes)))
		goto out_free;
	/* Tables open: a cluster node brings its replica up to date. */
	db_on_message(db, fs_owner_on_message, fs);
	rc = db_start(db);
	if (rc)
		goto out_free;
	if (db_clustered(db))
		rc = db_secret(db, "nsid", &fs->nsid, sizeof(fs->nsid));
	if (!rc)
		rc = db_write(db, open_init_apply, fs);
	if (!rc)
		rc = fs_pending_init(fs);
	if (rc)
		goto out_free;
	rc = fs_workers_start(fs);
	if (rc)
		goto out_free;
	rc = fs_async_start(fs, opts->async_window_ms);
	if (rc) {
		fs_workers_stop(fs);
		fs_workers_free(fs);
		goto out_free;
	}
	if (db_clustered(db) &&
	    ((rc = fs_ino_blocks_start(fs)) || (rc = fs_owner_reconcile(fs))))
		goto out_workers;
	/* The strict path's threads run their files through the syncer:
	 * started after it, stopped before it. */
	rc = fs_syncer_start(fs);
	if (rc)
		goto out_workers;
	rc = fs_strict_start(fs);
	if (rc) {
		fs_syncer_stop(fs);
		goto out_workers;
	}
	atomic_store(&fs->running, true);
	if (db_clustered(db)) {
		/* Nodes dead before this one started, then each that dies. */
		db_on_node_down(db, fs_owner_on_node_down, fs);
		fs_owner_sweep_kick(fs);
	}
	*out = fs;
	return 0;

out_workers:
	fs_async_stop(fs);
	fs_workers_stop(fs);
	fs_workers_free(fs);
out_free:
	pthread_mutex_destroy(&fs->ino_lock);
	pthread_mutex_destroy(&fs->fail_lock);
	fs_pending_meter_free(fs);
	pthread_mutex_destroy(&fs->relist_lock);
	pthread_mutex_destroy(&fs->listing_lock);
	free(fs);
	return rc;
}

/* See fs.h.  Queued worker jobs (listings, deferred writes) finish first. */
void fs_close(struct fs *fs, bool flush)
{
	if (!fs)
		return;
	/* No new jobs from the follower (messages, nodes down) from here. */
	atomic_store(&fs->closing, true);
	db_on_node_down(fs->db, NULL, fs);
	fs_workers_stop(fs);
	if (flush) {
		char why[FS_KEY_TEXT_MAX + 200];

		if (fs_flush_wait(fs, FS_CLOSE_FLUSH_MS, NULL, why,
				  sizeof(why)))
			log_warn("fs: the last upload before stopping gave "
				 "up: %s; those changes stay in the journal "
				 "and go up after the next start",
				 why);
	}
	fs_async_stop(fs); /* the deferred flushes made */
	fs_strict_stop(fs);
	fs_syncer_stop(fs);
	/* No other node's change reaches the hooks of a freed fs. */
	db_stop(fs->db);
	/* A removal answered a moment ago may still recycle its cache file
	 * (ops_remove.c): the cache and fs stay until it has. */
	while (atomic_load(&fs->after_answer))
		usleep(100);
	fs_workers_free(fs);
	fs_fail_free(fs);
	pthread_mutex_destroy(&fs->ino_lock);
	pthread_mutex_destroy(&fs->fail_lock);
	fs_pending_meter_free(fs);
	pthread_mutex_destroy(&fs->relist_lock);
	pthread_mutex_destroy(&fs->listing_lock);
	free(fs);
}

int fs_migrate(struct db *db, const struct db_cluster_opts *o, const void *key,
	       size_t klen, db_progress_fn progress, void *ctx)
{
	struct fs fs = { .db = db };
	uint64_t next = FS_ROOT_INO + 1;
	int rc = fs_tables_open(&fs, &fs_inode_share);

	if (!rc)
		rc = fs_meta_next_ino(&fs, &next);
	return rc ? rc : db_migrate(db, o, key, klen, next, progress, ctx);
}
