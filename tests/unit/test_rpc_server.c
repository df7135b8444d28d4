/*
 * tests/unit/test_rpc_server.c - the transport end to end over loopback
 * TCP, with calls encoded by hand.
 *
 * Test program 0x20000099, versions 1 and 3:
 *   v1 proc 0 NULL (AUTH_NONE ok), inline
 *   v1 proc 1 ECHO uint32 -> uint32 + 1000000, finished by a worker thread
 *      that collects calls for a while and answers the newest first
 *   v1 proc 2 WHOAMI -> uid (AUTH_SYS only), inline
 *   v1 proc 3 no handler (PROC_UNAVAIL)
 *   v1 proc 4 FAIL -> rpc_call_fail(SYSTEM_ERR), from the worker thread
 *   v1 proc 5 DROP -> rpc_call_drop()
 *   v1 proc 6 BIG n -> opaque of n pattern bytes, built in rpc_call_body()
 *   v1 proc 7 SPLICE off n fail -> opaque of the pattern file's bytes
 *      [off, off+n), spliced through rpc_call_pipe(); with fail set the
 *      bytes go into the pipe but the call fails (SYSTEM_ERR)
 *   v3 proc 0 NULL
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "rpc/rpc.h"
#include "tests/lib/testlib.h"

#define TPROG 0x20000099u
#define MAX_INFLIGHT 8
#define NLOOPS 2
#define ECHO_ADD 1000000u

/* ---- the test program ---------------------------------------------- */

struct worker {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rpc_call *stack[512];
	bool fail[512];
	int n;
	bool quit;
	int delay_ms;
	/* finishing: counted before rpc_call_done(), done: after it. */
	atomic_int outstanding, max_outstanding, finishing, done;
	pthread_t th;
};

static struct worker W = { .mu = PTHREAD_MUTEX_INITIALIZER,
			   .cv = PTHREAD_COND_INITIALIZER };
static int ctx_token;
static atomic_int bad_ctx;

static void *worker_main(void *arg)
{
	struct rpc_call *batch[512];
	bool fail[512];
	int n;

	(void)arg;
	pthread_mutex_lock(&W.mu);
	for (;;) {
		while (!W.n && !W.quit)
			pthread_cond_wait(&W.cv, &W.mu);
		if (!W.n && W.quit)
			break;
		pthread_mutex_unlock(&W.mu);
		/* Let later calls arrive, so they can be answered first; on
		 * a loaded machine wait a little longer for a second one. */
		test_sleep_ms(W.delay_ms);
		pthread_mutex_lock(&W.mu);
		for (int i = 0; i < 20 && W.n < 2; i++) {
			pthread_mutex_unlock(&W.mu);
			test_sleep_ms(10);
			pthread_mutex_lock(&W.mu);
		}
		n = W.n;
		memcpy(batch, W.stack, sizeof(batch[0]) * (size_t)n);
		memcpy(fail, W.fail, sizeof(fail[0]) * (size_t)n);
		W.n = 0;
		pthread_mutex_unlock(&W.mu);
		while (n-- > 0) {
			atomic_fetch_sub(&W.outstanding, 1);
			atomic_fetch_add(&W.finishing, 1);
			if (fail[n]) {
				rpc_call_fail(batch[n], SYSTEM_ERR);
			} else {
				/* res was handed to the handler, args too. */
				rpc_call_done(batch[n]);
			}
			atomic_fetch_add(&W.done, 1);
		}
		pthread_mutex_lock(&W.mu);
	}
	pthread_mutex_unlock(&W.mu);
	return NULL;
}

static void worker_push(struct rpc_call *call, bool fail)
{
	int now = atomic_fetch_add(&W.outstanding, 1) + 1;
	int max = atomic_load(&W.max_outstanding);

	while (now > max &&
	       !atomic_compare_exchange_weak(&W.max_outstanding, &max, now))
		;
	pthread_mutex_lock(&W.mu);
	W.fail[W.n] = fail;
	W.stack[W.n++] = call;
	pthread_cond_signal(&W.cv);
	pthread_mutex_unlock(&W.mu);
}

static void check_ctx(struct rpc_call *call)
{
	if (rpc_call_ctx(call) != &ctx_token || rpc_call_loop(call) < 0 ||
	    rpc_call_loop(call) >= NLOOPS ||
	    rpc_call_peer(call)->ss_family != AF_INET)
		atomic_fetch_add(&bad_ctx, 1);
}

static void h_null(struct rpc_call *call, void *args, void *res)
{
	(void)args;
	(void)res;
	check_ctx(call);
	rpc_call_done(call);
}

static void h_echo(struct rpc_call *call, void *args, void *res)
{
	*(uint32_t *)res = *(uint32_t *)args + ECHO_ADD;
	check_ctx(call);
	worker_push(call, false);
}

static void h_whoami(struct rpc_call *call, void *args, void *res)
{
	(void)args;
	*(uint32_t *)res = rpc_call_cred(call)->uid;
	rpc_call_done(call);
}

