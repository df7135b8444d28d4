/*
 * rpc/rpc_int.h - internals shared by the files of rpc/ (not an API).
 *
 * server.c owns loops, listeners and connections; dispatch.c owns calls
 * (creation, program lookup, completion, reply encoding into output
 * buffers); callhdr.c encodes reply headers.  Everything here is touched
 * only by the owning loop's thread unless a comment says otherwise.
 */
#ifndef MAPFS_RPC_INT_H
#define MAPFS_RPC_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "rpc.h"

/* RFC 5531 section 11: the record mark's top bit flags the last fragment. */
#define RPC_LAST_FRAG 0x80000000u
#define RPC_FRAG_LEN_MASK 0x7fffffffu

/* Largest reply header: xid, REPLY, MSG_ACCEPTED, verf (2), PROG_MISMATCH
 * accept_stat, low, high = 8 words. */
#define RPC_REPLY_HDR_MAX 32

/* What kind of reply header to encode (RFC 5531 section 9, reply_body). */
struct rpc_reply_hdr {
	uint32_t xid;
	enum reply_stat rstat;  /* MSG_ACCEPTED or MSG_DENIED */
	enum accept_stat astat; /* MSG_ACCEPTED */
	enum reject_stat jstat; /* MSG_DENIED */
	enum auth_stat why;     /* MSG_DENIED, AUTH_ERROR */
	uint32_t low, high;     /* PROG_MISMATCH or RPC_MISMATCH */
};

/* Encode h into p (at least RPC_REPLY_HDR_MAX bytes); returns its length. */
size_t rpc_reply_hdr_encode(uint8_t *p, const struct rpc_reply_hdr *h);

/*
 * Zero-copy window for a big fragment: while the parser is inside a
 * fragment, the caller may write the fragment's next bytes straight into
 * the record buffer (*win, at most *winlen bytes) and then tell the parser
 * with rpc_recparser_commit(); a later rpc_recparser_feed() (possibly with
 * len 0) returns the finished record.  Returns false outside a fragment.
 */
bool rpc_recparser_window(struct rpc_recparser *p, uint8_t **win,
			  size_t *winlen);
void rpc_recparser_commit(struct rpc_recparser *p, size_t n);

/*
 * A pipe of a loop's pool (splice.c): the payload of a zero-copy reply
 * goes file -> pipe -> socket without passing through user memory.
 */
struct rpc_pipe {
	struct rpc_pipe *next; /* the loop's free list */
	int rfd, wfd;
	size_t cap; /* bytes it holds (F_SETPIPE_SZ) */
};

/*
 * One reply, ready for the wire: record mark + reply header + body in
 * data[], then optionally pipe_len payload bytes from a pipe and a tail of
 * XDR padding.  Made and freed only through outbuf.c; home is the loop
 * whose pool takes it back (NULL: plain malloc).
 */
struct rpc_outbuf {
	struct rpc_outbuf *next;
	struct rpc_loop *home;
	size_t cap;            /* bytes data[] can hold */
	size_t len, off;       /* bytes in data, bytes of them already sent */
	struct rpc_pipe *pipe; /* payload after data[], or NULL */
	size_t pipe_len;       /* payload bytes still in the pipe */
	uint8_t tail_len, tail_off; /* zero bytes after the payload */
	/* Aligned as malloc's: records are decoded in place (xdrmem only
	 * inlines from 4-byte aligned memory). */
	_Alignas(16) uint8_t data[];
};

/* Total bytes of ob on the wire that are not sent yet. */
static inline size_t rpc_outbuf_left(const struct rpc_outbuf *ob)
{
	return ob->len - ob->off + ob->pipe_len +
	       (size_t)(ob->tail_len - ob->tail_off);
}

/*
 * A buffer for a reply of `bytes` bytes in data[], from the pool of the
 * calling thread's loop when it has one of that size, else malloc'ed.
 * Fields other than data[] are set (empty, no pipe).  NULL without memory.
 */
