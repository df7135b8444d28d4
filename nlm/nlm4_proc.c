/*
 * nlm/nlm4_proc.c - the NLM v4 procedures (XNFS chapter 10) and their
 * dispatch table.
 *
 * One shape per procedure: decode -> handle to inode -> grace check ->
 * the lock table -> nlm4_stats.  The cookie of a call goes back in its
 * reply (moved from the arguments, so it is freed once).  The _MSG
 * procedures do the same work, answer the call with an empty reply and
 * send the result as the matching _RES call to the client's lockd.
 *
 * Linux's lockd over TCP uses the synchronous procedures; a blocked
 * request is granted with a synchronous GRANTED call to the client's
 * lockd (nlm/callback.c), and the client also polls with LOCK every 30 s
 * when that callback does not reach it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "nlm_int.h"

/* A granted request in flight to the client, to undo if it is refused. */
struct nlm_grant {
	struct nlm *n;
	struct nlm_host host;
	uint64_t ino;
	bool excl;
	uint64_t off, len;
	int32_t svid;
	uint32_t ohlen;
	char *caller;
	uint8_t oh[];
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool in_grace(const struct nlm *n)
{
	return n->grace_end_ns && now_ns() < n->grace_end_ns;
}

/*
 * The inode a handle names, for this caller: NFS's own checks (MAC,
 * export, a rule admitting the caller, its secure port, generation), so
 * a host refused by the exports cannot lock, test or unlock through a
 * leaked handle.  Locks are per inode whichever export the handle came
 * through.  0, -ESTALE, or -EACCES/-EPERM (refused).
 */
static int fh_ino(struct rpc_call *call, const nlm4_netobj *fh, uint64_t *ino)
{
	struct nlm *n = rpc_call_ctx(call);
	int rc = nfsd_fh_check(n->opts.nfsd, call, fh->nlm4_netobj_val,
			       fh->nlm4_netobj_len, ino);

	if (rc == -EACCES || rc == -EPERM) {
		char a[LOG_ADDR_MAX];

		log_host(LOG_LVL_WARN, rpc_call_peer(call),
			 "nlm: call from %s refused: %s",
			 log_addr(rpc_call_peer(call), a),
			 rc == -EPERM ? "source port is not below 1024"
				      : "no export rule admits it");
	}
	return rc == -EBADF ? -ESTALE : rc;
}

/* The lock's owner: the caller's address, name, svid and owner bytes. */
static void desc_of(struct rpc_call *call, const nlm4_lock *l, bool excl,
		    struct nlm_lockdesc *d)
{
	*d = (struct nlm_lockdesc){
		.owner = { .caller = l->caller_name ? l->caller_name : "",
			   .oh = l->oh.nlm4_netobj_val,
			   .ohlen = l->oh.nlm4_netobj_len,
			   .svid = l->svid },
		.excl = excl,
		.off = l->l_offset,
		.len = l->l_len
	};
	nlm_host_of(rpc_call_peer(call), &d->owner.host);
}

static void cookie_move(nlm4_netobj *to, nlm4_netobj *from)
{
	*to = *from;
	from->nlm4_netobj_len = 0;
	from->nlm4_netobj_val = NULL;
}

static nlm4_stats stat_of(int rc)
{
	switch (rc) {
	case 0:
		return NLM4_GRANTED;
	case -EAGAIN:
		return NLM4_DENIED;
	case -EINPROGRESS:
	case -EALREADY:
		return NLM4_BLOCKED;
	case -ESTALE:
		return NLM4_STALE_FH;
	case -ENOMEM:
	case -ENOLCK: /* the host's bound */
		return NLM4_DENIED_NOLOCKS;
	default:
		return NLM4_FAILED;
	}
}

/* One debug line per lock call: what clients really send. */
static void trace(const char *proc, const nlm4_lock *l, bool excl, bool block,
		  nlm4_stats st)
{
	log_debug("nlm: %s %s svid %d %s [%llu +%llu]%s -> %d", proc,
		  l->caller_name ? l->caller_name : "?", l->svid,
		  excl ? "excl" : "shared", (unsigned long long)l->l_offset,
		  (unsigned long long)l->l_len, block ? " block" : "", (int)st);
}

static void nlm_test(struct rpc_call *call, nlm4_testargs *a, nlm4_testres *r)
{
	struct nlm *n = rpc_call_ctx(call);
	struct nlm_holder h;
	struct nlm_lockdesc d;
	uint64_t ino;
	int rc;

	cookie_move(&r->cookie, &a->cookie);
	if ((rc = fh_ino(call, &a->alock.fh, &ino))) {
		r->test_stat.stat = stat_of(rc);
		return;
	}
	if (in_grace(n)) {
		r->test_stat.stat = NLM4_DENIED_GRACE_PERIOD;
		return;
	}
	desc_of(call, &a->alock, a->exclusive, &d);
	rc = nlm_tab_test(n, ino, &d, &h);
	r->test_stat.stat = stat_of(rc);
	if (rc != -EAGAIN)
		return;
	nlm4_holder *o = &r->test_stat.nlm4_testrply_u.holder;

	o->exclusive = h.excl;
	o->svid = h.svid;
	o->l_offset = h.off;
	o->l_len = h.len;
	o->oh.nlm4_netobj_val = malloc(h.ohlen ? h.ohlen : 1);
	if (!o->oh.nlm4_netobj_val) {
		r->test_stat.stat = NLM4_DENIED_NOLOCKS;
		return;
	}
	memcpy(o->oh.nlm4_netobj_val, h.oh, h.ohlen);
	o->oh.nlm4_netobj_len = h.ohlen;
}

/* LOCK and NM_LOCK (monitor false: the client runs no NSM). */
static void nlm_lock(struct rpc_call *call, nlm4_lockargs *a, nlm4_res *r,
		     bool monitor)
{
	struct nlm *n = rpc_call_ctx(call);
	struct nlm_block *b = NULL;
	struct nlm_lockdesc d;
	uint64_t ino;
	int rc;

	cookie_move(&r->cookie, &a->cookie);
	if ((rc = fh_ino(call, &a->alock.fh, &ino))) {
		r->stat = stat_of(rc);
		return;
	}
	if (in_grace(n) && !a->reclaim) {
		r->stat = NLM4_DENIED_GRACE_PERIOD;
		return;
	}
	if (monitor && a->alock.caller_name &&
	    (rc = nsm_client_note(n, a->alock.caller_name,
				  rpc_call_peer(call)))) {
		r->stat = stat_of(rc);
		return;
	}
	desc_of(call, &a->alock, a->exclusive, &d);
	if (a->block && monitor) {
		b = malloc(sizeof(*b));
		if (!b) {
			r->stat = NLM4_DENIED_NOLOCKS;
			return;
		}
		b->peer = *rpc_call_peer(call);
		b->fhlen = a->alock.fh.nlm4_netobj_len;
		memcpy(b->fh, a->alock.fh.nlm4_netobj_val, b->fhlen);
	}
	rc = nlm_tab_lock(n, ino, &d, b);
	if (rc != -EINPROGRESS)
		free(b);
	r->stat = stat_of(rc);
}

static void nlm_cancel(struct rpc_call *call, nlm4_cancargs *a, nlm4_res *r)
{
	struct nlm *n = rpc_call_ctx(call);
	struct nlm_lockdesc d;
	uint64_t ino;
	int rc;

	cookie_move(&r->cookie, &a->cookie);
	if ((rc = fh_ino(call, &a->alock.fh, &ino))) {
		r->stat = stat_of(rc);
		return;
	}
	desc_of(call, &a->alock, a->exclusive, &d);
	/* As knfsd: DENIED when no such request was waiting. */
	r->stat = nlm_tab_cancel(n, ino, &d) ? NLM4_DENIED : NLM4_GRANTED;
}

static void nlm_unlock(struct rpc_call *call, nlm4_unlockargs *a, nlm4_res *r)
{
	struct nlm *n = rpc_call_ctx(call);
	struct nlm_lockdesc d;
	uint64_t ino;
	int rc;

	cookie_move(&r->cookie, &a->cookie);
	if ((rc = fh_ino(call, &a->alock.fh, &ino))) {
		r->stat = stat_of(rc);
		return;
	}
	desc_of(call, &a->alock, false, &d);
	r->stat = stat_of(nlm_tab_unlock(n, ino, &d));
}

static void proc_null(struct rpc_call *call, void *args, void *res)
{
	(void)args;
	(void)res;
	rpc_call_done(call);
}

static void proc_test(struct rpc_call *call, void *args, void *res)
{
	nlm4_testargs *a = args;

	nlm_test(call, args, res);
	trace("TEST", &a->alock, a->exclusive, false,
	      ((nlm4_testres *)res)->test_stat.stat);
	rpc_call_done(call);
}

static void proc_lock(struct rpc_call *call, void *args, void *res)
{
	nlm4_lockargs *a = args;

	nlm_lock(call, args, res, true);
	trace(a->reclaim ? "LOCK(reclaim)" : "LOCK", &a->alock, a->exclusive,
	      a->block, ((nlm4_res *)res)->stat);
	rpc_call_done(call);
}

static void proc_nm_lock(struct rpc_call *call, void *args, void *res)
{
	nlm_lock(call, args, res, false);
	rpc_call_done(call);
}

static void proc_cancel(struct rpc_call *call, void *args, void *res)
{
	nlm4_cancargs *a = args;

	nlm_cancel(call, args, res);
	trace("CANCEL", &a->alock, a->exclusive, a->block,
	      ((nlm4_res *)res)->stat);
	rpc_call_done(call);
}

static void proc_unlock(struct rpc_call *call, void *args, void *res)
{
	nlm4_unlockargs *a = args;

	nlm_unlock(call, args, res);
	trace("UNLOCK", &a->alock, false, false, ((nlm4_res *)res)->stat);
	rpc_call_done(call);
}

/* Send a _MSG call's result to the caller's lockd as proc (a _RES). */
static void msg_reply(struct rpc_call *call, uint32_t proc, xdrproc_t enc,
		      void *res)
{
	struct nlm *n = rpc_call_ctx(call);
	struct nlm_cb_call c = { .addr = *rpc_call_peer(call),
				 .prog = NLM_PROG,
				 .vers = NLM_VERS4,
				 .proc = proc,
				 .encode = enc,
				 .args = res,
				 .tries = 3 };

	if (nlm_cb_queue(n->cb, &c))
		log_warn("nlm: could not queue a _RES callback");
	xdr_free(enc, res);
	rpc_call_done(call);
}

static void proc_test_msg(struct rpc_call *call, void *args, void *res)
{
	nlm4_testres r = { 0 };

	(void)res;
	nlm_test(call, args, &r);
	msg_reply(call, NLMPROC4_TEST_RES, (xdrproc_t)xdr_nlm4_testres, &r);
}

static void proc_lock_msg(struct rpc_call *call, void *args, void *res)
{
	nlm4_res r = { 0 };

	(void)res;
	nlm_lock(call, args, &r, true);
	msg_reply(call, NLMPROC4_LOCK_RES, (xdrproc_t)xdr_nlm4_res, &r);
}

static void proc_cancel_msg(struct rpc_call *call, void *args, void *res)
{
	nlm4_res r = { 0 };

	(void)res;
	nlm_cancel(call, args, &r);
	msg_reply(call, NLMPROC4_CANCEL_RES, (xdrproc_t)xdr_nlm4_res, &r);
}

static void proc_unlock_msg(struct rpc_call *call, void *args, void *res)
{
	nlm4_res r = { 0 };

	(void)res;
	nlm_unlock(call, args, &r);
	msg_reply(call, NLMPROC4_UNLOCK_RES, (xdrproc_t)xdr_nlm4_res, &r);
}

static void share_owner(struct rpc_call *call, const nlm4_share *s,
			struct nlm_owner *o)
{
	*o = (struct nlm_owner){ .caller = s->caller_name ? s->caller_name : "",
				 .oh = s->oh.nlm4_netobj_val,
				 .ohlen = s->oh.nlm4_netobj_len };
	nlm_host_of(rpc_call_peer(call), &o->host);
}

static void proc_share(struct rpc_call *call, void *args, void *res)
{
	struct nlm *n = rpc_call_ctx(call);
	nlm4_shareargs *a = args;
	nlm4_shareres *r = res;
	struct nlm_owner o;
	uint64_t ino;
	int rc;

	cookie_move(&r->cookie, &a->cookie);
	if ((rc = fh_ino(call, &a->share.fh, &ino)))
		r->stat = stat_of(rc);
	else if (in_grace(n) && !a->reclaim)
		r->stat = NLM4_DENIED_GRACE_PERIOD;
	else {
		share_owner(call, &a->share, &o);
		rc = a->share.caller_name
			     ? nsm_client_note(n, a->share.caller_name,
					       rpc_call_peer(call))
			     : 0;
		if (!rc)
			rc = nlm_tab_share(n, ino, &o,
					   (unsigned)a->share.access,
					   (unsigned)a->share.mode);
		r->stat = stat_of(rc);
	}
	rpc_call_done(call);
}

static void proc_unshare(struct rpc_call *call, void *args, void *res)
{
	struct nlm *n = rpc_call_ctx(call);
	nlm4_shareargs *a = args;
	nlm4_shareres *r = res;
	struct nlm_owner o;
	uint64_t ino;
	int rc;

	cookie_move(&r->cookie, &a->cookie);
	if ((rc = fh_ino(call, &a->share.fh, &ino))) {
		r->stat = stat_of(rc);
	} else {
		share_owner(call, &a->share, &o);
		nlm_tab_unshare(n, ino, &o);
		r->stat = NLM4_GRANTED;
	}
	rpc_call_done(call);
}

static void proc_free_all(struct rpc_call *call, void *args, void *res)
{
	struct nlm *n = rpc_call_ctx(call);
	nlm4_notify *a = args;
	size_t k;

	(void)res;
	/* Only what this address holds: a name alone proves nothing. */
	if (a->name && nfsd_client_admitted(n->opts.nfsd, rpc_call_peer(call),
					    rpc_call_loop(call))) {
		struct nlm_host h;
		char addr[LOG_ADDR_MAX];

		nlm_host_of(rpc_call_peer(call), &h);
		k = nlm_tab_free_all(n, a->name, &h);
		nsm_client_forget(n, a->name, &h);
		log_host(LOG_LVL_INFO, rpc_call_peer(call),
			 "nlm: FREE_ALL from %s (%s) released %zu locks",
			 a->name, log_addr(rpc_call_peer(call), addr), k);
	}
	rpc_call_done(call);
}

/* The client's answer to GRANTED: a refusal gives the lock back. */
static void granted_done(void *arg, int err, void *res)
{
	struct nlm_grant *g = arg;
	nlm4_res *r = res;

	log_debug("nlm: GRANTED to %s svid %d: %s %d", g->caller, g->svid,
		  err ? strerror(-err) : "answer", err ? 0 : (int)r->stat);
	if (!err && r->stat != NLM4_GRANTED) {
		struct nlm_lockdesc d = { .owner = { .host = g->host,
						     .caller = g->caller,
						     .oh = g->oh,
						     .ohlen = g->ohlen,
						     .svid = g->svid },
					  .excl = g->excl,
					  .off = g->off,
					  .len = g->len };

		log_debug("nlm: client refused GRANTED (%d); unlocking",
			  (int)r->stat);
		nlm_tab_unlock(g->n, g->ino, &d);
	}
	/* On no answer the lock stays: the client's next LOCK poll gets it. */
	free(g);
}

/* Lock table callback: a queued request was granted; tell its client. */
void nlm_block_granted(void *ctx, uint64_t ino, const struct nlm_lockdesc *lk,
		       void *arg)
{
	static uint64_t cookie_seq;
	struct nlm *n = ctx;
	struct nlm_block *b = arg;
	size_t clen = strlen(lk->owner.caller);
	uint64_t cookie = __atomic_add_fetch(&cookie_seq, 1, __ATOMIC_RELAXED);
	struct nlm_grant *g = malloc(sizeof(*g) + lk->owner.ohlen + clen + 1);
	nlm4_testargs a = { .cookie = { sizeof(cookie), (char *)&cookie },
			    .exclusive = lk->excl,
			    .alock = { .caller_name = (char *)lk->owner.caller,
				       .fh = { b->fhlen, b->fh },
				       .oh = { lk->owner.ohlen,
					       (char *)lk->owner.oh },
				       .svid = lk->owner.svid,
				       .l_offset = lk->off,
				       .l_len = lk->len } };
	struct nlm_cb_call c = { .addr = b->peer,
				 .prog = NLM_PROG,
				 .vers = NLM_VERS4,
				 .proc = NLMPROC4_GRANTED,
				 .encode = (xdrproc_t)xdr_nlm4_testargs,
				 .args = &a,
				 .decode = (xdrproc_t)xdr_nlm4_res,
				 .res_size = sizeof(nlm4_res),
				 .tries = 3,
				 .done = granted_done,
				 .arg = g };

	if (g) {
		*g = (struct nlm_grant){ .n = n,
					 .host = lk->owner.host,
					 .ino = ino,
					 .excl = lk->excl,
					 .off = lk->off,
					 .len = lk->len,
					 .svid = lk->owner.svid,
					 .ohlen = lk->owner.ohlen };
		memcpy(g->oh, lk->owner.oh, lk->owner.ohlen);
		g->caller = (char *)g->oh + lk->owner.ohlen;
		memcpy(g->caller, lk->owner.caller, clen + 1);
	}
	if (!g || nlm_cb_queue(n->cb, &c)) {
		log_warn("nlm: cannot send GRANTED to %s; it gets the lock on "
			 "its next poll",
			 lk->owner.caller);
		free(g);
	}
	free(b);
}

/* Lock table callback: a queued request was cancelled or freed. */
void nlm_block_dropped(void *ctx, void *arg)
{
	(void)ctx;
	free(arg);
}

#define NLM_PROC(nm, fn, at, rt, fl)                                    \
	{                                                               \
		.name = nm, .decode = (xdrproc_t)xdr_##at,              \
		.args_size = sizeof(at), .encode = (xdrproc_t)xdr_##rt, \
		.res_size = sizeof(rt), .handler = fn, .flags = fl      \
	}
#define NLM_MSG(nm, fn, at)                                \
	{                                                  \
		.name = nm, .decode = (xdrproc_t)xdr_##at, \
		.args_size = sizeof(at), .handler = fn,    \
		.flags = RPC_PROC_MAKES_WRITE              \
	}

/*
 * GRANTED and the _RES procedures are the client side's (the gateway
 * sends them), and SM_NOTIFY (16) comes from a host's own statd: they
 * answer PROC_UNAVAIL here.
 */
static const struct rpc_proc nlm4_procs[] = {
	[NLMPROC4_NULL] = { .name = "NULL",
			    .handler = proc_null,
			    .flags = RPC_PROC_IDEMPOTENT |
				     RPC_PROC_AUTH_NONE_OK },
	[NLMPROC4_TEST] = NLM_PROC("TEST", proc_test, nlm4_testargs,
				   nlm4_testres, RPC_PROC_IDEMPOTENT),
	[NLMPROC4_LOCK] = NLM_PROC("LOCK", proc_lock, nlm4_lockargs, nlm4_res,
				   RPC_PROC_MAKES_WRITE),
	[NLMPROC4_CANCEL] = NLM_PROC("CANCEL", proc_cancel, nlm4_cancargs,
				     nlm4_res, RPC_PROC_MAKES_WRITE),
	[NLMPROC4_UNLOCK] = NLM_PROC("UNLOCK", proc_unlock, nlm4_unlockargs,
				     nlm4_res, RPC_PROC_MAKES_WRITE),
	[NLMPROC4_GRANTED] = { .name = "GRANTED" },
	[NLMPROC4_TEST_MSG] = NLM_MSG("TEST_MSG", proc_test_msg, nlm4_testargs),
	[NLMPROC4_LOCK_MSG] = NLM_MSG("LOCK_MSG", proc_lock_msg, nlm4_lockargs),
	[NLMPROC4_CANCEL_MSG] =
		NLM_MSG("CANCEL_MSG", proc_cancel_msg, nlm4_cancargs),
	[NLMPROC4_UNLOCK_MSG] =
		NLM_MSG("UNLOCK_MSG", proc_unlock_msg, nlm4_unlockargs),
	[NLMPROC4_GRANTED_MSG] = { .name = "GRANTED_MSG" },
	[NLMPROC4_TEST_RES] = { .name = "TEST_RES" },
	[NLMPROC4_LOCK_RES] = { .name = "LOCK_RES" },
	[NLMPROC4_CANCEL_RES] = { .name = "CANCEL_RES" },
	[NLMPROC4_UNLOCK_RES] = { .name = "UNLOCK_RES" },
	[NLMPROC4_GRANTED_RES] = { .name = "GRANTED_RES" },
	[NLMPROC4_SM_NOTIFY] = { .name = "SM_NOTIFY" },
	[NLMPROC4_SHARE] = NLM_PROC("SHARE", proc_share, nlm4_shareargs,
				    nlm4_shareres, RPC_PROC_MAKES_WRITE),
	[NLMPROC4_UNSHARE] = NLM_PROC("UNSHARE", proc_unshare, nlm4_shareargs,
				      nlm4_shareres, RPC_PROC_MAKES_WRITE),
	[NLMPROC4_NM_LOCK] = NLM_PROC("NM_LOCK", proc_nm_lock, nlm4_lockargs,
				      nlm4_res, RPC_PROC_MAKES_WRITE),
	[NLMPROC4_FREE_ALL] = NLM_MSG("FREE_ALL", proc_free_all, nlm4_notify),
};

/* In a cluster: the table calls wait for the database, off the loops. */
#define NLM_NPROCS (sizeof(nlm4_procs) / sizeof(nlm4_procs[0]))

static void proc_deferred(struct rpc_call *call, void *args, void *res)
{
	nlm_defer(rpc_call_ctx(call), nlm4_procs[rpc_call_proc(call)].handler,
		  call, args, res);
}

static struct rpc_proc nlm4_procs_cluster[NLM_NPROCS];

struct rpc_program nlm_program(struct nlm *n)
{
	const struct rpc_proc *procs = nlm4_procs;

	if (n->opts.db) {
		for (size_t i = 0; i < NLM_NPROCS; i++) {
			nlm4_procs_cluster[i] = nlm4_procs[i];
			if (nlm4_procs[i].handler &&
			    nlm4_procs[i].handler != proc_null)
				nlm4_procs_cluster[i].handler = proc_deferred;
		}
		procs = nlm4_procs_cluster;
	}
	return (struct rpc_program){ .name = "nlm",
				     .prog = NLM_PROG,
				     .vers = NLM_VERS4,
				     .procs = procs,
				     .nprocs = NLM_NPROCS,
				     .ctx = n };
}
