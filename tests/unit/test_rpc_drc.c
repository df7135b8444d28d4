/*
 * tests/unit/test_rpc_drc.c - the duplicate-request cache: alone (hit,
 * miss, in progress, eviction bounds, many threads) and through a server
 * over loopback TCP (a retransmission on the same and on a new connection
 * is answered from the cache, not run again).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "rpc/rpc_int.h"

/* ---- the cache alone ------------------------------------------------ */

static struct sockaddr_storage peer4(uint32_t ip, uint16_t port)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *s = (struct sockaddr_in *)&ss;

	memset(&ss, 0, sizeof(ss));
	s->sin_family = AF_INET;
	s->sin_addr.s_addr = htonl(ip);
	s->sin_port = htons(port);
	return ss;
}

static struct rpc_drc_key key(uint32_t ip, uint16_t port, uint32_t xid,
			      uint32_t proc, const char *args)
{
	struct sockaddr_storage ss = peer4(ip, port);
	struct rpc_drc_key k;

	rpc_drc_key_init(&k, &ss, xid, 100003, 3, proc,
			 rpc_drc_hash_args(args, strlen(args)));
	return k;
}

/* A reply buffer of len bytes, every byte `fill`. */
static struct rpc_outbuf *reply(size_t len, uint8_t fill)
{
	struct rpc_outbuf *ob = rpc_outbuf_new(len);

	CU_ASSERT_FATAL(ob != NULL);
	ob->len = len;
	memset(ob->data, fill, len);
	return ob;
}

/* Begin k, expecting a miss with an entry, and finish it with a reply. */
static void put(struct rpc_drc *d, const struct rpc_drc_key *k, size_t len,
		uint8_t fill)
{
	struct rpc_drc_entry *e;
	struct rpc_outbuf *ob, *r = reply(len, fill);

	CU_ASSERT_EQUAL(rpc_drc_begin(d, k, &e, &ob), RPC_DRC_MISS);
	CU_ASSERT(e != NULL);
	CU_ASSERT(ob == NULL);
	if (e)
		rpc_drc_finish(d, e, r);
	rpc_outbuf_free(r);
}

/* 1 if k hits with a reply of len bytes of `fill`. */
static int hits(struct rpc_drc *d, const struct rpc_drc_key *k, size_t len,
		uint8_t fill)
{
	struct rpc_drc_entry *e;
	struct rpc_outbuf *ob;
	int rc = rpc_drc_begin(d, k, &e, &ob), ok;

	if (rc == RPC_DRC_MISS && e)
		rpc_drc_finish(d, e, NULL); /* leave the cache as it was */
	if (rc != RPC_DRC_HIT)
		return 0;
	ok = ob && ob->len == len && ob->off == 0;
	for (size_t i = 0; ok && i < len; i++)
		ok = ob->data[i] == fill;
	rpc_outbuf_free(ob);
	return ok;
}

static void test_hit(void)
{
	struct rpc_drc *d;
	struct rpc_drc_key k = key(0x0a000001, 700, 42, 12, "remove a");
	struct rpc_drc_key other_port =
		key(0x0a000001, 45000, 42, 12, "remove a");

	CU_ASSERT_FATAL(rpc_drc_new(1024, 1 << 20, &d) == 0);
	put(d, &k, 100, 0xab);
	CU_ASSERT(hits(d, &k, 100, 0xab));
	/* A reconnect comes from another port: still the same client. */
	CU_ASSERT(hits(d, &other_port, 100, 0xab));
	CU_ASSERT(hits(d, &k, 100, 0xab));
	rpc_drc_free(d);
}

