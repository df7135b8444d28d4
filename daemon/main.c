/*
 * daemon/main.c - the mapfs-gw daemon: wires the rooms together.
 *
 * store (s3/) <- cache (cache/) <- namespace (fs/, over db/) <- NFS and
 * MOUNT programs (nfsd/, mountd/) <- transport (rpc/); beside them the
 * operator's side: the control socket (admin/), the metrics endpoint
 * (metrics/) and systemd's notification socket.  main owns every object
 * it creates and frees them in reverse order on SIGTERM/SIGINT.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "admin/admin.h"
#include "events/events.h"
#include "cache/cache.h"
#include "common/log.h"
#include "db/db.h"
#include "fs/fs.h"
#include "metrics/httpd.h"
#include "metrics/metrics.h"
#include "config.h"
#include "ctl.h"
#include "nfsd/nfsd.h"
#include "nlm/nlm.h"
#include "rpc/rpc.h"
#include "s3/store.h"

#define NFS_PROG 100003
#define NFS_VERS 3
#define MOUNT_PROG 100005
#define MOUNT_VERS 3
#define DB_MAPSIZE (64ull << 30) /* address space only; grows on disk */
#define STOP_TIMEOUT_MS 10000

struct gateway {
	struct config cfg;
	struct store *store;
	struct db *db;
	struct cache *cache;
	struct fs *fs;
	struct nfsd nfsd;
	bool nfsd_ready;
	struct exports *exports; /* read at start, until nfsd owns it */
	struct nlm *nlm;
	struct rpc_server *srv;
	struct rpc_program nfs_progs[2], mount_progs[1], nlm_progs[2];
	struct sockaddr_storage nfs_addr, mount_addr, nlm_addr;
	bool registered, nlm_registered;
	struct admin_ctx admin_ctx;
	char cache_dir[4096];
	struct admin *admin;
	struct metrics_httpd *httpd;
	char metrics_addr[80];
	struct events *events;
	char events_addr[80];
	bool collecting;
};

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[4096];
	size_t len = strlen(path);

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, mode) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) && errno != EEXIST)
		return -errno;
	return 0;
}

static int state_path(const struct gateway *gw, const char *leaf, char *buf,
		      size_t cap)
{
	int n = snprintf(buf, cap, "%s/%s", gw->cfg.state, leaf);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int addr_parse(const char *host, int port, struct sockaddr_storage *ss,
		      socklen_t *len)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_PASSIVE,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	char svc[16];

	snprintf(svc, sizeof(svc), "%d", port);
	if (getaddrinfo(host, svc, &hints, &res))
		return -EINVAL;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static void addr_format(const struct sockaddr_storage *ss, char *buf,
			size_t cap)
{
	char host[INET6_ADDRSTRLEN];
	int port;

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)ss;

		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		port = ntohs(a->sin6_port);
		snprintf(buf, cap, "[%s]:%d", host, port);
	} else {
		const struct sockaddr_in *a = (const void *)ss;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
		snprintf(buf, cap, "%s:%d", host, port);
	}
}

static uint16_t addr_port(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET6
		       ? ntohs(((const struct sockaddr_in6 *)ss)->sin6_port)
		       : ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

/* --cache-size in bytes: a percentage is of the state directory's disk. */
static int cache_capacity(const struct config *cfg, uint64_t *out)
{
	struct statvfs sv;

	if (!cfg->cache_size_pct) {
		*out = cfg->cache_size;
		return 0;
	}
	if (statvfs(cfg->state, &sv) < 0)
		return -errno;
	*out = (uint64_t)sv.f_blocks * sv.f_frsize / 100 * cfg->cache_size_pct;
	return 0;
}

/*
 * The cluster to join at fs_open (--meta): this node's name (the host
 * name by default) and where its NFS service listens.
 */
static int gateway_join(struct gateway *gw)
{
	char host[256] = "", addr[300];
	const char *node = gw->cfg.node;
	int rc;

	if (!node) {
		if (gethostname(host, sizeof(host) - 1) || !host[0])
			snprintf(host, sizeof(host), "mapfs-gw");
		node = host;
	}
	snprintf(addr, sizeof(addr), "%s:%d", gw->cfg.bind, gw->cfg.nfs_port);
	rc = db_cluster(gw->db, &(struct db_cluster_opts){
					.url = gw->cfg.meta,
					.node = node,
					.store_url = gw->cfg.store,
					.addr = addr,
					.lease_ms = gw->cfg.lease_ms });
	if (rc)
		log_error("cluster: %s", strerror(-rc));
	return rc;
}

/*
 * A cluster node whose COMMIT (and stable WRITE) replies once the file is
 * in the store: PostgreSQL and the store hold whatever a reply promised,
 * so its state directory is a copy that can be loaded again, and its
 * database is not flushed per commit (docs/CLUSTER.md, "What a gateway's
 * disk holds").
 */
static bool state_disposable(const struct config *cfg)
{
	return cfg->meta &&
	       (cfg->strict_commit || !strcmp(cfg->cluster_commit, "store"));
}

static int rm_entry(const char *path, const struct stat *sb, int flag,
		    struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if ((flag == FTW_DP ? rmdir(path) : unlink(path)) && errno != ENOENT)
		return -errno;
	return 0;
}

/* Remove directory path and everything in it (absent: 0).  0/-errno. */
static int rm_tree(const char *path)
{
	int rc = nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);

	if (rc == -1)
		return errno == ENOENT ? 0 : -errno;
	return rc;
}

