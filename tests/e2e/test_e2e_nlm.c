/*
 * End-to-end tests of locking: a real gateway, NLM v4 and NSM v1 calls
 * from libnfs (TEST, LOCK, CANCEL, UNLOCK, STAT, MON, NOTIFY) and from a
 * small hand-written XDR client (SHARE, UNSHARE, FREE_ALL, which libnfs
 * lacks), and a fake client host: one TCP port that answers as its
 * rpcbind (GETPORT), its lockd (GRANTED) and its statd (SM_NOTIFY), so
 * the gateway's callbacks can be seen.
 *
 * The gateway is started here, not by the harness, because it needs the
 * locking options (--nlm-port, --grace, --nlm-client-rpcbind-port).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <nfsc/libnfs-raw-nlm.h>
#include <nfsc/libnfs-raw-nsm.h>

#include "tests/e2e/harness.h"

#define CALL_MS 10000
/* What one client address may hold (--max-locks-per-host). */
#define HOST_LOCKS "8"

/*
 * Who the gateway serves: this host and two more loopback addresses that
 * play other client machines; 127.0.0.2 plays a host the exports refuse.
 */
static const char exports_text[] =
	"/mapfs 127.0.0.1(rw,no_root_squash,insecure) "
	"127.0.0.3(rw,no_root_squash,insecure) "
	"127.0.0.4(rw,no_root_squash,insecure)\n";

/* ------------------------------------------------------------------ */
/* The gateway, with locking options                                   */

static struct {
	char dir[64], store[E2E_PATH_MAX + 16], state[E2E_PATH_MAX];
	char log[E2E_PATH_MAX], exports[E2E_PATH_MAX];
	pid_t pid;
	int nfs_port, mount_port, nlm_port;
} gw;

static int cb_port; /* the fake client host */

static void gw_dump_log(void)
{
	char cmd[E2E_PATH_MAX + 32];

	snprintf(cmd, sizeof(cmd), "tail -40 '%s' >&2", gw.log);
	if (system(cmd))
		fprintf(stderr, "(no log)\n");
}

