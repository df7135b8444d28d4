/*
 * admin/stats.c - the gateway's state in numbers, for ctl status and
 * the gauges of the metrics endpoint (computed on demand: a walk of the
 * cache directory and of the dirty inodes, never on the hot path).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin_int.h"
#include "db/db.h"
#include "fs/fs.h"
#include "metrics/metrics.h"
#include "nfsd/nfsd.h"
#include "s3/store.h"

void admin_stats_get(const struct admin_ctx *ctx, struct admin_stats *st)
{
	struct fs_dirty_stat ds;
	struct timespec now;

	memset(st, 0, sizeof(*st));
	admin_resources_get(ctx, &st->res);
	st->uptime_s = (metrics_now_ns() / 1000000u - ctx->started_ms) / 1000;
	pthread_mutex_lock(&ctx->nfsd->mounts_lock);
	for (struct nfsd_mount *m = ctx->nfsd->mounts; m; m = m->next)
		st->mounts++;
	pthread_mutex_unlock(&ctx->nfsd->mounts_lock);
	st->cache_err = admin_dir_usage(ctx->cache_dir, &st->cache_bytes,
					&st->cache_files);
	st->store_down = ctx->store && store_down(ctx->store);
	fs_dirty_room(ctx->fs, &st->cache_dirty, &st->dirty_limit);
	st->uploads = fs_uploads_in_flight(ctx->fs);
	if (ctx->db && db_clustered(ctx->db)) {
		st->clustered = true;
		st->cluster_up = db_cluster_up(ctx->db);
		st->lease_held = db_lease_held(ctx->db);
		st->replica_age_s =
			(double)db_cluster_replica_age_ms(ctx->db) / 1e3;
	}
	st->dirty_err = fs_dirty_stat(ctx->fs, &ds);
	if (st->dirty_err)
		return;
	st->dirty_files = ds.files;
	st->dirty_bytes = ds.bytes;
	st->pending_ops = ds.pending;
	st->pending_age_s = (double)ds.pending_age_ms / 1e3;
	st->pending_rate = ds.pending_rate;
	st->failing = ds.failing;
	memcpy(st->failing_key, ds.failing_key, sizeof(st->failing_key));
	st->failing_err = ds.failing_err;
	clock_gettime(CLOCK_REALTIME, &now);
	if (ds.oldest_ns) {
		int64_t lag = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec -
			      ds.oldest_ns;

		st->upload_lag_s = lag > 0 ? (double)lag / 1e9 : 0;
	}
	/* A queued copy or delete is a change not in the store either. */
	if (st->pending_age_s > st->upload_lag_s)
		st->upload_lag_s = st->pending_age_s;
}

/* The process's and the database's resources (resources.c). */
static void resources_gauges(struct metrics_buf *b,
			     const struct admin_resources *r)
{
	if (r->fds >= 0)
		metrics_buf_gauge(
			b, "mapfs_open_fds",
			"Descriptors the gateway holds open (client "
			"connections, cache files, store connections)",
			"", (double)r->fds);
	if (r->fds_max)
		metrics_buf_gauge(b, "mapfs_max_fds",
				  "The gateway's descriptor limit "
				  "(RLIMIT_NOFILE, LimitNOFILE= in the unit)",
				  "", (double)r->fds_max);
	if (r->threads)
		metrics_buf_gauge(b, "mapfs_threads", "The gateway's threads",
				  "", (double)r->threads);
	if (r->rss_bytes)
		metrics_buf_gauge(b, "mapfs_resident_memory_bytes",
				  "The gateway's resident memory (VmRSS)", "",
				  (double)r->rss_bytes);
	if (!r->have_db)
		return;
	metrics_buf_gauge(b, "mapfs_db_map_bytes",
			  "LMDB's map size (64 GiB): the most its file may "
			  "hold; past it changes fail with ENOSPC",
			  "", (double)r->db.map_bytes);
	metrics_buf_gauge(b, "mapfs_db_map_used_bytes",
			  "LMDB's pages in use, the file's high water", "",
			  (double)r->db.map_used_bytes);
	metrics_buf_gauge(b, "mapfs_db_readers",
			  "LMDB reader slots taken (one per thread that "
			  "reads); at mapfs_db_readers_max reads fail",
			  "", (double)r->db.readers);
	metrics_buf_gauge(b, "mapfs_db_readers_max", "LMDB's reader slots", "",
			  (double)r->db.readers_max);
	metrics_buf_gauge(b, "mapfs_db_log_on",
			  "1 while commits are made durable by the log "
			  "(STATE/db/wal, one flush each); 0: LMDB flushes "
			  "each (an unflushed cluster node, no room, or the "
			  "log given up: mapfs_db_log_failed)",
			  "", r->db.log_on ? 1 : 0);
	metrics_buf_gauge(b, "mapfs_db_log_failed",
			  "1 once the log was given up after an error (the "
			  "log says which): every commit costs two flushes "
			  "until a restart",
			  "", r->db.log_failed ? 1 : 0);
	metrics_buf_gauge(b, "mapfs_db_log_checkpoint_age_seconds",
			  "Since the log's last checkpoint (at most ~2 s "
			  "while commits come; it holds a snapshot, so "
			  "LMDB's file grows by the churn in between)",
			  "", (double)r->db.log_ckpt_age_ms / 1e3);
}

