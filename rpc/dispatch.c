/*
 * rpc/dispatch.c - calls: from a complete record to a handler, and from
 * rpc_call_done()/fail()/drop() back to the owning loop.
 *
 * Error replies follow RFC 5531 section 9.  A record whose header cannot
 * be read (truncated before the verifier ends, or a bad opaque_auth
 * length) gets no reply at all, as in the Linux kernel server: its xid
 * cannot be trusted, and the client's retransmit timer covers it.  Such a
 * record does not close the connection.  A REPLY message is ignored.
 *
 * Ownership: a call owns its request record and its args/res storage from
 * dispatch until it is finished; the reply buffer it produces is handed to
 * the connection's output queue.  Call structs are recycled through a
 * small per-loop cache (touched by the loop thread only).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "common/log.h"
#include "metrics/metrics.h"
#include "rpc_int.h"

/* Finished call structs kept per loop for reuse. */
#define RPC_CALL_CACHE 256

/* Reply header length of an accepted SUCCESS reply: 6 words. */
#define RPC_REPLY_HDR_SUCCESS 24

static struct rpc_call *call_get(struct rpc_loop *loop)
{
	struct rpc_call *call = loop->free_calls;

	if (call) {
		loop->free_calls = call->next;
		loop->nfree--;
		return call;
	}
	return calloc(1, sizeof(*call));
}

static void call_put(struct rpc_loop *loop, struct rpc_call *call)
{
	if (loop->nfree >= RPC_CALL_CACHE) {
		free(call->mem);
		free(call);
		return;
	}
	call->next = loop->free_calls;
	loop->free_calls = call;
	loop->nfree++;
}

void rpc_call_cache_free(struct rpc_loop *loop)
{
	struct rpc_call *call;

	while ((call = loop->free_calls)) {
		loop->free_calls = call->next;
		free(call->mem);
		free(call);
	}
	loop->nfree = 0;
}

/* A buffer for a reply of `bytes` bytes after the record mark. */
static struct rpc_outbuf *outbuf_new(size_t bytes)
{
	return rpc_outbuf_new(4 + bytes);
}

/*
 * Set the record mark: the reply is always one last fragment.  It starts
 * at data[off] (0, or what rpc_call_body_aligned() skipped).
 */
static void outbuf_seal(struct rpc_outbuf *ob, size_t bytes)
{
	uint32_t mark = htonl(RPC_LAST_FRAG | (uint32_t)bytes);

	memcpy(ob->data + ob->off, &mark, 4);
	ob->len = ob->off + 4 + bytes;
}

static struct rpc_outbuf *outbuf_hdr_only(const struct rpc_reply_hdr *h)
{
	struct rpc_outbuf *ob = outbuf_new(RPC_REPLY_HDR_MAX);

	if (ob)
		outbuf_seal(ob, rpc_reply_hdr_encode(ob->data + 4, h));
	return ob;
}

/* Answer a call that never reached a handler. */
static void reply_error(struct rpc_conn *conn, const struct rpc_reply_hdr *h)
{
	struct rpc_outbuf *ob = outbuf_hdr_only(h);

	if (!ob) {
		log_warn("rpc: no memory for an error reply (xid %08x)",
			 h->xid);
		return;
	}
	rpc_conn_queue(conn, ob);
}

/*
 * Find prog/vers among the listener's programs.  On a miss, *rh says why:
 * PROG_MISMATCH with the lowest and highest version of that program
 * served here, else PROG_UNAVAIL (section 9, accepted_reply).
 */
static const struct rpc_program *prog_find(const struct rpc_listener *lis,
					   const struct rpc_callhdr *h,
					   struct rpc_reply_hdr *rh)
{
	bool have_prog = false;

	rh->low = UINT32_MAX;
	rh->high = 0;
	for (size_t i = 0; i < lis->nprogs; i++) {
		const struct rpc_program *p = &lis->progs[i];

		if (p->prog != h->prog)
			continue;
		if (p->vers == h->vers)
			return p;
		have_prog = true;
		if (p->vers < rh->low)
			rh->low = p->vers;
		if (p->vers > rh->high)
			rh->high = p->vers;
	}
	rh->astat = have_prog ? PROG_MISMATCH : PROG_UNAVAIL;
	return NULL;
}