/* Start the gateway on gw's dirs with the given grace; 0 or -1. */
static int gw_start(int grace)
{
	const char *bin = getenv("MAPFS_GW");
	char nlm[16], cbp[16], gr[16], line[512];
	size_t fill = 0;
	int p[2];

	if (!bin || pipe2(p, O_CLOEXEC))
		return -1;
	snprintf(nlm, sizeof(nlm), "%d", gw.nlm_port);
	snprintf(cbp, sizeof(cbp), "%d", cb_port);
	snprintf(gr, sizeof(gr), "%d", grace);
	gw.pid = fork();
	if (gw.pid == 0) {
		int logfd = open(gw.log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (logfd < 0 || dup2(p[1], 1) < 0 || dup2(logfd, 2) < 0)
			_exit(126);
		execl(bin, bin, "--store", gw.store, "--state", gw.state,
		      "--bind", "127.0.0.1", "--nfs-port", "0", "--mount-port",
		      "0", "--nlm-port", nlm, "--nlm-client-rpcbind-port", cbp,
		      "--grace", gr, "--threads", "2", "--no-rpcbind",
		      "--exports", gw.exports, "--max-locks-per-host",
		      HOST_LOCKS, "--foreground", "--log-level", "debug",
		      (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	while (fill < sizeof(line) - 1) {
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		ssize_t r;

		if (poll(&pfd, 1, 30000) <= 0)
			break;
		r = read(p[0], line + fill, 1);
		if (r <= 0 || line[fill] == '\n')
			break;
		fill++;
	}
	line[fill] = 0;
	close(p[0]);
	if (sscanf(line, "mapfs-gw: ready nfs=127.0.0.1:%d mount=127.0.0.1:%d",
		   &gw.nfs_port, &gw.mount_port) != 2) {
		fprintf(stderr, "gateway did not get ready: '%s'\n", line);
		gw_dump_log();
		return -1;
	}
	return 0;
}

static int gw_stop(void)
{
	int st = -1;

	if (gw.pid <= 0)
		return -1;
	kill(gw.pid, SIGTERM);
	waitpid(gw.pid, &st, 0);
	gw.pid = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ------------------------------------------------------------------ */
/* XDR by hand (the fake host and the calls libnfs lacks)              */

struct xb {
	uint8_t b[4096];
	size_t n, off;
	int bad;
};

static void put32(struct xb *x, uint32_t v)
{
	if (x->n + 4 > sizeof(x->b)) {
		x->bad = 1;
		return;
	}
	v = htonl(v);
	memcpy(x->b + x->n, &v, 4);
	x->n += 4;
}

static void put_opaque(struct xb *x, const void *p, uint32_t len)
{
	put32(x, len);
	if (x->n + ((len + 3) & ~3u) > sizeof(x->b)) {
		x->bad = 1;
		return;
	}
	memset(x->b + x->n, 0, (len + 3) & ~3u);
	memcpy(x->b + x->n, p, len);
	x->n += (len + 3) & ~3u;
}

static uint32_t get32(struct xb *x)
{
	uint32_t v;

	if (x->off + 4 > x->n) {
		x->bad = 1;
		return 0;
	}
	memcpy(&v, x->b + x->off, 4);
	x->off += 4;
	return ntohl(v);
}

static uint64_t get64(struct xb *x)
{
	uint64_t hi = get32(x);

	return hi << 32 | get32(x);
}

/* An opaque into buf (NUL-terminated); its length, or -1. */
static int get_opaque(struct xb *x, char *buf, size_t cap)
{
	uint32_t len = get32(x);

	if (x->bad || len >= cap || x->off + ((len + 3) & ~3u) > x->n) {
		x->bad = 1;
		return -1;
	}
	memcpy(buf, x->b + x->off, len);
	buf[len] = 0;
	x->off += (len + 3) & ~3u;
	return (int)len;
}

/* One record from fd into x (one fragment is all these peers send). */
static int rec_read(int fd, struct xb *x)
{
	uint32_t mark;
	size_t got = 0;

	if (recv(fd, &mark, 4, MSG_WAITALL) != 4)
		return -1;
	mark = ntohl(mark);
	x->n = mark & 0x7fffffffu;
	x->off = 0;
	x->bad = 0;
	if (!(mark >> 31) || x->n > sizeof(x->b))
		return -1;
	while (got < x->n) {
		ssize_t r = recv(fd, x->b + got, x->n - got, 0);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static int rec_write(int fd, const struct xb *x)
{
	uint32_t mark = htonl(0x80000000u | (uint32_t)x->n);

	return send(fd, &mark, 4, MSG_NOSIGNAL) == 4 &&
			       send(fd, x->b, x->n, MSG_NOSIGNAL) ==
				       (ssize_t)x->n
		       ? 0
		       : -1;
}

/* ------------------------------------------------------------------ */
/* The fake client host                                                */

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint32_t answer; /* what GRANTED answers: NLM4_GRANTED or DENIED */
	int granted;     /* GRANTED calls seen */
	int excl, svid;
	uint64_t off, len;
	char caller[256], fh[128], oh[256];
	int fhlen;
	int notified; /* SM_NOTIFY calls seen */
	char notify_name[256];
	int notify_state;
} host = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

/* Answer one call in q (a record) into r. */
static void host_answer(struct xb *q, struct xb *r)
{
	uint32_t xid = get32(q), prog, vers, proc;
	char skip[512], cookie[64];
	int clen;

	get32(q); /* CALL */
	get32(q); /* rpcvers */
	prog = get32(q);
	vers = get32(q);
	proc = get32(q);
	get32(q); /* cred flavor */
	get_opaque(q, skip, sizeof(skip));
	get32(q); /* verf flavor */
	get_opaque(q, skip, sizeof(skip));
	r->n = 0;
	put32(r, xid);
	put32(r, 1); /* REPLY */
	put32(r, 0); /* MSG_ACCEPTED */
	put32(r, 0); /* AUTH_NONE verifier */
	put32(r, 0);
	if (prog == 100000 && vers == 2 && proc == 3) { /* GETPORT */
		uint32_t p = get32(q), v = get32(q), t = get32(q);

		put32(r, 0);
		put32(r, (p == 100021 && v == 4 && t == IPPROTO_TCP) ||
					 (p == 100024 && v == 1)
				 ? (uint32_t)cb_port
				 : 0);
	} else if (prog == 100021 && vers == 4 && proc == 5) { /* GRANTED */
		pthread_mutex_lock(&host.mu);
		clen = get_opaque(q, cookie, sizeof(cookie));
		host.excl = (int)get32(q);
		get_opaque(q, host.caller, sizeof(host.caller));
		host.fhlen = get_opaque(q, host.fh, sizeof(host.fh));
		get_opaque(q, host.oh, sizeof(host.oh));
		host.svid = (int)get32(q);
		host.off = get64(q);
		host.len = get64(q);
		host.granted++;
		put32(r, 0);
		put_opaque(r, cookie, clen > 0 ? (uint32_t)clen : 0);
		put32(r, q->bad ? 9 : host.answer);
		pthread_cond_broadcast(&host.cv);
		pthread_mutex_unlock(&host.mu);
	} else if (prog == 100024 && vers == 1 && proc == 6) { /* NOTIFY */
		pthread_mutex_lock(&host.mu);
		get_opaque(q, host.notify_name, sizeof(host.notify_name));
		host.notify_state = (int)get32(q);
		host.notified++;
		put32(r, 0);
		pthread_cond_broadcast(&host.cv);
		pthread_mutex_unlock(&host.mu);
	} else {
		put32(r, 3); /* PROC_UNAVAIL */
	}
}

static void *host_main(void *p)
{
	int lfd = (int)(intptr_t)p;

	for (;;) {
		struct xb q, r;
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0)
			continue;
		while (!rec_read(fd, &q)) {
			host_answer(&q, &r);
			if (rec_write(fd, &r))
				break;
		}
		close(fd);
	}
	return NULL;
}

static int host_start(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	pthread_t t;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(fd, 16) || getsockname(fd, (struct sockaddr *)&a, &len))
		return -1;
	cb_port = ntohs(a.sin_port);
	host.answer = 0;
	return pthread_create(&t, NULL, host_main, (void *)(intptr_t)fd);
}

/* Wait until *counter exceeds seen (under host.mu); 0 or -1 on timeout. */
static int host_wait(int *counter, int seen, int ms)
{
	struct timespec ts;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	pthread_mutex_lock(&host.mu);
	while (*counter <= seen && rc == 0)
		rc = pthread_cond_timedwait(&host.cv, &host.mu, &ts);
	rc = *counter > seen ? 0 : -1;
	pthread_mutex_unlock(&host.mu);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Clients                                                             */

struct sync {
	int done, status;
	size_t size; /* of the result struct to keep */
	uint8_t res[256];
};

static void sync_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct sync *s = priv;

	(void)rpc;
	s->done = 1;
	s->status = status;
	/* Kept flat: the cookie and oh pointers die with the reply. */
	if (status == RPC_STATUS_SUCCESS && data && s->size <= sizeof(s->res))
		memcpy(s->res, data, s->size);
}

static int sync_wait(struct rpc_context *rpc, struct sync *s, int q)
{
	uint64_t end = e2e_now_ms() + CALL_MS;

	if (q)
		return -1;
	while (!s->done && e2e_now_ms() < end) {
		struct pollfd pfd = { .fd = rpc_get_fd(rpc),
				      .events = (short)rpc_which_events(rpc) };

		if (poll(&pfd, 1, 100) < 0 || rpc_service(rpc, pfd.revents) < 0)
			return -1;
	}
	return s->done && s->status == RPC_STATUS_SUCCESS ? 0 : -1;
}

static struct rpc_context *connect_to(int port, int prog, int vers)
{
	struct rpc_context *rpc = rpc_init_context();
	struct sync s = { 0 };

	if (rpc && sync_wait(rpc, &s,
			     rpc_connect_port_async(rpc, "127.0.0.1", port,
						    prog, vers, sync_cb, &s))) {
		fprintf(stderr, "connect %d: %s\n", port, rpc_get_error(rpc));
		rpc_destroy_context(rpc);
		return NULL;
	}
	return rpc;
}

static struct rpc_context *nlm;
static nfs_fh3 root_fh;
static struct e2e_rpc *nfs;

/* A new empty file's handle. */
static nfs_fh3 new_file(const char *name)
{
	CREATE3args a = { .where = { root_fh, (char *)name },
			  .how = { .mode = GUARDED } };
	CREATE3res r;
	nfs_fh3 none = { 0 };

	a.how.createhow3_u.obj_attributes = e2e_sattr_mode(0644);
	if (e2e_nfs3_create(nfs, &a, &r)) {
		fprintf(stderr, "CREATE %s: %s\n", name, e2e_rpc_error(nfs));
		return none;
	}
	if (r.status != NFS3_OK || !r.CREATE3res_u.resok.obj.handle_follows) {
		fprintf(stderr, "CREATE %s: %s\n", name, e2e_nfsstat(r.status));
		return none;
	}
	return r.CREATE3res_u.resok.obj.post_op_fh3_u.handle;
}

static nlm4_lock mk_lock(const nfs_fh3 *fh, const char *host_name,
			 uint32_t svid, uint64_t off, uint64_t len)
{
	static char oh[8][64];
	static int k;
	nlm4_lock l = { .caller_name = (char *)host_name,
			.svid = svid,
			.l_offset = off,
			.l_len = len };

	k = (k + 1) % 8;
	snprintf(oh[k], sizeof(oh[k]), "%u@%s", svid, host_name);
	l.oh = oh[k];
	l.fh.data.data_len = fh->data.data_len;
	l.fh.data.data_val = fh->data.data_val;
	return l;
}

static int nlm_lock_call(nlm4_lock l, int excl, int block, int reclaim)
{
	NLM4_LOCKargs a = { .block = (uint32_t)block,
			    .exclusive = (uint32_t)excl,
			    .lock = l,
			    .reclaim = (uint32_t)reclaim,
			    .state = 1 };
	struct sync s = { .size = sizeof(NLM4_LOCKres) };

	if (sync_wait(nlm, &s, rpc_nlm4_lock_async(nlm, sync_cb, &a, &s)))
		return -1;
	return ((NLM4_LOCKres *)s.res)->status;
}

/* TEST's status; a denial's holder goes to *h when h is not NULL. */
static int nlm_test_call(nlm4_lock l, int excl, nlm4_holder *h)
{
	NLM4_TESTargs a = { .exclusive = (uint32_t)excl, .lock = l };
	struct sync s = { .size = sizeof(NLM4_TESTres) };
	NLM4_TESTres *r = (NLM4_TESTres *)s.res;

	if (sync_wait(nlm, &s, rpc_nlm4_test_async(nlm, sync_cb, &a, &s)))
		return -1;
	if (h && r->reply.status == NLM4_DENIED)
		*h = r->reply.nlm4_testreply_u.lock.holder;
	return r->reply.status;
}

static int nlm_unlock_call(nlm4_lock l)
{
	NLM4_UNLOCKargs a = { .lock = l };
	struct sync s = { .size = sizeof(NLM4_UNLOCKres) };

	if (sync_wait(nlm, &s, rpc_nlm4_unlock_async(nlm, sync_cb, &a, &s)))
		return -1;
	return ((NLM4_UNLOCKres *)s.res)->status;
}

static int nlm_cancel_call(nlm4_lock l, int excl)
{
	NLM4_CANCargs a = { .block = 1,
			    .exclusive = (uint32_t)excl,
			    .lock = l };
	struct sync s = { .size = sizeof(NLM4_CANCres) };

	if (sync_wait(nlm, &s, rpc_nlm4_cancel_async(nlm, sync_cb, &a, &s)))
		return -1;
	return ((NLM4_CANCres *)s.res)->status;
}

/*
 * One call by hand to the gateway's NLM/NSM port with AUTH_SYS; the
 * results are left in r (r->off at them).  Returns 0, or -1 when no
 * accepted SUCCESS reply came.
 */
/* The source address of raw_call()'s connections. */
static const char *raw_src = "127.0.0.1";

static int raw_call(uint32_t prog, uint32_t vers, uint32_t proc,
		    const struct xb *args, struct xb *r)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)gw.nlm_port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in src = { .sin_family = AF_INET };
	struct xb q = { .n = 0 };
	char skip[512];
	int fd, rc = -1;

	put32(&q, 0x1234);
	put32(&q, 0);
	put32(&q, 2);
	put32(&q, prog);
	put32(&q, vers);
	put32(&q, proc);
	put32(&q, 1); /* AUTH_SYS: stamp, machine, uid, gid, no gids */
	put32(&q, 24);
	put32(&q, 0);
	put_opaque(&q, "e2e", 3);
	put32(&q, 0);
	put32(&q, 0);
	put32(&q, 0);
	put32(&q, 0);
	put32(&q, 0);
	memcpy(q.b + q.n, args->b, args->n);
	q.n += args->n;
	fd = socket(AF_INET, SOCK_STREAM, 0);
	inet_pton(AF_INET, raw_src, &src.sin_addr);
	if (fd >= 0 && !bind(fd, (struct sockaddr *)&src, sizeof(src)) &&
	    !connect(fd, (struct sockaddr *)&a, sizeof(a)) &&
	    !rec_write(fd, &q) && !rec_read(fd, r)) {
		get32(r);
		get32(r);
		uint32_t accepted = get32(r);
		get32(r);
		get_opaque(r, skip, sizeof(skip));
		uint32_t stat = get32(r);
		rc = !r->bad && !accepted && !stat ? 0 : -1;
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

static int share_call(uint32_t proc, const nfs_fh3 *fh, const char *who,
		      uint32_t mode, uint32_t access)
{
	struct xb a = { .n = 0 }, r;

	put_opaque(&a, "ck", 2);
	put_opaque(&a, who, (uint32_t)strlen(who));
	put_opaque(&a, fh->data.data_val, fh->data.data_len);
	put_opaque(&a, who, (uint32_t)strlen(who));
	put32(&a, mode);
	put32(&a, access);
	put32(&a, 0); /* reclaim */
	if (raw_call(100021, 4, proc, &a, &r))
		return -1;
	char cookie[8];
	get_opaque(&r, cookie, sizeof(cookie));
	return (int)get32(&r);
}

static int free_all_call(const char *who)
{
	struct xb a = { .n = 0 }, r;

	put_opaque(&a, who, (uint32_t)strlen(who));
	put32(&a, 3);
	return raw_call(100021, 4, 23, &a, &r);
}

/* ------------------------------------------------------------------ */
/* Tests                                                               */

static void test_lock_test_unlock(void)
{
	nfs_fh3 fh = new_file("ltu");
	nlm4_holder h = { 0 };

	E2E_REQUIRE(fh.data.data_len, "CREATE ltu failed");
	E2E_CHECK(nlm_test_call(mk_lock(&fh, "hostA", 1, 0, 100), 1, NULL) ==
			  NLM4_GRANTED,
		  "TEST on an unlocked file");
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostA", 1, 0, 100), 1, 0, 0) ==
			  NLM4_GRANTED,
		  "LOCK A [0,100)");
	E2E_CHECK(nlm_test_call(mk_lock(&fh, "hostB", 2, 50, 1), 0, &h) ==
			  NLM4_DENIED,
		  "TEST B inside A's lock");
	E2E_CHECK(
		h.svid == 1 && h.exclusive && h.l_offset == 0 && h.l_len == 100,
		"holder svid %u excl %u off %llu len %llu", h.svid, h.exclusive,
		(unsigned long long)h.l_offset, (unsigned long long)h.l_len);
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostB", 2, 100, 10), 1, 0, 0) ==
			  NLM4_GRANTED,
		  "LOCK B next to A");
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostB", 2, 99, 1), 0, 0, 0) ==
			  NLM4_DENIED,
		  "LOCK B overlapping A, non-blocking");
	/* Unlock the middle: the ends stay A's. */
	E2E_CHECK(nlm_unlock_call(mk_lock(&fh, "hostA", 1, 40, 20)) ==
			  NLM4_GRANTED,
		  "UNLOCK A [40,60)");
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostB", 2, 40, 20), 1, 0, 0) ==
			  NLM4_GRANTED,
		  "LOCK B in the hole");
	E2E_CHECK(nlm_test_call(mk_lock(&fh, "hostB", 2, 39, 1), 0, NULL) ==
			  NLM4_DENIED,
		  "A still holds [0,40)");
	E2E_CHECK(nlm_unlock_call(mk_lock(&fh, "hostA", 1, 0, 0)) ==
			  NLM4_GRANTED,
		  "UNLOCK A all");
	E2E_CHECK(nlm_unlock_call(mk_lock(&fh, "hostB", 2, 0, 0)) ==
			  NLM4_GRANTED,
		  "UNLOCK B all");
	E2E_CHECK(nlm_test_call(mk_lock(&fh, "hostC", 3, 0, 0), 1, NULL) ==
			  NLM4_GRANTED,
		  "all unlocked");
}

