/* main.c: mapfs-bench's options, its threads and the order of a run.
 *
 * Each of the -p threads owns one worker: one connection, one event loop.
 * Items run one after another; for each, every thread prepares (untimed),
 * all meet at a barrier, run the timed part, and meet again while the main
 * thread draws the progress bar and then merges and prints the results.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "items.h"
#include "progress.h"
#include "report.h"

struct run {
	struct bench_cfg cfg;
	const char *url; /* the first of urls */
	char **urls;     /* a cluster: thread i talks to urls[i % n] */
	int nurls;
	char dir[256];
	int keep;
	int json;
	int selected[64]; /* indexes into bench_items, in table order */
	int nselected;
	struct worker *workers;
	pthread_barrier_t barrier; /* threads + main */
	atomic_int abort;
	atomic_int finished; /* workers done with the current item's run */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: mapfs-bench [options] "
		"nfs://HOST/EXPORT[?nfsport=P&mountport=Q&version=3] [URL...]\n"
		"  Several URLs: gateways of one cluster; thread i talks to "
		"the (i mod N)th,\n"
		"  and the visibility item looks for its files on the next "
		"one.\n"
		"  -p, --threads N          threads, each with its own "
		"connection (1)\n"
		"  -q, --depth Q            outstanding RPCs (or small files) "
		"per connection (16)\n"
		"      --block-size SIZE    I/O size of the big and small file "
		"items (1M)\n"
		"      --big-file-size SIZE big file per thread (1G)\n"
		"      --small-file-size SIZE (128K)\n"
		"      --small-file-count N small files per thread (100)\n"
		"      --io-file-size SIZE  file of the 4k and 1m items, per "
		"thread (256M)\n"
		"      --duration S         seconds per rate item (5)\n"
		"      --items LIST         comma list of items to run (all):\n"
		"                           ");
	for (int i = 0; i < bench_item_count; i++)
		fprintf(f, "%s%s", bench_items[i].name,
			i + 1 < bench_item_count ? "," : "\n");
	fprintf(f, "      --dir NAME           work dir made under the export "
		   "(mapfs-bench.PID)\n"
		   "      --keep               leave the work dir in place\n"
		   "      --reuse              read-big, and the small-file "
		   "items, use the files a --keep\n"
		   "                           run left under --dir (same "
		   "-p and sizes) instead of\n"
		   "                           writing them first\n"
		   "      --renamed            the small-file items act on the "
		   "names the rename item\n"
		   "                           gave (s.N.r), with --reuse\n"
		   "      --no-verify          skip the data check of read-big "
		   "and read-small\n"
		   "      --json               print the results as JSON on "
		   "stdout\n");
}

