/*
 * cache/ring_int.h - what ring.c offers the files above it: the loops' rings.
 */
#ifndef MAPFS_CACHE_RING_INT_H
#define MAPFS_CACHE_RING_INT_H

#include "cache_int.h"

/* Set up / tear down the loops' rings (cache_open, cache_close). */
int cache_loops_init(struct cache *c);
void cache_loops_destroy(struct cache *c);

#endif
