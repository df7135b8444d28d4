/*
 * daemon/ctl_stats.c - `mapfs-gw ctl stats`: a live view, one line per
 * interval, as `juicefs stats` or `vmstat` give one: NFS calls per
 * second and their mean latency by kind, cache hit ratio, store MiB/s
 * both ways, dirty data against --max-dirty, uploads in flight, store
 * state.  Each line is the difference of two snapshots of the gateway's
 * counters (admin/live.c), so the gateway keeps no state for it.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "metrics/metrics.h"

#define HEADER_EVERY 20
#define PEERS_MAX 64

/* A gateway as one snapshot shows it. */
struct gw {
	uint32_t node;
	char name[64];
	struct metrics_live l;
	bool local; /* the gateway asked: the fields below are known */
	uint64_t dirty, limit, uploads;
	char store[8];
};

struct snap {
	struct gw gw[PEERS_MAX];
	size_t n;
};

struct parse {
	struct snap *s;
	bool bad;
};

/* One line of the gateway's answer to stats into the snapshot. */
static void parse_line(void *ctx, const char *line)
{
	struct parse *p = ctx;
	struct snap *s = p->s;
	struct gw *me = &s->gw[0];
	const char *l;
	char name[64];
	unsigned node;
	uint64_t a, b;
	int off = 0;

	if (!line || strncmp(line, "> ", 2))
		return;
	l = line + 2;
	if (!strncmp(l, "live ", 5)) {
		p->bad |= metrics_live_parse(l + 5, &me->l) != 0;
	} else if (sscanf(l, "peer %u %63s %n", &node, name, &off) == 2 &&
		   off > 0) {
		struct gw *g = node == me->node ? me : &s->gw[s->n];

		if (g != me && s->n == PEERS_MAX)
			return;
		snprintf(g->name, sizeof(g->name), "%s", name);
		if (g == me)
			return; /* (its own figures are fresher) */
		g->node = node;
		if (!metrics_live_parse(l + off, &g->l))
			s->n++;
	} else if (sscanf(l, "dirty %" SCNu64 " %" SCNu64, &a, &b) == 2) {
		me->dirty = a;
		me->limit = b;
	} else {
		(void)(sscanf(l, "uploads %" SCNu64, &me->uploads) == 1 ||
		       sscanf(l, "node %u", &me->node) == 1 ||
		       sscanf(l, "store %7s", me->store) == 1);
	}
}

/* One snapshot from the gateway: 0, or ctl's exit status.  gw[0] is the
 * gateway asked, then the others of its cluster. */
static int take(const char *path, struct snap *s)
{
	struct parse p = { s, false };
	int rc;

	memset(s, 0, sizeof(*s));
	s->n = 1;
	s->gw[0].local = true;
	rc = ctl_ask(path, "stats", parse_line, &p);
	if (!rc && p.bad) {
		fprintf(stderr, "mapfs-gw ctl: a stats answer not understood "
				"(a gateway of another version?)\n");
		rc = 1;
	}
	return rc;
}

static void human(double v, char *buf, size_t cap)
{
	static const char *const units[] = { "B", "K", "M", "G", "T" };
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, cap, u ? "%.1f%s" : "%.0f%s", v, units[u]);
}

static void header(bool cluster)
{
	printf("%-8s", "time");
	if (cluster)
		printf(" %-12s", "gateway");
	/* (mount calls: seldom worth a column) */
	for (int i = 0; i < METRICS_NKINDS - 1; i++)
		printf(" %7s/s %7s", metrics_kind_names[i], "ms");
	printf(" %6s %9s %9s %8s %7s %5s\n", "hit%", "getMiB/s", "putMiB/s",
	       "dirty", "uploads", "store");
}

/*
 * One line of rates from a to b (one gateway).  Another gateway's
 * figures change once a lease renewal (about a second): while they have
 * not, its last line's rates stand (*last keeps them).
 */