static void test_stale_handle(void)
{
	char junk[28] = { 1 };
	nfs_fh3 fh = { { sizeof(junk), junk } };

	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostA", 1, 0, 1), 1, 0, 0) ==
			  NLM4_STALE_FH,
		  "LOCK with a forged handle");
}

static void test_blocking_granted(void)
{
	nfs_fh3 fh = new_file("blk");
	int seen;

	E2E_REQUIRE(fh.data.data_len, "CREATE blk failed");
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostA", 1, 0, 0), 1, 0, 0) ==
			  NLM4_GRANTED,
		  "LOCK A");
	/* A cancelled request is gone. */
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostB", 7, 10, 5), 1, 1, 0) ==
			  NLM4_BLOCKED,
		  "blocking LOCK B");
	E2E_CHECK(nlm_cancel_call(mk_lock(&fh, "hostB", 7, 10, 5), 1) ==
			  NLM4_GRANTED,
		  "CANCEL B");
	E2E_CHECK(nlm_cancel_call(mk_lock(&fh, "hostB", 7, 10, 5), 1) ==
			  NLM4_DENIED,
		  "CANCEL B again");
	/* A queued one is granted by callback when A lets go. */
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostB", 7, 10, 5), 1, 1, 0) ==
			  NLM4_BLOCKED,
		  "blocking LOCK B");
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostB", 7, 10, 5), 1, 1, 0) ==
			  NLM4_BLOCKED,
		  "blocking LOCK B resent");
	pthread_mutex_lock(&host.mu);
	seen = host.granted;
	host.answer = NLM4_GRANTED;
	pthread_mutex_unlock(&host.mu);
	E2E_CHECK(nlm_unlock_call(mk_lock(&fh, "hostA", 1, 0, 0)) ==
			  NLM4_GRANTED,
		  "UNLOCK A");
	E2E_REQUIRE(host_wait(&host.granted, seen, 10000) == 0,
		    "no GRANTED callback within 10 s");
	E2E_CHECK(host.granted == seen + 1, "%d GRANTED calls, want 1",
		  host.granted - seen);
	E2E_CHECK(!strcmp(host.caller, "hostB") && host.svid == 7 &&
			  host.excl && host.off == 10 && host.len == 5 &&
			  !strcmp(host.oh, "7@hostB"),
		  "GRANTED names %s svid %d excl %d [%llu,+%llu) oh %s",
		  host.caller, host.svid, host.excl,
		  (unsigned long long)host.off, (unsigned long long)host.len,
		  host.oh);
	E2E_CHECK(host.fhlen == (int)fh.data.data_len &&
			  !memcmp(host.fh, fh.data.data_val, fh.data.data_len),
		  "GRANTED carries another file handle");
	E2E_CHECK(nlm_test_call(mk_lock(&fh, "hostC", 3, 12, 1), 0, NULL) ==
			  NLM4_DENIED,
		  "B holds the lock now");
	E2E_CHECK(nlm_unlock_call(mk_lock(&fh, "hostB", 7, 0, 0)) ==
			  NLM4_GRANTED,
		  "UNLOCK B");
}

