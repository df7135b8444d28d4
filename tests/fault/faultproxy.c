/*
 * tests/fault/faultproxy.c - a TCP fault proxy for the tests: it sits
 * between the gateway and an S3 server on 127.0.0.1 and breaks the
 * traffic on command, so the tests can check that no fault of the network
 * or of the server loses or corrupts a byte.
 *
 *   faultproxy --target PORT [--mode "MODE [ARG]"] [--seed N] [--raw]
 *
 * --raw: the traffic is not HTTP (PostgreSQL's protocol): no message is
 * parsed, every read is forwarded as it comes (the reset, stall and
 * slow modes work on reads).
 *
 * It listens on two free 127.0.0.1 ports and prints one line on stdout,
 * "faultproxy port=P control=C", once both are open.  Connections to P
 * are forwarded to 127.0.0.1:PORT.  The control port takes one command a
 * line and answers one line, "ok ..." or "err ...":
 *
 *   mode pass            forward untouched
 *   mode reset P         after each read (either way, at most CHUNK
 *                        bytes), with probability P: drop what was read
 *                        and reset both sides (SO_LINGER 0, then close)
 *   mode stall [S]       move no byte (connections are still accepted);
 *                        after S seconds, if given, back to the mode before
 *   mode 503 P           answer a request, with probability P, with a full
 *                        HTTP 503 SlowDown instead of forwarding it
 *   mode truncate P      with probability P, forward a response's headers
 *                        and part of its body, then close both sides
 *   mode slow BPS        forward at most BPS bytes/s each way, per
 *                        connection
 *   seed N               restart the random sequence (repeatable runs)
 *   stats                "ok mode=M conns=N requests=N injected=N":
 *                        faults injected, reads cut short by slow mode
 *                        included
 *   quit                 exit
 *
 * --mode sets the mode at start, in the same words.  Requests and
 * responses are parsed only as far as needed to find their boundaries
 * (Content-Length, or the chunks of a chunked response, which is never
 * cut: radosgw sends its listings so, and a connection that went raw
 * after one could no longer have its later answers cut); a chunked
 * request, or a response with no length, is forwarded raw to the end of
 * its connection.  A 503 for a request with
 * "Expect: 100-continue" goes instead of the 100 and the connection is
 * closed after it, since the client will not send the body; any other
 * refused request has its body read and dropped, then gets its 503 on a
 * connection that stays open.
 *
 * One process, one poll() loop.  It exits on SIGTERM, on "quit", and when
 * its parent (the test) dies.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 256
#define MAX_CTL 8
#define CHUNK 16384        /* one read: also the grain of reset points */
#define HDR_MAX 65536      /* longest message head we parse */
#define OUT_HIGH (1 << 20) /* stop reading a side whose peer has this queued */
#define METHODS_MAX 32     /* requests forwarded and not yet answered */
#define DRAIN_MS 2000      /* lingering close: read and drop this long */

enum mode { M_PASS, M_RESET, M_STALL, M_503, M_TRUNCATE, M_SLOW };

static const char *const mode_names[] = { "pass", "reset",    "stall",
					  "503",  "truncate", "slow" };

struct buf {
	char *p;
	size_t len, cap;
};

enum req_state { RQ_HEAD, RQ_BODY, RQ_DROP, RQ_RAW };
enum resp_state {
	RS_HEAD,
	RS_BODY,
	RS_RAW,
	RS_CUT,
	RS_CHUNK_SIZE,
	RS_CHUNK_DATA,
	RS_CHUNK_TRAILER
};

struct conn {
	bool used;
	int cfd, sfd;          /* client and server sockets; -1 = closed */
	struct buf to_s, to_c; /* bytes waiting to be written */
	struct buf rq, rs;     /* message heads being gathered */
	enum req_state rqs;
	enum resp_state rss;
	uint64_t rq_left, rs_left;    /* body bytes left of the current message
				      (of a chunk and its CRLF, chunked) */
	char methods[METHODS_MAX][8]; /* FIFO: what each response answers */
	int mfirst, mcount;
	bool close_after; /* close the client once to_c is written */
	bool draining;    /* written and shut down; reading to EOF */
	uint64_t drain_until;
	double tok_c, tok_s; /* slow mode: bytes we may read from each */
	uint64_t tok_ms;
};

