/*
 * nlm/cluster.c - the lock table, alone or in a cluster.
 *
 * Alone, every call goes to the gateway's in-memory table (lock.c).  In a
 * cluster (nlm_opts.db) a file's locks, queued requests and shares are
 * one record of the cluster's database: a call loads it into a table of
 * its own, does its work there with lock.c's rules, and writes it back in
 * the same transaction (db_lock_edit), with what each host holds counted
 * over all files for the per-host bound.  So a lock taken through one
 * gateway conflicts with one asked through another, a queued request is
 * granted by whichever gateway's UNLOCK frees its range (it calls the
 * client's lockd itself: the request carries the client's address and
 * handle), and locks outlive a gateway's restart.
 *
 * Those calls block on the database, so in a cluster the NLM and NSM
 * procedures that touch the table run on threads of their own
 * (nlm_defer), never on an event loop.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "db/db.h"
#include "nlm_int.h"

#define NLM_WORKERS 2
#define NLM_HOSTS_MAX 64 /* hosts one file's state names, for the deltas */

/* ---- a queued request's argument, as bytes -------------------------- */

static size_t block_save(void *arg, void *buf, size_t cap)
{
	const struct nlm_block *b = arg;
	size_t n;

	if (!b)
		return 0;
	n = offsetof(struct nlm_block, fh) + b->fhlen;
	if (n > cap)
		return 0;
	memcpy(buf, b, n);
	return n;
}

static void *block_load(const void *p, size_t len)
{
	struct nlm_block *b;

	if (len < offsetof(struct nlm_block, fh))
		return NULL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	memcpy(b, p, len > sizeof(*b) ? sizeof(*b) : len);
	if (b->fhlen > sizeof(b->fh) ||
	    offsetof(struct nlm_block, fh) + b->fhlen != len) {
		free(b);
		return NULL;
	}
	return b;
}

/* ---- one edit of a file's state ------------------------------------- */

/* A queued request granted by this call, to tell its client after the
 * commit (lk's strings point into own's copy). */
struct grant {
	struct grant *next;
	struct nlm_lockdesc lk;
	struct nlm_host host;
	char *caller;
	void *oh;
	void *arg;
};

struct edit {
	struct nlm *n;
	uint64_t ino;
	int (*op)(struct edit *e, struct nlm_table *t);
	/* The operation's inputs and outputs. */
	const struct nlm_lockdesc *lk;
	const struct nlm_owner *owner;
	unsigned access, deny;
	const char *caller;
	const struct nlm_host *host;
	const struct nlm_block *block; /* copied for each run */
	struct nlm_holder *holder;
	int rc;
	size_t freed;
	struct grant *granted;
};

static void grants_free(struct grant *g)
{
	while (g) {
		struct grant *next = g->next;

		free(g->arg);
		free(g->caller);
		free(g->oh);
		free(g);
		g = next;
	}
}

static void edit_grant(void *ctx, uint64_t ino, const struct nlm_lockdesc *lk,
		       void *arg)
{
	struct edit *e = ctx;
	struct grant *g = calloc(1, sizeof(*g));

	(void)ino;
	if (!g || !(g->caller = strdup(lk->owner.caller)) ||
	    !(g->oh = malloc(lk->owner.ohlen ? lk->owner.ohlen : 1))) {
		if (g)
			free(g->caller);
		free(g);
		free(arg);
		return; /* the client gets it on its next LOCK poll */
	}
	memcpy(g->oh, lk->owner.oh, lk->owner.ohlen);
	g->lk = *lk;
	g->lk.owner.caller = g->caller;
	g->lk.owner.oh = g->oh;
	g->arg = arg;
	g->next = e->granted;
	e->granted = g;
}

static void edit_drop(void *ctx, void *arg)
{
	(void)ctx;
	free(arg);
}

