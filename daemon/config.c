/*
 * daemon/config.c - defaults, the INI config file (libinih) and the command
 * line.  Every option has one row in the table below, used by both the
 * file ("key = value" under [mapfs-gw]) and the CLI ("--key value").
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

enum opt_kind {
	OPT_STR,
	OPT_PORT,
	OPT_INT,
	OPT_BOOL,
	OPT_MS,
	OPT_U32,
	OPT_SIZE, /* bytes, with an optional K, M, G or T (powers of 1024) */
	OPT_CAPACITY, /* OPT_SIZE, or a percentage "N%" in the next field */
};

struct opt {
	const char *name;
	enum opt_kind kind;
	size_t off;
	const char *arg;
	const char *help;
};

#define OFF(f) offsetof(struct config, f)

_Static_assert(offsetof(struct config, cache_size_pct) ==
		       offsetof(struct config, cache_size) + sizeof(uint64_t),
	       "OPT_CAPACITY writes the percentage right after the bytes");

static const struct opt opts[] = {
	{ "store", OPT_STR, OFF(store), "URL",
	  "object store: file:///path or s3://BUCKET[/PREFIX] (default "
	  "file://STATE/store)" },
	{ "state", OPT_STR, OFF(state), "DIR",
	  "state directory: LMDB, cache, handle key (default "
	  "/var/lib/mapfs-gw)" },
	{ "bind", OPT_STR, OFF(bind), "ADDR",
	  "listen address (default 0.0.0.0)" },
	{ "nfs-port", OPT_PORT, OFF(nfs_port), "N",
	  "NFS port, also serving MOUNT (default 2049; 0 picks a free port)" },
	{ "mount-port", OPT_PORT, OFF(mount_port), "N",
	  "MOUNT port (default 20048; 0 picks a free port)" },
	{ "export", OPT_STR, OFF(export_path), "PATH",
	  "exported path (default /mapfs)" },
	{ "exports", OPT_STR, OFF(exports_file), "FILE",
	  "who may mount what, exports(5) syntax; it must exist (default: "
	  "none, --export to this host only)" },
	{ "threads", OPT_INT, OFF(threads), "N",
	  "event loops, one per core (default: online CPUs)" },
	{ "no-rpcbind", OPT_BOOL, OFF(no_rpcbind), NULL,
	  "do not register with rpcbind" },
	{ "foreground", OPT_BOOL, OFF(foreground), NULL,
	  "stay in the foreground (default: detach once ready)" },
	{ "log-level", OPT_STR, OFF(log_level), "L",
	  "error, warn, info or debug (default info)" },
	{ "dir-ttl", OPT_MS, OFF(dir_ttl_ms), "SECONDS",
	  "how long a directory listing is trusted before the store is asked "
	  "again (default 5)" },
	{ "attr-ttl", OPT_MS, OFF(attr_ttl_ms), "SECONDS",
	  "how long attributes of an object only in the store are trusted "
	  "before its directory is listed again (default 10)" },
	{ "upload-delay", OPT_MS, OFF(upload_delay_ms), "SECONDS",
	  "quiet time before a changed file is written to the store (default "
	  "5)" },
	{ "read-only", OPT_BOOL, OFF(read_only), NULL, "export read-only" },
	{ "s3-endpoint", OPT_STR, OFF(s3_endpoint), "URL",
	  "S3 endpoint for MinIO, Ceph RGW, R2, s3rver (default: AWS)" },
	{ "s3-region", OPT_STR, OFF(s3_region), "REGION",
	  "S3 region (default: AWS_REGION, the profile's, us-east-1)" },
	{ "s3-path-style", OPT_BOOL, OFF(s3_path_style), NULL,
	  "path-style S3 addressing (default: virtual-hosted on AWS)" },
	{ "s3-max-requests", OPT_INT, OFF(s3_max_requests), "N",
	  "S3 requests in flight (default 64)" },
	{ "no-early-upload", OPT_BOOL, OFF(no_early_upload), NULL,
	  "a file past the multipart threshold goes up only once quiet "
	  "(default on S3: its complete parts are sent while it is still "
	  "written sequentially)" },
	{ "multipart-threshold", OPT_SIZE, OFF(multipart_threshold), "SIZE",
	  "files larger than this go up as a multipart upload with parallel "
	  "parts (default: 64M on S3, 1G on an S3 endpoint on this machine, no "
	  "limit on file://; past 64M only files all in the cache go as one "
	  "PUT)" },
	{ "listing-attrs", OPT_BOOL, OFF(listing_attrs), NULL,
	  "objects the namespace does not know yet (other S3 writers') take "
	  "their attributes from the listing alone: size and mtime, mode "
	  "0644, the default owner; no HEAD each, so a first walk of a big "
	  "directory runs at the listing's speed, but owners, modes, "
	  "symlinks and hard links kept in object metadata are not read for "
	  "them (default: one HEAD per new object)" },
	{ "default-uid", OPT_U32, OFF(default_uid), "UID",
	  "owner of objects that carry no metadata (default 0)" },
	{ "default-gid", OPT_U32, OFF(default_gid), "GID",
	  "group of objects that carry no metadata (default 0)" },
	{ "max-record", OPT_U32, OFF(max_record), "BYTES",
	  "largest RPC record accepted; bounds WRITE size (default 1114112, "
	  "65536..134217728)" },
	{ "async-window", OPT_U32, OFF(async_window_ms), "MS",
	  "an async export's changes, COMMITs and stable WRITEs answer at "
	  "once and are on disk at most this much later; a crash of the "
	  "machine loses at most that (default 50, 1..10000)" },
	{ "max-inflight", OPT_U32, OFF(max_inflight), "N",
	  "outstanding calls per connection (default 128, 1..65536)" },
	{ "max-connections", OPT_U32, OFF(max_connections), "N",
	  "open client connections; more are closed at once (default 4096)" },
	{ "max-connections-per-host", OPT_U32, OFF(max_connections_per_host),
	  "N",
	  "open connections one client address may hold (default: "
	  "max-connections / 16, at least 64); a host no export admits gets at "
	  "most 4" },
	{ "max-locks-per-host", OPT_U32, OFF(max_locks_per_host), "N",
	  "locks, share reservations and blocked lock requests one client "
	  "address may hold (default 16384)" },
	{ "idle-timeout", OPT_MS, OFF(idle_timeout_ms), "SECONDS",
	  "close a connection idle this long, 0 never (default 300)" },
	{ "nlm-port", OPT_PORT, OFF(nlm_port), "N",
	  "lock manager (NLM v4) and status monitor (NSM) port (default 0: a "
	  "free port, found through rpcbind)" },
	{ "grace", OPT_MS, OFF(grace_ms), "SECONDS",
	  "after a start, grant only lock reclaims for this long (default "
	  "45)" },
	{ "nlm-name", OPT_STR, OFF(nlm_name), "NAME",
	  "the name clients mount this service by, told to them after a "
	  "restart or a takeover (SM_NOTIFY); with a floating address, that "
	  "address or its DNS name (default: the host name)" },
	{ "nlm-client-rpcbind-port", OPT_PORT, OFF(nlm_client_rpcbind_port),
	  "N",
	  "port of the clients' rpcbind, asked where their lockd and statd "
	  "listen for callbacks (default 111)" },
	{ "metrics", OPT_STR, OFF(metrics), "ADDR:PORT",
	  "serve Prometheus metrics at http://ADDR:PORT/metrics (default off; "
	  "no authentication: bind to a private address)" },
	{ "events", OPT_STR, OFF(events), "ADDR:PORT",
	  "receive S3 event notifications (HTTP POST of S3 event JSON: "
	  "radosgw's push, Amazon S3 through SNS or EventBridge) at "
	  "http://ADDR:PORT/SECRET, so other writers' changes show at once "
	  "(default off)" },
	{ "events-secret", OPT_STR, OFF(events_secret), "SECRET",
	  "the secret senders put in the URL path or an X-Mapfs-Secret header, "
	  "16 characters or more (default: $MAPFS_EVENTS_SECRET)" },
	{ "log-target", OPT_STR, OFF(log_target), "T",
	  "stderr (journald picks it up) or syslog (default stderr)" },
	{ "chunk-size", OPT_SIZE, OFF(chunk_size), "SIZE",
	  "cache and ranged-GET unit, a multiple of 4K (default 1M)" },
	{ "readahead", OPT_SIZE, OFF(readahead), "SIZE",
	  "largest readahead window of a sequential reader (default 64M)" },
	{ "cache-size", OPT_CAPACITY, OFF(cache_size), "SIZE|N%",
	  "data kept in the cache, bytes or % of the state disk (default "
	  "80%)" },
	{ "max-dirty", OPT_SIZE, OFF(max_dirty), "SIZE",
	  "dirty data past which writes answer JUKEBOX (default: half the "
	  "cache size)" },
	{ "strict-commit", OPT_BOOL, OFF(strict_commit), NULL,
	  "COMMIT and stable WRITEs reply only once the data is in the store" },
	{ "cache-direct", OPT_BOOL, OFF(cache_direct), NULL,
	  "O_DIRECT for block-aligned cache reads and writes (bypass the page "
	  "cache)" },
	{ "meta", OPT_STR, OFF(meta), "URL",
	  "shared namespace in PostgreSQL, postgres://user@host:port/db: many "
	  "gateways, one namespace (default: LMDB in the state dir, one "
	  "gateway)" },
	{ "node", OPT_STR, OFF(node), "NAME",
	  "this gateway's name in the cluster, unique (default: the host "
	  "name)" },
	{ "lease", OPT_MS, OFF(lease_ms), "SECONDS",
	  "a cluster node that stops renewing its lease is gone after this "
	  "(default 5)" },
	{ "cluster-commit", OPT_STR, OFF(cluster_commit), "store|local",
	  "in a cluster, COMMIT and stable WRITEs reply once the data is in "
	  "the store (default) or, faster and lost with the machine, on local "
	  "disk" },
};

