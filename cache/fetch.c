/*
 * cache/fetch.c - making an inode local: parallel ranged GETs from the
 * store on a pool of worker threads.
 *
 * One job per inode in flight (the in-flight table, under fetch_lock):
 * a second reader of a missing inode joins the job instead of starting a
 * download.  A job writes DIR/tmp/INO.N, split in fetch_chunk ranges that
 * the workers take round-robin across jobs (a huge fetch does not starve
 * a small one).  The worker that finishes the last range fdatasyncs the
 * temp file, renames it into place, installs its fd and completes every
 * waiter on the waiter's own loop.
 *
 * A drop or create of the inode cancels its job: the job leaves the table
 * at once (a new fetch starts afresh) and, when its ranges are done, it
 * deletes its temp file and answers -EAGAIN, so stale data is never
 * renamed over what replaced it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache_int.h"
#include "metrics/metrics.h"
#include "common/log.h"
#include "s3/store.h"

#define CACHE_FETCH_BUCKETS 256

struct cache_fetch_job {
	struct cache_fetch_job *hnext; /* in-flight table */
	struct cache_fetch_job *qnext; /* work queue */
	struct cache *c;
	uint64_t ino;
	char *key;
	uint64_t size;
	int fd; /* temp file; -1 until a worker created it */
	char tmpname[CACHE_NAME_MAX];
	uint64_t nchunks, next_chunk; /* under fetch_lock */
	atomic_uint_fast64_t left;      /* ranges not yet finished */
	atomic_int err;                 /* first error, 0 if none */
	bool cancelled;                 /* under fetch_lock */
	struct cache_compl *waiters;    /* under fetch_lock */
};

struct cache_worker {
	struct cache *c;
	pthread_t tid;
	void *buf; /* fetch_chunk bytes */
};

/* A waiter on a worker thread (loop < 0): cache_fetch blocks on this. */
struct sync_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool finished;
	long result;
};

static struct cache_fetch_job **job_bucket(struct cache *c, uint64_t ino)
{
	return &c->jobs[(ino * 0x9e3779b97f4a7c15ull >> 32) %
			CACHE_FETCH_BUCKETS];
}

static struct cache_fetch_job *job_find_locked(struct cache *c, uint64_t ino)
{
	for (struct cache_fetch_job *j = *job_bucket(c, ino); j; j = j->hnext)
		if (j->ino == ino)
			return j;
	return NULL;
}

static void job_unhash_locked(struct cache *c, struct cache_fetch_job *job)
{
	struct cache_fetch_job **pp = job_bucket(c, job->ino);

	while (*pp != job)
		pp = &(*pp)->hnext;
	*pp = job->hnext;
}

static void queue_push_locked(struct cache *c, struct cache_fetch_job *job)
{
	job->qnext = NULL;
	if (c->queue_tail)
		c->queue_tail->qnext = job;
	else
		c->queue_head = job;
	c->queue_tail = job;
	pthread_cond_signal(&c->task_cond);
}

static void job_set_err(struct cache_fetch_job *job, int err)
{
	int zero = 0;

	atomic_compare_exchange_strong(&job->err, &zero, err);
}

