/*
 * cache/chunks.c - the chunk state of every local inode, in memory and in
 * LMDB.
 *
 * Memory: a table of entries (one per local inode) sharded by inode hash,
 * a mutex per shard held only to look at or change state bits, never
 * across a syscall.  This is what a READ hit consults.
 *
 * LMDB ("chunks"): key ino (u64 BE) || idx (u32 BE) -> one byte of
 * CH_PRESENT | CH_DIRTY; idx CACHE_HDR_IDX holds the entry itself (its
 * store limit, u64); "chunk_size" the chunk size they were made with.  Changes are queued through db/'s group commit in
 * the order they were made in memory (they are queued under the shard
 * lock), so the journal replays them in order.  The rules that make a
 * crash safe:
 *   - a fetched chunk is journaled present only after its bytes (and
 *     the file's name) are fsynced (settle.c), so a present record never
 *     points at missing data; a lost present record only costs a second
 *     fetch.  Memory may be ahead: a landed chunk is readable at once;
 *   - an evicted chunk's record is deleted, durably, before the hole is
 *     punched (evict.c);
 *   - a truncate cuts the file before it journals the new limit, and the
 *     load clamps each limit to its file's size, so bytes past a cut are
 *     never fetched from the store again.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_int.h"
#include "chunks_int.h"
#include "common/log.h"
#include "db/db.h"

#define CACHE_HDR_IDX UINT32_MAX
#define CACHE_DBKEY_LEN 12
/* The chunk size the records were written with (chunk indices depend on
 * it), under a key no (ino, idx) key can equal. */
#define CACHE_CS_KEY "chunk_size"

struct cache_jop {
	struct cache *c;
	struct cache_ent *e;       /* referenced, or NULL */
	struct cache_compl *after; /* delivered once durable, or NULL */
	uint64_t ino, seq, limit;
	bool del_all, set_limit;
	bool lazy; /* committed unflushed: j_dur does not move for it */
	size_t n;
	struct cache_jrec recs[];
};

static uint64_t ent_hash(uint64_t ino)
{
	return ino * 0x9e3779b97f4a7c15ull;
}

struct cache_entshard *cache_ent_shard(struct cache *c, uint64_t ino)
{
	return &c->ents[(ent_hash(ino) >> 58) % CACHE_ENT_SHARDS];
}

static struct cache_ent **ent_bucket(struct cache_entshard *s, uint64_t ino)
{
	return &s->buckets[(ent_hash(ino) >> 32) % CACHE_ENT_BUCKETS];
}

struct cache_ent *cache_ent_find_locked(struct cache_entshard *s, uint64_t ino)
{
	for (struct cache_ent *e = *ent_bucket(s, ino); e; e = e->hnext)
		if (e->ino == ino)
			return e;
	return NULL;
}

void cache_ent_get(struct cache_ent *e)
{
	atomic_fetch_add(&e->refs, 1);
}

void cache_ent_put(struct cache_ent *e)
{
	if (atomic_fetch_sub(&e->refs, 1) != 1)
		return;
	pthread_mutex_destroy(&e->land_lock);
	free(e->st);
	free(e->key);
	free(e);
}

int cache_ent_reserve_locked(struct cache_ent *e, uint64_t idx)
{
	uint64_t n = e->nst ? e->nst : 16;
	uint8_t *st;

	if (idx < e->nst)
		return 0;
	if (idx >= CACHE_HDR_IDX)
		return -EFBIG;
	while (n <= idx)
		n *= 2;
	if (n > CACHE_HDR_IDX)
		n = CACHE_HDR_IDX;
	st = realloc(e->st, n);
	if (!st)
		return -ENOMEM;
	memset(st + e->nst, 0, n - e->nst);
	e->st = st;
	e->nst = (uint32_t)n;
	return 0;
}

void cache_chunk_set_locked(struct cache *c, struct cache_ent *e, uint64_t i,
			    uint8_t st)
{
	uint8_t old = e->st[i];

	if ((old & CH_PRESENT) && !(st & CH_PRESENT))
		atomic_fetch_sub(&c->used, c->cs);
	else if (!(old & CH_PRESENT) && (st & CH_PRESENT))
		atomic_fetch_add(&c->used, c->cs);
	if ((old & CH_DIRTY) && !(st & CH_DIRTY))
		atomic_fetch_sub(&c->dirty, c->cs);
	else if (!(old & CH_DIRTY) && (st & CH_DIRTY))
		atomic_fetch_add(&c->dirty, c->cs);
	e->st[i] = st;
}

