/*
 * cache/chunks_int.h - what chunks.c offers the files above it: the entry table, the
 * journal, write marks.
 */
#ifndef MAPFS_CACHE_CHUNKS_INT_H
#define MAPFS_CACHE_CHUNKS_INT_H

#include "cache_int.h"

/* chunks.c: the entry table and the journal. */
/* Open the "chunks" database and the shard locks.  0 or -errno. */
int cache_ents_init(struct cache *c);
/* Free every entry (nothing else may run; journal ops drained). */
void cache_ents_destroy(struct cache *c);
/* The shard that holds ino's entry; its lock guards the entry's state. */
struct cache_entshard *cache_ent_shard(struct cache *c, uint64_t ino);
/* ino's live entry (no reference taken), or NULL. */
struct cache_ent *cache_ent_find_locked(struct cache_entshard *s, uint64_t ino);
/* Take / drop a reference; the last put frees the entry. */
void cache_ent_get(struct cache_ent *e);
void cache_ent_put(struct cache_ent *e);
/* Make room for chunk index idx in e->st.  0 or -ENOMEM. */
int cache_ent_reserve_locked(struct cache_ent *e, uint64_t idx);
/*
 * The local entry of ino, made if missing (an empty sparse file of size
 * bytes and limit size, journaled) with a reference for the caller.
 */
int cache_ent_attach(struct cache *c, uint64_t ino, uint64_t size,
		     struct cache_ent **out);
/* Unhash ino's entry (dead from now on); returns it with the table's
 * reference, or NULL.  Its waiters are the caller's to answer. */
struct cache_ent *cache_ent_unhash_locked(struct cache_entshard *s,
					  uint64_t ino);
/* One journal change of an entry (chunks.c), see cache_journal(). */
struct cache_jrec {
	uint32_t idx;
	uint8_t st; /* CH_PRESENT | CH_DIRTY; 0 deletes */
};
/*
 * Queue, in the entry's order (call under its shard lock), a journal
 * change: with del_all every record of ino goes first; with set_limit
 * the store limit is written; then the n chunk records.  e may be NULL
 * (ino dropped).  Returns the op's seq (for e->j_dur), 0 without memory:
 * then the change is lost from the journal only, which errs on the safe
 * side for fetched chunks (fetched again) and is logged for others.
 */
uint64_t cache_journal(struct cache *c, struct cache_ent *e, uint64_t ino,
		       bool del_all, bool set_limit, uint64_t limit,
		       const struct cache_jrec *recs, size_t n);
/* Write one chunk record (st 0: delete it) or the limit, in txn. */
int cache_rec_put_txn(struct cache *c, struct db_txn *txn, uint64_t ino,
		      uint32_t idx, uint8_t st);
int cache_limit_put_txn(struct cache *c, struct db_txn *txn, uint64_t ino,
			uint64_t limit);
/*
 * If some journal op of e may not be durable yet, queue an empty one and
 * deliver n once it is (true); else false: nothing to wait for (or no
 * memory: then n->result is -ENOMEM).  Call under e's shard lock.
 */
bool cache_journal_wait_locked(struct cache *c, struct cache_ent *e,
			       struct cache_compl *n);
/*
 * A write of [off, off+len) of ino: -ENODATA if ino is not local, a chunk
 * is BUSY, or one it covers in part is not readable; else the chunks are
 * marked present and dirty (journaled) and *out is referenced until
 * cache_write_unmark() after the data is in ([off, end): the bytes it
 * wrote, for cache_written_low; off UINT64_MAX: none).
 */
int cache_write_mark(struct cache *c, uint64_t ino, uint64_t off, uint64_t len,
		     struct cache_ent **out);
void cache_write_unmark(struct cache_ent *e, uint64_t off, uint64_t end);
/* Lower e's low_written to off. */
void cache_ent_written_at(struct cache_ent *e, uint64_t off);
/* Load every entry from LMDB (cache_open); -EINVAL if the records were
 * made with another chunk size. */
int cache_ents_load(struct cache *c);
/* Chunk state bits changed for chunk i of e: keep the counters. */
void cache_chunk_set_locked(struct cache *c, struct cache_ent *e, uint64_t i,
			    uint8_t st);

#endif