/* Create the temp file, with the object's size reserved up front. */
static int job_start(struct cache_fetch_job *job)
{
	struct cache *c = job->c;
	int fd;

	snprintf(job->tmpname, sizeof(job->tmpname), "%016" PRIx64 ".%" PRIu64,
		 job->ino, (uint64_t)atomic_fetch_add(&c->tmp_seq, 1));
	fd = openat(c->tmpfd, job->tmpname,
		    O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	/* ENOSPC now rather than after the download; not every fs can. */
	if (job->size && fallocate(fd, 0, 0, (off_t)job->size) < 0 &&
	    errno != EOPNOTSUPP && errno != ENOSYS) {
		int rc = -errno;

		close(fd);
		unlinkat(c->tmpfd, job->tmpname, 0);
		return rc;
	}
	job->fd = fd;
	return 0;
}

static void job_chunk(struct cache_fetch_job *job, uint64_t i, void *buf)
{
	struct cache *c = job->c;
	uint64_t off = i * c->fetch_chunk;
	size_t len, got = 0, put = 0;
	int rc;

	/* After the first error the remaining ranges are only counted. */
	if (atomic_load(&job->err) || off >= job->size)
		return;
	len = job->size - off < c->fetch_chunk ? (size_t)(job->size - off)
					       : c->fetch_chunk;
	rc = store_get(c->st, job->key, off, len, buf, &got);
	/* Shorter than fs said: the object changed under us. */
	if (!rc && got != len)
		rc = -EIO;
	while (!rc && put < len) {
		ssize_t n = pwrite(job->fd, (char *)buf + put, len - put,
				   (off_t)(off + put));

		if (n < 0 && errno != EINTR)
			rc = -errno;
		else if (n > 0)
			put += (size_t)n;
	}
	if (rc)
		job_set_err(job, rc);
}

static void waiter_complete(struct cache *c, struct cache_compl *w, long res)
{
	w->result = res;
	if (w->loop >= 0) {
		cache_post(c, w);
	} else {
		w->done(w->arg, res);
		free(w);
	}
}

/*
 * Last range done: commit the temp file or throw it away, answer every
 * waiter, and only then let cache_close() see the job gone.
 */
static void job_finish(struct cache_fetch_job *job)
{
	struct cache *c = job->c;
	struct cache_compl *w, *next;
	char name[CACHE_NAME_MAX];
	bool installed = false;
	int rc = atomic_load(&job->err);

	if (!rc && job->fd >= 0 && fdatasync(job->fd) < 0)
		rc = -errno;
	cache_name(job->ino, name);
	pthread_mutex_lock(&c->fetch_lock);
	/*
	 * Rename and install under fetch_lock: a drop or create cancels
	 * under it too, so it comes either before (we see cancelled) or
	 * after (it unlinks and forgets what we installed).
	 */
	if (job->cancelled) {
		if (!rc)
			rc = -EAGAIN;
	} else {
		job_unhash_locked(c, job);
		if (!rc && renameat(c->tmpfd, job->tmpname,
				    cache_dirfd(c, job->ino), name) < 0)
			rc = -errno;
		if (!rc) {
			cache_dir_changed(c, job->ino);
			cache_fd_install(c, job->ino, job->fd);
			installed = true;
			metrics_inc(MET_CACHE_FETCHES); /* metrics */
			metrics_add(MET_CACHE_FETCH_BYTES, job->size);
		}
	}
	w = job->waiters;
	job->waiters = NULL;
	pthread_mutex_unlock(&c->fetch_lock);

	if (!installed && job->fd >= 0) {
		close(job->fd);
		unlinkat(c->tmpfd, job->tmpname, 0);
	}
	if (rc && rc != -EAGAIN && rc != -ENOENT)
		log_warn("cache: fetch of inode %" PRIu64 " failed: %s",
			 job->ino, strerror(-rc));
	for (; w; w = next) {
		next = w->next;
		waiter_complete(c, w, rc);
	}
	free(job->key);
	free(job);

	pthread_mutex_lock(&c->fetch_lock);
	if (--c->njobs == 0)
		pthread_cond_broadcast(&c->fetch_idle);
	pthread_mutex_unlock(&c->fetch_lock);
}

static void *worker_main(void *p)
{
	struct cache_worker *wk = p;
	struct cache *c = wk->c;

	pthread_mutex_lock(&c->fetch_lock);
	for (;;) {
		struct cache_fetch_job *job = c->queue_head;
		uint64_t chunk;
		int rc;

		if (!job) {
			if (c->workers_stop)
				break;
			pthread_cond_wait(&c->task_cond, &c->fetch_lock);
			continue;
		}
		c->queue_head = job->qnext;
		if (!c->queue_head)
			c->queue_tail = NULL;
		if (job->fd < 0) {
			/* Off the queue while the temp file is made. */
			pthread_mutex_unlock(&c->fetch_lock);
			rc = job_start(job);
			if (rc) {
				job_set_err(job, rc);
				job_finish(job);
			}
			pthread_mutex_lock(&c->fetch_lock);
			if (!rc)
				queue_push_locked(c, job);
			continue;
		}
		chunk = job->next_chunk++;
		/* To the back of the queue: ranges of all jobs interleave. */
		if (job->next_chunk < job->nchunks)
			queue_push_locked(c, job);
		pthread_mutex_unlock(&c->fetch_lock);
		job_chunk(job, chunk, wk->buf);
		if (atomic_fetch_sub(&job->left, 1) == 1)
			job_finish(job);
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

static struct cache_fetch_job *job_new(struct cache *c, uint64_t ino,
				       const struct cache_obj *obj)
{
	struct cache_fetch_job *job = calloc(1, sizeof(*job));

	if (!job)
		return NULL;
	job->key = strdup(obj->key);
	if (!job->key) {
		free(job);
		return NULL;
	}
	job->c = c;
	job->ino = ino;
	job->size = obj->size;
	job->fd = -1;
	/* An empty object still makes one (empty) range: one finish path. */
	job->nchunks = obj->size ? (obj->size - 1) / c->fetch_chunk + 1 : 1;
	atomic_init(&job->left, job->nchunks);
	atomic_init(&job->err, 0);
	return job;
}

void cache_fetch(struct cache *c, int loop, uint64_t ino,
		 const struct cache_obj *obj, cache_done_fn done, void *arg)
{
	struct sync_wait sw = { .finished = false };
	struct cache_fetch_job *job;
	struct cache_compl *w;

	if (loop >= c->nloops) {
		done(arg, -EINVAL);
		return;
	}
	if (cache_is_local(c, ino)) {
		cache_complete(c, loop, done, arg, 0);
		return;
	}
	w = malloc(sizeof(*w));
	if (!w) {
		done(arg, -ENOMEM);
		return;
	}
	w->loop = loop;
	if (loop < 0) {
		pthread_mutex_init(&sw.lock, NULL);
		pthread_cond_init(&sw.cond, NULL);
		w->done = sync_wake;
		w->arg = &sw;
	} else {
		w->done = done;
		w->arg = arg;
	}

	pthread_mutex_lock(&c->fetch_lock);
	job = job_find_locked(c, ino);
	/*
	 * No job: look again under the lock, since a job leaves the table
	 * only after its rename, so one that just finished is seen here.
	 */
	if (!job && cache_is_local(c, ino)) {
		pthread_mutex_unlock(&c->fetch_lock);
		free(w);
		w = NULL;
		cache_complete(c, loop, done, arg, 0);
		goto out_sync;
	}
	if (!job) {
		job = job_new(c, ino, obj);
		if (!job) {
			pthread_mutex_unlock(&c->fetch_lock);
			free(w);
			w = NULL;
			done(arg, -ENOMEM);
			goto out_sync;
		}
		job->hnext = *job_bucket(c, ino);
		*job_bucket(c, ino) = job;
		c->njobs++;
		queue_push_locked(c, job);
	}
	w->next = job->waiters;
	job->waiters = w;
	pthread_mutex_unlock(&c->fetch_lock);

	if (loop < 0) {
		pthread_mutex_lock(&sw.lock);
		while (!sw.finished)
			pthread_cond_wait(&sw.cond, &sw.lock);
		pthread_mutex_unlock(&sw.lock);
		done(arg, sw.result);
	}
out_sync:
	if (loop < 0) {
		pthread_cond_destroy(&sw.cond);
		pthread_mutex_destroy(&sw.lock);
	}
}

void cache_fetch_cancel(struct cache *c, uint64_t ino)
{
	struct cache_fetch_job *job;

	pthread_mutex_lock(&c->fetch_lock);
	job = job_find_locked(c, ino);
	if (job) {
		job_unhash_locked(c, job);
		job->cancelled = true;
	}
	pthread_mutex_unlock(&c->fetch_lock);
}

int cache_fetch_init(struct cache *c)
{
	int i, rc;

	c->jobs = calloc(CACHE_FETCH_BUCKETS, sizeof(*c->jobs));
	c->workers = calloc((size_t)c->fetch_threads, sizeof(*c->workers));
	if (!c->jobs || !c->workers) {
		rc = -ENOMEM;
		goto out_free;
	}
	pthread_mutex_init(&c->fetch_lock, NULL);
	pthread_cond_init(&c->fetch_idle, NULL);
	pthread_cond_init(&c->task_cond, NULL);
	for (i = 0; i < c->fetch_threads; i++) {
		struct cache_worker *wk = &c->workers[i];

		wk->c = c;
		wk->buf = malloc(c->fetch_chunk);
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
out_free:
	free(c->workers);
	free(c->jobs);
	return rc;
}

void cache_fetch_destroy(struct cache *c)
{
	pthread_mutex_lock(&c->fetch_lock);
	while (c->njobs)
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
	free(c->jobs);
}
