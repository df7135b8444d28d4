/*
 * Unit tests for metrics/metrics.c: shards summed across threads (also
 * after a thread exits), labelled families, cumulative histograms,
 * collectors.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics.h"

#define THREADS 4
#define BUMPS 10000

/* The value of the sample line that starts with name (NULL if none). */
static const char *sample(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = text; p && *p;
	     p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, name, n) && p[n] == ' ')
			return p + n + 1;
	return NULL;
}

static double value(const char *text, const char *name)
{
	const char *v = sample(text, name);

	return v ? strtod(v, NULL) : -1;
}

static void *bumper(void *arg)
{
	(void)arg;
	for (int i = 0; i < BUMPS; i++) {
		metrics_inc(MET_CACHE_HITS);
		metrics_add(MET_NFS_READ_BYTES, 3);
	}
	return NULL;
}

/* Threads that have exited still count: their shard was folded. */
static void test_threads_sum(void)
{
	uint64_t hits0 = metrics_get(MET_CACHE_HITS);
	pthread_t t[THREADS];
	struct metrics_buf b = { 0 };

	for (int i = 0; i < THREADS; i++)
		CU_ASSERT_FATAL(pthread_create(&t[i], NULL, bumper, NULL) == 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	CU_ASSERT(metrics_get(MET_CACHE_HITS) - hits0 == THREADS * BUMPS);
	CU_ASSERT_FATAL(metrics_render(&b) == 0);
	CU_ASSERT(value(b.p, "mapfs_cache_reads_total{result=\"hit\"}") ==
		  (double)(hits0 + THREADS * BUMPS));
	CU_ASSERT(value(b.p, "mapfs_nfs_bytes_total{dir=\"read\"}") ==
		  (double)(3 * THREADS * BUMPS));
	/* One HELP and TYPE per family, not per label. */
	CU_ASSERT(strstr(b.p, "# TYPE mapfs_nfs_bytes_total counter\n") !=
		  NULL);
	CU_ASSERT(strstr(strstr(b.p, "# TYPE mapfs_nfs_bytes_total") + 1,
			 "# TYPE mapfs_nfs_bytes_total") == NULL);
	free(b.p);
}

static void test_store_and_s3(void)
{
	struct metrics_buf b = { 0 };

	metrics_store_op(MET_OP_GET, 0, 100);
	metrics_store_op(MET_OP_GET, -5, 0);
	metrics_store_op(MET_OP_HEAD, -2, 0); /* -ENOENT is an answer */
	metrics_store_op(MET_OP_PUT, 0, 7);
	metrics_s3_try("PUT", false);
	metrics_s3_try("PUT", true);
	metrics_s3_try("BREW", true); /* unknown methods are not counted */
	CU_ASSERT_FATAL(metrics_render(&b) == 0);
	CU_ASSERT(value(b.p, "mapfs_store_requests_total{op=\"get\"}") == 2);
	CU_ASSERT(value(b.p, "mapfs_store_errors_total{op=\"get\"}") == 1);
	CU_ASSERT(value(b.p, "mapfs_store_errors_total{op=\"head\"}") == 0);
	CU_ASSERT(value(b.p, "mapfs_store_bytes_total{op=\"get\"}") == 100);
	CU_ASSERT(value(b.p, "mapfs_store_bytes_total{op=\"put\"}") == 7);
	CU_ASSERT(value(b.p, "mapfs_s3_http_requests_total{method=\"PUT\"}") ==
		  2);
	CU_ASSERT(value(b.p, "mapfs_s3_retries_total{method=\"PUT\"}") == 1);
	free(b.p);
}

static void test_histogram(void)
{
	struct metrics_buf b = { 0 };

	metrics_rpc_register(100003, 3, 6, "nfs", "READ");
	metrics_rpc_register(100003, 3, 6, "nfs", "READ"); /* ignored */
	metrics_rpc_call(100003, 3, 6, 50000);             /* 50 us */
	metrics_rpc_call(100003, 3, 6, 2000000);           /* 2 ms */
	metrics_rpc_call(100003, 3, 6, 60000000000ull);    /* 60 s */
	metrics_rpc_call(100003, 3, 7, 1000);              /* not registered */
	CU_ASSERT_FATAL(metrics_render(&b) == 0);
	CU_ASSERT(
		value(b.p,
		      "mapfs_rpc_calls_total{program=\"nfs\",proc=\"READ\"}") ==
		3);
	CU_ASSERT(value(b.p, "mapfs_rpc_duration_seconds_bucket{program="
			     "\"nfs\",proc=\"READ\",le=\"0.0001\"}") == 1);
	CU_ASSERT(value(b.p, "mapfs_rpc_duration_seconds_bucket{program="
			     "\"nfs\",proc=\"READ\",le=\"0.001\"}") == 1);
	CU_ASSERT(value(b.p, "mapfs_rpc_duration_seconds_bucket{program="
			     "\"nfs\",proc=\"READ\",le=\"0.0025\"}") == 2);
	CU_ASSERT(value(b.p, "mapfs_rpc_duration_seconds_bucket{program="
			     "\"nfs\",proc=\"READ\",le=\"10\"}") == 2);
	CU_ASSERT(value(b.p, "mapfs_rpc_duration_seconds_bucket{program="
			     "\"nfs\",proc=\"READ\",le=\"+Inf\"}") == 3);
	CU_ASSERT(value(b.p, "mapfs_rpc_duration_seconds_count{program=\"nfs\","
			     "proc=\"READ\"}") == 3);
	CU_ASSERT(sample(b.p, "mapfs_rpc_calls_total{program=\"nfs\",proc="
			      "\"WRITE\"}") == NULL);
	free(b.p);
}

/* ctl stats' figures: calls by kind, and their text form both ways. */
static void test_live(void)
{
	struct metrics_live l, back;
	char text[METRICS_LIVE_TEXT];

	metrics_rpc_register(100003, 3, 8, "nfs", "CREATE");
	metrics_rpc_register(100021, 4, 2, "nlm", "LOCK");
	metrics_rpc_call(100003, 3, 8, 3000);
	metrics_rpc_call(100021, 4, 2, 5000);
	CU_ASSERT_FATAL(metrics_live(&l) == 0);
	CU_ASSERT(l.calls[METRICS_K_CHANGE] == 1 &&
		  l.ns[METRICS_K_CHANGE] == 3000);
	CU_ASSERT(l.calls[METRICS_K_LOCK] == 1 && l.ns[METRICS_K_LOCK] == 5000);
	/* READ, from test_histogram: three calls. */
	CU_ASSERT(l.calls[METRICS_K_READ] == 3);
	CU_ASSERT(l.calls[METRICS_K_WRITE] == 0 && l.t_ms > 0);
	metrics_live_format(&l, text, sizeof(text));
	CU_ASSERT(metrics_live_parse(text, &back) == 0);
	CU_ASSERT(memcmp(&l, &back, sizeof(l)) == 0);
	CU_ASSERT(metrics_live_parse("1 2 3", &back) == -EINVAL);
	CU_ASSERT(metrics_live_parse("x", &back) == -EINVAL);
	strcat(text, " 9");
	CU_ASSERT(metrics_live_parse(text, &back) == -EINVAL);
}

/* The histograms beside the RPC ones: cumulative buckets, sum, count. */
static void test_named_histogram(void)
{
	struct metrics_buf b = { 0 };

	metrics_observe(MET_H_CLUSTER_APPLY_LAG, 3000000);        /* 3 ms */
	metrics_observe(MET_H_CLUSTER_APPLY_LAG, 40000000);       /* 40 ms */
	metrics_observe(MET_H_CLUSTER_APPLY_LAG, 20000000000ull); /* 20 s */
	metrics_observe(MET_NHISTS, 1); /* no such histogram: ignored */
	CU_ASSERT_FATAL(metrics_render(&b) == 0);
	CU_ASSERT(strstr(b.p, "# TYPE mapfs_cluster_apply_lag_seconds "
			      "histogram\n") != NULL);
	CU_ASSERT(value(b.p, "mapfs_cluster_apply_lag_seconds_bucket{le="
			     "\"0.0025\"}") == 0);
	CU_ASSERT(value(b.p, "mapfs_cluster_apply_lag_seconds_bucket{le="
			     "\"0.005\"}") == 1);
	CU_ASSERT(value(b.p, "mapfs_cluster_apply_lag_seconds_bucket{le="
			     "\"0.05\"}") == 2);
	CU_ASSERT(value(b.p, "mapfs_cluster_apply_lag_seconds_bucket{le="
			     "\"10\"}") == 2);
	CU_ASSERT(value(b.p, "mapfs_cluster_apply_lag_seconds_bucket{le="
			     "\"+Inf\"}") == 3);
	CU_ASSERT(value(b.p, "mapfs_cluster_apply_lag_seconds_count") == 3);
	CU_ASSERT(value(b.p, "mapfs_cluster_apply_lag_seconds_sum") > 20.04 &&
		  value(b.p, "mapfs_cluster_apply_lag_seconds_sum") < 20.05);
	free(b.p);
}

static void collect(void *arg, struct metrics_buf *b)
{
	metrics_buf_gauge(b, "mapfs_test_gauge", "a test", "", *(double *)arg);
}

static void test_collectors(void)
{
	struct metrics_buf b = { 0 };
	double v = 42.5;

	CU_ASSERT_FATAL(metrics_collector_add(collect, &v) == 0);
	CU_ASSERT_FATAL(metrics_render(&b) == 0);
	CU_ASSERT(strstr(b.p, "# TYPE mapfs_test_gauge gauge\n") != NULL);
	CU_ASSERT(value(b.p, "mapfs_test_gauge") == 42.5);
	metrics_collectors_clear();
	CU_ASSERT_FATAL(metrics_render(&b) == 0);
	CU_ASSERT(sample(b.p, "mapfs_test_gauge") == NULL);
	free(b.p);
}

int main(void)
{
	CU_initialize_registry();
	CU_pSuite s = CU_add_suite("metrics", NULL, NULL);
	CU_add_test(s, "threads sum, exited ones too", test_threads_sum);
	CU_add_test(s, "store and s3 families", test_store_and_s3);
	CU_add_test(s, "latency histogram", test_histogram);
	CU_add_test(s, "named histograms", test_named_histogram);
	CU_add_test(s, "collectors", test_collectors);
	CU_add_test(s, "the live view's figures", test_live);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
