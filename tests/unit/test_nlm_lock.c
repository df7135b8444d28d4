/*
 * Unit tests for nlm/lock.c: conflicts, ranges, split and merge, owners,
 * blocking requests (grant, cancel), shares and FREE_ALL.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nlm/lock.h"

/* What the table's callbacks reported. */
static struct {
	int granted, dropped;
	uint64_t ino;
	struct nlm_lockdesc last; /* owner strings valid only in the call */
	int32_t last_svid;
	void *last_arg;
} cb;

static void on_grant(void *ctx, uint64_t ino, const struct nlm_lockdesc *lk,
		     void *arg)
{
	(void)ctx;
	cb.granted++;
	cb.ino = ino;
	cb.last = *lk;
	cb.last_svid = lk->owner.svid;
	cb.last_arg = arg;
}

static void on_drop(void *ctx, void *arg)
{
	(void)ctx;
	cb.dropped++;
	cb.last_arg = arg;
}

static struct nlm_table *t;

#define HOST_MAX 64 /* what one host may hold in these tests */

static int setup(void)
{
	struct nlm_table_ops ops = { on_grant, on_drop, NULL };

	memset(&cb, 0, sizeof(cb));
	return nlm_table_new(2, HOST_MAX, &ops, &t) ? -1 : 0;
}

static int teardown(void)
{
	nlm_table_free(t);
	t = NULL;
	return 0;
}

/* Run each test on a fresh table. */
static void fresh(void)
{
	teardown();
	setup();
}

static struct nlm_lockdesc L(const char *host, int32_t svid, bool excl,
			     uint64_t off, uint64_t len) {
	return (struct nlm_lockdesc){ .owner = { .caller = host,
						 .oh = host,
						 .ohlen =
							 (uint32_t)strlen(host),
						 .svid = svid },
				      .excl = excl,
				      .off = off,
				      .len = len };
}

static size_t
nlocks(void)
{
	size_t n;

	nlm_table_count(t, &n, NULL, NULL);
	return n;
}

static int lock(struct nlm_lockdesc d)
{
	return nlm_table_lock(t, 7, &d, NULL);
}

static int test(struct nlm_lockdesc d)
{
	return nlm_table_test(t, 7, &d, NULL);
}

static int unlock(struct nlm_lockdesc d)
{
	return nlm_table_unlock(t, 7, &d);
}

static void test_conflicts(void)
{
	fresh();
	CU_ASSERT_EQUAL(lock(L("a", 1, true, 0, 10)), 0);
	CU_ASSERT_EQUAL(lock(L("b", 1, true, 5, 10)), -EAGAIN);
	CU_ASSERT_EQUAL(lock(L("b", 1, false, 9, 1)), -EAGAIN);
	CU_ASSERT_EQUAL(lock(L("b", 1, true, 10, 10)), 0); /* adjacent */
	/* Another file is another world. */
	struct nlm_lockdesc d = L("b", 1, true, 0, 10);
	CU_ASSERT_EQUAL(nlm_table_lock(t, 8, &d, NULL), 0);
	/* Shared with shared is fine; exclusive against shared is not. */
	CU_ASSERT_EQUAL(lock(L("c", 1, false, 100, 10)), 0);
	CU_ASSERT_EQUAL(lock(L("d", 1, false, 105, 10)), 0);
	CU_ASSERT_EQUAL(lock(L("e", 1, true, 109, 1)), -EAGAIN);
	CU_ASSERT_EQUAL(test(L("e", 1, false, 109, 1)), 0);
	/* The same owner never conflicts with itself. */
	CU_ASSERT_EQUAL(lock(L("a", 1, false, 0, 5)), 0);
	CU_ASSERT_EQUAL(test(L("b", 1, false, 0, 5)), 0);
}

static void test_holder(void)
{
	struct nlm_holder h;
	struct nlm_lockdesc d = L("zz", 1, false, 0, 0);

	fresh();
	CU_ASSERT_EQUAL(lock(L("holder", 42, true, 100, 50)), 0);
	CU_ASSERT_EQUAL(nlm_table_test(t, 7, &d, &h), -EAGAIN);
	CU_ASSERT(h.excl);
	CU_ASSERT_EQUAL(h.svid, 42);
	CU_ASSERT_EQUAL(h.off, 100);
	CU_ASSERT_EQUAL(h.len, 50);
	CU_ASSERT_EQUAL(h.ohlen, 6);
	CU_ASSERT(!memcmp(h.oh, "holder", 6));
	/* TEST takes nothing. */
	CU_ASSERT_EQUAL(nlocks(), 1);
}