static struct cache_ent *ent_new(uint64_t ino, uint64_t limit)
{
	struct cache_ent *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->ino = ino;
	e->limit = limit;
	atomic_init(&e->refs, 1);
	atomic_init(&e->pins, 0);
	atomic_init(&e->j_dur, 0);
	atomic_init(&e->wseq, 0);
	atomic_init(&e->writing, 0);
	atomic_init(&e->low_written, 0);
	atomic_init(&e->end_written, 0);
	atomic_init(&e->sgen, 0);
	e->ra_last = UINT64_MAX;
	pthread_mutex_init(&e->land_lock, NULL);
	return e;
}

static void ent_insert_locked(struct cache_entshard *s, struct cache_ent *e)
{
	struct cache_ent **b = ent_bucket(s, e->ino);

	e->hnext = *b;
	*b = e;
}

struct cache_ent *cache_ent_unhash_locked(struct cache_entshard *s,
					  uint64_t ino)
{
	for (struct cache_ent **pp = ent_bucket(s, ino); *pp;
	     pp = &(*pp)->hnext) {
		struct cache_ent *e = *pp;

		if (e->ino == ino) {
			*pp = e->hnext;
			e->dead = true;
			return e;
		}
	}
	return NULL;
}

static void dbkey(uint64_t ino, uint32_t idx, uint8_t out[CACHE_DBKEY_LEN])
{
	for (int i = 0; i < 8; i++)
		out[i] = (uint8_t)(ino >> (56 - 8 * i));
	for (int i = 0; i < 4; i++)
		out[8 + i] = (uint8_t)(idx >> (24 - 8 * i));
}

static void dbkey_parse(const uint8_t *k, uint64_t *ino, uint32_t *idx)
{
	*ino = 0;
	*idx = 0;
	for (int i = 0; i < 8; i++)
		*ino = *ino << 8 | k[i];
	for (int i = 0; i < 4; i++)
		*idx = *idx << 8 | k[8 + i];
}

static int put_rec(struct cache *c, struct db_txn *txn, uint64_t ino,
		   uint32_t idx, const void *val, size_t len)
{
	uint8_t kb[CACHE_DBKEY_LEN];
	struct db_val k = { sizeof(kb), kb }, v = { len, (void *)val };

	dbkey(ino, idx, kb);
	return db_put(txn, c->dbi_chunks, &k, &v, 0);
}

static int del_rec(struct cache *c, struct db_txn *txn, uint64_t ino,
		   uint32_t idx)
{
	uint8_t kb[CACHE_DBKEY_LEN];
	struct db_val k = { sizeof(kb), kb };
	int rc;

	dbkey(ino, idx, kb);
	rc = db_del(txn, c->dbi_chunks, &k);
	return rc == -ENOENT ? 0 : rc;
}

static int del_all(struct cache *c, struct db_txn *txn, uint64_t ino)
{
	uint8_t kb[CACHE_DBKEY_LEN];
	struct db_val k = { sizeof(kb), kb }, v;
	struct db_cursor *cur;
	int rc = db_cursor_open(txn, c->dbi_chunks, &cur);

	if (rc)
		return rc;
	dbkey(ino, 0, kb);
	for (int op = DB_SET_RANGE;; op = DB_NEXT) {
		uint64_t kino;
		uint32_t idx;
		int mrc = db_cursor_get(cur, &k, &v, op);

		if (mrc) {
			rc = mrc == -ENOENT ? 0 : mrc;
			break;
		}
		if (k.size != CACHE_DBKEY_LEN)
			break;
		dbkey_parse(k.data, &kino, &idx);
		if (kino != ino)
			break;
		if ((rc = db_cursor_del(cur)))
			break;
	}
	db_cursor_close(cur);
	return rc;
}

int cache_rec_put_txn(struct cache *c, struct db_txn *txn, uint64_t ino,
		      uint32_t idx, uint8_t st)
{
	st &= CH_PRESENT | CH_DIRTY;
	return st ? put_rec(c, txn, ino, idx, &st, 1)
		  : del_rec(c, txn, ino, idx);
}

