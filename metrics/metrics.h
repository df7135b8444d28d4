/*
 * metrics/metrics.h - counters and latency histograms of the whole
 * gateway, rendered in the Prometheus text format (version 0.0.4).
 *
 * Below every other room, like common/log.h: the hot paths of rpc/,
 * nfsd/, cache/ and s3/ bump counters with one call and no context
 * argument.  Process-wide by nature (as the log is): each thread writes
 * only its own shard (allocated on its first bump), with relaxed atomic
 * stores and no lock; a scrape sums the shards.  A thread's shard is
 * folded into a retired total when the thread exits, so counts never go
 * backwards.  Gauges that are cheaper to compute on demand (cache size,
 * dirty bytes, clients) come from collectors that main registers.
 */
#ifndef MAPFS_METRICS_H
#define MAPFS_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Every counter: id, metric name, label (or ""), help.  Rows of one name
 * must be adjacent: HELP and TYPE are written once per name.
 */
#define METRICS_COUNTERS(X)                                                    \
	X(CONN_ACCEPTED, "mapfs_connections_accepted_total", "",               \
	  "Client TCP connections accepted")                                   \
	X(CONN_CLOSED, "mapfs_connections_closed_total", "",                   \
	  "Client TCP connections closed")                                     \
	X(CONN_REFUSED, "mapfs_connections_refused_total", "",                 \
	  "Connections closed at once over --max-connections or a host's "     \
	  "limit")                                                             \
	X(LOG_DROPPED, "mapfs_log_lines_dropped_total", "",                    \
	  "Log lines a remote host caused, dropped by the per-host rate "      \
	  "limit")                                                             \
	X(KEYS_SKIPPED, "mapfs_store_keys_skipped_total", "",                  \
	  "Listed object keys that no file name can stand for (NUL, empty, . " \
	  "or .. segment, too long, the store's own)")                         \
	X(STALE_ANSWERS, "mapfs_stale_answers_total", "",                      \
	  "Directory revalidations answered from the namespace because the "   \
	  "store did not answer")                                              \
	X(OUTAGE_NAMES, "mapfs_outage_names_total", "",                        \
	  "Names made (CREATE, MKDIR, SYMLINK, MKNOD, LINK, RENAME) while "    \
	  "the store was away: each goes up conditionally once it is back")    \
	X(CONFLICTS_ASIDE, "mapfs_conflicts_total", "outcome=\"aside\"",       \
	  "Uploads refused because someone else wrote or deleted the key: "    \
	  "ours moved to a .conflict- sibling, uploaded again, or (parts "     \
	  "never cached) dropped")                                             \
	X(CONFLICTS_REUPLOADED, "mapfs_conflicts_total",                       \
	  "outcome=\"uploaded_again\"", "")                                    \
	X(CONFLICTS_LOST, "mapfs_conflicts_total", "outcome=\"theirs_won\"",   \
	  "")                                                                  \
	X(EVENTS_TAKEN, "mapfs_events_total", "result=\"taken\"",              \
	  "S3 event records received (--events): taken (this store's "         \
	  "objects: their directory listed again), ignored (other buckets or " \
	  "kinds), refused (requests: no secret, malformed, too big, over "    \
	  "the rate)")                                                         \
	X(EVENTS_IGNORED, "mapfs_events_total", "result=\"ignored\"", "")      \
	X(EVENTS_REFUSED, "mapfs_events_total", "result=\"refused\"", "")      \
	X(UPLOAD_FAILURES, "mapfs_upload_failures_total", "",                  \
	  "Uploads that failed with an error retrying cannot fix (the file "   \
	  "stays dirty and is retried with backoff)")                          \
	X(EARLY_PARTS, "mapfs_upload_early_parts_total", "state=\"sent\"",     \
	  "Multipart parts of files still being written, sent before the "     \
	  "file was due (sent), and those a later write or truncate made "     \
	  "stale, sent again (stale)")                                         \
	X(EARLY_STALE, "mapfs_upload_early_parts_total", "state=\"stale\"",    \
	  "")                                                                  \
	X(NFS_READ_BYTES, "mapfs_nfs_bytes_total", "dir=\"read\"",             \
	  "File data moved by NFS READ and WRITE")                             \
	X(NFS_WRITE_BYTES, "mapfs_nfs_bytes_total", "dir=\"write\"", "")       \
	X(NFS_JUKEBOX, "mapfs_nfs_jukebox_total", "",                          \
	  "NFS replies with NFS3ERR_JUKEBOX (store slow or down: retry)")      \
	X(DB_COMMITS, "mapfs_db_commits_total", "",                            \
	  "LMDB write transactions committed (each one group, made durable)")  \
	X(DB_CHANGES, "mapfs_db_changes_total", "",                            \
	  "Namespace and journal changes applied in those transactions")       \
	X(DB_LINGER_EXPIRED, "mapfs_db_linger_expired_total", "",              \
	  "Waits of the writer for the changes answered clients send next "    \
	  "that ended without them (each at most 150 us alone, 1 ms in a "     \
	  "cluster)")                                                          \
	X(FLUSH_FILE, "mapfs_disk_flushes_total", "kind=\"file\"",             \
	  "Flushes asked of the disk, by kind: a cache file's fdatasync "      \
	  "(file), a cache directory's fsync (dir), the database's (db: a "    \
	  "commit's record in the log, a checkpoint's two)")                   \
	X(FLUSH_DIR, "mapfs_disk_flushes_total", "kind=\"dir\"", "")           \
	X(FLUSH_DB, "mapfs_disk_flushes_total", "kind=\"db\"", "")             \
	X(PENDING_DONE, "mapfs_store_pending_done_total", "",                  \
	  "Queued store deletes and copies (renames, links, removals) that "   \
	  "ran: its rate is the queue's")                                      \
	X(DB_LOG_FAILURES, "mapfs_db_log_failures_total", "",                  \
	  "Checkpoints of the database's log that failed (each gives the "     \
	  "log up: LMDB flushes every commit until a restart)")                \
	X(CLUSTER_COMMITS, "mapfs_cluster_commits_total", "",                  \
	  "Groups of changes committed in the cluster database")               \
	X(CLUSTER_COMMIT_US, "mapfs_cluster_commit_microseconds_total", "",    \
	  "Time those commits took, round trip included")                      \
	X(CLUSTER_STALE, "mapfs_cluster_commits_stale_total", "",              \
	  "Commits refused as stale (another node changed what they read)")    \
	X(CACHE_HITS, "mapfs_cache_reads_total", "result=\"hit\"",             \
	  "Cache reads, by whether the data was local")                        \
	X(CACHE_MISSES, "mapfs_cache_reads_total", "result=\"miss\"", "")      \
	X(CACHE_FETCHES, "mapfs_cache_fetches_total", "",                      \
	  "Objects downloaded into the cache")                                 \
	X(CACHE_FETCH_BYTES, "mapfs_cache_fetch_bytes_total", "",              \
	  "Bytes downloaded into the cache")                                   \
	X(FETCH_QUEUE_US, "mapfs_cache_fetch_microseconds_total",              \
	  "stage=\"queue\"",                                                   \
	  "Time of the cache's GETs, by stage, summed over GETs: waiting for " \
	  "a fetch worker (queue), for the store's first byte (wait), "        \
	  "receiving the rest (stream), writing it into cache files (land)")   \
	X(FETCH_WAIT_US, "mapfs_cache_fetch_microseconds_total",               \
	  "stage=\"wait\"", "")                                                \
	X(FETCH_STREAM_US, "mapfs_cache_fetch_microseconds_total",             \
	  "stage=\"stream\"", "")                                              \
	X(FETCH_LAND_US, "mapfs_cache_fetch_microseconds_total",               \
	  "stage=\"land\"", "")                                                \
	X(CACHE_EVICTIONS, "mapfs_cache_evictions_total", "",                  \
	  "Cache files dropped (evicted, invalidated or removed)")             \
	X(STORE_REQ_GET, "mapfs_store_requests_total", "op=\"get\"",           \
	  "Object store (S3) operations, by kind")                             \
	X(STORE_REQ_HEAD, "mapfs_store_requests_total", "op=\"head\"", "")     \
	X(STORE_REQ_PUT, "mapfs_store_requests_total", "op=\"put\"", "")       \
	X(STORE_REQ_MPU, "mapfs_store_requests_total", "op=\"multipart\"", "") \
	X(STORE_REQ_LIST, "mapfs_store_requests_total", "op=\"list\"", "")     \
	X(STORE_REQ_COPY, "mapfs_store_requests_total", "op=\"copy\"", "")     \
	X(STORE_REQ_DELETE, "mapfs_store_requests_total", "op=\"delete\"", "") \
	X(STORE_ERR_GET, "mapfs_store_errors_total", "op=\"get\"",             \
	  "Object store operations that failed after their retries, by kind")  \
	X(STORE_ERR_HEAD, "mapfs_store_errors_total", "op=\"head\"", "")       \
	X(STORE_ERR_PUT, "mapfs_store_errors_total", "op=\"put\"", "")         \
	X(STORE_ERR_MPU, "mapfs_store_errors_total", "op=\"multipart\"", "")   \
	X(STORE_ERR_LIST, "mapfs_store_errors_total", "op=\"list\"", "")       \
	X(STORE_ERR_COPY, "mapfs_store_errors_total", "op=\"copy\"", "")       \
	X(STORE_ERR_DELETE, "mapfs_store_errors_total", "op=\"delete\"", "")   \
	X(STORE_BYTES_GET, "mapfs_store_bytes_total", "op=\"get\"",            \
	  "Object data moved to and from the store, by kind")                  \
	X(STORE_BYTES_PUT, "mapfs_store_bytes_total", "op=\"put\"", "")        \
	X(STORE_BYTES_MPU, "mapfs_store_bytes_total", "op=\"multipart\"", "")  \
	X(S3_TRIES_GET, "mapfs_s3_http_requests_total", "method=\"GET\"",      \
	  "HTTP requests sent to S3, retries included, by method")             \
	X(S3_TRIES_HEAD, "mapfs_s3_http_requests_total", "method=\"HEAD\"",    \
	  "")                                                                  \
	X(S3_TRIES_PUT, "mapfs_s3_http_requests_total", "method=\"PUT\"", "")  \
	X(S3_TRIES_POST, "mapfs_s3_http_requests_total", "method=\"POST\"",    \
	  "")                                                                  \
	X(S3_TRIES_DELETE, "mapfs_s3_http_requests_total",                     \
	  "method=\"DELETE\"", "")                                             \
	X(S3_RETRY_GET, "mapfs_s3_retries_total", "method=\"GET\"",            \
	  "S3 requests sent again after a retryable error, by method")         \
	X(S3_RETRY_HEAD, "mapfs_s3_retries_total", "method=\"HEAD\"", "")      \
	X(S3_RETRY_PUT, "mapfs_s3_retries_total", "method=\"PUT\"", "")        \
	X(S3_RETRY_POST, "mapfs_s3_retries_total", "method=\"POST\"", "")      \
	X(S3_RETRY_DELETE, "mapfs_s3_retries_total", "method=\"DELETE\"", "")