/* See db_lock_edit_fn: load the state, run the op, write it back. */
static int edit_run(void *ctx, const void *state, size_t len, void **out,
		    size_t *outlen, struct db_host_delta **deltas,
		    size_t *ndeltas)
{
	struct edit *e = ctx;
	struct nlm_table_ops ops = { .grant = edit_grant,
				     .drop = edit_drop,
				     .ctx = e };
	struct nlm_host_count before[NLM_HOSTS_MAX], after[NLM_HOSTS_MAX];
	size_t nb, na, nd = 0;
	struct nlm_table *t;
	int rc;

	grants_free(e->granted); /* a run before this one did not commit */
	e->granted = NULL;
	/* The bound is the cluster's (db_lock_edit), not this table's. */
	rc = nlm_table_new(0, SIZE_MAX, &ops, &t);
	if (rc)
		return rc;
	if (len && (rc = nlm_table_import(t, e->ino, state, len, block_load))) {
		nlm_table_free(t);
		return rc;
	}
	nb = nlm_table_hosts(t, before, NLM_HOSTS_MAX);
	e->rc = e->op(e, t);
	na = nlm_table_hosts(t, after, NLM_HOSTS_MAX);
	rc = nb > NLM_HOSTS_MAX || na > NLM_HOSTS_MAX ? -ENOLCK : 0;
	*deltas = calloc(nb + na + 1, sizeof(**deltas));
	if (!rc && !*deltas)
		rc = -ENOMEM;
	/* What each host holds now against before, on this file. */
	for (size_t i = 0; !rc && i < na + nb; i++) {
		const struct nlm_host_count *c =
			i < na ? &after[i] : &before[i - na];
		int64_t d = i < na ? (int64_t)c->n : -(int64_t)c->n;
		bool seen = false;

		for (size_t j = 0; j < nd; j++)
			if (!memcmp((*deltas)[j].host, c->host.addr, 16)) {
				(*deltas)[j].delta += d;
				seen = true;
			}
		if (!seen) {
			memcpy((*deltas)[nd].host, c->host.addr, 16);
			(*deltas)[nd++].delta = d;
		}
	}
	*ndeltas = nd;
	if (!rc)
		rc = nlm_table_export(t, e->ino, block_save, out, outlen);
	nlm_table_free(t); /* its queued requests' copies go with it */
	return rc;
}

/*
 * Run e against ino's state in the cluster, then tell granted clients:
 * the operation's result (e->rc), or the database's error as a lock call
 * sees it (not answering: -ENOLCK, DENIED_NOLOCKS: the client retries).
 */
static int edit_commit(struct edit *e)
{
	int rc = db_lock_edit(e->n->opts.db, e->ino, edit_run, e,
			      e->n->opts.host_max);

	if (rc == -EAGAIN || rc == -ENOTSUP)
		rc = -ENOLCK;

	if (!rc) {
		/* Committed: now the granted requests hold their locks. */
		for (struct grant *g = e->granted; g; g = g->next) {
			e->n->blocked.grant(e->n->blocked.ctx, e->ino, &g->lk,
					    g->arg);
			g->arg = NULL; /* the completion took it */
		}
	}
	grants_free(e->granted);
	e->granted = NULL;
	return rc ? rc : e->rc;
}

static int op_test(struct edit *e, struct nlm_table *t)
{
	return nlm_table_test(t, e->ino, e->lk, e->holder);
}

static int op_lock(struct edit *e, struct nlm_table *t)
{
	struct nlm_block *b = NULL;
	int rc;

	if (e->block && !(b = malloc(sizeof(*b))))
		return -ENOMEM;
	if (b)
		*b = *e->block;
	rc = nlm_table_lock(t, e->ino, e->lk, b);
	if (rc != -EINPROGRESS)
		free(b); /* queued: the table's (then the record's) */
	return rc;
}

static int op_cancel(struct edit *e, struct nlm_table *t)
{
	return nlm_table_cancel(t, e->ino, e->lk);
}

static int op_unlock(struct edit *e, struct nlm_table *t)
{
	return nlm_table_unlock(t, e->ino, e->lk);
}

static int op_share(struct edit *e, struct nlm_table *t)
{
	return nlm_table_share(t, e->ino, e->owner, e->access, e->deny);
}

static int op_unshare(struct edit *e, struct nlm_table *t)
{
	nlm_table_unshare(t, e->ino, e->owner);
	return 0;
}

static int op_free_all(struct edit *e, struct nlm_table *t)
{
	e->freed = nlm_table_free_all(t, e->caller, e->host);
	return 0;
}

/* ---- the table calls of nlm4_proc.c and nsm.c ------------------------- */

int nlm_tab_test(struct nlm *n, uint64_t ino, const struct nlm_lockdesc *lk,
		 struct nlm_holder *holder)
{
	struct edit e = {
		.n = n, .ino = ino, .op = op_test, .lk = lk, .holder = holder
	};

	if (!n->opts.db)
		return nlm_table_test(n->table, ino, lk, holder);
	return edit_commit(&e);
}

int nlm_tab_lock(struct nlm *n, uint64_t ino, const struct nlm_lockdesc *lk,
		 struct nlm_block *block)
{
	struct edit e = {
		.n = n, .ino = ino, .op = op_lock, .lk = lk, .block = block
	};
	int rc;

