/*
 * rpc/server.c - listeners, per-core epoll loops, connections and their
 * output queues (a connection's socket, reading and writing, is sock.c's).
 *
 * Share-nothing: each loop thread has its own epoll, its own listening
 * socket on the shared address (SO_REUSEPORT: the kernel spreads new
 * connections, no accept lock), its own connections, read buffer and call
 * cache.  Nothing on the path read -> decode -> handler -> inline reply ->
 * write takes a lock.  Only a call finished on another thread crosses
 * over, through the loop's mutex-protected completion list and eventfd.
 *
 * Connections are refcounted (loop thread only, so plain ints): the open
 * socket holds one reference, every outstanding call one, and membership
 * in the loop's flush or resume list one.  A reply for a closed connection
 * is freed instead of queued.
 *
 * Backpressure: a connection is read only while it has fewer than
 * max_inflight outstanding calls and less than 2 * max_record of queued
 * output.  Bytes already read past that point are parked (pend) and
 * parsed before the socket is read again, so records keep their order.
 *
 * Slow clients: the sockets are non-blocking, so a client that trickles
 * bytes or stops reading costs the others nothing but memory, and that is
 * bounded by closing it: once a second each loop sweeps its connections
 * for the timeouts of struct rpc_config (idle, record, write stall).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "metrics/metrics.h"
#include "rpc_int.h"

#define RPC_DEFAULT_MAX_RECORD ((size_t)(1u << 20) + (64u << 10))
#define RPC_DEFAULT_MAX_INFLIGHT 128
#define RPC_MAX_LOOPS 1024
#define RPC_EVENTS 64
#define RPC_LISTEN_BACKLOG 1024
/* Per wake-up cap, so one busy listener cannot starve the connections. */
#define RPC_ACCEPTS_PER_EVENT 32
#define RPC_SWEEP_MS 1000
#define RPC_DEFAULT_RECORD_TIMEOUT_MS 60000
#define RPC_DEFAULT_WRITE_TIMEOUT_MS 60000
#define RPC_DEFAULT_DRC_ENTRIES 32768
#define RPC_DEFAULT_DRC_BYTES ((size_t)16 << 20)
/* At most one "connection limit" warning per this long. */
#define RPC_CONN_WARN_MS 10000

/* For ms timeouts, twice per loop iteration: the coarse clock will do. */
static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define CONTAINER(ptr, type, member) \
	((type *)((char *)(ptr)-offsetof(type, member)))

/*
 * Count a connection refused over max_conns and warn, at most once per
 * RPC_CONN_WARN_MS over all loops: a flood of them must not flood the log.
 */
static void conn_refused(struct rpc_loop *loop)
{
	struct rpc_server *srv = loop->srv;
	long long last = atomic_load(&srv->conn_warn_ms);

	atomic_fetch_add(&srv->conn_refused, 1);
	metrics_inc(MET_CONN_REFUSED);
	if (loop->now_ms - last < RPC_CONN_WARN_MS ||
	    !atomic_compare_exchange_strong(&srv->conn_warn_ms, &last,
					    loop->now_ms))
		return;
	log_warn("rpc: connection limit of %u reached: %u connections "
		 "closed at once in the last %d s",
		 srv->cfg.max_conns, atomic_exchange(&srv->conn_refused, 0),
		 RPC_CONN_WARN_MS / 1000);
}

/*
 * Count a new connection against its host's limit: false (counted as
 * refused, logged per host) when the host holds its limit already.
 */
static bool host_admit(struct rpc_loop *loop,
		       const struct sockaddr_storage *peer)
{
	struct rpc_server *srv = loop->srv;
	uint32_t limit = srv->cfg.host_limit
				 ? srv->cfg.host_limit(srv->cfg.host_limit_ctx,
						       peer, loop->idx)
				 : srv->cfg.max_conns_per_host;
	char a[LOG_ADDR_MAX];

	if (rpc_hosts_take(srv->hosts, peer, limit))
		return true;
	metrics_inc(MET_CONN_REFUSED);
	log_host(LOG_LVL_WARN, peer,
		 "rpc: %s holds its limit of %u connections; a new one was "
		 "closed at once",
		 log_addr(peer, a), limit);
	return false;
}

