/*
 * cache/tasks_int.h - what tasks.c offers the files above it: fetch tasks
 * and the waiters' kicks.
 */
#ifndef MAPFS_CACHE_TASKS_INT_H
#define MAPFS_CACHE_TASKS_INT_H

#include "cache_int.h"

/* tasks.c: fetch tasks and the waiters' kicks. */
/* What a kick collected under a shard lock, to hand out after it. */
struct cache_kick {
	struct cache_task *tasks, *tasks_last; /* in the order added */
	struct cache_compl *done;
};
/*
 * Make tasks for the chunks e's waiters lack (none BUSY), and take the
 * waiters that have all they need (or an error) off e, into k.  Call
 * with e's shard lock held; then unlock and call cache_kick_finish(),
 * which queues the tasks and answers the waiters on their loops.
 */
void cache_kick_locked(struct cache *c, struct cache_ent *e,
		       struct cache_kick *k);
void cache_kick_finish(struct cache *c, struct cache_kick *k);
/*
 * Queue a fetch of chunk i of e into k, after the ones queued before
 * (sets BUSY).  Call locked.  Workers join the tasks of consecutive
 * chunks queued one behind the other into one GET.
 */
void cache_task_add_locked(struct cache_ent *e, uint64_t i,
			   struct cache_kick *k);
/* Answer every waiter of a dead entry with res (-EAGAIN). */
void cache_waiters_fail(struct cache *c, struct cache_wait *w, long res);
/* n tasks (queued, run or settled) are finished: ntasks goes down. */
void cache_tasks_finished(struct cache *c, unsigned n);

/* Bytes of chunk i that come from the store: [i*cs, i*cs + return). */
uint64_t cache_chunk_store_len(const struct cache *c, const struct cache_ent *e,
			       uint64_t i);
/* Answer the waiters that need chunk i with err (its fetch failed). */
void cache_fail_chunk_locked(struct cache *c, struct cache_ent *e, uint64_t i,
			     int err, struct cache_kick *k);

#endif
