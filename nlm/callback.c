/*
 * nlm/callback.c - calls from the gateway to its clients: NLM GRANTED to
 * a client's lockd when a blocked request is granted, SM_NOTIFY to its
 * statd after a restart, and the SM_MON callbacks.
 *
 * Like knfsd and Ganesha, the gateway finds the client's service through
 * the client's own rpcbind (PMAP v2 GETPORT for TCP) at the address the
 * client called from.  Calls block (connect, send, wait), so they run on
 * one thread of their own, never on an event loop; each attempt is
 * bounded by a short connect and call timeout so that an unreachable
 * client delays the others by seconds, not minutes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "nlm_int.h"
#include <rpc/pmap_prot.h>

#define CB_CONNECT_MS 2000
#define CB_CALL_S 5
#define CB_RETRY_MS 2000

struct cb_job {
	struct cb_job *next;
	struct nlm_cb_call c;
	size_t len;
	uint8_t body[]; /* the encoded arguments */
};

struct nlm_cb {
	uint16_t rpcbind_port;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct cb_job *head, **tail;
	bool stop;
};

/* The pre-encoded arguments, copied into the call as they are. */
struct raw_args {
	const uint8_t *buf;
	size_t len;
};

static bool_t xdr_raw_args(XDR *x, void *p)
{
	struct raw_args *r = p;

	return x->x_op == XDR_ENCODE
		       ? XDR_PUTBYTES(x, (char *)r->buf, (u_int)r->len)
		       : TRUE;
}

/* The results of a procedure that returns void. */
static bool_t xdr_no_results(XDR *x, void *p)
{
	(void)x;
	(void)p;
	return TRUE;
}

/* Connected blocking TCP socket to addr with port, or -errno. */
static int cb_connect(const struct sockaddr_storage *addr, uint16_t port,
		      struct sockaddr_storage *to, socklen_t *tolen)
{
	struct pollfd pfd;
	int fd, rc, err;
	socklen_t elen = sizeof(err);

	*to = *addr;
	if (to->ss_family == AF_INET) {
		((struct sockaddr_in *)to)->sin_port = htons(port);
		*tolen = sizeof(struct sockaddr_in);
	} else if (to->ss_family == AF_INET6) {
		((struct sockaddr_in6 *)to)->sin6_port = htons(port);
		*tolen = sizeof(struct sockaddr_in6);
	} else {
		return -EAFNOSUPPORT;
	}
	fd = socket(to->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)to, *tolen) &&
	    errno != EINPROGRESS) {
		rc = -errno;
		goto out_close;
	}
	pfd = (struct pollfd){ .fd = fd, .events = POLLOUT };
	rc = poll(&pfd, 1, CB_CONNECT_MS);
	if (rc <= 0) {
		rc = rc ? -errno : -ETIMEDOUT;
		goto out_close;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) || err) {
		rc = err ? -err : -errno;
		goto out_close;
	}
	/* libtirpc's client expects a blocking socket. */
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)) {
		rc = -errno;
		goto out_close;
	}
	return fd;

out_close:
	close(fd);
	return rc;
}

/* One call over a fresh connection to addr:port.  Returns 0 or -errno. */
static int cb_call(const struct sockaddr_storage *addr, uint16_t port,
		   uint32_t prog, uint32_t vers, uint32_t proc, xdrproc_t enc,
		   void *args, xdrproc_t dec, void *res)
{
	struct timeval tv = { .tv_sec = CB_CALL_S };
	struct sockaddr_storage to;
	struct netbuf nb = { .buf = &to };
	enum clnt_stat st;
	socklen_t tolen;
	CLIENT *clnt;
	int fd, rc = 0;

	fd = cb_connect(addr, port, &to, &tolen);
	if (fd < 0)
		return fd;
	nb.len = nb.maxlen = tolen;
	clnt = clnt_vc_create(fd, &nb, prog, vers, 0, 0);
	if (!clnt) {
		close(fd);
		return -ECONNREFUSED;
	}
	st = clnt_call(clnt, proc, enc, args, dec, res, tv);
	if (st == RPC_TIMEDOUT)
		rc = -ETIMEDOUT;
	else if (st == RPC_PROGUNAVAIL || st == RPC_PROGVERSMISMATCH ||
		 st == RPC_PROCUNAVAIL)
		rc = -EPROTONOSUPPORT;
	else if (st != RPC_SUCCESS)
		rc = -EPROTO;
	clnt_destroy(clnt);
	close(fd);
	return rc;
}

/* The client's TCP port for prog/vers from its rpcbind, or -errno. */
static int cb_getport(const struct nlm_cb *cb,
		      const struct sockaddr_storage *addr, uint32_t prog,
		      uint32_t vers)
{
	struct pmap pm = { .pm_prog = prog,
			   .pm_vers = vers,
			   .pm_prot = IPPROTO_TCP };
	u_long port = 0;
	int rc;

	rc = cb_call(addr, cb->rpcbind_port, PMAPPROG, PMAPVERS,
		     PMAPPROC_GETPORT, (xdrproc_t)xdr_pmap, &pm,
		     (xdrproc_t)xdr_u_long, &port);
	if (rc)
		return rc;
	return port && port <= 65535 ? (int)port : -ENOENT;
}