static void lsock_accept(struct rpc_loop *loop, struct rpc_lsock *ls)
{
	struct rpc_server *srv = loop->srv;
	struct epoll_event ev = { .events = EPOLLIN };
	struct sockaddr_storage peer;
	socklen_t plen;
	struct rpc_conn *c;
	int fd, one = 1;

	for (int i = 0; i < RPC_ACCEPTS_PER_EVENT; i++) {
		plen = sizeof(peer);
		fd = accept4(ls->fd, (struct sockaddr *)&peer, &plen,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				log_warn("rpc: accept: %s", strerror(errno));
			return;
		}
		if (atomic_fetch_add(&srv->nconns, 1) >= srv->cfg.max_conns &&
		    srv->cfg.max_conns) {
			atomic_fetch_sub(&srv->nconns, 1);
			close(fd);
			conn_refused(loop);
			continue;
		}
		if (!host_admit(loop, &peer)) {
			atomic_fetch_sub(&srv->nconns, 1);
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = calloc(1, sizeof(*c));
		if (!c)
			goto out_close;
		c->ev.kind = RPC_EV_CONN;
		c->loop = loop;
		c->lis = ls->lis;
		c->fd = fd;
		c->refs = 1;
		c->out_tail = &c->out_head;
		c->peer = peer;
		c->last_rx_ms = c->last_tx_ms = loop->now_ms;
		rpc_recparser_init(&c->rp, srv->cfg.max_record);
		ev.data.ptr = &c->ev;
		if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev))
			goto out_free;
		c->in_armed = true;
		metrics_inc(MET_CONN_ACCEPTED);
		c->next = loop->conns;
		if (loop->conns)
			loop->conns->prev = c;
		loop->conns = c;
		continue;
out_free:
		free(c);
out_close:
		log_warn("rpc: cannot set up a connection: %s",
			 strerror(errno));
		atomic_fetch_sub(&srv->nconns, 1);
		rpc_hosts_put(srv->hosts, &peer);
		close(fd);
	}
}

static void loop_drain_completions(struct rpc_loop *loop)
{
	struct rpc_call *call, *next;

	pthread_mutex_lock(&loop->cq_lock);
	call = loop->cq_head;
	loop->cq_head = NULL;
	loop->cq_tail = &loop->cq_head;
	pthread_mutex_unlock(&loop->cq_lock);
	for (; call; call = next) {
		next = call->next;
		rpc_call_complete(call);
	}
}

static void loop_close_listeners(struct rpc_loop *loop)
{
	struct rpc_lsock *ls;

	while ((ls = loop->lsocks)) {
		loop->lsocks = ls->next;
		epoll_ctl(loop->epfd, EPOLL_CTL_DEL, ls->fd, NULL);
		close(ls->fd);
		free(ls);
	}
}

