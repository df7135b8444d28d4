/*
 * tests/e2e/harness.h - end-to-end test harness: a real mapfs-gw process
 * driven by the real libnfs client.
 *
 * A gateway runs in a fresh temp dir (/tmp/mapfs-e2e-XXXXXX) that holds
 * store/ (the file:// object store), state/ (LMDB, handle key, journal) and
 * gw.log (the gateway's stderr, appended over restarts and printed when a
 * start or stop fails).  The binary is $MAPFS_GW (set by ctest).
 *
 * Two clients:
 *  - e2e_nfs_mount(): a libnfs high-level context mounted on the export,
 *    with the gateway's ports given as URL parameters (no rpcbind);
 *  - struct e2e_rpc: a raw RPC connection with synchronous wrappers around
 *    libnfs's rpc_nfs3_*_async / rpc_mount3_*_async calls.  Results are deep
 *    copies owned by the connection (freed by e2e_rpc_close), so tests can
 *    inspect exact nfsstat3 values, wcc_data and post_op_attr at leisure.
 *
 * The object store behind the gateway comes from MAPFS_E2E_STORE:
 *  - "file" (the default): file:// under the temp dir;
 *  - "rgw" or "s3rver": a real S3 server on 127.0.0.1, started once per
 *    test process by tests/s3/rgw.sh or tests/s3/s3rver.sh ($MAPFS_S3_SCRIPTS,
 *    set by ctest) and stopped at exit (or by the script's watchdog if the
 *    process dies); every gateway gets its own key prefix in its bucket;
 *  - "s3": a server already running, described by the environment that
 *    those scripts print (MAPFS_S3_ENDPOINT, MAPFS_S3_BUCKET,
 *    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).
 * The gateway gets the credentials in its environment, with instance
 * metadata disabled, no AWS config files and no proxy: it talks to
 * 127.0.0.1 only.  MAPFS_E2E_GW_ARGS adds options to every gateway (the
 * --cache-direct pass).
 *
 * Every function prints a line saying what went wrong on failure.
 */
#ifndef MAPFS_E2E_HARNESS_H
#define MAPFS_E2E_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <CUnit/CUnit.h>
#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-mount.h>
#include <nfsc/libnfs-raw-nfs.h>

#define E2E_EXPORT "/mapfs"

/*
 * Assertions that say what was expected and what came back.  E2E_CHECK
 * records a failure and goes on; E2E_REQUIRE ends the test (CUnit fatal:
 * only in the test's own thread).  The message is printf-style.
 */
