/*
 * daemon/migrate.c - `mapfs-gw meta migrate`: grow a gateway alone into a
 * cluster.
 *
 *   mapfs-gw meta migrate [--config FILE] [--state DIR] [--store URL]
 *                         [--node NAME] --to postgres://...
 *
 * Copies the namespace of the (stopped) gateway whose state is DIR into
 * an empty PostgreSQL database, with its handle key (clients' handles
 * stay valid) and inode counter, and makes DIR the cluster's first
 * replica: restarted with --meta, this gateway serves the same files,
 * uploads what it had not uploaded yet, and others can join.  A target
 * that holds a namespace already is refused and left alone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "db/db.h"
#include "fs/fs.h"
#include "config.h"
#include "nfsd/handle.h"

#define DB_MAPSIZE_MIGRATE (64ull << 30) /* as the gateway maps it */

static void usage(FILE *f)
{
	fprintf(f, "usage: mapfs-gw meta migrate [--config FILE] [--state DIR] "
		   "[--store URL] --to postgres://user@host:port/db\n"
		   "Copies the namespace of the stopped gateway with state DIR "
		   "into an empty\ncluster database (docs/CLUSTER.md); then "
		   "start it with --meta URL.\n");
}

/* Whether a gateway answers on STATE/ctl.sock (then it must stop first). */
static bool gateway_running(const char *state)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd, rc;

	if ((size_t)snprintf(a.sun_path, sizeof(a.sun_path), "%s/ctl.sock",
			     state) >= sizeof(a.sun_path))
		return false;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
	close(fd);
	return rc == 0;
}

/* A bar on a terminal, a line every 10% elsewhere. */
static void progress(void *ctx, uint64_t done, uint64_t total)
{
	int *last = ctx, pct = total ? (int)(done * 100 / total) : 100;

	if (isatty(2)) {
		fprintf(stderr,
			"\rcopying the namespace: %llu of %llu records (%d%%)",
			(unsigned long long)done, (unsigned long long)total,
			pct);
		if (done >= total)
			fputc('\n', stderr);
	} else if (pct / 10 != *last / 10 || done >= total) {
		fprintf(stderr,
			"copying the namespace: %llu of %llu records (%d%%)\n",
			(unsigned long long)done, (unsigned long long)total,
			pct);
	}
	*last = pct;
}

int gateway_migrate_main(int argc, char **argv)
{
	const char *to = NULL;
	char **rest = calloc((size_t)argc + 1, sizeof(*rest));
	char path[4200], host[256] = "";
	struct handle_key key;
	struct config cfg;
	struct db *db = NULL;
	int n = 0, rc, last = -1;

	if (!rest)
		return 1;
	/* argv: "meta" "migrate" options...; --to is ours, the rest config's. */
	rest[n++] = argv[0];
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--to") && i + 1 < argc)
			to = argv[++i];
		else if (!strncmp(argv[i], "--to=", 5))
			to = argv[i] + 5;
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			free(rest);
			return 0;
		} else
			rest[n++] = argv[i];
	}
	if (argc < 2 || strcmp(argv[1], "migrate") || !to ||
	    (strncmp(to, "postgres://", 11) &&
	     strncmp(to, "postgresql://", 13))) {
		usage(stderr);
		free(rest);
		return 2;
	}
	rc = config_load(&cfg, n, rest, stdout, stderr);
	free(rest);
	if (rc) {
		config_free(&cfg);
		return rc > 0 ? 0 : 2;
	}
	if (gateway_running(cfg.state)) {
		fprintf(stderr,
			"mapfs-gw: a gateway is running on %s: stop it "
			"first (systemctl stop mapfs-gw)\n",
			cfg.state);
		config_free(&cfg);
		return 2;
	}
	if (!cfg.node && (gethostname(host, sizeof(host) - 1) || !host[0]))
		snprintf(host, sizeof(host), "mapfs-gw");
	snprintf(path, sizeof(path), "%s/handle.key", cfg.state);
	if ((rc = handle_key_load(path, &key))) {
		fprintf(stderr, "mapfs-gw: %s: %s\n", path, strerror(-rc));
		config_free(&cfg);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/db", cfg.state);
	rc = db_open(path, DB_MAPSIZE_MIGRATE, 16, &db);
	if (!rc)
		rc = fs_migrate(db,
				&(struct db_cluster_opts){
					.url = to,
					.node = cfg.node ? cfg.node : host,
					.store_url = cfg.store,
					.lease_ms = cfg.lease_ms },
				&key, sizeof(key.k), progress, &last);
	db_close(db);
	memset(&key, 0, sizeof(key));
	if (rc == -ENOTEMPTY) {
		fprintf(stderr,
			"mapfs-gw: the target database holds a namespace "
			"already: nothing was copied\n");
	} else if (rc == -EBUSY) {
		fprintf(stderr,
			"mapfs-gw: %s is in use by a running gateway: "
			"stop it first\n",
			cfg.state);
	} else if (rc) {
		fprintf(stderr, "mapfs-gw: migrate: %s\n", strerror(-rc));
	} else {
		printf("mapfs-gw: the namespace of %s is in the cluster; start "
		       "this gateway with --meta (and the others with empty "
		       "states)\n",
		       cfg.state);
	}
	config_free(&cfg);
	return rc == -ENOTEMPTY || rc == -EINVAL || rc == -EPROTO ||
			       rc == -EBUSY
		       ? 2
	       : rc ? 1
		    : 0;
}