static void loop_wake(struct rpc_loop *loop)
{
	uint64_t v;

	/* Read before draining: a post after this read wakes us again. */
	if (read(loop->wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("rpc: eventfd read: %s", strerror(errno));
	loop_drain_completions(loop);
	if (!loop->stop_seen && atomic_load(&loop->srv->stopping)) {
		loop->stop_seen = true;
		loop_close_listeners(loop);
		for (struct rpc_conn *c = loop->conns, *next; c; c = next) {
			next = c->next;
			rpc_sock_update_in(c);
		}
	}
}

/* Why conn c should be closed now, or NULL (see struct rpc_config). */
static const char *conn_expired(const struct rpc_conn *c,
				const struct rpc_config *cfg, int64_t now)
{
	int64_t stall = cfg->write_timeout_ms;

	if (cfg->idle_timeout_ms && cfg->idle_timeout_ms < stall)
		stall = cfg->idle_timeout_ms;
	if (c->out_head && now - c->last_tx_ms >= stall)
		return "it does not read its replies";
	if (c->rec_open && c->in_armed &&
	    now - c->rec_start_ms >= cfg->record_timeout_ms)
		return "a record is not complete in time";
	if (cfg->idle_timeout_ms && !c->inflight && !c->out_head &&
	    now - c->last_rx_ms >= cfg->idle_timeout_ms)
		return "idle";
	return NULL;
}

static void loop_sweep(struct rpc_loop *loop)
{
	const struct rpc_config *cfg = &loop->srv->cfg;
	struct rpc_conn *c, *next;
	const char *why;

	for (c = loop->conns; c; c = next) {
		next = c->next;
		why = conn_expired(c, cfg, loop->now_ms);
		if (!why)
			continue;
		if (strcmp(why, "idle"))
			log_info("rpc: closing a connection: %s", why);
		else
			log_debug("rpc: closing an idle connection");
		rpc_sock_close(c);
	}
}

/* End of an iteration: parked input first (it may queue replies), then
 * one batched write per conn with new output. */
static void loop_run_lists(struct rpc_loop *loop)
{
	struct rpc_conn *c;

	/* Until both are empty: a flush that drains a queue puts its conn
	 * on the resume list, and left there it would wait for the next
	 * event, or the sweep a second later, before it reads again. */
	while (loop->resume_head || loop->flush_head) {
		while ((c = loop->resume_head)) {
			loop->resume_head = c->resume_next;
			c->on_resume = false;
			if (c->pend && rpc_conn_can_read(c))
				rpc_sock_drain_pend(c);
			rpc_sock_update_in(c);
			rpc_conn_unref(c);
		}
		while ((c = loop->flush_head)) {
			loop->flush_head = c->flush_next;
			c->on_flush = false;
			if (!c->closed && !c->out_armed && c->out_head)
				rpc_sock_flush(c);
			rpc_conn_unref(c);
		}
	}
}

/*
 * The end of an iteration: the watches' flushes (batched submissions,
 * completions already there) and the lists, until a flush found the
 * lists empty after it, so nothing a handler queued waits for an event
 * that will never come.
 */
static void loop_finish_iteration(struct rpc_loop *loop)
{
	for (;;) {
		for (struct rpc_watch *w = loop->watches; w; w = w->next)
			if (w->flush)
				w->flush(w->arg, loop->idx);
		if (!loop->resume_head && !loop->flush_head)
			return;
		loop_run_lists(loop);
	}
}

static void *loop_main(void *arg)
{
	struct rpc_loop *loop = arg;
	struct epoll_event evs[RPC_EVENTS];
	struct rpc_conn *c, *next;
	int n, timeout;

	rpc_loop_enter(loop);
	loop->now_ms = now_ms();
	loop->next_sweep_ms = loop->now_ms + RPC_SWEEP_MS;
	for (;;) {
		loop->now_ms = now_ms();
		if (loop->now_ms >= loop->next_sweep_ms) {
			loop_sweep(loop);
			loop->next_sweep_ms = loop->now_ms + RPC_SWEEP_MS;
		}
		timeout = (int)(loop->next_sweep_ms - loop->now_ms);
		if (loop->stop_seen) {
			int64_t left =
				loop->srv->stop_deadline_ms - loop->now_ms;

			if ((loop->inflight == 0 && loop->nout == 0) ||
			    left <= 0)
				break;
			if (left < timeout)
				timeout = (int)left;
		}
		n = epoll_wait(loop->epfd, evs, RPC_EVENTS, timeout);
		loop->now_ms = now_ms();
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_error("rpc: loop %d: epoll_wait: %s", loop->idx,
				  strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			struct rpc_ev *ev = evs[i].data.ptr;

			switch (ev->kind) {
			case RPC_EV_WAKE:
				loop_wake(loop);
				break;
			case RPC_EV_LISTEN:
				lsock_accept(
					loop,
					CONTAINER(ev, struct rpc_lsock, ev));
				break;
			case RPC_EV_CONN:
				rpc_sock_event(
					CONTAINER(ev, struct rpc_conn, ev),
					evs[i].events);
				break;
			case RPC_EV_WATCH: {
				struct rpc_watch *w =
					CONTAINER(ev, struct rpc_watch, ev);

				w->fn(w->arg, loop->idx);
				break;
			}
			}
		}
		loop_finish_iteration(loop);
	}
	loop_close_listeners(loop);
	for (c = loop->conns; c; c = next) {
		next = c->next;
		rpc_sock_close(c);
	}
	rpc_loop_enter(NULL);
	return NULL;
}

static int loop_new(struct rpc_server *srv, int idx, struct rpc_loop **out)
{
	struct epoll_event ev = { .events = EPOLLIN };
	size_t sz = (sizeof(struct rpc_loop) + 63) & ~(size_t)63;
	struct rpc_loop *loop = aligned_alloc(64, sz);
	int rc;

	if (!loop)
		return -ENOMEM;
	memset(loop, 0, sz);
	loop->srv = srv;
	loop->idx = idx;
	loop->wake_ev.kind = RPC_EV_WAKE;
	loop->cq_tail = &loop->cq_head;
	rc = pthread_mutex_init(&loop->cq_lock, NULL);
	if (rc)
		goto out_free;
	loop->rbuf = malloc(RPC_RBUF_SIZE);
	if (!loop->rbuf) {
		rc = ENOMEM;
		goto out_mutex;
	}
	loop->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (loop->epfd < 0) {
		rc = errno;
		goto out_rbuf;
	}
	loop->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (loop->wakefd < 0) {
		rc = errno;
		goto out_epoll;
	}
	ev.data.ptr = &loop->wake_ev;
	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->wakefd, &ev)) {
		rc = errno;
		goto out_wakefd;
	}
	*out = loop;
	return 0;

out_wakefd:
	close(loop->wakefd);
out_epoll:
	close(loop->epfd);
out_rbuf:
	free(loop->rbuf);
out_mutex:
	pthread_mutex_destroy(&loop->cq_lock);
out_free:
	free(loop);
	return -rc;
}

