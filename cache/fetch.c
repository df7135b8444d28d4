/*
 * cache/fetch.c - making chunks readable: ranged GETs from the store on a
 * pool of worker threads, one task per chunk.
 *
 * A caller that needs bytes [off, off+len) of an inode becomes a waiter
 * on its entry for the chunks that range touches.  Every chunk a waiter
 * lacks gets one task, and the chunk is marked BUSY while the task runs,
 * so a second waiter (or readahead) for it waits instead of fetching it
 * again: two readers of one missing chunk cause one GET.  The tasks of
 * all inodes share one FIFO, so the chunks of a big fetch run in parallel
 * on all workers.  A chunk is GET only up to the entry's store limit, so
 * a file smaller than a chunk is fetched whole, in one request.
 *
 * A worker writes the chunk into the cache file, fdatasyncs it (and the
 * file's name), and only then marks it present and journals that, so a
 * present record never outlives its data.  Every state change of an
 * entry is followed by a "kick": waiters that have what they need are
 * answered (each on its own loop), and chunks they still lack that no one
 * is fetching get tasks.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache_int.h"
#include "metrics/metrics.h"
#include "common/log.h"
#include "s3/store.h"

struct cache_worker {
	struct cache *c;
	pthread_t tid;
	void *buf; /* one chunk */
};

/* A waiter on a worker thread (loop < 0): cache_fetch blocks on this. */
struct sync_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool finished;
	long result;
};

/* Bytes of chunk i that come from the store: [i*cs, i*cs + return). */
static uint64_t chunk_store_len(const struct cache *c,
				const struct cache_ent *e, uint64_t i)
{
	uint64_t off = i * c->cs;

	if (off >= e->limit)
		return 0;
	return e->limit - off < c->cs ? e->limit - off : c->cs;
}

/* Does w still need chunk i fetched (not just waited for)? */
static bool wait_needs(const struct cache *c, const struct cache_ent *e,
		       const struct cache_wait *w, uint64_t i)
{
	uint64_t lo = i * c->cs, need = chunk_store_len(c, e, i);

	if (cache_chunk_readable(c, e, i))
		return false;
	/* A write covering every stored byte of the chunk replaces it. */
	return !(w->for_write && w->wr_off <= lo && w->wr_end >= lo + need);
}

static bool chunk_busy(const struct cache_ent *e, uint64_t i)
{
	return i < e->nst && (e->st[i] & CH_BUSY);
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
	t->ent = e;
	t->idx = (uint32_t)i;
	t->epoch = e->epoch;
	cache_ent_get(e);
	e->st[i] |= CH_BUSY;
	t->next = k->tasks;
	k->tasks = t;
}

void cache_kick_locked(struct cache *c, struct cache_ent *e,
		       struct cache_kick *k)
{
	struct cache_wait **pp = &e->waiters;

