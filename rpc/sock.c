/*
 * rpc/sock.c - a connection's socket, on its loop's thread: which events
 * it is armed for, reading records off it (at most RPC_READS_PER_EVENT
 * reads a wake-up; large fragments straight into the record; bytes read
 * past what the connection may take parked and parsed first next time),
 * handing each record to the dispatcher (dispatch.c), and writing the
 * queued replies in batches, one sendmsg each.  Below the loops
 * (server.c), which own the connections; above the dispatcher.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/log.h"
#include "metrics/metrics.h"
#include "rpc_int.h"

#define RPC_IOV_MAX 64
/* Per wake-up caps, so one busy socket cannot starve the others. */
#define RPC_READS_PER_EVENT 4
/* Fragments at least this big are read straight into the record. */
#define RPC_DIRECT_MIN (16u << 10)
/*
 * Replies queued while one read's calls are dispatched go out every this
 * many, not only at the end of the iteration: a pipelining client starts
 * on the first ones while the rest are being answered (LOOKUP at qd64:
 * +12%, the client busy 90% of the time instead of 75-80%).
 */
#define RPC_FLUSH_REPLIES 16

/* Make the epoll mask say in/out; closes the conn if epoll refuses. */
static void conn_arm(struct rpc_conn *c, bool in, bool out)
{
	struct epoll_event ev = { .data.ptr = &c->ev };

	if (c->closed || (in == c->in_armed && out == c->out_armed))
		return;
	ev.events = (in ? EPOLLIN : 0) | (out ? EPOLLOUT : 0);
	if (epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev)) {
		log_warn("rpc: epoll_ctl: %s", strerror(errno));
		rpc_sock_close(c);
		return;
	}
	/* The record timeout counts only time spent waiting for the
	 * client, not time its bytes waited on our backpressure. */
	if (in && !c->in_armed)
		c->rec_start_ms = c->loop->now_ms;
	c->in_armed = in;
	c->out_armed = out;
}

/* Read the socket iff the conn may take calls and nothing is parked. */
void rpc_sock_update_in(struct rpc_conn *c)
{
	conn_arm(c, rpc_conn_can_read(c) && !c->pend, c->out_armed);
}

