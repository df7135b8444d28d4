/*
 * metrics/metrics.c - per-thread counter shards, summed on scrape.
 *
 * A shard has one writer (its thread), so a bump is a plain load and a
 * relaxed atomic store: no read-modify-write, no lock, no shared cache
 * line.  The scraper reads with relaxed atomic loads under shard_lock,
 * which only shard creation, thread exit and scrapes take.
 */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Latency bucket bounds, seconds: 100 us to 10 s. */
static const double hist_bounds[] = { 0.0001, 0.00025, 0.0005, 0.001,
				      0.0025, 0.005,   0.01,   0.025,
				      0.05,   0.1,     0.25,   0.5,
				      1,      2.5,     5,      10 };
#define NBOUNDS (sizeof(hist_bounds) / sizeof(hist_bounds[0]))
#define NBUCKETS (NBOUNDS + 1) /* the last is +Inf */

#define MAX_PROGS 8
#define MAX_PROCS 64 /* per program */
#define MAX_COLLECTORS 8

struct shard {
	struct shard *next, *prev;
	uint64_t c[MET_NCOUNTERS];
	uint64_t calls[METRICS_PROC_SLOTS];
	uint64_t sum_ns[METRICS_PROC_SLOTS];
	uint64_t hist[METRICS_PROC_SLOTS][NBUCKETS];
	uint64_t h_sum_ns[MET_NHISTS];
	uint64_t h[MET_NHISTS][NBUCKETS];
};

struct counter_desc {
	const char *name, *label, *help;
};

#define METRICS_DESC(id, name, label, help) { name, label, help },
static const struct counter_desc counters[MET_NCOUNTERS] = { METRICS_COUNTERS(
	METRICS_DESC) };
#undef METRICS_DESC

#define METRICS_HDESC(id, name, help) { name, "", help },
static const struct counter_desc hists[MET_NHISTS] = { METRICS_HISTOGRAMS(
	METRICS_HDESC) };
#undef METRICS_HDESC

struct proc_slot {
	const char *prog_name, *proc_name;
};

struct prog_map {
	uint32_t prog, vers;
	int16_t slot[MAX_PROCS]; /* -1: not measured */
};

/* The process-wide registry (see metrics.h for why it is global). */
static pthread_mutex_t shard_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shard *shards; /* live threads' shards */
static struct shard retired; /* sums of exited threads' shards */
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t shard_key;
static __thread struct shard *my_shard;

/* Written before the loops start, read without a lock after. */
static struct prog_map progs[MAX_PROGS];
static int nprogs;
static struct proc_slot slots[METRICS_PROC_SLOTS];
static int nslots;

static pthread_mutex_t coll_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	metrics_collect_fn fn;
	void *arg;
} collectors[MAX_COLLECTORS];
static int ncollectors;

static uint64_t ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static size_t bucket_of(uint64_t ns);

static void bump(uint64_t *p, uint64_t n)
{
	__atomic_store_n(p, *p + n, __ATOMIC_RELAXED);
}

/* Add every value of s into into (both under shard_lock). */
static void shard_fold(struct shard *into, const struct shard *s)
{
	for (size_t i = 0; i < MET_NCOUNTERS; i++)
		into->c[i] += ld(&s->c[i]);
	for (size_t i = 0; i < METRICS_PROC_SLOTS; i++) {
		into->calls[i] += ld(&s->calls[i]);
		into->sum_ns[i] += ld(&s->sum_ns[i]);
		for (size_t b = 0; b < NBUCKETS; b++)
			into->hist[i][b] += ld(&s->hist[i][b]);
	}
	for (size_t i = 0; i < MET_NHISTS; i++) {
		into->h_sum_ns[i] += ld(&s->h_sum_ns[i]);
		for (size_t b = 0; b < NBUCKETS; b++)
			into->h[i][b] += ld(&s->h[i][b]);
	}
}

/* Thread exit: keep the thread's counts in the retired total. */
static void shard_retire(void *p)
{
	struct shard *s = p;

	pthread_mutex_lock(&shard_lock);
	shard_fold(&retired, s);
	if (s->prev)
		s->prev->next = s->next;
	else
		shards = s->next;
	if (s->next)
		s->next->prev = s->prev;
	pthread_mutex_unlock(&shard_lock);
	free(s);
}

static void key_init(void)
{
	pthread_key_create(&shard_key, shard_retire);
}

/* The calling thread's shard, made on first use; NULL without memory. */
static struct shard *shard_self(void)
{
	struct shard *s = my_shard;

	if (s)
		return s;
	pthread_once(&key_once, key_init);
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL; /* counts of this bump are lost, never blocked */
	pthread_mutex_lock(&shard_lock);
	s->next = shards;
	if (shards)
		shards->prev = s;
	shards = s;
	pthread_mutex_unlock(&shard_lock);
	pthread_setspecific(shard_key, s);
	my_shard = s;
	return s;
}

