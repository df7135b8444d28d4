/*
 * cache/evict_int.h - what evict.c offers the files above it: the evictor.
 */
#ifndef MAPFS_CACHE_EVICT_INT_H
#define MAPFS_CACHE_EVICT_INT_H

#include "cache_int.h"

/* evict.c: start the evictor thread (only with a capacity), stop it. */
int cache_evict_start(struct cache *c);
void cache_evict_stop(struct cache *c);
/* Wake the evictor if usage is past the high watermark. */
void cache_evict_poke(struct cache *c);

#endif
