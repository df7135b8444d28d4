/*
 * fs/worker.c - a small pool of worker threads for fs/'s blocking work:
 * store listings (revalidation) and cache I/O that must not run on the db
 * writer thread or on an event loop (the first write of a clean file,
 * truncation after SETATTR).
 */
#include <errno.h>
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