static void test_miss(void)
{
	struct rpc_drc *d;
	struct rpc_drc_key k = key(0x0a000001, 700, 42, 12, "remove a");
	struct rpc_drc_key diff[] = {
		key(0x0a000001, 700, 42, 12, "remove b"), /* args */
		key(0x0a000001, 700, 43, 12, "remove a"), /* xid */
		key(0x0a000002, 700, 42, 12, "remove a"), /* client */
		key(0x0a000001, 700, 42, 13, "remove a"), /* proc */
	};

	CU_ASSERT_FATAL(rpc_drc_new(1024, 1 << 20, &d) == 0);
	put(d, &k, 64, 1);
	for (size_t i = 0; i < sizeof(diff) / sizeof(diff[0]); i++)
		CU_ASSERT(!hits(d, &diff[i], 64, 1));
	/* Each of those is a new call: it gets its own entry. */
	for (size_t i = 0; i < sizeof(diff) / sizeof(diff[0]); i++)
		put(d, &diff[i], 64, (uint8_t)(2 + i));
	CU_ASSERT(hits(d, &k, 64, 1));
	CU_ASSERT(hits(d, &diff[0], 64, 2));
	/* Same words in another order hash differently. */
	CU_ASSERT(rpc_drc_hash_args("abcdefgh12345678", 16) !=
		  rpc_drc_hash_args("12345678abcdefgh", 16));
	CU_ASSERT(rpc_drc_hash_args("abc", 3) != rpc_drc_hash_args("abd", 3));
	rpc_drc_free(d);

	/* Only the first 256 bytes and the length count: a WRITE's data is
	 * not hashed whole on the loop. */
	static uint8_t big1[4096], big2[4096];

	memset(big1, 7, sizeof(big1));
	memset(big2, 7, sizeof(big2));
	big2[4000] = 8;
	CU_ASSERT(rpc_drc_hash_args(big1, 4096) ==
		  rpc_drc_hash_args(big2, 4096));
	big2[255] = 8;
	CU_ASSERT(rpc_drc_hash_args(big1, 4096) !=
		  rpc_drc_hash_args(big2, 4096));
	CU_ASSERT(rpc_drc_hash_args(big1, 4096) !=
		  rpc_drc_hash_args(big1, 4092));
}

static void test_in_progress(void)
{
	struct rpc_drc *d;
	struct rpc_drc_key k = key(0x7f000001, 800, 7, 8, "write");
	struct rpc_drc_entry *e, *e2;
	struct rpc_outbuf *ob, *r = reply(32, 9);
	size_t n, b;

	CU_ASSERT_FATAL(rpc_drc_new(1024, 1 << 20, &d) == 0);
	CU_ASSERT_EQUAL(rpc_drc_begin(d, &k, &e, &ob), RPC_DRC_MISS);
	CU_ASSERT_FATAL(e != NULL);
	/* A retransmission while the first runs: drop it. */
	CU_ASSERT_EQUAL(rpc_drc_begin(d, &k, &e2, &ob), RPC_DRC_BUSY);
	CU_ASSERT(e2 == NULL && ob == NULL);
	rpc_drc_finish(d, e, r);
	CU_ASSERT(hits(d, &k, 32, 9));

	/* A call finished without a reply is forgotten: it runs again. */
	k.xid = 8;
	CU_ASSERT_EQUAL(rpc_drc_begin(d, &k, &e, &ob), RPC_DRC_MISS);
	CU_ASSERT_FATAL(e != NULL);
	rpc_drc_finish(d, e, NULL);
	CU_ASSERT_EQUAL(rpc_drc_begin(d, &k, &e, &ob), RPC_DRC_MISS);
	CU_ASSERT_FATAL(e != NULL);
	rpc_drc_finish(d, e, NULL);
	rpc_drc_stats(d, &n, &b);
	CU_ASSERT_EQUAL(n, 1);
	rpc_outbuf_free(r);
	rpc_drc_free(d);
}

static void test_eviction_entries(void)
{
	struct rpc_drc *d;
	struct rpc_drc_key k;
	size_t n, b;

	CU_ASSERT_FATAL(rpc_drc_new(128, 1 << 20, &d) == 0);
	for (uint32_t i = 0; i < 10000; i++) {
		k = key(0x0a000001, 700, i, 12, "x");
		put(d, &k, 100, (uint8_t)i);
		rpc_drc_stats(d, &n, &b);
		if (n > 128 || b > (1 << 20)) {
			CU_FAIL("over the bounds");
			break;
		}
	}
	rpc_drc_stats(d, &n, &b);
	CU_ASSERT(n <= 128);
	CU_ASSERT(n >= 64); /* LRU eviction, not a flush of everything */
	/* The newest stays, the oldest went. */
	k = key(0x0a000001, 700, 9999, 12, "x");
	CU_ASSERT(hits(d, &k, 100, (uint8_t)9999));
	k = key(0x0a000001, 700, 0, 12, "x");
	CU_ASSERT(!hits(d, &k, 100, 0));
	rpc_drc_free(d);
}