	if (!n->opts.db)
		return nlm_table_lock(n->table, ino, lk, block);
	rc = edit_commit(&e);
	/* The record holds a copy of a queued request: the caller's is
	 * freed as if the table had taken it and dropped it. */
	if (rc == -EINPROGRESS)
		free(block);
	return rc;
}

int nlm_tab_cancel(struct nlm *n, uint64_t ino, const struct nlm_lockdesc *lk)
{
	struct edit e = { .n = n, .ino = ino, .op = op_cancel, .lk = lk };

	if (!n->opts.db)
		return nlm_table_cancel(n->table, ino, lk);
	return edit_commit(&e);
}

int nlm_tab_unlock(struct nlm *n, uint64_t ino, const struct nlm_lockdesc *lk)
{
	struct edit e = { .n = n, .ino = ino, .op = op_unlock, .lk = lk };

	if (!n->opts.db)
		return nlm_table_unlock(n->table, ino, lk);
	return edit_commit(&e);
}

int nlm_tab_share(struct nlm *n, uint64_t ino, const struct nlm_owner *owner,
		  unsigned access, unsigned deny)
{
	struct edit e = { .n = n,
			  .ino = ino,
			  .op = op_share,
			  .owner = owner,
			  .access = access,
			  .deny = deny };

	if (!n->opts.db)
		return nlm_table_share(n->table, ino, owner, access, deny);
	return edit_commit(&e);
}

void nlm_tab_unshare(struct nlm *n, uint64_t ino, const struct nlm_owner *owner)
{
	struct edit e = {
		.n = n, .ino = ino, .op = op_unshare, .owner = owner
	};

	if (!n->opts.db)
		nlm_table_unshare(n->table, ino, owner);
	else
		edit_commit(&e);
}

size_t nlm_tab_free_all(struct nlm *n, const char *caller,
			const struct nlm_host *host)
{
	uint64_t *inos = NULL;
	size_t k = 0, total = 0;

	if (!n->opts.db)
		return nlm_table_free_all(n->table, caller, host);
	if (db_lock_files(n->opts.db, &inos, &k)) {
		log_warn("nlm: cannot list the cluster's locked files: %s's "
			 "locks stay",
			 caller);
		return 0;
	}
	for (size_t i = 0; i < k; i++) {
		struct edit e = { .n = n,
				  .ino = inos[i],
				  .op = op_free_all,
				  .caller = caller,
				  .host = host };

		if (!edit_commit(&e))
			total += e.freed;
	}
	free(inos);
	return total;
}

/* ---- calls off the loops ---------------------------------------------- */

struct job {
	struct job *next;
	struct rpc_call *call;
	void *args, *res;
	rpc_handler_fn fn;
};

struct nlm_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct job *head, **tail;
	bool stop;
	int n;
	pthread_t threads[NLM_WORKERS];
};

static void *pool_main(void *arg)
{
	struct nlm_pool *p = arg;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		struct job *j;

		while (!p->head && !p->stop)
			pthread_cond_wait(&p->cv, &p->mu);
		if (!p->head)
			break;
		j = p->head;
		p->head = j->next;
		if (!p->head)
			p->tail = &p->head;
		pthread_mutex_unlock(&p->mu);
		j->fn(j->call, j->args, j->res);
		free(j);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int nlm_pool_start(struct nlm *n)
{
	struct nlm_pool *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->tail = &p->head;
	for (; p->n < NLM_WORKERS; p->n++)
		if (pthread_create(&p->threads[p->n], NULL, pool_main, p))
			break;
	n->pool = p;
	return p->n ? 0 : -EAGAIN;
}

void nlm_pool_stop(struct nlm *n)
{
	struct nlm_pool *p = n->pool;

	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->n; i++)
		pthread_join(p->threads[i], NULL);
	/* Calls still queued get an error: the server is going away. */
	while (p->head) {
		struct job *j = p->head;

		p->head = j->next;
		rpc_call_fail(j->call, SYSTEM_ERR);
		free(j);
	}
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
	n->pool = NULL;
}

void nlm_defer(struct nlm *n, rpc_handler_fn fn, struct rpc_call *call,
	       void *args, void *res)
{
	struct nlm_pool *p = n->pool;
	struct job *j = malloc(sizeof(*j));

	if (!j) {
		rpc_call_fail(call, SYSTEM_ERR);
		return;
	}
	*j = (struct job){ .call = call, .args = args, .res = res, .fn = fn };
	pthread_mutex_lock(&p->mu);
	*p->tail = j;
	p->tail = &j->next;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}
