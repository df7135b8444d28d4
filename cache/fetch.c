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
 * on all workers.  A worker takes the tasks of consecutive chunks queued
 * one behind the other (up to get_chunks of them) into one ranged GET: a
 * store pays per request, so readahead asks for runs of that size.  A
 * chunk is GET only up to the entry's store limit, so a file smaller
 * than a chunk is fetched whole, in one request.
 *
 * The GET streams into the worker's one-chunk buffer; each chunk, once
 * whole, is written into the cache file and marked present at once (its
 * waiters go on while the rest of the run still streams), but stays BUSY
 * until settle.c has made it durable and journaled it: a present record
 * never outlives its data, and no fetch waits for the disk.  Every state
 * change of an entry is followed by a "kick": waiters that have what
 * they need are answered (each on its own loop), and chunks they still
 * lack that no one is fetching get tasks.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_int.h"
#include "chunks_int.h"
#include "tasks_int.h"
#include "settle_int.h"
#include "fetch_int.h"
#include "metrics/metrics.h"
#include "common/log.h"
#include "s3/store.h"

/* The largest GET: past it a store's per-request cost hardly shows. */
#define FETCH_GET_MAX (16ull << 20)

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

/*
 * One GET of the consecutive chunks [first, first + n) of e: the tasks
 * of the run, and what of it has landed.  The sink fills buf with one
 * chunk at a time and lands each as soon as it is whole.
 */
struct run {
	struct cache *c;
	struct cache_ent *e;
	struct cache_fd *f; /* e's file, taken before e was seen live */
	uint64_t epoch;
	uint64_t first;
	uint32_t n, landed; /* chunks in the run, chunks landed */
	uint64_t want;      /* store bytes of chunk first + landed, 0:
			       not looked up yet */
	size_t fill;        /* of which buf holds this many */
	char *buf;          /* one chunk */
	uint64_t first_ns;  /* when the first byte came, 0: not yet */
	uint64_t land_ns;   /* time spent landing chunks */
};

/* Store bytes of the run's chunks [first, first + n), under e's lock. */
static uint64_t run_store_len(const struct run *r)
{
	uint64_t len = 0;

	for (uint32_t j = 0; j < r->n; j++)
		len += cache_chunk_store_len(r->c, r->e, r->first + j);
	return len;
}

/*
 * One pwrite of [p, p+len) at off into f's file: through its O_DIRECT
 * twin (opts.direct: fetched data bypasses the page cache as the rest of
 * the cache does) for the block-aligned head, the unaligned tail
 * buffered.  Bytes written or -1 (errno).
 */
static ssize_t land_write(const struct cache_fd *f, const char *p, size_t len,
			  uint64_t off)
{
	size_t head = len & ~(size_t)(CACHE_DIO_ALIGN - 1);

	if (f->dfd >= 0 && head &&
	    !((off | (uintptr_t)p) & (CACHE_DIO_ALIGN - 1)))
		return pwrite(f->dfd, p, head, (off_t)off);
	return pwrite(f->fd, p, len, (off_t)off);
}

/*
 * Write the chunk in r->buf into the cache file and make it readable
 * (present, still BUSY until settled).  0, -errno, or 1 if the entry
 * went dead or was truncated meanwhile (nothing may land any more).
 */
static int run_land(struct run *r)
{
	struct cache *c = r->c;
	struct cache_ent *e = r->e;
	struct cache_entshard *s = cache_ent_shard(c, e->ino);
	uint64_t i = r->first + r->landed, off = i * c->cs;
	struct cache_kick k = { 0 };
	size_t put = 0;
	uint64_t wseq;
	struct stat sb;
	bool void_;
	int rc = 0;

	pthread_mutex_lock(&e->land_lock);
	pthread_mutex_lock(&s->lock);
	void_ = e->dead || e->epoch != r->epoch;
	pthread_mutex_unlock(&s->lock);
	wseq = atomic_load(&e->wseq);
	if (!void_ && fstat(r->f->fd, &sb) < 0)
		rc = -errno;
	while (!void_ && !rc && put < r->fill) {
		ssize_t n = land_write(r->f, r->buf + put, r->fill - put,
				       off + put);

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
	    futimens(r->f->fd, (struct timespec[2]){ { .tv_nsec = UTIME_OMIT },
						     sb.st_mtim }) < 0)
		rc = -errno;
	if (!void_)
		cache_ent_touched(e);
	pthread_mutex_unlock(&e->land_lock);
	if (void_)
		return 1;
	if (rc)
		return rc;
	pthread_mutex_lock(&s->lock);
	if (!e->dead && e->epoch == r->epoch &&
	    cache_chunk_store_len(c, e, i)) {
		cache_chunk_set_locked(c, e, i, e->st[i] | CH_PRESENT | CH_REF);
		metrics_inc(MET_CACHE_FETCHES); /* metrics */
		metrics_add(MET_CACHE_FETCH_BYTES, r->fill);
		cache_kick_locked(c, e, &k);
	}
	pthread_mutex_unlock(&s->lock);
	cache_kick_finish(c, &k);
	r->landed++;
	r->fill = 0;
	r->want = 0;
	return 0;
}

