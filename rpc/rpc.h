/*
 * rpc/rpc.h - the ONC RPC transport of mapfs-gw (RFC 5531 over TCP).
 *
 * The transport owns sockets, per-core event loops, record marking, call and
 * reply headers (with its own per-call xid), AUTH_SYS/AUTH_NONE decoding,
 * program dispatch and deferred replies.  It knows nothing of NFS: programs
 * are tables of procedures (struct rpc_program) registered by the layers
 * above.  libtirpc is used for XDR primitives and rpcbind registration only.
 *
 * Threading: a server runs N loops, one thread each.  A connection lives on
 * one loop for its life.  A procedure handler is called on the connection's
 * loop; it may finish the call inline or later from any thread with
 * rpc_call_done()/rpc_call_fail(): the reply is then handed back to the
 * owning loop, which writes it.  Replies may be sent in any order; each
 * carries its own call's xid.
 */
#ifndef MAPFS_RPC_H
#define MAPFS_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
/* By its full path: this header's own name shadows <rpc/rpc.h> under -I. */
#include <tirpc/rpc/rpc.h>

#define RPC_MAX_GIDS 16
#define RPC_MACHINE_MAX 255

/*
 * Procedure flags, read by dispatch, metrics and the duplicate-request
 * cache: a call of a procedure without IDEMPOTENT that is retransmitted
 * (same client IP, xid, program, version, procedure and argument bytes)
 * gets its first reply again instead of running twice, also after a
 * reconnect; a retransmission that arrives while the first is still
 * running gets no reply (the client retries).
 */
enum {
	RPC_PROC_IDEMPOTENT = 1u << 0,  /* a repeat is harmless: not cached */
	RPC_PROC_MAKES_WRITE = 1u << 1, /* changes state on the server */
	RPC_PROC_MAKES_IO = 1u << 2,    /* moves file data */
	RPC_PROC_AUTH_NONE_OK = 1u << 3 /* AUTH_NONE accepted (NULL procs) */
};

/* Decoded credential of a call (AUTH_SYS, or AUTH_NONE with flavor 0). */
struct rpc_cred {
	uint32_t flavor; /* AUTH_NONE (0) or AUTH_SYS (1) */
	uint32_t stamp;
	uint32_t uid, gid;
	uint32_t ngids;
	uint32_t gids[RPC_MAX_GIDS];
	char machine[RPC_MACHINE_MAX + 1];
};

struct rpc_call;
struct rpc_server;

/*
 * A procedure handler.  args was decoded by proc->decode into zeroed memory
 * of proc->args_size bytes; res is zeroed memory of proc->res_size bytes.
 * Both stay valid until the call is finished, and so does the request
 * record, so a hand-written decoder may point args into it (zero-copy
 * WRITE data).  The handler (or whoever it hands the call to) must finish
 * the call exactly once with rpc_call_done(), rpc_call_fail() or
 * rpc_call_drop().
 */
typedef void (*rpc_handler_fn)(struct rpc_call *call, void *args, void *res);

struct rpc_proc {
	const char *name;
	xdrproc_t decode; /* args decoder; NULL means xdr_void */
	size_t args_size;
	xdrproc_t encode; /* results encoder; NULL means xdr_void */
	size_t res_size;
	rpc_handler_fn handler; /* NULL: PROC_UNAVAIL */
	unsigned flags;
};

/* One version of one program: procedures 0..nprocs-1. */
struct rpc_program {
	const char *name;
	uint32_t prog;
	uint32_t vers;
	const struct rpc_proc *procs;
	uint32_t nprocs;
	void *ctx; /* handed to handlers via rpc_call_ctx() */
};

/*
 * Limits and timeouts.  A connection is closed when it is idle (no byte
 * read for idle_timeout_ms, nothing in flight, no reply queued), when a
 * record it started is not complete after record_timeout_ms of reading
 * (slowloris), or when its queued replies make no progress for
 * min(write_timeout_ms, idle_timeout_ms) (a client that stopped reading).
 * Timeouts are checked about once a second.  Over max_conns, or over
 * its host's limit, a new connection is accepted and closed at once.
 */
struct rpc_config {
	int nloops;            /* event loops (threads); 1..1024 */
	size_t max_record;     /* largest accepted RPC record, bytes;
				   0 = 1 MiB + 64 KiB */
	uint32_t max_inflight; /* outstanding calls per connection; 0 = 128 */
	uint32_t max_conns;    /* open connections per server, 0 = unlimited */
	/* Open connections one client address may hold: host_limit(ctx,
	 * peer, loop) when set (e.g. fewer for hosts no export admits; it
	 * runs on the accepting loop), else max_conns_per_host; 0 =
	 * unlimited. */
	uint32_t max_conns_per_host;
	uint32_t (*host_limit)(void *ctx, const struct sockaddr_storage *peer,
			       int loop);
	void *host_limit_ctx;
	uint32_t idle_timeout_ms;   /* 0 = never */
	uint32_t record_timeout_ms; /* 0 = 60 s */
	uint32_t write_timeout_ms;  /* 0 = 60 s */
	/* Duplicate-request cache bounds (0 = 32768 entries, 16 MiB): the
	 * replies of procedures without RPC_PROC_IDEMPOTENT. */
	size_t drc_entries, drc_bytes;
};