int cache_limit_put_txn(struct cache *c, struct db_txn *txn, uint64_t ino,
			uint64_t limit)
{
	return put_rec(c, txn, ino, CACHE_HDR_IDX, &limit, sizeof(limit));
}

static int jop_apply(struct db_txn *txn, void *arg)
{
	struct cache_jop *op = arg;
	struct cache *c = op->c;
	int rc = 0;

	if (op->del_all)
		rc = del_all(c, txn, op->ino);
	if (!rc && op->set_limit)
		rc = cache_limit_put_txn(c, txn, op->ino, op->limit);
	for (size_t i = 0; !rc && i < op->n; i++)
		rc = cache_rec_put_txn(c, txn, op->ino, op->recs[i].idx,
				       op->recs[i].st);
	return rc;
}

static void jop_done(void *arg, int err)
{
	struct cache_jop *op = arg;

	if (err)
		log_error("cache: journal of inode %" PRIu64 " failed: %s",
			  op->ino, strerror(-err));
	if (op->e && !op->lazy) {
		uint_fast64_t cur = atomic_load(&op->e->j_dur);

		/* Groups finish in order, but keep the max to be sure. */
		while (cur < op->seq && !atomic_compare_exchange_weak(
						&op->e->j_dur, &cur, op->seq))
			;
	}
	if (op->e)
		cache_ent_put(op->e);
	if (op->after) {
		if (err && op->after->result >= 0)
			op->after->result = err;
		if (op->after->loop >= 0) {
			cache_post(op->c, op->after);
		} else {
			op->after->done(op->after->arg, op->after->result);
			free(op->after);
		}
	}
	free(op);
}

bool cache_journal_wait_locked(struct cache *c, struct cache_ent *e,
			       struct cache_compl *n)
{
	struct cache_jop *op;

	if (atomic_load(&e->j_dur) >= e->j_sub)
		return false;
	op = malloc(sizeof(*op));
	if (!op) {
		/* Wait the slow way: nothing else can tell us. */
		n->result = -ENOMEM;
		return false;
	}
	*op = (struct cache_jop){ .c = c, .e = e, .ino = e->ino, .after = n };
	cache_ent_get(e);
	op->seq = ++e->j_sub;
	db_submit(c->db, jop_apply, jop_done, op);
	return true;
}

int cache_write_mark(struct cache *c, uint64_t ino, uint64_t off, uint64_t len,
		     struct cache_ent **out)
{
	struct cache_entshard *s = cache_ent_shard(c, ino);
	struct cache_jrec stack[4], *recs = stack;
	uint64_t first, last;
	struct cache_ent *e;
	size_t n = 0;
	int rc = 0;

	if (off > INT64_MAX || len > INT64_MAX - off)
		return -EFBIG;
	pthread_mutex_lock(&s->lock);
	e = cache_ent_find_locked(s, ino);
	if (!e) {
		pthread_mutex_unlock(&s->lock);
		return -ENODATA;
	}
	if (!len)
		goto out_ok;
	/*
	 * Cleaned since the namespace last marked the file dirty: a writer
	 * that read the record before that clean's commit saw it dirty and
	 * would not mark it, and its bytes would never be uploaded.
	 */
	if (e->clean_epoch != e->marked_epoch) {
		rc = -EUCLEAN;
		goto out_unlock;
	}
	cache_chunk_span(c, off, len, &first, &last);
	if (last - first + 1 > sizeof(stack) / sizeof(stack[0])) {
		recs = malloc((last - first + 1) * sizeof(*recs));
		if (!recs) {
			rc = -ENOMEM;
			goto out_unlock;
		}
	}
	rc = cache_ent_reserve_locked(e, last);
	for (uint64_t i = first; !rc && i <= last; i++) {
		uint64_t lo = i * c->cs, hi = lo + c->cs;

		if (hi > e->limit)
			hi = e->limit > lo ? e->limit : lo;
		/* A fetch or eviction owns it, or the write leaves some of
		 * its stored bytes to a fetch not yet made: read first. */
		if ((e->st[i] & CH_BUSY) || (!cache_chunk_readable(c, e, i) &&
					     !(off <= lo && off + len >= hi)))
			rc = -ENODATA;
	}
	/*
	 * Journaled: only chunks that begin below the store limit.  One
	 * past it reads from the cache file whatever its record says (a
	 * hole or bytes written here) and is never fetched, so after a
	 * crash it needs no record; cache_clean() journals it when an
	 * upload moves the limit past it.  A new file's writes, and a
	 * file's growth, touch no LMDB, and their COMMIT waits for none.
	 */
	for (uint64_t i = first; !rc && i <= last; i++) {
		uint8_t st = e->st[i];

		if ((st & (CH_PRESENT | CH_DIRTY)) != (CH_PRESENT | CH_DIRTY) &&
		    i * c->cs < e->limit)
			recs[n++] = (struct cache_jrec){
				.idx = (uint32_t)i, .st = CH_PRESENT | CH_DIRTY
			};
		cache_chunk_set_locked(c, e, i, CH_PRESENT | CH_DIRTY | CH_REF);
	}
	if (!rc && n)
		cache_journal(c, e, ino, false, false, 0, recs, n);
out_ok:
	if (!rc) {
		atomic_fetch_add(&e->writing, 1);
		atomic_fetch_add(&e->wseq, 1);
		cache_ent_get(e);
		*out = e;
	}
out_unlock:
	pthread_mutex_unlock(&s->lock);
	if (recs != stack)
		free(recs);
	return rc;
}

