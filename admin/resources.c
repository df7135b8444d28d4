/*
 * admin/resources.c - what the gateway process holds: descriptors,
 * threads, resident memory, and the database's map, reader slots and
 * log.  Each must come back to its level once the work is done: a
 * gauge for each, and alert rules before one runs out
 * (etc/prometheus/mapfs-gw-alerts.yml).  Read from /proc on demand.
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "admin_int.h"
#include "db/db.h"

/* Entries of /proc/self/fd, the walk's own descriptor not counted. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1;
}

/* Threads and VmRSS from /proc/self/status. */
static void read_status(struct admin_resources *r)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	unsigned long long v;

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Threads: %llu", &v) == 1)
			r->threads = (unsigned)v;
		else if (sscanf(line, "VmRSS: %llu kB", &v) == 1)
			r->rss_bytes = (uint64_t)v << 10;
	}
	fclose(f);
}

void admin_resources_get(const struct admin_ctx *ctx, struct admin_resources *r)
{
	struct rlimit rl;

	memset(r, 0, sizeof(*r));
	r->fds = count_fds();
	if (!getrlimit(RLIMIT_NOFILE, &rl))
		r->fds_max = rl.rlim_cur == RLIM_INFINITY ? 0 : rl.rlim_cur;
	read_status(r);
	if (ctx->db) {
		db_usage(ctx->db, &r->db);
		r->have_db = true;
	}
}
