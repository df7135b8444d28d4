/*
 * fs/async.c - what an `async` export defers (exports(5), as knfsd's):
 * its COMMITs and stable WRITEs answer before the cache file is flushed,
 * and this file flushes them when the window (--async-window) of the
 * first one ends: one flush of the cache's file system for every file
 * of the window (cache_sync_all: syncfs, then a durable commit for the
 * chunk journal), on a thread of its own.  A file at a time was tried
 * first: under eight writers a window held a thousand files and their
 * fdatasyncs took seconds, far past the window (the power-cut test
 * lost half of what it had been promised a second before the cut).
 *
 * The namespace's changes are the database's lazy commits
 * (db_submit_lazy, fs_submit), flushed within the same window.  A crash
 * of the process loses nothing (the kernel has the writes); a crash of
 * the machine may lose the last window's.  A sync export's promises are
 * untouched: its COMMIT still waits for its own flush.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cache.h"
#include "common/log.h"
#include "common/mono.h"
#include "fs_int.h"

/* The thread's clock (its condition variable's): monotonic, so that a
 * step of the wall clock never stretches a window. */
static uint64_t mono_ms(void)
{
	return mono_ns() / 1000000u;
}

struct fs_async {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	uint64_t due_ms; /* the first deferred flush's window ends (0: none) */
	bool stop;
	pthread_t thread;
	uint32_t window_ms;
};

static void *async_main(void *p)
{
	struct fs *fs = p;
	struct fs_async *a = fs->async;

	pthread_mutex_lock(&a->lock);
	while (!a->stop || a->due_ms) {
		if (!a->due_ms) {
			pthread_cond_wait(&a->wake, &a->lock);
			continue;
		}
		uint64_t now = mono_ms();

		if (!a->stop && now < a->due_ms) {
			struct timespec ts = mono_ts(a->due_ms * 1000000ull);

			pthread_cond_timedwait(&a->wake, &a->lock, &ts);
			continue;
		}
		/* What is deferred from now on waits for the next round. */
		a->due_ms = 0;
		pthread_mutex_unlock(&a->lock);
		int rc = cache_sync_all(fs->cache);

		if (rc)
			log_warn("fs: an async export's flush failed: %s (the "
				 "next upload of each file flushes it)",
				 strerror(-rc));
		pthread_mutex_lock(&a->lock);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

int fs_async_start(struct fs *fs, uint32_t window_ms)
{
	struct fs_async *a = calloc(1, sizeof(*a));
	int rc;

	if (!a)
		return -ENOMEM;
	a->window_ms = window_ms ? window_ms : FS_ASYNC_WINDOW_MS;
	pthread_mutex_init(&a->lock, NULL);
	mono_cond_init(&a->wake);
	fs->async = a;
	rc = -pthread_create(&a->thread, NULL, async_main, fs);
	if (rc) {
		pthread_cond_destroy(&a->wake);
		pthread_mutex_destroy(&a->lock);
		free(a);
		fs->async = NULL;
		return rc;
	}
	pthread_setname_np(a->thread, "fs-async");
	db_set_lazy_window(fs->db, a->window_ms);
	return 0;
}

void fs_async_stop(struct fs *fs)
{
	struct fs_async *a = fs->async;

	if (!a)
		return;
	pthread_mutex_lock(&a->lock);
	a->stop = true; /* what was deferred is flushed first */
	pthread_cond_signal(&a->wake);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->thread, NULL);
	pthread_cond_destroy(&a->wake);
	pthread_mutex_destroy(&a->lock);
	free(a);
	fs->async = NULL;
}

void fs_async_defer(struct fs *fs)
{
	struct fs_async *a = fs->async;

	pthread_mutex_lock(&a->lock);
	if (!a->due_ms) {
		a->due_ms = mono_ms() + a->window_ms;
		pthread_cond_signal(&a->wake);
	}
	pthread_mutex_unlock(&a->lock);
}