/* Open everything below the transport.  Logs what failed. */
static int gateway_open_storage(struct gateway *gw)
{
	uint64_t capacity = 0;
	char path[4096];
	int rc;

	rc = mkdir_p(gw->cfg.state, 0700);
	if (rc) {
		log_error("state dir %s: %s", gw->cfg.state, strerror(-rc));
		return rc;
	}
	if (!strncmp(gw->cfg.store, "file://", 7)) {
		rc = mkdir_p(gw->cfg.store + 7, 0755);
		if (rc) {
			log_error("store dir %s: %s", gw->cfg.store + 7,
				  strerror(-rc));
			return rc;
		}
	}
	rc = store_open(
		&(struct store_opts){ .url = gw->cfg.store,
				      .s3_endpoint = gw->cfg.s3_endpoint,
				      .s3_region = gw->cfg.s3_region,
				      .s3_path_style = gw->cfg.s3_path_style,
				      .s3_max_requests =
					      gw->cfg.s3_max_requests,
				      .put_max = gw->cfg.multipart_threshold },
		&gw->store);
	if (rc) {
		log_error("store %s: %s", gw->cfg.store, strerror(-rc));
		return rc;
	}
	if ((rc = state_path(gw, "db", path, sizeof(path))) ||
	    (rc = db_open_flags(path, DB_MAPSIZE, 16,
				state_disposable(&gw->cfg) ? DB_OPEN_UNFLUSHED
							   : 0,
				&gw->db))) {
		if (rc == -EBUSY)
			log_error(
				"state directory %s is in use by another "
				"mapfs-gw process (a gateway or meta migrate)",
				gw->cfg.state);
		else
			log_error("database %s: %s", path, strerror(-rc));
		return rc;
	}
	if (gw->cfg.meta && (rc = gateway_join(gw)))
		return rc;
	rc = cache_capacity(&gw->cfg, &capacity);
	if (rc) {
		log_error("cache size of %s: %s", gw->cfg.state, strerror(-rc));
		return rc;
	}
	/* The cache's files go with a database started again: nothing
	 * says which of their bytes are whole. */
	if (!(rc = state_path(gw, "cache", path, sizeof(path))) &&
	    db_dropped(gw->db)) {
		if ((rc = rm_tree(path))) {
			log_error("cache %s: %s", path, strerror(-rc));
			return rc;
		}
		log_warn("cache %s emptied with the database; the cluster's "
			 "records are loaded again, this node's files taken "
			 "back from the store",
			 path);
	}
	if (rc ||
	    (rc = cache_open(
		     &(struct cache_opts){ .dir = path,
					   .db = gw->db,
					   .nloops = gw->cfg.threads,
					   .chunk_size = gw->cfg.chunk_size,
					   .readahead = gw->cfg.readahead,
					   .capacity = capacity,
					   .direct = gw->cfg.cache_direct },
		     gw->store, &gw->cache))) {
		log_error("cache %s: %s", path, strerror(-rc));
		return rc;
	}
	rc = fs_open(
		&(struct fs_opts){
			.dir_ttl_ms = gw->cfg.dir_ttl_ms,
			.attr_ttl_ms = gw->cfg.attr_ttl_ms,
			.upload_delay_ms = gw->cfg.upload_delay_ms,
			.async_window_ms = gw->cfg.async_window_ms,
			.max_dirty = gw->cfg.max_dirty ? gw->cfg.max_dirty
						       : capacity / 2,
			.strict_commit =
				gw->cfg.strict_commit ||
				(gw->cfg.meta &&
				 !strcmp(gw->cfg.cluster_commit, "store")),
			.read_only = gw->cfg.read_only,
			.no_early_upload = gw->cfg.no_early_upload,
			.listing_attrs = gw->cfg.listing_attrs,
			.default_uid = gw->cfg.default_uid,
			.default_gid = gw->cfg.default_gid },
		gw->db, gw->cache, gw->store, &gw->fs);
	if (rc) {
		log_error("namespace: %s", strerror(-rc));
		return rc;
	}
	return 0;
}