#define NOPTS (sizeof(opts) / sizeof(opts[0]))

void config_usage(FILE *out)
{
	fprintf(out,
		"usage: mapfs-gw [--config FILE] [--store URL] [--state DIR] "
		"[--bind ADDR]\n"
		"                [--nfs-port N] [--mount-port N] [--export "
		"PATH] [--exports FILE]\n"
		"                [--threads N] [--no-rpcbind] [--foreground] "
		"[--log-level L]\n"
		"                [--nlm-port N] [--grace SECONDS] ...\n"
		"       mapfs-gw --check-config [--config FILE] [options]\n"
		"       mapfs-gw ctl|refresh|flush ... (see mapfs-gw ctl "
		"--help)\n\n"
		"A user-space NFSv3 server exporting an object store's "
		"namespace from a\n"
		"local cache.  Once ready it prints one line on stdout:\n"
		"  mapfs-gw: ready nfs=ADDR:PORT mount=ADDR:PORT "
		"export=PATH\n\n"
		"options:\n"
		"  --config FILE        INI file with the options below as key "
		"= value\n"
		"                       (section [mapfs-gw]); the command line "
		"wins\n");
	for (size_t i = 0; i < NOPTS; i++) {
		char left[64];

		snprintf(left, sizeof(left), "--%s%s%s", opts[i].name,
			 opts[i].arg ? " " : "",
			 opts[i].arg ? opts[i].arg : "");
		fprintf(out, "  %-20s %s\n", left, opts[i].help);
	}
	fprintf(out, "  --check-config       validate the configuration and "
		     "the exports file, then\n"
		     "                       exit: 0 if good, 2 with the "
		     "reason if not\n"
		     "  --help               this text\n"
		     "  --version            the version\n");
}

