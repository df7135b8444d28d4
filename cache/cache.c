/*
 * cache/cache.c - the cache directory: open/close, names, and the
 * synchronous operations on an inode's local data.
 *
 * Layout: DIR/XX/INO, XX the low byte of the inode in hex, INO the inode
 * in 16 hex digits: a sparse file as long as the inode's data, whose
 * chunks hold data as far as the chunk state (chunks.c) says.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_int.h"
#include "chunks_int.h"
#include "tasks_int.h"
#include "evict_int.h"
#include "fetch_int.h"
#include "ring_int.h"
#include "common/log.h"
#include "metrics/metrics.h"
#include "db/db.h"

#define CACHE_DEFAULT_RING_DEPTH 256
#define CACHE_MIN_RING_DEPTH 4
#define CACHE_DEFAULT_CHUNK (1u << 20)
#define CACHE_CHUNK_ALIGN 4096u /* punched holes free whole blocks */
#define CACHE_CHUNK_MAX (1u << 30)
#define CACHE_DEFAULT_READAHEAD (64ull << 20)
#define CACHE_DEFAULT_HIGH_PCT 95
#define CACHE_DEFAULT_LOW_PCT 85
#define CACHE_DEFAULT_FETCH_THREADS 8
#define CACHE_DEFAULT_MAX_OPEN 4096

/*
 * mkdir -p.  A directory created here is fsynced into its parent, so the
 * cache's own skeleton survives a power loss like the files in it.
 */
