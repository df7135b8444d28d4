/*
 * tests/e2e/test_e2e_drc.c - the duplicate-request cache and the
 * connection limits, against a real gateway, with calls written by hand
 * on raw sockets (a retransmission is the same bytes sent again, which no
 * client library will do on request).
 *
 * DRC: a REMOVE sent twice with the same xid and arguments answers OK
 * both times, byte for byte the same reply, on the same connection and on
 * new ones (which land on any of the gateway's loops); the same xid with
 * another name is a new call.  Limits: --max-connections, --idle-timeout,
 * and a client that pipelines 1 MiB READs and never reads the replies
 * neither delays another client nor stays connected.  Time bounds are
 * generous ("within 10 s").
 */
#include "harness.h"

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
#include "tests/lib/testlib.h"

#define NFSPROC3_READ_ 6
#define NFSPROC3_REMOVE_ 12
#define NFSPROC3_LINK_ 15
#define AUTH_SYS_FLAVOR 1
#define BIG (1u << 20)
#define NBIG 64

static struct e2e_gw gw;
static struct e2e_rpc *R;
static nfs_fh3 ROOT;

/* ------------------------------------------------------------------ */
/* raw calls                                                           */

struct buf {
	uint8_t b[1024];
	size_t n;
};

static void put32(struct buf *b, uint32_t v)
{
	v = htonl(v);
	memcpy(b->b + b->n, &v, 4);
	b->n += 4;
}

static void put_opaque(struct buf *b, const void *p, size_t n)
{
	put32(b, (uint32_t)n);
	memcpy(b->b + b->n, p, n);
	b->n += n;
	while (b->n % 4)
		b->b[b->n++] = 0;
}

/* Record mark, call header with AUTH_SYS as the current user; the
 * caller appends the arguments and then seals the mark. */
static void call_begin(struct buf *b, uint32_t xid, uint32_t proc)
{
	struct buf cred = { .n = 0 };

	b->n = 0;
	put32(b, 0); /* record mark, set by call_seal() */
	put32(b, xid);
	put32(b, 0); /* CALL */
	put32(b, 2);
	put32(b, NFS_PROGRAM);
	put32(b, NFS_V3);
	put32(b, proc);
	put32(&cred, 1); /* stamp */
	put_opaque(&cred, "e2e-drc", 7);
	put32(&cred, (uint32_t)getuid());
	put32(&cred, (uint32_t)getgid());
	put32(&cred, 0); /* no aux gids */
	put32(b, AUTH_SYS_FLAVOR);
	put_opaque(b, cred.b, cred.n);
	put32(b, 0); /* verifier AUTH_NONE */
	put32(b, 0);
}

static void call_seal(struct buf *b)
{
	uint32_t mark = htonl(0x80000000u | (uint32_t)(b->n - 4));

	memcpy(b->b, &mark, 4);
}

static void remove_call(struct buf *b, uint32_t xid, const nfs_fh3 *dir,
			const char *name)
{
	call_begin(b, xid, NFSPROC3_REMOVE_);
	put_opaque(b, dir->data.data_val, dir->data.data_len);
	put_opaque(b, name, strlen(name));
	call_seal(b);
}

static void link_call(struct buf *b, uint32_t xid, const nfs_fh3 *file,
		      const nfs_fh3 *dir, const char *name)
{
	call_begin(b, xid, NFSPROC3_LINK_);
	put_opaque(b, file->data.data_val, file->data.data_len);
	put_opaque(b, dir->data.data_val, dir->data.data_len);
	put_opaque(b, name, strlen(name));
	call_seal(b);
}

static void read_call(struct buf *b, uint32_t xid, const nfs_fh3 *fh,
		      uint32_t count)
{
	call_begin(b, xid, NFSPROC3_READ_);
	put_opaque(b, fh->data.data_val, fh->data.data_len);
	put32(b, 0); /* offset, high word */
	put32(b, 0);
	put32(b, count);
	call_seal(b);
}

/* A NULL call with AUTH_NONE: the smallest thing a gateway answers. */
static void null_call(struct buf *b, uint32_t xid)
{
	b->n = 0;
	put32(b, 0x80000000u | 40);
	put32(b, xid);
	put32(b, 0);
	put32(b, 2);
	put32(b, NFS_PROGRAM);
	put32(b, NFS_V3);
	put32(b, 0);
	put32(b, 0);
	put32(b, 0);
	put32(b, 0);
	put32(b, 0);
}