static const struct opt *opt_find(const char *name)
{
	for (size_t i = 0; i < NOPTS; i++)
		if (strcmp(opts[i].name, name) == 0)
			return &opts[i];
	return NULL;
}

static int parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* "123", "64K", "1M", "2G", "1T" (optionally with "iB" or "B"). */
static int parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 't':
	case 'T':
		shift = 40;
		end++;
		break;
	}
	if (shift && !strcmp(end, "iB"))
		end += 2;
	else if (shift && *end == 'B')
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

/* Set one option from its text; src names where it came from for errors. */
static int opt_set(struct config *cfg, const struct opt *o, const char *val,
		   const char *src, FILE *err)
{
	char *base = (char *)cfg + o->off;
	long v;

	switch (o->kind) {
	case OPT_STR:
		if (!*val)
			goto bad;
		free(*(char **)base);
		*(char **)base = strdup(val);
		return *(char **)base ? 0 : -ENOMEM;
	case OPT_PORT:
		if (parse_long(val, 0, 65535, &v))
			goto bad;
		*(int *)base = (int)v;
		return 0;
	case OPT_INT:
		if (parse_long(val, 1, 1024, &v))
			goto bad;
		*(int *)base = (int)v;
		return 0;
	case OPT_U32:
		if (parse_long(val, 0, UINT32_MAX, &v))
			goto bad;
		*(uint32_t *)base = (uint32_t)v;
		return 0;
	case OPT_MS:
		if (parse_long(val, 0, 86400, &v))
			goto bad;
		*(uint32_t *)base = (uint32_t)(v * 1000);
		return 0;
	case OPT_CAPACITY: {
		size_t n = strlen(val);

		/* The percentage field follows the byte count in struct config. */
		if (n > 1 && val[n - 1] == '%') {
			char num[16];

			if (n > sizeof(num))
				goto bad;
			memcpy(num, val, n - 1);
			num[n - 1] = '\0';
			if (parse_long(num, 1, 100, &v))
				goto bad;
			*(uint64_t *)base = 0;
			*(uint32_t *)(base + sizeof(uint64_t)) = (uint32_t)v;
			return 0;
		}
		if (parse_size(val, (uint64_t *)base))
			goto bad;
		*(uint32_t *)(base + sizeof(uint64_t)) = 0;
		return 0;
	}
	case OPT_SIZE:
		if (parse_size(val, (uint64_t *)base))
			goto bad;
		return 0;
	case OPT_BOOL:
		if (!val || !strcmp(val, "true") || !strcmp(val, "yes") ||
		    !strcmp(val, "1"))
			*(bool *)base = true;
		else if (!strcmp(val, "false") || !strcmp(val, "no") ||
			 !strcmp(val, "0"))
			*(bool *)base = false;
		else
			goto bad;
		return 0;
	}
bad:
	fprintf(err, "mapfs-gw: %s: invalid value '%s' for %s\n", src, val,
		o->name);
	return -EINVAL;
}

