/*
 * cache/evict.c - keeping the cache under its capacity.
 *
 * One thread wakes when the bytes of present chunks pass the high
 * watermark (or once a second) and evicts clean chunks until usage is at
 * the low watermark.  The policy is CLOCK: a sweep goes round the entry
 * shards, and in each entry from its own hand; a chunk used since the
 * last pass (REF) gets a second chance, others go.  Dirty and BUSY chunks
 * are never taken, nor any chunk of an entry with a read in flight.
 *
 * A victim is first marked BUSY and not present (so no read uses it and
 * no fetch lands in it), then its journal record is deleted durably, and
 * only then is the hole punched: a crash in between leaves a chunk that
 * is merely fetched again.  Punching (not just forgetting) is what makes
 * the disk usage follow the limit.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache_int.h"
#include "chunks_int.h"
#include "tasks_int.h"
#include "evict_int.h"
#include "metrics/metrics.h"
#include "common/log.h"
#include "db/db.h"

#define EVICT_BATCH 256
#define EVICT_PERIOD_S 1

struct victim {
	struct cache_ent *e; /* referenced */
	uint32_t idx;
};

struct evict_batch {
	struct cache *c;
	struct victim v[EVICT_BATCH];
	size_t n;
};

static bool over_low(struct cache *c)
{
	return atomic_load(&c->used) > c->low;
}

/* Take victims from e (shard locked) into b; false when b is full. */
static bool sweep_ent(struct cache *c, struct cache_ent *e,
		      struct evict_batch *b)
{
	if (e->dead || atomic_load(&e->pins) || !e->nst)
		return true;
	for (uint32_t step = 0; step < e->nst; step++) {
		uint32_t i = e->hand;
		uint8_t st = e->st[i];

		if (b->n == EVICT_BATCH || !over_low(c))
			return false;
		e->hand = (e->hand + 1) % e->nst;
		if ((st & (CH_PRESENT | CH_DIRTY | CH_BUSY)) != CH_PRESENT)
			continue;
		if (st & CH_REF) {
			e->st[i] = st & (uint8_t)~CH_REF;
			continue;
		}
		cache_chunk_set_locked(c, e, i, CH_BUSY);
		cache_ent_get(e);
		b->v[b->n++] = (struct victim){ .e = e, .idx = i };
	}
	return true;
}

static int batch_unjournal(struct db_txn *txn, void *arg)
{
	struct evict_batch *b = arg;
	int rc = 0;

	for (size_t i = 0; !rc && i < b->n; i++)
		rc = cache_rec_put_txn(b->c, txn, b->v[i].e->ino, b->v[i].idx,
				       0);
	return rc;
}

/* Punch the victims' holes, then give their chunks back to fetches. */
static void batch_finish(struct cache *c, struct evict_batch *b, bool punch)
{
	for (size_t i = 0; i < b->n; i++) {
		struct cache_ent *e = b->v[i].e;
		struct cache_entshard *s = cache_ent_shard(c, e->ino);
		uint64_t idx = b->v[i].idx;
		struct cache_kick k = { 0 };
		struct cache_fd *f;
		bool dead;

		if (punch && cache_fd_get(c, e->ino, &f) == 0) {
			pthread_mutex_lock(&s->lock);
			dead = e->dead;
			pthread_mutex_unlock(&s->lock);
			/* Live: f is the entry's own file (see fetch.c). */
			if (!dead &&
			    fallocate(f->fd,
				      FALLOC_FL_PUNCH_HOLE |
					      FALLOC_FL_KEEP_SIZE,
				      (off_t)(idx * c->cs), (off_t)c->cs) < 0)
				log_warn("cache: punch inode %" PRIu64 ": %s",
					 e->ino, strerror(errno));
			cache_ent_touched(e);
			cache_fd_put(f);
		}
		pthread_mutex_lock(&s->lock);
		e->st[idx] &= (uint8_t)~CH_BUSY;
		if (!e->dead)
			cache_kick_locked(c, e, &k);
		pthread_mutex_unlock(&s->lock);
		cache_kick_finish(c, &k);
		cache_ent_put(e);
		atomic_fetch_add(&c->evicted, punch);
		if (punch)
			metrics_inc(MET_CACHE_EVICTIONS); /* metrics */
	}
	b->n = 0;
}

