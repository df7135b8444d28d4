/*
 * cache/djournal_int.h - what djournal.c offers the files above it: small
 * files' data made durable in the journal, and the flushes that let it go.
 */
#ifndef MAPFS_CACHE_DJOURNAL_INT_H
#define MAPFS_CACHE_DJOURNAL_INT_H

#include "cache_int.h"

/* Set up (cache_open, after c->unflushed): files up to max bytes are
 * journaled (0, or an unflushed cache: never). */
void cache_dj_init(struct cache *c, uint64_t max);
/* e's write count as a record's version: what a flush that starts now
 * covers (compare with cache_dj_forget_locked). */
uint64_t cache_dj_version(struct cache_ent *e);
/*
 * Make e's data durable through the journal instead of a flush of fd
 * (e's file): true if a record of the whole file was queued (or a newer
 * one is), and the caller then waits for e's journal ops (they hold
 * it); false when the file is too big, the journal full, its pages not
 * in memory, or a chunk not the file's: the caller flushes the file.
 * Any thread; takes e's shard lock.
 */
bool cache_dj_try(struct cache *c, struct cache_ent *e, int fd);
/* A flush of e's file that began at version ver (cache_dj_version)
 * succeeded: a record read before it is deleted (queued). */
void cache_dj_forget_locked(struct cache *c, struct cache_ent *e, uint64_t ver);
/* Flush e's file fd (and its directory), then forget what it covers.
 * Blocking.  0 or -errno. */
int cache_dj_flush(struct cache *c, struct cache_ent *e, int fd);
/* e's file was cut or grown to size: its record says so (queued). */
void cache_dj_resize_locked(struct cache *c, struct cache_ent *e,
			    uint64_t size);
/* e left the table: its record (deleted with its other records) no
 * longer counts. */
void cache_dj_retired_locked(struct cache *c, struct cache_ent *e);
/* Start-up, before the entries load: write every record back into its
 * file, flushed, and delete the records.  0 or -errno. */
int cache_dj_replay(struct cache *c);
/* Clean close (loops and journal ops done): flush the cache's files,
 * then delete the records.  0 or -errno. */
int cache_dj_close(struct cache *c);

#endif