static void test_granted_refused(void)
{
	nfs_fh3 fh = new_file("refused");
	uint64_t end;
	int seen, st = -1;

	E2E_REQUIRE(fh.data.data_len, "CREATE refused failed");
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostA", 1, 0, 0), 1, 0, 0) ==
			  NLM4_GRANTED,
		  "LOCK A");
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostB", 8, 0, 0), 1, 1, 0) ==
			  NLM4_BLOCKED,
		  "blocking LOCK B");
	pthread_mutex_lock(&host.mu);
	seen = host.granted;
	host.answer = NLM4_DENIED; /* B gave up meanwhile */
	pthread_mutex_unlock(&host.mu);
	E2E_CHECK(nlm_unlock_call(mk_lock(&fh, "hostA", 1, 0, 0)) ==
			  NLM4_GRANTED,
		  "UNLOCK A");
	E2E_REQUIRE(host_wait(&host.granted, seen, 10000) == 0,
		    "no GRANTED callback within 10 s");
	/* The gateway takes the refused lock back. */
	for (end = e2e_now_ms() + 5000; e2e_now_ms() < end; usleep(50000)) {
		st = nlm_test_call(mk_lock(&fh, "hostC", 3, 0, 0), 1, NULL);
		if (st == NLM4_GRANTED)
			break;
	}
	E2E_CHECK(st == NLM4_GRANTED, "refused lock still held (%d)", st);
	pthread_mutex_lock(&host.mu);
	host.answer = NLM4_GRANTED;
	pthread_mutex_unlock(&host.mu);
}