/*
 * Free a loop whose thread has ended.  Calls finished after the loop
 * stopped are still on the completion list; calls that are not finished
 * yet will touch the loop later, so then the loop is leaked on purpose
 * (returns false).
 */
static bool loop_free(struct rpc_loop *loop)
{
	struct rpc_watch *w;

	loop_drain_completions(loop);
	loop_close_listeners(loop);
	while ((w = loop->watches)) {
		loop->watches = w->next;
		free(w);
	}
	if (loop->inflight) {
		log_warn("rpc: loop %d: %llu calls unfinished at free; "
			 "leaking the loop they will complete on",
			 loop->idx, (unsigned long long)loop->inflight);
		return false;
	}
	rpc_call_cache_free(loop);
	rpc_outbuf_pool_free(loop);
	rpc_pipe_pool_free(loop);
	close(loop->wakefd);
	close(loop->epfd);
	free(loop->rbuf);
	pthread_mutex_destroy(&loop->cq_lock);
	free(loop);
	return true;
}

/* ---- server ----------------------------------------------------------- */

int rpc_server_new(const struct rpc_config *cfg, struct rpc_server **out)
{
	struct rpc_server *srv;
	int rc;

	if (!cfg || cfg->nloops < 1 || cfg->nloops > RPC_MAX_LOOPS)
		return -EINVAL;
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->cfg = *cfg;
	if (!srv->cfg.max_record)
		srv->cfg.max_record = RPC_DEFAULT_MAX_RECORD;
	if (srv->cfg.max_record > RPC_FRAG_LEN_MASK)
		srv->cfg.max_record = RPC_FRAG_LEN_MASK;
	if (!srv->cfg.max_inflight)
		srv->cfg.max_inflight = RPC_DEFAULT_MAX_INFLIGHT;
	if (!srv->cfg.record_timeout_ms)
		srv->cfg.record_timeout_ms = RPC_DEFAULT_RECORD_TIMEOUT_MS;
	if (!srv->cfg.write_timeout_ms)
		srv->cfg.write_timeout_ms = RPC_DEFAULT_WRITE_TIMEOUT_MS;
	if (!srv->cfg.drc_entries)
		srv->cfg.drc_entries = RPC_DEFAULT_DRC_ENTRIES;
	if (!srv->cfg.drc_bytes)
		srv->cfg.drc_bytes = RPC_DEFAULT_DRC_BYTES;
	atomic_init(&srv->conn_warn_ms, now_ms() - RPC_CONN_WARN_MS);
	rc = rpc_drc_new(srv->cfg.drc_entries, srv->cfg.drc_bytes, &srv->drc);
	if (rc) {
		free(srv);
		return rc;
	}
	srv->loops = calloc((size_t)cfg->nloops, sizeof(*srv->loops));
	if (!srv->loops || rpc_hosts_new(&srv->hosts)) {
		free(srv->loops);
		rpc_drc_free(srv->drc);
		free(srv);
		return -ENOMEM;
	}
	for (int i = 0; i < cfg->nloops; i++) {
		rc = loop_new(srv, i, &srv->loops[i]);
		if (rc) {
			rpc_server_free(srv);
			return rc;
		}
	}
	*out = srv;
	return 0;
}

