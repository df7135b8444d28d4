/*
 * cache/pin_int.h - what pin.c offers the files above it: a read's pin.
 */
#ifndef MAPFS_CACHE_PIN_INT_H
#define MAPFS_CACHE_PIN_INT_H

#include "cache_int.h"

/*
 * A read of [off, off+len) of ino: -ENODATA unless every chunk of it is
 * readable; else pins the entry (*out, referenced) against eviction until
 * cache_read_unpin().  Notes the access for CLOCK and readahead.
 */
int cache_read_pin(struct cache *c, uint64_t ino, uint64_t off, uint64_t len,
		   struct cache_ent **out);
void cache_read_unpin(struct cache_ent *e);

#endif
