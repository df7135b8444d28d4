/*
 * tests/unit/test_rpc_record.c - TCP record marking parser (RFC 5531 s.11).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "rpc/rpc.h"

#define LAST 0x80000000u

/* Append one fragment (mark + data) to out; returns the new length. */
static size_t frag(uint8_t *out, size_t off, bool last, const char *data,
		   uint32_t len)
{
	uint32_t m = (last ? LAST : 0) | len;

	out[off++] = (uint8_t)(m >> 24);
	out[off++] = (uint8_t)(m >> 16);
	out[off++] = (uint8_t)(m >> 8);
	out[off++] = (uint8_t)m;
	memcpy(out + off, data, len);
	return off + len;
}

/*
 * Feed stream in pieces of at most step bytes (first piece `first` bytes
 * when nonzero); collect up to 8 records into recs/lens.  Returns the
 * number of records, or the parser's negative error.
 */
static int feed_all(struct rpc_recparser *p, const uint8_t *s, size_t n,
		    size_t first, size_t step, uint8_t **recs, size_t *lens)
{
	size_t off = 0, piece, used;
	int nrec = 0;

	while (off < n) {
		piece = (off == 0 && first) ? first : step;
		if (piece > n - off)
			piece = n - off;
		used = 0;
		/* A piece may hold several records: feed until it is used. */
		do {
			uint8_t *rec;
			size_t rl;
			ssize_t r = rpc_recparser_feed(p, s + off + used,
						       piece - used, &rec, &rl);

			if (r < 0)
				return (int)r;
			if (r == 0 && !rec)
				return -EPIPE; /* no progress: parser bug */
			used += (size_t)r;
			if (rec) {
				if (nrec == 8)
					return -E2BIG;
				recs[nrec] = rec;
				lens[nrec++] = rl;
			}
		} while (used < piece);
		off += piece;
	}
	return nrec;
}

static void free_recs(uint8_t **recs, int n)
{
	for (int i = 0; i < n; i++)
		rpc_record_free(recs[i]);
}

static void test_single_fragment(void)
{
	struct rpc_recparser p;
	uint8_t s[64], *rec;
	size_t n = frag(s, 0, true, "hello", 5), rl;
	ssize_t r;

	rpc_recparser_init(&p, 1024);
	r = rpc_recparser_feed(&p, s, n, &rec, &rl);
	CU_ASSERT_EQUAL(r, (ssize_t)n);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rec);
	CU_ASSERT_EQUAL(rl, 5);
	CU_ASSERT_EQUAL(memcmp(rec, "hello", 5), 0);
	rpc_record_free(rec);
	/* Nothing buffered: more input starts a new record. */
	r = rpc_recparser_feed(&p, s, 3, &rec, &rl);
	CU_ASSERT_EQUAL(r, 3);
	CU_ASSERT_PTR_NULL(rec);
	rpc_recparser_free(&p);
}

static void test_multi_fragment(void)
{
	struct rpc_recparser p;
	uint8_t s[64], *recs[8];
	size_t n = 0, lens[8];
	int k;

	n = frag(s, n, false, "ab", 2);
	n = frag(s, n, false, "cde", 3);
	n = frag(s, n, true, "f", 1);
	rpc_recparser_init(&p, 1024);
	k = feed_all(&p, s, n, 0, n, recs, lens);
	CU_ASSERT_EQUAL_FATAL(k, 1);
	CU_ASSERT_EQUAL(lens[0], 6);
	CU_ASSERT_EQUAL(memcmp(recs[0], "abcdef", 6), 0);
	free_recs(recs, k);
	rpc_recparser_free(&p);
}

/* Two multi-fragment records, split at every point and byte by byte. */
static void test_any_split(void)
{
	struct rpc_recparser p;
	uint8_t s[128], *recs[8];
	size_t n = 0, lens[8];
	int k;

	n = frag(s, n, false, "0123", 4);
	n = frag(s, n, true, "456789", 6);
	n = frag(s, n, false, "x", 1);
	n = frag(s, n, false, "yz", 2);
	n = frag(s, n, true, "!", 1);
	for (size_t first = 0; first < n; first++) {
		size_t step = first ? n : 1; /* first == 0: byte at a time */

		rpc_recparser_init(&p, 1024);
		k = feed_all(&p, s, n, first, step, recs, lens);
		CU_ASSERT_EQUAL(k, 2);
		if (k == 2) {
			CU_ASSERT_EQUAL(lens[0], 10);
			CU_ASSERT_EQUAL(memcmp(recs[0], "0123456789", 10), 0);
			CU_ASSERT_EQUAL(lens[1], 4);
			CU_ASSERT_EQUAL(memcmp(recs[1], "xyz!", 4), 0);
		}
		if (k > 0)
			free_recs(recs, k);
		rpc_recparser_free(&p);
	}
}

