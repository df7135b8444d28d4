/*
 * admin/live.c - `ctl stats`' numbers: one snapshot of the gateway's
 * counters per request (calls and their time by kind, cache hits, store
 * bytes both ways: metrics_live; dirty data, uploads in flight, store
 * state), and in a cluster every gateway's as it published them with
 * its lease (its name with them).  The client turns two snapshots into rates
 * (daemon/ctl_stats.c).  Counters only: nothing here walks the cache or
 * the namespace, so it is cheap to ask every second.
 */
#include <inttypes.h>
#include <string.h>

#include "admin_int.h"
#include "db/db.h"
#include "fs/fs.h"
#include "metrics/metrics.h"
#include "s3/store.h"

/* One gateway of the cluster, to the client on the socket *ctx. */
static void peer_line(void *ctx, uint32_t node, const char *name,
		      const char *live)
{
	admin_send(*(int *)ctx, "> peer %u %s %s", node, name, live);
}

/* See admin_int.h. */
void admin_cmd_stats(struct admin *a, int fd)
{
	char text[METRICS_LIVE_TEXT];
	struct metrics_live l;
	uint64_t dirty, limit;

	if (metrics_live(&l)) {
		admin_send(fd, "err out of memory");
		return;
	}
	metrics_live_format(&l, text, sizeof(text));
	fs_dirty_room(a->ctx.fs, &dirty, &limit);
	admin_send(fd, "> node %u", a->ctx.db ? db_node_id(a->ctx.db) : 0);
	admin_send(fd, "> live %s", text);
	admin_send(fd, "> dirty %" PRIu64 " %" PRIu64, dirty, limit);
	admin_send(fd, "> uploads %u", fs_uploads_in_flight(a->ctx.fs));
	admin_send(fd, "> store %s",
		   a->ctx.store && store_down(a->ctx.store) ? "down" : "up");
	/* The gateways of a cluster (one round trip; none if it fails). */
	if (a->ctx.db && db_clustered(a->ctx.db))
		(void)db_cluster_peers_live(a->ctx.db, peer_line, &fd);
	admin_send(fd, "ok");
}