/* "64K", "1M", "1GiB": binary multiples, as juicefs bench takes them. */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s || errno)
		return -1;
	unsigned shift = 0;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	case 't':
	case 'T':
		shift = 40;
		break;
	case '\0':
		break;
	default:
		return -1;
	}
	if (*end) {
		end++;
		if (*end == 'i')
			end++;
		if (*end == 'B' || *end == 'b')
			end++;
	}
	if (*end || (shift && v > (~0ull >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (end == s || *end || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

static int select_items(struct run *r, const char *list)
{
	int want[64] = { 0 };
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *name = strtok(buf, ","); name; name = strtok(NULL, ",")) {
		int found = 0;
		for (int i = 0; i < bench_item_count; i++)
			if (strcmp(name, "all") == 0 ||
			    strcmp(name, bench_items[i].name) == 0) {
				want[i] = 1;
				found = 1;
			}
		if (!found) {
			fprintf(stderr, "mapfs-bench: unknown item: %s\n",
				name);
			return -1;
		}
	}
	r->nselected = 0;
	for (int i = 0; i < bench_item_count; i++)
		if (want[i])
			r->selected[r->nselected++] = i;
	return 0;
}

enum {
	OPT_BLOCK = 256,
	OPT_BIG,
	OPT_SMALL,
	OPT_COUNT,
	OPT_IOFILE,
	OPT_DURATION,
	OPT_ITEMS,
	OPT_DIR,
	OPT_KEEP,
	OPT_REUSE,
	OPT_RENAMED,
	OPT_NOVERIFY,
	OPT_JSON,
};

static int parse_args(struct run *r, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "threads", required_argument, NULL, 'p' },
		{ "depth", required_argument, NULL, 'q' },
		{ "block-size", required_argument, NULL, OPT_BLOCK },
		{ "big-file-size", required_argument, NULL, OPT_BIG },
		{ "small-file-size", required_argument, NULL, OPT_SMALL },
		{ "small-file-count", required_argument, NULL, OPT_COUNT },
		{ "io-file-size", required_argument, NULL, OPT_IOFILE },
		{ "duration", required_argument, NULL, OPT_DURATION },
		{ "items", required_argument, NULL, OPT_ITEMS },
		{ "dir", required_argument, NULL, OPT_DIR },
		{ "keep", no_argument, NULL, OPT_KEEP },
		{ "reuse", no_argument, NULL, OPT_REUSE },
		{ "renamed", no_argument, NULL, OPT_RENAMED },
		{ "no-verify", no_argument, NULL, OPT_NOVERIFY },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct bench_cfg *c = &r->cfg;
	const char *items = "all";
	int o;
	while ((o = getopt_long(argc, argv, "p:q:h", opts, NULL)) != -1) {
		int bad = 0;
		char *end;
		switch (o) {
		case 'p':
			bad = parse_int(optarg, 1, 256, &c->threads);
			break;
		case 'q':
			bad = parse_int(optarg, 1, 1024, &c->depth);
			break;
		case OPT_BLOCK:
			bad = parse_size(optarg, &c->block_size);
			break;
		case OPT_BIG:
			bad = parse_size(optarg, &c->big_file_size);
			break;
		case OPT_SMALL:
			bad = parse_size(optarg, &c->small_file_size);
			break;
		case OPT_COUNT:
			bad = parse_size(optarg, &c->small_file_count);
			break;
		case OPT_IOFILE:
			bad = parse_size(optarg, &c->io_file_size);
			break;
		case OPT_DURATION:
			c->duration = strtod(optarg, &end);
			bad = end == optarg || *end ||
			      !(c->duration > 0 && c->duration < 1e6);
			break;
		case OPT_ITEMS:
			items = optarg;
			break;
		case OPT_DIR:
			snprintf(r->dir, sizeof(r->dir), "%s", optarg);
			break;
		case OPT_KEEP:
			r->keep = 1;
			break;
		case OPT_RENAMED:
			c->renamed = 1;
			break;
		case OPT_REUSE:
			c->reuse = 1;
			break;
		case OPT_NOVERIFY:
			c->verify = 0;
			break;
		case OPT_JSON:
			r->json = 1;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
		if (bad) {
			fprintf(stderr, "mapfs-bench: bad value for %s: %s\n",
				argv[optind - 1], optarg);
			return -1;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return -1;
	}
	r->url = argv[optind];
	r->urls = argv + optind;
	r->nurls = argc - optind;
	/* Offsets stay page-aligned (pattern.h) and a random 1 MiB read always
	 * has a whole block to land on. */
	if (c->block_size < 4096 || c->block_size % 4096 ||
	    c->block_size > (1u << 30)) {
		fprintf(stderr, "mapfs-bench: --block-size must be a multiple "
				"of 4K up to 1G\n");
		return -1;
	}
	if (c->io_file_size < (1u << 20)) {
		fprintf(stderr,
			"mapfs-bench: --io-file-size must be at least 1M\n");
		return -1;
	}
	if (c->big_file_size == 0 || c->small_file_count == 0 ||
	    c->small_file_count > UINT32_MAX) {
		fprintf(stderr, "mapfs-bench: --big-file-size and "
				"--small-file-count must be > 0\n");
		return -1;
	}
	if (!strchr(r->dir, '/') && r->dir[0] && strcmp(r->dir, ".") &&
	    strcmp(r->dir, ".."))
		return select_items(r, items);
	fprintf(stderr, "mapfs-bench: --dir must be a plain name\n");
	return -1;
}

static int worker_failed(struct worker *w)
{
	atomic_store(w->abort, 1);
	return -1;
}

struct thread_arg {
	struct run *r;
	struct worker *w;
};

static void *worker_main(void *arg)
{
	struct run *r = ((struct thread_arg *)arg)->r;
	struct worker *w = ((struct thread_arg *)arg)->w;
	if (worker_setup(w) < 0)
		worker_failed(w);
	pthread_barrier_wait(&r->barrier);
	for (int k = 0; k < r->nselected && !atomic_load(&r->abort); k++) {
		const struct item *it = &bench_items[r->selected[k]];
		if (it->prepare(w) < 0)
			worker_failed(w);
		/* prepare may have run a whole item (read-big writing its file):
		 * only the timed part below is reported. */
		memset(&w->res, 0, sizeof(w->res));
		atomic_store(&w->progress, 0);
		pthread_barrier_wait(&r->barrier);
		if (!atomic_load(&r->abort) && it->run(w) < 0)
			worker_failed(w);
		atomic_fetch_add(&r->finished, 1);
		pthread_barrier_wait(&r->barrier);
		/* Here every thread has finished the item and the main thread
		 * has read the results; abort cannot change until the next
		 * prepare, so all threads take the same branch. */
		pthread_barrier_wait(&r->barrier);
	}
	if (!r->keep && !atomic_load(&r->abort) && worker_cleanup(w) < 0)
		worker_failed(w);
	return NULL;
}

static double item_fraction(const struct run *r, const struct item *it,
			    uint64_t t0)
{
	uint64_t done = 0;
	for (int i = 0; i < r->cfg.threads; i++)
		done += atomic_load_explicit(&r->workers[i].progress,
					     memory_order_relaxed);
	switch (it->progress) {
	case PROGRESS_BYTES:
		return (double)done /
		       ((double)r->cfg.big_file_size * r->cfg.threads);
	case PROGRESS_FILES:
		return (double)done /
		       ((double)r->cfg.small_file_count * r->cfg.threads);
	default:
		return (double)(bench_now_ns() - t0) / (r->cfg.duration * 1e9);
	}
}

/* Merges the threads' results of the item that just ran. */
static void collect(struct run *r, const struct item *it,
		    struct report_row *row)
{
	memset(row, 0, sizeof(*row));
	row->item = it;
	uint64_t start = UINT64_MAX, end = 0;
	for (int i = 0; i < r->cfg.threads; i++) {
		const struct item_result *res = &r->workers[i].res;
		row->res.ops += res->ops;
		row->res.bytes += res->bytes;
		row->res.files += res->files;
		hist_merge(&row->res.hist, &res->hist);
		if (res->start_ns < start)
			start = res->start_ns;
		if (res->end_ns > end)
			end = res->end_ns;
	}
	row->seconds = end > start ? (double)(end - start) / 1e9 : 0;
}

static int run_items(struct run *r, struct report_row *rows)
{
	int n = 0;
	int bar = progress_enabled();
	pthread_barrier_wait(&r->barrier); /* setup done */
	int table = !r->json && !atomic_load(&r->abort);
	if (table)
		report_table_begin(stdout);
	for (int k = 0; k < r->nselected && !atomic_load(&r->abort); k++) {
		const struct item *it = &bench_items[r->selected[k]];
		atomic_store(&r->finished, 0);
		pthread_barrier_wait(&r->barrier); /* all prepared */
		uint64_t t0 = bench_now_ns();
		while (bar && atomic_load(&r->finished) < r->cfg.threads) {
			progress_draw(it->label, item_fraction(r, it, t0));
			usleep(100000);
		}
		pthread_barrier_wait(&r->barrier); /* all ran */
		if (bar)
			progress_clear();
		if (!atomic_load(&r->abort)) {
			collect(r, it, &rows[n]);
			if (!r->json)
				report_table_row(stdout, &r->cfg, &rows[n]);
			n++;
		}
		pthread_barrier_wait(&r->barrier); /* results read */
	}
	if (table)
		report_table_end(stdout);
	return n;
}

int main(int argc, char **argv)
{
	struct run r = {
		.cfg = {
			.threads = 1,
			.depth = 16,
			.block_size = 1u << 20,
			.big_file_size = 1u << 30,
			.small_file_size = 128u << 10,
			.small_file_count = 100,
			.io_file_size = 256u << 20,
			.duration = 5,
			.verify = 1,
		},
	};
	snprintf(r.dir, sizeof(r.dir), "mapfs-bench.%d", (int)getpid());
	if (parse_args(&r, argc, argv) < 0)
		return 2;
	struct nfs_target *tg = calloc((size_t)r.nurls, sizeof(*tg));
	char err[256];
	if (!tg)
		return 1;
	for (int i = 0; i < r.nurls; i++)
		if (target_parse(r.urls[i], &tg[i], err, sizeof(err)) < 0) {
			fprintf(stderr, "mapfs-bench: %s\n", err);
			return 2;
		}
	int nt = r.cfg.threads;
	r.workers = calloc((size_t)nt, sizeof(*r.workers));
	struct report_row *rows =
		calloc((size_t)r.nselected + 1, sizeof(*rows));
	pthread_t *tids = calloc((size_t)nt, sizeof(*tids));
	struct thread_arg *args = calloc((size_t)nt, sizeof(*args));
	if (!r.workers || !rows || !tids || !args) {
		fprintf(stderr, "mapfs-bench: out of memory\n");
		return 1;
	}
	/* Connections are made here, one after another, because libnfs seeds
	 * each context's xids from a counter that is not thread-safe. */
	int failed = 0;
	for (int i = 0; i < nt && !failed; i++) {
		struct worker *w = &r.workers[i];
		w->id = i;
		w->cfg = &r.cfg;
		w->abort = &r.abort;
		failed = conn_open(&w->conn, &tg[i % r.nurls]) < 0 ||
			 conn_open(&w->peer, &tg[(i + 1) % r.nurls]) < 0;
		w->have_peer = !failed;
		if (w->peer.failed)
			snprintf(w->conn.err, sizeof(w->conn.err),
				 "peer: %.400s", w->peer.err);
	}
	struct worker *w0 = &r.workers[0];
	if (!failed)
		failed = conn_mkdir(&w0->conn, &w0->conn.root, r.dir,
				    &w0->top) < 0;
	/* The other gateways of a cluster see the work dir within moments. */
	for (int i = 1; !failed && i < nt && i < r.nurls; i++) {
		struct bfh seen;
		int k = 0, rc;
		while ((rc = conn_lookup_try(&r.workers[i].conn,
					     &r.workers[i].conn.root, r.dir,
					     &seen)) == 1 &&
		       k++ < 5000)
			usleep(1000);
		failed = rc != 0;
	}
	if (!failed && r.cfg.block_size > w0->conn.wtmax)
		fprintf(stderr,
			"mapfs-bench: the server takes at most %u bytes per "
			"WRITE;"
			" big and small file writes use that\n",
			w0->conn.wtmax);
	int n = 0, started = 0;
	if (!failed) {
		pthread_barrier_init(&r.barrier, NULL, (unsigned)nt + 1);
		for (int i = 0; i < nt; i++) {
			r.workers[i].top = w0->top;
			args[i] = (struct thread_arg){ &r, &r.workers[i] };
			if (pthread_create(&tids[i], NULL, worker_main,
					   &args[i]) != 0) {
				fprintf(stderr,
					"mapfs-bench: pthread_create failed\n");
				return 1;
			}
			started++;
		}
		n = run_items(&r, rows);
		for (int i = 0; i < started; i++)
			pthread_join(tids[i], NULL);
		pthread_barrier_destroy(&r.barrier);
		if (!r.keep && !atomic_load(&r.abort) &&
		    conn_remove(&w0->conn, &w0->conn.root, r.dir, 1) < 0)
			r.abort = 1;
	}
	if (r.json)
		report_json(stdout, &r.cfg, r.url, &w0->conn, rows, n);
	int rc = 0;
	for (int i = 0; i < nt; i++) {
		struct worker *w = &r.workers[i];
		if (w->conn.failed) {
			fprintf(stderr, "mapfs-bench: thread %d: %s\n", i,
				w->conn.err);
			rc = 1;
		}
		conn_close(&w->conn);
		if (w->have_peer)
			conn_close(&w->peer);
		worker_free(w);
	}
	if (rc && !r.keep && started)
		fprintf(stderr, "mapfs-bench: work dir %s left in place\n",
			r.dir);
	free(tg);
	free(args);
	free(tids);
	free(rows);
	free(r.workers);
	return rc;
}