static void test_share(void)
{
	nfs_fh3 fh = new_file("share");

	E2E_REQUIRE(fh.data.data_len, "CREATE share failed");
	/* A reads and writes, denies writers. */
	E2E_CHECK(share_call(20, &fh, "hostA", 2, 3) == NLM4_GRANTED,
		  "SHARE A");
	E2E_CHECK(share_call(20, &fh, "hostB", 0, 2) == NLM4_DENIED,
		  "SHARE B for writing");
	E2E_CHECK(share_call(20, &fh, "hostB", 0, 1) == NLM4_GRANTED,
		  "SHARE B for reading");
	E2E_CHECK(share_call(21, &fh, "hostA", 0, 0) == NLM4_GRANTED,
		  "UNSHARE A");
	E2E_CHECK(share_call(20, &fh, "hostC", 0, 2) == NLM4_GRANTED,
		  "SHARE C for writing after UNSHARE A");
}

static void test_free_all(void)
{
	nfs_fh3 f1 = new_file("fa1"), f2 = new_file("fa2");

	E2E_REQUIRE(f1.data.data_len && f2.data.data_len, "CREATE failed");
	E2E_CHECK(nlm_lock_call(mk_lock(&f1, "hostF", 1, 0, 0), 1, 0, 0) ==
			  NLM4_GRANTED,
		  "LOCK F on fa1");
	E2E_CHECK(nlm_lock_call(mk_lock(&f2, "hostF", 2, 0, 10), 0, 0, 0) ==
			  NLM4_GRANTED,
		  "LOCK F on fa2");
	E2E_CHECK(free_all_call("hostF") == 0, "FREE_ALL hostF");
	E2E_CHECK(nlm_test_call(mk_lock(&f1, "hostC", 3, 0, 0), 1, NULL) ==
			  NLM4_GRANTED,
		  "fa1 free after FREE_ALL");
	E2E_CHECK(nlm_test_call(mk_lock(&f2, "hostC", 3, 0, 0), 1, NULL) ==
			  NLM4_GRANTED,
		  "fa2 free after FREE_ALL");
}