static void cb_run(struct nlm_cb *cb, struct cb_job *j)
{
	struct raw_args raw = { j->body, j->len };
	xdrproc_t dec = j->c.decode ? j->c.decode : (xdrproc_t)xdr_no_results;
	void *res = j->c.res_size ? calloc(1, j->c.res_size) : NULL;
	char host[INET6_ADDRSTRLEN] = "?";
	int rc = -ENOMEM, port;

	if (j->c.res_size && !res)
		goto out;
	for (int i = 0; i < (j->c.tries > 0 ? j->c.tries : 1); i++) {
		if (i) {
			struct timespec ts = { .tv_sec = CB_RETRY_MS / 1000 };

			nanosleep(&ts, NULL);
			pthread_mutex_lock(&cb->mu);
			bool stop = cb->stop;
			pthread_mutex_unlock(&cb->mu);
			if (stop) {
				rc = -ECANCELED;
				break;
			}
		}
		port = cb_getport(cb, &j->c.addr, j->c.prog, j->c.vers);
		if (port < 0) {
			rc = port;
			continue;
		}
		rc = cb_call(&j->c.addr, (uint16_t)port, j->c.prog, j->c.vers,
			     j->c.proc, (xdrproc_t)xdr_raw_args, &raw, dec,
			     res);
		if (!rc)
			break;
	}
	if (rc) {
		const void *a =
			j->c.addr.ss_family == AF_INET6
				? (const void *)&(
					  (struct sockaddr_in6 *)&j->c.addr)
					  ->sin6_addr
				: (const void *)&(
					  (struct sockaddr_in *)&j->c.addr)
					  ->sin_addr;

		inet_ntop(j->c.addr.ss_family, a, host, sizeof(host));
		log_warn("callback %u/%u proc %u to %s failed: %s", j->c.prog,
			 j->c.vers, j->c.proc, host, strerror(-rc));
	}
out:
	if (j->c.done)
		j->c.done(j->c.arg, rc, rc ? NULL : res);
	if (res) {
		if (!rc)
			xdr_free(dec, res);
		free(res);
	}
}

static void *cb_main(void *p)
{
	struct nlm_cb *cb = p;
	struct cb_job *j;

	pthread_mutex_lock(&cb->mu);
	for (;;) {
		while (!cb->head && !cb->stop)
			pthread_cond_wait(&cb->cv, &cb->mu);
		if (cb->stop)
			break;
		j = cb->head;
		cb->head = j->next;
		if (!cb->head)
			cb->tail = &cb->head;
		pthread_mutex_unlock(&cb->mu);
		cb_run(cb, j);
		free(j);
		pthread_mutex_lock(&cb->mu);
	}
	pthread_mutex_unlock(&cb->mu);
	return NULL;
}

int nlm_cb_start(uint16_t rpcbind_port, struct nlm_cb **out)
{
	struct nlm_cb *cb = calloc(1, sizeof(*cb));
	int rc;

	if (!cb)
		return -ENOMEM;
	cb->rpcbind_port = rpcbind_port;
	cb->tail = &cb->head;
	pthread_mutex_init(&cb->mu, NULL);
	pthread_cond_init(&cb->cv, NULL);
	rc = pthread_create(&cb->thread, NULL, cb_main, cb);
	if (rc) {
		pthread_cond_destroy(&cb->cv);
		pthread_mutex_destroy(&cb->mu);
		free(cb);
		return -rc;
	}
	*out = cb;
	return 0;
}

void nlm_cb_stop(struct nlm_cb *cb)
{
	struct cb_job *j, *next;

	if (!cb)
		return;
	pthread_mutex_lock(&cb->mu);
	cb->stop = true;
	pthread_cond_signal(&cb->cv);
	pthread_mutex_unlock(&cb->mu);
	pthread_join(cb->thread, NULL);
	for (j = cb->head; j; j = next) {
		next = j->next;
		if (j->c.done)
			j->c.done(j->c.arg, -ECANCELED, NULL);
		free(j);
	}
	pthread_cond_destroy(&cb->cv);
	pthread_mutex_destroy(&cb->mu);
	free(cb);
}

int nlm_cb_queue(struct nlm_cb *cb, const struct nlm_cb_call *c)
{
	unsigned long len = xdr_sizeof(c->encode, (void *)c->args);
	struct cb_job *j;
	XDR x;

	if (!len)
		return -EINVAL;
	j = malloc(sizeof(*j) + len);
	if (!j)
		return -ENOMEM;
	j->next = NULL;
	j->c = *c;
	j->c.args = NULL;
	j->len = len;
	xdrmem_create(&x, (char *)j->body, (u_int)len, XDR_ENCODE);
	if (!c->encode(&x, (void *)c->args)) {
		xdr_destroy(&x);
		free(j);
		return -EINVAL;
	}
	xdr_destroy(&x);
	pthread_mutex_lock(&cb->mu);
	*cb->tail = j;
	cb->tail = &j->next;
	pthread_cond_signal(&cb->cv);
	pthread_mutex_unlock(&cb->mu);
	return 0;
}