/*
 * Extra file descriptor watched by every loop's poller; lower layers
 * (e.g. the cache's io_uring rings) use this to complete work on the loop
 * that started it.  fn runs on loop `loop` whenever fd is readable.
 */
typedef void (*rpc_watch_fn)(void *arg, int loop);

/* Create a server (no threads yet).  Returns 0 or -errno. */
int rpc_server_new(const struct rpc_config *cfg, struct rpc_server **out);

/*
 * Listen on addr (port 0 picks a free port) for the given programs.  The
 * programs array must outlive the server.  *bound gets the real address.
 * Every loop accepts on this address (SO_REUSEPORT), so connections spread
 * over the loops without a shared accept lock.  A call for a program not
 * in progs gets PROG_UNAVAIL; for a version not in progs, PROG_MISMATCH
 * with the lowest and highest version of it in progs.  Call before
 * rpc_server_start() (-EBUSY after).  Returns 0 or -errno.
 */
int rpc_server_listen(struct rpc_server *srv, const struct sockaddr *addr,
		      socklen_t addrlen, const struct rpc_program *progs,
		      size_t nprogs, struct sockaddr_storage *bound);

/*
 * Watch fd (level-triggered, readable) on loop `loop` (0..nloops-1): fn
 * runs on that loop whenever fd is readable.  flush, if not NULL, runs on
 * that loop at the end of every iteration, after the handlers and before
 * the loop sleeps, and again after any replies it caused were sent: a
 * lower layer queues its work during the handlers and submits it there
 * in one batch (io_uring), finishing what is already complete at once.
 * The fd stays the caller's; close it only after rpc_server_free().  Call
 * before rpc_server_start() (-EBUSY after).  Returns 0 or -errno.
 */
int rpc_server_watch(struct rpc_server *srv, int loop, int fd, rpc_watch_fn fn,
		     rpc_watch_fn flush, void *arg);

/* Start the loop threads.  Returns 0 or -errno. */
int rpc_server_start(struct rpc_server *srv);

/*
 * Graceful stop: close listeners, stop reading requests, wait until calls
 * in flight are answered and their replies written (at most timeout_ms),
 * then close all connections and join the threads.  A call finished after
 * that has its reply dropped.  No-op on a server that is not running.
 */
void rpc_server_stop(struct rpc_server *srv, int timeout_ms);

/*
 * Free a stopped (or never started) server; a running one is stopped
 * first with no grace time.  Calls finished after the stop are freed here;
 * if a call is still unfinished, its loop's memory is deliberately leaked
 * (with a warning) so that the late rpc_call_done() stays safe.
 */
void rpc_server_free(struct rpc_server *srv);

/* Number of loops of the server. */
int rpc_server_nloops(const struct rpc_server *srv);

/*
 * A metrics collector (metrics_collector_add(rpc_server_collect, srv)):
 * mapfs_client_connections{host="ADDR"} for each client host with
 * connections open now.  Takes the hosts' lock for the walk.
 */
struct metrics_buf;
void rpc_server_collect(void *srv, struct metrics_buf *b);

/* Accessors for handlers; pointers stay valid until the call is finished. */
const struct rpc_cred *rpc_call_cred(const struct rpc_call *call);
const struct sockaddr_storage *rpc_call_peer(const struct rpc_call *call);
void *rpc_call_ctx(const struct rpc_call *call);
int rpc_call_loop(const struct rpc_call *call); /* loop index of the call */
uint32_t rpc_call_xid(const struct rpc_call *call);
uint32_t rpc_call_proc(const struct rpc_call *call);

/*
 * Finish a call successfully: res is encoded with proc->encode and sent
 * with the call's own xid; args and res are freed with xdr_free.  May be
 * called from any thread.  After this the call must not be touched.
 */
void rpc_call_done(struct rpc_call *call);

/*
 * Finish a call with an accept_stat error (GARBAGE_ARGS, SYSTEM_ERR, ...).
 * SUCCESS is sent as SYSTEM_ERR (there are no results); PROG_MISMATCH
 * carries the call's own version as low and high.  Same threading and
 * ownership rules as rpc_call_done().
 */
void rpc_call_fail(struct rpc_call *call, enum accept_stat stat);