/* Zeroed args + res storage, reusing the call's buffer when it fits. */
static int call_mem(struct rpc_call *call, const struct rpc_proc *proc)
{
	size_t aoff = (proc->args_size + 15) & ~(size_t)15;
	size_t need = aoff + proc->res_size;

	if (!call->mem || need > call->memcap) {
		/* Never size 0: handlers get non-NULL args and res. */
		size_t cap = need < 64 ? 64 : need;
		void *m = malloc(cap);

		if (!m)
			return -ENOMEM;
		free(call->mem);
		call->mem = m;
		call->memcap = cap;
	}
	memset(call->mem, 0, need);
	call->args = call->mem;
	call->res = (uint8_t *)call->mem + aoff;
	return 0;
}

/*
 * Ask the duplicate-request cache about a non-idempotent call.  Returns
 * false if the call is to run (call->drc then holds its entry, or NULL to
 * run uncached), true if it was answered from the cache or is dropped
 * because its first transmission is still running (as the Linux server
 * does: the client's retransmit timer brings it back once it is done).
 */
static bool drc_check(struct rpc_conn *conn, struct rpc_call *call,
		      const uint8_t *rec, size_t len)
{
	const struct rpc_callhdr *h = &call->hdr;
	struct rpc_outbuf *ob;
	struct rpc_drc_key k;

	rpc_drc_key_init(
		&k, &conn->peer, h->xid, h->prog, h->vers, h->proc,
		rpc_drc_hash_args(rec + h->body_off, len - h->body_off));
	switch (rpc_drc_begin(conn->loop->srv->drc, &k, &call->drc, &ob)) {
	case RPC_DRC_MISS:
		return false;
	case RPC_DRC_HIT:
		log_debug("rpc: xid %08x proc %u: retransmission, replayed",
			  h->xid, h->proc);
		rpc_conn_queue(conn, ob);
		return true;
	case RPC_DRC_BUSY:
		log_debug("rpc: xid %08x proc %u: retransmission while in "
			  "progress, dropped",
			  h->xid, h->proc);
		return true;
	default:
		log_warn("rpc: no memory to replay xid %08x", h->xid);
		return true;
	}
}

void rpc_dispatch(struct rpc_conn *conn, uint8_t *rec, size_t len)
{
	struct rpc_loop *loop = conn->loop;
	struct rpc_reply_hdr rh = { .rstat = MSG_ACCEPTED };
	const struct rpc_program *prog;
	const struct rpc_proc *proc;
	struct rpc_call *call;
	bool_t ok = TRUE;
	XDR x;
	int rc;

	call = call_get(loop);
	if (!call) {
		rpc_record_free(rec);
		return;
	}
	rc = rpc_callhdr_parse(rec, len, &call->hdr);
	rh.xid = call->hdr.xid;
	switch (rc) {
	case 0:
		break;
	case -EPROTONOSUPPORT:
		rh.rstat = MSG_DENIED;
		rh.jstat = RPC_MISMATCH;
		rh.low = rh.high = RPC_MSG_VERSION;
		goto out_reply;
	case -EACCES:
		rh.rstat = MSG_DENIED;
		rh.jstat = AUTH_ERROR;
		rh.why = AUTH_BADCRED;
		goto out_reply;
	default:
		goto out_drop;
	}

	prog = prog_find(conn->lis, &call->hdr, &rh);
	if (!prog)
		goto out_reply;
	if (call->hdr.proc >= prog->nprocs ||
	    !prog->procs[call->hdr.proc].handler) {
		rh.astat = PROC_UNAVAIL;
		goto out_reply;
	}
	proc = &prog->procs[call->hdr.proc];
	if (call->hdr.cred.flavor == AUTH_NONE &&
	    !(proc->flags & RPC_PROC_AUTH_NONE_OK)) {
		rh.rstat = MSG_DENIED;
		rh.jstat = AUTH_ERROR;
		rh.why = AUTH_TOOWEAK;
		goto out_reply;
	}
	if (call_mem(call, proc)) {
		rh.astat = SYSTEM_ERR;
		goto out_reply;
	}
	if (proc->decode) {
		xdrmem_create(&x, (char *)rec + call->hdr.body_off,
			      (u_int)(len - call->hdr.body_off), XDR_DECODE);
		ok = proc->decode(&x, call->args);
		if (!ok) {
			xdr_free(proc->decode, call->args);
			rh.astat = GARBAGE_ARGS;
			goto out_reply;
		}
	}

	call->drc = NULL;
	call->body = NULL;
	call->pipe = NULL;
	if (!(proc->flags & RPC_PROC_IDEMPOTENT) &&
	    drc_check(conn, call, rec, len)) {
		if (proc->decode)
			xdr_free(proc->decode, call->args);
		goto out_drop;
	}
	call->loop = loop;
	call->conn = conn;
	call->prog = prog;
	call->proc = proc;
	call->rec = rec;
	call->out = NULL;
	conn->refs++;
	conn->inflight++;
	loop->inflight++;
	call->start_ns = metrics_now_ns();
	proc->handler(call, call->args, call->res);
	return;

out_reply:
	reply_error(conn, &rh);
out_drop:
	rpc_record_free(rec);
	call_put(loop, call);
}