struct ini_ctx {
	struct config *cfg;
	FILE *err;
	const char *path;
	int rc;
};

static int config_ini_line(void *p, const char *section, const char *name,
			   const char *value)
{
	struct ini_ctx *c = p;
	const struct opt *o;

	if (*section && strcmp(section, "mapfs-gw") != 0)
		return 1; /* other sections belong to later features */
	o = opt_find(name);
	if (!o) {
		fprintf(c->err, "mapfs-gw: %s: unknown option '%s'\n", c->path,
			name);
		c->rc = -EINVAL;
		return 0;
	}
	if (opt_set(c->cfg, o, value, c->path, c->err))
		c->rc = -EINVAL;
	return c->rc == 0;
}

static int config_validate(struct config *cfg, FILE *err)
{
	enum log_target tgt;
	enum log_level lvl;

	if (log_parse_level(cfg->log_level, &lvl)) {
		fprintf(err, "mapfs-gw: invalid value '%s' for log-level\n",
			cfg->log_level);
		return -EINVAL;
	}
	if (cfg->export_path[0] != '/' || strstr(cfg->export_path, "//") ||
	    strlen(cfg->export_path) > 1024) {
		fprintf(err,
			"mapfs-gw: invalid value '%s' for export (an absolute "
			"path)\n",
			cfg->export_path);
		return -EINVAL;
	}
	if (strncmp(cfg->store, "file://", 7) &&
	    strncmp(cfg->store, "s3://", 5)) {
		fprintf(err,
			"mapfs-gw: invalid value '%s' for store (file:///path "
			"or s3://bucket)\n",
			cfg->store);
		return -EINVAL;
	}
	/* Below 64 KiB a WRITE could not carry a useful amount of data. */
	if (cfg->max_record < 65536 || cfg->max_record > 128u << 20) {
		fprintf(err,
			"mapfs-gw: invalid value '%u' for max-record "
			"(65536..134217728)\n",
			cfg->max_record);
		return -EINVAL;
	}
	if (cfg->async_window_ms < 1 || cfg->async_window_ms > 10000) {
		fprintf(err,
			"mapfs-gw: invalid value '%u' for async-window "
			"(1..10000 ms: how much an async export may lose in a "
			"crash of the machine)\n",
			cfg->async_window_ms);
		return -EINVAL;
	}
	if (cfg->max_inflight < 1 || cfg->max_inflight > 65536) {
		fprintf(err,
			"mapfs-gw: invalid value '%u' for max-inflight "
			"(1..65536)\n",
			cfg->max_inflight);
		return -EINVAL;
	}
	if (cfg->max_connections < 1) {
		fprintf(err, "mapfs-gw: invalid value '0' for max-connections "
			     "(at least 1)\n");
		return -EINVAL;
	}
	/* A 16th of the total, but never below 64 (or the total). */
	if (!cfg->max_connections_per_host) {
		uint32_t n = cfg->max_connections / 16, floor = 64;

		if (floor > cfg->max_connections)
			floor = cfg->max_connections;
		cfg->max_connections_per_host = n > floor ? n : floor;
	}
	if (cfg->max_locks_per_host < 1) {
		fprintf(err, "mapfs-gw: invalid value '0' for "
			     "max-locks-per-host (at least 1)\n");
		return -EINVAL;
	}
	if (log_parse_target(cfg->log_target, &tgt)) {
		fprintf(err,
			"mapfs-gw: invalid value '%s' for log-target (stderr "
			"or syslog)\n",
			cfg->log_target);
		return -EINVAL;
	}
	if (!cfg->chunk_size || cfg->chunk_size % 4096 ||
	    cfg->chunk_size > (1u << 30)) {
		fprintf(err,
			"mapfs-gw: invalid value %llu for chunk-size (a "
			"multiple of 4K, at most 1G)\n",
			(unsigned long long)cfg->chunk_size);
		return -EINVAL;
	}
	if (cfg->nfs_port && cfg->nfs_port == cfg->mount_port) {
		fprintf(err, "mapfs-gw: nfs-port and mount-port must differ\n");
		return -EINVAL;
	}
	if (cfg->nlm_port && (cfg->nlm_port == cfg->nfs_port ||
			      cfg->nlm_port == cfg->mount_port)) {
		fprintf(err, "mapfs-gw: nlm-port must differ from nfs-port and "
			     "mount-port\n");
		return -EINVAL;
	}
	if (cfg->meta && strncmp(cfg->meta, "postgres://", 11) &&
	    strncmp(cfg->meta, "postgresql://", 13)) {
		fprintf(err, "mapfs-gw: invalid value for meta "
			     "(postgres://user@host:port/db)\n");
		return -EINVAL;
	}
	if (strcmp(cfg->cluster_commit, "store") &&
	    strcmp(cfg->cluster_commit, "local")) {
		fprintf(err,
			"mapfs-gw: invalid value '%s' for cluster-commit "
			"(store or local)\n",
			cfg->cluster_commit);
		return -EINVAL;
	}
	if (cfg->lease_ms < 1000) {
		fprintf(err, "mapfs-gw: invalid value for lease (at least 1 "
			     "second)\n");
		return -EINVAL;
	}
	if (cfg->node && (!cfg->node[0] || strlen(cfg->node) > 255)) {
		fprintf(err,
			"mapfs-gw: invalid value for node (1..255 bytes)\n");
		return -EINVAL;
	}
	if (!cfg->nlm_client_rpcbind_port) {
		fprintf(err, "mapfs-gw: invalid value '0' for "
			     "nlm-client-rpcbind-port\n");
		return -EINVAL;
	}
	return 0;
}