void metrics_add(enum metrics_counter id, uint64_t n)
{
	struct shard *s = shard_self();

	if (s && (unsigned)id < MET_NCOUNTERS)
		bump(&s->c[id], n);
}

void metrics_store_op(enum metrics_store_op op, int err, uint64_t bytes)
{
	if ((unsigned)op >= MET_NOPS)
		return;
	metrics_inc(MET_STORE_REQ_GET + op);
	if (err < 0 && err != -ENOENT)
		metrics_inc(MET_STORE_ERR_GET + op);
	if (!bytes)
		return;
	if (op == MET_OP_GET)
		metrics_add(MET_STORE_BYTES_GET, bytes);
	else if (op == MET_OP_PUT)
		metrics_add(MET_STORE_BYTES_PUT, bytes);
	else if (op == MET_OP_MPU)
		metrics_add(MET_STORE_BYTES_MPU, bytes);
}

void metrics_s3_try(const char *method, bool retry)
{
	static const char *const methods[] = { "GET", "HEAD", "PUT", "POST",
					       "DELETE" };

	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		if (strcmp(method, methods[i]))
			continue;
		metrics_inc(MET_S3_TRIES_GET + i);
		if (retry)
			metrics_inc(MET_S3_RETRY_GET + i);
		return;
	}
}

static struct prog_map *prog_find(uint32_t prog, uint32_t vers)
{
	for (int i = 0; i < nprogs; i++)
		if (progs[i].prog == prog && progs[i].vers == vers)
			return &progs[i];
	return NULL;
}

void metrics_rpc_register(uint32_t prog, uint32_t vers, uint32_t proc,
			  const char *prog_name, const char *proc_name)
{
	struct prog_map *pm;

	if (proc >= MAX_PROCS || !proc_name)
		return;
	pthread_mutex_lock(&shard_lock);
	pm = prog_find(prog, vers);
	if (!pm && nprogs < MAX_PROGS) {
		pm = &progs[nprogs++];
		pm->prog = prog;
		pm->vers = vers;
		memset(pm->slot, 0xff, sizeof(pm->slot));
	}
	if (pm && pm->slot[proc] < 0 && nslots < METRICS_PROC_SLOTS) {
		slots[nslots] = (struct proc_slot){ prog_name, proc_name };
		pm->slot[proc] = (int16_t)nslots++;
	}
	pthread_mutex_unlock(&shard_lock);
}

void metrics_rpc_call(uint32_t prog, uint32_t vers, uint32_t proc, uint64_t ns)
{
	struct prog_map *pm = prog_find(prog, vers);
	struct shard *s;
	size_t b;
	int slot;

	if (!pm || proc >= MAX_PROCS || (slot = pm->slot[proc]) < 0)
		return;
	s = shard_self();
	if (!s)
		return;
	b = bucket_of(ns);
	bump(&s->calls[slot], 1);
	bump(&s->sum_ns[slot], ns);
	bump(&s->hist[slot][b], 1);
}

/* The bucket of a duration of ns nanoseconds. */
static size_t bucket_of(uint64_t ns)
{
	size_t b = 0;

	while (b < NBOUNDS && (double)ns > hist_bounds[b] * 1e9)
		b++;
	return b;
}

void metrics_observe(enum metrics_hist id, uint64_t ns)
{
	struct shard *s;

	if ((unsigned)id >= MET_NHISTS || !(s = shard_self()))
		return;
	bump(&s->h_sum_ns[id], ns);
	bump(&s->h[id][bucket_of(ns)], 1);
}