static void test_eviction_bytes(void)
{
	const size_t max_bytes = 256 << 10;
	struct rpc_drc *d;
	struct rpc_drc_key k;
	size_t n, b;

	CU_ASSERT_FATAL(rpc_drc_new(1 << 20, max_bytes, &d) == 0);
	for (uint32_t i = 0; i < 5000; i++) {
		k = key(0x0a000001, 700, i, 7, "write");
		put(d, &k, 1000, 3);
		rpc_drc_stats(d, &n, &b);
		if (b > max_bytes) {
			CU_FAIL("over the byte bound");
			break;
		}
	}
	rpc_drc_stats(d, &n, &b);
	CU_ASSERT(b <= max_bytes);
	CU_ASSERT(n < 5000 && n > 0);
	/* A reply too big for a shard is not kept at all. */
	k = key(0x0a000001, 700, 99999, 7, "big");
	put(d, &k, max_bytes, 4);
	CU_ASSERT(!hits(d, &k, max_bytes, 4));
	rpc_drc_stats(d, &n, &b);
	CU_ASSERT(b <= max_bytes);
	rpc_drc_free(d);
}

static void test_full_of_running(void)
{
	struct rpc_drc_entry *e[1000];
	struct rpc_drc *d;
	struct rpc_drc_key k;
	struct rpc_outbuf *ob;
	size_t n, b, held = 0;

	CU_ASSERT_FATAL(rpc_drc_new(64, 1 << 20, &d) == 0);
	for (uint32_t i = 0; i < 1000; i++) {
		k = key(0x0a000001, 700, i, 12, "x");
		CU_ASSERT_EQUAL(rpc_drc_begin(d, &k, &e[i], &ob), RPC_DRC_MISS);
		held += e[i] != NULL;
	}
	/* Running calls cannot be evicted: the rest run uncached. */
	rpc_drc_stats(d, &n, &b);
	CU_ASSERT(n <= 64);
	CU_ASSERT_EQUAL(n, held);
	CU_ASSERT(held > 0);
	for (int i = 0; i < 1000; i++)
		if (e[i])
			rpc_drc_finish(d, e[i], NULL);
	rpc_drc_stats(d, &n, &b);
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_EQUAL(b, 0);
	rpc_drc_free(d);
}

#define CT_THREADS 8
#define CT_OPS 20000
#define CT_KEYS 512

static struct rpc_drc *ct_drc;
static atomic_int ct_bad, ct_hits;

static void *ct_main(void *arg)
{
	uint64_t seed = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;

	for (int i = 0; i < CT_OPS; i++) {
		struct rpc_drc_entry *e;
		struct rpc_outbuf *ob;
		uint32_t x;
		int rc;

		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		x = (uint32_t)(seed % CT_KEYS);
		struct rpc_drc_key k = key(0x0a000000 + x % 3, 1, x, 12, "c");

		rc = rpc_drc_begin(ct_drc, &k, &e, &ob);
		if (rc == RPC_DRC_MISS && e) {
			struct rpc_outbuf *r = reply(16 + x % 64, (uint8_t)x);

			/* Sometimes a call is dropped and must run again. */
			rpc_drc_finish(ct_drc, e, x % 5 ? r : NULL);
			rpc_outbuf_free(r);
		} else if (rc == RPC_DRC_HIT) {
			atomic_fetch_add(&ct_hits, 1);
			if (ob->len != 16 + x % 64 ||
			    ob->data[0] != (uint8_t)x ||
			    ob->data[ob->len - 1] != (uint8_t)x)
				atomic_fetch_add(&ct_bad, 1);
			rpc_outbuf_free(ob);
		} else if (rc != RPC_DRC_BUSY && rc != RPC_DRC_MISS) {
			atomic_fetch_add(&ct_bad, 1);
		}
	}
	return NULL;
}