static void h_fail(struct rpc_call *call, void *args, void *res)
{
	(void)args;
	(void)res;
	worker_push(call, true);
}

static void h_drop(struct rpc_call *call, void *args, void *res)
{
	(void)args;
	(void)res;
	rpc_call_drop(call);
}

/* Byte i of every BIG reply and of the SPLICE pattern file. */
static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + (i >> 12));
}

#define PATTERN_SIZE ((size_t)2 << 20)
static int pattern_fd = -1;
static atomic_int splice_refused;

struct big_args {
	uint32_t n;
};

static bool_t xdr_big_args(XDR *x, struct big_args *a)
{
	return xdr_u_int(x, &a->n);
}

static void h_big(struct rpc_call *call, void *args, void *res)
{
	uint32_t n = ((struct big_args *)args)->n, be = htonl(n);
	uint8_t *p = rpc_call_body(call, 4 + (size_t)n + 3);

	(void)res;
	if (!p) {
		rpc_call_fail(call, SYSTEM_ERR);
		return;
	}
	memcpy(p, &be, 4);
	for (size_t i = 0; i < n; i++)
		p[4 + i] = pattern(i);
	memset(p + 4 + n, 0, (4 - (n & 3)) & 3);
	rpc_call_done_body(call, 4 + (((size_t)n + 3) & ~(size_t)3));
}

struct splice_args {
	uint32_t off, n, fail;
};

static bool_t xdr_splice_args(XDR *x, struct splice_args *a)
{
	return xdr_u_int(x, &a->off) && xdr_u_int(x, &a->n) &&
	       xdr_u_int(x, &a->fail);
}

static void h_splice(struct rpc_call *call, void *args, void *res)
{
	struct splice_args *a = args;
	size_t span = ((a->off & 4095) + (size_t)a->n + 4095) & ~(size_t)4095;
	uint32_t be = htonl(a->n);
	uint8_t *p = rpc_call_body(call, 4);
	int pfd = rpc_call_pipe(call, span);
	loff_t at = a->off;
	size_t moved = 0;

	(void)res;
	if (!p || pfd < 0) {
		atomic_fetch_add(&splice_refused, 1);
		rpc_call_fail(call, SYSTEM_ERR);
		return;
	}
	while (moved < a->n) {
		ssize_t k = splice(pattern_fd, &at, pfd, NULL, a->n - moved, 0);

		if (k <= 0)
			break;
		moved += (size_t)k;
	}
	if (a->fail || moved != a->n) {
		rpc_call_fail(call, SYSTEM_ERR);
		return;
	}
	memcpy(p, &be, 4);
	rpc_call_done_splice(call, 4, moved);
}

static const struct rpc_proc procs_v1[] = {
	[0] = { .name = "null",
		.handler = h_null,
		.flags = RPC_PROC_AUTH_NONE_OK },
	[1] = { .name = "echo",
		.decode = (xdrproc_t)xdr_u_int,
		.args_size = sizeof(uint32_t),
		.encode = (xdrproc_t)xdr_u_int,
		.res_size = sizeof(uint32_t),
		.handler = h_echo,
		.flags = RPC_PROC_AUTH_NONE_OK },
	[2] = { .name = "whoami",
		.encode = (xdrproc_t)xdr_u_int,
		.res_size = sizeof(uint32_t),
		.handler = h_whoami },
	[3] = { .name = "absent" },
	[4] = { .name = "fail",
		.handler = h_fail,
		.flags = RPC_PROC_AUTH_NONE_OK },
	[5] = { .name = "drop",
		.handler = h_drop,
		.flags = RPC_PROC_AUTH_NONE_OK },
	[6] = { .name = "big",
		.decode = (xdrproc_t)xdr_big_args,
		.args_size = sizeof(struct big_args),
		.handler = h_big,
		.flags = RPC_PROC_AUTH_NONE_OK | RPC_PROC_IDEMPOTENT },
	[7] = { .name = "splice",
		.decode = (xdrproc_t)xdr_splice_args,
		.args_size = sizeof(struct splice_args),
		.handler = h_splice,
		.flags = RPC_PROC_AUTH_NONE_OK | RPC_PROC_IDEMPOTENT },
};

static const struct rpc_proc procs_v3[] = {
	[0] = { .name = "null",
		.handler = h_null,
		.flags = RPC_PROC_AUTH_NONE_OK },
};

static const struct rpc_program progs[] = {
	{ .name = "test",
	  .prog = TPROG,
	  .vers = 1,
	  .procs = procs_v1,
	  .nprocs = 8,
	  .ctx = &ctx_token },
	{ .name = "test",
	  .prog = TPROG,
	  .vers = 3,
	  .procs = procs_v3,
	  .nprocs = 1,
	  .ctx = &ctx_token },
};

