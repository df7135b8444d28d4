/*
 * minirpcbind - a tiny port mapper (PMAP v2 over TCP) and, with -s, a
 * tiny status monitor, for the kernel-client tests.
 *
 * In the guest there is no rpcbind or rpc.statd, but Linux's lockd
 * registers itself with rpcbind and asks statd (SM_MON) before its first
 * lock; this answers both.  On the host side, inside the test's network
 * namespace, it is the rpcbind that the gateway registers NLM with and
 * that the guest's lockd asks for the NLM port.
 *
 *   minirpcbind [-s] [-p PORT] [-r FILE]
 *
 * -p: the port (default 111); -s: also serve NSM v1 on a free port,
 * registered here; -r FILE: write "ready\n" to FILE once listening.
 * Versions 3 and 4 of rpcbind get PROG_MISMATCH (2..2), which makes the
 * kernel fall back to v2.  One thread, poll(), no allocation per call.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXMAP 64
#define MAXCONN 64
#define RECMAX 8192

struct map {
	uint32_t prog, vers, prot, port;
};

static struct map maps[MAXMAP];
static int nmaps;
static uint32_t nsm_state = 1;

struct conn {
	int fd;
	uint8_t buf[RECMAX];
	size_t have;
};

static uint32_t rd(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static void wr(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static struct map *map_find(uint32_t prog, uint32_t vers, uint32_t prot)
{
	for (int i = 0; i < nmaps; i++)
		if (maps[i].prog == prog && maps[i].vers == vers &&
		    maps[i].prot == prot)
			return &maps[i];
	return NULL;
}

static void map_unset(uint32_t prog, uint32_t vers)
{
	for (int i = 0; i < nmaps;)
		if (maps[i].prog == prog && maps[i].vers == vers)
			maps[i] = maps[--nmaps];
		else
			i++;
}

static int map_set(uint32_t prog, uint32_t vers, uint32_t prot, uint32_t port)
{
	if (map_find(prog, vers, prot) || nmaps == MAXMAP)
		return 0; /* rpcbind refuses to replace a mapping */
	maps[nmaps++] = (struct map){ prog, vers, prot, port };
	return 1;
}

/*
 * Answer the call rec[0..len) into out; returns the reply length.  args
 * points after the credential and verifier.
 */
static size_t answer(const uint8_t *rec, size_t len, uint8_t *out)
{
	uint32_t xid, prog, vers, proc, n;
	size_t off = 24, o = 0;
	const uint8_t *a;

	if (len < 40)
		return 0;
	xid = rd(rec);
	prog = rd(rec + 12);
	vers = rd(rec + 16);
	proc = rd(rec + 20);
	for (int i = 0; i < 2; i++) { /* credential, verifier */
		if (off + 8 > len)
			return 0;
		n = rd(rec + off + 4);
		off += 8 + ((n + 3) & ~3u);
	}
	if (off > len)
		return 0;
	a = rec + off;
	wr(out, xid);
	wr(out + 4, 1);
	wr(out + 8, 0);
	wr(out + 12, 0);
	wr(out + 16, 0);
	o = 20;
#define STATUS(s) (wr(out + o, (s)), o += 4)
#define RES(v) (wr(out + o, (v)), o += 4)
	if (prog == 100000 && vers != 2) {
		STATUS(2); /* PROG_MISMATCH */
		RES(2);
		RES(2);
		return o;
	}
	if (prog == 100000) {
		STATUS(0);
		if (proc == 0)
			return o;
		if ((proc == 1 || proc == 2 || proc == 3) && len - off < 16)
			return 0;
		switch (proc) {
		case 1: RES(map_set(rd(a), rd(a + 4), rd(a + 8), rd(a + 12))); break;
		case 2: map_unset(rd(a), rd(a + 4)); RES(1); break;
		case 3: {
			struct map *m = map_find(rd(a), rd(a + 4), rd(a + 8));

			RES(m ? m->port : 0);
			break;
		}
		case 4:
			for (int i = 0; i < nmaps && o + 24 < RECMAX; i++) {
				RES(1);
				RES(maps[i].prog);
				RES(maps[i].vers);
				RES(maps[i].prot);
				RES(maps[i].port);
			}
			RES(0);
			break;
		default:
			o -= 4;
			STATUS(3); /* PROC_UNAVAIL */
		}
		return o;
	}
	if (prog == 100024 && vers == 1) {
		STATUS(0);
		switch (proc) {
		case 0: case 6: break;          /* NULL, NOTIFY: void */
		case 1: case 2: RES(0); RES(nsm_state); break; /* STAT, MON */
		case 3: case 4: RES(nsm_state); break;         /* UNMON(_ALL) */
		default: o -= 4; STATUS(3);
		}
		return o;
	}
	STATUS(1); /* PROG_UNAVAIL */
	return o;
}