/* See cache.h: a cache_change is its entry, held. */
struct cache_change *cache_change_begin(struct cache *c, uint64_t ino)
{
	struct cache_entshard *s = cache_ent_shard(c, ino);
	struct cache_ent *e;

	pthread_mutex_lock(&s->lock);
	e = cache_ent_find_locked(s, ino);
	if (e) {
		cache_ent_get(e);
		atomic_fetch_add(&e->writing, 1);
		atomic_fetch_add(&e->wseq, 1);
	}
	pthread_mutex_unlock(&s->lock);
	return (struct cache_change *)e;
}

/* The end of a write or a change: the second tick of the write count,
 * the stat snapshot stale, cleans allowed again, the entry let go. */
static void change_end(struct cache_ent *e)
{
	atomic_fetch_add(&e->wseq, 1);
	cache_ent_touched(e);
	atomic_fetch_sub(&e->writing, 1);
	cache_ent_put(e);
}

void cache_change_done(struct cache_change *ch)
{
	if (ch)
		change_end((struct cache_ent *)ch);
}

void cache_ent_written_at(struct cache_ent *e, uint64_t off)
{
	uint64_t cur = atomic_load(&e->low_written);

	while (off < cur &&
	       !atomic_compare_exchange_weak(&e->low_written, &cur, off))
		;
}

void cache_write_unmark(struct cache_ent *e, uint64_t off, uint64_t end)
{
	uint64_t cur = atomic_load(&e->end_written);

	/* The bytes are in: an early part read before now is suspect. */
	cache_ent_written_at(e, off);
	while (off != UINT64_MAX && end > cur &&
	       !atomic_compare_exchange_weak(&e->end_written, &cur, end))
		;
	/* The second tick: an upload that read the file while this write
	 * was in flight cannot match the count it saw once the write is
	 * done; until then (the count as at the first tick) writing keeps
	 * cache_clean() off. */
	change_end(e);
}

uint64_t cache_journal(struct cache *c, struct cache_ent *e, uint64_t ino,
		       bool del, bool set_limit, uint64_t limit,
		       const struct cache_jrec *recs, size_t n)
{
	struct cache_jop *op = malloc(sizeof(*op) + n * sizeof(*recs));
	uint64_t seq;

	if (!op) {
		log_error("cache: no memory to journal inode %" PRIu64, ino);
		return 0;
	}
	*op = (struct cache_jop){ .c = c,
				  .e = e,
				  .ino = ino,
				  .limit = limit,
				  .del_all = del,
				  .set_limit = set_limit,
				  .lazy = true,
				  .n = n };
	if (n)
		memcpy(op->recs, recs, n * sizeof(*recs));
	if (e) {
		cache_ent_get(e);
		op->seq = ++e->j_sub;
	}
	seq = op->seq;
	/* op belongs to the writer from here: it may be done and freed.
	 * Nobody waits for it: it is flushed with the next durable commit
	 * or within the writer's lazy window, and whoever needs it durable
	 * (a COMMIT, a synced WRITE) waits for a durable op of its own
	 * (cache_journal_wait_locked, journal_sync_blocking), which the
	 * log's order makes durable with everything before it.  Before,
	 * each was a durable commit of its own: a REMOVE's (its records
	 * dropped) cost a second flush after the REMOVE's. */
	db_submit_background(c->db, jop_apply, jop_done, op);
	return seq;
}

