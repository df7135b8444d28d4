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
 * -p: the port (default 111); -s: also serve NSM v1, on the same port
 * (so one forwarded port reaches both); -r FILE: write "ready\n" to FILE
 * once listening.  Versions 3 and 4 of rpcbind get PROG_MISMATCH (2..2),
 * which makes the kernel fall back to v2.  One thread, poll(), no
 * allocation per call.
 *
 * As statd it keeps what lockd's SM_MON asks (its callback and cookie),
 * and on an SM_NOTIFY from a server calls lockd back (NLM proc 16, from
 * 127.0.0.1 and a reserved port, as lockd insists) for every monitor, as
 * rpc.statd does: lockd then reclaims its locks on that server.  (It
 * does not match the notify's name against the monitored one: the test
 * client has one server, whose name it knows by another address.)  Each
 * forwarded notify is logged to stderr.
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

#define MAXMON 16
/* An SM_MON: whom to call (prog/vers/proc on this host) with priv. */
static struct mon {
	char name[256];
	uint32_t prog, vers, proc;
	uint8_t priv[16];
} mons[MAXMON];
static int nmons;

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

/* An XDR string at a (within end) into buf; the bytes after it, or NULL. */
static const uint8_t *get_str(const uint8_t *a, const uint8_t *end, char *buf,
			      size_t cap)
{
	uint32_t n;

	if (end - a < 4)
		return NULL;
	n = rd(a);
	a += 4;
	if (n >= cap || (size_t)(end - a) < ((n + 3) & ~3u))
		return NULL;
	memcpy(buf, a, n);
	buf[n] = 0;
	return a + ((n + 3) & ~3u);
}

/* SM_MON's args: mon_name, my_name, my_prog, my_vers, my_proc, priv. */
static void mon_add(const uint8_t *a, const uint8_t *end)
{
	struct mon m;
	char my_name[256];

	a = get_str(a, end, m.name, sizeof(m.name));
	a = a ? get_str(a, end, my_name, sizeof(my_name)) : NULL;
	if (!a || end - a < 28)
		return;
	m.prog = rd(a);
	m.vers = rd(a + 4);
	m.proc = rd(a + 8);
	memcpy(m.priv, a + 12, 16);
	for (int i = 0; i < nmons; i++)
		if (!strcmp(mons[i].name, m.name) &&
		    !memcmp(mons[i].priv, m.priv, 16)) {
			mons[i] = m;
			return;
		}
	if (nmons < MAXMON)
		mons[nmons++] = m;
}

/* Call lockd back for m: nlm_reboot { mon_name, state, priv[16] }. */
static void mon_call(const struct mon *m, uint32_t state)
{
	struct map *lm = map_find(m->prog, m->vers, IPPROTO_TCP);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	uint8_t b[512], r[64];
	size_t n = strlen(m->name), o = 4;
	int fd = -1;

	if (!lm || n > 255)
		return;
	wr(b + o, 0x6b746e31);
	o += 4; /* xid */
	wr(b + o, 0);
	o += 4; /* CALL */
	wr(b + o, 2);
	o += 4; /* RPC v2 */
	wr(b + o, m->prog);
	o += 4;
	wr(b + o, m->vers);
	o += 4;
	wr(b + o, m->proc);
	o += 4;
	memset(b + o, 0, 16);
	o += 16; /* AUTH_NONE cred, verf */
	wr(b + o, (uint32_t)n);
	o += 4;
	memset(b + o, 0, (n + 3) & ~3u);
	memcpy(b + o, m->name, n);
	o += (n + 3) & ~3u;
	wr(b + o, state);
	o += 4;
	memcpy(b + o, m->priv, 16);
	o += 16;
	wr(b, 0x80000000u | (uint32_t)(o - 4));
	/* lockd takes this only from a reserved port of the loopback. */
	for (int port = 1023; port > 600 && fd < 0; port--) {
		struct sockaddr_in me = { .sin_family = AF_INET,
					  .sin_port = htons((uint16_t)port),
					  .sin_addr.s_addr =
						  htonl(INADDR_LOOPBACK) };

		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0 && bind(fd, (struct sockaddr *)&me, sizeof(me))) {
			close(fd);
			fd = -1;
		}
	}
	sa.sin_port = htons((uint16_t)lm->port);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    write(fd, b, o) != (ssize_t)o || read(fd, r, sizeof(r)) <= 0)
		fprintf(stderr,
			"minirpcbind: calling lockd back for %s failed\n",
			m->name);
	else
		fprintf(stderr,
			"minirpcbind: SM_NOTIFY: lockd told that %s "
			"restarted (state %u)\n",
			m->name, state);
	if (fd >= 0)
		close(fd);
}

/* SM_NOTIFY's args: mon_name, state.  Tell every monitor's lockd. */
static void notify(const uint8_t *a, const uint8_t *end)
{
	char name[256];

	a = get_str(a, end, name, sizeof(name));
	if (!a || end - a < 4)
		return;
	fprintf(stderr, "minirpcbind: SM_NOTIFY from %s, state %u\n", name,
		rd(a));
	for (int i = 0; i < nmons; i++)
		mon_call(&mons[i], rd(a));
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
		case 1:
			RES(map_set(rd(a), rd(a + 4), rd(a + 8), rd(a + 12)));
			break;
		case 2:
			map_unset(rd(a), rd(a + 4));
			RES(1);
			break;
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
		case 0:
			break; /* NULL: void */
		case 6:
			notify(a, rec + len);
			break; /* NOTIFY: void */
		case 2:
			mon_add(a, rec + len); /* MON, then as STAT */
		/* fall through */
		case 1:
			RES(0);
			RES(nsm_state);
			break; /* STAT, MON */
		case 3:
		case 4:
			RES(nsm_state);
			break; /* UNMON(_ALL) */
		default:
			o -= 4;
			STATUS(3);
		}
		return o;
	}
	STATUS(1); /* PROG_UNAVAIL */
	return o;
}

static int listen_on(uint16_t port, uint16_t *bound)
{
	struct sockaddr_in sa = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		/* The guest's is reached by port forwarding. */
		.sin_addr.s_addr = htonl(INADDR_ANY)
	};
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
	uint16_t port = 111, bound;
	const char *ready = NULL;
	int lfd[1] = { -1 }, nl = 1, opt, statd = 0;

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
		map_set(100024, 1, IPPROTO_TCP, bound);
		map_set(100024, 1, IPPROTO_UDP, bound);
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
			pfd[n++] = (struct pollfd){ .fd = lfd[i],
						    .events = POLLIN };
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