struct rpc_outbuf *rpc_outbuf_new(size_t bytes);

/*
 * Free ob: back to its home pool when called on that loop's thread,
 * else free().  A pipe still attached is released (closed if not empty).
 */
void rpc_outbuf_free(struct rpc_outbuf *ob);

/* Free a stopped loop's pooled buffers. */
void rpc_outbuf_pool_free(struct rpc_loop *loop);

/*
 * splice.c: a pipe of loop's pool that holds at least cap bytes, empty;
 * NULL when the pool is exhausted or the system refuses such a pipe.
 * Loop thread only.
 */
struct rpc_pipe *rpc_pipe_get(struct rpc_loop *loop, size_t cap);

/*
 * Give a pipe back (loop thread only): pooled when known empty, else
 * checked, and closed if it still holds bytes.
 */
void rpc_pipe_put(struct rpc_loop *loop, struct rpc_pipe *p, bool empty);

/* Close and free a pipe that no pool takes back. */
void rpc_pipe_close(struct rpc_pipe *p);

/* Close every pooled pipe of a stopped loop. */
void rpc_pipe_pool_free(struct rpc_loop *loop);

/*
 * Move up to len bytes from p into socket fd without blocking.  Returns
 * bytes moved (> 0), -EAGAIN when the socket is full, or -errno.
 */
ssize_t rpc_pipe_send(int fd, struct rpc_pipe *p, size_t len, bool more);

/* Tag at the start of every object registered with a loop's epoll. */
enum rpc_ev_kind { RPC_EV_WAKE, RPC_EV_LISTEN, RPC_EV_CONN, RPC_EV_WATCH };
struct rpc_ev {
	enum rpc_ev_kind kind;
};

/* One rpc_server_listen(): the programs served on one address. */
struct rpc_listener {
	struct rpc_listener *next;
	const struct rpc_program *progs;
	size_t nprogs;
};

struct rpc_loop;

struct rpc_conn {
	struct rpc_ev ev;
	struct rpc_loop *loop;
	const struct rpc_listener *lis;
	int fd;
	int refs; /* open + outstanding calls + list memberships */
	bool closed;
	bool in_armed;  /* EPOLLIN in the epoll mask */
	bool out_armed; /* EPOLLOUT in the epoll mask */
	bool on_flush, on_resume;
	uint32_t inflight; /* calls handed to handlers, not yet finished */
	struct rpc_recparser rp;
	uint8_t *pend; /* bytes read but not parsed while at the cap */
	size_t pend_off, pend_len;
	struct rpc_outbuf *out_head, **out_tail;
	size_t out_bytes;
	uint32_t out_new; /* replies queued since the last flush */
	struct sockaddr_storage peer;
	/* Timeouts (loop clock, ms): last byte read; start of the record
	 * being read, while rec_open; last progress of the output queue. */
	int64_t last_rx_ms, rec_start_ms, last_tx_ms;
	bool rec_open;
	struct rpc_conn *prev, *next; /* loop's list of open conns */
	struct rpc_conn *flush_next, *resume_next;
};

struct rpc_call {
	struct rpc_call *next; /* free list or completion list */
	struct rpc_loop *loop;
	struct rpc_conn *conn;
	const struct rpc_program *prog;
	const struct rpc_proc *proc;
	struct rpc_callhdr hdr;
	uint8_t *rec; /* request record; args may point into it */
	void *args, *res;
	void *mem; /* args + res storage, kept across reuse */
	size_t memcap;
	struct rpc_outbuf *out;    /* reply, or NULL for a dropped call */
	struct rpc_drc_entry *drc; /* in-progress DRC entry, or NULL */
	struct rpc_outbuf *body;   /* rpc_call_body()'s buffer, or NULL */
	struct rpc_pipe *pipe;     /* rpc_call_pipe()'s pipe, or NULL */
	uint64_t start_ns;         /* arrival, for the latency histogram */
};