static int mkdir_p(const char *path)
{
	char buf[PATH_MAX], *slash;
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (slash = buf + 1;; slash++) {
		bool last = *slash == '\0';
		int pfd;

		if (*slash != '/' && !last)
			continue;
		*slash = '\0';
		if (mkdir(buf, 0700) == 0) {
			char *p = strrchr(buf, '/');

			if (p == buf)
				pfd = open("/",
					   O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			else {
				*p = '\0';
				pfd = open(buf,
					   O_RDONLY | O_DIRECTORY | O_CLOEXEC);
				*p = '/';
			}
			if (pfd >= 0) {
				fsync(pfd);
				close(pfd);
			}
		} else if (errno != EEXIST) {
			return -errno;
		}
		if (last)
			return 0;
		*slash = '/';
	}
}

/* Open (creating) subdirectory name of c->rootfd; *created if it was new. */
static int subdir_open(struct cache *c, const char *name, bool *created)
{
	int fd;

	if (mkdirat(c->rootfd, name, 0700) == 0)
		*created = true;
	else if (errno != EEXIST)
		return -errno;
	fd = openat(c->rootfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static void dirs_close(struct cache *c)
{
	for (int i = 0; i < CACHE_NDIRS; i++)
		if (c->dirfd[i] >= 0)
			close(c->dirfd[i]);
	close(c->rootfd);
}

static int dirs_open(struct cache *c, const char *dir)
{
	bool created = false;
	char name[3];
	int rc, i;

	rc = mkdir_p(dir);
	if (rc)
		return rc;
	c->rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->rootfd < 0)
		return -errno;
	for (i = 0; i < CACHE_NDIRS; i++)
		c->dirfd[i] = -1;
	for (i = 0; i < CACHE_NDIRS; i++) {
		snprintf(name, sizeof(name), "%02x", i);
		rc = subdir_open(c, name, &created);
		if (rc < 0)
			goto out_close;
		c->dirfd[i] = rc;
	}
	if (created && fsync(c->rootfd) < 0) {
		rc = -errno;
		goto out_close;
	}
	return 0;

out_close:
	dirs_close(c);
	return rc;
}

/* opts.direct on a file system without O_DIRECT: buffered, said once. */
static void direct_probe(struct cache *c)
{
	static const char name[] = ".direct-probe";
	int fd = openat(c->rootfd, name,
			O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);

	if (fd < 0) {
		log_warn("cache: O_DIRECT refused in the cache directory (%s): "
			 "cache I/O stays buffered",
			 strerror(errno));
		c->direct = false;
		return;
	}
	close(fd);
	unlinkat(c->rootfd, name, 0);
}

int cache_open(const struct cache_opts *opts, struct store *st,
	       struct cache **out)
{
	unsigned max_open, high, low;
	struct cache *c;
	int rc;

	if (!opts->dir || !opts->db || opts->nloops < 0)
		return -EINVAL;
	if (opts->chunk_size && (opts->chunk_size % CACHE_CHUNK_ALIGN ||
				 opts->chunk_size > CACHE_CHUNK_MAX))
		return -EINVAL;
	high = opts->high_pct ? opts->high_pct : CACHE_DEFAULT_HIGH_PCT;
	low = opts->low_pct ? opts->low_pct : CACHE_DEFAULT_LOW_PCT;
	if (high > 100 || low > high)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->st = st;
	c->db = opts->db;
	c->unflushed = db_unflushed(opts->db);
	c->nloops = opts->nloops;
	c->ring_depth =
		opts->ring_depth ? opts->ring_depth : CACHE_DEFAULT_RING_DEPTH;
	/* One round of a synced write takes 3 SQEs (write, data, dir). */
	if (c->ring_depth < CACHE_MIN_RING_DEPTH)
		c->ring_depth = CACHE_MIN_RING_DEPTH;
	c->cs = opts->chunk_size ? opts->chunk_size : CACHE_DEFAULT_CHUNK;
	c->ra_max = opts->readahead ? opts->readahead : CACHE_DEFAULT_READAHEAD;
	c->capacity = opts->capacity;
	/* A window the cache cannot hold would evict itself before use. */
	if (c->capacity && c->ra_max > c->capacity / 4)
		c->ra_max = c->capacity / 4;
	c->high = c->capacity / 100 * high;
	c->low = c->capacity / 100 * low;
	c->fetch_threads = opts->fetch_threads > 0
				   ? opts->fetch_threads
				   : CACHE_DEFAULT_FETCH_THREADS;
	c->direct = opts->direct;
	max_open = opts->max_open ? opts->max_open : CACHE_DEFAULT_MAX_OPEN;
	c->fdtab_cap = (max_open + CACHE_FDTAB_SHARDS - 1) / CACHE_FDTAB_SHARDS;

	rc = dirs_open(c, opts->dir);
	if (rc)
		goto out_free;
	if (c->direct)
		direct_probe(c);
	rc = cache_spare_init(c);
	if (rc)
		goto out_spare;
	cache_fdtab_init(c);
	rc = cache_ents_init(c);
	if (rc)
		goto out_fdtab;
	rc = cache_ents_load(c);
	if (rc)
		goto out_ents;
	rc = cache_loops_init(c);
	if (rc)
		goto out_ents;
	rc = cache_fetch_init(c);
	if (rc)
		goto out_loops;
	rc = cache_evict_start(c);
	if (rc)
		goto out_fetch;
	*out = c;
	return 0;

out_fetch:
	cache_fetch_destroy(c);
out_loops:
	cache_loops_destroy(c);
out_ents:
	/* Journal ops of the load hold entries and use c: let them run. */
	db_write(c->db, NULL, NULL);
	cache_ents_destroy(c);
out_fdtab:
	cache_fdtab_destroy(c);
out_spare:
	cache_spare_destroy(c);
	dirs_close(c);
out_free:
	free(c);
	return rc;
}

void cache_close(struct cache *c)
{
	if (!c)
		return;
	cache_evict_stop(c);
	/* Fetches first: finishing one posts completions to the loops. */
	cache_fetch_destroy(c);
	cache_loops_destroy(c);
	/* Queued journal ops use c and hold entries: wait for them all. */
	db_write(c->db, NULL, NULL);
	cache_ents_destroy(c);
	cache_fdtab_destroy(c);
	cache_spare_destroy(c);
	/* Unflushed, the files go to disk now, before the database they
	 * are journaled in says it was closed cleanly. */
	if (c->unflushed && syncfs(c->rootfd))
		log_warn("cache: flushing at close: %s", strerror(errno));
	dirs_close(c);
	free(c);
}

int cache_sync_all(struct cache *c)
{
	int rc = 0;

	if (c->unflushed)
		return 0; /* its files are a copy (cache.h) */
	if (syncfs(c->rootfd))
		rc = -errno;
	metrics_inc(MET_FLUSH_FILE);
	/* db/ applies in order: an empty change durable means all before
	 * it, the journal's records of these files too. */
	return rc ? rc : db_write(c->db, NULL, NULL);
}

/*
 * Take ino's entry out of the table (dead: nothing lands in it any more)
 * and its chunks out of the counters; answers its waiters -EAGAIN.
 * Under attach_lock.
 */
static struct cache_ent *ent_retire_hold(struct cache *c, uint64_t ino)
{
	struct cache_entshard *s = cache_ent_shard(c, ino);
	struct cache_wait *w = NULL;
	struct cache_ent *e;

	pthread_mutex_lock(&s->lock);
	e = cache_ent_unhash_locked(s, ino);
	if (e) {
		for (uint64_t i = 0; i < e->nst; i++)
			cache_chunk_set_locked(c, e, i, e->st[i] & CH_BUSY);
		w = e->waiters;
		e->waiters = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	cache_waiters_fail(c, w, -EAGAIN);
	return e; /* the table's reference, now the caller's */
}

static void ent_retire(struct cache *c, uint64_t ino)
{
	struct cache_ent *e = ent_retire_hold(c, ino);

	if (e)
		cache_ent_put(e);
}

int cache_create(struct cache *c, uint64_t ino)
{
	struct cache_ent *e;
	int rc;

	pthread_mutex_lock(&c->attach_lock);
	ent_retire(c, ino);
	pthread_mutex_unlock(&c->attach_lock);
	rc = cache_ent_attach(c, ino, 0, &e);
	if (!rc)
		cache_ent_put(e);
	return rc;
}

int cache_truncate(struct cache *c, uint64_t ino, uint64_t size)
{
	struct cache_entshard *s = cache_ent_shard(c, ino);
	struct stat sb;
	struct cache_jrec *recs = NULL;
	struct cache_kick k = { 0 };
	struct cache_ent *e;
	struct cache_fd *f;
	size_t n = 0;
	int rc;

	if (size > INT64_MAX)
		return -EFBIG;
	pthread_mutex_lock(&s->lock);
	e = cache_ent_find_locked(s, ino);
	if (e)
		cache_ent_get(e);
	pthread_mutex_unlock(&s->lock);
	if (!e)
		return -ENODATA;
	rc = cache_fd_get(c, ino, &f);
	if (rc)
		goto out_put;
	/* No fetch may land past the cut once it is made (fetch.c). */
	pthread_mutex_lock(&e->land_lock);
	if (fstat(f->fd, &sb) < 0 || ftruncate(f->fd, (off_t)size) < 0) {
		rc = -errno;
		goto out_unlock;
	}
	pthread_mutex_lock(&s->lock);
	if (e->nst)
		recs = malloc(e->nst * sizeof(*recs));
	if (size < e->limit)
		e->limit = size;
	e->epoch++;
	atomic_fetch_add(&e->wseq, 1);
	/* Bytes from the old end or the new one on changed (a cut, or
	 * zeros added). */
	cache_ent_written_at(
		e, size < (uint64_t)sb.st_size ? size : (uint64_t)sb.st_size);
	if (atomic_load(&e->end_written) > size)
		atomic_store(&e->end_written, size);
	cache_ent_touched(e);
	/* Chunks wholly past the end hold nothing now (a hole). */
	for (uint64_t i = (size + c->cs - 1) / c->cs; i < e->nst; i++) {
		if (!(e->st[i] & (CH_PRESENT | CH_DIRTY)))
			continue;
		if (recs)
			recs[n++] = (struct cache_jrec){ .idx = (uint32_t)i };
		cache_chunk_set_locked(c, e, i, e->st[i] & CH_BUSY);
	}
	/* Without memory for the records the limit alone still says it:
	 * chunks past it read as holes whatever their records claim. */
	cache_journal(c, e, ino, false, true, e->limit, recs, n);
	cache_kick_locked(c, e, &k);
	pthread_mutex_unlock(&s->lock);
	cache_kick_finish(c, &k);
	free(recs);
out_unlock:
	pthread_mutex_unlock(&e->land_lock);
	cache_fd_put(f);
out_put:
	cache_ent_put(e);
	return rc;
}

/* ino's entry with a reference, or NULL. */
static struct cache_ent *ent_ref(struct cache *c, uint64_t ino)
{
	struct cache_entshard *s = cache_ent_shard(c, ino);
	struct cache_ent *e;

	pthread_mutex_lock(&s->lock);
	e = cache_ent_find_locked(s, ino);
	if (e)
		cache_ent_get(e);
	pthread_mutex_unlock(&s->lock);
	return e;
}

/*
 * While dirty, a file's cache file is the authority for its size and
 * times, and GETATTR, LOOKUP, ACCESS and every READ/WRITE post-op
 * attribute ask for them: the fstat is kept per entry and taken again
 * only after something touched the file.
 */
int cache_stat(struct cache *c, uint64_t ino, struct cache_stat *out)
{
	struct cache_entshard *s = cache_ent_shard(c, ino);
	struct cache_ent *e;
	struct cache_fd *f;
	struct stat sb;
	uint64_t gen;
	int rc;

	pthread_mutex_lock(&s->lock);
	e = cache_ent_find_locked(s, ino);
	if (!e) {
		pthread_mutex_unlock(&s->lock);
		return -ENODATA;
	}
	gen = atomic_load(&e->sgen);
	if (e->snap_ok && e->snap_gen == gen) {
		*out = e->snap;
		out->wseq = atomic_load(&e->wseq);
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	cache_ent_get(e);
	pthread_mutex_unlock(&s->lock);
	out->wseq = atomic_load(&e->wseq);
	rc = cache_fd_get(c, ino, &f);
	if (rc)
		goto out_put;
	if (fstat(f->fd, &sb) < 0) {
		rc = -errno;
	} else {
		out->size = (uint64_t)sb.st_size;
		out->blocks_bytes = (uint64_t)sb.st_blocks * 512;
		out->mtime = sb.st_mtim;
		out->ctime = sb.st_ctim;
		/* Kept only if nothing touched the file since gen was read. */
		pthread_mutex_lock(&s->lock);
		if (atomic_load(&e->sgen) == gen) {
			e->snap = *out;
			e->snap_gen = gen;
			e->snap_ok = true;
		}
		pthread_mutex_unlock(&s->lock);
	}
	cache_fd_put(f);
out_put:
	cache_ent_put(e);
	return rc;
}

/* ino's write marks: the low one taken (reset), or the end one read. */
static int written_mark(struct cache *c, uint64_t ino, bool take_low,
			uint64_t *out)
{
	struct cache_entshard *s = cache_ent_shard(c, ino);
	struct cache_ent *e;

	pthread_mutex_lock(&s->lock);
	e = cache_ent_find_locked(s, ino);
	if (e)
		*out = take_low ? atomic_exchange(&e->low_written, UINT64_MAX)
				: atomic_load(&e->end_written);
	pthread_mutex_unlock(&s->lock);
	return e ? 0 : -ENODATA;
}

int cache_written_low(struct cache *c, uint64_t ino, uint64_t *low)
{
	return written_mark(c, ino, true, low);
}

int cache_written_end(struct cache *c, uint64_t ino, uint64_t *end)
{
	return written_mark(c, ino, false, end);
}

int cache_set_mtime(struct cache *c, uint64_t ino, const struct timespec *mt)
{
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, *mt };
	struct cache_ent *e = ent_ref(c, ino);
	struct cache_fd *f;
	int rc;

	if (!e)
		return -ENODATA;
	rc = cache_fd_get(c, ino, &f);
	if (!rc) {
		if (futimens(f->fd, ts) < 0)
			rc = -errno;
		cache_ent_touched(e);
		cache_fd_put(f);
	}
	cache_ent_put(e);
	return rc;
}

int cache_drop(struct cache *c, uint64_t ino)
{
	char name[CACHE_NAME_MAX];
	struct cache_ent *e;
	int rc = 0;

	cache_name(ino, name);
	pthread_mutex_lock(&c->attach_lock);
	e = ent_retire_hold(c, ino);
	/* After the retire, in journal order: a header never outlives it. */
	cache_journal(c, NULL, ino, true, false, 0, NULL, 0);
	/* Emptied and kept for the next new file when nothing can touch it
	 * any more (spare.c); the name is gone either way. */
	if (cache_spare_give(c, cache_dirfd(c, ino), name, ino, e)) {
		cache_dir_changed(c, ino);
		pthread_mutex_unlock(&c->attach_lock);
		if (e)
			cache_ent_put(e);
		return 0;
	}
	if (e)
		cache_ent_put(e);
	/* Unlink before forgetting: a racing open then fails (fdtab.c). */
	if (unlinkat(cache_dirfd(c, ino), name, 0) < 0) {
		if (errno != ENOENT)
			rc = -errno;
	} else {
		cache_dir_changed(c, ino);
	}
	cache_fd_forget(c, ino);
	pthread_mutex_unlock(&c->attach_lock);
	return rc;
}

bool cache_is_local(struct cache *c, uint64_t ino)
{
	struct cache_ent *e = ent_ref(c, ino);

	if (e)
		cache_ent_put(e);
	return e != NULL;
}

int cache_file_durable(struct cache *c, uint64_t ino)
{
	struct cache_fd *f;
	int rc = cache_fd_get(c, ino, &f);

	if (rc)
		return rc;
	rc = cache_fd_durable_all(c, ino, f->fd);
	cache_fd_put(f);
	return rc;
}

int cache_open_fd(struct cache *c, uint64_t ino, int *fd)
{
	char name[CACHE_NAME_MAX];
	int rc;

	if (!cache_is_local(c, ino))
		return -ENODATA;
	/* Registered before the open: a drop that renames the file away
	 * after this sees it, one before makes the open fail (spare.c). */
	rc = cache_priv_add(c, ino);
	if (rc)
		return rc;
	cache_name(ino, name);
	rc = openat(cache_dirfd(c, ino), name, O_RDONLY | O_CLOEXEC);
	if (rc < 0) {
		rc = errno == ENOENT ? -ENODATA : -errno;
		cache_priv_del(c, ino);
		return rc;
	}
	*fd = rc;
	return 0;
}

void cache_close_fd(struct cache *c, uint64_t ino, int fd)
{
	close(fd);
	cache_priv_del(c, ino);
}

bool cache_range_clean(struct cache *c, uint64_t ino, uint64_t off,
		       uint64_t len)
{
	struct cache_entshard *s = cache_ent_shard(c, ino);
	struct cache_ent *e;
	bool clean;

	pthread_mutex_lock(&s->lock);
	e = cache_ent_find_locked(s, ino);
	clean = e && off <= e->limit && len <= e->limit - off;
	for (uint64_t i = off / c->cs;
	     clean && len && i < e->nst && i <= (off + len - 1) / c->cs; i++)
		clean = !(e->st[i] & CH_DIRTY);
	pthread_mutex_unlock(&s->lock);
	return clean;
}

bool cache_range_local(struct cache *c, uint64_t ino, uint64_t off,
		       uint64_t len)
{
	struct cache_entshard *s = cache_ent_shard(c, ino);
	struct cache_ent *e;
	bool local;

	pthread_mutex_lock(&s->lock);
	e = cache_ent_find_locked(s, ino);
	local = e != NULL;
	for (uint64_t i = off / c->cs;
	     local && len && i <= (off + len - 1) / c->cs; i++) {
		if (i * c->cs >= e->limit)
			break; /* this chunk and all after it: written here */
		local = cache_chunk_readable(c, e, i);
	}
	pthread_mutex_unlock(&s->lock);
	return local;
}

uint64_t cache_clean_epoch(struct cache *c, uint64_t ino)
{
	struct cache_entshard *s = cache_ent_shard(c, ino);
	struct cache_ent *e;
	uint64_t epoch = 0;

	pthread_mutex_lock(&s->lock);
	e = cache_ent_find_locked(s, ino);
	if (e)
		epoch = e->clean_epoch;
	pthread_mutex_unlock(&s->lock);
	return epoch;
}

void cache_marked(struct cache *c, uint64_t ino, uint64_t epoch)
{
	struct cache_entshard *s = cache_ent_shard(c, ino);
	struct cache_ent *e;

	pthread_mutex_lock(&s->lock);
	e = cache_ent_find_locked(s, ino);
	if (e)
		e->marked_epoch = epoch;
	pthread_mutex_unlock(&s->lock);
}

int cache_clean(struct cache *c, struct db_txn *txn, uint64_t ino,
		uint64_t wseq, uint64_t size)
{
	struct cache_entshard *s = cache_ent_shard(c, ino);
	struct cache_jrec *recs = NULL;
	struct cache_ent *e;
	uint64_t end;
	size_t n = 0;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	e = cache_ent_find_locked(s, ino);
	if (!e) {
		rc = -ENODATA;
		goto out_unlock;
	}
	if (atomic_load(&e->wseq) != wseq || atomic_load(&e->writing)) {
		rc = -EBUSY;
		goto out_unlock;
	}
	end = (size + c->cs - 1) / c->cs;
	if (end > e->nst)
		end = e->nst;
	if (end) {
		recs = malloc(end * sizeof(*recs));
		if (!recs) {
			rc = -ENOMEM;
			goto out_unlock;
		}
	}
	for (uint64_t i = 0; i < end; i++) {
		uint8_t st = e->st[i];

		/* Dirty chunks are the store's now; so are the holes past
		 * the old limit, which it holds as zeros like the file. */
		if (!(st & CH_DIRTY) &&
		    ((st & CH_PRESENT) || i * c->cs < e->limit))
			continue;
		recs[n++] = (struct cache_jrec){ .idx = (uint32_t)i,
						 .st = CH_PRESENT };
		cache_chunk_set_locked(c, e, i, (st & ~CH_DIRTY) | CH_PRESENT);
	}
	e->limit = size;
	e->clean_epoch++;
out_unlock:
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; !rc && i < n; i++)
		rc = cache_rec_put_txn(c, txn, ino, recs[i].idx, recs[i].st);
	if (!rc)
		rc = cache_limit_put_txn(c, txn, ino, size);
	free(recs);
	return rc;
}

void cache_usage(struct cache *c, struct cache_usage *out)
{
	out->capacity = c->capacity;
	out->used = atomic_load(&c->used);
	out->dirty = atomic_load(&c->dirty);
	out->gets = atomic_load(&c->gets);
	out->evicted = atomic_load(&c->evicted);
}