static void test_concurrent(void)
{
	pthread_t th[CT_THREADS];
	size_t n, b;

	/* Smaller than the key set: eviction races lookups too. */
	CU_ASSERT_FATAL(rpc_drc_new(256, 64 << 10, &ct_drc) == 0);
	for (uintptr_t i = 0; i < CT_THREADS; i++)
		CU_ASSERT_FATAL(
			pthread_create(&th[i], NULL, ct_main, (void *)i) == 0);
	for (int i = 0; i < CT_THREADS; i++)
		pthread_join(th[i], NULL);
	CU_ASSERT_EQUAL(atomic_load(&ct_bad), 0);
	CU_ASSERT(atomic_load(&ct_hits) > 0);
	rpc_drc_stats(ct_drc, &n, &b);
	CU_ASSERT(n <= 256);
	CU_ASSERT(b <= 64 << 10);
	rpc_drc_free(ct_drc);
}

/* ---- through a server ---------------------------------------------- */

#define TPROG 0x20000098u

/* proc 1 COUNT (not idempotent): returns how often it ran.
 * proc 2 SAME (idempotent): the same.
 * proc 3 SLOW (not idempotent): answered by a thread after SLOW_MS. */
#define SLOW_MS 600

static atomic_uint runs;

static void h_count(struct rpc_call *call, void *args, void *res)
{
	(void)args;
	*(uint32_t *)res = atomic_fetch_add(&runs, 1) + 1;
	rpc_call_done(call);
}

static void *slow_main(void *arg)
{
	struct rpc_call *call = arg;
	struct timespec ts = { 0, SLOW_MS * 1000000L };

	nanosleep(&ts, NULL);
	rpc_call_done(call);
	return NULL;
}

static void h_slow(struct rpc_call *call, void *args, void *res)
{
	pthread_t th;

	(void)args;
	*(uint32_t *)res = atomic_fetch_add(&runs, 1) + 1;
	if (pthread_create(&th, NULL, slow_main, call) == 0)
		pthread_detach(th);
	else
		rpc_call_fail(call, SYSTEM_ERR);
}

static const struct rpc_proc procs[] = {
	[0] = { .name = "absent" },
	[1] = { .name = "count",
		.decode = (xdrproc_t)xdr_u_int,
		.args_size = sizeof(uint32_t),
		.encode = (xdrproc_t)xdr_u_int,
		.res_size = sizeof(uint32_t),
		.handler = h_count,
		.flags = RPC_PROC_AUTH_NONE_OK },
	[2] = { .name = "same",
		.decode = (xdrproc_t)xdr_u_int,
		.args_size = sizeof(uint32_t),
		.encode = (xdrproc_t)xdr_u_int,
		.res_size = sizeof(uint32_t),
		.handler = h_count,
		.flags = RPC_PROC_IDEMPOTENT | RPC_PROC_AUTH_NONE_OK },
	[3] = { .name = "slow",
		.decode = (xdrproc_t)xdr_u_int,
		.args_size = sizeof(uint32_t),
		.encode = (xdrproc_t)xdr_u_int,
		.res_size = sizeof(uint32_t),
		.handler = h_slow,
		.flags = RPC_PROC_AUTH_NONE_OK },
};

static const struct rpc_program prog = {
	.name = "t", .prog = TPROG, .vers = 1, .procs = procs, .nprocs = 4
};

static int tcp_connect(uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	CU_ASSERT_FATAL(fd >= 0);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	CU_ASSERT_FATAL(connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	return fd;
}

static void send_call(int fd, uint32_t xid, uint32_t proc, uint32_t arg)
{
	uint32_t w[] = { htonl(0x80000000u | 44),
			 htonl(xid),
			 0,
			 htonl(2),
			 htonl(TPROG),
			 htonl(1),
			 htonl(proc),
			 0,
			 0,
			 0,
			 0,
			 htonl(arg) };

	CU_ASSERT_FATAL(send(fd, w, sizeof(w), MSG_NOSIGNAL) ==
			(ssize_t)sizeof(w));
}

/* Read one reply: 0 and its xid and result, -2 none within ms, -1 EOF. */
static int recv_reply(int fd, int ms, uint32_t *xid, uint32_t *val)
{
	uint32_t w[8];
	size_t got = 0;

	while (got < sizeof(w)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, ms) <= 0)
			return -2;
		n = recv(fd, (char *)w + got, sizeof(w) - got, 0);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	/* mark, xid, REPLY, MSG_ACCEPTED, verf, SUCCESS, result */
	CU_ASSERT_EQUAL(ntohl(w[0]), 0x80000000u | 28);
	CU_ASSERT_EQUAL(ntohl(w[2]), 1);
	CU_ASSERT_EQUAL(ntohl(w[6]), 0);
	*xid = ntohl(w[1]);
	*val = ntohl(w[7]);
	return 0;
}