static void line_of(const char *when, bool cluster, const struct gw *a,
		    const struct gw *b, char *last, size_t cap)
{
	double dt = (double)(b->l.t_ms - a->l.t_ms) / 1e3;
	uint64_t reads = (b->l.cache_hits - a->l.cache_hits) +
			 (b->l.cache_misses - a->l.cache_misses);
	char dirty[16], hit[16], up[24];
	size_t n = 0;

	if (!b->local && b->l.t_ms == a->l.t_ms && last[0]) {
		printf("%-8s%s\n", when, last);
		return;
	}
	if (dt <= 0)
		dt = 1e-3;
	if (cluster)
		n += (size_t)snprintf(last + n, cap - n, " %-12.12s",
				      b->name[0] ? b->name : "-");
	for (int i = 0; i < METRICS_NKINDS - 1 && n < cap; i++) {
		uint64_t c = b->l.calls[i] - a->l.calls[i];

		n += (size_t)snprintf(
			last + n, cap - n, " %9.0f %7.3f", (double)c / dt,
			c ? (double)(b->l.ns[i] - a->l.ns[i]) / (double)c / 1e6
			  : 0);
	}
	if (reads)
		snprintf(hit, sizeof(hit), "%.1f",
			 100.0 * (double)(b->l.cache_hits - a->l.cache_hits) /
				 (double)reads);
	else
		snprintf(hit, sizeof(hit), "-");
	if (b->local) {
		human((double)b->dirty, dirty, sizeof(dirty));
		snprintf(up, sizeof(up), "%" PRIu64, b->uploads);
	} else {
		snprintf(dirty, sizeof(dirty), "-");
		snprintf(up, sizeof(up), "-");
	}
	if (n < cap)
		snprintf(last + n, cap - n, " %6s %9.1f %9.1f %8s %7s %5s", hit,
			 (double)(b->l.store_in - a->l.store_in) / dt /
				 1048576.0,
			 (double)(b->l.store_out - a->l.store_out) / dt /
				 1048576.0,
			 dirty, up, b->local ? b->store : "-");
	printf("%-8s%s\n", when, last);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: mapfs-gw ctl [--state DIR ...] stats [--interval "
		   "SECONDS] [--count N]\n"
		   "  a line of rates each interval (default 1 s; --count: "
		   "N lines, then exit)\n"
		   "  calls/s and mean ms of read, write (and COMMIT), meta "
		   "(GETATTR, LOOKUP,\n"
		   "  READDIR, ...), change (CREATE, REMOVE, RENAME, SETATTR, "
		   "...), lock (NLM);\n"
		   "  cache hit %% of reads, store MiB/s in and out, dirty "
		   "data, uploads in\n"
		   "  flight, and whether the store answers\n");
}

/* See ctl.h. */
int ctl_stats(const char *path, int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	double interval = 1;
	long count = -1, lines = 0;
	struct snap *prev = NULL, *cur = NULL;
	char(*last)[512] = NULL;
	char *end;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+", lopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			interval = strtod(optarg, &end);
			if (*end || !(interval >= 0.1 && interval <= 3600)) {
				fprintf(stderr,
					"mapfs-gw ctl stats: --interval "
					"0.1 to 3600 seconds\n");
				return 2;
			}
			break;
		case 'n':
			count = strtol(optarg, &end, 10);
			if (*end || count < 1) {
				fprintf(stderr, "mapfs-gw ctl stats: --count N "
						"(1 or more)\n");
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	prev = malloc(sizeof(*prev));
	cur = malloc(sizeof(*cur));
	last = calloc(PEERS_MAX, sizeof(*last));
	if (!prev || !cur || !last) {
		fprintf(stderr, "mapfs-gw ctl stats: out of memory\n");
		rc = 1;
		goto out;
	}
	if ((rc = take(path, prev)))
		goto out;
	while (count < 0 || lines < count) {
		struct timespec ts = {
			(time_t)interval,
			(long)((interval - (double)(time_t)interval) * 1e9)
		};
		bool cluster;
		char when[16];
		time_t now;
		struct tm tm;

		nanosleep(&ts, NULL);
		if ((rc = take(path, cur)))
			goto out;
		cluster = cur->n > 1 || cur->gw[0].name[0];
		if (lines % HEADER_EVERY == 0)
			header(cluster);
		now = time(NULL);
		localtime_r(&now, &tm);
		strftime(when, sizeof(when), "%H:%M:%S", &tm);
		for (size_t g = 0; g < cur->n && g < PEERS_MAX; g++) {
			const struct gw *b = &cur->gw[g], *a = NULL;

			for (size_t k = 0; k < prev->n && !a; k++)
				if (prev->gw[k].node == b->node &&
				    prev->gw[k].local == b->local)
					a = &prev->gw[k];
			if (!a) {
				last[g][0] = '\0';
				continue; /* new: a line from the next one on */
			}
			line_of(when, cluster, a, b, last[g], sizeof(last[g]));
		}
		fflush(stdout);
		/* Another gateway's figures change with its lease renewal:
		 * keep the older snapshot of one that has not moved. */
		for (size_t g = 0; g < cur->n; g++)
			for (size_t k = 0; k < prev->n; k++)
				if (!cur->gw[g].local &&
				    prev->gw[k].node == cur->gw[g].node &&
				    prev->gw[k].l.t_ms == cur->gw[g].l.t_ms)
					cur->gw[g] = prev->gw[k];
		*prev = *cur;
		lines++;
	}
	rc = 0;
out:
	free(prev);
	free(cur);
	free(last);
	return rc;
}