/* store_sink_fn: bytes of the run, in order; lands each whole chunk. */
static int run_sink(void *arg, const void *p, size_t n)
{
	struct run *r = arg;
	struct cache_entshard *s = cache_ent_shard(r->c, r->e->ino);

	if (!r->first_ns)
		r->first_ns = metrics_now_ns();
	while (n) {
		uint64_t t0;
		size_t take;
		int rc;

		if (!r->want) { /* a new chunk starts */
			if (r->landed == r->n)
				return -EIO; /* more than asked for */
			pthread_mutex_lock(&s->lock);
			r->want = cache_chunk_store_len(r->c, r->e,
							r->first + r->landed);
			pthread_mutex_unlock(&s->lock);
			if (!r->want)
				return -ECANCELED; /* cut meanwhile */
		}
		take = r->want - r->fill < n ? (size_t)(r->want - r->fill) : n;
		memcpy(r->buf + r->fill, p, take);
		r->fill += take;
		p = (const char *)p + take;
		n -= take;
		if (r->fill < r->want)
			continue;
		t0 = metrics_now_ns();
		rc = run_land(r);
		r->land_ns += metrics_now_ns() - t0;
		if (rc)
			return rc > 0 ? -ECANCELED : rc;
	}
	return 0;
}

/*
 * Where the time of one GET went (the issue-18 question: why is a cold
 * read sometimes slow?): into the stage counters, and one debug line.
 * Retries (s3_do) before the first byte count as waiting, those after
 * it as streaming.
 */
static void run_timings(const struct run *r, const struct cache_task *t,
			uint64_t sent, uint64_t got)
{
	uint64_t end = metrics_now_ns(), queue = sent - t->queued_ns;
	uint64_t first = r->first_ns ? r->first_ns : end;
	uint64_t wait = first - sent, stream = end - first - r->land_ns;

	metrics_add(MET_FETCH_QUEUE_US, queue / 1000);
	metrics_add(MET_FETCH_WAIT_US, wait / 1000);
	metrics_add(MET_FETCH_STREAM_US, stream / 1000);
	metrics_add(MET_FETCH_LAND_US, r->land_ns / 1000);
	log_debug("cache: fetched %s @%" PRIu64 " +%" PRIu64 " in %.1f ms: "
		  "queued %.1f, first byte %.1f, stream %.1f, land %.1f",
		  t->key, r->first * r->c->cs, got, (end - sent) / 1e6,
		  queue / 1e6, wait / 1e6, stream / 1e6, r->land_ns / 1e6);
}

/*
 * GET the run of tasks (consecutive chunks of one entry and epoch) and
 * land it.  Chunks that landed go to settle.c with their tasks; the
 * others are given back (BUSY cleared), their waiters answered with the
 * error.  Frees or hands on every task.
 */
static void run_fetch(struct cache *c, struct cache_task *tasks, uint32_t n,
		      void *buf)
{
	struct cache_ent *e = tasks->ent;
	struct cache_entshard *s = cache_ent_shard(c, e->ino);
	struct run r = { .c = c,
			 .e = e,
			 .epoch = tasks->epoch,
			 .first = tasks->idx,
			 .n = n,
			 .buf = buf };
	struct cache_kick k = { 0 };
	struct cache_task *t, *settle = NULL;
	uint64_t len = 0, got = 0;
	char pin[STORE_ETAG_MAX];
	bool void_;
	int rc = 0;

	memcpy(pin, tasks->etag, sizeof(pin));

	pthread_mutex_lock(&s->lock);
	void_ = e->dead || e->epoch != r.epoch;
	if (!void_)
		len = run_store_len(&r);
	pthread_mutex_unlock(&s->lock);
	/* The fd first: one taken before the entry is seen live is of the
	 * entry's own file (a replacement marks it dead first). */
	if (!void_ && len) {
		rc = cache_fd_get(c, e->ino, &r.f);
		if (rc == -ENODATA)
			void_ = true;
	}
	/* Known down: the caller's JUKEBOX now, not after the retries
	 * (the syncer's probe tells when the store answers again). */
	if (!void_ && !rc && len && store_down(c->st))
		rc = -EAGAIN;
	else if (!void_ && !rc && len) {
		atomic_fetch_add(&c->gets, 1);
		/* Tests count these lines: a GET is what a warm cache must
		 * avoid. */
		log_debug("cache: GET %s @%" PRIu64 " +%" PRIu64, tasks->key,
			  r.first * c->cs, len);
		uint64_t sent = metrics_now_ns();

		rc = store_get_stream_if(c->st, tasks->key, tasks->etag,
					 r.first * c->cs, len, run_sink, &r,
					 &got);
		run_timings(&r, tasks, sent, got);
		if (rc == -ECANCELED)
			rc = 0, void_ = true;
		/* Shorter than the limit says: the object changed under us. */
		else if (!rc && got != len)
			rc = -EIO;
	}
	if (r.f)
		cache_fd_put(r.f);
	/*
	 * A version the entry has moved on from: its tasks were made for a
	 * waiter of an older record (an upload of ours committed since, as
	 * a newer waiter's record says), not the waiters' error.  The
	 * chunks are given back and made again, pinned to what the entry
	 * asks now.
	 */
	if (rc == -ESTALE) {
		pthread_mutex_lock(&s->lock);
		if (strcmp(pin, e->etag))
			rc = 0;
		pthread_mutex_unlock(&s->lock);
	}
	if (rc == -ESTALE)
		log_info("cache: %s changed in the store under a fetch of "
			 "inode %" PRIu64 " (another writer, or an upload of "
			 "ours not committed yet): the fetch is dropped, never "
			 "a mix of two versions",
			 tasks->key, e->ino);
	else if (rc < 0 && rc != -ENOENT && rc != -EAGAIN)
		log_warn("cache: fetch of inode %" PRIu64 " chunks %" PRIu64
			 "+%" PRIu32 " failed: %s",
			 e->ino, r.first, n, strerror(-rc));
	/* The landed chunks settle (they stay BUSY until then). */
	for (uint32_t j = 0; j < r.landed; j++) {
		t = tasks;
		tasks = t->next;
		t->next = settle;
		settle = t;
	}
	pthread_mutex_lock(&s->lock);
	for (t = tasks; t; t = t->next) {
		e->st[t->idx] &= (uint8_t)~CH_BUSY;
		if (rc < 0)
			cache_fail_chunk_locked(c, e, t->idx, rc, &k);
	}
	if (!e->dead)
		cache_kick_locked(c, e, &k);
	pthread_mutex_unlock(&s->lock);
	cache_kick_finish(c, &k);
	if (settle)
		cache_settle_add(c, settle);
	n -= r.landed;
	while (tasks) {
		t = tasks;
		tasks = t->next;
		cache_ent_put(t->ent);
		free(t->key);
		free(t);
	}
	cache_tasks_finished(c, n);
}