#define E2E_CHECK(cond, ...)                                                   \
	do {                                                                   \
		int ok_ = !!(cond);                                            \
		if (!ok_) {                                                    \
			fprintf(stderr, "  FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
		}                                                              \
		CU_ASSERT(ok_);                                                \
	} while (0)

#define E2E_REQUIRE(cond, ...)                                       \
	do {                                                         \
		int ok_ = !!(cond);                                  \
		if (!ok_) {                                          \
			fprintf(stderr, "  FATAL %s:%d: ", __FILE__, \
				__LINE__);                           \
			fprintf(stderr, __VA_ARGS__);                \
			fputc('\n', stderr);                         \
		}                                                    \
		CU_ASSERT_FATAL(ok_);                                \
	} while (0)

/* An nfsstat3 check: "WHAT: got NFS3ERR_X, want NFS3_OK". */
#define E2E_STATUS(what, got, want)                                \
	do {                                                       \
		int g_ = (int)(got), w_ = (int)(want);             \
		E2E_CHECK(g_ == w_, "%s: got %s, want %s", (what), \
			  e2e_nfsstat(g_), e2e_nfsstat(w_));       \
	} while (0)

/* A raw call that must get a reply (RPC-level failure ends the test). */
#define E2E_RPC(r, expr) \
	E2E_REQUIRE((expr) == 0, "%s: %s", #expr, e2e_rpc_error(r))
#define E2E_PATH_MAX 512

/* ------------------------------------------------------------------ */
/* The gateway process                                                 */

/* Options of e2e_gw_start_opts; zero means the gateway's default. */
struct e2e_gw_opts {
	int threads;              /* default 2 */
	const char *dir_ttl;      /* --dir-ttl SECONDS, if not NULL */
	const char *upload_delay; /* --upload-delay SECONDS, if not NULL */
	const char *s3_secret;    /* S3 only: this secret instead of the real */
	const char *s3_key_id;    /* S3 only: this access key instead */
	const char *const *extra_args; /* more options, NULL-terminated */
	const char *s3_endpoint; /* S3 only: talk here (a proxy) instead */
	const char *s3_prefix;   /* S3 only: this key prefix, not a new one
				   * (a second gateway on another's bucket) */
	const char *state_dir;   /* an existing empty dir for state/ (e.g. a
				   * small tmpfs) instead of one in the temp
				   * dir; the caller removes it */
	/* A cluster: the namespace in PostgreSQL at meta (a libpq URI;
	 * NULL: LMDB, or a database of its own when MAPFS_E2E_META=pg),
	 * this node's name, and the store of another gateway to share
	 * (file store: its directory; S3: its prefix). */
	const char *meta;
	const char *node;
	const struct e2e_gw *store_of;
};

struct e2e_gw {
	char dir[64];             /* the temp dir: store/, state/, gw.log */
	char meta[256];           /* --meta URI, "" for LMDB */
	char store[E2E_PATH_MAX]; /* file:// root, or "s3://BUCKET/PREFIX" */
	char s3_prefix[128];      /* S3: this gateway's key prefix, no '/' */
	struct e2e_gw_opts opts;
	int exit_status; /* exit status if it exited before ready, else -1 */
	char state[E2E_PATH_MAX];
	char log[E2E_PATH_MAX];
	pid_t pid;  /* 0 when not running */
	int out_fd; /* read end of the child's stdout, or -1 */
	int nfs_port;
	int mount_port;
	int threads;
	int starts;          /* how many times it was started */
	size_t extra_stdout; /* bytes seen on stdout after the ready line */
};

/*
 * Create a temp dir and start a gateway with --threads threads.  Waits up
 * to 30 s for the ready line.  Returns 0, or -1 (reason and log printed).
 */
int e2e_gw_start(struct e2e_gw *gw, int threads);

/*
 * The same with options.  When the gateway exits before its ready line,
 * -1 is returned and gw->exit_status holds its exit status (128+sig if it
 * died of a signal); its stderr is in gw->log.
 */
int e2e_gw_start_opts(struct e2e_gw *gw, const struct e2e_gw_opts *o);

/*
 * e2e_gw_start() with more command-line arguments (NULL-terminated),
 * e.g. { "--exports", path, NULL }.  args must outlive gw: restarts pass
 * them again.
 */
int e2e_gw_start_args(struct e2e_gw *gw, int threads, const char *const *args);

/* `mapfs-gw ctl CMD` of gw (its state's socket): the output into buf
 * (cap bytes, NUL-terminated); 0, or -1 if ctl failed. */
int e2e_ctl(const struct e2e_gw *gw, const char *cmd, char *buf, size_t cap);

/* Start again on the same store and state (after stop or kill9). */
int e2e_gw_restart(struct e2e_gw *gw);

/*
 * SIGTERM and wait up to 30 s.  Returns the exit status (0..255), 128+sig
 * if it died of a signal, or -1 if it did not exit in time (then it is
 * killed with SIGKILL).  Prints the log unless the status is 0 and no
 * CUnit check has failed so far.
 */
int e2e_gw_stop(struct e2e_gw *gw);

/* SIGKILL and reap.  Returns 0 or -1. */
int e2e_gw_kill9(struct e2e_gw *gw);

/* 1 if the process is still running, 0 if it exited (it is reaped). */
int e2e_gw_alive(struct e2e_gw *gw);

/*
 * Lines of the log file at path that contain needle (at_start: that
 * begin with it); -1 if it cannot be read.
 */
int e2e_log_count(const char *path, const char *needle, bool at_start);

/* How many lines of the gateway's log (all runs) contain needle; -1 if
 * the log cannot be read. */
int e2e_gw_log_count(const struct e2e_gw *gw, const char *needle);

/* Print the gateway's log on stderr (framed, with the path). */
void e2e_gw_dump_log(const struct e2e_gw *gw);

/* The gateway's log so far, NUL-terminated, malloc'd (caller frees). */
char *e2e_gw_log_read(const struct e2e_gw *gw);

/*
 * Kill the gateway if it runs and remove the temp dir (kept when the
 * environment has E2E_KEEP=1).
 */
void e2e_gw_cleanup(struct e2e_gw *gw);

/* ------------------------------------------------------------------ */
/* PostgreSQL (the cluster engine)                                     */

/*
 * Whether gateways keep their namespace in PostgreSQL (MAPFS_E2E_META=pg:
 * the e2e suites run again on the cluster engine, one node each).
 */
int e2e_meta_is_pg(void);

/*
 * The test's PostgreSQL (started at the first call, by tests/pg/pg.sh,
 * stopped at exit): a new empty database, its URI into url.  0 or -1.
 */
int e2e_pg_createdb(char *url, size_t cap);

/* Stop PostgreSQL at once (a crash) / start it again.  0 or -1. */
int e2e_pg_down(void);
int e2e_pg_up(void);

/*
 * A second PostgreSQL of its own: a primary with a synchronous standby
 * (tests/pg/pg.sh standby), both stopped at exit.  url gets the URI
 * naming both with target_session_attrs=read-write, as a cluster in
 * production would.  One pair at a time: a second start stops the
 * first.  0 or -1.
 */
int e2e_pg_pair_start(char *url, size_t cap);
/* Kill the pair's primary (-m immediate) and promote the standby. */
int e2e_pg_pair_failover(void);
/* The killed primary comes back as the new primary's synchronous
 * standby, on its own port (a fresh base backup): the pair can fail
 * over again.  0 or -1. */
int e2e_pg_pair_rejoin(void);

/* ------------------------------------------------------------------ */
/* The object store backend                                            */

enum e2e_backend {
	E2E_BACKEND_FILE,
	E2E_BACKEND_RGW,
	E2E_BACKEND_S3RVER,
	E2E_BACKEND_S3
};

/* This process's backend (MAPFS_E2E_STORE); an unknown name aborts. */
enum e2e_backend e2e_backend(void);
/* "file", "rgw", "s3rver" or "s3". */
const char *e2e_backend_name(void);
/* 1 for every S3 backend. */
int e2e_backend_is_s3(void);

struct e2e_s3 {
	char kind[16];          /* rgw, s3rver, or s3 for an outside one */
	char dir[E2E_PATH_MAX]; /* the server's dir (empty: not ours) */
	char endpoint[128];     /* http://127.0.0.1:PORT */
	char bucket[64];
	char key_id[128];
	char secret[128];
	int ours; /* started (and stopped) by this process */
	int down; /* stopped by e2e_s3_down */
};

/*
 * The S3 server of this process, started on first use (S3 backends only;
 * NULL for file:// or when it cannot start, the reason printed).  Stopped
 * and wiped at exit (E2E_KEEP=1: stopped, its dir kept).
 */
const struct e2e_s3 *e2e_s3_server(void);

/*
 * Take the server down as a crash would (s3rver: SIGKILL; radosgw: a
 * clean stop, since its memstore keeps data only across those) and bring
 * it back on the same port with its data.  Only for servers this process
 * started.  0 or -1.
 */
int e2e_s3_down(void);
int e2e_s3_up(void);

/* A reply from the S3 API. */
struct e2e_s3_resp {
	int code;      /* HTTP status, 0 if curl failed */
	char *headers; /* the response headers, raw */
	char *body;    /* NUL-terminated (also for binary) */
	size_t len;
};

/*
 * One SigV4-signed request with curl --aws-sigv4 to the server, on
 * "/BUCKET/KEY" (key percent-encoded here; NULL means the bucket).  query
 * is appended after '?' as given: it must be canonical (sorted,
 * percent-encoded; curl signs it as written).  body (len bytes) is sent for
 * PUT; headers is a NULL-terminated list of "Name: value" or NULL.  Returns
 * 0 when an HTTP answer came (any status), -1 if curl could not run.
 * Free resp with e2e_s3_resp_free.
 */
int e2e_s3_request(const char *method, const char *key, const char *query,
		   const void *body, size_t len, const char *const *headers,
		   struct e2e_s3_resp *resp);
void e2e_s3_resp_free(struct e2e_s3_resp *resp);

/*
 * PUT body under each of keys[0..n) (one curl, one connection): how many
 * answered 200, or -1 if curl could not run.
 */
int e2e_s3_put_many(const char *const *keys, int n, const char *body);

/* The value of header name (case-insensitive) into out; 0 or -1. */
int e2e_s3_header(const struct e2e_s3_resp *resp, const char *name, char *out,
		  size_t cap);

/* The full key of path (relative to the export root) under gw's prefix. */
void e2e_s3_key(const struct e2e_gw *gw, const char *path, char *out,
		size_t cap);

/*
 * A ListObjectsV2 of the keys of gw's store that begin with path (up to
 * 1,000; the query canonical, as radosgw checks its signature) into
 * resp (free it with e2e_s3_resp_free).  0 or -1, as e2e_s3_request.
 */
int e2e_s3_list(const struct e2e_gw *gw, const char *path,
		struct e2e_s3_resp *resp);

/*
 * Objects of gw's store (not directory markers) whose keys begin with
 * path (a namespace path, "dir/" for what is below dir): the file
 * store's files, or an S3 listing (up to 1,000).  -1 if it cannot tell.
 */
int e2e_store_count(const struct e2e_gw *gw, const char *path);

/* ------------------------------------------------------------------ */
/* libnfs high-level client                                            */

/*
 * A new libnfs context mounted on E2E_EXPORT through the gateway's ports
 * (nfsport=/mountport= URL parameters, auto-reconnect off).  NULL on
 * failure.  Free with nfs_destroy_context().
 */
struct nfs_context *e2e_nfs_mount(const struct e2e_gw *gw);

/* ------------------------------------------------------------------ */
/* Raw RPC client                                                      */

struct e2e_rpc;

/*
 * A TCP connection to 127.0.0.1:port for program/version (NFS_PROGRAM
 * NFS_V3 or MOUNT_PROGRAM MOUNT_V3), AUTH_SYS as the current user.
 * NULL on failure.
 */
struct e2e_rpc *e2e_rpc_open(int port, int program, int version);
void e2e_rpc_close(struct e2e_rpc *r);

/*
 * e2e_rpc_open(), but the connection comes from source address src
 * (e.g. "127.0.0.2") and source port src_port: 0 for any unprivileged
 * port, -1 for any privileged one (< 1024, root only).  libnfs cannot
 * bind, so it connects, and the socket under it is swapped for ours.
 */
struct e2e_rpc *e2e_rpc_open_from(const char *src, int src_port, int port,
				  int program, int version);

/* The last error of a call that returned -1 (valid until the next call). */
const char *e2e_rpc_error(const struct e2e_rpc *r);

/* The underlying libnfs context (for calls not wrapped here). */
struct rpc_context *e2e_rpc_ctx(struct e2e_rpc *r);

/*
 * The synchronous calls.  Each returns 0 when a reply came back (the
 * decoded result, deep-copied into *res, lives until e2e_rpc_close), or -1
 * on an RPC-level failure (transport error, RPC reject, timeout of 30 s),
 * with the reason in e2e_rpc_error().  Exception: READ's data lives in a
 * buffer of r's that the next READ on r reuses.
 */
int e2e_nfs3_null(struct e2e_rpc *r);
int e2e_nfs3_getattr(struct e2e_rpc *r, const nfs_fh3 *fh, GETATTR3res *res);
int e2e_nfs3_setattr(struct e2e_rpc *r, SETATTR3args *a, SETATTR3res *res);
int e2e_nfs3_lookup(struct e2e_rpc *r, const nfs_fh3 *dir, const char *name,
		    LOOKUP3res *res);
int e2e_nfs3_access(struct e2e_rpc *r, const nfs_fh3 *fh, uint32_t access,
		    ACCESS3res *res);
int e2e_nfs3_readlink(struct e2e_rpc *r, const nfs_fh3 *fh, READLINK3res *res);
int e2e_nfs3_read(struct e2e_rpc *r, const nfs_fh3 *fh, uint64_t off,
		  uint32_t count, READ3res *res);
int e2e_nfs3_write(struct e2e_rpc *r, const nfs_fh3 *fh, uint64_t off,
		   const void *buf, uint32_t len, stable_how how,
		   WRITE3res *res);
int e2e_nfs3_create(struct e2e_rpc *r, CREATE3args *a, CREATE3res *res);
int e2e_nfs3_mkdir(struct e2e_rpc *r, MKDIR3args *a, MKDIR3res *res);
int e2e_nfs3_symlink(struct e2e_rpc *r, SYMLINK3args *a, SYMLINK3res *res);
int e2e_nfs3_mknod(struct e2e_rpc *r, MKNOD3args *a, MKNOD3res *res);
int e2e_nfs3_remove(struct e2e_rpc *r, const nfs_fh3 *dir, const char *name,
		    REMOVE3res *res);
int e2e_nfs3_rmdir(struct e2e_rpc *r, const nfs_fh3 *dir, const char *name,
		   RMDIR3res *res);
int e2e_nfs3_rename(struct e2e_rpc *r, const nfs_fh3 *fdir, const char *from,
		    const nfs_fh3 *tdir, const char *to, RENAME3res *res);
int e2e_nfs3_link(struct e2e_rpc *r, const nfs_fh3 *file, const nfs_fh3 *dir,
		  const char *name, LINK3res *res);
int e2e_nfs3_readdir(struct e2e_rpc *r, READDIR3args *a, READDIR3res *res);
int e2e_nfs3_readdirplus(struct e2e_rpc *r, READDIRPLUS3args *a,
			 READDIRPLUS3res *res);
int e2e_nfs3_fsstat(struct e2e_rpc *r, const nfs_fh3 *fh, FSSTAT3res *res);
int e2e_nfs3_fsinfo(struct e2e_rpc *r, const nfs_fh3 *fh, FSINFO3res *res);
int e2e_nfs3_pathconf(struct e2e_rpc *r, const nfs_fh3 *fh, PATHCONF3res *res);
int e2e_nfs3_commit(struct e2e_rpc *r, const nfs_fh3 *fh, uint64_t off,
		    uint32_t count, COMMIT3res *res);

int e2e_mnt3_null(struct e2e_rpc *r);
int e2e_mnt3_mnt(struct e2e_rpc *r, const char *path, mountres3 *res);
/* *list is NULL for an empty list. */
int e2e_mnt3_dump(struct e2e_rpc *r, mountlist *list);
int e2e_mnt3_umnt(struct e2e_rpc *r, const char *path);
int e2e_mnt3_umntall(struct e2e_rpc *r);
int e2e_mnt3_export(struct e2e_rpc *r, exports *list);

/*
 * MNT E2E_EXPORT on the gateway's mount port and return the root handle
 * (a copy owned by r).  0 or -1.
 */
int e2e_root_fh(struct e2e_rpc *r, const struct e2e_gw *gw, nfs_fh3 *root);

/*
 * CREATE (UNCHECKED, mode 0644) the files PREFIX00000 .. PREFIX(n-1) (five
 * digits) in dir with up to `window` calls in flight on r.  Returns 0 when
 * every one answered NFS3_OK, else -1 (the first failure printed).
 */
int e2e_create_many(struct e2e_rpc *r, const nfs_fh3 *dir, const char *prefix,
		    int n, int window);

/* A copy of fh owned by r (for handles that must outlive a result). */
nfs_fh3 e2e_fh_dup(struct e2e_rpc *r, const nfs_fh3 *fh);
int e2e_fh_equal(const nfs_fh3 *a, const nfs_fh3 *b);

/* Convenience: sattr3 with only a mode set, or nothing set. */
sattr3 e2e_sattr_mode(uint32_t mode);
sattr3 e2e_sattr_none(void);

/* Names of nfsstat3 / mountstat3 values for messages ("NFS3ERR_NOENT"). */
const char *e2e_nfsstat(int st);
const char *e2e_mntstat(int st);

/* ------------------------------------------------------------------ */
/* Checksums and data                                                  */

struct e2e_sha256 {
	uint32_t h[8];
	uint64_t len;
	uint8_t buf[64];
	size_t fill;
};

void e2e_sha256_init(struct e2e_sha256 *s);
void e2e_sha256_update(struct e2e_sha256 *s, const void *data, size_t len);
void e2e_sha256_final(struct e2e_sha256 *s, uint8_t out[32]);
/* One-shot, hex digest into hex[65]. */
void e2e_sha256_hex(const void *data, size_t len, char hex[65]);
void e2e_digest_hex(const uint8_t d[32], char hex[65]);

/* Deterministic pseudo-random bytes (xorshift64*) from a seed. */
void e2e_fill(void *buf, size_t len, uint64_t seed);
uint64_t e2e_rand(uint64_t *state);

/* Monotonic time in milliseconds. */
uint64_t e2e_now_ms(void);

/* A TCP port free on 127.0.0.1 now (for a listener a test asks the
 * gateway for); -1 if none could be had. */
int e2e_free_port(void);

/*
 * Standard main() body for the test executables: registers nothing itself;
 * runs the CUnit registry verbosely and returns non-zero if anything failed
 * (failures, or a registry/suite error).  E2E_ONLY=TEXT runs only the
 * tests whose names contain TEXT (a developer's shortcut).
 */
int e2e_run_cunit(void);

#endif