/* One gauge per async rule of the exports: export and client. */
static void async_gauges(const struct admin_ctx *ctx, struct metrics_buf *b)
{
	char *rules = nfsd_async_rules(ctx->nfsd), *line, *save = NULL;
	const char *help = "1 for each export and client the exports file "
			   "makes async: answered before on disk, durable "
			   "within --async-window";

	for (line = rules ? strtok_r(rules, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		char labels[600], *sp = strchr(line, ' ');

		if (!sp)
			continue;
		*sp = '\0';
		snprintf(labels, sizeof(labels),
			 "export=\"%.256s\",client=\"%.256s\"", line, sp + 1);
		metrics_buf_gauge(b, "mapfs_export_async", help, labels, 1);
		help = NULL;
	}
	free(rules);
}

void admin_metrics_collect(void *arg, struct metrics_buf *b)
{
	const struct admin_ctx *ctx = arg;
	struct admin_stats st;

	admin_stats_get(ctx, &st);
	async_gauges(ctx, b);
	metrics_buf_gauge(b, "mapfs_uptime_seconds",
			  "Seconds since the gateway started", "",
			  (double)st.uptime_s);
	metrics_buf_gauge(b, "mapfs_clients",
			  "Mounts in MOUNT's list (host, path)", "",
			  (double)st.mounts);
	if (!st.cache_err) {
		metrics_buf_gauge(b, "mapfs_cache_bytes",
				  "Disk bytes used by the cache directory", "",
				  (double)st.cache_bytes);
		metrics_buf_gauge(b, "mapfs_cache_files",
				  "Files in the cache directory", "",
				  (double)st.cache_files);
	}
	metrics_buf_gauge(b, "mapfs_store_up",
			  "1 while the store answers, 0 from the first request "
			  "it left unanswered (answers come from the cache, "
			  "changes wait) until it answers again",
			  "", st.store_down ? 0 : 1);
	metrics_buf_gauge(b, "mapfs_cache_dirty_bytes",
			  "Dirty data in the cache as the backpressure counts "
			  "it: past mapfs_dirty_limit_bytes WRITE and CREATE "
			  "answer JUKEBOX",
			  "", (double)st.cache_dirty);
	metrics_buf_gauge(b, "mapfs_uploads_in_flight",
			  "Files whose upload to the store is under way", "",
			  (double)st.uploads);
	metrics_buf_gauge(b, "mapfs_dirty_limit_bytes",
			  "--max-dirty (0: no limit)", "",
			  (double)st.dirty_limit);
	if (st.clustered) {
		metrics_buf_gauge(b, "mapfs_cluster_db_up",
				  "1 while the cluster's PostgreSQL answers "
				  "commits; 0: changes of the namespace answer "
				  "JUKEBOX",
				  "", st.cluster_up ? 1 : 0);
		metrics_buf_gauge(b, "mapfs_cluster_lease_held",
				  "1 while this gateway's lease surely holds; "
				  "0: others may take over what it owns, its "
				  "uploads wait",
				  "", st.lease_held ? 1 : 0);
		metrics_buf_gauge(b, "mapfs_cluster_replica_age_seconds",
				  "Since this gateway's replica last read the "
				  "cluster's log to its end (at least every "
				  "second when healthy)",
				  "", st.replica_age_s);
	}
	resources_gauges(b, &st.res);
	if (st.dirty_err)
		return;
	metrics_buf_gauge(
		b, "mapfs_dirty_files",
		"Files and directories with changes not yet in the store", "",
		(double)st.dirty_files);
	metrics_buf_gauge(
		b, "mapfs_dirty_bytes",
		"File data held only in the cache, waiting for upload", "",
		(double)st.dirty_bytes);
	metrics_buf_gauge(b, "mapfs_store_pending_ops",
			  "Store deletes and copies (renames) queued", "",
			  (double)st.pending_ops);
	metrics_buf_gauge(b, "mapfs_store_pending_oldest_seconds",
			  "Age of the oldest queued store delete or copy "
			  "(0: none); mapfs_store_pending_done_total's rate "
			  "is how fast the queue goes",
			  "", st.pending_age_s);
	metrics_buf_gauge(b, "mapfs_uploads_failing",
			  "Files (keys) whose store work keeps failing with an "
			  "error retrying cannot fix (see the log, ctl status)",
			  "", (double)st.failing);
	metrics_buf_gauge(b, "mapfs_upload_lag_seconds",
			  "Age of the oldest change not yet in the store: a "
			  "file's from its last write, or a queued copy or "
			  "delete's (renames, removals)",
			  "", st.upload_lag_s);
}