/*
 * Replies built by the handler, without an encode pass or a copy of the
 * payload (READ, and fixed-size hot replies).
 *
 * rpc_call_body() returns room for cap bytes of encoded results (XDR,
 * after the reply header the transport adds), owned by the call until it
 * is finished; NULL without memory, or if an earlier call asked for less.
 * rpc_call_done_body() sends its first len bytes as the results.
 *
 * rpc_call_pipe() gives an IDEMPOTENT procedure's handler, on the call's
 * loop, the write end of an empty pipe that takes cap bytes of
 * page-aligned data (cap counted from the page start), owned by the call;
 * -EAGAIN when the loop has none to spare (use a body instead), -EINVAL
 * for another procedure or thread.  rpc_call_done_splice() sends the
 * first len bytes of the body, then the n bytes moved into the pipe, then
 * zero bytes up to a multiple of 4 (XDR padding of an opaque).
 *
 * All three finishers may run on any thread; finishing with
 * rpc_call_done()/fail()/drop() instead frees the body and the pipe.
 */
void *rpc_call_body(struct rpc_call *call, size_t cap);
/* rpc_call_body(), with body + head on a RPC_BODY_ALIGN boundary (O_DIRECT
 * reads straight into a reply); only as the call's first body. */
#define RPC_BODY_ALIGN 4096u
void *rpc_call_body_aligned(struct rpc_call *call, size_t head, size_t cap);
int rpc_call_pipe(struct rpc_call *call, size_t cap);
void rpc_call_done_body(struct rpc_call *call, size_t len);
void rpc_call_done_splice(struct rpc_call *call, size_t len, size_t n);

/*
 * Drop a call without any reply (e.g. a request the server chose to ignore).
 * Frees args and res like rpc_call_done(); may be called from any thread.
 */
void rpc_call_drop(struct rpc_call *call);

/*
 * Record marking (RFC 5531 section 11), exposed for tests and fuzzing.
 * A parser fed bytes in any split; returns complete records.
 */
struct rpc_recparser {
	size_t max_record;
	uint8_t *buf;    /* current record being assembled */
	size_t len, cap; /* bytes of the record so far */
	uint32_t frag_left;
	bool last_frag;
	bool in_header;
	uint8_t hdr[4];
	int hdr_have;
	bool in_record; /* a record has begun and is not complete yet */
};

void rpc_recparser_init(struct rpc_recparser *p, size_t max_record);
void rpc_recparser_free(struct rpc_recparser *p);

/*
 * Consume up to len bytes of data.  Returns the number of bytes consumed
 * (>= 0), stopping after the end of a record: then *rec and *reclen give
 * the complete record, which the caller now owns and frees with
 * rpc_record_free().
 * Returns -EMSGSIZE if a record exceeds max_record (connection must close).
 */
ssize_t rpc_recparser_feed(struct rpc_recparser *p, const uint8_t *data,
			   size_t len, uint8_t **rec, size_t *reclen);

/* Free a record rpc_recparser_feed() handed out (NULL is fine). */
void rpc_record_free(uint8_t *rec);

/* Call header, exposed for tests and fuzzing. */
struct rpc_callhdr {
	uint32_t xid, rpcvers, prog, vers, proc;
	struct rpc_cred cred;
	size_t body_off; /* offset of the procedure arguments in the record */
};

/*
 * Parse an RPC call header from a record.  Returns 0, or:
 *  -EPROTO   not a CALL message (ignore),
 *  -EBADMSG  truncated/garbage header (xid is set if it was read); the
 *            server sends no reply and keeps the connection,
 *  -EPROTONOSUPPORT  rpcvers != 2 (reply RPC_MISMATCH),
 *  -EACCES   bad credential or verifier (reply AUTH_ERROR AUTH_BADCRED):
 *            unknown flavor, body over 400 bytes, AUTH_NONE with a body,
 *            AUTH_SYS body malformed or not exactly its declared length,
 *            verifier not AUTH_NONE.
 */
int rpc_callhdr_parse(const uint8_t *rec, size_t len, struct rpc_callhdr *h);

/*
 * rpcbind registration: set prog/vers -> TCP port on 127.0.0.1's rpcbind
 * (port mapper v2 SET, which rpcbind also answers v3/v4 queries from),
 * replacing any old mapping of prog/vers.  Unset removes prog/vers (all
 * transports; removing nothing is success).  Never blocks long: returns
 * 0, or -ECONNREFUSED at once when no rpcbind runs, -ETIMEDOUT after a
 * few seconds if it does not answer, -EPROTO on an RPC error, -EPERM if
 * rpcbind refuses the mapping.
 */
int rpc_rpcbind_set(uint32_t prog, uint32_t vers, uint16_t port);
int rpc_rpcbind_unset(uint32_t prog, uint32_t vers);

#endif
