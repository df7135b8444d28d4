/*
 * rpc/rpcbind.c - registration with the local rpcbind (port mapper v2,
 * PMAPPROC_SET/UNSET, RFC 1833 section 3).
 *
 * libtirpc's pmap_set() and rpcb_set() pick their own transports and
 * retry for up to a minute when no rpcbind answers, which would stall the
 * gateway's start.  So we connect to 127.0.0.1:111 ourselves with a short
 * timeout and run the port mapper call through libtirpc's client over that
 * socket, with a bounded call timeout.  rpcbind serves v2 registrations to
 * v3/v4 GETADDR queries too (netid "tcp").
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "rpc_int.h"
#include <rpc/pmap_prot.h>

#define RPCBIND_CONNECT_MS 1000
#define RPCBIND_CALL_S 2

/* Connected blocking TCP socket to 127.0.0.1:111, or -errno. */
static int pmap_connect(struct sockaddr_in *sin)
{
	struct pollfd pfd;
	int fd, rc, err;
	socklen_t elen = sizeof(err);

	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(PMAPPORT);
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)sin, sizeof(*sin)) &&
	    errno != EINPROGRESS) {
		rc = -errno;
		goto out_close;
	}
	pfd.fd = fd;
	pfd.events = POLLOUT;
	rc = poll(&pfd, 1, RPCBIND_CONNECT_MS);
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

/* One PMAPPROC_SET or PMAPPROC_UNSET call; *ok gets rpcbind's answer. */
static int pmap_call(u_long proc, struct pmap *pm, bool_t *ok)
{
	struct timeval tv = { .tv_sec = RPCBIND_CALL_S };
	struct sockaddr_in sin;
	struct netbuf nb = { .maxlen = sizeof(sin),
			     .len = sizeof(sin),
			     .buf = &sin };
	enum clnt_stat st;
	CLIENT *clnt;
	int fd, rc = 0;

	fd = pmap_connect(&sin);
	if (fd < 0)
		return fd;
	clnt = clnt_vc_create(fd, &nb, PMAPPROG, PMAPVERS, 0, 0);
	if (!clnt) {
		rc = -ECONNREFUSED;
		goto out_close;
	}
	*ok = FALSE;
	st = clnt_call(clnt, proc, (xdrproc_t)xdr_pmap, (char *)pm,
		       (xdrproc_t)xdr_bool, (char *)ok, tv);
	if (st == RPC_TIMEDOUT)
		rc = -ETIMEDOUT;
	else if (st != RPC_SUCCESS)
		rc = -EPROTO;
	clnt_destroy(clnt);
out_close:
	close(fd);
	return rc;
}

/*
 * Any old mapping for prog/vers (a previous run that died) is removed
 * first: rpcbind refuses SET while one exists.  Returns 0, -ECONNREFUSED
 * (no rpcbind), -ETIMEDOUT, -EPROTO, or -EPERM (rpcbind said no).
 */
int rpc_rpcbind_set(uint32_t prog, uint32_t vers, uint16_t port)
{
	struct pmap pm = { .pm_prog = prog,
			   .pm_vers = vers,
			   .pm_prot = IPPROTO_TCP,
			   .pm_port = port };
	bool_t ok;
	int rc;

	rc = pmap_call(PMAPPROC_UNSET, &pm, &ok);
	if (rc)
		return rc;
	rc = pmap_call(PMAPPROC_SET, &pm, &ok);
	if (rc)
		return rc;
	return ok ? 0 : -EPERM;
}

/*
 * Remove prog/vers (all transports).  Removing an absent mapping succeeds
 * (rpcbind answers TRUE either way).  Errors as rpc_rpcbind_set().
 */
int rpc_rpcbind_unset(uint32_t prog, uint32_t vers)
{
	struct pmap pm = { .pm_prog = prog, .pm_vers = vers };
	bool_t ok;

	return pmap_call(PMAPPROC_UNSET, &pm, &ok);
}