/* One listening socket of a loop, bound to *addr. */
static int lsock_open(const struct sockaddr_storage *addr, socklen_t alen)
{
	int fd, one = 1, rc;

	fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
	    bind(fd, (const struct sockaddr *)addr, alen) ||
	    listen(fd, RPC_LISTEN_BACKLOG)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

int rpc_server_listen(struct rpc_server *srv, const struct sockaddr *addr,
		      socklen_t addrlen, const struct rpc_program *progs,
		      size_t nprogs, struct sockaddr_storage *bound)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct sockaddr_storage a;
	struct rpc_listener *lis;
	struct rpc_lsock *ls;
	socklen_t alen = addrlen;
	int i, fd, rc;

	if (srv->started)
		return -EBUSY;
	if (addrlen > sizeof(a) || !nprogs)
		return -EINVAL;
	lis = calloc(1, sizeof(*lis));
	if (!lis)
		return -ENOMEM;
	lis->progs = progs;
	lis->nprogs = nprogs;
	for (size_t p = 0; p < nprogs; p++)
		for (uint32_t k = 0; k < progs[p].nprocs; k++)
			metrics_rpc_register(progs[p].prog, progs[p].vers, k,
					     progs[p].name,
					     progs[p].procs[k].name);
	memset(&a, 0, sizeof(a));
	memcpy(&a, addr, addrlen);
	for (i = 0; i < srv->cfg.nloops; i++) {
		struct rpc_loop *loop = srv->loops[i];

		fd = lsock_open(&a, alen);
		if (fd < 0) {
			rc = fd;
			goto out_undo;
		}
		/* Port 0: the first bind picks the port, the rest share it. */
		if (i == 0) {
			alen = sizeof(a);
			if (getsockname(fd, (struct sockaddr *)&a, &alen)) {
				rc = -errno;
				close(fd);
				goto out_undo;
			}
		}
		ls = calloc(1, sizeof(*ls));
		if (!ls) {
			rc = -ENOMEM;
			close(fd);
			goto out_undo;
		}
		ls->ev.kind = RPC_EV_LISTEN;
		ls->lis = lis;
		ls->fd = fd;
		ev.data.ptr = &ls->ev;
		if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev)) {
			rc = -errno;
			close(fd);
			free(ls);
			goto out_undo;
		}
		ls->next = loop->lsocks;
		loop->lsocks = ls;
	}
	lis->next = srv->listeners;
	srv->listeners = lis;
	if (bound)
		*bound = a;
	return 0;

