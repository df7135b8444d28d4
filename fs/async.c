/*
 * fs/async.c - what an `async` export defers (exports(5), as knfsd's):
 * its COMMITs and stable WRITEs answer before the cache file is flushed,
 * and this file flushes them within the window (--async-window): one
 * thread that takes the files asked for since its last round and makes
 * each one's data, name and chunk journal durable (cache_sync, as the
 * COMMIT would have).  The namespace's changes are the database's lazy
 * commits (db_submit_lazy, fs_submit), flushed within the same window.
 * A crash of the process loses nothing (the kernel has the writes); a
 * crash of the machine may lose the last window's.  A sync export's
 * promises are untouched: its COMMIT still waits for its own flush.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cache.h"
#include "common/log.h"
#include "fs_int.h"

struct fs_async {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	uint64_t *inos; /* asked for since the last round */
	size_t n, cap;
	uint64_t due_ms; /* the first one's window ends (0: none asked) */
	bool stop;
	pthread_t thread;
	uint32_t window_ms;
};

static void sync_done(void *arg, long res)
{
	(void)arg;
	/* -ENODATA: removed meanwhile.  Else the upload's own flush, which
	 * every upload makes before it marks a file clean, is the next. */
	if (res < 0 && res != -ENODATA)
		log_warn("fs: an async export's deferred flush failed: %s",
			 strerror((int)-res));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void *async_main(void *p)
{
	struct fs *fs = p;
	struct fs_async *a = fs->async;

	pthread_mutex_lock(&a->lock);
	while (!a->stop || a->n) {
		if (!a->n) {
			pthread_cond_wait(&a->wake, &a->lock);
			continue;
		}
		uint64_t now = fs_now_ms();

		if (!a->stop && now < a->due_ms) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += (time_t)((a->due_ms - now) / 1000);
			ts.tv_nsec +=
				(long)((a->due_ms - now) % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&a->wake, &a->lock, &ts);
			continue;
		}
		uint64_t *inos = a->inos;
		size_t n = a->n;

		a->inos = NULL;
		a->n = a->cap = 0;
		a->due_ms = 0;
		pthread_mutex_unlock(&a->lock);
		qsort(inos, n, sizeof(*inos), cmp_u64);
		for (size_t i = 0; i < n; i++)
			if (!i || inos[i] != inos[i - 1])
				cache_sync(fs->cache, -1, inos[i], sync_done,
					   NULL);
		free(inos);
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
	pthread_cond_init(&a->wake, NULL);
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
	a->stop = true; /* what was asked for is flushed first */
	pthread_cond_signal(&a->wake);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->thread, NULL);
	pthread_cond_destroy(&a->wake);
	pthread_mutex_destroy(&a->lock);
	free(a->inos);
	free(a);
	fs->async = NULL;
}

int fs_async_defer(struct fs *fs, uint64_t ino)
{
	struct fs_async *a = fs->async;
	int rc = 0;

	pthread_mutex_lock(&a->lock);
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		uint64_t *n = realloc(a->inos, cap * sizeof(*n));

		if (!n) {
			rc = -ENOMEM; /* the caller flushes it now */
			goto out;
		}
		a->inos = n;
		a->cap = cap;
	}
	a->inos[a->n++] = ino;
	if (!a->due_ms) {
		a->due_ms = fs_now_ms() + a->window_ms;
		pthread_cond_signal(&a->wake);
	}
out:
	pthread_mutex_unlock(&a->lock);
	return rc;
}