static void test_ranges(void)
{
	struct nlm_holder h;
	struct nlm_lockdesc d = L("b", 1, false, UINT64_MAX - 1, 1);

	fresh();
	/* Length 0: from the offset to the end of the file. */
	CU_ASSERT_EQUAL(lock(L("a", 1, true, 1000, 0)), 0);
	CU_ASSERT_EQUAL(lock(L("b", 1, false, 999, 1)), 0);
	CU_ASSERT_EQUAL(nlm_table_test(t, 7, &d, &h), -EAGAIN);
	CU_ASSERT_EQUAL(h.len, 0);
	/* A range past 2^64 is clamped to the end, not wrapped to 0. */
	CU_ASSERT_EQUAL(lock(L("c", 1, false, 10, UINT64_MAX)), -EAGAIN);
	CU_ASSERT_EQUAL(lock(L("c", 1, false, 10, 989)), 0);
}

static void test_split(void)
{
	fresh();
	CU_ASSERT_EQUAL(lock(L("a", 1, true, 0, 100)), 0);
	CU_ASSERT_EQUAL(unlock(L("a", 1, false, 40, 20)), 0);
	CU_ASSERT_EQUAL(nlocks(), 2);
	CU_ASSERT_EQUAL(lock(L("b", 1, true, 40, 20)), 0);
	CU_ASSERT_EQUAL(test(L("c", 1, false, 39, 1)), -EAGAIN);
	CU_ASSERT_EQUAL(test(L("c", 1, false, 60, 1)), -EAGAIN);
	/* Trim both ends, then release what is left. */
	CU_ASSERT_EQUAL(unlock(L("a", 1, false, 0, 10)), 0);
	CU_ASSERT_EQUAL(test(L("c", 1, true, 0, 10)), 0);
	CU_ASSERT_EQUAL(unlock(L("a", 1, false, 90, 0)), 0);
	CU_ASSERT_EQUAL(test(L("c", 1, true, 90, 10)), 0);
	CU_ASSERT_EQUAL(test(L("c", 1, true, 89, 1)), -EAGAIN);
	/* Unlocking what is not held, or someone else's, changes nothing. */
	CU_ASSERT_EQUAL(unlock(L("c", 1, false, 0, 0)), 0);
	CU_ASSERT_EQUAL(nlocks(), 3);
	CU_ASSERT_EQUAL(unlock(L("a", 1, false, 0, 0)), 0);
	CU_ASSERT_EQUAL(unlock(L("b", 1, false, 0, 0)), 0);
	CU_ASSERT_EQUAL(nlocks(), 0);
}

static void test_merge(void)
{
	fresh();
	CU_ASSERT_EQUAL(lock(L("a", 1, true, 0, 10)), 0);
	CU_ASSERT_EQUAL(lock(L("a", 1, true, 20, 10)), 0);
	CU_ASSERT_EQUAL(nlocks(), 2);
	CU_ASSERT_EQUAL(lock(L("a", 1, true, 10, 10)), 0);
	CU_ASSERT_EQUAL(nlocks(), 1); /* [0, 30) */
	/* A downgrade in the middle splits into three. */
	CU_ASSERT_EQUAL(lock(L("a", 1, false, 10, 10)), 0);
	CU_ASSERT_EQUAL(nlocks(), 3);
	CU_ASSERT_EQUAL(lock(L("b", 1, false, 10, 10)), 0);
	CU_ASSERT_EQUAL(lock(L("b", 1, false, 9, 1)), -EAGAIN);
	/* Upgrading back conflicts with b's shared lock now. */
	CU_ASSERT_EQUAL(lock(L("a", 1, true, 10, 10)), -EAGAIN);
	CU_ASSERT_EQUAL(unlock(L("b", 1, false, 0, 0)), 0);
	CU_ASSERT_EQUAL(lock(L("a", 1, true, 10, 10)), 0);
	CU_ASSERT_EQUAL(nlocks(), 1);
}