struct rpc_lsock {
	struct rpc_ev ev;
	struct rpc_lsock *next;
	const struct rpc_listener *lis;
	int fd;
};

struct rpc_watch {
	struct rpc_ev ev;
	struct rpc_watch *next;
	int fd;
	rpc_watch_fn fn, flush;
	void *arg;
};

struct rpc_loop {
	struct rpc_server *srv;
	int idx;
	int epfd;
	struct rpc_ev wake_ev;
	int wakefd;
	pthread_t thread;
	bool thread_started;

	/* Loop thread only. */
	uint8_t *rbuf;
	struct rpc_lsock *lsocks;
	struct rpc_watch *watches;
	struct rpc_conn *conns;
	struct rpc_conn *flush_head, *resume_head;
	struct rpc_call *free_calls;
	unsigned nfree;
	/* Pools (outbuf.c, splice.c): reply buffers of two sizes, pipes. */
	struct rpc_outbuf *ob_free[2];
	unsigned ob_nfree[2];
	struct rpc_pipe *pipes;
	unsigned npipes;    /* pipes that exist: pooled or in use */
	bool pipes_refused; /* the system would not size a pipe: stop asking */
	uint64_t inflight;  /* calls of this loop not yet finished */
	unsigned nout;      /* conns with queued output */
	bool stop_seen;
	int64_t now_ms;        /* CLOCK_MONOTONIC, read once per iteration */
	int64_t next_sweep_ms; /* next check of the connection timeouts */

	/* Completions from other threads: the slow path, on its own line. */
	_Alignas(64) pthread_mutex_t cq_lock;
	struct rpc_call *cq_head, **cq_tail;
};

/*
 * Open connections per client host (hosts.c); any thread.  take counts
 * one more for peer's address unless it holds limit already (0: no
 * limit): false then.  put gives one back.
 */
struct rpc_hosts;
int rpc_hosts_new(struct rpc_hosts **out);
void rpc_hosts_free(struct rpc_hosts *h);
bool rpc_hosts_take(struct rpc_hosts *h, const struct sockaddr_storage *peer,
		    uint32_t limit);
void rpc_hosts_put(struct rpc_hosts *h, const struct sockaddr_storage *peer);

struct rpc_server {
	struct rpc_config cfg;
	struct rpc_loop **loops;
	struct rpc_listener *listeners;
	struct rpc_hosts *hosts;
	atomic_uint nconns;
	atomic_llong conn_warn_ms; /* last "connection limit" warning */
	atomic_uint conn_refused;  /* refused since that warning */
	struct rpc_drc *drc;
	atomic_bool stopping;
	int64_t stop_deadline_ms; /* CLOCK_MONOTONIC; written before stopping */
	bool started;
};

/*
 * The duplicate-request cache (drc.c): the replies of non-idempotent
 * calls, shared by all loops, safe from any thread.
 */
struct rpc_drc;
struct rpc_drc_entry;

/* What makes a call a retransmission of another (see drc.c). */
struct rpc_drc_key {
	uint8_t addr[16]; /* client IP (IPv4 mapped), no port */
	uint32_t xid, prog, vers, proc;
	uint64_t arghash; /* rpc_drc_hash_args() of the argument bytes */
};

enum { RPC_DRC_MISS, RPC_DRC_BUSY, RPC_DRC_HIT };

/* A hash of a call's argument bytes (the first 256 and the length). */
uint64_t rpc_drc_hash_args(const void *data, size_t len);

/* Fill a key; the peer's port is ignored. */
void rpc_drc_key_init(struct rpc_drc_key *k,
		      const struct sockaddr_storage *peer, uint32_t xid,
		      uint32_t prog, uint32_t vers, uint32_t proc,
		      uint64_t arghash);

/*
 * A cache of at most max_entries entries and max_bytes bytes (entries and
 * replies together; at least 2 entries' worth per shard).  0 or -errno.
 */