#define METRICS_ENUM(id, name, label, help) MET_##id,
enum metrics_counter { METRICS_COUNTERS(METRICS_ENUM) MET_NCOUNTERS };
#undef METRICS_ENUM

/*
 * Every histogram of durations other than the RPC ones: id, metric name
 * (without _seconds_bucket...), help.  Buckets from 100 us to 10 s, as
 * the RPC histograms'.
 */
#define METRICS_HISTOGRAMS(X)                                              \
	X(CLUSTER_APPLY_LAG, "mapfs_cluster_apply_lag_seconds",            \
	  "Commits of the other gateways of the cluster: time from the "   \
	  "commit's start in the database to its apply in this gateway's " \
	  "replica (the database's clock, then this gateway's)")

#define METRICS_HENUM(id, name, help) MET_H_##id,
enum metrics_hist { METRICS_HISTOGRAMS(METRICS_HENUM) MET_NHISTS };
#undef METRICS_HENUM

/* Store operation kinds, in the order of the STORE_REQ_* rows above. */
enum metrics_store_op {
	MET_OP_GET,
	MET_OP_HEAD,
	MET_OP_PUT,
	MET_OP_MPU,
	MET_OP_LIST,
	MET_OP_COPY,
	MET_OP_DELETE,
	MET_NOPS
};