static void *worker_main(void *p)
{
	struct cache_worker *wk = p;
	struct cache *c = wk->c;

	pthread_mutex_lock(&c->fetch_lock);
	for (;;) {
		struct cache_task *t = c->queue_head, *last;
		uint32_t n = 1;

		if (!t) {
			if (c->workers_stop)
				break;
			pthread_cond_wait(&c->task_cond, &c->fetch_lock);
			continue;
		}
		/* The tasks queued right behind it that continue its run. */
		for (last = t; n < c->get_chunks && last->next &&
			       last->next->ent == t->ent &&
			       last->next->epoch == t->epoch &&
			       !strcmp(last->next->etag, t->etag) &&
			       last->next->idx == last->idx + 1;
		     last = last->next)
			n++;
		c->queue_head = last->next;
		if (!c->queue_head)
			c->queue_tail = NULL;
		last->next = NULL;
		pthread_mutex_unlock(&c->fetch_lock);
		run_fetch(c, t, n, wk->buf);
		pthread_mutex_lock(&c->fetch_lock);
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
 * Queue w (its answer filled) on e for [off, off+len) and kick.  The
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
	if (obj->key)
		snprintf(e->etag, sizeof(e->etag), "%s",
			 obj->etag ? obj->etag : "");
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
	w->answer = n;
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
	uint64_t get = c->ra_max / (uint64_t)c->fetch_threads;
	int i, rc;

	/* A full readahead window is in flight as one GET per worker. */
	if (get > FETCH_GET_MAX)
		get = FETCH_GET_MAX;
	c->get_chunks = get > c->cs ? (uint32_t)(get / c->cs) : 1;
	c->workers = calloc((size_t)c->fetch_threads, sizeof(*c->workers));
	if (!c->workers)
		return -ENOMEM;
	pthread_mutex_init(&c->fetch_lock, NULL);
	pthread_cond_init(&c->fetch_idle, NULL);
	pthread_cond_init(&c->task_cond, NULL);
	rc = cache_settle_start(c);
	if (rc)
		goto out_workers;
	for (i = 0; i < c->fetch_threads; i++) {
		struct cache_worker *wk = &c->workers[i];

		wk->c = c;
		/* Aligned for land_write's O_DIRECT. */
		if (posix_memalign(&wk->buf, CACHE_DIO_ALIGN, c->cs))
			wk->buf = NULL;
		if (!wk->buf) {
			rc = -ENOMEM;
			goto out_workers;
		}
		rc = -pthread_create(&wk->tid, NULL, worker_main, wk);
		if (rc) {
			free(wk->buf);
			goto out_workers;
		}
		pthread_setname_np(wk->tid, "cache-fetch");
		c->nworkers++;
	}
	return 0;

out_workers:
	cache_fetch_destroy(c);
	return rc;
}

/*
 * Runs the queue dry first (a queued task holds an entry reference),
 * settling included: settling kicks waiters, which may queue tasks.
 */
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
	cache_settle_stop(c);
	pthread_cond_destroy(&c->task_cond);
	pthread_cond_destroy(&c->fetch_idle);
	pthread_mutex_destroy(&c->fetch_lock);
	free(c->workers);
}