static int start_server(struct rpc_server **srv, uint16_t *port)
{
	struct rpc_config cfg = { .nloops = NLOOPS,
				  .max_inflight = MAX_INFLIGHT };
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_storage bound;
	int rc;

	rc = rpc_server_new(&cfg, srv);
	if (rc)
		return rc;
	rc = rpc_server_listen(*srv, (struct sockaddr *)&sin, sizeof(sin),
			       progs, 2, &bound);
	if (!rc)
		rc = rpc_server_start(*srv);
	if (rc) {
		rpc_server_free(*srv);
		return rc;
	}
	*port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
	return 0;
}

/* ---- a hand-made client ---------------------------------------------- */

enum cred_kind { CRED_NONE, CRED_SYS, CRED_BOGUS };

struct msg {
	uint8_t b[8192];
	size_t len;
};

static void put(struct msg *m, uint32_t v)
{
	uint32_t be = htonl(v);

	memcpy(m->b + m->len, &be, 4);
	m->len += 4;
}

/* Append one call record (mark included) to m. */
static void call_rec(struct msg *m, uint32_t xid, uint32_t rpcvers,
		     uint32_t prog, uint32_t vers, uint32_t proc,
		     enum cred_kind ck, const uint32_t *args, int nargs)
{
	size_t mark = m->len;

	m->len += 4;
	put(m, xid);
	put(m, 0); /* CALL */
	put(m, rpcvers);
	put(m, prog);
	put(m, vers);
	put(m, proc);
	switch (ck) {
	case CRED_NONE:
		put(m, AUTH_NONE);
		put(m, 0);
		break;
	case CRED_SYS:
		put(m, AUTH_SYS);
		put(m, 28); /* stamp, "tst", uid, gid, 1 gid */
		put(m, 1);
		put(m, 3);
		memcpy(m->b + m->len, "tst\0", 4);
		m->len += 4;
		put(m, 4242);
		put(m, 42);
		put(m, 1);
		put(m, 7);
		break;
	case CRED_BOGUS:
		put(m, 7);
		put(m, 0);
		break;
	}
	put(m, AUTH_NONE);
	put(m, 0);
	for (int i = 0; i < nargs; i++)
		put(m, args[i]);
	uint32_t be = htonl(0x80000000u | (uint32_t)(m->len - mark - 4));
	memcpy(m->b + mark, &be, 4);
}

static int cli_connect(uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval tv = { .tv_sec = 5 };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin))) {
		close(fd);
		return -1;
	}
	return fd;
}

static int send_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t k = send(fd, b, n, MSG_NOSIGNAL);

		if (k <= 0)
			return -1;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