/* Room for RPC procedures (all programs together) in the histograms. */
#define METRICS_PROC_SLOTS 96

/* Add n to counter id, on the calling thread's shard.  Never blocks. */
void metrics_add(enum metrics_counter id, uint64_t n);

static inline void metrics_inc(enum metrics_counter id)
{
	metrics_add(id, 1);
}

/*
 * One finished store operation: its request count, its error count if
 * err < 0 (but not -ENOENT: a key that is not there is an answer), and
 * bytes of object data moved (get, put and multipart kinds only).
 */
void metrics_store_op(enum metrics_store_op op, int err, uint64_t bytes);

/* One observation of ns nanoseconds in histogram id.  Never blocks. */
void metrics_observe(enum metrics_hist id, uint64_t ns);

/* One HTTP attempt to S3 with method ("GET", ...); retry if not the first. */
void metrics_s3_try(const char *method, bool retry);

/*
 * Name procedure proc of RPC program prog/vers for the per-procedure
 * counts and latency histograms (labels program and proc; the strings
 * must live as long as the process).  Repeats are ignored; past
 * METRICS_PROC_SLOTS procedures the rest are not measured.  Call before
 * the loops start: metrics_rpc_call() reads the table without a lock.
 */
void metrics_rpc_register(uint32_t prog, uint32_t vers, uint32_t proc,
			  const char *prog_name, const char *proc_name);

