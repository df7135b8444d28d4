/*
 * cache/fetch_int.h - what fetch.c offers the files above it: the worker pool.
 */
#ifndef MAPFS_CACHE_FETCH_INT_H
#define MAPFS_CACHE_FETCH_INT_H

#include "cache_int.h"

/* fetch.c: the worker pool. */
/* Start the fetch workers.  0 or -errno. */
int cache_fetch_init(struct cache *c);
/* Run the task queue dry, stop and join the workers. */
void cache_fetch_destroy(struct cache *c);

#endif
