/*
 * tests/unit/test_rpc_limits.c - connection limits and timeouts of the
 * transport over loopback TCP, with short timeouts: an idle connection is
 * closed and a busy one is not; a slowloris and a client that never reads
 * its replies are closed without delaying another client; past max_conns
 * a connection is closed at once while the others work on.
 *
 * Bounds on time are generous ("closed within 10 s"): the machine may be
 * loaded.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "rpc/rpc.h"
#include "tests/lib/testlib.h"

#define TPROG 0x20000097u
#define BIG_LEN (1u << 20)
#define NBIG 64

static char big_buf[BIG_LEN];

/* Fixed-length opaque: no pointer for xdr_free to free. */
static bool_t xdr_big(XDR *x, void *res)
{
	(void)res;
	return xdr_opaque(x, big_buf, BIG_LEN);
}

static void h_done(struct rpc_call *call, void *args, void *res)
{
	(void)args;
	(void)res;
	rpc_call_done(call);
}

static const struct rpc_proc procs[] = {
	[0] = { .name = "null",
		.handler = h_done,
		.flags = RPC_PROC_IDEMPOTENT | RPC_PROC_AUTH_NONE_OK },
	[1] = { .name = "big",
		.encode = (xdrproc_t)xdr_big,
		.res_size = 8,
		.handler = h_done,
		.flags = RPC_PROC_IDEMPOTENT | RPC_PROC_AUTH_NONE_OK },
};

static const struct rpc_program prog = {
	.name = "t", .prog = TPROG, .vers = 1, .procs = procs, .nprocs = 2
};

static struct rpc_server *srv_start(int nloops, uint32_t max_conns,
				    uint16_t *port)
{
	struct rpc_config cfg = { .nloops = nloops,
				  .max_conns = max_conns,
				  .idle_timeout_ms = 1000,
				  .record_timeout_ms = 1500,
				  .write_timeout_ms = 1000 };
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

/* A connection; rcvbuf > 0 shrinks its receive buffer first. */
static int tcp_connect(uint16_t port, int rcvbuf)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	CU_ASSERT_FATAL(fd >= 0);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (rcvbuf > 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	CU_ASSERT_FATAL(connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	return fd;
}

static void call_words(uint32_t w[11], uint32_t xid, uint32_t proc)
{
	uint32_t v[] = { htonl(0x80000000u | 40),
			 htonl(xid),
			 0,
			 htonl(2),
			 htonl(TPROG),
			 htonl(1),
			 htonl(proc),
			 0,
			 0,
			 0,
			 0 };

	memcpy(w, v, sizeof(v));
}

/* NULL round trip: 0 if answered within ms, else -1. */
static int null_call(int fd, uint32_t xid, int ms)
{
	uint32_t w[11], r[7];
	size_t got = 0;

	call_words(w, xid, 0);
	if (send(fd, w, sizeof(w), MSG_NOSIGNAL) != (ssize_t)sizeof(w))
		return -1;
	while (got < sizeof(r)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, ms) <= 0)
			return -1;
		n = recv(fd, (char *)r + got, sizeof(r) - got, 0);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return ntohl(r[1]) == xid && ntohl(r[6]) == 0 ? 0 : -1;
}

/* 1 once the server has closed fd (EOF or reset), 0 if still open after
 * ms.  Reads and discards what comes; *bytes counts it. */
static int wait_closed(int fd, int ms, size_t *bytes)
{
	int64_t end = test_now_ms() + ms;
	static char sink[1 << 16];

	while (test_now_ms() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 100) <= 0)
			continue;
		n = recv(fd, sink, sizeof(sink), 0);
		if (n <= 0)
			return 1;
		if (bytes)
			*bytes += (size_t)n;
	}
	return 0;
}

static void test_idle(void)
{
	struct rpc_server *srv;
	uint16_t port;
	int fd;

	srv = srv_start(2, 0, &port);
	fd = tcp_connect(port, 0);
	CU_ASSERT_EQUAL(null_call(fd, 1, 5000), 0);
	CU_ASSERT_EQUAL(null_call(fd, 2, 5000), 0);
	CU_ASSERT_EQUAL(wait_closed(fd, 10000, NULL), 1);
	close(fd);
	rpc_server_free(srv);
}