void rpc_sock_close(struct rpc_conn *c)
{
	struct rpc_loop *loop = c->loop;
	struct rpc_outbuf *ob;

	if (c->closed)
		return;
	c->closed = true;
	metrics_inc(MET_CONN_CLOSED);
	epoll_ctl(loop->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	if (c->out_head)
		loop->nout--;
	while ((ob = c->out_head)) {
		c->out_head = ob->next;
		rpc_outbuf_free(ob);
	}
	c->out_tail = &c->out_head;
	c->out_bytes = 0;
	rpc_recparser_free(&c->rp);
	free(c->pend);
	c->pend = NULL;
	if (c->prev)
		c->prev->next = c->next;
	else
		loop->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	atomic_fetch_sub(&loop->srv->nconns, 1);
	rpc_hosts_put(loop->srv->hosts, &c->peer);
	rpc_conn_unref(c);
}

/* The head buffer is sent whole: free it. */
static void conn_pop(struct rpc_conn *c)
{
	struct rpc_outbuf *ob = c->out_head;

	c->out_head = ob->next;
	rpc_outbuf_free(ob);
}

/* n bytes of the buffers' data[] parts went out, from the head on. */
static void conn_sent(struct rpc_conn *c, size_t n)
{
	struct rpc_outbuf *ob;

	c->out_bytes -= n;
	while (n > 0) {
		ob = c->out_head;
		if (n < ob->len - ob->off) {
			ob->off += n;
			return;
		}
		n -= ob->len - ob->off;
		ob->off = ob->len;
		/* The iovec stopped here: the payload comes next. */
		if (ob->pipe_len || ob->tail_off < ob->tail_len)
			return;
		conn_pop(c);
	}
}

/*
 * One send of the head's unsent part: the data[] bytes of the buffers
 * up to the first that carries a payload (one sendmsg), or that payload
 * from its pipe, or the padding after it.  Returns bytes sent (> 0),
 * -EAGAIN when the socket is full, -errno on a dead connection.
 */
static ssize_t conn_send_some(struct rpc_conn *c)
{
	static const uint8_t zeros[4];
	struct iovec iov[RPC_IOV_MAX];
	struct msghdr msg = { .msg_iov = iov };
	struct rpc_outbuf *ob = c->out_head;
	bool more;
	ssize_t n;
	size_t k = 0;

	if (ob->off < ob->len) {
		for (; ob && k < RPC_IOV_MAX; ob = ob->next) {
			iov[k].iov_base = ob->data + ob->off;
			iov[k].iov_len = ob->len - ob->off;
			k++;
			if (ob->pipe_len || ob->tail_len)
				break;
		}
		msg.msg_iovlen = k;
		more = ob && ob->pipe_len;
		n = sendmsg(c->fd, &msg,
			    MSG_NOSIGNAL | MSG_DONTWAIT |
				    (more ? MSG_MORE : 0));
		if (n < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		conn_sent(c, (size_t)n);
		return n;
	}
	if (ob->pipe_len) {
		more = ob->tail_len || ob->next;
		n = rpc_pipe_send(c->fd, ob->pipe, ob->pipe_len, more);
		if (n < 0)
			return n;
		ob->pipe_len -= (size_t)n;
	} else {
		n = send(c->fd, zeros, (size_t)(ob->tail_len - ob->tail_off),
			 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		ob->tail_off += (uint8_t)n;
	}
	c->out_bytes -= (size_t)n;
	if (rpc_outbuf_left(ob) == 0)
		conn_pop(c);
	return n;
}

/* Write as much queued output as the socket takes. */
void rpc_sock_flush(struct rpc_conn *c)
{
	ssize_t n;

	c->out_new = 0;
	if (!c->out_head) {
		conn_arm(c, c->in_armed, false);
		return;
	}
	while (c->out_head) {
		n = conn_send_some(c);
		if (n == -EINTR)
			continue;
		if (n == -EAGAIN) {
			conn_arm(c, c->in_armed, true);
			return;
		}
		if (n < 0) {
			log_debug("rpc: send: %s", strerror((int)-n));
			rpc_sock_close(c);
			return;
		}
		c->last_tx_ms = c->loop->now_ms;
	}
	c->out_tail = &c->out_head;
	c->loop->nout--;
	conn_arm(c, c->in_armed, false);
	rpc_conn_kick(c);
}

/*
 * Parse and dispatch records from data while the conn may take calls.
 * Returns the bytes consumed; the conn may be closed on return.
 */
static size_t conn_consume(struct rpc_conn *c, const uint8_t *data, size_t n)
{
	size_t off = 0, rl;
	uint8_t *rec;
	ssize_t r;

	while (rpc_conn_can_read(c)) {
		r = rpc_recparser_feed(&c->rp, data + off, n - off, &rec, &rl);
		if (r < 0) {
			log_warn("rpc: closing connection: %s",
				 r == -EMSGSIZE ? "record too large"
						: strerror((int)-r));
			rpc_sock_close(c);
			return n;
		}
		off += (size_t)r;
		/* Without a record the parser has taken all of data. */
		if (!rec)
			break;
		c->rec_open = false;
		rpc_dispatch(c, rec, rl);
		if (c->out_new >= RPC_FLUSH_REPLIES && !c->out_armed &&
		    !c->closed)
			rpc_sock_flush(c);
	}
	if (c->rp.in_record && !c->rec_open) {
		c->rec_open = true;
		c->rec_start_ms = c->loop->now_ms;
	}
	return off;
}

/* Park unparsed bytes until the conn may take calls again. */
static void conn_park(struct rpc_conn *c, const uint8_t *data, size_t n)
{
	c->pend = malloc(n);
	if (!c->pend) {
		rpc_sock_close(c);
		return;
	}
	memcpy(c->pend, data, n);
	c->pend_off = 0;
	c->pend_len = n;
}

void rpc_sock_drain_pend(struct rpc_conn *c)
{
	size_t k = conn_consume(c, c->pend + c->pend_off,
				c->pend_len - c->pend_off);

	if (c->closed)
		return;
	c->pend_off += k;
	if (c->pend_off == c->pend_len) {
		free(c->pend);
		c->pend = NULL;
	}
}

static void conn_readable(struct rpc_conn *c)
{
	uint8_t *win;
	size_t wlen, k;
	ssize_t n;

	for (int i = 0; i < RPC_READS_PER_EVENT; i++) {
		if (!rpc_conn_can_read(c) || c->pend)
			break;
		if (rpc_recparser_window(&c->rp, &win, &wlen) &&
		    wlen >= RPC_DIRECT_MIN) {
			/* Big fragment (WRITE data): no copy via rbuf. */
			n = read(c->fd, win, wlen);
			if (n > 0) {
				c->last_rx_ms = c->loop->now_ms;
				rpc_recparser_commit(&c->rp, (size_t)n);
				conn_consume(c, c->loop->rbuf, 0);
				if (c->closed)
					return;
				if ((size_t)n < wlen)
					break;
				continue;
			}
		} else {
			wlen = RPC_RBUF_SIZE;
			n = read(c->fd, c->loop->rbuf, wlen);
			if (n > 0) {
				c->last_rx_ms = c->loop->now_ms;
				k = conn_consume(c, c->loop->rbuf, (size_t)n);
				if (c->closed)
					return;
				if (k < (size_t)n) {
					conn_park(c, c->loop->rbuf + k,
						  (size_t)n - k);
					if (c->closed)
						return;
				}
				if ((size_t)n < wlen)
					break;
				continue;
			}
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		/* EOF or a hard error: replies can no longer be delivered. */
		rpc_sock_close(c);
		return;
	}
	rpc_sock_update_in(c);
}

void rpc_sock_event(struct rpc_conn *c, uint32_t events)
{
	/* Held across the handlers: rpc_sock_close() may drop the last ref. */
	c->refs++;
	if (events & (EPOLLERR | EPOLLHUP))
		rpc_sock_close(c);
	if (!c->closed && (events & EPOLLOUT))
		rpc_sock_flush(c);
	if (!c->closed && (events & EPOLLIN))
		conn_readable(c);
	rpc_conn_unref(c);
}
