/*
 * fs/worker.c - a small pool of worker threads for fs/'s blocking work:
 * store listings (revalidation) and cache I/O that must not run on the db
 * writer thread or on an event loop (the first write of a clean file,
 * truncation after SETATTR); and fs_each_parallel, many store requests at
 * once on threads of their own (uploads of small files, HEADs of a
 * listing).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "fs_int.h"

static void *worker_main(void *p)
{
	struct fs *fs = p;

	pthread_mutex_lock(&fs->job_lock);
	for (;;) {
		while (!fs->job_head && !fs->job_stop)
			pthread_cond_wait(&fs->job_wake, &fs->job_lock);
		struct fs_job *j = fs->job_head;

		if (!j)
			break; /* stopping and drained */
		fs->job_head = j->next;
		if (!fs->job_head)
			fs->job_tail = &fs->job_head;
		pthread_mutex_unlock(&fs->job_lock);
		j->fn(fs, j->arg);
		free(j);
		pthread_mutex_lock(&fs->job_lock);
	}
	pthread_mutex_unlock(&fs->job_lock);
	return NULL;
}

int fs_workers_start(struct fs *fs)
{
	int rc;

	pthread_mutex_init(&fs->job_lock, NULL);
	pthread_cond_init(&fs->job_wake, NULL);
	fs->job_tail = &fs->job_head;
	for (fs->nworkers = 0; fs->nworkers < FS_WORKERS; fs->nworkers++) {
		rc = -pthread_create(&fs->workers[fs->nworkers], NULL,
				     worker_main, fs);
		if (rc) {
			fs_workers_stop(fs);
			return rc;
		}
		pthread_setname_np(fs->workers[fs->nworkers], "fs-worker");
	}
	return 0;
}

/* Runs every queued job, then joins the threads. */
void fs_workers_stop(struct fs *fs)
{
	pthread_mutex_lock(&fs->job_lock);
	fs->job_stop = true;
	pthread_cond_broadcast(&fs->job_wake);
	pthread_mutex_unlock(&fs->job_lock);
	for (int i = 0; i < fs->nworkers; i++)
		pthread_join(fs->workers[i], NULL);
	fs->nworkers = 0;
}

void fs_workers_free(struct fs *fs)
{
	pthread_cond_destroy(&fs->job_wake);
	pthread_mutex_destroy(&fs->job_lock);
}

void fs_defer(struct fs *fs, void (*fn)(struct fs *, void *), void *arg)
{
	struct fs_job *j = malloc(sizeof(*j));

	if (!j) {
		fn(fs, arg); /* blocking the caller beats losing the job */
		return;
	}
	j->fn = fn;
	j->arg = arg;
	j->next = NULL;
	pthread_mutex_lock(&fs->job_lock);
	if (fs->job_stop) {
		/* Stopped (fs_close): a late job of the follower runs here. */
		pthread_mutex_unlock(&fs->job_lock);
		free(j);
		fn(fs, arg);
		return;
	}
	*fs->job_tail = j;
	fs->job_tail = &j->next;
	pthread_cond_signal(&fs->job_wake);
	pthread_mutex_unlock(&fs->job_lock);
}

struct each {
	void (*fn)(void *arg, size_t i);
	void *arg;
	size_t n;
	atomic_size_t next;
};

static void *each_thread(void *p)
{
	struct each *e = p;
	size_t i;

	while ((i = atomic_fetch_add(&e->next, 1)) < e->n)
		e->fn(e->arg, i);
	return NULL;
}

void fs_each_parallel(size_t n, size_t par, void (*fn)(void *arg, size_t i),
		      void *arg)
{
	struct each e = { .fn = fn, .arg = arg, .n = n };
	pthread_t t[FS_PARALLEL_MAX];
	size_t nt = n < par ? n : par, started;

	atomic_init(&e.next, 0);
	if (nt > FS_PARALLEL_MAX)
		nt = FS_PARALLEL_MAX;
	for (started = 0; nt > 1 && started < nt - 1; started++)
		if (pthread_create(&t[started], NULL, each_thread, &e))
			break;
	each_thread(&e); /* this thread is one of them */
	for (size_t i = 0; i < started; i++)
		pthread_join(t[i], NULL);
}