static int tcp_connect(int port, int rcvbuf)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (rcvbuf > 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int send_buf(int fd, const struct buf *b)
{
	return send(fd, b->b, b->n, MSG_NOSIGNAL) == (ssize_t)b->n ? 0 : -1;
}

/* Read exactly n bytes within ms: 0, -1 on EOF or error, -2 on timeout. */
static int recv_all(int fd, void *p, size_t n, int ms)
{
	uint64_t deadline = e2e_now_ms() + (uint64_t)ms;
	uint8_t *c = p;

	while (n) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now = e2e_now_ms();
		ssize_t r;

		if (now >= deadline)
			return -2;
		if (poll(&pfd, 1, (int)(deadline - now)) <= 0)
			continue;
		r = recv(fd, c, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

/* One reply record (one fragment) into b: 0, or what recv_all says. */
static int recv_reply(int fd, struct buf *b, int ms)
{
	uint32_t mark;
	int rc = recv_all(fd, &mark, 4, ms);

	if (rc)
		return rc;
	mark = ntohl(mark);
	if (!(mark & 0x80000000u) || (mark & 0x7fffffffu) > sizeof(b->b))
		return -1;
	b->n = mark & 0x7fffffffu;
	return recv_all(fd, b->b, b->n, ms);
}

static uint32_t word(const struct buf *b, size_t i)
{
	uint32_t v;

	memcpy(&v, b->b + 4 * i, 4);
	return ntohl(v);
}

/* Round trip; the reply's nfsstat3, or -1 (the failure printed). */
static int nfs_status(int fd, const struct buf *call, uint32_t xid,
		      struct buf *rep)
{
	if (send_buf(fd, call) != 0 || recv_reply(fd, rep, 10000) != 0) {
		fprintf(stderr, "  no reply to xid %08x\n", xid);
		return -1;
	}
	/* xid, REPLY, MSG_ACCEPTED, verifier (2), SUCCESS, nfsstat3 */
	if (rep->n < 28 || word(rep, 0) != xid || word(rep, 1) != 1 ||
	    word(rep, 2) != 0 || word(rep, 5) != 0) {
		fprintf(stderr, "  bad reply to xid %08x\n", xid);
		return -1;
	}
	return (int)word(rep, 6);
}

static int null_ok(int fd, uint32_t xid, int ms)
{
	struct buf c, r;

	null_call(&c, xid);
	return send_buf(fd, &c) == 0 && recv_reply(fd, &r, ms) == 0 &&
	       r.n == 24 && word(&r, 0) == xid && word(&r, 5) == 0;
}

/* 1 once the peer has closed fd, 0 if still open after ms; reads and
 * discards what comes, counting it in *bytes. */
static int wait_closed(int fd, int ms, size_t *bytes)
{
	uint64_t deadline = e2e_now_ms() + (uint64_t)ms;
	static uint8_t sink[1 << 16];

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now = e2e_now_ms();
		ssize_t r;

		if (now >= deadline)
			return 0;
		if (poll(&pfd, 1, (int)(deadline - now)) <= 0)
			continue;
		r = recv(fd, sink, sizeof(sink), 0);
		if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
			return 1;
		if (r > 0 && bytes)
			*bytes += (size_t)r;
	}
}

/* CREATE name in the root and return its handle (a copy owned by R). */
static nfs_fh3 mk_file(const char *name)
{
	CREATE3args a = { .where = { .dir = ROOT, .name = (char *)name } };
	CREATE3res res;

	a.how.mode = UNCHECKED;
	a.how.createhow3_u.obj_attributes = e2e_sattr_mode(0644);
	E2E_RPC(R, e2e_nfs3_create(R, &a, &res));
	E2E_REQUIRE(res.status == NFS3_OK, "CREATE '%s': got %s", name,
		    e2e_nfsstat(res.status));
	E2E_REQUIRE(res.CREATE3res_u.resok.obj.handle_follows,
		    "CREATE '%s': no handle", name);
	return e2e_fh_dup(R, &res.CREATE3res_u.resok.obj.post_op_fh3_u.handle);
}

/* Start a gateway with the given options, R and ROOT on it. */
static void start(int threads, const char *const *args)
{
	E2E_REQUIRE(e2e_gw_start_args(&gw, threads, args) == 0,
		    "gateway did not start");
	R = e2e_rpc_open(gw.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(R != NULL, "no RPC connection");
	E2E_REQUIRE(e2e_root_fh(R, &gw, &ROOT) == 0, "no root handle");
}

static void stop(void)
{
	e2e_rpc_close(R);
	R = NULL;
	E2E_CHECK(e2e_gw_stop(&gw) == 0, "gateway did not stop cleanly");
	e2e_gw_cleanup(&gw);
}

/* ------------------------------------------------------------------ */
/* duplicate-request cache                                             */

static void test_remove_retransmitted(void)
{
	const uint32_t X = 0x5eed0001;
	struct buf call, first, again;
	LOOKUP3res lk;
	int a, fd;

	start(4, NULL);
	mk_file("drc-a");
	a = tcp_connect(gw.nfs_port, 0);
	E2E_REQUIRE(a >= 0, "connect");
	remove_call(&call, X, &ROOT, "drc-a");
	E2E_STATUS("REMOVE drc-a", nfs_status(a, &call, X, &first), NFS3_OK);

	/* The same call again on the same connection: the first reply,
	 * not NOENT from a second run. */
	E2E_STATUS("REMOVE drc-a retransmitted",
		   nfs_status(a, &call, X, &again), NFS3_OK);
	E2E_CHECK(again.n == first.n && !memcmp(again.b, first.b, first.n),
		  "the retransmission's reply differs from the first");

	/* After reconnecting: new ports, and through SO_REUSEPORT mostly
	 * other loops than the first connection's. */
	for (int i = 0; i < 8; i++) {
		fd = tcp_connect(gw.nfs_port, 0);
		E2E_REQUIRE(fd >= 0, "connect");
		E2E_STATUS("REMOVE drc-a after a reconnect",
			   nfs_status(fd, &call, X, &again), NFS3_OK);
		E2E_CHECK(again.n == first.n &&
				  !memcmp(again.b, first.b, first.n),
			  "reply %d after a reconnect differs", i);
		close(fd);
	}
	E2E_RPC(R, e2e_nfs3_lookup(R, &ROOT, "drc-a", &lk));
	E2E_STATUS("LOOKUP drc-a after the REMOVEs", lk.status, NFS3ERR_NOENT);

	/* Same xid, other arguments: a new call, and it runs. */
	remove_call(&call, X, &ROOT, "drc-absent");
	E2E_STATUS("REMOVE drc-absent with the same xid",
		   nfs_status(a, &call, X, &again), NFS3ERR_NOENT);
	/* Same arguments, other xid: a new call too. */
	remove_call(&call, X + 1, &ROOT, "drc-a");
	E2E_STATUS("REMOVE drc-a with a new xid",
		   nfs_status(a, &call, X + 1, &again), NFS3ERR_NOENT);
	close(a);
	stop();
}

/*
 * Connectathon's lost-reply check (special suite): link a file and
 * unlink the new name, 100 times, every call sent twice as a client
 * does whose reply was lost: each retransmission answers OK (the first
 * reply), never EXIST or NOENT from running again.
 */
static void test_link_unlink_retransmitted(void)
{
	struct buf call, first, again;
	nfs_fh3 f;
	GETATTR3res ga;
	uint32_t xid = 0x11ec0000;
	int fd;

	start(2, NULL);
	f = mk_file("lr");
	fd = tcp_connect(gw.nfs_port, 0);
	E2E_REQUIRE(fd >= 0, "connect");
	for (int i = 0; i < 100; i++) {
		link_call(&call, ++xid, &f, &ROOT, "lr.link");
		E2E_REQUIRE(nfs_status(fd, &call, xid, &first) == NFS3_OK,
			    "LINK %d", i);
		E2E_REQUIRE(nfs_status(fd, &call, xid, &again) == NFS3_OK,
			    "LINK %d retransmitted: not the first reply", i);
		remove_call(&call, ++xid, &ROOT, "lr.link");
		E2E_REQUIRE(nfs_status(fd, &call, xid, &first) == NFS3_OK,
			    "REMOVE %d", i);
		E2E_REQUIRE(nfs_status(fd, &call, xid, &again) == NFS3_OK,
			    "REMOVE %d retransmitted: not the first reply", i);
	}
	close(fd);
	E2E_RPC(R, e2e_nfs3_getattr(R, &f, &ga));
	E2E_CHECK(ga.status == NFS3_OK &&
			  ga.GETATTR3res_u.resok.obj_attributes.nlink == 1,
		  "lr after 100 links and unlinks: %s, nlink %u",
		  e2e_nfsstat(ga.status),
		  ga.status == NFS3_OK
			  ? ga.GETATTR3res_u.resok.obj_attributes.nlink
			  : 0);
	stop();
}

/* ------------------------------------------------------------------ */
/* limits                                                              */

static void test_max_connections(void)
{
	static const char *const args[] = { "--max-connections", "4", NULL };
	int fd[4], extra;

	E2E_REQUIRE(e2e_gw_start_args(&gw, 2, args) == 0,
		    "gateway did not start");
	for (int i = 0; i < 4; i++) {
		fd[i] = tcp_connect(gw.nfs_port, 0);
		E2E_REQUIRE(fd[i] >= 0, "connect %d", i);
		E2E_CHECK(null_ok(fd[i], 10 + (uint32_t)i, 10000),
			  "connection %d: no NULL reply", i);
	}
	extra = tcp_connect(gw.nfs_port, 0);
	E2E_REQUIRE(extra >= 0, "connect the fifth");
	E2E_CHECK(wait_closed(extra, 10000, NULL) == 1,
		  "the fifth connection is still open after 10 s");
	close(extra);
	for (int i = 0; i < 4; i++) {
		E2E_CHECK(null_ok(fd[i], 20 + (uint32_t)i, 10000),
			  "connection %d: no NULL reply after the fifth", i);
		close(fd[i]);
	}
	E2E_CHECK(e2e_gw_stop(&gw) == 0, "gateway did not stop cleanly");
	e2e_gw_cleanup(&gw);
}

static void test_idle_timeout(void)
{
	static const char *const args[] = { "--idle-timeout", "1", NULL };
	int idle, busy, closed;

	E2E_REQUIRE(e2e_gw_start_args(&gw, 2, args) == 0,
		    "gateway did not start");
	idle = tcp_connect(gw.nfs_port, 0);
	busy = tcp_connect(gw.nfs_port, 0);
	E2E_REQUIRE(idle >= 0 && busy >= 0, "connect");
	E2E_CHECK(null_ok(idle, 1, 10000), "no NULL reply");
	/* A call every 200 ms for 3 s keeps a connection open. */
	for (uint32_t i = 0; i < 15; i++) {
		E2E_CHECK(null_ok(busy, 100 + i, 10000),
			  "busy connection: no reply to call %u", i);
		test_sleep_ms(200);
	}
	closed = wait_closed(idle, 10000, NULL);
	E2E_CHECK(closed == 1, "an idle connection is open after 13 s");
	close(idle);
	close(busy);
	E2E_CHECK(e2e_gw_stop(&gw) == 0, "gateway did not stop cleanly");
	e2e_gw_cleanup(&gw);
}

static void test_never_reads(void)
{
	/* One loop, so both clients share it; 2 s of a stalled queue close
	 * the one that does not read. */
	static const char *const args[] = { "--idle-timeout", "2", NULL };
	static uint8_t data[BIG];
	struct buf call;
	GETATTR3res ga;
	WRITE3res w;
	nfs_fh3 fh;
	size_t bytes = 0;
	uint64_t t0, t, worst = 0;
	int lazy;

	start(1, args);
	fh = mk_file("big");
	e2e_fill(data, sizeof(data), 6);
	for (uint32_t off = 0; off < BIG; off += BIG / 4) {
		E2E_RPC(R, e2e_nfs3_write(R, &fh, off, data + off, BIG / 4,
					  FILE_SYNC, &w));
		E2E_REQUIRE(w.status == NFS3_OK, "WRITE: %s",
			    e2e_nfsstat(w.status));
	}
	lazy = tcp_connect(gw.nfs_port, 4096);
	E2E_REQUIRE(lazy >= 0, "connect");
	for (uint32_t i = 0; i < NBIG; i++) {
		read_call(&call, 0x1000 + i, &fh, BIG);
		E2E_REQUIRE(send_buf(lazy, &call) == 0, "send READ %u", i);
	}
	t0 = e2e_now_ms();
	for (int i = 0; i < 10; i++) {
		t = e2e_now_ms();
		E2E_RPC(R, e2e_nfs3_getattr(R, &ROOT, &ga));
		E2E_STATUS("GETATTR beside the non-reader", ga.status, NFS3_OK);
		t = e2e_now_ms() - t;
		worst = t > worst ? t : worst;
		test_sleep_ms(300);
	}
	E2E_CHECK(worst < 3000, "a GETATTR took %llu ms beside the non-reader",
		  (unsigned long long)worst);
	/* Not a byte read for 6 s; then the replies stop early: it was
	 * closed, rather than served everything once it read. */
	if (e2e_now_ms() - t0 < 6000)
		test_sleep_ms((int)(6000 - (e2e_now_ms() - t0)));
	E2E_CHECK(wait_closed(lazy, 30000, &bytes) == 1,
		  "the non-reader is still connected");
	E2E_CHECK(bytes < (size_t)NBIG * BIG,
		  "the non-reader got all %zu bytes: it was never closed",
		  bytes);
	close(lazy);
	/* R sat idle past --idle-timeout meanwhile: ask on a new one. */
	lazy = tcp_connect(gw.nfs_port, 0);
	E2E_CHECK(lazy >= 0 && null_ok(lazy, 1, 10000),
		  "no NULL reply after the non-reader");
	if (lazy >= 0)
		close(lazy);
	stop();
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite("e2e_drc", NULL, NULL);
	CU_add_test(s, "retransmitted REMOVE answers OK again",
		    test_remove_retransmitted);
	CU_add_test(s, "link/unlink 100 times, each retransmitted",
		    test_link_unlink_retransmitted);
	CU_add_test(s, "--max-connections closes the one too many",
		    test_max_connections);
	CU_add_test(s, "--idle-timeout closes an idle connection",
		    test_idle_timeout);
	CU_add_test(s,
		    "a client that never reads neither stalls others nor "
		    "stays",
		    test_never_reads);
	return e2e_run_cunit();
}