/* Free what the call decoded and read; runs on the finishing thread. */
static void call_release(struct rpc_call *call)
{
	const struct rpc_proc *proc = call->proc;

	if (proc->decode)
		xdr_free(proc->decode, call->args);
	if (proc->encode)
		xdr_free(proc->encode, call->res);
	rpc_record_free(call->rec);
	call->rec = NULL;
	if (call->body)
		rpc_outbuf_free(call->body);
	call->body = NULL;
}

/* Hand the finished call to its loop: inline if we are on it. */
static void call_finish(struct rpc_call *call, struct rpc_outbuf *ob)
{
	/* Before the reply can reach the client, so that a retransmission
	 * it sends on seeing the reply finds the call done. */
	if (call->drc)
		rpc_drc_finish(call->loop->srv->drc, call->drc, ob);
	call->drc = NULL;
	call->out = ob;
	if (rpc_loop_current() == call->loop)
		rpc_call_complete(call);
	else
		rpc_loop_post(call->loop, call);
}

void rpc_call_complete(struct rpc_call *call)
{
	struct rpc_conn *conn = call->conn;
	struct rpc_loop *loop = call->loop;

	/* On the owning loop: the histogram shard is this loop's own. */
	metrics_rpc_call(call->prog->prog, call->prog->vers, call->hdr.proc,
			 metrics_now_ns() - call->start_ns);
	if (call->out)
		rpc_conn_queue(conn, call->out);
	call->out = NULL;
	/* Taken but not sent from (the call failed): may hold bytes. */
	if (call->pipe)
		rpc_pipe_put(loop, call->pipe, false);
	call->pipe = NULL;
	conn->inflight--;
	loop->inflight--;
	rpc_conn_kick(conn);
	rpc_conn_unref(conn);
	call_put(loop, call);
}

static struct rpc_outbuf *reply_accept_err(const struct rpc_call *call,
					   enum accept_stat stat)
{
	struct rpc_reply_hdr rh = { .xid = call->hdr.xid,
				    .rstat = MSG_ACCEPTED,
				    .astat = stat };

	/* SUCCESS carries results, which a failed call does not have. */
	if (stat == SUCCESS)
		rh.astat = SYSTEM_ERR;
	rh.low = rh.high = call->hdr.vers;
	return outbuf_hdr_only(&rh);
}

void rpc_call_done(struct rpc_call *call)
{
	const struct rpc_proc *proc = call->proc;
	struct rpc_reply_hdr rh = { .xid = call->hdr.xid,
				    .rstat = MSG_ACCEPTED,
				    .astat = SUCCESS };
	size_t body = proc->encode ? xdr_sizeof(proc->encode, call->res) : 0;
	struct rpc_outbuf *ob = outbuf_new(RPC_REPLY_HDR_SUCCESS + body);
	XDR x;

	if (ob) {
		rpc_reply_hdr_encode(ob->data + 4, &rh);
		xdrmem_create(&x, (char *)ob->data + 4 + RPC_REPLY_HDR_SUCCESS,
			      (u_int)body, XDR_ENCODE);
		if (proc->encode && !proc->encode(&x, call->res)) {
			log_warn("rpc: %s: cannot encode results",
				 proc->name ? proc->name : "?");
			rpc_outbuf_free(ob);
			ob = reply_accept_err(call, SYSTEM_ERR);
		} else {
			outbuf_seal(ob, RPC_REPLY_HDR_SUCCESS + body);
		}
	}
	if (!ob)
		log_warn("rpc: no memory for a reply (xid %08x)",
			 call->hdr.xid);
	call_release(call);
	call_finish(call, ob);
}