	while (*pp) {
		struct cache_wait *w = *pp;
		bool waiting = false;
		long res = 0;

		while (w->cur <= w->last && !chunk_busy(e, w->cur) &&
		       !wait_needs(c, e, w, w->cur))
			w->cur++;
		for (uint64_t i = w->cur; i <= w->last; i++) {
			if (chunk_busy(e, i)) {
				waiting = true;
				continue;
			}
			if (!wait_needs(c, e, w, i))
				continue;
			cache_task_add_locked(e, i, k);
			if (chunk_busy(e, i))
				waiting = true;
			else
				res = -ENOMEM; /* no task could be made */
		}
		if (waiting && !res) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		w->compl->result = res;
		w->compl->next = k->done;
		k->done = w->compl;
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
		pthread_mutex_lock(&c->fetch_lock);
		for (; t; t = tnext) {
			tnext = t->next;
			t->next = NULL;
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
	k->done = NULL;
}

void cache_waiters_fail(struct cache *c, struct cache_wait *w, long res)
{
	while (w) {
		struct cache_wait *next = w->next;

		w->compl->result = res;
		compl_deliver(c, w->compl);
		free(w);
		w = next;
	}
}

/* Answer the waiters that need chunk i with err (its fetch failed). */
static void fail_chunk_locked(struct cache *c, struct cache_ent *e,
			      uint64_t i, int err, struct cache_kick *k)
{
	struct cache_wait **pp = &e->waiters;

	while (*pp) {
		struct cache_wait *w = *pp;

		if (i < w->cur || i > w->last || !wait_needs(c, e, w, i)) {
			pp = &w->next;
			continue;
		}
		*pp = w->next;
		w->compl->result = err;
		w->compl->next = k->done;
		k->done = w->compl;
		free(w);
	}
}

/* GET chunk t->idx and land it; 0, -errno, or 1 if it became void. */
static int task_fetch(struct cache *c, struct cache_task *t, void *buf)
{
	struct cache_ent *e = t->ent;
	struct cache_entshard *s = cache_ent_shard(c, e->ino);
	uint64_t off = (uint64_t)t->idx * c->cs, len;
	struct cache_fd *f;
	size_t got = 0, put = 0;
	uint64_t wseq;
	struct stat sb;
	bool void_;
	int rc;

	pthread_mutex_lock(&s->lock);
	void_ = e->dead || e->epoch != t->epoch;
	len = chunk_store_len(c, e, t->idx);
	pthread_mutex_unlock(&s->lock);
	if (void_)
		return 1;
	if (len == 0)
		return 0; /* past the limit now: readable as it is */
	atomic_fetch_add(&c->gets, 1);
	/* Tests count these lines: a GET is what a warm cache must avoid. */
	log_debug("cache: GET %s @%" PRIu64 " +%" PRIu64, t->key, off, len);
	rc = store_get(c->st, t->key, off, (size_t)len, buf, &got);
	/* Shorter than the limit says: the object changed under us. */
	if (!rc && got != len)
		rc = -EIO;
	if (rc)
		return rc;
	/* The fd first: one taken before the entry is seen live is of the
	 * entry's own file (a replacement marks it dead first). */
	rc = cache_fd_get(c, e->ino, &f);
	if (rc)
		return rc == -ENODATA ? 1 : rc;
	pthread_mutex_lock(&e->land_lock);
	pthread_mutex_lock(&s->lock);
	void_ = e->dead || e->epoch != t->epoch;
	pthread_mutex_unlock(&s->lock);
	wseq = atomic_load(&e->wseq);
	if (!void_ && fstat(f->fd, &sb) < 0)
		rc = -errno;
	while (!void_ && !rc && put < len) {
		ssize_t n = pwrite(f->fd, (char *)buf + put, len - put,
				   (off_t)(off + put));

		if (n < 0 && errno != EINTR)
			rc = -errno;
		else if (n > 0)
			put += (size_t)n;
	}
	/*
	 * A dirty file's mtime is its cache file's (fs/): data that only
	 * arrived from the store must not move it.  Unless a write came in
	 * meanwhile (then its mtime is the right one).
	 */
	if (!void_ && !rc && atomic_load(&e->wseq) == wseq &&
	    futimens(f->fd, (struct timespec[2]){ { .tv_nsec = UTIME_OMIT },
						  sb.st_mtim }) < 0)
		rc = -errno;
	if (!void_)
		cache_ent_touched(e);
	pthread_mutex_unlock(&e->land_lock);
	if (!void_ && !rc)
		rc = cache_sync_blocking(c, f);
	cache_fd_put(f);
	return void_ ? 1 : rc;
}

static void task_run(struct cache *c, struct cache_task *t, void *buf)
{
	struct cache_ent *e = t->ent;
	struct cache_entshard *s = cache_ent_shard(c, e->ino);
	struct cache_kick k = { 0 };
	int rc = task_fetch(c, t, buf);
	uint64_t i = t->idx;

	if (rc < 0 && rc != -ENOENT && rc != -EAGAIN)
		log_warn("cache: fetch of inode %" PRIu64 " chunk %" PRIu64
			 " failed: %s", e->ino, i, strerror(-rc));
	pthread_mutex_lock(&s->lock);
	if (rc == 0 && !e->dead && e->epoch == t->epoch) {
		struct cache_jrec rec = { .idx = t->idx, .st = CH_PRESENT };

		if (chunk_store_len(c, e, i)) {
			cache_chunk_set_locked(c, e, i,
					       (e->st[i] & ~CH_BUSY) |
						       CH_PRESENT | CH_REF);
			cache_journal(c, e, e->ino, false, false, 0, &rec, 1);
			metrics_inc(MET_CACHE_FETCHES); /* metrics */
			metrics_add(MET_CACHE_FETCH_BYTES, chunk_store_len(c, e, i));
		} else {
			e->st[i] &= (uint8_t)~CH_BUSY;
		}
	} else {
		e->st[i] &= (uint8_t)~CH_BUSY;
		if (rc < 0)
			fail_chunk_locked(c, e, i, rc, &k);
	}
	if (!e->dead)
		cache_kick_locked(c, e, &k);
	pthread_mutex_unlock(&s->lock);
	cache_kick_finish(c, &k);
	cache_evict_poke(c);
	cache_ent_put(e);
	free(t->key);
	free(t);
}

static void *worker_main(void *p)
{
	struct cache_worker *wk = p;
	struct cache *c = wk->c;

	pthread_mutex_lock(&c->fetch_lock);
	for (;;) {
		struct cache_task *t = c->queue_head;

		if (!t) {
			if (c->workers_stop)
				break;
			pthread_cond_wait(&c->task_cond, &c->fetch_lock);
			continue;
		}
		c->queue_head = t->next;
		if (!c->queue_head)
			c->queue_tail = NULL;
		pthread_mutex_unlock(&c->fetch_lock);
		task_run(c, t, wk->buf);
		pthread_mutex_lock(&c->fetch_lock);
		if (--c->ntasks == 0)
			pthread_cond_broadcast(&c->fetch_idle);
	}
	pthread_mutex_unlock(&c->fetch_lock);
	return NULL;
}

static void sync_wake(void *arg, long result)
{
	struct sync_wait *sw = arg;

	pthread_mutex_lock(&sw->lock);
	sw->result = result;
	sw->finished = true;
	pthread_cond_signal(&sw->cond);
	pthread_mutex_unlock(&sw->lock);
}

/*
 * Queue w (its compl filled) on e for [off, off+len) and kick.  The
 * waiter is answered through the kick (possibly at once).
 */
static void wait_add(struct cache *c, struct cache_ent *e,
		     const struct cache_obj *obj, struct cache_wait *w)
{
	struct cache_entshard *s = cache_ent_shard(c, e->ino);
	struct cache_kick k = { 0 };

	pthread_mutex_lock(&s->lock);
	if (e->dead) {
		pthread_mutex_unlock(&s->lock);
		cache_waiters_fail(c, w, -EAGAIN);
		return;
	}
	if (obj->key && (!e->key || strcmp(e->key, obj->key))) {
		char *key = strdup(obj->key);

		if (key) {
			free(e->key);
			e->key = key;
		}
	}
	/* Past the limit every chunk is readable: no need to walk them. */
	if (e->limit == 0 || w->cur > (e->limit - 1) / c->cs) {
		w->cur = 1;
		w->last = 0; /* empty: answered by the kick below */
	} else if (w->last > (e->limit - 1) / c->cs)
		w->last = (e->limit - 1) / c->cs;
	w->next = e->waiters;
	e->waiters = w;
	cache_kick_locked(c, e, &k);
	pthread_mutex_unlock(&s->lock);
	cache_kick_finish(c, &k);
}

void cache_fetch(struct cache *c, int loop, uint64_t ino,
		 const struct cache_obj *obj, uint64_t off, uint64_t len,
		 bool for_write, cache_done_fn done, void *arg)
{
	struct sync_wait sw = { .finished = false };
	struct cache_compl *n;
	struct cache_wait *w;
	struct cache_ent *e;
	int rc;

	if (loop >= c->nloops) {
		done(arg, -EINVAL);
		return;
	}
	if (off > INT64_MAX || len > INT64_MAX - off) {
		cache_complete(c, loop, done, arg, -EFBIG);
		return;
	}
	rc = cache_ent_attach(c, ino, obj->size, &e);
	if (rc || len == 0) {
		if (!rc)
			cache_ent_put(e);
		cache_complete(c, loop, done, arg, rc);
		return;
	}
	n = malloc(sizeof(*n));
	w = calloc(1, sizeof(*w));
	if (!n || !w) {
		free(n);
		free(w);
		cache_ent_put(e);
		cache_complete(c, loop, done, arg, -ENOMEM);
		return;
	}
	n->loop = loop;
	if (loop < 0) {
		pthread_mutex_init(&sw.lock, NULL);
		pthread_cond_init(&sw.cond, NULL);
		n->done = sync_wake;
		n->arg = &sw;
	} else {
		n->done = done;
		n->arg = arg;
	}
	w->compl = n;
	w->cur = off / c->cs;
	w->last = (off + len - 1) / c->cs;
	w->for_write = for_write;
	w->wr_off = off;
	w->wr_end = off + len;
	wait_add(c, e, obj, w);
	cache_ent_put(e);
	if (loop < 0) {
		pthread_mutex_lock(&sw.lock);
		while (!sw.finished)
			pthread_cond_wait(&sw.cond, &sw.lock);
		pthread_mutex_unlock(&sw.lock);
		pthread_cond_destroy(&sw.cond);
		pthread_mutex_destroy(&sw.lock);
		done(arg, sw.result);
	}
}

int cache_fetch_init(struct cache *c)
{
	int i, rc;

	c->workers = calloc((size_t)c->fetch_threads, sizeof(*c->workers));
	if (!c->workers)
		return -ENOMEM;
	pthread_mutex_init(&c->fetch_lock, NULL);
	pthread_cond_init(&c->fetch_idle, NULL);
	pthread_cond_init(&c->task_cond, NULL);
	for (i = 0; i < c->fetch_threads; i++) {
		struct cache_worker *wk = &c->workers[i];

		wk->c = c;
		wk->buf = malloc(c->cs);
		if (!wk->buf) {
			rc = -ENOMEM;
			goto out_workers;
		}
		rc = -pthread_create(&wk->tid, NULL, worker_main, wk);
		if (rc) {
			free(wk->buf);
			goto out_workers;
		}
		c->nworkers++;
	}
	return 0;

out_workers:
	cache_fetch_destroy(c);
	return rc;
}

/* Runs the queue dry first: a queued task holds an entry reference. */
void cache_fetch_destroy(struct cache *c)
{
	pthread_mutex_lock(&c->fetch_lock);
	while (c->ntasks && c->nworkers)
		pthread_cond_wait(&c->fetch_idle, &c->fetch_lock);
	c->workers_stop = true;
	pthread_cond_broadcast(&c->task_cond);
	pthread_mutex_unlock(&c->fetch_lock);
	for (int i = 0; i < c->nworkers; i++) {
		pthread_join(c->workers[i].tid, NULL);
		free(c->workers[i].buf);
	}
	pthread_cond_destroy(&c->task_cond);
	pthread_cond_destroy(&c->fetch_idle);
	pthread_mutex_destroy(&c->fetch_lock);
	free(c->workers);
}