struct proxy {
	int lfd, ctl_lfd, target_port;
	int ctl[MAX_CTL];
	struct buf ctl_in[MAX_CTL];
	struct conn conns[MAX_CONNS];
	enum mode mode, stall_prev;
	double p;             /* probability of reset, 503, truncate */
	double bps;           /* slow mode */
	uint64_t stall_until; /* 0: a stall without end */
	uint64_t rng;
	unsigned long nconns, nrequests, ninjected;
	bool quit;
	bool raw; /* --raw: not HTTP; every byte forwarded as it comes */
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* xorshift64*: the same seed gives the same faults for the same traffic. */
static double rnd01(struct proxy *px)
{
	uint64_t x = px->rng ? px->rng : 0x9e3779b97f4a7c15ull;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	px->rng = x;
	return (double)((x * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

static bool chance(struct proxy *px)
{
	return rnd01(px) < px->p;
}

static void buf_add(struct buf *b, const void *p, size_t n)
{
	if (!n)
		return; /* b->p may still be NULL: no memcpy to it */
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;

		while (cap < b->len + n)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (!b->p) {
			perror("faultproxy: realloc");
			exit(1);
		}
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void buf_drop(struct buf *b, size_t n)
{
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
}

static void buf_free(struct buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ---- connections -------------------------------------------------------- */

static void close_fd(int *fd, bool rst)
{
	if (*fd < 0)
		return;
	if (rst) {
		struct linger l = { .l_onoff = 1, .l_linger = 0 };

		setsockopt(*fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	}
	close(*fd);
	*fd = -1;
}

static void conn_free(struct conn *c, bool rst)
{
	close_fd(&c->cfd, rst);
	close_fd(&c->sfd, rst);
	buf_free(&c->to_s);
	buf_free(&c->to_c);
	buf_free(&c->rq);
	buf_free(&c->rs);
	memset(c, 0, sizeof(*c));
	c->cfd = c->sfd = -1;
}

/* The server side is of no more use: answer what is queued, then close. */
static void conn_finish(struct conn *c)
{
	close_fd(&c->sfd, false);
	buf_free(&c->to_s);
	c->close_after = true;
}

static void nonblock_nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void conn_accept(struct proxy *px)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)px->target_port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct conn *c = NULL;
	int cfd = accept4(px->lfd, NULL, NULL, SOCK_CLOEXEC), sfd;

	if (cfd < 0)
		return;
	for (int i = 0; i < MAX_CONNS; i++)
		if (!px->conns[i].used) {
			c = &px->conns[i];
			break;
		}
	sfd = c ? socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
	/* Loopback connects at once; a server that is down refuses at once. */
	if (sfd < 0 || connect(sfd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (sfd >= 0)
			close(sfd);
		close_fd(&cfd, true);
		return;
	}
	memset(c, 0, sizeof(*c));
	c->used = true;
	c->cfd = cfd;
	c->sfd = sfd;
	c->tok_ms = now_ms();
	if (px->raw) {
		c->rqs = RQ_RAW;
		c->rss = RS_RAW;
	}
	nonblock_nodelay(cfd);
	nonblock_nodelay(sfd);
	px->nconns++;
}

/* ---- HTTP heads --------------------------------------------------------- */

/* The end of the head ("\r\n\r\n" included) in b, or 0 if not all there. */
static size_t head_end(const struct buf *b)
{
	for (size_t i = 3; i < b->len; i++)
		if (b->p[i] == '\n' && b->p[i - 1] == '\r' &&
		    b->p[i - 2] == '\n' && b->p[i - 3] == '\r')
			return i + 1;
	return 0;
}

/* The value of header name in head[0, len) into out; true if present. */
static bool head_get(const char *head, size_t len, const char *name, char *out,
		     size_t cap)
{
	size_t nlen = strlen(name);
	const char *l = memchr(head, '\n', len), *end = head + len;

	while (l && ++l < end) {
		const char *eol = memchr(l, '\n', (size_t)(end - l));
		size_t n;

		if (!eol)
			break;
		if ((size_t)(eol - l) > nlen && l[nlen] == ':' &&
		    strncasecmp(l, name, nlen) == 0) {
			const char *v = l + nlen + 1;

			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			n = (size_t)(eol - v);
			while (n && (v[n - 1] == '\r' || v[n - 1] == ' '))
				n--;
			if (n >= cap)
				n = cap - 1;
			memcpy(out, v, n);
			out[n] = '\0';
			return true;
		}
		l = eol;
	}
	return false;
}

/* Content-Length into *len: 1 if there, 0 if absent, -1 if chunked. */
static int head_length(const char *head, size_t hlen, uint64_t *len)
{
	char v[64];

	if (head_get(head, hlen, "transfer-encoding", v, sizeof(v)) &&
	    strcasecmp(v, "identity") != 0)
		return -1;
	if (!head_get(head, hlen, "content-length", v, sizeof(v)))
		return 0;
	*len = strtoull(v, NULL, 10);
	return 1;
}

static void queue_503(struct conn *c, bool close)
{
	static const char body[] =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<Error><Code>SlowDown</Code><Message>Please reduce your "
		"request rate.</Message><RequestId>faultproxy</RequestId>"
		"</Error>\n";
	char head[256];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 503 Slow Down\r\n"
			 "Content-Type: application/xml\r\n"
			 "Content-Length: %zu\r\n"
			 "Retry-After: 1\r\n"
			 "Connection: %s\r\n\r\n",
			 sizeof(body) - 1, close ? "close" : "keep-alive");

	buf_add(&c->to_c, head, (size_t)n);
	buf_add(&c->to_c, body, sizeof(body) - 1);
	if (close)
		conn_finish(c);
}

/* A whole request head is at the start of c->rq (hlen bytes). */
static void req_head(struct proxy *px, struct conn *c, size_t hlen)
{
	const char *h = c->rq.p;
	char expect[64] = "";
	uint64_t body = 0;
	int how = head_length(h, hlen, &body);
	size_t m = strcspn(h, " \r\n");

	px->nrequests++;
	head_get(h, hlen, "expect", expect, sizeof(expect));
	if (px->mode == M_503 && chance(px)) {
		px->ninjected++;
		if (how < 0 || strcasecmp(expect, "100-continue") == 0) {
			queue_503(c, true);
			return;
		}
		c->rq_left = body;
		c->rqs = body ? RQ_DROP : RQ_HEAD;
		if (!body)
			queue_503(c, false);
		return;
	}
	if (c->mcount < METHODS_MAX) {
		char *slot =
			c->methods[(c->mfirst + c->mcount++) % METHODS_MAX];

		snprintf(slot, sizeof(c->methods[0]), "%.*s",
			 (int)(m < 7 ? m : 7), h);
	}
	buf_add(&c->to_s, h, hlen);
	c->rq_left = body;
	c->rqs = how < 0 ? RQ_RAW : body ? RQ_BODY : RQ_HEAD;
}

/* Bytes read from the client. */
static void req_feed(struct proxy *px, struct conn *c, const char *p, size_t n)
{
	while (n && c->sfd >= 0) {
		size_t take, hlen;

		switch (c->rqs) {
		case RQ_RAW:
			buf_add(&c->to_s, p, n);
			return;
		case RQ_BODY:
		case RQ_DROP:
			take = n < c->rq_left ? n : (size_t)c->rq_left;
			if (c->rqs == RQ_BODY)
				buf_add(&c->to_s, p, take);
			c->rq_left -= take;
			p += take;
			n -= take;
			if (!c->rq_left) {
				if (c->rqs == RQ_DROP)
					queue_503(c, false);
				c->rqs = RQ_HEAD;
			}
			break;
		case RQ_HEAD:
			buf_add(&c->rq, p, n);
			n = 0;
			while (c->rqs == RQ_HEAD && c->sfd >= 0 &&
			       (hlen = head_end(&c->rq))) {
				struct buf rest = { 0 };

				req_head(px, c, hlen);
				/* What follows the head goes through the
				 * state just entered. */
				buf_add(&rest, c->rq.p + hlen,
					c->rq.len - hlen);
				c->rq.len = 0;
				req_feed(px, c, rest.p ? rest.p : "", rest.len);
				buf_free(&rest);
			}
			if (c->rqs == RQ_HEAD && c->rq.len > HDR_MAX) {
				c->rqs = RQ_RAW;
				buf_add(&c->to_s, c->rq.p, c->rq.len);
				c->rq.len = 0;
			}
			return;
		}
	}
}

/* A whole response head is at the start of c->rs (hlen bytes). */
static void resp_head(struct proxy *px, struct conn *c, size_t hlen)
{
	const char *h = c->rs.p;
	const char *sp = memchr(h, ' ', hlen);
	int status = sp ? atoi(sp + 1) : 0;
	uint64_t body = 0;
	int how = head_length(h, hlen, &body);
	bool head_req = false;

	buf_add(&c->to_c, h, hlen);
	if (status >= 100 && status < 200)
		return; /* 100 Continue: the final answer is still to come */
	if (c->mcount) {
		head_req = strcmp(c->methods[c->mfirst], "HEAD") == 0;
		c->mfirst = (c->mfirst + 1) % METHODS_MAX;
		c->mcount--;
	}
	if (head_req || status == 204 || status == 304) {
		c->rss = RS_HEAD;
		return;
	}
	if (how < 0) {
		c->rss = RS_CHUNK_SIZE;
		return;
	}
	if (how == 0) {
		c->rss = RS_RAW;
		return;
	}
	if (body && px->mode == M_TRUNCATE && chance(px)) {
		px->ninjected++;
		c->rs_left = (uint64_t)(rnd01(px) * (double)body);
		c->rss = RS_CUT;
		return;
	}
	c->rs_left = body;
	c->rss = body ? RS_BODY : RS_HEAD;
}

/* Bytes read from the server. */
static void resp_feed(struct proxy *px, struct conn *c, const char *p, size_t n)
{
	while (n && c->sfd >= 0) {
		size_t take, hlen;

		switch (c->rss) {
		case RS_RAW:
			buf_add(&c->to_c, p, n);
			return;
		case RS_BODY:
		case RS_CUT:
			take = n < c->rs_left ? n : (size_t)c->rs_left;
			buf_add(&c->to_c, p, take);
			c->rs_left -= take;
			p += take;
			n -= take;
			if (c->rss == RS_CUT && !c->rs_left) {
				conn_finish(c);
				return;
			}
			if (!c->rs_left)
				c->rss = RS_HEAD;
			break;
		case RS_CHUNK_DATA:
			take = n < c->rs_left ? n : (size_t)c->rs_left;
			buf_add(&c->to_c, p, take);
			c->rs_left -= take;
			p += take;
			n -= take;
			if (!c->rs_left)
				c->rss = RS_CHUNK_SIZE;
			break;
		case RS_CHUNK_SIZE:
		case RS_CHUNK_TRAILER: {
			/* One line (a chunk's size, or a trailer line). */
			const char *nl = memchr(p, '\n', n);

			take = nl ? (size_t)(nl - p) + 1 : n;
			buf_add(&c->rs, p, take);
			buf_add(&c->to_c, p, take);
			p += take;
			n -= take;
			if (!nl) {
				if (c->rs.len > HDR_MAX) {
					c->rss = RS_RAW;
					c->rs.len = 0;
				}
				break;
			}
			if (c->rss == RS_CHUNK_TRAILER) {
				/* The empty line ends the message. */
				if (c->rs.len <= 2)
					c->rss = RS_HEAD;
			} else {
				buf_add(&c->rs, "", 1);
				c->rs_left = strtoull(c->rs.p, NULL, 16);
				c->rss = c->rs_left ? RS_CHUNK_DATA
						    : RS_CHUNK_TRAILER;
				if (c->rs_left)
					c->rs_left += 2; /* CRLF after it */
			}
			c->rs.len = 0;
			break;
		}
		case RS_HEAD:
			buf_add(&c->rs, p, n);
			n = 0;
			while (c->rss == RS_HEAD && c->sfd >= 0 &&
			       (hlen = head_end(&c->rs))) {
				struct buf rest = { 0 };

				resp_head(px, c, hlen);
				buf_add(&rest, c->rs.p + hlen,
					c->rs.len - hlen);
				c->rs.len = 0;
				resp_feed(px, c, rest.p ? rest.p : "",
					  rest.len);
				buf_free(&rest);
			}
			if (c->rss == RS_HEAD && c->rs.len > HDR_MAX) {
				c->rss = RS_RAW;
				buf_add(&c->to_c, c->rs.p, c->rs.len);
				c->rs.len = 0;
			}
			/* A cut at 0 bytes: cut right after the head. */
			if (c->rss == RS_CUT && !c->rs_left && c->sfd >= 0)
				conn_finish(c);
			return;
		}
	}
}

/* ---- moving bytes ------------------------------------------------------- */

static void slow_refill(struct proxy *px, struct conn *c, uint64_t now)
{
	double add = (double)(now - c->tok_ms) * px->bps / 1000.0;
	double cap = px->bps / 4 > 1 ? px->bps / 4 : 1;

	c->tok_c = c->tok_c + add > cap ? cap : c->tok_c + add;
	c->tok_s = c->tok_s + add > cap ? cap : c->tok_s + add;
	c->tok_ms = now;
}

/* How much may be read from one side now (slow mode spends tokens). */
static size_t read_allowance(const struct proxy *px, double tok)
{
	if (px->mode != M_SLOW)
		return CHUNK;
	if (tok < 1)
		return 0;
	return tok < CHUNK ? (size_t)tok : CHUNK;
}

/* Read from the client (from_client) or the server; false: c is gone. */
static bool conn_read(struct proxy *px, struct conn *c, bool from_client)
{
	char tmp[CHUNK];
	int fd = from_client ? c->cfd : c->sfd;
	size_t want = read_allowance(px, from_client ? c->tok_c : c->tok_s);
	ssize_t n;

	if (c->draining)
		want = sizeof(tmp);
	else if (want < CHUNK)
		px->ninjected++; /* slow mode held this read back */
	n = recv(fd, tmp, want, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (c->draining) {
		if (n <= 0) {
			conn_free(c, false);
			return false;
		}
		return true;
	}
	if (n > 0 && px->mode == M_RESET && chance(px)) {
		px->ninjected++;
		conn_free(c, true);
		return false;
	}
	if (n <= 0) {
		if (from_client || n < 0) {
			/* The client is gone (or a side failed): so is all. */
			conn_free(c, n < 0);
			return false;
		}
		conn_finish(c); /* the server closed: flush, then close */
		return true;
	}
	if (px->mode == M_SLOW)
		*(from_client ? &c->tok_c : &c->tok_s) -= (double)n;
	if (from_client)
		req_feed(px, c, tmp, (size_t)n);
	else
		resp_feed(px, c, tmp, (size_t)n);
	return true;
}

/* Write what is queued for the client (to_client) or the server. */
static void conn_write(struct conn *c, bool to_client)
{
	struct buf *b = to_client ? &c->to_c : &c->to_s;
	ssize_t n =
		send(to_client ? c->cfd : c->sfd, b->p, b->len, MSG_NOSIGNAL);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) {
		conn_free(c, true);
		return;
	}
	buf_drop(b, (size_t)n);
}

/* ---- control ------------------------------------------------------------ */

/* "MODE [ARG]": 0, or -1 with why in err. */
static int set_mode(struct proxy *px, const char *words, char *err, size_t cap)
{
	char name[16] = "";
	double arg = -1;
	int n = sscanf(words, "%15s %lf", name, &arg);
	int m;

	for (m = 0; m < (int)(sizeof(mode_names) / sizeof(mode_names[0])); m++)
		if (n >= 1 && strcmp(name, mode_names[m]) == 0)
			break;
	if (m == (int)(sizeof(mode_names) / sizeof(mode_names[0]))) {
		snprintf(err, cap, "unknown mode '%s'", name);
		return -1;
	}
	if ((m == M_RESET || m == M_503 || m == M_TRUNCATE) &&
	    (n < 2 || arg < 0 || arg > 1)) {
		snprintf(err, cap, "%s needs a probability 0..1", name);
		return -1;
	}
	if (m == M_SLOW && (n < 2 || arg < 1)) {
		snprintf(err, cap, "slow needs bytes/s >= 1");
		return -1;
	}
	if (m == M_STALL) {
		if (px->mode != M_STALL)
			px->stall_prev = px->mode;
		px->stall_until = n >= 2 && arg > 0
					  ? now_ms() + (uint64_t)(arg * 1000)
					  : 0;
	} else if (m == M_SLOW) {
		px->bps = arg;
		for (int i = 0; i < MAX_CONNS; i++) {
			px->conns[i].tok_c = px->conns[i].tok_s = 0;
			px->conns[i].tok_ms = now_ms();
		}
	} else if (m != M_PASS) {
		px->p = arg;
	}
	px->mode = (enum mode)m;
	return 0;
}

static void ctl_line(struct proxy *px, int i, char *line)
{
	char out[256], err[128];
	unsigned long long seed;

	if (strncmp(line, "mode ", 5) == 0) {
		if (set_mode(px, line + 5, err, sizeof(err)) == 0)
			snprintf(out, sizeof(out), "ok mode=%s\n",
				 mode_names[px->mode]);
		else
			snprintf(out, sizeof(out), "err %s\n", err);
	} else if (sscanf(line, "seed %llu", &seed) == 1) {
		px->rng = seed;
		snprintf(out, sizeof(out), "ok seed=%llu\n", seed);
	} else if (strcmp(line, "stats") == 0) {
		snprintf(out, sizeof(out),
			 "ok mode=%s conns=%lu requests=%lu injected=%lu\n",
			 mode_names[px->mode], px->nconns, px->nrequests,
			 px->ninjected);
	} else if (strcmp(line, "quit") == 0) {
		px->quit = true;
		snprintf(out, sizeof(out), "ok bye\n");
	} else {
		snprintf(out, sizeof(out), "err unknown command '%.64s'\n",
			 line);
	}
	/* A short line to a reader waiting for it: one blocking send. */
	if (send(px->ctl[i], out, strlen(out), MSG_NOSIGNAL) < 0) {
		close(px->ctl[i]);
		px->ctl[i] = -1;
	}
}

static void ctl_read(struct proxy *px, int i)
{
	char tmp[1024], *nl;
	ssize_t n = recv(px->ctl[i], tmp, sizeof(tmp), 0);

	if (n <= 0) {
		close(px->ctl[i]);
		px->ctl[i] = -1;
		px->ctl_in[i].len = 0;
		return;
	}
	buf_add(&px->ctl_in[i], tmp, (size_t)n);
	while (px->ctl[i] >= 0 &&
	       (nl = memchr(px->ctl_in[i].p, '\n', px->ctl_in[i].len))) {
		size_t len = (size_t)(nl - px->ctl_in[i].p);

		*nl = '\0';
		if (len && px->ctl_in[i].p[len - 1] == '\r')
			px->ctl_in[i].p[len - 1] = '\0';
		ctl_line(px, i, px->ctl_in[i].p);
		buf_drop(&px->ctl_in[i], len + 1);
	}
}

/* ---- the loop ----------------------------------------------------------- */

static int listen_any(int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		perror("faultproxy: listen");
		exit(1);
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

enum slot_kind { K_LISTEN, K_CTL_LISTEN, K_CTL, K_CLIENT, K_SERVER };

struct slot {
	enum slot_kind kind;
	int idx;
};

static void loop_once(struct proxy *px)
{
	struct pollfd pfd[2 + MAX_CTL + 2 * MAX_CONNS];
	struct slot sl[2 + MAX_CTL + 2 * MAX_CONNS];
	uint64_t now = now_ms();
	int n = 0, timeout = 1000;
	bool stalled;

	if (px->mode == M_STALL && px->stall_until && now >= px->stall_until)
		px->mode = px->stall_prev;
	stalled = px->mode == M_STALL;
	if (stalled && px->stall_until)
		timeout = (int)(px->stall_until - now);
	if (px->mode == M_SLOW)
		timeout = 20;
	pfd[n] = (struct pollfd){ .fd = px->lfd, .events = POLLIN };
	sl[n++] = (struct slot){ K_LISTEN, 0 };
	pfd[n] = (struct pollfd){ .fd = px->ctl_lfd, .events = POLLIN };
	sl[n++] = (struct slot){ K_CTL_LISTEN, 0 };
	for (int i = 0; i < MAX_CTL; i++)
		if (px->ctl[i] >= 0) {
			pfd[n] = (struct pollfd){ .fd = px->ctl[i],
						  .events = POLLIN };
			sl[n++] = (struct slot){ K_CTL, i };
		}
	for (int i = 0; i < MAX_CONNS; i++) {
		struct conn *c = &px->conns[i];
		short ce = 0, se = 0;

		if (!c->used)
			continue;
		if (c->draining && now >= c->drain_until) {
			conn_free(c, false);
			continue;
		}
		/* Lingering close: a reset would race our last answer to a
		 * client that is still sending. */
		if (c->close_after && !c->draining && !c->to_c.len) {
			shutdown(c->cfd, SHUT_WR);
			c->draining = true;
			c->drain_until = now + DRAIN_MS;
		}
		if (c->draining)
			timeout = timeout < 100 ? timeout : 100;
		if (px->mode == M_SLOW)
			slow_refill(px, c, now);
		if (c->draining) {
			ce = POLLIN;
		} else if (!stalled) {
			if (c->sfd >= 0 && !c->close_after &&
			    c->to_s.len < OUT_HIGH &&
			    read_allowance(px, c->tok_c))
				ce |= POLLIN;
			if (c->to_c.len)
				ce |= POLLOUT;
			if (c->sfd >= 0 && c->to_c.len < OUT_HIGH &&
			    read_allowance(px, c->tok_s))
				se |= POLLIN;
			if (c->sfd >= 0 && c->to_s.len)
				se |= POLLOUT;
		}
		if (ce) {
			pfd[n] = (struct pollfd){ .fd = c->cfd, .events = ce };
			sl[n++] = (struct slot){ K_CLIENT, i };
		}
		if (se) {
			pfd[n] = (struct pollfd){ .fd = c->sfd, .events = se };
			sl[n++] = (struct slot){ K_SERVER, i };
		}
	}
	if (poll(pfd, (nfds_t)n, timeout) <= 0)
		return;
	for (int k = 0; k < n; k++) {
		struct conn *c = &px->conns[sl[k].idx];
		short re = pfd[k].revents;
		bool client = sl[k].kind == K_CLIENT;

		if (!re)
			continue;
		switch (sl[k].kind) {
		case K_LISTEN:
			conn_accept(px);
			break;
		case K_CTL_LISTEN: {
			int fd = accept4(px->ctl_lfd, NULL, NULL, SOCK_CLOEXEC);
			int i;

			for (i = 0; fd >= 0 && i < MAX_CTL; i++)
				if (px->ctl[i] < 0) {
					px->ctl[i] = fd;
					break;
				}
			if (fd >= 0 && i == MAX_CTL)
				close(fd);
			break;
		}
		case K_CTL:
			if (px->ctl[sl[k].idx] >= 0)
				ctl_read(px, sl[k].idx);
			break;
		case K_CLIENT:
		case K_SERVER:
			/* An earlier slot of this pass may have closed c. */
			if (!c->used || pfd[k].fd != (client ? c->cfd : c->sfd))
				break;
			if ((re & (POLLIN | POLLHUP | POLLERR)) &&
			    !conn_read(px, c, client))
				break;
			if (c->used && (re & POLLOUT) &&
			    pfd[k].fd == (client ? c->cfd : c->sfd))
				conn_write(c, client);
			break;
		}
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: faultproxy --target PORT [--mode \"MODE "
			"[ARG]\"] [--seed N]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static struct proxy px;
	struct sigaction sa = { .sa_handler = on_signal };
	const char *mode = "pass";
	char err[128];
	int port, ctl_port;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--raw") == 0) {
			px.raw = true;
			continue;
		}
		if (i + 1 >= argc)
			usage();
		if (strcmp(argv[i], "--target") == 0)
			px.target_port = atoi(argv[++i]);
		else if (strcmp(argv[i], "--mode") == 0)
			mode = argv[++i];
		else if (strcmp(argv[i], "--seed") == 0)
			px.rng = strtoull(argv[++i], NULL, 10);
		else
			usage();
	}
	if (px.target_port <= 0 || px.target_port > 65535)
		usage();
	if (set_mode(&px, mode, err, sizeof(err)) != 0) {
		fprintf(stderr, "faultproxy: --mode: %s\n", err);
		return 2;
	}
	/* A test that dies must not leave its proxy behind. */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < MAX_CONNS; i++)
		px.conns[i].cfd = px.conns[i].sfd = -1;
	for (int i = 0; i < MAX_CTL; i++)
		px.ctl[i] = -1;
	px.lfd = listen_any(&port);
	px.ctl_lfd = listen_any(&ctl_port);
	printf("faultproxy port=%d control=%d\n", port, ctl_port);
	fflush(stdout);
	while (!px.quit && !stop_signal)
		loop_once(&px);
	for (int i = 0; i < MAX_CONNS; i++)
		if (px.conns[i].used)
			conn_free(&px.conns[i], false);
	for (int i = 0; i < MAX_CTL; i++) {
		if (px.ctl[i] >= 0)
			close(px.ctl[i]);
		buf_free(&px.ctl_in[i]);
	}
	close(px.lfd);
	close(px.ctl_lfd);
	return 0;
}
