/*
 * cache/pin.c - pins: a read's (every chunk of its range readable, the
 * entry held against eviction until the read is done, and the access
 * noted for CLOCK and for readahead, whose tasks it queues: tasks.c),
 * and a whole file's for an upload (cache_pin in cache.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "cache_int.h"
#include "chunks_int.h"
#include "tasks_int.h"
#include "pin_int.h"

/* Sequential detection and readahead for a read of [off, end). */
static void ra_update_locked(struct cache *c, struct cache_ent *e, uint64_t off,
			     uint64_t end, struct cache_kick *k)
{
	uint64_t stop, want = 0, batch;

	if (c->ra_max < c->cs || !e->key || off == e->ra_last)
		return; /* off again: the retry of a read that missed */
	e->ra_last = off;
	if (off > e->ra_next + c->cs || end + c->cs < e->ra_next) {
		e->ra_win = 0;
		e->ra_next = end;
		return;
	}
	e->ra_win = e->ra_win ? 2 * e->ra_win : 4 * c->cs;
	if (e->ra_win > c->ra_max)
		e->ra_win = c->ra_max;
	if (end > e->ra_next)
		e->ra_next = end;
	stop = end + e->ra_win;
	if (stop > e->limit)
		stop = e->limit;
	/*
	 * Chunks go out in runs of a whole GET (fetch.c joins them), not one
	 * by one as the window slides: a store pays per request.  Only the
	 * end of the object, or a window smaller than a GET, asks for less.
	 */
	for (uint64_t i = end / c->cs; i * c->cs < stop; i++)
		if (!cache_chunk_readable(c, e, i) &&
		    !(i < e->nst && (e->st[i] & CH_BUSY)))
			want++;
	batch = e->ra_win / c->cs < c->get_chunks ? e->ra_win / c->cs
						  : c->get_chunks;
	if (!want || (want < batch && stop < e->limit))
		return;
	for (uint64_t i = end / c->cs; i * c->cs < stop; i++)
		if (!cache_chunk_readable(c, e, i) &&
		    !(i < e->nst && (e->st[i] & CH_BUSY)))
			cache_task_add_locked(e, i, k);
}

int cache_read_pin(struct cache *c, uint64_t ino, uint64_t off, uint64_t len,
		   struct cache_ent **out)
{
	struct cache_entshard *s = cache_ent_shard(c, ino);
	struct cache_kick k = { 0 };
	uint64_t first, last;
	struct cache_ent *e;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	e = cache_ent_find_locked(s, ino);
	if (!e) {
		pthread_mutex_unlock(&s->lock);
		return -ENODATA;
	}
	if (len) {
		cache_chunk_span(c, off, len, &first, &last);
		for (uint64_t i = first; !rc && i <= last; i++)
			if (!cache_chunk_readable(c, e, i))
				rc = -ENODATA;
		for (uint64_t i = first; !rc && i <= last && i < e->nst; i++)
			e->st[i] |= CH_REF;
		ra_update_locked(c, e, off, off + len, &k);
	}
	if (!rc) {
		cache_ent_get(e);
		atomic_fetch_add(&e->pins, 1);
		*out = e;
	}
	pthread_mutex_unlock(&s->lock);
	cache_kick_finish(c, &k);
	return rc;
}

void cache_read_unpin(struct cache_ent *e)
{
	atomic_fetch_sub(&e->pins, 1);
	cache_ent_put(e);
}

/* A pin is its entry, referenced and counted in pins. */
struct cache_pin {
	struct cache_ent e;
};

int cache_pin(struct cache *c, uint64_t ino, uint64_t size,
	      struct cache_pin **out)
{
	struct cache_entshard *s = cache_ent_shard(c, ino);
	struct cache_ent *e;
	int rc = cache_ent_attach(c, ino, size, &e);

	if (rc)
		return rc;
	/* Under the lock: a sweep of e either marked its victims BUSY
	 * already (cache_fetch waits for them) or sees the pin. */
	pthread_mutex_lock(&s->lock);
	atomic_fetch_add(&e->pins, 1);
	pthread_mutex_unlock(&s->lock);
	*out = (struct cache_pin *)(void *)e;
	return 0;
}

void cache_unpin(struct cache_pin *p)
{
	if (p)
		cache_read_unpin(&p->e);
}
