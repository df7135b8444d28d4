/*
 * admin/admin.h - the local control socket (STATE/ctl.sock) and its
 * client, `mapfs-gw ctl CMD [PATH]`.
 *
 * Commands: status, flush [PATH], refresh PATH, warm PATH, evict PATH,
 * clients.  PATH is a path as clients see it (/mapfs/a/b, under
 * --export) or relative to the export root (a/b).
 *
 * Who may use it: the socket is mode 0600 in the 0700 state directory,
 * and every connection's peer is checked with SO_PEERCRED: only root or
 * the gateway's own uid is served.  Nothing from the socket reaches a
 * shell or a path outside the namespace: PATH is walked name by name
 * through fs_lookup().
 *
 * Wire format (one connection per command): the client sends one line,
 * "CMD[ PATH]\n".  The server answers with lines: "> TEXT" to print,
 * "progress FILES_DONE FILES_TOTAL BYTES_DONE BYTES_TOTAL FETCHED_BYTES
 * ELAPSED_MS" while warming, and last "ok" or "err MESSAGE".
 */
#ifndef MAPFS_ADMIN_H
#define MAPFS_ADMIN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "db/db.h"
#include "fs/fs.h"

struct db;
struct fs;
struct metrics_buf;
struct nfsd;
struct store;

/* What the commands act on and report; owned by main, outlives admin. */
struct admin_ctx {
	struct fs *fs;
	struct nfsd *nfsd;
	struct store *store;
	struct db *db;                           /* for the cluster's state */
	const struct sockaddr_storage *nfs_addr; /* where NFS listens */
	const char *export_path;                 /* --export, e.g. /mapfs */
	const char *store_url;
	const char *cache_dir; /* STATE/cache */
	uint64_t started_ms;   /* CLOCK_MONOTONIC, for the uptime */
};

/* What the process holds (resources.c): each comes back to its level
 * once the work is done. */
struct admin_resources {
	int fds;            /* open descriptors (-1: /proc unreadable) */
	uint64_t fds_max;   /* RLIMIT_NOFILE (0: none) */
	unsigned threads;   /* 0: /proc unreadable */
	uint64_t rss_bytes; /* resident memory */
	bool have_db;       /* db below is filled */
	struct db_usage db; /* LMDB's map, reader slots, the log */
};

/* Numbers for ctl status and the metrics gauges. */
struct admin_stats {
	uint64_t uptime_s;
	uint64_t mounts;
	int cache_err; /* of the cache walk; its fields are 0 then */
	uint64_t cache_bytes, cache_files;
	int dirty_err; /* of fs_dirty_stat(); the fields below are 0 then */
	uint64_t dirty_files, dirty_bytes, pending_ops;
	double pending_age_s, pending_rate; /* the queue's oldest, its pace */
	double upload_lag_s;
	uint64_t failing; /* keys whose store work fails for good */
	char failing_key[FS_KEY_TEXT_MAX]; /* the one failing longest */
	int failing_err;
	bool store_down; /* store_down(): served from the cache meanwhile */
	/* Backpressure: the cache's dirty bytes and --max-dirty (0: none). */
	uint64_t cache_dirty, dirty_limit;
	unsigned uploads; /* files going up now */
	/* In a cluster: the database answers, this node's lease holds, and
	 * how long ago its replica last caught up with the log. */
	bool clustered, cluster_up, lease_held;
	double replica_age_s;
	struct admin_resources res;
};

/* Fill *st now (walks the cache directory and the dirty inodes). */
void admin_stats_get(const struct admin_ctx *ctx, struct admin_stats *st);

/*
 * A metrics_collect_fn (arg: the struct admin_ctx): uptime, clients,
 * cache size, dirty files and bytes, queued store work, upload lag,
 * whether the store answers.
 */
void admin_metrics_collect(void *arg, struct metrics_buf *b);

struct admin;

/*
 * Listen on sock_path (a stale socket there is replaced; a live one is
 * -EADDRINUSE) and serve commands on threads of the server's own.
 * 0 or -errno.
 */
int admin_start(const char *sock_path, const struct admin_ctx *ctx,
		struct admin **out);

/*
 * Stop: no new commands; a running warm or evict stops at its next
 * file; waits for every command thread, removes the socket, frees.
 * NULL is a no-op.
 */
void admin_stop(struct admin *a);

/*
 * The control socket's protocol, shared with its client (daemon/ctl.c):
 * one command per line, each at most ADMIN_LINE_MAX bytes (a command and
 * a path of FS_PATH_MAX); answers are lines, the last "ok" or "err ...".
 */
#define ADMIN_LINE_MAX 4200

/* Send one line (fmt without the newline).  0 or -errno (peer gone). */
int admin_send(int fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Bytes on disk (st_blocks) and number of regular files under dir.  For
 * the cache: O(files), so callers call it on demand, not per request.
 * 0 or -errno.
 */
int admin_dir_usage(const char *dir, uint64_t *bytes, uint64_t *files);

#endif