uint64_t metrics_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void metrics_buf_printf(struct metrics_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		size_t room = b->cap - b->len;

		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if ((size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap ? b->cap * 2 : 16384;

		while (cap - b->len <= (size_t)n)
			cap *= 2;
		char *p = realloc(b->p, cap);

		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

void metrics_buf_gauge(struct metrics_buf *b, const char *name,
		       const char *help, const char *labels, double value)
{
	if (help)
		metrics_buf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", name,
				   help, name);
	metrics_buf_printf(b, "%s%s%s%s %.17g\n", name, *labels ? "{" : "",
			   labels, *labels ? "}" : "", value);
}

int metrics_collector_add(metrics_collect_fn fn, void *arg)
{
	int rc = -ENOSPC;

	pthread_mutex_lock(&coll_lock);
	if (ncollectors < MAX_COLLECTORS) {
		collectors[ncollectors].fn = fn;
		collectors[ncollectors++].arg = arg;
		rc = 0;
	}
	pthread_mutex_unlock(&coll_lock);
	return rc;
}

void metrics_collectors_clear(void)
{
	pthread_mutex_lock(&coll_lock);
	ncollectors = 0;
	pthread_mutex_unlock(&coll_lock);
}

/* Everything counted so far, into *sum. */
static void shards_sum(struct shard *sum)
{
	pthread_mutex_lock(&shard_lock);
	*sum = retired;
	for (struct shard *s = shards; s; s = s->next)
		shard_fold(sum, s);
	pthread_mutex_unlock(&shard_lock);
}

uint64_t metrics_get(enum metrics_counter id)
{
	uint64_t v;

	if ((unsigned)id >= MET_NCOUNTERS)
		return 0;
	pthread_mutex_lock(&shard_lock);
	v = retired.c[id];
	for (struct shard *s = shards; s; s = s->next)
		v += ld(&s->c[id]);
	pthread_mutex_unlock(&shard_lock);
	return v;
}

static void render_counters(struct metrics_buf *b, const struct shard *sum)
{
	const char *prev = "";

	for (size_t i = 0; i < MET_NCOUNTERS; i++) {
		const struct counter_desc *d = &counters[i];

		if (strcmp(d->name, prev))
			metrics_buf_printf(b,
					   "# HELP %s %s\n# TYPE %s counter\n",
					   d->name, d->help, d->name);
		prev = d->name;
		metrics_buf_printf(b, "%s%s%s%s %llu\n", d->name,
				   *d->label ? "{" : "", d->label,
				   *d->label ? "}" : "",
				   (unsigned long long)sum->c[i]);
	}
	/* Closed counts only connections that were accepted. */
	metrics_buf_gauge(
		b, "mapfs_connections", "Client TCP connections open", "",
		(double)(sum->c[MET_CONN_ACCEPTED] - sum->c[MET_CONN_CLOSED]));
}

static void render_rpc(struct metrics_buf *b, const struct shard *sum)
{
	metrics_buf_printf(b, "# HELP mapfs_rpc_calls_total RPC calls "
			      "answered, by program and procedure\n"
			      "# TYPE mapfs_rpc_calls_total counter\n");
	for (int i = 0; i < nslots; i++)
		metrics_buf_printf(b,
				   "mapfs_rpc_calls_total{program=\"%s\",proc="
				   "\"%s\"} %llu\n",
				   slots[i].prog_name, slots[i].proc_name,
				   (unsigned long long)sum->calls[i]);
	metrics_buf_printf(b, "# HELP mapfs_rpc_duration_seconds Time from a "
			      "call's arrival to its reply\n"
			      "# TYPE mapfs_rpc_duration_seconds histogram\n");
	for (int i = 0; i < nslots; i++) {
		const char *pg = slots[i].prog_name, *pc = slots[i].proc_name;
		uint64_t cum = 0;

		for (size_t k = 0; k < NBUCKETS; k++) {
			cum += sum->hist[i][k];
			if (k < NBOUNDS)
				metrics_buf_printf(b,
						   "mapfs_rpc_duration_seconds_"
						   "bucket{program=\"%s\",proc="
						   "\"%s\",le=\"%g\"} %llu\n",
						   pg, pc, hist_bounds[k],
						   (unsigned long long)cum);
			else
				metrics_buf_printf(b,
						   "mapfs_rpc_duration_seconds_"
						   "bucket{program=\"%s\",proc="
						   "\"%s\",le=\"+Inf\"} %llu\n",
						   pg, pc,
						   (unsigned long long)cum);
		}
		metrics_buf_printf(b,
				   "mapfs_rpc_duration_seconds_sum{program=\"%"
				   "s\",proc=\"%s\"} %.9f\n"
				   "mapfs_rpc_duration_seconds_count{program="
				   "\"%s\",proc=\"%s\"} %llu\n",
				   pg, pc, (double)sum->sum_ns[i] / 1e9, pg, pc,
				   (unsigned long long)cum);
	}
}

/* The histograms of METRICS_HISTOGRAMS, in the text format. */
static void render_hists(struct metrics_buf *b, const struct shard *sum)
{
	for (size_t i = 0; i < MET_NHISTS; i++) {
		const char *n = hists[i].name;
		uint64_t cum = 0;

		metrics_buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", n,
				   hists[i].help, n);
		for (size_t k = 0; k < NBUCKETS; k++) {
			cum += sum->h[i][k];
			if (k < NBOUNDS)
				metrics_buf_printf(
					b, "%s_bucket{le=\"%g\"} %llu\n", n,
					hist_bounds[k],
					(unsigned long long)cum);
			else
				metrics_buf_printf(
					b, "%s_bucket{le=\"+Inf\"} %llu\n", n,
					(unsigned long long)cum);
		}
		metrics_buf_printf(b, "%s_sum %.9f\n%s_count %llu\n", n,
				   (double)sum->h_sum_ns[i] / 1e9, n,
				   (unsigned long long)cum);
	}
}

/* See metrics.h. */
int metrics_rpc_each(metrics_rpc_fn fn, void *ctx)
{
	struct shard *sum = malloc(sizeof(*sum));

	if (!sum)
		return -ENOMEM;
	shards_sum(sum);
	for (int i = 0; i < nslots; i++)
		fn(ctx, slots[i].prog_name, slots[i].proc_name, sum->calls[i],
		   sum->sum_ns[i]);
	free(sum);
	return 0;
}

int metrics_render(struct metrics_buf *b)
{
	struct shard *sum = malloc(sizeof(*sum));

	b->len = 0;
	b->oom = false;
	if (!sum)
		goto out_oom;
	shards_sum(sum);
	render_counters(b, sum);
	render_rpc(b, sum);
	render_hists(b, sum);
	free(sum);
	pthread_mutex_lock(&coll_lock);
	for (int i = 0; i < ncollectors; i++)
		collectors[i].fn(collectors[i].arg, b);
	pthread_mutex_unlock(&coll_lock);
	if (!b->oom)
		return 0;
out_oom:
	free(b->p);
	*b = (struct metrics_buf){ 0 };
	return -ENOMEM;
}

/* ---- the live view ------------------------------------------------- */

const char *const metrics_kind_names[METRICS_NKINDS] = { "read", "write",
							 "meta", "change",
							 "lock", "mount" };

static enum metrics_kind kind_of(const char *prog, const char *proc)
{
	static const char *const changes[] = { "SETATTR", "CREATE", "MKDIR",
					       "SYMLINK", "MKNOD",  "REMOVE",
					       "RMDIR",   "RENAME", "LINK" };

	if (!strcmp(prog, "nlm") || !strcmp(prog, "nsm"))
		return METRICS_K_LOCK;
	if (strcmp(prog, "nfs"))
		return METRICS_K_MOUNT;
	if (!strcmp(proc, "READ"))
		return METRICS_K_READ;
	if (!strcmp(proc, "WRITE") || !strcmp(proc, "COMMIT"))
		return METRICS_K_WRITE;
	for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++)
		if (!strcmp(proc, changes[i]))
			return METRICS_K_CHANGE;
	return METRICS_K_META;
}