/*
 * Read the exports file into *out.  With no file configured the gateway
 * serves this host only (said at start); a file that is named but
 * missing or unreadable is an error, at start (exit 2) as on reload (the
 * table in force stays), so a typo never opens the gateway up.  A file
 * that exports nothing is warned about: every client is refused.  Logs
 * what failed.
 */
static int gateway_exports_read(const struct gateway *gw, bool at_start,
				struct exports **out)
{
	char err[512];
	int rc;

	if (!gw->cfg.exports_file) {
		if (at_start)
			log_warn("no exports file (--exports): %s is exported "
				 "to this host only (127.0.0.1 and ::1, "
				 "rw,no_root_squash,insecure); name an exports "
				 "file to serve other hosts",
				 gw->cfg.export_path);
		rc = exports_localhost(gw->cfg.export_path, out);
		if (rc)
			log_error("exports: %s", strerror(-rc));
		return rc;
	}
	rc = exports_load(gw->cfg.exports_file, gw->cfg.export_path, out, err,
			  sizeof(err));
	if (rc) {
		log_error("exports: %s", err);
		return rc;
	}
	if (!(*out)->n)
		log_warn("%s exports nothing: every client is refused until "
			 "it names an export",
			 gw->cfg.exports_file);
	return 0;
}

/*
 * Give t its ids and look its roots up, warning about exports whose
 * directory is not known yet (their MNT looks again in the store).
 */
static int gateway_exports_prepare(struct gateway *gw, struct exports *t)
{
	char err[512];
	int rc = exports_set_ids(t, &gw->nfsd.key, err, sizeof(err));

	if (rc) {
		log_error("exports: %s", err);
		return rc;
	}
	for (size_t i = 0; i < t->n; i++) {
		struct exports_entry *e = &t->entries[i];

		if (!nfsd_export_root(&gw->nfsd, e, -1))
			log_warn("export %s: no such directory known yet",
				 e->path);
		for (size_t j = 0; j < e->nrules; j++)
			if (e->rules[j].flags & EXPORTS_ASYNC)
				log_warn("export %s to %s is async: changes, "
					 "COMMITs and stable WRITEs are "
					 "answered "
					 "before they are on disk; a crash of "
					 "this machine loses up to the last %u "
					 "ms of them (a crash of the gateway "
					 "alone loses nothing)",
					 e->path, e->rules[j].spec,
					 gw->cfg.async_window_ms);
	}
	return 0;
}

/* SIGHUP: a new table, or the old one kept if the file is bad. */
static void gateway_exports_reload(struct gateway *gw)
{
	struct exports *t;
	size_t n;

	if (gateway_exports_read(gw, false, &t)) {
		log_error("SIGHUP: keeping the exports as they were");
		return;
	}
	if (gateway_exports_prepare(gw, t)) {
		exports_free(t);
		log_error("SIGHUP: keeping the exports as they were");
		return;
	}
	n = t->n;
	nfsd_exports_set(&gw->nfsd, t);
	log_info("SIGHUP: %zu export%s from %s", n, n == 1 ? "" : "s",
		 gw->cfg.exports_file ? gw->cfg.exports_file
				      : "the localhost default");
}