/* A fresh, empty cache file of size bytes for ino, installed in fdtab. */
static int file_make(struct cache *c, uint64_t ino, uint64_t size)
{
	char name[CACHE_NAME_MAX];
	int fd;

	cache_name(ino, name);
	/* A recycled file when there is one (spare.c): no inode to make. */
	fd = cache_spare_take(c, cache_dirfd(c, ino), name);
	if (fd == -ENOENT) {
		/* Unlink first: an fd still open on the old file keeps
		 * writing to that one, never into the new file. */
		if (unlinkat(cache_dirfd(c, ino), name, 0) && errno != ENOENT)
			return -errno;
		fd = openat(cache_dirfd(c, ino), name,
			    O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
	} else if (fd < 0) {
		return fd;
	}
	cache_dir_changed(c, ino);
	if (size && ftruncate(fd, (off_t)size) < 0) {
		int rc = -errno;

		close(fd);
		unlinkat(cache_dirfd(c, ino), name, 0);
		return rc;
	}
	cache_fd_install(c, ino, fd, name);
	return 0;
}

int cache_ent_attach(struct cache *c, uint64_t ino, uint64_t size,
		     struct cache_ent **out)
{
	struct cache_entshard *s = cache_ent_shard(c, ino);
	struct cache_ent *e;
	int rc = 0;

	if (size > INT64_MAX)
		return -EFBIG;
	pthread_mutex_lock(&s->lock);
	e = cache_ent_find_locked(s, ino);
	if (e)
		cache_ent_get(e);
	pthread_mutex_unlock(&s->lock);
	if (e) {
		*out = e;
		return 0;
	}
	pthread_mutex_lock(&c->attach_lock);
	pthread_mutex_lock(&s->lock);
	e = cache_ent_find_locked(s, ino);
	if (e)
		cache_ent_get(e);
	pthread_mutex_unlock(&s->lock);
	if (e)
		goto out_unlock;
	e = ent_new(ino, size);
	if (!e) {
		rc = -ENOMEM;
		goto out_unlock;
	}
	rc = file_make(c, ino, size);
	if (rc) {
		cache_ent_put(e);
		e = NULL;
		goto out_unlock;
	}
	pthread_mutex_lock(&s->lock);
	ent_insert_locked(s, e);
	cache_ent_get(e);
	cache_journal(c, e, ino, true, true, size, NULL, 0);
	pthread_mutex_unlock(&s->lock);
out_unlock:
	pthread_mutex_unlock(&c->attach_lock);
	*out = e;
	return rc;
}

int cache_ents_init(struct cache *c)
{
	int rc = db_table_open(c->db, "chunks", 0, &c->dbi_chunks);

	if (rc)
		return rc;
	pthread_mutex_init(&c->attach_lock, NULL);
	for (int i = 0; i < CACHE_ENT_SHARDS; i++)
		pthread_mutex_init(&c->ents[i].lock, NULL);
	return 0;
}

/* At close nothing else runs: only the table's references remain. */
void cache_ents_destroy(struct cache *c)
{
	for (int i = 0; i < CACHE_ENT_SHARDS; i++) {
		struct cache_entshard *s = &c->ents[i];

		for (int b = 0; b < CACHE_ENT_BUCKETS; b++) {
			struct cache_ent *e = s->buckets[b], *next;

			for (; e; e = next) {
				next = e->hnext;
				cache_ent_put(e);
			}
		}
		pthread_mutex_destroy(&s->lock);
	}
	pthread_mutex_destroy(&c->attach_lock);
}

/*
 * Check a loaded entry against its file (start-up: nothing else runs, so
 * no lock): a file that is gone takes the entry with it (false); a file
 * shorter than the limit was cut by a truncate whose journal entry the
 * crash lost.
 */
static bool ent_check_file(struct cache *c, struct cache_ent *e)
{
	char name[CACHE_NAME_MAX];
	struct stat sb;

	cache_name(e->ino, name);
	if (e->limit != UINT64_MAX &&
	    fstatat(cache_dirfd(c, e->ino), name, &sb, 0) == 0) {
		if ((uint64_t)sb.st_size < e->limit) {
			e->limit = (uint64_t)sb.st_size;
			cache_journal(c, e, e->ino, false, true, e->limit, NULL,
				      0);
		}
		return true;
	}
	/* No header (the remains of a drop) or no file: forget it all. */
	if (e->limit != UINT64_MAX)
		log_warn("cache: inode %" PRIu64 " lost its cache file",
			 e->ino);
	for (uint64_t i = 0; i < e->nst; i++)
		cache_chunk_set_locked(c, e, i, 0);
	cache_journal(c, NULL, e->ino, true, false, 0, NULL, 0);
	return false;
}

static int cs_put_apply(struct db_txn *txn, void *arg)
{
	struct cache *c = arg;
	struct db_val k = { strlen(CACHE_CS_KEY), CACHE_CS_KEY };
	struct db_val v = { sizeof(c->cs), &c->cs };

	return db_put(txn, c->dbi_chunks, &k, &v, 0);
}

/*
 * The records hold chunk indices: with another chunk size they would
 * point at the wrong bytes.  Refuse rather than serve or lose data.
 */
static int cs_check(struct cache *c, struct db_txn *txn, bool *known)
{
	struct db_val k = { strlen(CACHE_CS_KEY), CACHE_CS_KEY }, v;
	uint64_t cs;
	int rc = db_get(txn, c->dbi_chunks, &k, &v);

	*known = rc == 0;
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (v.size != sizeof(cs))
		return -EIO;
	memcpy(&cs, v.data, sizeof(cs));
	if (cs != c->cs) {
		log_error("cache: made with chunk size %" PRIu64
			  ", not %" PRIu64
			  ": start with that size, or remove the cache and "
			  "its database after an upload of everything dirty",
			  cs, c->cs);
		return -EINVAL;
	}
	return 0;
}

int cache_ents_load(struct cache *c)
{
	struct cache_ent *e = NULL, *loaded = NULL;
	struct db_cursor *cur = NULL;
	struct db_txn *txn;
	struct db_val k, v;
	bool known;
	int rc = db_read_begin(c->db, &txn);

	if (rc)
		return rc;
	rc = cs_check(c, txn, &known);
	if (!rc)
		rc = db_cursor_open(txn, c->dbi_chunks, &cur);
	for (int op = DB_FIRST; !rc; op = DB_NEXT) {
		uint64_t ino;
		uint32_t idx;
		int mrc = db_cursor_get(cur, &k, &v, op);

		if (mrc) {
			rc = mrc == -ENOENT ? 0 : mrc;
			break;
		}
		if (k.size != CACHE_DBKEY_LEN)
			continue;
		dbkey_parse(k.data, &ino, &idx);
		/* The header sorts last: chunks come before their entry. */
		if (!e || e->ino != ino) {
			e = ent_new(ino, UINT64_MAX);
			if (!e) {
				rc = -ENOMEM;
				break;
			}
			/* Chained on hnext until inserted below. */
			e->hnext = loaded;
			loaded = e;
		}
		if (idx == CACHE_HDR_IDX) {
			if (v.size == sizeof(uint64_t))
				memcpy(&e->limit, v.data, sizeof(e->limit));
			continue;
		}
		if (v.size != 1 || (rc = cache_ent_reserve_locked(e, idx)))
			continue;
		cache_chunk_set_locked(c, e, idx,
				       *(uint8_t *)v.data &
					       (CH_PRESENT | CH_DIRTY));
	}
	if (cur)
		db_cursor_close(cur);
	db_read_end(c->db, txn);
	if (!rc && !known)
		rc = db_write(c->db, cs_put_apply, c);
	while (loaded) {
		e = loaded;
		loaded = e->hnext;
		if (!rc && ent_check_file(c, e))
			ent_insert_locked(cache_ent_shard(c, e->ino), e);
		else
			cache_ent_put(e);
	}
	return rc;
}
