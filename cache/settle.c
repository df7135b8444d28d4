/*
 * cache/settle.c - fetched chunks become durable, then journaled present.
 *
 * A fetch worker lands a chunk in the cache file and marks it present in
 * memory at once, so readers go on, but leaves it BUSY and unjournaled.
 * Here one thread takes every landed chunk queued so far, fdatasyncs each
 * file they are in once (and its directory entry, if new), and only then
 * journals them present and clears BUSY.  So a present record never
 * points at bytes a crash can lose (a crash before it costs a second
 * fetch), a WRITE (which waits for BUSY) never journals a chunk dirty
 * whose fetched part is not yet durable, and no GET waits for the disk:
 * one fdatasync covers all the chunks of a file that landed meanwhile.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cache_int.h"
#include "chunks_int.h"
#include "tasks_int.h"
#include "evict_int.h"
#include "settle_int.h"
#include "common/log.h"

/* Group a batch by entry: one sync per file. */
static int task_cmp(const void *a, const void *b)
{
	const struct cache_task *x = *(struct cache_task *const *)a;
	const struct cache_task *y = *(struct cache_task *const *)b;

	if (x->ent != y->ent)
		return (uintptr_t)x->ent < (uintptr_t)y->ent ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* fdatasync e's file (and name); 1 if e is gone (nothing to keep). */
static int ent_sync(struct cache *c, struct cache_ent *e)
{
	struct cache_entshard *s = cache_ent_shard(c, e->ino);
	struct cache_fd *f;
	bool dead;
	int rc;

	pthread_mutex_lock(&s->lock);
	dead = e->dead;
	pthread_mutex_unlock(&s->lock);
	if (dead)
		return 1;
	/* Taken before the entry is seen live again below: its own file. */
	rc = cache_fd_get(c, e->ino, &f);
	if (rc)
		return rc == -ENODATA ? 1 : rc;
	rc = cache_sync_blocking(c, f);
	cache_fd_put(f);
	return rc;
}

/*
 * Settle tasks v[0..n) of one entry: journal the chunks that are still
 * present and of the same epoch (after a truncate they are only kept in
 * memory, and fetched again after a restart), clear BUSY, kick.  When
 * the sync failed, the chunks are given up instead: fetched again.
 */
static void group_settle(struct cache *c, struct cache_task **v, size_t n)
{
	struct cache_ent *e = v[0]->ent;
	struct cache_entshard *s = cache_ent_shard(c, e->ino);
	struct cache_jrec stack[16], *recs = stack;
	struct cache_kick k = { 0 };
	size_t nrec = 0;
	int rc = ent_sync(c, e);

	if (rc < 0)
		log_warn("cache: sync of inode %" PRIu64 ": %s (%zu fetched "
			 "chunk(s) dropped)",
			 e->ino, strerror(-rc), n);
	if (n > sizeof(stack) / sizeof(stack[0]))
		recs = malloc(n * sizeof(*recs));
	pthread_mutex_lock(&s->lock);
	for (size_t j = 0; j < n; j++) {
		uint32_t i = v[j]->idx;
		uint8_t st = e->st[i] & (uint8_t)~CH_BUSY;

		if (e->dead || !(st & CH_PRESENT)) {
			e->st[i] = st;
			continue;
		}
		if (rc < 0) {
			cache_chunk_set_locked(c, e, i,
					       st & (uint8_t)~CH_PRESENT);
			continue;
		}
		e->st[i] = st;
		/* Without memory for the records: only a second fetch later. */
		if (recs && e->epoch == v[j]->epoch)
			recs[nrec++] = (struct cache_jrec){ .idx = i,
							    .st = CH_PRESENT };
	}
	if (nrec)
		cache_journal(c, e, e->ino, false, false, 0, recs, nrec);
	if (!e->dead)
		cache_kick_locked(c, e, &k);
	pthread_mutex_unlock(&s->lock);
	cache_kick_finish(c, &k);
	if (recs != stack)
		free(recs);
	for (size_t j = 0; j < n; j++) {
		cache_ent_put(v[j]->ent);
		free(v[j]->key);
		free(v[j]);
	}
}

static void batch_settle(struct cache *c, struct cache_task *list)
{
	struct cache_task **v, *t;
	size_t n = 0, at = 0;

	for (t = list; t; t = t->next)
		n++;
	v = malloc(n * sizeof(*v));
	if (v) {
		for (t = list; t; t = t->next)
			v[at++] = t;
		qsort(v, n, sizeof(*v), task_cmp);
		for (size_t j = 0, end; j < n; j = end) {
			for (end = j + 1; end < n && v[end]->ent == v[j]->ent;
			     end++)
				;
			group_settle(c, v + j, end - j);
		}
		free(v);
	} else {
		/* No memory to sort: one sync per chunk, in list order. */
		while (list) {
			t = list;
			list = t->next;
			group_settle(c, &t, 1);
		}
	}
	cache_tasks_finished(c, (unsigned)n);
	cache_evict_poke(c);
}

static void *settle_main(void *p)
{
	struct cache *c = p;

	pthread_mutex_lock(&c->settle_lock);
	for (;;) {
		struct cache_task *list = c->settle_head;

		if (!list) {
			if (c->settle_stop)
				break;
			pthread_cond_wait(&c->settle_cond, &c->settle_lock);
			continue;
		}
		c->settle_head = c->settle_tail = NULL;
		pthread_mutex_unlock(&c->settle_lock);
		batch_settle(c, list);
		pthread_mutex_lock(&c->settle_lock);
	}
	pthread_mutex_unlock(&c->settle_lock);
	return NULL;
}

void cache_settle_add(struct cache *c, struct cache_task *list)
{
	struct cache_task *last = list;

	while (last->next)
		last = last->next;
	pthread_mutex_lock(&c->settle_lock);
	if (c->settle_tail)
		c->settle_tail->next = list;
	else
		c->settle_head = list;
	c->settle_tail = last;
	pthread_cond_signal(&c->settle_cond);
	pthread_mutex_unlock(&c->settle_lock);
}

int cache_settle_start(struct cache *c)
{
	int rc;

	pthread_mutex_init(&c->settle_lock, NULL);
	pthread_cond_init(&c->settle_cond, NULL);
	rc = -pthread_create(&c->settler, NULL, settle_main, c);
	if (!rc) {
		c->settle_started = true;
		pthread_setname_np(c->settler, "cache-settle");
	}
	return rc;
}

void cache_settle_stop(struct cache *c)
{
	if (c->settle_started) {
		pthread_mutex_lock(&c->settle_lock);
		c->settle_stop = true;
		pthread_cond_signal(&c->settle_cond);
		pthread_mutex_unlock(&c->settle_lock);
		pthread_join(c->settler, NULL);
		c->settle_started = false;
	}
	pthread_cond_destroy(&c->settle_cond);
	pthread_mutex_destroy(&c->settle_lock);
}