static int config_defaults(struct config *cfg)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	*cfg = (struct config){
		.state = strdup("/var/lib/mapfs-gw"),
		.bind = strdup("0.0.0.0"),
		.nfs_port = 2049,
		.mount_port = 20048,
		.export_path = strdup("/mapfs"),
		.threads = n > 0 ? (int)n : 1,
		.log_level = strdup("info"),
		.log_target = strdup("stderr"),
		.dir_ttl_ms = 5000,
		.attr_ttl_ms = 10000,
		.upload_delay_ms = 5000,
		.max_record = (1u << 20) + (64u << 10),
		.max_inflight = 128,
		.async_window_ms = 50,
		.max_connections = 4096,
		.max_locks_per_host = 16384,
		.lease_ms = 5000,
		.cluster_commit = strdup("store"),
		.idle_timeout_ms = 300000,
		.grace_ms = 45000,
		.nlm_client_rpcbind_port = 111,
		.chunk_size = 1u << 20,
		.readahead = 64ull << 20,
		.cache_size_pct = 80,
	};
	return cfg->state && cfg->bind && cfg->export_path && cfg->log_level &&
			       cfg->cluster_commit && cfg->log_target
		       ? 0
		       : -ENOMEM;
}

int config_load(struct config *cfg, int argc, char **argv, FILE *out, FILE *err)
{
	struct option lopts[NOPTS + 5];
	const char *config_file = NULL;
	int rc, c, idx;

	rc = config_defaults(cfg);
	if (rc)
		return rc;
	for (size_t i = 0; i < NOPTS; i++)
		lopts[i] = (struct option){ opts[i].name,
					    opts[i].kind == OPT_BOOL
						    ? no_argument
						    : required_argument,
					    NULL, 'o' };
	lopts[NOPTS] =
		(struct option){ "config", required_argument, NULL, 'c' };
	lopts[NOPTS + 1] = (struct option){ "help", no_argument, NULL, 'h' };
	lopts[NOPTS + 2] = (struct option){ "version", no_argument, NULL, 'V' };
	lopts[NOPTS + 3] =
		(struct option){ "check-config", no_argument, NULL, 'k' };
	lopts[NOPTS + 4] = (struct option){ 0 };

	/* Pass 1: only --config, --help, --version; errors wait for pass 2. */
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", lopts, &idx)) != -1) {
		if (c == 'c')
			config_file = optarg;
		else if (c == 'h') {
			config_usage(out);
			return 1;
		} else if (c == 'V') {
			fprintf(out, "mapfs-gw 0.1.0\n");
			return 1;
		}
	}
	if (config_file) {
		struct ini_ctx ictx = { cfg, err, config_file, 0 };
		int line = ini_parse(config_file, config_ini_line, &ictx);

		if (line < 0) {
			fprintf(err, "mapfs-gw: cannot read config file %s\n",
				config_file);
			return -EINVAL;
		}
		if (ictx.rc)
			return ictx.rc;
		if (line > 0) {
			fprintf(err, "mapfs-gw: %s:%d: syntax error\n",
				config_file, line);
			return -EINVAL;
		}
	}

	/* Pass 2: the command line overrides the file. */
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", lopts, &idx)) != -1) {
		if (c == 'o') {
			if (opt_set(cfg, &opts[idx], optarg, "command line",
				    err))
				return -EINVAL;
		} else if (c == 'k') {
			cfg->check_config = true;
		} else if (c == '?') {
			fprintf(err,
				"mapfs-gw: unknown or incomplete option '%s' "
				"(see --help)\n",
				argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(err,
			"mapfs-gw: unexpected argument '%s' (see --help)\n",
			argv[optind]);
		return -EINVAL;
	}
	if (!cfg->store) {
		size_t len = strlen(cfg->state) + 16;
		char *url = malloc(len);

		if (!url)
			return -ENOMEM;
		if (cfg->state[0] == '/') {
			snprintf(url, len, "file://%s/store", cfg->state);
		} else {
			char cwd[PATH_MAX];

			if (!getcwd(cwd, sizeof(cwd))) {
				free(url);
				return -errno;
			}
			len += strlen(cwd) + 1;
			char *abs = realloc(url, len);
			if (!abs) {
				free(url);
				return -ENOMEM;
			}
			url = abs;
			const char *rel = cfg->state;

			while (rel[0] == '.' && rel[1] == '/')
				rel += 2; /* "./var" reads better as "var" */
			snprintf(url, len, "file://%s/%s/store", cwd, rel);
		}
		cfg->store = url;
	}
	return config_validate(cfg, err);
}

void config_free(struct config *cfg)
{
	free(cfg->meta);
	free(cfg->node);
	free(cfg->nlm_name);
	free(cfg->cluster_commit);
	free(cfg->store);
	free(cfg->state);
	free(cfg->bind);
	free(cfg->export_path);
	free(cfg->exports_file);
	free(cfg->log_level);
	free(cfg->s3_endpoint);
	free(cfg->s3_region);
	free(cfg->metrics);
	free(cfg->events);
	if (cfg->events_secret)
		memset(cfg->events_secret, 0, strlen(cfg->events_secret));
	free(cfg->events_secret);
	free(cfg->log_target);
	*cfg = (struct config){ 0 };
}