static void test_nsm(void)
{
	struct rpc_context *nsm = connect_to(gw.nlm_port, NSM_PROGRAM, NSM_V1);
	NSM1_STATargs sa = { .mon_name = "hostA" };
	NSM1_MONargs ma = { .mon_id = { "hostN", { "e2e", 100021, 4, 16 } } };
	NSM1_NOTIFYargs na = { .mon_name = "hostN", .state = 5 };
	nfs_fh3 fh = new_file("nsm");
	struct sync s = { .size = sizeof(NSM1_STATres) };

	E2E_REQUIRE(nsm && fh.data.data_len, "NSM connect or CREATE failed");
	E2E_REQUIRE(
		!sync_wait(nsm, &s, rpc_nsm1_stat_async(nsm, sync_cb, &sa, &s)),
		"SM_STAT: %s", rpc_get_error(nsm));
	E2E_CHECK(((NSM1_STATres *)s.res)->res == NSM_STAT_SUCC &&
			  ((NSM1_STATres *)s.res)->state % 2 == 1,
		  "SM_STAT: res %d state %d", ((NSM1_STATres *)s.res)->res,
		  ((NSM1_STATres *)s.res)->state);
	s = (struct sync){ .size = sizeof(NSM1_MONres) };
	E2E_CHECK(!sync_wait(nsm, &s,
			     rpc_nsm1_mon_async(nsm, sync_cb, &ma, &s)) &&
			  ((NSM1_MONres *)s.res)->res == NSM_STAT_SUCC,
		  "SM_MON");
	/* hostN restarts: its lock goes. */
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostN", 1, 0, 0), 1, 0, 0) ==
			  NLM4_GRANTED,
		  "LOCK N");
	s = (struct sync){ .size = 0 };
	E2E_CHECK(!sync_wait(nsm, &s,
			     rpc_nsm1_notify_async(nsm, sync_cb, &na, &s)),
		  "SM_NOTIFY");
	E2E_CHECK(nlm_test_call(mk_lock(&fh, "hostC", 3, 0, 0), 1, NULL) ==
			  NLM4_GRANTED,
		  "N's lock gone after its SM_NOTIFY");
	rpc_destroy_context(nsm);
}

/* After a restart: a higher state, SM_NOTIFY to lock holders, grace. */
static void test_restart(void)
{
	nfs_fh3 fh = new_file("restart");
	NSM1_STATargs sa = { .mon_name = "x" };
	struct rpc_context *nsm;
	struct sync s = { .size = sizeof(NSM1_STATres) };
	int state0 = 0, seen;
	char fhbuf[64];

	E2E_REQUIRE(fh.data.data_len && fh.data.data_len <= sizeof(fhbuf),
		    "CREATE restart failed");
	/* The handle must outlive the NFS connection closed below. */
	memcpy(fhbuf, fh.data.data_val, fh.data.data_len);
	fh.data.data_val = fhbuf;
	nsm = connect_to(gw.nlm_port, NSM_PROGRAM, NSM_V1);
	E2E_REQUIRE(
		nsm && !sync_wait(nsm, &s,
				  rpc_nsm1_stat_async(nsm, sync_cb, &sa, &s)),
		"SM_STAT before restart");
	state0 = ((NSM1_STATres *)s.res)->state;
	rpc_destroy_context(nsm);
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostR", 1, 0, 0), 1, 0, 0) ==
			  NLM4_GRANTED,
		  "LOCK R");
	pthread_mutex_lock(&host.mu);
	seen = host.notified;
	pthread_mutex_unlock(&host.mu);

	rpc_destroy_context(nlm);
	e2e_rpc_close(nfs);
	nlm = NULL;
	nfs = NULL;
	E2E_REQUIRE(gw_stop() == 0, "gateway did not stop cleanly");
	E2E_REQUIRE(gw_start(30) == 0, "gateway did not restart");
	nfs = e2e_rpc_open(gw.nfs_port, NFS_PROGRAM, NFS_V3);
	nlm = connect_to(gw.nlm_port, NLM_PROGRAM, NLM_V4);
	E2E_REQUIRE(nfs && nlm, "reconnect failed");

	E2E_REQUIRE(host_wait(&host.notified, seen, 15000) == 0,
		    "no SM_NOTIFY within 15 s of the restart");
	E2E_CHECK(host.notify_state == state0 + 2,
		  "SM_NOTIFY state %d, want %d", host.notify_state, state0 + 2);
	/* The lock did not survive; only reclaims are granted in grace. */
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostS", 2, 0, 0), 1, 0, 0) ==
			  NLM4_DENIED_GRACE_PERIOD,
		  "new LOCK in grace");
	E2E_CHECK(nlm_test_call(mk_lock(&fh, "hostS", 2, 0, 0), 1, NULL) ==
			  NLM4_DENIED_GRACE_PERIOD,
		  "TEST in grace");
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostR", 1, 0, 0), 1, 0, 1) ==
			  NLM4_GRANTED,
		  "reclaim in grace");
	E2E_CHECK(nlm_unlock_call(mk_lock(&fh, "hostR", 1, 0, 0)) ==
			  NLM4_GRANTED,
		  "UNLOCK in grace");
}

/*
 * The NLM calls above go through nlm: run them from another source
 * address for a while.  Returns the connection to close (and restores
 * the default one) with from_done().
 */
static struct e2e_rpc *from_host(const char *src, struct rpc_context **saved)
{
	struct e2e_rpc *r =
		e2e_rpc_open_from(src, 0, gw.nlm_port, NLM_PROGRAM, NLM_V4);

	*saved = nlm;
	if (r)
		nlm = e2e_rpc_ctx(r);
	return r;
}

static void from_done(struct e2e_rpc *r, struct rpc_context *saved)
{
	nlm = saved;
	e2e_rpc_close(r);
}

/*
 * A host the exports refuse holds a leaked handle: TEST, LOCK, UNLOCK
 * and SHARE fail for it as NFS calls do (before: TEST told it who held
 * the lock, LOCK took locks, UNLOCK released them).
 */
