/*
 * cache/settle_int.h - what settle.c offers the files above it: landed chunks made
 * durable.
 */
#ifndef MAPFS_CACHE_SETTLE_INT_H
#define MAPFS_CACHE_SETTLE_INT_H

#include "cache_int.h"

/*
 * settle.c: landed chunks become durable.  Fetched chunks are readable
 * (PRESENT) as soon as their bytes are in the cache file, but stay BUSY
 * (no write, no eviction) until one thread, batching many chunks into
 * one fdatasync per file, has made their bytes durable and journaled
 * them present: a present record never points at bytes a crash can
 * lose, and no fetch waits for the disk.  cache_settle_add takes the
 * list of tasks (each holding its entry) whose chunks landed; it counts
 * them finished (cache_tasks_finished) once they are settled.
 */
int cache_settle_start(struct cache *c);
/* Settle what is queued, then stop the thread. */
void cache_settle_stop(struct cache *c);
void cache_settle_add(struct cache *c, struct cache_task *list);

#endif
