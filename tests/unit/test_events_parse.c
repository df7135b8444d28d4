/*
 * The S3 event parser (events/parse.h): the shapes senders post (radosgw,
 * Amazon S3 through SNS, EventBridge), what is skipped, what is refused.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events/parse.h"

static int parse(const char *s, struct ev_batch *b)
{
	return ev_parse(s, strlen(s), b);
}

static void test_radosgw(void)
{
	struct ev_batch b;

	CU_ASSERT_FATAL(
		parse("{\"Records\":[{\"eventName\":\"ObjectCreated:Put\","
		      "\"s3\":{\"bucket\":{\"name\":\"bk\"},\"object\":"
		      "{\"key\":\"p/a b.txt\",\"size\":5}}},"
		      "{\"eventName\":\"ObjectRemoved:Delete\",\"s3\":"
		      "{\"bucket\":{\"name\":\"bk\"},\"object\":{\"key\":"
		      "\"p/gone\"}}},"
		      "{\"eventName\":\"ObjectTagging:Put\",\"s3\":"
		      "{\"bucket\":{\"name\":\"bk\"},\"object\":{\"key\":"
		      "\"p/t\"}}}]}",
		      &b) == 0);
	CU_ASSERT(b.n == 2 && b.skipped == 1);
	CU_ASSERT(!strcmp(b.recs[0].bucket, "bk") &&
		  !strcmp(b.recs[0].key, "p/a b.txt") && !b.recs[0].removed);
	CU_ASSERT(!strcmp(b.recs[1].key, "p/gone") && b.recs[1].removed);
	ev_batch_free(&b);
}

static void test_sns(void)
{
	struct ev_batch b;

	CU_ASSERT_FATAL(
		parse("{\"Type\":\"Notification\",\"Message\":"
		      "\"{\\\"Records\\\":[{\\\"eventName\\\":"
		      "\\\"ObjectCreated:CompleteMultipartUpload\\\","
		      "\\\"s3\\\":{\\\"bucket\\\":{\\\"name\\\":\\\"bk\\\"},"
		      "\\\"object\\\":{\\\"key\\\":\\\"a%2Bb+c\\\"}}}]}\"}",
		      &b) == 0);
	CU_ASSERT(b.n == 1 && !strcmp(b.recs[0].key, "a%2Bb+c"));
	ev_batch_free(&b);
	/* S3's test event, through SNS: nothing to take, not an error. */
	CU_ASSERT(parse("{\"Type\":\"Notification\",\"Message\":"
			"\"{\\\"Event\\\":\\\"s3:TestEvent\\\"}\"}",
			&b) == 0 &&
		  b.n == 0);
	ev_batch_free(&b);
	CU_ASSERT(
		parse("{\"Type\":\"SubscriptionConfirmation\",\"SubscribeURL\":"
		      "\"https://sns.eu-west-1.amazonaws.com/?x\"}",
		      &b) == 0);
	CU_ASSERT(b.confirm_url &&
		  !strcmp(b.confirm_url,
			  "https://sns.eu-west-1.amazonaws.com/?x"));
	ev_batch_free(&b);
	/* An envelope in an envelope is no S3 event. */
	CU_ASSERT(parse("{\"Type\":\"Notification\",\"Message\":"
			"\"{\\\"Type\\\":\\\"Notification\\\"}\"}",
			&b) == -EINVAL);
}

static void test_eventbridge(void)
{
	struct ev_batch b;

	CU_ASSERT_FATAL(parse("{\"detail-type\":\"Object Deleted\",\"detail\":"
			      "{\"bucket\":{\"name\":\"bk\"},\"object\":"
			      "{\"key\":\"k\"}}}",
			      &b) == 0);
	CU_ASSERT(b.n == 1 && b.recs[0].removed && !strcmp(b.recs[0].key, "k"));
	ev_batch_free(&b);
}

static void test_refused(void)
{
	static const char *const bad[] = {
		"",
		"not json",
		"[]",
		"{}",
		"{\"Records\":{}}",
		"{\"Records\":[]}x",
		"{\"Type\":\"Notification\"}",
		"{\"a\":1,\"a\":2}",
		"{\"detail-type\":\"Object Created\",\"detail\":{}}",
	};
	struct ev_batch b;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse(bad[i], &b);

		if (rc != -EINVAL)
			fprintf(stderr, "accepted: %s\n", bad[i]);
		CU_ASSERT(rc == -EINVAL);
	}
	/* A record without a key or bucket is skipped, not taken. */
	CU_ASSERT(
		parse("{\"Records\":[{\"eventName\":\"ObjectCreated:Put\","
		      "\"s3\":{\"object\":{\"key\":\"k\"}}},"
		      "{\"eventName\":\"ObjectCreated:Put\",\"s3\":{\"bucket\":"
		      "{\"name\":\"b\"},\"object\":{\"key\":\"\"}}}]}",
		      &b) == 0);
	CU_ASSERT(b.n == 0 && b.skipped == 2);
	ev_batch_free(&b);
}

static void test_bounded(void)
{
	static const char rec[] = "{\"eventName\":\"ObjectCreated:Put\",\"s3\":"
				  "{\"bucket\":{\"name\":\"b\"},\"object\":"
				  "{\"key\":\"k\"}}}";
	size_t n = EV_RECORDS_MAX + 5, cap = 16 + n * (sizeof(rec) + 1);
	char *s = malloc(cap), *p = s;
	struct ev_batch b;

	CU_ASSERT_FATAL(s != NULL);
	p += sprintf(p, "{\"Records\":[");
	for (size_t i = 0; i < n; i++)
		p += sprintf(p, "%s%s", i ? "," : "", rec);
	sprintf(p, "]}");
	CU_ASSERT_FATAL(parse(s, &b) == 0);
	CU_ASSERT(b.n == EV_RECORDS_MAX && b.skipped == 5);
	ev_batch_free(&b);
	free(s);
}

static void test_key_decode(void)
{
	char out[16];

	CU_ASSERT(ev_key_decode("a+b%2Bc%2f", out, sizeof(out)) == 0 &&
		  !strcmp(out, "a b+c/"));
	CU_ASSERT(ev_key_decode("%zz", out, sizeof(out)) == -EINVAL);
	CU_ASSERT(ev_key_decode("%4", out, sizeof(out)) == -EINVAL);
	CU_ASSERT(ev_key_decode("a%00b", out, sizeof(out)) == -EINVAL);
	CU_ASSERT(ev_key_decode("0123456789abcdef", out, sizeof(out)) ==
		  -EINVAL);
	CU_ASSERT(ev_key_decode("0123456789abcde", out, sizeof(out)) == 0);
}

int main(void)
{
	static const struct {
		const char *name;
		CU_TestFunc fn;
	} tests[] = {
		{ "radosgw records", test_radosgw },
		{ "SNS envelope, confirmation", test_sns },
		{ "EventBridge", test_eventbridge },
		{ "refused", test_refused },
		{ "bounded", test_bounded },
		{ "key decoding", test_key_decode },
	};
	CU_pSuite suite;
	unsigned failed;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	suite = CU_add_suite("events_parse", NULL, NULL);
	for (size_t i = 0; suite && i < sizeof(tests) / sizeof(tests[0]); i++)
		if (!CU_add_test(suite, tests[i].name, tests[i].fn))
			suite = NULL;
	if (!suite) {
		CU_cleanup_registry();
		return 1;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