out_undo:
	/* This call's sockets are at the head of loops 0..i-1. */
	while (i-- > 0) {
		struct rpc_loop *loop = srv->loops[i];

		ls = loop->lsocks;
		loop->lsocks = ls->next;
		epoll_ctl(loop->epfd, EPOLL_CTL_DEL, ls->fd, NULL);
		close(ls->fd);
		free(ls);
	}
	free(lis);
	return rc;
}

int rpc_server_watch(struct rpc_server *srv, int loop, int fd, rpc_watch_fn fn,
		     rpc_watch_fn flush, void *arg)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct rpc_watch *w;

	if (srv->started)
		return -EBUSY;
	if (loop < 0 || loop >= srv->cfg.nloops || fd < 0 || !fn)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->ev.kind = RPC_EV_WATCH;
	w->fd = fd;
	w->fn = fn;
	w->flush = flush;
	w->arg = arg;
	ev.data.ptr = &w->ev;
	if (epoll_ctl(srv->loops[loop]->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		int rc = -errno;

		free(w);
		return rc;
	}
	w->next = srv->loops[loop]->watches;
	srv->loops[loop]->watches = w;
	return 0;
}

static void server_join(struct rpc_server *srv)
{
	static const uint64_t one = 1;

	atomic_store(&srv->stopping, true);
	for (int i = 0; i < srv->cfg.nloops; i++) {
		struct rpc_loop *loop = srv->loops[i];

		if (!loop->thread_started)
			continue;
		if (write(loop->wakefd, &one, sizeof(one)) < 0)
			log_warn("rpc: wake loop %d: %s", i, strerror(errno));
	}
	for (int i = 0; i < srv->cfg.nloops; i++) {
		struct rpc_loop *loop = srv->loops[i];

		if (!loop->thread_started)
			continue;
		pthread_join(loop->thread, NULL);
		loop->thread_started = false;
	}
}

int rpc_server_start(struct rpc_server *srv)
{
	char name[16];
	int rc;

	if (srv->started)
		return -EBUSY;
	for (int i = 0; i < srv->cfg.nloops; i++) {
		struct rpc_loop *loop = srv->loops[i];

		rc = pthread_create(&loop->thread, NULL, loop_main, loop);
		if (rc) {
			srv->stop_deadline_ms = now_ms();
			server_join(srv);
			return -rc;
		}
		loop->thread_started = true;
		/* i < RPC_MAX_LOOPS: fits the 15 characters a name may have. */
		snprintf(name, sizeof(name), "rpc-loop-%hu", (unsigned short)i);
		pthread_setname_np(loop->thread, name);
	}
	srv->started = true;
	return 0;
}

void rpc_server_stop(struct rpc_server *srv, int timeout_ms)
{
	if (!srv->started)
		return;
	/* The deadline is published by the release in atomic_store of
	 * stopping, which the loops read before using it. */
	srv->stop_deadline_ms = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	server_join(srv);
	srv->started = false;
}

void rpc_server_free(struct rpc_server *srv)
{
	struct rpc_listener *lis;
	bool leaked = false;

	if (!srv)
		return;
	rpc_server_stop(srv, 0);
	if (srv->loops) {
		for (int i = 0; i < srv->cfg.nloops; i++)
			if (srv->loops[i] && !loop_free(srv->loops[i]))
				leaked = true;
	}
	/* An unfinished call still holds its DRC entry (and its
	 * connection its host's count). */
	if (!leaked) {
		rpc_drc_free(srv->drc);
		rpc_hosts_free(srv->hosts);
	}
	while ((lis = srv->listeners)) {
		srv->listeners = lis->next;
		free(lis);
	}
	free(srv->loops);
	free(srv);
}

int rpc_server_nloops(const struct rpc_server *srv)
{
	return srv->cfg.nloops;
}
