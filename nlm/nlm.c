/*
 * nlm/nlm.c - the lock manager's life: state number, grace period,
 * callback thread, lock table, and the notifications after a restart.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "nlm_int.h"

#define NLM_SHARD_BITS 6 /* 64 shards: lock traffic is light next to I/O */

static int mkdir_one(const char *path)
{
	return mkdir(path, 0700) && errno != EEXIST ? -errno : 0;
}

int nlm_open(const struct nlm_opts *opts, struct nlm **out)
{
	struct nlm_table_ops ops = { .grant = nlm_block_granted,
				     .drop = nlm_block_dropped };
	struct timespec ts;
	char path[4200];
	struct nlm *n;
	int rc;

	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->opts = *opts;
	pthread_mutex_init(&n->clients_lock, NULL);
	if (opts->name && opts->name[0])
		snprintf(n->hostname, sizeof(n->hostname), "%s", opts->name);
	else if (gethostname(n->hostname, sizeof(n->hostname) - 1))
		strcpy(n->hostname, "mapfs-gw");
	if (asprintf(&n->state_dir, "%s/nsm", opts->state_dir) < 0) {
		n->state_dir = NULL;
		rc = -ENOMEM;
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/clients", n->state_dir);
	if ((rc = mkdir_one(n->state_dir)) || (rc = mkdir_one(path)) ||
	    (rc = nsm_state_bump(n)))
		goto fail;
	ops.ctx = n;
	n->blocked = ops;
	if ((rc = nlm_table_new(NLM_SHARD_BITS, opts->host_max, &ops,
				&n->table)))
		goto fail;
	if ((rc = nlm_cb_start(opts->client_rpcbind_port, &n->cb)))
		goto fail;
	if (opts->db && (rc = nlm_pool_start(n)))
		goto fail;
	if (opts->grace_ms) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		n->grace_end_ns = (uint64_t)ts.tv_sec * 1000000000u +
				  (uint64_t)ts.tv_nsec +
				  (uint64_t)opts->grace_ms * 1000000u;
	}
	nsm_notify_clients(n);
	nsm_cluster_start(n);
	log_info("nlm: NSM state %d, grace %u s", n->state,
		 opts->grace_ms / 1000);
	*out = n;
	return 0;

fail:
	nlm_close(n);
	return rc;
}

void nlm_close(struct nlm *n)
{
	if (!n)
		return;
	/* No more gateways' deaths to hear of; then calls waiting for the
	 * database: both may queue callbacks. */
	nsm_cluster_stop(n);
	nlm_pool_stop(n);
	/* Callbacks next: a GRANTED answer may still touch the table. */
	nlm_cb_stop(n->cb);
	nlm_table_free(n->table);
	nsm_free(n);
	pthread_mutex_destroy(&n->clients_lock);
	free(n->state_dir);
	free(n);
}

int32_t nlm_nsm_state(const struct nlm *n)
{
	return n->state;
}
