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

#define NKINDS 6 /* read write meta change lock mount (admin/live.c) */
#define HEADER_EVERY 20

static const char *const kinds[NKINDS] = { "read",   "write", "meta",
					   "change", "lock",  "mount" };

struct snap {
	uint64_t t_ms, calls[NKINDS], ns[NKINDS], hits, misses, get, put, dirty,
		limit, uploads;
	unsigned node;
	char store[8];
};

/* One snapshot from the gateway: 0, or ctl's exit status. */
static int take(const char *path, struct snap *s)
{
	char *line = NULL, word[16];
	size_t cap = 0;
	int rc = 2;
	FILE *in;

	memset(s, 0, sizeof(*s));
	if (ctl_send(path, "stats", &in))
		return 2;
	while (getline(&line, &cap, in) > 0) {
		const char *l = line + 2;
		uint64_t a, b;

		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line, "ok")) {
			rc = 0;
			break;
		}
		if (!strncmp(line, "err ", 4)) {
			fprintf(stderr, "mapfs-gw ctl: %s\n", line + 4);
			rc = 1;
			break;
		}
		if (strncmp(line, "> ", 2))
			continue;
		if (sscanf(l, "calls %15s %" SCNu64 " %" SCNu64, word, &a,
			   &b) == 3) {
			for (int i = 0; i < NKINDS; i++)
				if (!strcmp(word, kinds[i])) {
					s->calls[i] = a;
					s->ns[i] = b;
				}
		} else if (sscanf(l, "cache %" SCNu64 " %" SCNu64, &a, &b) ==
			   2) {
			s->hits = a;
			s->misses = b;
		} else if (sscanf(l, "store_bytes %" SCNu64 " %" SCNu64, &a,
				  &b) == 2) {
			s->get = a;
			s->put = b;
		} else if (sscanf(l, "dirty %" SCNu64 " %" SCNu64, &a, &b) ==
			   2) {
			s->dirty = a;
			s->limit = b;
		} else {
			(void)(sscanf(l, "t_ms %" SCNu64, &s->t_ms) == 1 ||
			       sscanf(l, "uploads %" SCNu64, &s->uploads) ==
				       1 ||
			       sscanf(l, "node %u", &s->node) == 1 ||
			       sscanf(l, "store %7s", s->store) == 1);
		}
	}
	if (rc == 2)
		fprintf(stderr,
			"mapfs-gw ctl: the gateway closed the connection\n");
	free(line);
	fclose(in);
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

static void header(void)
{
	printf("%-8s", "time");
	for (int i = 0; i < NKINDS - 1;
	     i++) /* (mount: seldom worth a column) */
		printf(" %7s/s %7s", kinds[i], "ms");
	printf(" %6s %9s %9s %8s %7s %5s\n", "hit%", "getMiB/s", "putMiB/s",
	       "dirty", "uploads", "store");
}

/* One line of rates between a and b. */
static void line_of(const struct snap *a, const struct snap *b)
{
	double dt = (double)(b->t_ms - a->t_ms) / 1e3;
	uint64_t reads = (b->hits - a->hits) + (b->misses - a->misses);
	char dirty[16], hit[16], tbuf[16];
	time_t now = time(NULL);
	struct tm tm;

	if (dt <= 0)
		dt = 1e-3;
	localtime_r(&now, &tm);
	strftime(tbuf, sizeof(tbuf), "%H:%M:%S", &tm);
	printf("%-8s", tbuf);
	for (int i = 0; i < NKINDS - 1; i++) {
		uint64_t n = b->calls[i] - a->calls[i];

		printf(" %9.0f %7.3f", (double)n / dt,
		       n ? (double)(b->ns[i] - a->ns[i]) / (double)n / 1e6 : 0);
	}
	if (reads)
		snprintf(hit, sizeof(hit), "%.1f",
			 100.0 * (double)(b->hits - a->hits) / (double)reads);
	else
		snprintf(hit, sizeof(hit), "-");
	human((double)b->dirty, dirty, sizeof(dirty));
	printf(" %6s %9.1f %9.1f %8s %7" PRIu64 " %5s\n", hit,
	       (double)(b->get - a->get) / dt / 1048576.0,
	       (double)(b->put - a->put) / dt / 1048576.0, dirty, b->uploads,
	       b->store);
	fflush(stdout);
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
	struct snap prev, cur;
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
	if ((rc = take(path, &prev)))
		return rc;
	while (count < 0 || lines < count) {
		struct timespec ts = {
			(time_t)interval,
			(long)((interval - (double)(time_t)interval) * 1e9)
		};

		nanosleep(&ts, NULL);
		if ((rc = take(path, &cur)))
			return rc;
		if (lines % HEADER_EVERY == 0)
			header();
		line_of(&prev, &cur);
		prev = cur;
		lines++;
	}
	return 0;
}