static void test_owners(void)
{
	struct nlm_lockdesc d = L("host", 1, true, 0, 10);
	struct nlm_lockdesc e = d;

	fresh();
	CU_ASSERT_EQUAL(nlm_table_lock(t, 7, &d, NULL), 0);
	/* Same host, another svid: another process, another owner. */
	e.owner.svid = 2;
	CU_ASSERT_EQUAL(nlm_table_test(t, 7, &e, NULL), -EAGAIN);
	/* Same host and svid, other owner bytes. */
	e = d;
	e.owner.oh = "hosx";
	CU_ASSERT_EQUAL(nlm_table_test(t, 7, &e, NULL), -EAGAIN);
	/* Another host with the same svid and bytes. */
	e = d;
	e.owner.caller = "other";
	CU_ASSERT_EQUAL(nlm_table_test(t, 7, &e, NULL), -EAGAIN);
	/* The very owner (copied strings) is the same. */
	char caller[] = "host", oh[] = "host";
	e = d;
	e.owner.caller = caller;
	e.owner.oh = oh;
	CU_ASSERT_EQUAL(nlm_table_test(t, 7, &e, NULL), 0);
}

static void test_blocking(void)
{
	struct nlm_lockdesc a = L("a", 1, true, 0, 100);
	struct nlm_lockdesc b = L("b", 2, true, 50, 10);
	struct nlm_lockdesc c = L("c", 3, false, 0, 10);
	int tok_b, tok_c, tok_x;
	size_t w;

	fresh();
	CU_ASSERT_EQUAL(nlm_table_lock(t, 7, &a, NULL), 0);
	CU_ASSERT_EQUAL(nlm_table_lock(t, 7, &b, &tok_b), -EINPROGRESS);
	CU_ASSERT_EQUAL(nlm_table_lock(t, 7, &b, &tok_x), -EALREADY);
	CU_ASSERT_EQUAL(nlm_table_lock(t, 7, &c, &tok_c), -EINPROGRESS);
	nlm_table_count(t, NULL, &w, NULL);
	CU_ASSERT_EQUAL(w, 2);
	/* Releasing [0, 10) lets c in, but b still waits for [50, 60). */
	CU_ASSERT_EQUAL(unlock(L("a", 1, false, 0, 10)), 0);
	CU_ASSERT_EQUAL(cb.granted, 1);
	CU_ASSERT_PTR_EQUAL(cb.last_arg, &tok_c);
	CU_ASSERT_EQUAL(cb.last_svid, 3);
	CU_ASSERT_EQUAL(cb.ino, 7);
	CU_ASSERT_EQUAL(nlm_table_unlock(t, 7, &a), 0);
	CU_ASSERT_EQUAL(cb.granted, 2);
	CU_ASSERT_PTR_EQUAL(cb.last_arg, &tok_b);
	CU_ASSERT_EQUAL(cb.last.off, 50);
	CU_ASSERT_EQUAL(cb.last.len, 10);
	CU_ASSERT(cb.last.excl);
	/* The granted requests hold their locks now. */
	CU_ASSERT_EQUAL(test(L("z", 9, false, 55, 1)), -EAGAIN);
	CU_ASSERT_EQUAL(test(L("z", 9, true, 5, 1)), -EAGAIN);
	nlm_table_count(t, NULL, &w, NULL);
	CU_ASSERT_EQUAL(w, 0);
	CU_ASSERT_EQUAL(cb.dropped, 0);
}

static void test_cancel(void)
{
	struct nlm_lockdesc a = L("a", 1, true, 0, 0);
	struct nlm_lockdesc b = L("b", 2, false, 0, 10);
	int tok;

	fresh();
	CU_ASSERT_EQUAL(nlm_table_lock(t, 7, &a, NULL), 0);
	CU_ASSERT_EQUAL(nlm_table_lock(t, 7, &b, &tok), -EINPROGRESS);
	/* Only the same request cancels: here the type differs. */
	struct nlm_lockdesc bx = L("b", 2, true, 0, 10);

	CU_ASSERT_EQUAL(nlm_table_cancel(t, 7, &bx), -ENOENT);
	CU_ASSERT_EQUAL(nlm_table_cancel(t, 7, &b), 0);
	CU_ASSERT_EQUAL(cb.dropped, 1);
	CU_ASSERT_PTR_EQUAL(cb.last_arg, &tok);
	CU_ASSERT_EQUAL(nlm_table_cancel(t, 7, &b), -ENOENT);
	CU_ASSERT_EQUAL(nlm_table_unlock(t, 7, &a), 0);
	CU_ASSERT_EQUAL(cb.granted, 0);
}

