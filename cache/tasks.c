/*
 * cache/tasks.c - the fetch tasks and the waiters' kicks.  Every state
 * change of an entry is followed by a kick: waiters that have what they
 * need are answered (each on its own loop), and chunks they still lack
 * that no one is fetching get tasks, queued for the fetch workers
 * (fetch.c).  Below the fetch, the settling, the evictor and the read
 * pins, which all kick.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cache_int.h"
#include "chunks_int.h"
#include "tasks_int.h"
#include "metrics/metrics.h"

static bool chunk_busy_at(const struct cache_ent *e, uint64_t i)
{
	return i < e->nst && (e->st[i] & CH_BUSY);
}

/* Bytes of chunk i that come from the store: [i*cs, i*cs + return). */
uint64_t cache_chunk_store_len(const struct cache *c, const struct cache_ent *e,
			       uint64_t i)
{
	uint64_t off = i * c->cs;

	if (off >= e->limit)
		return 0;
	return e->limit - off < c->cs ? e->limit - off : c->cs;
}

/*
 * Must w wait for chunk i's BUSY to clear?  A reader need not wait for a
 * chunk that is readable already (fetched, settling); a writer must:
 * cache_write_mark() refuses BUSY chunks.
 */
static bool wait_busy(const struct cache *c, const struct cache_ent *e,
		      const struct cache_wait *w, uint64_t i)
{
	return chunk_busy_at(e, i) &&
	       (w->for_write || !cache_chunk_readable(c, e, i));
}

/* Does w still need chunk i fetched (not just waited for)? */
static bool wait_needs(const struct cache *c, const struct cache_ent *e,
		       const struct cache_wait *w, uint64_t i)
{
	uint64_t lo = i * c->cs, need = cache_chunk_store_len(c, e, i);

	if (cache_chunk_readable(c, e, i))
		return false;
	/* A write covering every stored byte of the chunk replaces it. */
	return !(w->for_write && w->wr_off <= lo && w->wr_end >= lo + need);
}

void cache_task_add_locked(struct cache_ent *e, uint64_t i,
			   struct cache_kick *k)
{
	struct cache_task *t;

	if (!e->key || cache_ent_reserve_locked(e, i))
		return;
	t = malloc(sizeof(*t));
	if (t)
		t->key = strdup(e->key);
	if (!t || !t->key) {
		free(t);
		return; /* the waiter is answered -ENOMEM by the kick */
	}
	memcpy(t->etag, e->etag, sizeof(t->etag));
	t->ent = e;
	t->idx = (uint32_t)i;
	t->epoch = e->epoch;
	cache_ent_get(e);
	e->st[i] |= CH_BUSY;
	t->next = NULL;
	if (k->tasks_last)
		k->tasks_last->next = t;
	else
		k->tasks = t;
	k->tasks_last = t;
}

void cache_kick_locked(struct cache *c, struct cache_ent *e,
		       struct cache_kick *k)
{
	struct cache_wait **pp = &e->waiters;

	while (*pp) {
		struct cache_wait *w = *pp;
		bool waiting = false;
		long res = 0;

		while (w->cur <= w->last && !wait_busy(c, e, w, w->cur) &&
		       !wait_needs(c, e, w, w->cur))
			w->cur++;
		for (uint64_t i = w->cur; i <= w->last; i++) {
			if (wait_busy(c, e, w, i)) {
				waiting = true;
				continue;
			}
			if (!wait_needs(c, e, w, i))
				continue;
			cache_task_add_locked(e, i, k);
			if (chunk_busy_at(e, i))
				waiting = true;
			else
				res = -ENOMEM; /* no task could be made */
		}
		if (waiting && !res) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		w->answer->result = res;
		w->answer->next = k->done;
		k->done = w->answer;
		free(w);
	}
}

static void compl_deliver(struct cache *c, struct cache_compl *n)
{
	if (n->loop >= 0) {
		cache_post(c, n);
	} else {
		n->done(n->arg, n->result);
		free(n);
	}
}

void cache_kick_finish(struct cache *c, struct cache_kick *k)
{
	struct cache_task *t = k->tasks, *tnext;
	struct cache_compl *n = k->done, *nnext;

	if (t) {
		uint64_t now = metrics_now_ns();

		pthread_mutex_lock(&c->fetch_lock);
		for (; t; t = tnext) {
			tnext = t->next;
			t->next = NULL;
			t->queued_ns = now;
			if (c->queue_tail)
				c->queue_tail->next = t;
			else
				c->queue_head = t;
			c->queue_tail = t;
			c->ntasks++;
		}
		pthread_cond_broadcast(&c->task_cond);
		pthread_mutex_unlock(&c->fetch_lock);
	}
	for (; n; n = nnext) {
		nnext = n->next;
		compl_deliver(c, n);
	}
	k->tasks = NULL;
	k->tasks_last = NULL;
	k->done = NULL;
}

void cache_waiters_fail(struct cache *c, struct cache_wait *w, long res)
{
	while (w) {
		struct cache_wait *next = w->next;

		w->answer->result = res;
		compl_deliver(c, w->answer);
		free(w);
		w = next;
	}
}

/* Answer the waiters that need chunk i with err (its fetch failed). */
void cache_fail_chunk_locked(struct cache *c, struct cache_ent *e, uint64_t i,
			     int err, struct cache_kick *k)
{
	struct cache_wait **pp = &e->waiters;

	while (*pp) {
		struct cache_wait *w = *pp;

		if (i < w->cur || i > w->last || !wait_needs(c, e, w, i)) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		w->answer->result = err;
		w->answer->next = k->done;
		k->done = w->answer;
		free(w);
	}
}

void cache_tasks_finished(struct cache *c, unsigned n)
{
	if (!n)
		return;
	pthread_mutex_lock(&c->fetch_lock);
	c->ntasks -= n;
	if (c->ntasks == 0)
		pthread_cond_broadcast(&c->fetch_idle);
	pthread_mutex_unlock(&c->fetch_lock);
}