/* Several records in one buffer: each feed stops at a record's end. */
static void test_several_in_one_buffer(void)
{
	struct rpc_recparser p;
	uint8_t s[128], *rec;
	size_t n = 0, e1, e2, rl;
	ssize_t r;

	n = frag(s, n, true, "one", 3);
	e1 = n;
	n = frag(s, n, true, "two!", 4);
	e2 = n;
	n = frag(s, n, true, "three", 5);
	rpc_recparser_init(&p, 1024);
	r = rpc_recparser_feed(&p, s, n, &rec, &rl);
	CU_ASSERT_EQUAL(r, (ssize_t)e1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(rec);
	CU_ASSERT(rl == 3 && !memcmp(rec, "one", 3));
	rpc_record_free(rec);
	r = rpc_recparser_feed(&p, s + e1, n - e1, &rec, &rl);
	CU_ASSERT_EQUAL(r, (ssize_t)(e2 - e1));
	CU_ASSERT_PTR_NOT_NULL_FATAL(rec);
	CU_ASSERT(rl == 4 && !memcmp(rec, "two!", 4));
	rpc_record_free(rec);
	r = rpc_recparser_feed(&p, s + e2, n - e2, &rec, &rl);
	CU_ASSERT_EQUAL(r, (ssize_t)(n - e2));
	CU_ASSERT_PTR_NOT_NULL_FATAL(rec);
	CU_ASSERT(rl == 5 && !memcmp(rec, "three", 5));
	rpc_record_free(rec);
	rpc_recparser_free(&p);
}

static void test_oversized(void)
{
	static const uint8_t huge[4] = { 0xff, 0xff, 0xff, 0xff };
	struct rpc_recparser p;
	uint8_t *s = calloc(1, 512), *recs[8];
	size_t n, lens[8];
	int k;

	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	/* Exactly max_record is fine. */
	rpc_recparser_init(&p, 100);
	n = frag(s, 0, true, (const char *)s + 256, 100);
	k = feed_all(&p, s, n, 0, n, recs, lens);
	CU_ASSERT_EQUAL(k, 1);
	if (k == 1) {
		CU_ASSERT_EQUAL(lens[0], 100);
		free_recs(recs, k);
	}
	rpc_recparser_free(&p);

	/* One byte over, refused on the mark alone (no data sent yet). */
	rpc_recparser_init(&p, 100);
	n = frag(s, 0, true, (const char *)s + 256, 101);
	CU_ASSERT_EQUAL(feed_all(&p, s, 4, 0, 4, recs, lens), -EMSGSIZE);
	rpc_recparser_free(&p);

	/* Over the limit only in sum: 60 + 60 bytes in two fragments. */
	rpc_recparser_init(&p, 100);
	n = frag(s, 0, false, (const char *)s + 256, 60);
	n = frag(s, n, true, (const char *)s + 256, 60);
	CU_ASSERT_EQUAL(feed_all(&p, s, n, 0, 1, recs, lens), -EMSGSIZE);
	rpc_recparser_free(&p);

	rpc_recparser_init(&p, (1u << 20) + (64u << 10));
	CU_ASSERT_EQUAL(feed_all(&p, huge, 4, 0, 4, recs, lens), -EMSGSIZE);
	rpc_recparser_free(&p);
	free(s);
}

static void test_zero_length_fragments(void)
{
	struct rpc_recparser p;
	uint8_t s[64], *recs[8];
	size_t n = 0, lens[8];
	int k;

	n = frag(s, n, false, "", 0);
	n = frag(s, n, false, "xy", 2);
	n = frag(s, n, false, "", 0);
	n = frag(s, n, true, "", 0);
	n = frag(s, n, true, "", 0); /* an empty record of its own */
	for (size_t step = 1; step <= n; step += n - 1) {
		rpc_recparser_init(&p, 1024);
		k = feed_all(&p, s, n, 0, step, recs, lens);
		CU_ASSERT_EQUAL(k, 2);
		if (k == 2) {
			CU_ASSERT_EQUAL(lens[0], 2);
			CU_ASSERT_EQUAL(memcmp(recs[0], "xy", 2), 0);
			CU_ASSERT_EQUAL(lens[1], 0);
		}
		if (k > 0)
			free_recs(recs, k);
		rpc_recparser_free(&p);
	}
}

int main(void)
{
	CU_pSuite s;
	unsigned fails;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite("rpc_record", NULL, NULL);
	if (!s || !CU_add_test(s, "single fragment", test_single_fragment) ||
	    !CU_add_test(s, "multi fragment", test_multi_fragment) ||
	    !CU_add_test(s, "any split, byte at a time", test_any_split) ||
	    !CU_add_test(s, "several records in one buffer",
			 test_several_in_one_buffer) ||
	    !CU_add_test(s, "oversized record", test_oversized) ||
	    !CU_add_test(s, "zero-length fragments",
			 test_zero_length_fragments)) {
		CU_cleanup_registry();
		return 2;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