static void test_refused_host(void)
{
	nfs_fh3 fh = new_file("leak"), other = new_file("leak2");
	struct rpc_context *saved;
	struct e2e_rpc *r;

	E2E_REQUIRE(fh.data.data_len && other.data.data_len, "CREATE failed");
	E2E_REQUIRE(nlm_lock_call(mk_lock(&fh, "hostA", 1, 0, 0), 1, 0, 0) ==
			    NLM4_GRANTED,
		    "LOCK A");
	r = from_host("127.0.0.2", &saved);
	E2E_REQUIRE(r, "no connection from 127.0.0.2");
	E2E_CHECK(nlm_test_call(mk_lock(&fh, "hostX", 9, 0, 0), 1, NULL) ==
			  NLM4_FAILED,
		  "TEST from a refused host");
	E2E_CHECK(nlm_lock_call(mk_lock(&other, "hostX", 9, 0, 0), 1, 0, 0) ==
			  NLM4_FAILED,
		  "LOCK from a refused host");
	E2E_CHECK(nlm_unlock_call(mk_lock(&fh, "hostA", 1, 0, 0)) ==
			  NLM4_FAILED,
		  "UNLOCK of A's lock from a refused host");
	from_done(r, saved);
	raw_src = "127.0.0.2";
	E2E_CHECK(share_call(20, &other, "hostX", 0, 2) == NLM4_FAILED,
		  "SHARE from a refused host");
	E2E_CHECK(free_all_call("hostA") == 0, "FREE_ALL from a refused host");
	raw_src = "127.0.0.1";
	E2E_CHECK(nlm_test_call(mk_lock(&fh, "hostB", 2, 0, 0), 1, NULL) ==
			  NLM4_DENIED,
		  "A's lock survived the refused host");
	E2E_CHECK(nlm_test_call(mk_lock(&other, "hostB", 2, 0, 0), 1, NULL) ==
			  NLM4_GRANTED,
		  "the refused host holds no lock");
	E2E_CHECK(e2e_log_count(gw.log, "nlm: call from 127.0.0.2 refused",
				false) >= 1,
		  "the refusal was not logged");
	nlm_unlock_call(mk_lock(&fh, "hostA", 1, 0, 0));
}

/*
 * A lock belongs to the address it came from: another admitted host
 * sending the holder's name, svid and owner bytes neither unlocks it
 * nor frees it (FREE_ALL), and cannot steal it.
 */
static void test_owner_address(void)
{
	nfs_fh3 fh = new_file("owner");
	struct rpc_context *saved;
	struct e2e_rpc *r;

	E2E_REQUIRE(fh.data.data_len, "CREATE failed");
	E2E_REQUIRE(nlm_lock_call(mk_lock(&fh, "hostA", 1, 0, 0), 1, 0, 0) ==
			    NLM4_GRANTED,
		    "LOCK A");
	r = from_host("127.0.0.3", &saved);
	E2E_REQUIRE(r, "no connection from 127.0.0.3");
	E2E_CHECK(nlm_unlock_call(mk_lock(&fh, "hostA", 1, 0, 0)) ==
			  NLM4_GRANTED,
		  "UNLOCK with A's owner from .3");
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostA", 1, 0, 0), 1, 0, 0) ==
			  NLM4_DENIED,
		  "LOCK with A's owner from .3");
	from_done(r, saved);
	raw_src = "127.0.0.3";
	E2E_CHECK(free_all_call("hostA") == 0, "FREE_ALL hostA from .3");
	raw_src = "127.0.0.1";
	E2E_CHECK(nlm_test_call(mk_lock(&fh, "hostB", 2, 0, 0), 1, NULL) ==
			  NLM4_DENIED,
		  "A's lock survived .3's calls");
	E2E_CHECK(nlm_unlock_call(mk_lock(&fh, "hostA", 1, 0, 0)) ==
			  NLM4_GRANTED,
		  "A unlocks its own lock");
	E2E_CHECK(nlm_test_call(mk_lock(&fh, "hostB", 2, 0, 0), 1, NULL) ==
			  NLM4_GRANTED,
		  "A's lock gone");
}

/* One NSM call from src; 0 or -1.  res_size bytes of the result in *s. */
static int nsm_from(const char *src, int proc, void *args, struct sync *s)
{
	struct e2e_rpc *r =
		e2e_rpc_open_from(src, 0, gw.nlm_port, NSM_PROGRAM, NSM_V1);
	struct rpc_context *c = r ? e2e_rpc_ctx(r) : NULL;
	int rc = -1;

	if (!c)
		return -1;
	switch (proc) {
	case 2:
		rc = sync_wait(c, s, rpc_nsm1_mon_async(c, sync_cb, args, s));
		break;
	case 6:
		rc = sync_wait(c, s,
			       rpc_nsm1_notify_async(c, sync_cb, args, s));
		break;
	}
	e2e_rpc_close(r);
	return rc;
}

/*
 * SM_NOTIFY releases what the notifying address holds, no more: a
 * notify naming hostC from another host leaves hostC's lock (before: any
 * host could release anyone's locks); hostC's own notify releases it.
 * SM_MON is the local host's only.
 */
static void test_notify_spoof(void)
{
	nfs_fh3 fh = new_file("spoof");
	NSM1_NOTIFYargs na = { .mon_name = "hostC", .state = 7 };
	NSM1_MONargs ma = { .mon_id = { "hostC", { "evil", 100021, 4, 16 } } };
	struct rpc_context *saved;
	struct sync s = { .size = 0 };
	struct e2e_rpc *r;

	E2E_REQUIRE(fh.data.data_len, "CREATE failed");
	r = from_host("127.0.0.3", &saved);
	E2E_REQUIRE(r, "no connection from 127.0.0.3");
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostC", 1, 0, 0), 1, 0, 0) ==
			  NLM4_GRANTED,
		  "LOCK C from .3");
	from_done(r, saved);
	E2E_CHECK(nsm_from("127.0.0.4", 6, &na, &s) == 0, "SM_NOTIFY from .4");
	E2E_CHECK(nlm_test_call(mk_lock(&fh, "hostB", 2, 0, 0), 1, NULL) ==
			  NLM4_DENIED,
		  "C's lock survived a notify from .4");
	E2E_CHECK(e2e_log_count(gw.log,
				"SM_NOTIFY for hostC from 127.0.0.4 "
				"ignored",
				false) >= 1,
		  "the ignored notify was not logged");
	s = (struct sync){ .size = sizeof(NSM1_MONres) };
	E2E_CHECK(nsm_from("127.0.0.4", 2, &ma, &s) == 0 &&
			  ((NSM1_MONres *)s.res)->res == NSM_STAT_FAIL,
		  "SM_MON from another host must fail");
	s = (struct sync){ .size = 0 };
	E2E_CHECK(nsm_from("127.0.0.3", 6, &na, &s) == 0, "SM_NOTIFY from .3");
	E2E_CHECK(nlm_test_call(mk_lock(&fh, "hostB", 2, 0, 0), 1, NULL) ==
			  NLM4_GRANTED,
		  "C's own notify released its lock");
}