static void test_shares(void)
{
	struct nlm_owner a = { .caller = "a", .oh = "oa", .ohlen = 2 };
	struct nlm_owner b = { .caller = "b", .oh = "ob", .ohlen = 2 };

	fresh();
	/* a reads and denies writers. */
	CU_ASSERT_EQUAL(nlm_table_share(t, 7, &a, 1, 2), 0);
	CU_ASSERT_EQUAL(nlm_table_share(t, 7, &b, 2, 0), -EAGAIN);
	CU_ASSERT_EQUAL(nlm_table_share(t, 7, &b, 1, 1),
			-EAGAIN); /* denies a's read */
	CU_ASSERT_EQUAL(nlm_table_share(t, 7, &b, 1, 0), 0);
	/* a's own share is replaced, not checked against itself. */
	CU_ASSERT_EQUAL(nlm_table_share(t, 7, &a, 3, 2), 0);
	nlm_table_unshare(t, 7, &a);
	CU_ASSERT_EQUAL(nlm_table_share(t, 7, &a, 2, 0), 0);
	size_t s;
	nlm_table_count(t, NULL, NULL, &s);
	CU_ASSERT_EQUAL(s, 2);
}

static void test_free_all(void)
{
	struct nlm_lockdesc a1 = L("a", 1, true, 0, 10);
	struct nlm_lockdesc a2 = L("a", 2, true, 0, 0);
	struct nlm_lockdesc b = L("b", 1, true, 0, 0);
	struct nlm_lockdesc aw = L("a", 3, true, 0, 0);
	struct nlm_owner ao = { .caller = "a", .oh = "x", .ohlen = 1 };
	int tok_b, tok_a;
	size_t l, w, s;

	fresh();
	CU_ASSERT_EQUAL(nlm_table_lock(t, 7, &a1, NULL), 0);
	CU_ASSERT_EQUAL(nlm_table_lock(t, 9, &a2, NULL), 0);
	CU_ASSERT_EQUAL(nlm_table_share(t, 9, &ao, 3, 3), 0);
	CU_ASSERT_EQUAL(nlm_table_lock(t, 7, &b, &tok_b), -EINPROGRESS);
	CU_ASSERT_EQUAL(nlm_table_lock(t, 7, &aw, &tok_a), -EINPROGRESS);
	/* a's two locks, its share and its request go; b gets file 7. */
	CU_ASSERT_EQUAL(nlm_table_free_all(t, "a", NULL), 4);
	CU_ASSERT_EQUAL(cb.granted, 1);
	CU_ASSERT_EQUAL(cb.dropped, 1);
	nlm_table_count(t, &l, &w, &s);
	CU_ASSERT_EQUAL(l, 1);
	CU_ASSERT_EQUAL(w, 0);
	CU_ASSERT_EQUAL(s, 0);
	struct nlm_lockdesc z = L("z", 1, true, 0, 0);
	CU_ASSERT_EQUAL(nlm_table_test(t, 9, &z, NULL), 0);
	CU_ASSERT_EQUAL(nlm_table_free_all(t, "nobody", NULL), 0);
}

/* l as sent from the IPv4 address a.b.c.d. */
static struct nlm_lockdesc from(struct nlm_lockdesc l, uint8_t a, uint8_t b,
				uint8_t c, uint8_t d)
{
	l.owner.host = (struct nlm_host){ .addr = { [10] = 0xff,
						    [11] = 0xff,
						    [12] = a,
						    [13] = b,
						    [14] = c,
						    [15] = d } };
	return l;
}

/*
 * The address is part of the owner: the same name, svid and owner bytes
 * from another host neither release nor share the lock (a refused or a
 * hostile host cannot UNLOCK or FREE_ALL a client's locks).
 */
static void test_host_owner(void)
{
	struct nlm_lockdesc a = from(L("a", 1, true, 0, 0), 10, 0, 0, 1);
	struct nlm_lockdesc forged = from(L("a", 1, true, 0, 0), 10, 0, 0, 66);
	struct nlm_host evil = forged.owner.host;

	fresh();
	CU_ASSERT_EQUAL(nlm_table_lock(t, 7, &a, NULL), 0);
	CU_ASSERT_EQUAL(nlm_table_test(t, 7, &forged, NULL), -EAGAIN);
	CU_ASSERT_EQUAL(nlm_table_lock(t, 7, &forged, NULL), -EAGAIN);
	CU_ASSERT_EQUAL(nlm_table_unlock(t, 7, &forged), 0);
	CU_ASSERT_EQUAL(nlm_table_free_all(t, "a", &evil), 0);
	CU_ASSERT_EQUAL(nlocks(), 1);
	CU_ASSERT_EQUAL(nlm_table_test(t, 7, &forged, NULL), -EAGAIN);
	CU_ASSERT_EQUAL(nlm_table_free_all(t, "a", &a.owner.host), 1);
	CU_ASSERT_EQUAL(nlocks(), 0);
}