static int recv_all(int fd, void *p, size_t n)
{
	uint8_t *b = p;

	while (n) {
		ssize_t k = recv(fd, b, n, 0);

		if (k <= 0)
			return -1;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Read one reply record into w (host order); returns its word count. */
static int recv_reply(int fd, uint32_t *w, int maxw)
{
	uint32_t mark;
	size_t len;

	if (recv_all(fd, &mark, 4))
		return -1;
	mark = ntohl(mark);
	len = mark & 0x7fffffffu;
	if (!(mark & 0x80000000u) || len % 4 || len > (size_t)maxw * 4)
		return -1;
	if (recv_all(fd, w, len))
		return -1;
	for (size_t i = 0; i < len / 4; i++)
		w[i] = ntohl(w[i]);
	return (int)(len / 4);
}

/* One call on fd; reply words into w.  Returns the word count or -1. */
static int roundtrip(int fd, uint32_t xid, uint32_t rpcvers, uint32_t vers,
		     uint32_t proc, enum cred_kind ck, const uint32_t *args,
		     int nargs, uint32_t *w, uint32_t prog)
{
	struct msg m = { .len = 0 };

	call_rec(&m, xid, rpcvers, prog, vers, proc, ck, args, nargs);
	if (send_all(fd, m.b, m.len))
		return -1;
	return recv_reply(fd, w, 64);
}

/* Check an accepted reply: xid, REPLY, MSG_ACCEPTED, null verf, stat. */
static void expect_accepted(const uint32_t *w, int n, uint32_t xid,
			    uint32_t astat, int words)
{
	CU_ASSERT_EQUAL(n, words);
	if (n < 6)
		return;
	CU_ASSERT_EQUAL(w[0], xid);
	CU_ASSERT_EQUAL(w[1], 1);
	CU_ASSERT_EQUAL(w[2], 0);
	CU_ASSERT_EQUAL(w[3], 0);
	CU_ASSERT_EQUAL(w[4], 0);
	CU_ASSERT_EQUAL(w[5], astat);
}

/* ---- tests ----------------------------------------------------------- */

static struct rpc_server *srv;
static uint16_t port;

/* An eventfd watched on loop 1: what rpc_server_watch() promises. */
static int watch_fd = -1;
static atomic_int watch_hits, watch_loop = -1;

static void on_watch(void *arg, int loop)
{
	uint64_t v;

	if (read(*(int *)arg, &v, sizeof(v)) == sizeof(v))
		atomic_fetch_add(&watch_hits, (int)v);
	atomic_store(&watch_loop, loop);
}

static int suite_init(void)
{
	char path[] = "/tmp/test_rpc_server.XXXXXX";
	uint8_t *buf = malloc(PATTERN_SIZE);

	pattern_fd = mkstemp(path);
	if (pattern_fd < 0 || !buf)
		return -1;
	unlink(path);
	for (size_t i = 0; i < PATTERN_SIZE; i++)
		buf[i] = pattern(i);
	if (pwrite(pattern_fd, buf, PATTERN_SIZE, 0) != (ssize_t)PATTERN_SIZE)
		return -1;
	free(buf);
	W.delay_ms = 20;
	if (pthread_create(&W.th, NULL, worker_main, NULL))
		return -1;
	if (start_server(&srv, &port))
		return -1;
	/* A started server takes no new watches; a second one is made. */
	watch_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return watch_fd < 0 ? -1 : 0;
}

static int suite_fini(void)
{
	rpc_server_stop(srv, 2000);
	rpc_server_free(srv);
	if (watch_fd >= 0)
		close(watch_fd);
	if (pattern_fd >= 0)
		close(pattern_fd);
	pthread_mutex_lock(&W.mu);
	W.quit = true;
	pthread_cond_signal(&W.cv);
	pthread_mutex_unlock(&W.mu);
	pthread_join(W.th, NULL);
	return 0;
}

static void test_null(void)
{
	uint32_t w[64];
	int fd = cli_connect(port), n;

	CU_ASSERT_FATAL(fd >= 0);
	n = roundtrip(fd, 1, 2, 1, 0, CRED_NONE, NULL, 0, w, TPROG);
	expect_accepted(w, n, 1, SUCCESS, 6);
	n = roundtrip(fd, 2, 2, 3, 0, CRED_SYS, NULL, 0, w, TPROG);
	expect_accepted(w, n, 2, SUCCESS, 6);
	close(fd);
	CU_ASSERT_EQUAL(atomic_load(&bad_ctx), 0);
}

/*
 * 100 calls in one write.  The worker answers the newest first, so the
 * replies come out of order; each must carry its own xid and value, and
 * no more than MAX_INFLIGHT calls may be outstanding at once.
 */
static void test_pipeline(void)
{
	enum { N = 100 };
	static struct msg m;
	bool seen[N] = { false };
	uint32_t w[64], prev = 0;
	int fd = cli_connect(port), n, inversions = 0, ok = 0;

	CU_ASSERT_FATAL(fd >= 0);
	atomic_store(&W.max_outstanding, 0);
	m.len = 0;
	for (uint32_t i = 0; i < N; i++) {
		uint32_t v = i * 3;

		call_rec(&m, 5000 + i, 2, TPROG, 1, 1, CRED_NONE, &v, 1);
	}
	CU_ASSERT_FATAL(send_all(fd, m.b, m.len) == 0);
	for (int i = 0; i < N; i++) {
		n = recv_reply(fd, w, 64);
		CU_ASSERT_EQUAL(n, 7);
		if (n != 7)
			break;
		uint32_t k = w[0] - 5000;

		CU_ASSERT(k < N && !seen[k]);
		if (k >= N || seen[k])
			continue;
		seen[k] = true;
		CU_ASSERT_EQUAL(w[5], SUCCESS);
		CU_ASSERT_EQUAL(w[6], k * 3 + ECHO_ADD);
		if (w[6] == k * 3 + ECHO_ADD)
			ok++;
		if (i && w[0] < prev)
			inversions++;
		prev = w[0];
	}
	CU_ASSERT_EQUAL(ok, N);
	CU_ASSERT(inversions > 0);
	CU_ASSERT(atomic_load(&W.max_outstanding) <= MAX_INFLIGHT);
	CU_ASSERT(atomic_load(&W.max_outstanding) > 1);
	close(fd);
}

static void test_errors(void)
{
	uint32_t w[64], v = 1;
	int fd = cli_connect(port), n;

	CU_ASSERT_FATAL(fd >= 0);

	n = roundtrip(fd, 10, 2, 1, 0, CRED_NONE, NULL, 0, w, TPROG - 1);
	expect_accepted(w, n, 10, PROG_UNAVAIL, 6);

	n = roundtrip(fd, 11, 2, 2, 0, CRED_NONE, NULL, 0, w, TPROG);
	expect_accepted(w, n, 11, PROG_MISMATCH, 8);
	if (n == 8)
		CU_ASSERT(w[6] == 1 && w[7] == 3);

	n = roundtrip(fd, 12, 2, 1, 3, CRED_NONE, NULL, 0, w, TPROG);
	expect_accepted(w, n, 12, PROC_UNAVAIL, 6);
	n = roundtrip(fd, 13, 2, 1, 99, CRED_NONE, NULL, 0, w, TPROG);
	expect_accepted(w, n, 13, PROC_UNAVAIL, 6);

	/* ECHO without its argument. */
	n = roundtrip(fd, 14, 2, 1, 1, CRED_NONE, NULL, 0, w, TPROG);
	expect_accepted(w, n, 14, GARBAGE_ARGS, 6);

	n = roundtrip(fd, 15, 2, 1, 4, CRED_NONE, NULL, 0, w, TPROG);
	expect_accepted(w, n, 15, SYSTEM_ERR, 6);

	/* MSG_DENIED RPC_MISMATCH 2..2. */
	n = roundtrip(fd, 16, 3, 1, 0, CRED_NONE, NULL, 0, w, TPROG);
	CU_ASSERT_EQUAL(n, 6);
	if (n == 6)
		CU_ASSERT(w[0] == 16 && w[1] == 1 && w[2] == 1 && w[3] == 0 &&
			  w[4] == 2 && w[5] == 2);

	/* WHOAMI: AUTH_NONE is too weak, AUTH_SYS passes its uid. */
	n = roundtrip(fd, 17, 2, 1, 2, CRED_NONE, NULL, 0, w, TPROG);
	CU_ASSERT_EQUAL(n, 5);
	if (n == 5)
		CU_ASSERT(w[0] == 17 && w[2] == 1 && w[3] == 1 &&
			  w[4] == AUTH_TOOWEAK);
	n = roundtrip(fd, 18, 2, 1, 2, CRED_SYS, NULL, 0, w, TPROG);
	expect_accepted(w, n, 18, SUCCESS, 7);
	if (n == 7)
		CU_ASSERT_EQUAL(w[6], 4242);

	n = roundtrip(fd, 19, 2, 1, 1, CRED_BOGUS, &v, 1, w, TPROG);
	CU_ASSERT_EQUAL(n, 5);
	if (n == 5)
		CU_ASSERT(w[0] == 19 && w[2] == 1 && w[3] == 1 &&
			  w[4] == AUTH_BADCRED);

	/* A dropped call gets no reply; the next call's reply comes first. */
	{
		struct msg m = { .len = 0 };

		call_rec(&m, 20, 2, TPROG, 1, 5, CRED_NONE, NULL, 0);
		call_rec(&m, 21, 2, TPROG, 1, 0, CRED_NONE, NULL, 0);
		CU_ASSERT_FATAL(send_all(fd, m.b, m.len) == 0);
		n = recv_reply(fd, w, 64);
		expect_accepted(w, n, 21, SUCCESS, 6);
	}
	close(fd);
}

/* A huge record mark closes that connection; others keep working. */
static void test_huge_record(void)
{
	static const uint8_t huge[4] = { 0xff, 0xff, 0xff, 0xff };
	uint32_t w[64];
	uint8_t c;
	int a = cli_connect(port), b = cli_connect(port), n;

	CU_ASSERT_FATAL(a >= 0 && b >= 0);
	n = roundtrip(a, 30, 2, 1, 0, CRED_NONE, NULL, 0, w, TPROG);
	expect_accepted(w, n, 30, SUCCESS, 6);
	CU_ASSERT(send_all(b, huge, 4) == 0);
	/* EOF (0) or a reset (-1 with ECONNRESET), not a timeout. */
	errno = 0;
	n = (int)recv(b, &c, 1, 0);
	CU_ASSERT(n == 0 || (n < 0 && errno == ECONNRESET));
	n = roundtrip(a, 31, 2, 1, 0, CRED_NONE, NULL, 0, w, TPROG);
	expect_accepted(w, n, 31, SUCCESS, 6);
	close(a);
	close(b);
}

/*
 * A 300 KiB call in two fragments (the server reads big fragments straight
 * into the record) is answered; one of max_record + 1 bytes, made of two
 * fragments each under the limit, closes the connection.
 */
static void test_big_records(void)
{
	enum { PAD = 300 << 10 };
	size_t max = (1u << 20) + (64u << 10);
	struct msg head = { .len = 0 };
	uint8_t *big = calloc(1, PAD);
	uint32_t w[64], v = 9, mk;
	uint8_t c;
	int fd = cli_connect(port), n;

	CU_ASSERT_FATAL(fd >= 0 && big);
	call_rec(&head, 70, 2, TPROG, 1, 1, CRED_NONE, &v, 1);
	/* First fragment: the call; second (last): padding XDR ignores. */
	mk = htonl((uint32_t)(head.len - 4));
	memcpy(head.b, &mk, 4);
	mk = htonl(0x80000000u | PAD);
	memcpy(head.b + head.len, &mk, 4);
	CU_ASSERT(send_all(fd, head.b, head.len + 4) == 0);
	CU_ASSERT(send_all(fd, big, PAD) == 0);
	n = recv_reply(fd, w, 64);
	expect_accepted(w, n, 70, SUCCESS, 7);
	if (n == 7)
		CU_ASSERT_EQUAL(w[6], 9 + ECHO_ADD);

	mk = htonl((uint32_t)(max / 2));
	CU_ASSERT(send_all(fd, &mk, 4) == 0);
	CU_ASSERT(send_all(fd, big, PAD) == 0);
	CU_ASSERT(send_all(fd, big, max / 2 - PAD) == 0);
	mk = htonl(0x80000000u | (uint32_t)(max - max / 2 + 1));
	CU_ASSERT(send_all(fd, &mk, 4) == 0);
	errno = 0;
	n = (int)recv(fd, &c, 1, 0);
	CU_ASSERT(n == 0 || (n < 0 && errno == ECONNRESET));
	close(fd);
	free(big);
}

static void test_watch(void)
{
	struct rpc_server *s2;
	uint64_t one = 3;
	int waited = 0;
	struct rpc_config cfg = { .nloops = NLOOPS };

	CU_ASSERT_EQUAL(rpc_server_nloops(srv), NLOOPS);
	CU_ASSERT_EQUAL(
		rpc_server_watch(srv, 0, watch_fd, on_watch, NULL, &watch_fd),
		-EBUSY);
	CU_ASSERT_FATAL(rpc_server_new(&cfg, &s2) == 0);
	CU_ASSERT_EQUAL(rpc_server_watch(s2, NLOOPS, watch_fd, on_watch, NULL,
					 &watch_fd),
			-EINVAL);
	CU_ASSERT_FATAL(rpc_server_watch(s2, 1, watch_fd, on_watch, NULL,
					 &watch_fd) == 0);
	CU_ASSERT_FATAL(rpc_server_start(s2) == 0);
	CU_ASSERT(write(watch_fd, &one, sizeof(one)) == sizeof(one));
	while (atomic_load(&watch_hits) < 3 && waited++ < 500)
		test_sleep_ms(2);
	CU_ASSERT_EQUAL(atomic_load(&watch_hits), 3);
	CU_ASSERT_EQUAL(atomic_load(&watch_loop), 1);
	rpc_server_stop(s2, 1000);
	rpc_server_free(s2);
}

/*
 * Read one reply whose results are an opaque, into *data (malloc'ed);
 * returns the opaque's length, or -1 if the reply is not a SUCCESS of
 * xid with exactly that opaque and zero padding.
 */
static long recv_opaque(int fd, uint32_t xid, uint8_t **data)
{
	uint32_t mark, hdr[7];
	size_t len, n;
	uint8_t *b;

	*data = NULL;
	if (recv_all(fd, &mark, 4))
		return -1;
	mark = ntohl(mark);
	len = mark & 0x7fffffffu;
	if (!(mark & 0x80000000u) || len < sizeof(hdr) || len % 4 ||
	    recv_all(fd, hdr, sizeof(hdr)))
		return -1;
	b = malloc(len - sizeof(hdr) + 1);
	if (!b || recv_all(fd, b, len - sizeof(hdr))) {
		free(b);
		return -1;
	}
	n = ntohl(hdr[6]);
	*data = b;
	if (ntohl(hdr[0]) != xid || ntohl(hdr[5]) != SUCCESS ||
	    ((n + 3) & ~(size_t)3) != len - sizeof(hdr))
		return -1;
	for (size_t i = n; i < len - sizeof(hdr); i++)
		if (b[i])
			return -1;
	return (long)n;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Many big replies built in place, pipelined: each reply's bytes are
 * exact, and the connection never stalls.  Queued output past twice the
 * record limit stops reading; once a flush drained it the connection
 * used to wait for the next event, or the once-a-second sweep, before
 * reading the calls still in its socket: this ran for ~15 s instead of
 * well under one.  The bound is a hang detector, far above the normal.
 */
static void test_big_replies(void)
{
	enum { N = 64, SZ = 512 << 10 };
	static struct msg m;
	uint8_t *data;
	bool ok = true;
	double t0;
	int fd = cli_connect(port);

	CU_ASSERT_FATAL(fd >= 0);
	m.len = 0;
	for (uint32_t i = 0; i < N; i++) {
		uint32_t n = SZ - (i & 3);

		call_rec(&m, 9000 + i, 2, TPROG, 1, 6, CRED_NONE, &n, 1);
	}
	t0 = now_s();
	CU_ASSERT_FATAL(send_all(fd, m.b, m.len) == 0);
	for (uint32_t i = 0; i < N && ok; i++) {
		long n = recv_opaque(fd, 9000 + i, &data);

		ok = n == (long)(SZ - (i & 3));
		for (long k = 0; ok && k < n; k++)
			ok = data[k] == pattern((size_t)k);
		free(data);
	}
	CU_ASSERT(ok);
	CU_ASSERT(now_s() - t0 < 6.0);
	close(fd);
}

/*
 * Payloads spliced from a file: every length and offset (padding, page
 * spans, a whole MiB), pipelined; and calls that filled their pipe and
 * then failed, whose bytes must never reach another reply.
 */
static void test_splice_replies(void)
{
	static const uint32_t cases[][3] = {
		{ 0, 1, 0 },         { 5, 3, 0 },
		{ 4096, 4096, 0 },   { 4093, 4099, 0 },
		{ 0, 1 << 20, 0 },   { 100, 70000, 1 },
		{ 8, 65537, 0 },     { 0, 0, 0 },
		{ 4000, 200000, 1 }, { 1 << 20, 1 << 20, 0 },
	};
	enum { NC = sizeof(cases) / sizeof(cases[0]), ROUNDS = 8 };
	static struct msg m;
	uint32_t w[64];
	uint8_t *data;
	int fd = cli_connect(port), bad = 0;

	CU_ASSERT_FATAL(fd >= 0);
	atomic_store(&splice_refused, 0);
	m.len = 0;
	for (uint32_t r = 0; r < ROUNDS; r++)
		for (uint32_t i = 0; i < NC; i++)
			call_rec(&m, 7000 + r * NC + i, 2, TPROG, 1, 7,
				 CRED_NONE, cases[i], 3);
	CU_ASSERT_FATAL(send_all(fd, m.b, m.len) == 0);
	for (uint32_t r = 0; r < ROUNDS; r++) {
		for (uint32_t i = 0; i < NC; i++) {
			uint32_t xid = 7000 + r * NC + i;
			long n;

			if (cases[i][2]) {
				n = recv_reply(fd, w, 64);
				expect_accepted(w, n, xid, SYSTEM_ERR, 6);
				continue;
			}
			n = recv_opaque(fd, xid, &data);
			if (n != (long)cases[i][1])
				bad++;
			for (long k = 0; n > 0 && k < n; k++)
				if (data[k] !=
				    pattern(cases[i][0] + (size_t)k)) {
					bad++;
					break;
				}
			free(data);
		}
	}
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(atomic_load(&splice_refused), 0);
	close(fd);
}

/* Garbage records get no reply and close nothing. */
static void test_garbage(void)
{
	static const uint8_t junk[] = { 0x80, 0, 0, 3, 1, 2, 3 };
	uint32_t w[64];
	struct msg m = { .len = 0 };
	int fd = cli_connect(port), n;

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(send_all(fd, junk, sizeof(junk)) == 0);
	/* A REPLY message: ignored. */
	call_rec(&m, 40, 2, TPROG, 1, 0, CRED_NONE, NULL, 0);
	m.b[11] = 1;
	/* A header cut off inside the credential. */
	put(&m, 0x80000000u | 28);
	put(&m, 41);
	put(&m, 0);
	put(&m, 2);
	put(&m, TPROG);
	put(&m, 1);
	put(&m, 0);
	put(&m, AUTH_SYS);
	CU_ASSERT(send_all(fd, m.b, m.len) == 0);
	n = roundtrip(fd, 42, 2, 1, 0, CRED_NONE, NULL, 0, w, TPROG);
	expect_accepted(w, n, 42, SUCCESS, 6);
	close(fd);

	/* Random bytes as a stream: the connection may go, the server not. */
	fd = cli_connect(port);
	CU_ASSERT_FATAL(fd >= 0);
	srand(7);
	for (size_t i = 0; i < 256; i++)
		m.b[i] = (uint8_t)rand();
	send_all(fd, m.b, 256);
	close(fd);
	fd = cli_connect(port);
	CU_ASSERT_FATAL(fd >= 0);
	n = roundtrip(fd, 43, 2, 1, 0, CRED_NONE, NULL, 0, w, TPROG);
	expect_accepted(w, n, 43, SUCCESS, 6);
	close(fd);
}

/* A call sent in three fragments, one byte per send. */
static void test_fragments_byte_at_a_time(void)
{
	struct msg whole = { .len = 0 }, m = { .len = 0 };
	uint32_t w[64], v = 77;
	size_t body, cut1, cut2;
	int fd = cli_connect(port), n;

	CU_ASSERT_FATAL(fd >= 0);
	call_rec(&whole, 50, 2, TPROG, 1, 1, CRED_SYS, &v, 1);
	body = whole.len - 4;
	cut1 = 5;
	cut2 = body - 3;
	put(&m, (uint32_t)cut1);
	memcpy(m.b + m.len, whole.b + 4, cut1);
	m.len += cut1;
	put(&m, (uint32_t)(cut2 - cut1));
	memcpy(m.b + m.len, whole.b + 4 + cut1, cut2 - cut1);
	m.len += cut2 - cut1;
	put(&m, 0x80000000u | (uint32_t)(body - cut2));
	memcpy(m.b + m.len, whole.b + 4 + cut2, body - cut2);
	m.len += body - cut2;
	for (size_t i = 0; i < m.len; i++)
		CU_ASSERT_FATAL(send_all(fd, m.b + i, 1) == 0);
	n = recv_reply(fd, w, 64);
	expect_accepted(w, n, 50, SUCCESS, 7);
	if (n == 7)
		CU_ASSERT_EQUAL(w[6], 77 + ECHO_ADD);
	close(fd);
}

/* rpc_server_stop() waits for a deferred call, whose reply still goes out. */
static void test_stop_waits(void)
{
	struct rpc_server *s2;
	uint16_t p2;
	struct msg m = { .len = 0 };
	uint32_t w[64], v = 5;
	struct timespec t0, t1;
	int fd, n, done0, waited = 0;
	long ms;

	CU_ASSERT_FATAL(start_server(&s2, &p2) == 0);
	fd = cli_connect(p2);
	CU_ASSERT_FATAL(fd >= 0);
	W.delay_ms = 300;
	done0 = atomic_load(&W.finishing);
	call_rec(&m, 60, 2, TPROG, 1, 1, CRED_NONE, &v, 1);
	CU_ASSERT_FATAL(send_all(fd, m.b, m.len) == 0);
	while (atomic_load(&W.outstanding) == 0 && waited++ < 500)
		test_sleep_ms(2);
	CU_ASSERT_FATAL(atomic_load(&W.outstanding) == 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rpc_server_stop(s2, 5000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 +
	     (t1.tv_nsec - t0.tv_nsec) / 1000000;
	CU_ASSERT_EQUAL(atomic_load(&W.finishing), done0 + 1);
	CU_ASSERT(ms < 4000);
	n = recv_reply(fd, w, 64);
	expect_accepted(w, n, 60, SUCCESS, 7);
	if (n == 7)
		CU_ASSERT_EQUAL(w[6], 5 + ECHO_ADD);
	/* Stopped: no new connections. */
	close(fd);
	CU_ASSERT(cli_connect(p2) < 0);
	rpc_server_free(s2);
	W.delay_ms = 20;
}

/*
 * Past timeout_ms, stop gives up on a deferred call: the connection goes
 * without a reply, and the call finished later is freed by
 * rpc_server_free() (ASan's leak check watches that path).
 */
static void test_stop_timeout(void)
{
	struct rpc_server *s3;
	uint16_t p3;
	struct msg m = { .len = 0 };
	uint32_t w[64], v = 6;
	struct timespec t0, t1;
	int fd, done0, waited = 0;
	long ms;

	CU_ASSERT_FATAL(start_server(&s3, &p3) == 0);
	fd = cli_connect(p3);
	CU_ASSERT_FATAL(fd >= 0);
	/*
	 * Calls of earlier tests must not finish inside the window below:
	 * none outstanding, and none between rpc_call_done() and its count
	 * (outstanding drops before the call is done, done rises after).
	 */
	while ((atomic_load(&W.outstanding) != 0 ||
		atomic_load(&W.finishing) != atomic_load(&W.done)) &&
	       waited++ < 5000)
		test_sleep_ms(2);
	waited = 0;
	W.delay_ms = 1000;
	done0 = atomic_load(&W.done);
	call_rec(&m, 80, 2, TPROG, 1, 1, CRED_NONE, &v, 1);
	CU_ASSERT_FATAL(send_all(fd, m.b, m.len) == 0);
	while (atomic_load(&W.outstanding) == 0 && waited++ < 500)
		test_sleep_ms(2);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rpc_server_stop(s3, 50);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 +
	     (t1.tv_nsec - t0.tv_nsec) / 1000000;
	CU_ASSERT(ms >= 40 && ms < 800);
	CU_ASSERT_EQUAL(atomic_load(&W.done), done0);
	CU_ASSERT_EQUAL(recv_reply(fd, w, 64), -1);
	close(fd);
	waited = 0;
	while (atomic_load(&W.done) == done0 && waited++ < 5000)
		test_sleep_ms(2);
	CU_ASSERT_EQUAL(atomic_load(&W.done), done0 + 1);
	rpc_server_free(s3);
	W.delay_ms = 20;
}

int main(void)
{
	CU_pSuite s;
	unsigned fails;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite("rpc_server", suite_init, suite_fini);
	if (!s || !CU_add_test(s, "NULL", test_null) ||
	    !CU_add_test(s, "pipeline 100, out of order", test_pipeline) ||
	    !CU_add_test(s, "RPC errors", test_errors) ||
	    !CU_add_test(s, "huge record mark", test_huge_record) ||
	    !CU_add_test(s, "big records", test_big_records) ||
	    !CU_add_test(s, "big replies, pipelined, no stall",
			 test_big_replies) ||
	    !CU_add_test(s, "spliced replies", test_splice_replies) ||
	    !CU_add_test(s, "watched fd", test_watch) ||
	    !CU_add_test(s, "garbage", test_garbage) ||
	    !CU_add_test(s, "fragments byte at a time",
			 test_fragments_byte_at_a_time) ||
	    !CU_add_test(s, "stop waits for a deferred call",
			 test_stop_waits) ||
	    !CU_add_test(s, "stop gives up after its timeout",
			 test_stop_timeout)) {
		CU_cleanup_registry();
		return 2;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