static int gateway_open_nfsd(struct gateway *gw)
{
	char path[4096];
	int rc;

	/* A cluster's handles are valid on every node: one key for all. */
	if (gw->cfg.meta) {
		rc = db_secret(gw->db, "handle", gw->nfsd.key.k,
			       sizeof(gw->nfsd.key.k));
		if (rc) {
			log_error("cluster: the handle key: %s", strerror(-rc));
			return rc;
		}
	} else if ((rc = state_path(gw, "handle.key", path, sizeof(path))) ||
		   (rc = handle_key_load(path, &gw->nfsd.key))) {
		log_error("handle key %s: %s", path, strerror(-rc));
		return rc;
	}
	gw->nfsd.fs = gw->fs;
	/* Stable across restarts, different per gateway. */
	gw->nfsd.fsid =
		(uint32_t)handle_siphash(gw->nfsd.key.k, gw->cfg.export_path,
					 strlen(gw->cfg.export_path));
	gw->nfsd.nloops = gw->cfg.threads;
	gw->nfsd.read_only = gw->cfg.read_only;
	/* A WRITE of FSINFO's wtmax bytes (RFC 1813 3.3.19) must fit one
	 * record of --max-record with its headers: credential up to 400
	 * bytes, handle, offset, count.  Larger records keep the default. */
	if (gw->cfg.max_record - 4096 < (1u << 20))
		gw->nfsd.wtmax = (gw->cfg.max_record - 4096) & ~4095u;
	rc = nfsd_init(&gw->nfsd);
	if (rc) {
		log_error("nfsd: %s", strerror(-rc));
		return rc;
	}
	gw->nfsd_ready = true;
	rc = gateway_exports_prepare(gw, gw->exports);
	if (rc)
		return rc;
	nfsd_exports_set(&gw->nfsd, gw->exports);
	gw->exports = NULL;
	return 0;
}

/* The lock manager; it needs nfsd's handle key. */
static int gateway_open_nlm(struct gateway *gw)
{
	int rc = nlm_open(
		&(struct nlm_opts){
			.nfsd = &gw->nfsd,
			.host_max = gw->cfg.max_locks_per_host,
			.db = gw->cfg.meta ? gw->db : NULL,
			.state_dir = gw->cfg.state,
			.name = gw->cfg.nlm_name,
			.grace_ms = gw->cfg.grace_ms,
			.client_rpcbind_port =
				(uint16_t)gw->cfg.nlm_client_rpcbind_port },
		&gw->nlm);

	if (rc)
		log_error("lock manager: %s", strerror(-rc));
	return rc;
}

/* A host no export admits may ask NULL and EXPORT, nothing else. */
#define REFUSED_HOST_CONNS 4

/* Connections a client address may hold (rpc's host_limit, on a loop). */
static uint32_t
gateway_host_limit(void *ctx, const struct sockaddr_storage *peer, int loop)
{
	struct gateway *gw = ctx;
	uint32_t lim = gw->cfg.max_connections_per_host;

	if (lim > REFUSED_HOST_CONNS &&
	    !nfsd_client_admitted(&gw->nfsd, peer, loop))
		lim = REFUSED_HOST_CONNS;
	return lim;
}

