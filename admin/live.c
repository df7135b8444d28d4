/*
 * admin/live.c - `ctl stats`' numbers: one snapshot of the gateway's
 * counters per request (calls and their time by kind, cache hits, store
 * bytes both ways, dirty data, uploads in flight, store state), which
 * the client turns into rates between two snapshots (daemon/ctl_stats.c).
 * Counters only: nothing here walks the cache or the namespace, so it is
 * cheap to ask every second.
 */
#include <inttypes.h>
#include <string.h>

#include "admin_int.h"
#include "db/db.h"
#include "fs/fs.h"
#include "metrics/metrics.h"
#include "s3/store.h"

/* The kinds of calls the live view shows, and which procedures are each. */
enum kind { K_READ, K_WRITE, K_META, K_CHANGE, K_LOCK, K_MOUNT, NKINDS };
static const char *const kind_names[NKINDS] = { "read",   "write", "meta",
						"change", "lock",  "mount" };

struct kind_sum {
	uint64_t calls[NKINDS], ns[NKINDS];
};

static enum kind kind_of(const char *prog, const char *proc)
{
	static const char *const changes[] = { "SETATTR", "CREATE", "MKDIR",
					       "SYMLINK", "MKNOD",  "REMOVE",
					       "RMDIR",   "RENAME", "LINK" };

	if (!strcmp(prog, "nlm") || !strcmp(prog, "nsm"))
		return K_LOCK;
	if (strcmp(prog, "nfs"))
		return K_MOUNT;
	if (!strcmp(proc, "READ"))
		return K_READ;
	if (!strcmp(proc, "WRITE") || !strcmp(proc, "COMMIT"))
		return K_WRITE;
	for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++)
		if (!strcmp(proc, changes[i]))
			return K_CHANGE;
	return K_META;
}

static void add_proc(void *ctx, const char *prog, const char *proc,
		     uint64_t calls, uint64_t sum_ns)
{
	struct kind_sum *k = ctx;
	enum kind i = kind_of(prog, proc);

	k->calls[i] += calls;
	k->ns[i] += sum_ns;
}

/* See admin_int.h. */
void admin_cmd_stats(struct admin *a, int fd)
{
	struct kind_sum k = { 0 };
	uint64_t dirty, limit;

	if (metrics_rpc_each(add_proc, &k)) {
		admin_send(fd, "err out of memory");
		return;
	}
	fs_dirty_room(a->ctx.fs, &dirty, &limit);
	admin_send(fd, "> t_ms %" PRIu64, metrics_now_ns() / 1000000);
	admin_send(fd, "> node %u", a->ctx.db ? db_node_id(a->ctx.db) : 0);
	for (int i = 0; i < NKINDS; i++)
		admin_send(fd, "> calls %s %" PRIu64 " %" PRIu64, kind_names[i],
			   k.calls[i], k.ns[i]);
	admin_send(fd, "> cache %" PRIu64 " %" PRIu64,
		   metrics_get(MET_CACHE_HITS), metrics_get(MET_CACHE_MISSES));
	admin_send(fd, "> store_bytes %" PRIu64 " %" PRIu64,
		   metrics_get(MET_STORE_BYTES_GET),
		   metrics_get(MET_STORE_BYTES_PUT) +
			   metrics_get(MET_STORE_BYTES_MPU));
	admin_send(fd, "> dirty %" PRIu64 " %" PRIu64, dirty, limit);
	admin_send(fd, "> uploads %u", fs_uploads_in_flight(a->ctx.fs));
	admin_send(fd, "> store %s",
		   a->ctx.store && store_down(a->ctx.store) ? "down" : "up");
	admin_send(fd, "ok");
}
