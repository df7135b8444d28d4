/*
 * admin/ready.c - `mapfs-gw ctl ready`: may this gateway take clients now?
 *
 * For a health check (keepalived's vrrp_script, a load balancer): it
 * answers "ok" only if an NFS NULL call to the gateway's own NFS port
 * is answered within READY_RPC_MS (the event loops are not stuck), and,
 * in a cluster, the database answers and this node's lease holds (a node
 * whose lease may have run out is being taken over by the others: its
 * address should move too).  A store that is down does not count: every
 * gateway shares it, and moving the address would not help.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admin_int.h"
#include "db/db.h"
#include "metrics/metrics.h"

#define READY_RPC_MS 2000

static uint64_t mono_ms(void)
{
	return metrics_now_ns() / 1000000u;
}

/* Where to reach the NFS service: its address, loopback for a wildcard. */
static socklen_t nfs_target(const struct sockaddr_storage *in,
			    struct sockaddr_storage *out)
{
	*out = *in;
	if (out->ss_family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)out;

		if (a->sin_addr.s_addr == htonl(INADDR_ANY))
			a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		return sizeof(*a);
	}
	if (out->ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)out;

		if (IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr))
			a->sin6_addr = in6addr_loopback;
		return sizeof(*a);
	}
	return 0;
}

/* Wait for fd to be ready for events until deadline.  0, -ETIMEDOUT. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
	for (;;) {
		uint64_t now = mono_ms();
		struct pollfd p = { .fd = fd, .events = events };
		int n;

		if (now >= deadline)
			return -ETIMEDOUT;
		n = poll(&p, 1, (int)(deadline - now));
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

/* An NFS v3 NULL call over TCP, answered as accepted.  0 or -errno. */
static int nfs_null(const struct sockaddr_storage *addr)
{
	static const uint32_t call[] = {
		0, 0x52454459, 0, 2, 100003, 3, 0, 0, 0, 0, 0,
	};
	uint32_t msg[11], reply[7];
	uint64_t deadline = mono_ms() + READY_RPC_MS;
	struct sockaddr_storage to;
	socklen_t len = nfs_target(addr, &to);
	size_t got = 0;
	int fd, rc;

	if (!len)
		return -EAFNOSUPPORT;
	for (size_t i = 0; i < 11; i++)
		msg[i] = htonl(call[i]);
	msg[0] = htonl(0x80000000u | 40); /* one fragment of 40 bytes */
	fd = socket(to.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (struct sockaddr *)&to, len);
	if (rc && errno != EINPROGRESS) {
		rc = -errno;
		goto out;
	}
	if ((rc = wait_fd(fd, POLLOUT, deadline)))
		goto out;
	if (send(fd, msg, sizeof(msg), MSG_NOSIGNAL) != sizeof(msg)) {
		rc = errno ? -errno : -EIO;
		goto out;
	}
	/* mark, xid, REPLY, MSG_ACCEPTED, verf flavor, verf len, SUCCESS */
	while (got < sizeof(reply)) {
		ssize_t n;

		if ((rc = wait_fd(fd, POLLIN, deadline)))
			goto out;
		n = recv(fd, (char *)reply + got, sizeof(reply) - got, 0);
		if (n <= 0) {
			rc = n < 0 && errno != EAGAIN ? -errno
			     : n                      ? 0
						      : -ECONNRESET;
			if (rc)
				goto out;
			continue;
		}
		got += (size_t)n;
	}
	rc = ntohl(reply[1]) == 0x52454459 && ntohl(reply[2]) == 1 &&
			     ntohl(reply[3]) == 0 && ntohl(reply[6]) == 0
		     ? 0
		     : -EPROTO;
out:
	close(fd);
	return rc;
}

void admin_cmd_ready(struct admin *a, int fd)
{
	uint64_t t0 = mono_ms();
	int rc = a->ctx.nfs_addr ? nfs_null(a->ctx.nfs_addr) : -ENOTCONN;

	if (rc) {
		admin_send(fd,
			   "err not ready: NFS does not answer a NULL call: "
			   "%s",
			   strerror(-rc));
		return;
	}
	admin_send(fd, "> nfs: answers (%llu ms)",
		   (unsigned long long)(mono_ms() - t0));
	if (a->ctx.db && db_clustered(a->ctx.db)) {
		if (!db_cluster_up(a->ctx.db)) {
			admin_send(fd, "err not ready: the cluster database "
				       "does not answer");
			return;
		}
		if (!db_lease_held(a->ctx.db)) {
			admin_send(fd, "err not ready: this node's lease is "
				       "not renewed: the others may take over");
			return;
		}
		admin_send(fd, "> cluster: node %u, lease held",
			   db_node_id(a->ctx.db));
	}
	admin_send(fd, "ok");
}