static int gateway_listen(struct gateway *gw)
{
	struct rpc_config rcfg = { .nloops = gw->cfg.threads,
				   .max_record = gw->cfg.max_record,
				   .max_inflight = gw->cfg.max_inflight,
				   .max_conns = gw->cfg.max_connections,
				   .max_conns_per_host =
					   gw->cfg.max_connections_per_host,
				   .host_limit = gateway_host_limit,
				   .host_limit_ctx = gw,
				   .idle_timeout_ms = gw->cfg.idle_timeout_ms };
	struct sockaddr_storage ss;
	socklen_t len;
	int rc;

	rc = rpc_server_new(&rcfg, &gw->srv);
	if (rc) {
		log_error("rpc server: %s", strerror(-rc));
		return rc;
	}
	/* MOUNT is served on the NFS port too: one forwarded port is enough. */
	gw->nfs_progs[0] = nfsd_program(&gw->nfsd);
	gw->nfs_progs[1] = mountd_program(&gw->nfsd);
	gw->mount_progs[0] = gw->nfs_progs[1];

	if (addr_parse(gw->cfg.bind, gw->cfg.nfs_port, &ss, &len)) {
		log_error("invalid bind address '%s'", gw->cfg.bind);
		return -EINVAL;
	}
	rc = rpc_server_listen(gw->srv, (struct sockaddr *)&ss, len,
			       gw->nfs_progs, 2, &gw->nfs_addr);
	if (rc) {
		log_error("listen on %s port %d: %s", gw->cfg.bind,
			  gw->cfg.nfs_port, strerror(-rc));
		return rc;
	}
	addr_parse(gw->cfg.bind, gw->cfg.mount_port, &ss, &len);
	rc = rpc_server_listen(gw->srv, (struct sockaddr *)&ss, len,
			       gw->mount_progs, 1, &gw->mount_addr);
	if (rc) {
		log_error("listen on %s port %d: %s", gw->cfg.bind,
			  gw->cfg.mount_port, strerror(-rc));
		return rc;
	}
	/*
	 * NLM and NSM share a port of their own, as lockd does: clients
	 * find it through rpcbind (Linux's lockd always asks rpcbind).
	 */
	gw->nlm_progs[0] = nlm_program(gw->nlm);
	gw->nlm_progs[1] = nsm_program(gw->nlm);
	addr_parse(gw->cfg.bind, gw->cfg.nlm_port, &ss, &len);
	rc = rpc_server_listen(gw->srv, (struct sockaddr *)&ss, len,
			       gw->nlm_progs, 2, &gw->nlm_addr);
	if (rc) {
		log_error("listen on %s port %d: %s", gw->cfg.bind,
			  gw->cfg.nlm_port, strerror(-rc));
		return rc;
	}
	for (int i = 0; i < gw->cfg.threads; i++) {
		rc = rpc_server_watch(gw->srv, i, cache_loop_fd(gw->cache, i),
				      cache_loop_poll, cache_loop_flush,
				      gw->cache);
		if (rc) {
			log_error("watch cache ring %d: %s", i, strerror(-rc));
			return rc;
		}
	}
	rc = rpc_server_start(gw->srv);
	if (rc)
		log_error("start loops: %s", strerror(-rc));
	return rc;
}

static void gateway_register(struct gateway *gw)
{
	int rc;

	if (gw->cfg.no_rpcbind)
		return;
	rc = rpc_rpcbind_set(NFS_PROG, NFS_VERS, addr_port(&gw->nfs_addr));
	if (!rc)
		rc = rpc_rpcbind_set(MOUNT_PROG, MOUNT_VERS,
				     addr_port(&gw->mount_addr));
	if (rc) {
		log_warn("rpcbind registration failed (%s); clients must name "
			 "the ports",
			 strerror(-rc));
		return;
	}
	gw->registered = true;
	rc = rpc_rpcbind_set(NLM_PROG, NLM_VERS4, addr_port(&gw->nlm_addr));
	if (!rc)
		rc = rpc_rpcbind_set(NSM_PROG, NSM_VERS1,
				     addr_port(&gw->nlm_addr));
	if (rc) {
		log_warn("rpcbind registration of NLM/NSM failed (%s); clients "
			 "must mount with nolock",
			 strerror(-rc));
		return;
	}
	gw->nlm_registered = true;
}

/*
 * The operator's side, once the gateway serves: the metrics endpoint and
 * the control socket.  Logs what failed.
 */
static int gateway_open_ops(struct gateway *gw, uint64_t started_ms)
{
	char path[4096];
	int rc;

	rc = state_path(gw, "cache", gw->cache_dir, sizeof(gw->cache_dir));
	if (rc)
		return rc;
	gw->admin_ctx = (struct admin_ctx){ .fs = gw->fs,
					    .nfsd = &gw->nfsd,
					    .store = gw->store,
					    .db = gw->db,
					    .nfs_addr = &gw->nfs_addr,
					    .export_path = gw->cfg.export_path,
					    .store_url = gw->cfg.store,
					    .cache_dir = gw->cache_dir,
					    .started_ms = started_ms };
	if (gw->cfg.metrics) {
		rc = metrics_collector_add(admin_metrics_collect,
					   &gw->admin_ctx);
		if (rc)
			return rc;
		gw->collecting = true;
		rc = metrics_collector_add(rpc_server_collect, gw->srv);
		if (rc)
			return rc;
		rc = metrics_httpd_start(gw->cfg.metrics, &gw->httpd,
					 gw->metrics_addr,
					 sizeof(gw->metrics_addr));
		if (rc) {
			log_error("metrics on %s: %s", gw->cfg.metrics,
				  strerror(-rc));
			return rc;
		}
	}
	if (gw->cfg.events) {
		const char *secret = gw->cfg.events_secret
					     ? gw->cfg.events_secret
					     : getenv("MAPFS_EVENTS_SECRET");

		rc = events_start(gw->cfg.events, secret, gw->fs, gw->store,
				  &gw->events, gw->events_addr,
				  sizeof(gw->events_addr));
		if (rc == -EINVAL && (!secret || strlen(secret) < 16))
			log_error(
				"events on %s: give a secret of 16 characters "
				"or more (--events-secret or "
				"MAPFS_EVENTS_SECRET)",
				gw->cfg.events);
		else if (rc)
			log_error("events on %s: %s", gw->cfg.events,
				  strerror(-rc));
		if (rc)
			return rc;
	}
	if ((rc = state_path(gw, "ctl.sock", path, sizeof(path))) ||
	    (rc = admin_start(path, &gw->admin_ctx, &gw->admin))) {
		log_error("control socket %s: %s", path, strerror(-rc));
		return rc;
	}
	return 0;
}