static uint32_t call(int fd, uint32_t xid, uint32_t proc, uint32_t arg)
{
	uint32_t rx = 0, v = 0;

	send_call(fd, xid, proc, arg);
	CU_ASSERT_FATAL(recv_reply(fd, 10000, &rx, &v) == 0);
	CU_ASSERT_EQUAL(rx, xid);
	return v;
}

static struct rpc_server *srv_start(uint16_t *port)
{
	struct rpc_config cfg = { .nloops = 4 };
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_storage bound;
	struct rpc_server *srv;

	CU_ASSERT_FATAL(rpc_server_new(&cfg, &srv) == 0);
	CU_ASSERT_FATAL(rpc_server_listen(srv, (struct sockaddr *)&sin,
					  sizeof(sin), &prog, 1, &bound) == 0);
	CU_ASSERT_FATAL(rpc_server_start(srv) == 0);
	*port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
	return srv;
}

static void test_server_replay(void)
{
	struct rpc_server *srv;
	uint16_t port;
	int a, b;

	atomic_store(&runs, 0);
	srv = srv_start(&port);
	a = tcp_connect(port);
	CU_ASSERT_EQUAL(call(a, 100, 1, 5), 1);
	/* Retransmitted on the same connection: the first reply. */
	CU_ASSERT_EQUAL(call(a, 100, 1, 5), 1);
	/* ... and on new connections, which land on any of the 4 loops. */
	for (int i = 0; i < 8; i++) {
		b = tcp_connect(port);
		CU_ASSERT_EQUAL(call(b, 100, 1, 5), 1);
		close(b);
	}
	CU_ASSERT_EQUAL(atomic_load(&runs), 1);
	/* Same xid, other arguments: a new call. */
	CU_ASSERT_EQUAL(call(a, 100, 1, 6), 2);
	/* An idempotent procedure is never cached. */
	CU_ASSERT_EQUAL(call(a, 200, 2, 5), 3);
	CU_ASSERT_EQUAL(call(a, 200, 2, 5), 4);
	close(a);
	rpc_server_free(srv);
}

static void test_server_in_progress(void)
{
	struct rpc_server *srv;
	uint32_t xid = 0, v = 0;
	uint16_t port;
	int a, b, ra, rb, quiet;

	atomic_store(&runs, 0);
	srv = srv_start(&port);
	a = tcp_connect(port);
	b = tcp_connect(port);
	/* Two loops: either transmission may be the one that runs. */
	send_call(a, 300, 3, 1);
	send_call(b, 300, 3, 1);
	ra = recv_reply(a, SLOW_MS + 1500, &xid, &v);
	rb = recv_reply(b, ra == 0 ? 500 : SLOW_MS + 1500, &xid, &v);
	/* The one that came while the other ran got no reply at all. */
	CU_ASSERT((ra == 0) != (rb == 0));
	CU_ASSERT(ra == -2 || rb == -2);
	CU_ASSERT_EQUAL(xid, 300);
	CU_ASSERT_EQUAL(v, 1);
	/* Its next retransmission gets the first reply. */
	quiet = ra == 0 ? b : a;
	CU_ASSERT_EQUAL(call(quiet, 300, 3, 1), 1);
	CU_ASSERT_EQUAL(atomic_load(&runs), 1);
	close(a);
	close(b);
	rpc_server_free(srv);
}

int main(void)
{
	CU_pSuite s;
	unsigned fails;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("rpc_drc", NULL, NULL);
	CU_add_test(s, "hit, also from another port", test_hit);
	CU_add_test(s, "miss on other args, xid, client, proc", test_miss);
	CU_add_test(s, "in progress: busy; dropped: forgotten",
		    test_in_progress);
	CU_add_test(s, "eviction keeps the entry bound", test_eviction_entries);
	CU_add_test(s, "eviction keeps the byte bound", test_eviction_bytes);
	CU_add_test(s, "full of running calls: run uncached",
		    test_full_of_running);
	CU_add_test(s, "concurrent threads over shared shards",
		    test_concurrent);
	CU_add_test(s, "server: replay on same and new connections",
		    test_server_replay);
	CU_add_test(s, "server: retransmission in progress is dropped",
		    test_server_in_progress);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
