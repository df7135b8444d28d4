/*
 * cache/compl.c - how other threads hand results to a loop: its
 * completion list, a mutex-protected FIFO, and the eventfd that wakes it
 * (the one its ring signals too).  Below everything that answers a loop's
 * caller from another thread (fetch workers, the journal, kicks).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "cache_int.h"

/* See cache_int.h. */
void cache_loop_wake(struct cache_loop *l)
{
	uint64_t one = 1;

	/* Only fails when the counter is saturated: then it is readable. */
	(void)!write(l->efd, &one, sizeof(one));
}

void cache_post(struct cache *c, struct cache_compl *n)
{
	struct cache_loop *l = &c->loops[n->loop];

	n->next = NULL;
	pthread_mutex_lock(&l->compl_lock);
	if (l->compl_tail)
		l->compl_tail->next = n;
	else
		l->compl_head = n;
	l->compl_tail = n;
	pthread_mutex_unlock(&l->compl_lock);
	cache_loop_wake(l);
}

void cache_complete(struct cache *c, int loop, cache_done_fn done, void *arg,
		    long result)
{
	struct cache_compl *n;

	if (loop < 0 || loop >= c->nloops || !(n = malloc(sizeof(*n)))) {
		done(arg, result);
		return;
	}
	n->done = done;
	n->arg = arg;
	n->result = result;
	n->loop = loop;
	cache_post(c, n);
}

/* See cache_int.h. */
void cache_compl_drain(struct cache_loop *l)
{
	struct cache_compl *n, *next;

	pthread_mutex_lock(&l->compl_lock);
	n = l->compl_head;
	l->compl_head = l->compl_tail = NULL;
	pthread_mutex_unlock(&l->compl_lock);
	for (; n; n = next) {
		next = n->next;
		n->done(n->arg, n->result);
		free(n);
	}
}