void rpc_call_fail(struct rpc_call *call, enum accept_stat stat)
{
	struct rpc_outbuf *ob = reply_accept_err(call, stat);

	if (!ob)
		log_warn("rpc: no memory for a reply (xid %08x)",
			 call->hdr.xid);
	call_release(call);
	call_finish(call, ob);
}

/* Where the results go in the call's body buffer. */
static uint8_t *body_results(const struct rpc_call *call)
{
	return call->body->data + call->body->off + 4 + RPC_REPLY_HDR_SUCCESS;
}

void *rpc_call_body(struct rpc_call *call, size_t cap)
{
	if (!call->body)
		call->body = outbuf_new(RPC_REPLY_HDR_SUCCESS + cap);
	else if (call->body->cap <
		 call->body->off + 4 + RPC_REPLY_HDR_SUCCESS + cap)
		return NULL;
	return call->body ? body_results(call) : NULL;
}

void *rpc_call_body_aligned(struct rpc_call *call, size_t head, size_t cap)
{
	struct rpc_outbuf *ob;
	uintptr_t at;

	if (call->body)
		return NULL;
	ob = outbuf_new(RPC_REPLY_HDR_SUCCESS + cap + RPC_BODY_ALIGN);
	if (!ob)
		return NULL;
	/* The reply starts late enough in data[] to put body+head on a
	 * boundary; the bytes skipped count as sent. */
	at = (uintptr_t)(ob->data + 4 + RPC_REPLY_HDR_SUCCESS + head);
	ob->off = (RPC_BODY_ALIGN - at % RPC_BODY_ALIGN) % RPC_BODY_ALIGN;
	call->body = ob;
	return body_results(call);
}

int rpc_call_pipe(struct rpc_call *call, size_t cap)
{
	if (!call->pipe) {
		if (!(call->proc->flags & RPC_PROC_IDEMPOTENT) ||
		    rpc_loop_current() != call->loop)
			return -EINVAL;
		call->pipe = rpc_pipe_get(call->loop, cap);
		if (!call->pipe)
			return -EAGAIN;
	}
	return call->pipe->cap >= cap ? call->pipe->wfd : -EAGAIN;
}

/* Seal the body as an accepted SUCCESS reply of len bytes (+ payload). */
static struct rpc_outbuf *body_seal(struct rpc_call *call, size_t len,
				    size_t payload)
{
	struct rpc_reply_hdr rh = { .xid = call->hdr.xid,
				    .rstat = MSG_ACCEPTED,
				    .astat = SUCCESS };
	struct rpc_outbuf *ob = call->body;

	call->body = NULL;
	rpc_reply_hdr_encode(ob->data + ob->off + 4, &rh);
	outbuf_seal(ob, RPC_REPLY_HDR_SUCCESS + len + payload);
	ob->len = ob->off + 4 + RPC_REPLY_HDR_SUCCESS + len;
	return ob;
}

void rpc_call_done_body(struct rpc_call *call, size_t len)
{
	struct rpc_outbuf *ob = body_seal(call, len, 0);

	call_release(call);
	call_finish(call, ob);
}

void rpc_call_done_splice(struct rpc_call *call, size_t len, size_t n)
{
	uint8_t pad = (uint8_t)((4 - (n & 3)) & 3);
	struct rpc_outbuf *ob = body_seal(call, len, n + pad);

	ob->pipe = call->pipe;
	ob->pipe_len = n;
	ob->tail_len = pad;
	call->pipe = NULL;
	call_release(call);
	call_finish(call, ob);
}

void rpc_call_drop(struct rpc_call *call)
{
	call_release(call);
	call_finish(call, NULL);
}

const struct rpc_cred *rpc_call_cred(const struct rpc_call *call)
{
	return &call->hdr.cred;
}

const struct sockaddr_storage *rpc_call_peer(const struct rpc_call *call)
{
	return &call->conn->peer;
}

void *rpc_call_ctx(const struct rpc_call *call)
{
	return call->prog->ctx;
}

int rpc_call_loop(const struct rpc_call *call)
{
	return call->loop->idx;
}

uint32_t rpc_call_xid(const struct rpc_call *call)
{
	return call->hdr.xid;
}

uint32_t rpc_call_proc(const struct rpc_call *call)
{
	return call->hdr.proc;
}
