/*
 * daemon/config.h - the daemon's settings: defaults, the INI config file,
 * and the command line (which overrides the file).
 */
#ifndef MAPFS_CONFIG_H
#define MAPFS_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct config {
	char *store;  /* URL; default file://STATE/store */
	char *state;  /* state directory */
	char *bind;   /* listen address */
	int nfs_port; /* 0 = pick a free port */
	int mount_port;
	char *export_path;  /* e.g. /mapfs */
	char *exports_file; /* exports(5) table; NULL: this host only */
	int threads;        /* event loops; default = online CPUs */
	bool no_rpcbind;
	bool foreground;
	char *log_level;
	uint32_t dir_ttl_ms;
	uint32_t attr_ttl_ms;
	uint32_t upload_delay_ms;
	bool read_only;
	char *s3_endpoint; /* custom endpoint (MinIO, Ceph RGW, R2, s3rver) */
	char *s3_region;
	bool s3_path_style;
	int s3_max_requests;
	uint64_t multipart_threshold;      /* 0: the store's choice */
	uint32_t default_uid, default_gid; /* objects without metadata */
	uint32_t max_record;      /* largest RPC record accepted, bytes */
	uint32_t max_inflight;    /* outstanding calls per connection */
	uint32_t async_window_ms; /* async exports: durable this much later */
	uint32_t max_connections; /* open connections, all ports together */
	uint32_t max_connections_per_host; /* per client address; 0: a 16th */
	uint32_t max_locks_per_host; /* NLM locks+shares+waiters per address */
	uint32_t idle_timeout_ms;    /* 0 = never close idle connections */
	int nlm_port;                /* NLM + NSM; 0 = pick a free port */
	uint32_t grace_ms; /* after start only lock reclaims are granted */
	int nlm_client_rpcbind_port; /* clients' rpcbind, for callbacks */
	char *nlm_name;      /* the name SM_NOTIFY gives; NULL: host name */
	char *metrics;       /* Prometheus endpoint ADDR:PORT; NULL = off */
	char *events;        /* S3 event receiver ADDR:PORT; NULL = off */
	char *events_secret; /* its secret (or MAPFS_EVENTS_SECRET) */
	char *log_target;    /* "stderr" or "syslog" */
	bool check_config;   /* --check-config: validate, then exit */
	/* The cache engine. */
	uint64_t chunk_size;     /* bytes */
	uint64_t readahead;      /* bytes, the largest window */
	uint64_t cache_size;     /* bytes; 0 with cache_size_pct 0: no limit */
	uint32_t cache_size_pct; /* % of the state disk, if not 0 */
	uint64_t max_dirty;      /* bytes; 0: half the cache size */
	bool strict_commit;      /* COMMIT waits for the store */
	bool no_early_upload;    /* big files go up only once quiet */
	bool listing_attrs;      /* new objects: the listing's attributes,
				    no HEAD each */
	bool cache_direct;       /* O_DIRECT cache I/O where aligned */
	/* The cluster (PostgreSQL); meta NULL: a gateway on its own. */
	char *meta;           /* libpq URI */
	char *node;           /* this gateway's name; default: host name */
	uint32_t lease_ms;    /* a silent node is gone after this */
	char *cluster_commit; /* "store" (default) or "local" */
};

/*
 * Fill cfg from defaults, then the config file (--config FILE, if given),
 * then the command line.  On a bad flag or value, prints a message that
 * names it to err and returns -EINVAL (the caller exits 2).  Returns 1 if
 * --help or --version was printed (exit 0), else 0.  --check-config
 * (command line only) sets cfg->check_config for the caller.  Strings in cfg are
 * malloc'd and freed by config_free().
 */
int config_load(struct config *cfg, int argc, char **argv, FILE *out,
		FILE *err);
void config_free(struct config *cfg);

/* The --help text. */
void config_usage(FILE *out);

/* `mapfs-gw meta migrate ...` (argv[0] "meta"): the exit status. */
int gateway_migrate_main(int argc, char **argv);

#endif