/*
 * One address holds at most --max-locks-per-host locks, shares and
 * blocked requests: past it DENIED_NOLOCKS, and other hosts still lock.
 */
static void test_host_bound(void)
{
	nfs_fh3 fh = new_file("bound");
	struct rpc_context *saved;
	struct e2e_rpc *r;
	int max = atoi(HOST_LOCKS);

	E2E_REQUIRE(fh.data.data_len, "CREATE failed");
	r = from_host("127.0.0.4", &saved);
	E2E_REQUIRE(r, "no connection from 127.0.0.4");
	for (int i = 0; i < max; i++)
		E2E_CHECK(nlm_lock_call(
				  mk_lock(&fh, "hostD", 1, 2 * (uint64_t)i, 1),
				  1, 0, 0) == NLM4_GRANTED,
			  "LOCK %d of %d", i + 1, max);
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostD", 1, 1000, 1), 1, 0, 0) ==
			  NLM4_DENIED_NOLOCKS,
		  "LOCK past the host's bound");
	from_done(r, saved);
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, "hostA", 1, 1000, 1), 1, 0, 0) ==
			  NLM4_GRANTED,
		  "another host still locks");
	raw_src = "127.0.0.4";
	E2E_CHECK(free_all_call("hostD") == 0, "FREE_ALL hostD");
	raw_src = "127.0.0.1";
	nlm_unlock_call(mk_lock(&fh, "hostA", 1, 1000, 1));
}

/*
 * Names a client chooses reach the log escaped: a caller name with a
 * newline cannot forge a line of its own.
 */
static void test_log_injection(void)
{
	nfs_fh3 fh = new_file("inject");
	const char *evil = "hostE\n2026-01-01T00:00:00.000Z mapfs-gw error: "
			   "FORGED";

	E2E_REQUIRE(fh.data.data_len, "CREATE failed");
	E2E_CHECK(nlm_lock_call(mk_lock(&fh, evil, 1, 0, 0), 1, 0, 0) ==
			  NLM4_GRANTED,
		  "LOCK with a newline in the name");
	E2E_CHECK(nlm_unlock_call(mk_lock(&fh, evil, 1, 0, 0)) == NLM4_GRANTED,
		  "UNLOCK");
	E2E_CHECK(e2e_log_count(gw.log, "hostE\\x0a2026", false) >= 1,
		  "the name is not in the log, escaped");
	E2E_CHECK(e2e_log_count(gw.log, "2026-01-01T00:00:00", true) == 0,
		  "a forged line reached the log");
}

static int suite_init(void)
{
	char *d;

	strcpy(gw.dir, "/tmp/mapfs-e2e-nlm-XXXXXX");
	d = mkdtemp(gw.dir);
	if (!d || host_start())
		return -1;
	snprintf(gw.store, sizeof(gw.store), "file://%s/store", gw.dir);
	snprintf(gw.state, sizeof(gw.state), "%s/state", gw.dir);
	snprintf(gw.log, sizeof(gw.log), "%s/gw.log", gw.dir);
	snprintf(gw.exports, sizeof(gw.exports), "%s/exports", gw.dir);
	FILE *f = fopen(gw.exports, "w");

	if (!f || fputs(exports_text, f) < 0 || fclose(f))
		return -1;
	gw.nlm_port = e2e_free_port();
	if (gw.nlm_port <= 0 || gw_start(0))
		return -1;
	struct e2e_gw g = { .mount_port = gw.mount_port };

	nfs = e2e_rpc_open(gw.nfs_port, NFS_PROGRAM, NFS_V3);
	nlm = connect_to(gw.nlm_port, NLM_PROGRAM, NLM_V4);
	if (!nfs || !nlm || e2e_root_fh(nfs, &g, &root_fh))
		return -1;
	return 0;
}

static int suite_clean(void)
{
	char cmd[128];

	if (nlm)
		rpc_destroy_context(nlm);
	e2e_rpc_close(nfs);
	if (gw_stop() != 0)
		gw_dump_log();
	if (!getenv("E2E_KEEP")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", gw.dir);
		if (system(cmd))
			fprintf(stderr, "could not remove %s\n", gw.dir);
	}
	return 0;
}

int main(void)
{
	CU_pSuite s;
	unsigned failed;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite("e2e_nlm", suite_init, suite_clean);
	CU_add_test(s, "lock_test_unlock", test_lock_test_unlock);
	CU_add_test(s, "stale_handle", test_stale_handle);
	CU_add_test(s, "blocking_granted", test_blocking_granted);
	CU_add_test(s, "granted_refused", test_granted_refused);
	CU_add_test(s, "share", test_share);
	CU_add_test(s, "free_all", test_free_all);
	CU_add_test(s, "nsm", test_nsm);
	CU_add_test(s, "refused_host", test_refused_host);
	CU_add_test(s, "owner_address", test_owner_address);
	CU_add_test(s, "notify_spoof", test_notify_spoof);
	CU_add_test(s, "host_bound", test_host_bound);
	CU_add_test(s, "log_injection", test_log_injection);
	CU_add_test(s, "restart", test_restart);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