static void test_busy_not_idle(void)
{
	struct rpc_server *srv;
	uint16_t port;
	int fd;

	srv = srv_start(2, 0, &port);
	fd = tcp_connect(port, 0);
	/* 3 s of traffic, a call every 200 ms: never 1 s idle. */
	for (uint32_t i = 0; i < 15; i++) {
		CU_ASSERT_EQUAL(null_call(fd, 10 + i, 5000), 0);
		test_sleep_ms(200);
	}
	close(fd);
	rpc_server_free(srv);
}

static void test_slowloris(void)
{
	struct rpc_server *srv;
	uint32_t w[11];
	uint16_t port;
	int slow, other, closed = 0;
	int64_t end;

	srv = srv_start(1, 0, &port);
	slow = tcp_connect(port, 0);
	other = tcp_connect(port, 0);
	call_words(w, 20, 0);
	/* One byte each 300 ms: never idle, the record takes 13 s. */
	end = test_now_ms() + 10000;
	for (size_t i = 0; i < sizeof(w) && test_now_ms() < end; i++) {
		if (send(slow, (char *)w + i, 1, MSG_NOSIGNAL) != 1 ||
		    wait_closed(slow, 300, NULL)) {
			closed = 1;
			break;
		}
		/* Same loop, answered meanwhile. */
		CU_ASSERT_EQUAL(null_call(other, 100 + (uint32_t)i, 2000), 0);
	}
	CU_ASSERT_EQUAL(closed, 1);
	close(slow);
	close(other);
	rpc_server_free(srv);
}

static void test_nonreader(void)
{
	struct rpc_server *srv;
	uint32_t w[11];
	uint16_t port;
	int lazy, other;
	size_t bytes = 0;
	int64_t t0, t;

	srv = srv_start(1, 0, &port);
	lazy = tcp_connect(port, 4096);
	other = tcp_connect(port, 0);
	for (uint32_t i = 0; i < NBIG; i++) {
		call_words(w, 1000 + i, 1);
		CU_ASSERT_FATAL(send(lazy, w, sizeof(w), MSG_NOSIGNAL) ==
				(ssize_t)sizeof(w));
	}
	/* The other client, on the same loop, is answered promptly. */
	t0 = test_now_ms();
	for (uint32_t i = 0; i < 10; i++) {
		t = test_now_ms();
		CU_ASSERT_EQUAL(null_call(other, 200 + i, 5000), 0);
		CU_ASSERT(test_now_ms() - t < 2000);
		test_sleep_ms(300);
	}
	/* Give the stall timeout (1 s) time to fire while lazy reads nothing. */
	if (test_now_ms() - t0 < 5000)
		test_sleep_ms((int)(5000 - (test_now_ms() - t0)));
	/* Now read: it ends early because the server closed, not after
	 * every reply came. */
	CU_ASSERT_EQUAL(wait_closed(lazy, 20000, &bytes), 1);
	CU_ASSERT(bytes < (size_t)NBIG * BIG_LEN);
	close(lazy);
	close(other);
	rpc_server_free(srv);
}

static void test_max_conns(void)
{
	struct rpc_server *srv;
	uint16_t port;
	int a, b, c, d = -1;

	srv = srv_start(2, 2, &port);
	a = tcp_connect(port, 0);
	b = tcp_connect(port, 0);
	CU_ASSERT_EQUAL(null_call(a, 1, 5000), 0);
	CU_ASSERT_EQUAL(null_call(b, 2, 5000), 0);
	c = tcp_connect(port, 0);
	CU_ASSERT_EQUAL(wait_closed(c, 10000, NULL), 1);
	close(c);
	CU_ASSERT_EQUAL(null_call(a, 3, 5000), 0);
	CU_ASSERT_EQUAL(null_call(b, 4, 5000), 0);
	/* A slot freed is a slot for the next one. */
	close(a);
	for (int i = 0; i < 50; i++) {
		test_sleep_ms(100);
		d = tcp_connect(port, 0);
		if (null_call(d, 5, 2000) == 0)
			break;
		close(d);
		d = -1;
	}
	CU_ASSERT(d >= 0);
	if (d >= 0)
		close(d);
	close(b);
	rpc_server_free(srv);
}

int main(void)
{
	CU_pSuite s;
	unsigned fails;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("rpc_limits", NULL, NULL);
	CU_add_test(s, "an idle connection is closed", test_idle);
	CU_add_test(s, "a busy connection is not", test_busy_not_idle);
	CU_add_test(s, "a slowloris is closed, others answered",
		    test_slowloris);
	CU_add_test(s, "a client that never reads is closed, others answered",
		    test_nonreader);
	CU_add_test(s, "past max_conns a connection is closed at once",
		    test_max_conns);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
