/*
 * db/writer_priv.h - what the writer thread (writer.c) and its cluster
 * half (writer_cluster.c) share: the queue of changes, a group's run, the
 * commits in flight, and the few queue steps both take (inline here, so
 * that neither file calls the other back).  Private to those two files.
 */
#ifndef MAPFS_DB_WRITER_PRIV_H
#define MAPFS_DB_WRITER_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/bytebuf.h"
#include "lmdb_int.h"
#include "metrics/metrics.h"
#include "writer_int.h"

struct db_op {
	struct db_op *next;
	db_apply_fn apply;
	db_done_fn done;
	void *arg;
	int err;
	bool lazy;       /* db_submit_lazy: done() before the flush */
	bool background; /* db_submit_background: no commit of its own */
	uint8_t stale;   /* runs so far that met a newer record */
	/* This run, in the group: */
	bool shared;       /* it changed a shared record */
	size_t fp0, fp1;   /* its keys in g.fp */
	size_t rec0, rec1; /* its shared reads and writes in g.recs */
	size_t cap0, cap1; /* its writes in g.caps */
	size_t uf;         /* union-find parent (an index into g.ops) */
};

/* A key a change touched (a hash of table and key), and whether it
 * wrote it. */
struct fpk {
	uint64_t h;
	bool w;
};

/* A change's shared read (the version seen) or write (for its commit). */
struct rec {
	unsigned tbl;
	bool write, del;
	uint64_t ver;
	size_t koff, klen, voff, vlen;
};

/* A change's write of any table, to be made again (as a plain put: the
 * key is locked meanwhile, so what the put's flags asked holds). */
struct capw {
	unsigned tbl;
	bool del;
	size_t koff, klen, voff, vlen;
};

/* Changes written here together: a set without a shared write (at once)
 * or a cluster commit's (once it has its answer). */
struct wbatch {
	struct wbatch *next;      /* in answered or ready */
	struct wbatch *in_flight; /* in the writer's inflight list */
	struct db_writer *w;
	struct db_op *ops; /* in the order they ran */
	struct capw *caps;
	size_t ncaps;
	struct bytebuf a; /* arena of keys and values (offsets) */
	/* Its keys, while it is in flight: open addressing, h 0 = empty. */
	struct fpk *locks;
	size_t lcap;
	bool shared;
	uint64_t sent_ns;
	struct db_commit c;
};

/* Changes waiting for the follower to pass a snapshot. */
struct swait {
	struct swait *next;
	struct db_snap snap;
	struct db_op *ops;
};

/* One group's run. */
struct group {
	struct db_op **ops;
	size_t n, cap;
	struct db_op *cur;
	struct fpk *fp;
	size_t nfp, capfp;
	struct rec *recs;
	size_t nrecs, caprecs;
	struct capw *caps;
	size_t ncaps, capcaps;
	struct bytebuf a; /* arena of keys and values (offsets) */
	unsigned char *vbuf;
	size_t vcap;
	int oom; /* a record could not be kept: the change fails */
};

struct db_writer {
	struct db *db;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake, switched;
	struct db_op *head, **tail;
	size_t nqueued;
	size_t nbg; /* of them db_submit_background's */
	/* Background changes wait for a group until this time (the lazy
	 * window after the first one queued; CLOCK_MONOTONIC ns; 0: none). */
	uint64_t bg_due_ns;
	/* The linger: changes that are not background ever queued; as
	 * many as the last answers may call out, counted from arrivals
	 * then (so changes queued before the answers are not waited for
	 * again); lingering until arrivals - linger_base reach linger_for
	 * (0: not lingering). */
	uint64_t arrivals, linger_base;
	size_t expect;
	size_t linger_for;
	bool stopping;
	/* Lazy commits (db_submit_lazy): the window, and when the log's
	 * unflushed records must be flushed (CLOCK_MONOTONIC ns; 0: none). */
	uint32_t lazy_ms;
	uint64_t lazy_due_ns;
	/* Under lock: the cluster to commit through, a switch asked for,
	 * the commits answered, and whether the follower has something. */
	struct db_replica *rep;
	bool detach;
	struct wbatch *answered;
	bool poke;

	/* The writer thread's own. */
	struct db_obs obs; /* watches a change's transaction in a cluster */
	struct group g;
	struct wbatch *inflight;
	unsigned ninflight;
	struct wbatch *ready, **ready_tail;
	struct db_op *deferred, **deferred_tail;
	struct swait *swaits;
	struct db_remote_batch *remote, **remote_tail;
	bool again; /* something was left to write: no waiting */
};

/* Put ops (a list) back at the head of the queue, in their order. */
static inline void requeue(struct db_writer *w, struct db_op *ops)
{
	struct db_op *last = ops;
	size_t n = 1;

	if (!ops)
		return;
	while (last->next) {
		last = last->next;
		n++;
	}
	pthread_mutex_lock(&w->lock);
	w->nqueued += n;
	for (struct db_op *op = ops; op; op = op->next)
		w->nbg += op->background;
	last->next = w->head;
	if (!w->head)
		w->tail = &last->next;
	w->head = ops;
	pthread_mutex_unlock(&w->lock);
}

/* Answers are going out for answers changes (w->lock not held): the next
 * group lingers for as many arrivals after this moment (see linger()). */
static inline void expect_from_now(struct db_writer *w, size_t answers)
{
	pthread_mutex_lock(&w->lock);
	w->linger_base = w->arrivals;
	w->expect = answers;
	pthread_mutex_unlock(&w->lock);
}

static inline void op_done(struct db_op *op, int err)
{
	metrics_inc(MET_DB_CHANGES);
	if (op->done)
		op->done(op->arg, err);
	free(op);
}

static inline void ops_done(struct db_op *ops, int err)
{
	while (ops) {
		struct db_op *next = ops->next;

		op_done(ops, err ? err : ops->err);
		ops = next;
	}
}

/* A change that waited for a commit in flight may go now. */
static inline void undefer(struct db_writer *w)
{
	requeue(w, w->deferred);
	w->deferred = NULL;
	w->deferred_tail = &w->deferred;
}

/*
 * writer_cluster.c: the writer's work in a cluster, each on the writer
 * thread.  Init and fini around the thread (the observer; the group's
 * buffers).  step: the answers that came are noted (their keys free, the
 * changes that waited for them queued again) and the follower's batches
 * taken.  run: one local transaction: what step found ready is written,
 * then the group (ops, may be NULL) runs on top of it, split into sets,
 * the sets sent as commits (or written at once); the transaction flushes
 * while those commits are in flight, and what it holds is answered.
 * detach: leave the cluster once nothing is in flight.
 */
void writer_cluster_init(struct db_writer *w);
void writer_cluster_fini(struct db_writer *w);
void writer_cluster_run(struct db_writer *w, struct db_op *ops);
void writer_cluster_step(struct db_writer *w, struct wbatch *answered,
			 bool poked);
void writer_cluster_detach(struct db_writer *w);

#endif