/*
 * Evict down to the low watermark, or until two full turns of the clock
 * found nothing (everything left is dirty or in use).
 */
static void evict_run(struct cache *c, struct evict_batch *b)
{
	unsigned idle = 0;

	while (over_low(c) && idle < 2 * CACHE_ENT_SHARDS) {
		struct cache_entshard *s = &c->ents[c->evict_shard];
		bool full = false;
		int rc;

		pthread_mutex_lock(&s->lock);
		for (int i = 0; i < CACHE_ENT_BUCKETS && !full; i++)
			for (struct cache_ent *e = s->buckets[i]; e && !full;
			     e = e->hnext)
				full = !sweep_ent(c, e, b);
		pthread_mutex_unlock(&s->lock);
		if (!full)
			c->evict_shard =
				(c->evict_shard + 1) % CACHE_ENT_SHARDS;
		if (!b->n) {
			idle++;
			continue;
		}
		idle = 0;
		rc = db_write(c->db, batch_unjournal, b);
		if (rc) {
			/* Still journaled: keep the data, present again. */
			log_error("cache: evict journal: %s", strerror(-rc));
			for (size_t i = 0; i < b->n; i++) {
				struct cache_ent *e = b->v[i].e;
				struct cache_entshard *es =
					cache_ent_shard(c, e->ino);

				pthread_mutex_lock(&es->lock);
				cache_chunk_set_locked(c, e, b->v[i].idx,
						       CH_PRESENT | CH_BUSY);
				pthread_mutex_unlock(&es->lock);
			}
			batch_finish(c, b, false);
			return;
		}
		batch_finish(c, b, true);
	}
}

static void *evict_main(void *p)
{
	struct cache *c = p;
	struct evict_batch *b = calloc(1, sizeof(*b));

	if (!b) {
		log_error("cache: no memory for the evictor");
		return NULL;
	}
	b->c = c;
	pthread_mutex_lock(&c->evict_lock);
	while (!c->evict_stop) {
		struct timespec ts;

		if (atomic_load(&c->used) <= c->high) {
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += EVICT_PERIOD_S;
			pthread_cond_timedwait(&c->evict_wake, &c->evict_lock,
					       &ts);
			continue;
		}
		pthread_mutex_unlock(&c->evict_lock);
		evict_run(c, b);
		pthread_mutex_lock(&c->evict_lock);
		if (atomic_load(&c->used) > c->high && !c->evict_stop) {
			/* All dirty or busy: look again in a while. */
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += EVICT_PERIOD_S;
			pthread_cond_timedwait(&c->evict_wake, &c->evict_lock,
					       &ts);
		}
	}
	pthread_mutex_unlock(&c->evict_lock);
	free(b);
	return NULL;
}

void cache_evict_poke(struct cache *c)
{
	if (!c->capacity || atomic_load(&c->used) <= c->high)
		return;
	pthread_mutex_lock(&c->evict_lock);
	pthread_cond_signal(&c->evict_wake);
	pthread_mutex_unlock(&c->evict_lock);
}

int cache_evict_start(struct cache *c)
{
	int rc;

	pthread_mutex_init(&c->evict_lock, NULL);
	pthread_cond_init(&c->evict_wake, NULL);
	if (!c->capacity)
		return 0;
	rc = -pthread_create(&c->evictor, NULL, evict_main, c);
	if (rc)
		return rc;
	c->evict_started = true;
	pthread_setname_np(c->evictor, "cache-evict");
	return 0;
}

void cache_evict_stop(struct cache *c)
{
	if (c->evict_started) {
		pthread_mutex_lock(&c->evict_lock);
		c->evict_stop = true;
		pthread_cond_signal(&c->evict_wake);
		pthread_mutex_unlock(&c->evict_lock);
		pthread_join(c->evictor, NULL);
	}
	pthread_cond_destroy(&c->evict_wake);
	pthread_mutex_destroy(&c->evict_lock);
}