/*
 * One host holds at most HOST_MAX locks, shares and queued requests:
 * past it a request is refused (-ENOLCK) and nothing changes; other
 * hosts are not affected; releasing makes room again.
 */
static void test_host_bound(void)
{
	struct nlm_lockdesc b = from(L("b", 1, true, 0, 0), 10, 0, 0, 2);
	struct nlm_lockdesc w = from(L("w", 9, true, 0, 0), 10, 0, 0, 1);
	struct nlm_owner sh = { .caller = "h", .oh = "s", .ohlen = 1 };
	size_t n;
	int tok;

	fresh();
	for (int i = 0; i < HOST_MAX; i++) {
		/* Every other byte: ranges that never merge. */
		struct nlm_lockdesc l =
			from(L("h", 1, true, 2 * (uint64_t)i, 1), 10, 0, 0, 1);

		CU_ASSERT_EQUAL_FATAL(nlm_table_lock(t, 7, &l, NULL), 0);
	}
	n = nlm_table_host_count(t, &w.owner.host);
	CU_ASSERT_EQUAL(n, HOST_MAX);
	struct nlm_lockdesc more = from(L("h", 1, true, 1000, 1), 10, 0, 0, 1);

	CU_ASSERT_EQUAL(nlm_table_lock(t, 8, &more, NULL), -ENOLCK);
	sh.host = w.owner.host;
	CU_ASSERT_EQUAL(nlm_table_share(t, 8, &sh, 1, 0), -ENOLCK);
	/* A blocking request would be queued: refused too. */
	CU_ASSERT_EQUAL(nlm_table_lock(t, 9, &b, NULL), 0);
	CU_ASSERT_EQUAL(nlm_table_lock(t, 9, &w, &tok), -ENOLCK);
	CU_ASSERT_EQUAL(nlocks(), HOST_MAX + 1);
	/* Releasing a range inside a lock splits it: never refused. */
	struct nlm_lockdesc all = from(L("h", 1, true, 0, 0), 10, 0, 0, 1);

	CU_ASSERT_EQUAL(nlm_table_unlock(t, 7, &all), 0);
	CU_ASSERT_EQUAL(nlm_table_host_count(t, &w.owner.host), 0);
	CU_ASSERT_EQUAL(nlm_table_lock(t, 8, &more, NULL), 0);
	CU_ASSERT_EQUAL(nlm_table_lock(t, 9, &w, &tok), -EINPROGRESS);
	CU_ASSERT_EQUAL(nlm_table_host_count(t, &w.owner.host), 2);
}

/* Queued requests still in the table when it is freed are dropped. */
static void test_free_drops(void)
{
	struct nlm_lockdesc a = L("a", 1, true, 0, 0);
	struct nlm_lockdesc b = L("b", 1, true, 0, 0);
	int tok;

	fresh();
	CU_ASSERT_EQUAL(nlm_table_lock(t, 7, &a, NULL), 0);
	CU_ASSERT_EQUAL(nlm_table_lock(t, 7, &b, &tok), -EINPROGRESS);
	teardown();
	CU_ASSERT_EQUAL(cb.dropped, 1);
	CU_ASSERT_PTR_EQUAL(cb.last_arg, &tok);
	CU_ASSERT_EQUAL(cb.granted, 0);
	setup();
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("nlm_lock", setup, teardown);
	CU_add_test(s, "conflicts", test_conflicts);
	CU_add_test(s, "holder", test_holder);
	CU_add_test(s, "ranges", test_ranges);
	CU_add_test(s, "split", test_split);
	CU_add_test(s, "merge", test_merge);
	CU_add_test(s, "owners", test_owners);
	CU_add_test(s, "blocking", test_blocking);
	CU_add_test(s, "cancel", test_cancel);
	CU_add_test(s, "shares", test_shares);
	CU_add_test(s, "free_all", test_free_all);
	CU_add_test(s, "free_drops", test_free_drops);
	CU_add_test(s, "host_owner", test_host_owner);
	CU_add_test(s, "host_bound", test_host_bound);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned fails = CU_get_number_of_failures();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
