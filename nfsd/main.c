/*
 * nfsd/main.c - the mapfs-gw daemon: wires the rooms together.
 *
 * store (s3/) <- cache (cache/) <- namespace (fs/, over db/) <- NFS and
 * MOUNT programs (nfsd/, mountd/) <- transport (rpc/).  main owns every
 * object it creates and frees them in reverse order on SIGTERM/SIGINT.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/cache.h"
#include "common/log.h"
#include "db/db.h"
#include "fs/fs.h"
#include "nfsd/config.h"
#include "nfsd/nfsd.h"
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
	struct rpc_server *srv;
	struct rpc_program nfs_progs[2], mount_progs[1];
	struct sockaddr_storage nfs_addr, mount_addr;
	bool registered;
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
	return ss->ss_family == AF_INET6 ?
		       ntohs(((const struct sockaddr_in6 *)ss)->sin6_port) :
		       ntohs(((const struct sockaddr_in *)ss)->sin_port);
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
			log_error("store dir %s: %s", gw->cfg.store + 7, strerror(-rc));
			return rc;
		}
	}
	rc = store_open(&(struct store_opts){
				.url = gw->cfg.store,
				.s3_endpoint = gw->cfg.s3_endpoint,
				.s3_region = gw->cfg.s3_region,
				.s3_path_style = gw->cfg.s3_path_style,
				.s3_max_requests = gw->cfg.s3_max_requests },
			&gw->store);
	if (rc) {
		log_error("store %s: %s", gw->cfg.store, strerror(-rc));
		return rc;
	}
	if ((rc = state_path(gw, "db", path, sizeof(path))) ||
	    (rc = db_open(path, DB_MAPSIZE, 16, &gw->db))) {
		log_error("database %s: %s", path, strerror(-rc));
		return rc;
	}
	rc = cache_capacity(&gw->cfg, &capacity);
	if (rc) {
		log_error("cache size of %s: %s", gw->cfg.state, strerror(-rc));
		return rc;
	}
	if ((rc = state_path(gw, "cache", path, sizeof(path))) ||
	    (rc = cache_open(&(struct cache_opts){
				     .dir = path,
				     .db = gw->db,
				     .nloops = gw->cfg.threads,
				     .chunk_size = gw->cfg.chunk_size,
				     .readahead = gw->cfg.readahead,
				     .capacity = capacity },
			     gw->store, &gw->cache))) {
		log_error("cache %s: %s", path, strerror(-rc));
		return rc;
	}
	rc = fs_open(&(struct fs_opts){ .dir_ttl_ms = gw->cfg.dir_ttl_ms,
					.upload_delay_ms = gw->cfg.upload_delay_ms,
					.max_dirty = gw->cfg.max_dirty ?
							     gw->cfg.max_dirty :
							     capacity / 2,
					.strict_commit = gw->cfg.strict_commit,
					.read_only = gw->cfg.read_only,
					.default_uid = gw->cfg.default_uid,
					.default_gid = gw->cfg.default_gid },
		     gw->db, gw->cache, gw->store, &gw->fs);
	if (rc) {
		log_error("namespace: %s", strerror(-rc));
		return rc;
	}
	return 0;
}

static int gateway_open_nfsd(struct gateway *gw)
{
	char path[4096];
	int rc;

	if ((rc = state_path(gw, "handle.key", path, sizeof(path))) ||
	    (rc = handle_key_load(path, &gw->nfsd.key))) {
		log_error("handle key %s: %s", path, strerror(-rc));
		return rc;
	}
	gw->nfsd.fs = gw->fs;
	gw->nfsd.export_path = gw->cfg.export_path;
	/* Stable across restarts, different per export and per gateway. */
	gw->nfsd.export_id = (uint32_t)handle_siphash(
		gw->nfsd.key.k, gw->cfg.export_path, strlen(gw->cfg.export_path));
	gw->nfsd.root_ino = FS_ROOT_INO;
	gw->nfsd.read_only = gw->cfg.read_only;
	rc = nfsd_init(&gw->nfsd);
	if (rc) {
		log_error("nfsd: %s", strerror(-rc));
		return rc;
	}
	gw->nfsd_ready = true;
	return 0;
}

static int gateway_listen(struct gateway *gw)
{
	struct rpc_config rcfg = { .nloops = gw->cfg.threads,
				   .max_record = (1u << 20) + (64u << 10),
				   .max_inflight = 128 };
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
	for (int i = 0; i < gw->cfg.threads; i++) {
		rc = rpc_server_watch(gw->srv, i, cache_loop_fd(gw->cache, i),
				      cache_loop_poll, gw->cache);
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
		log_warn("rpcbind registration failed (%s); clients must name the ports",
			 strerror(-rc));
		return;
	}
	gw->registered = true;
}

static void gateway_close(struct gateway *gw)
{
	if (gw->registered) {
		rpc_rpcbind_unset(NFS_PROG, NFS_VERS);
		rpc_rpcbind_unset(MOUNT_PROG, MOUNT_VERS);
	}
	if (gw->srv) {
		rpc_server_stop(gw->srv, STOP_TIMEOUT_MS);
		rpc_server_free(gw->srv);
	}
	if (gw->fs)
		fs_close(gw->fs, false);
	if (gw->nfsd_ready)
		nfsd_fini(&gw->nfsd);
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

int main(int argc, char **argv)
{
	struct gateway gw = { 0 };
	char nfs_s[80], mount_s[80];
	enum log_level lvl;
	sigset_t sigs;
	int rc, sig, ready_fd = -1;

	rc = config_load(&gw.cfg, argc, argv, stdout, stderr);
	if (rc) {
		config_free(&gw.cfg);
		return rc > 0 ? 0 : 2;
	}
	log_parse_level(gw.cfg.log_level, &lvl);
	log_set_level(lvl);
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
	    (rc = gateway_listen(&gw))) {
		gateway_close(&gw);
		return 1;
	}
	gateway_register(&gw);

	addr_format(&gw.nfs_addr, nfs_s, sizeof(nfs_s));
	addr_format(&gw.mount_addr, mount_s, sizeof(mount_s));
	log_info("serving %s from %s with %d loops, state in %s",
		 gw.cfg.export_path, gw.cfg.store, gw.cfg.threads, gw.cfg.state);
	printf("mapfs-gw: ready nfs=%s mount=%s export=%s\n", nfs_s, mount_s,
	       gw.cfg.export_path);
	fflush(stdout);
	if (ready_fd >= 0) {
		if (write(ready_fd, "r", 1) != 1)
			log_warn("could not tell the parent we are ready");
		close(ready_fd);
		if (!freopen("/dev/null", "w", stdout))
			log_warn("could not detach stdout");
	}

	for (;;) {
		if (sigwait(&sigs, &sig))
			continue;
		if (sig == SIGHUP) {
			log_info("SIGHUP: nothing to reload yet");
			continue;
		}
		break;
	}
	log_info("signal %d: stopping (finishing calls in flight)", sig);
	gateway_close(&gw);
	log_info("stopped");
	return 0;
}