int rpc_drc_new(size_t max_entries, size_t max_bytes, struct rpc_drc **out);

/* Free the cache; no call may hold an entry any more. */
void rpc_drc_free(struct rpc_drc *d);

/*
 * Look a call up.  Returns RPC_DRC_MISS: run the call; *ent is its new
 * in-progress entry, to be finished with rpc_drc_finish(), or NULL when
 * the cache is full of running calls (run it uncached).  RPC_DRC_BUSY:
 * the same call is still running; send nothing.  RPC_DRC_HIT: *replay is
 * a copy of the first reply, the caller's to send or free.  -ENOMEM when
 * no copy could be made.
 */
int rpc_drc_begin(struct rpc_drc *d, const struct rpc_drc_key *k,
		  struct rpc_drc_entry **ent, struct rpc_outbuf **replay);

/*
 * The call of e is finished with reply ob (copied; the caller keeps ob),
 * or with no reply (ob NULL): then the entry is forgotten, so that a
 * retransmission runs again.  Any thread; e must not be used after.
 */
void rpc_drc_finish(struct rpc_drc *d, struct rpc_drc_entry *e,
		    const struct rpc_outbuf *ob);

/* Entries and bytes in use now (tests, diagnostics). */
void rpc_drc_stats(struct rpc_drc *d, size_t *entries, size_t *bytes);

/* loop.c: the loop whose thread is running, or NULL on any other thread;
 * a loop's thread says so when it starts (loop) and ends (NULL). */
struct rpc_loop *rpc_loop_current(void);
void rpc_loop_enter(struct rpc_loop *loop);

/* dispatch.c: handle one complete record read on conn (takes rec). */
void rpc_dispatch(struct rpc_conn *conn, uint8_t *rec, size_t len);

/* dispatch.c: account a finished call on its loop (loop thread only). */
void rpc_call_complete(struct rpc_call *call);

/* dispatch.c: free the loop's cached call structs (loop stopped). */
void rpc_call_cache_free(struct rpc_loop *loop);

/* Bytes a loop reads from a socket at once (server.c, sock.c). */
#define RPC_RBUF_SIZE (64u << 10)

/* sock.c: Close c: its socket, its queued output, its place in the loop's list
 * (its last reference may go with it). */
void rpc_sock_close(struct rpc_conn *c);

/* sock.c: Parse the bytes parked while c could not take more calls. */
void rpc_sock_drain_pend(struct rpc_conn *c);

/* sock.c: What epoll said of c's socket: errors, room to write, bytes to read. */
void rpc_sock_event(struct rpc_conn *c, uint32_t events);

/* sock.c: Write as much queued output as the socket takes. */
void rpc_sock_flush(struct rpc_conn *c);

/* sock.c: Read the socket iff the conn may take calls and nothing is parked. */
void rpc_sock_update_in(struct rpc_conn *c);

/* conn.c: queue a reply on conn (loop thread; takes ob). */
void rpc_conn_queue(struct rpc_conn *conn, struct rpc_outbuf *ob);

/* conn.c: the conn may read again (a call finished); loop thread. */
void rpc_conn_kick(struct rpc_conn *conn);

/* conn.c: drop a reference taken by a call (loop thread). */
void rpc_conn_unref(struct rpc_conn *conn);

/* Whether c may read more calls now (not closed, the loop not stopping,
 * under its bounds of calls in flight and bytes queued).  Inline: the
 * loop asks it for every record it reads. */
static inline bool rpc_conn_can_read(const struct rpc_conn *c)
{
	const struct rpc_server *srv = c->loop->srv;

	return !c->closed && !c->loop->stop_seen &&
	       c->inflight < srv->cfg.max_inflight &&
	       c->out_bytes < 2 * srv->cfg.max_record;
}

/* loop.c: append call to loop's completion list and wake it (any
 * thread). */
void rpc_loop_post(struct rpc_loop *loop, struct rpc_call *call);

#endif
