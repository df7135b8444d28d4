/*
 * common/waiter.h - wait on this thread for a completion another thread
 * calls: the (void *ctx, int err) callbacks of fs/ and db/.
 *
 *   struct waiter w;
 *   waiter_init(&w);
 *   start_async(..., waiter_done, &w);
 *   return waiter_wait(&w);        // the err the callback got
 *
 * The waiter lives on the waiting thread's stack: waiter_done() must be
 * called exactly once, and waiter_wait() returns only after it has let go
 * of the waiter.
 */
#ifndef MAPFS_COMMON_WAITER_H
#define MAPFS_COMMON_WAITER_H

#include <pthread.h>
#include <stdbool.h>

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int err;
};

static inline void waiter_init(struct waiter *w)
{
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->done = false;
	w->err = 0;
}

/* The completion: ctx is the struct waiter. */
static inline void waiter_done(void *ctx, int err)
{
	struct waiter *w = ctx;

	pthread_mutex_lock(&w->lock);
	w->err = err;
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* Block until waiter_done(); free the waiter; its err. */
static inline int waiter_wait(struct waiter *w)
{
	pthread_mutex_lock(&w->lock);
	while (!w->done)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	return w->err;
}

#endif