static void live_add(void *ctx, const char *prog, const char *proc,
		     uint64_t calls, uint64_t sum_ns)
{
	struct metrics_live *l = ctx;
	enum metrics_kind k = kind_of(prog, proc);

	l->calls[k] += calls;
	l->ns[k] += sum_ns;
}

/* See metrics.h. */
int metrics_live(struct metrics_live *out)
{
	memset(out, 0, sizeof(*out));
	out->t_ms = metrics_now_ns() / 1000000;
	out->cache_hits = metrics_get(MET_CACHE_HITS);
	out->cache_misses = metrics_get(MET_CACHE_MISSES);
	out->store_in = metrics_get(MET_STORE_BYTES_GET);
	out->store_out = metrics_get(MET_STORE_BYTES_PUT) +
			 metrics_get(MET_STORE_BYTES_MPU);
	return metrics_rpc_each(live_add, out);
}

/* See metrics.h. */
void metrics_live_format(const struct metrics_live *l, char *buf, size_t cap)
{
	size_t n = (size_t)snprintf(buf, cap, "%" PRIu64, l->t_ms);

	for (int i = 0; i < METRICS_NKINDS && n < cap; i++)
		n += (size_t)snprintf(buf + n, cap - n, " %" PRIu64 " %" PRIu64,
				      l->calls[i], l->ns[i]);
	if (n < cap)
		snprintf(buf + n, cap - n,
			 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64,
			 l->cache_hits, l->cache_misses, l->store_in,
			 l->store_out);
}

/* See metrics.h. */
int metrics_live_parse(const char *text, struct metrics_live *out)
{
	uint64_t *f[1 + 2 * METRICS_NKINDS + 4];
	size_t n = 0;
	char *end;

	memset(out, 0, sizeof(*out));
	f[n++] = &out->t_ms;
	for (int i = 0; i < METRICS_NKINDS; i++) {
		f[n++] = &out->calls[i];
		f[n++] = &out->ns[i];
	}
	f[n++] = &out->cache_hits;
	f[n++] = &out->cache_misses;
	f[n++] = &out->store_in;
	f[n++] = &out->store_out;
	for (size_t i = 0; i < n; i++) {
		while (*text == ' ')
			text++;
		if (*text < '0' || *text > '9')
			return -EINVAL;
		*f[i] = strtoull(text, &end, 10);
		text = end;
	}
	while (*text == ' ')
		text++;
	return *text ? -EINVAL : 0;
}