static void gateway_close(struct gateway *gw)
{
	/* Commands and scrapes use everything below: they go first. */
	admin_stop(gw->admin);
	events_stop(gw->events);
	metrics_httpd_stop(gw->httpd);
	if (gw->collecting)
		metrics_collectors_clear();
	if (gw->registered) {
		rpc_rpcbind_unset(NFS_PROG, NFS_VERS);
		rpc_rpcbind_unset(MOUNT_PROG, MOUNT_VERS);
	}
	if (gw->nlm_registered) {
		rpc_rpcbind_unset(NLM_PROG, NLM_VERS4);
		rpc_rpcbind_unset(NSM_PROG, NSM_VERS1);
	}
	if (gw->srv) {
		rpc_server_stop(gw->srv, STOP_TIMEOUT_MS);
		rpc_server_free(gw->srv);
	}
	/* After the loops: no call can reach the lock table any more. */
	nlm_close(gw->nlm);
	if (gw->fs)
		fs_close(gw->fs, false);
	if (gw->nfsd_ready)
		nfsd_fini(&gw->nfsd);
	exports_free(gw->exports);
	if (gw->cache)
		cache_close(gw->cache);
	if (gw->db)
		db_close(gw->db);
	if (gw->store)
		store_close(gw->store);
	config_free(&gw->cfg);
}

/*
 * Without --foreground, detach: the parent waits until the child is
 * ready (or dies) so that the ready line and the exit status still tell
 * the caller whether the gateway runs.  Returns the fd the child writes
 * one byte to when ready, or -1 in the foreground.
 */
static int daemonize(void)
{
	int pfd[2];
	pid_t pid;
	char c;

	if (pipe(pfd))
		return -1;
	pid = fork();
	if (pid < 0) {
		perror("mapfs-gw: fork");
		exit(1);
	}
	if (pid > 0) {
		int status;

		close(pfd[1]);
		if (read(pfd[0], &c, 1) == 1)
			_exit(0);
		waitpid(pid, &status, 0);
		_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
	}
	close(pfd[0]);
	setsid();
	return pfd[1];
}

/*
 * Wait for a signal that stops the gateway, reloading the exports on
 * SIGHUP.  With systemd's watchdog on (WatchdogSec=), ping it at half
 * its interval while waiting.  Returns the signal.
 */
static int gateway_wait(struct gateway *gw, const sigset_t *sigs)
{
	uint64_t wd_usec = 0;
	int sig;

	if (sd_watchdog_enabled(0, &wd_usec) <= 0)
		wd_usec = 0;
	for (;;) {
		if (wd_usec) {
			struct timespec ts = {
				.tv_sec = (time_t)(wd_usec / 2 / 1000000),
				.tv_nsec = (long)(wd_usec / 2 % 1000000) * 1000
			};

			sig = sigtimedwait(sigs, NULL, &ts);
			if (sig < 0) {
				if (errno == EAGAIN)
					sd_notify(0, "WATCHDOG=1");
				continue;
			}
		} else if (sigwait(sigs, &sig)) {
			continue;
		}
		if (sig != SIGHUP)
			return sig;
		sd_notify(0, "RELOADING=1");
		gateway_exports_reload(gw);
		sd_notify(0, "READY=1");
	}
}