static int listen_on(uint16_t port, uint16_t *bound)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  /* The guest's is reached by port forwarding. */
				  .sin_addr.s_addr = htonl(INADDR_ANY) };
	socklen_t sl = sizeof(sa);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 16) ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl)) {
		close(fd);
		return -1;
	}
	*bound = ntohs(sa.sin_port);
	return fd;
}

/* Feed what fd has; answer every complete record.  -1 closes it. */
static int conn_read(struct conn *c)
{
	static uint8_t out[RECMAX + 4];
	ssize_t r = read(c->fd, c->buf + c->have, sizeof(c->buf) - c->have);

	if (r <= 0)
		return -1;
	c->have += (size_t)r;
	while (c->have >= 4) {
		uint32_t mark = rd(c->buf), len = mark & 0x7fffffffu;
		size_t n;

		/* One-fragment records only: all these callers send. */
		if (!(mark >> 31) || len + 4 > sizeof(c->buf))
			return -1;
		if (c->have < len + 4)
			break;
		n = answer(c->buf + 4, len, out + 4);
		if (n) {
			wr(out, 0x80000000u | (uint32_t)n);
			if (write(c->fd, out, n + 4) != (ssize_t)(n + 4))
				return -1;
		}
		memmove(c->buf, c->buf + 4 + len, c->have - 4 - len);
		c->have -= 4 + len;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct conn conns[MAXCONN];
	struct pollfd pfd[MAXCONN + 2];
	uint16_t port = 111, bound, sm_port = 0;
	const char *ready = NULL;
	int lfd[2] = { -1, -1 }, nl = 1, opt, statd = 0;

	while ((opt = getopt(argc, argv, "sp:r:")) != -1) {
		if (opt == 's')
			statd = 1;
		else if (opt == 'p')
			port = (uint16_t)atoi(optarg);
		else if (opt == 'r')
			ready = optarg;
		else
			return 2;
	}
	lfd[0] = listen_on(port, &bound);
	if (lfd[0] < 0) {
		perror("minirpcbind: listen");
		return 1;
	}
	map_set(100000, 2, IPPROTO_TCP, bound);
	if (statd) {
		lfd[1] = listen_on(0, &sm_port);
		if (lfd[1] < 0)
			return 1;
		nl = 2;
		map_set(100024, 1, IPPROTO_TCP, sm_port);
		map_set(100024, 1, IPPROTO_UDP, sm_port);
	}
	if (ready) {
		FILE *f = fopen(ready, "w");

		if (f) {
			fputs("ready\n", f);
			fclose(f);
		}
	}
	for (int i = 0; i < MAXCONN; i++)
		conns[i].fd = -1;
	for (;;) {
		int n = 0;

		for (int i = 0; i < nl; i++)
			pfd[n++] = (struct pollfd){ .fd = lfd[i], .events = POLLIN };
		for (int i = 0; i < MAXCONN; i++)
			pfd[n++] = (struct pollfd){ .fd = conns[i].fd,
						    .events = POLLIN };
		if (poll(pfd, (nfds_t)n, -1) < 0 && errno != EINTR)
			return 1;
		for (int i = 0; i < nl; i++) {
			if (!(pfd[i].revents & POLLIN))
				continue;
			int fd = accept(lfd[i], NULL, NULL);
			int k;

			for (k = 0; k < MAXCONN && conns[k].fd >= 0; k++)
				;
			if (fd >= 0 && k == MAXCONN)
				close(fd);
			else if (fd >= 0)
				conns[k] = (struct conn){ .fd = fd };
		}
		for (int i = 0; i < MAXCONN; i++)
			if (conns[i].fd >= 0 && pfd[nl + i].revents &&
			    conn_read(&conns[i])) {
				close(conns[i].fd);
				conns[i].fd = -1;
			}
	}
}