/* A call of prog/vers/proc was answered after ns nanoseconds. */
void metrics_rpc_call(uint32_t prog, uint32_t vers, uint32_t proc, uint64_t ns);

/*
 * fn(ctx, program, procedure, calls, their summed nanoseconds) for each
 * measured procedure, summed over all threads now (ctl stats).  0 or
 * -ENOMEM.
 */
typedef void (*metrics_rpc_fn)(void *ctx, const char *prog, const char *proc,
			       uint64_t calls, uint64_t sum_ns);
int metrics_rpc_each(metrics_rpc_fn fn, void *ctx);

/*
 * The live view's figures (ctl stats), summed over all threads now: RPC
 * calls and their summed nanoseconds by kind, cache reads, store bytes
 * both ways.  In a cluster each gateway also publishes its own, as text,
 * with its lease (db/).
 */
enum metrics_kind {
	METRICS_K_READ,   /* NFS READ */
	METRICS_K_WRITE,  /* NFS WRITE, COMMIT */
	METRICS_K_META,   /* the other NFS calls that change nothing */
	METRICS_K_CHANGE, /* SETATTR and the calls that make or drop names */
	METRICS_K_LOCK,   /* NLM, NSM */
	METRICS_K_MOUNT,  /* MOUNT */
	METRICS_NKINDS
};
extern const char *const metrics_kind_names[METRICS_NKINDS];

struct metrics_live {
	uint64_t t_ms; /* monotonic, of this process */
	uint64_t calls[METRICS_NKINDS], ns[METRICS_NKINDS];
	uint64_t cache_hits, cache_misses, store_in, store_out;
};

/* Fill *out now.  0 or -ENOMEM. */
int metrics_live(struct metrics_live *out);
/* As one line of numbers (cap >= METRICS_LIVE_TEXT), and back: 0 or
 * -EINVAL. */
#define METRICS_LIVE_TEXT 400
void metrics_live_format(const struct metrics_live *l, char *buf, size_t cap);
int metrics_live_parse(const char *text, struct metrics_live *out);

/* Monotonic nanoseconds, for latencies. */
uint64_t metrics_now_ns(void);

/* Output of a scrape: a growing text buffer (see metrics_render). */
struct metrics_buf {
	char *p;
	size_t len, cap;
	bool oom; /* an append failed: the text is incomplete */
};

/* Append printf-formatted text to b (sets b->oom on failure). */
void metrics_buf_printf(struct metrics_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Append one gauge sample, with HELP and TYPE lines when help is not
 * NULL (pass NULL for further samples of the same name).  labels is ""
 * or e.g. "state=\"dirty\"".
 */
void metrics_buf_gauge(struct metrics_buf *b, const char *name,
		       const char *help, const char *labels, double value);

/* A collector appends gauges to the scrape; runs on the scraping thread. */
typedef void (*metrics_collect_fn)(void *arg, struct metrics_buf *b);

/*
 * Register fn(arg) to run on every render, in registration order (at
 * most 8).  0 or -ENOSPC.  metrics_collectors_clear() removes them all
 * and returns once no render is running one (call before freeing arg).
 */
int metrics_collector_add(metrics_collect_fn fn, void *arg);
void metrics_collectors_clear(void);

/*
 * The whole exposition: counters (summed over shards), the RPC
 * histograms, then the collectors' gauges, into *b (reset first; the
 * caller frees b->p).  0, or -ENOMEM with b->p freed.
 */
int metrics_render(struct metrics_buf *b);

/*
 * Sum of counter id over all shards now (tests, ctl status).  A count
 * bumped on another thread may show a little late, never torn.
 */
uint64_t metrics_get(enum metrics_counter id);

#endif