int main(int argc, char **argv)
{
	struct gateway gw = { 0 };
	uint64_t started_ms = metrics_now_ns() / 1000000u;
	char nfs_s[80], mount_s[80], nlm_s[80];
	struct sockaddr_storage ss;
	enum log_target tgt;
	enum log_level lvl;
	socklen_t slen;
	sigset_t sigs;
	int rc, sig, ready_fd = -1;

	/* The operator's commands talk to a running gateway. */
	if (argc > 1 &&
	    (!strcmp(argv[1], "ctl") || !strcmp(argv[1], "refresh") ||
	     !strcmp(argv[1], "flush") || !strcmp(argv[1], "fsck")))
		return ctl_main(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "meta"))
		return gateway_migrate_main(argc - 1, argv + 1);

	rc = config_load(&gw.cfg, argc, argv, stdout, stderr);
	if (rc) {
		config_free(&gw.cfg);
		return rc > 0 ? 0 : 2;
	}
	log_parse_level(gw.cfg.log_level, &lvl);
	log_set_level(lvl);
	log_parse_target(gw.cfg.log_target, &tgt);
	log_set_target(tgt);
	if (gw.cfg.metrics && metrics_httpd_addr(gw.cfg.metrics, &ss, &slen)) {
		fprintf(stderr,
			"mapfs-gw: invalid value '%s' for metrics (ADDR:PORT, "
			"[ADDR6]:PORT)\n",
			gw.cfg.metrics);
		config_free(&gw.cfg);
		return 2;
	}
	/* A bad exports file is a bad configuration: exit 2 at once. */
	if (gateway_exports_read(&gw, true, &gw.exports)) {
		config_free(&gw.cfg);
		return 2;
	}
	if (gw.cfg.check_config) {
		printf("mapfs-gw: configuration is valid\n");
		exports_free(gw.exports);
		config_free(&gw.cfg);
		return 0;
	}
	if (!gw.cfg.foreground)
		ready_fd = daemonize();

	/* Signals are taken by sigwait() here; every thread inherits the mask. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if ((rc = gateway_open_storage(&gw)) || (rc = gateway_open_nfsd(&gw)) ||
	    (rc = gateway_open_nlm(&gw)) || (rc = gateway_listen(&gw)) ||
	    (rc = gateway_open_ops(&gw, started_ms))) {
		/* A cluster that refused this configuration (another store,
		 * a newer schema, a name in use, wrong credentials), a state
		 * directory in use: 2, as for any bad configuration. */
		int code = (gw.cfg.meta && (rc == -EINVAL || rc == -EPROTO)) ||
					   rc == -EBUSY
				   ? 2
				   : 1;

		gateway_close(&gw);
		return code;
	}
	gateway_register(&gw);

	addr_format(&gw.nfs_addr, nfs_s, sizeof(nfs_s));
	addr_format(&gw.mount_addr, mount_s, sizeof(mount_s));
	addr_format(&gw.nlm_addr, nlm_s, sizeof(nlm_s));
	/* Not on the ready line, whose form scripts and tests rely on. */
	log_info("locking: NLM v4 and NSM v1 on %s", nlm_s);
	log_info("serving %s from %s with %d loops, state in %s",
		 gw.cfg.export_path, gw.cfg.store, gw.cfg.threads,
		 gw.cfg.state);
	if (gw.httpd)
		log_info("metrics on http://%s/metrics", gw.metrics_addr);
	if (gw.events)
		log_info("events: S3 event notifications taken at "
			 "http://%s/SECRET",
			 gw.events_addr);
	printf("mapfs-gw: ready nfs=%s mount=%s export=%s%s%s\n", nfs_s,
	       mount_s, gw.cfg.export_path, gw.httpd ? " metrics=" : "",
	       gw.httpd ? gw.metrics_addr : "");
	fflush(stdout);
	/* After the ready line: a unit's start completes only now. */
	sd_notifyf(0, "READY=1\nSTATUS=serving %s on %s", gw.cfg.export_path,
		   nfs_s);
	if (ready_fd >= 0) {
		if (write(ready_fd, "r", 1) != 1)
			log_warn("could not tell the parent we are ready");
		close(ready_fd);
		if (!freopen("/dev/null", "w", stdout))
			log_warn("could not detach stdout");
	}

	sig = gateway_wait(&gw, &sigs);
	sd_notify(0, "STOPPING=1");
	log_info("signal %d: stopping (finishing calls in flight)", sig);
	gateway_close(&gw);
	log_info("stopped");
	return 0;
}
