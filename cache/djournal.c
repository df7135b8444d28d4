/*
 * cache/djournal.c - small files' data in the journal: many COMMITs,
 * one flush.
 *
 * A COMMIT (or a stable WRITE) of a file of at most dj_max bytes does
 * not flush its cache file and directory: it reads the file (from the
 * page cache) into a record of the "chunks" database (chunks.c,
 * CACHE_DATA_IDX) and answers once that record is durable.  The record
 * goes through db/'s group commit, so the COMMITs of a moment share one
 * LMDB commit and its flush, where each would have flushed its own file
 * and directory.
 *
 * What a crash finds, and why it is safe:
 *   - the record is the file's content as of its read (a COMMIT covers
 *     the writes that ended before it: the read starts after them);
 *     records are queued in the entry's journal order and a record read
 *     before a newer one queued is not queued (dj_ver), so the last
 *     record of a file holds every byte a reply promised;
 *   - a record stays until the file's own flush covers it: an upload's
 *     cache_fd_durable() or a COMMIT of the file grown past dj_max
 *     (ring.c) flush, then forget it (delete, queued after, in order);
 *     a COMMIT's reply waits for every journal op of its entry queued
 *     before, that delete included;
 *   - a truncate sets the record's size (SETATTR's new size is durable
 *     when it answers), a drop deletes it with the entry's records;
 *   - at start, before the entries load, every record is written back:
 *     the file made if its name was lost, its bytes, cut to its size,
 *     its mtime no older than the record's, flushed with its directory;
 *     then the records are deleted.  A clean close flushes the cache
 *     (syncfs) and deletes them, so only a crash replays;
 *   - bytes written after a record's read and never committed may be
 *     lost, as NFS allows (the write verifier changes at every start,
 *     so clients send them again).
 * The bytes in the journal are bounded (dj_cap): past it, and for
 * files over dj_max, COMMIT flushes the file as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cache_int.h"
#include "chunks_int.h"
#include "djournal_int.h"
#include "common/log.h"
#include "db/db.h"
#include "metrics/metrics.h"

/*
 * Journaled bytes kept at most: past it, COMMITs flush their files.  A
 * record lives until its file's upload (--upload-delay, 5 s by default):
 * 256 MiB holds 5 s of 128 KiB files at 400 files/s; the database file
 * keeps the pages for the next records, it never grows past it.
 */
#define DJ_CAP (256ull << 20)

void cache_dj_init(struct cache *c, uint64_t max)
{
	c->dj_max = c->unflushed ? 0 : max;
	c->dj_cap = DJ_CAP;
	atomic_init(&c->dj_bytes, 0);
}

uint64_t cache_dj_version(struct cache_ent *e)
{
	return atomic_load(&e->wseq) + 1;
}

/* e's record is no longer counted (forgotten or the entry dropped). */
static void dj_uncount_locked(struct cache *c, struct cache_ent *e)
{
	atomic_fetch_sub(&c->dj_bytes, e->dj_len);
	e->dj_ver = e->dj_len = 0;
}

bool cache_dj_try(struct cache *c, struct cache_ent *e, int fd)
{
	struct cache_entshard *s;
	struct stat sb;
	struct iovec iov;
	uint64_t ver, size;
	int64_t mt[2];
	uint8_t *rec;
	bool ok;

	if (!c->dj_max)
		return false;
	ver = cache_dj_version(e);
	if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size > c->dj_max ||
	    atomic_load(&c->dj_bytes) + (uint64_t)sb.st_size > c->dj_cap)
		return false;
	size = (uint64_t)sb.st_size;
	rec = malloc(CACHE_DJ_HDR + size);
	if (!rec)
		return false;
	iov = (struct iovec){ rec + CACHE_DJ_HDR, size };
	/* From the page cache only: a loop's thread never waits for the
	 * disk here (pages not cached, a direct write: flushed instead). */
	if (size && preadv2(fd, &iov, 1, 0, RWF_NOWAIT) != (ssize_t)size) {
		free(rec);
		return false;
	}
	mt[0] = (int64_t)sb.st_mtim.tv_sec;
	mt[1] = (int64_t)sb.st_mtim.tv_nsec;
	memcpy(rec, &size, sizeof(size));
	memcpy(rec + sizeof(size), mt, sizeof(mt));

	s = cache_ent_shard(c, e->ino);
	pthread_mutex_lock(&s->lock);
	/* Every chunk of it is the file's (not a hole a fetch would fill). */
	ok = !e->dead;
	for (uint64_t i = 0; ok && size && i <= (size - 1) / c->cs; i++)
		ok = cache_chunk_readable(c, e, i);
	if (ok && e->dj_ver > ver) {
		/* A newer read is queued: it holds all this one does, and
		 * the caller waits for the journal, that one included. */
		free(rec);
	} else if (ok && cache_journal_data(c, e, CACHE_DJ_PUT, 0, rec,
					    CACHE_DJ_HDR + size)) {
		atomic_fetch_add(&c->dj_bytes, CACHE_DJ_HDR + size);
		atomic_fetch_sub(&c->dj_bytes, e->dj_len);
		e->dj_ver = ver;
		e->dj_len = CACHE_DJ_HDR + size;
		metrics_inc(MET_SMALL_JOURNALED);
	} else {
		if (!ok)
			free(rec);
		ok = false; /* cache_journal_data freed rec */
	}
	pthread_mutex_unlock(&s->lock);
	return ok;
}

void cache_dj_forget_locked(struct cache *c, struct cache_ent *e, uint64_t ver)
{
	if (!e->dj_ver || e->dj_ver > ver)
		return; /* none, or read after the flush began: keep it */
	/* Without memory the record stays: a replay writes bytes the
	 * file holds already, and the next flush tries again. */
	if (cache_journal_data(c, e, CACHE_DJ_DEL, 0, NULL, 0))
		dj_uncount_locked(c, e);
}

void cache_dj_resize_locked(struct cache *c, struct cache_ent *e, uint64_t size)
{
	uint64_t len;

	if (!e->dj_ver)
		return;
	if (!cache_journal_data(c, e, CACHE_DJ_SIZE, size, NULL, 0)) {
		/* The record would bring the old size back: a COMMIT that
		 * finds none flushes the file instead. */
		log_error("cache: no memory to journal inode %" PRIu64
			  "'s new size",
			  e->ino);
		return;
	}
	len = e->dj_len < CACHE_DJ_HDR + size ? e->dj_len : CACHE_DJ_HDR + size;
	atomic_fetch_sub(&c->dj_bytes, e->dj_len - len);
	e->dj_len = len;
}

void cache_dj_retired_locked(struct cache *c, struct cache_ent *e)
{
	dj_uncount_locked(c, e);
}

int cache_dj_flush(struct cache *c, struct cache_ent *e, int fd)
{
	struct cache_entshard *s = cache_ent_shard(c, e->ino);
	uint64_t ver = cache_dj_version(e);
	int rc = cache_fd_flush(c, e->ino, fd);

	if (rc || c->unflushed)
		return rc;
	pthread_mutex_lock(&s->lock);
	cache_dj_forget_locked(c, e, ver);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* See cache.h. */
int cache_fd_durable(struct cache *c, uint64_t ino, int fd)
{
	struct cache_entshard *s = cache_ent_shard(c, ino);
	struct cache_ent *e;
	int rc;

	pthread_mutex_lock(&s->lock);
	e = cache_ent_find_locked(s, ino);
	if (e)
		cache_ent_get(e);
	pthread_mutex_unlock(&s->lock);
	if (!e)
		return cache_fd_flush(c, ino, fd);
	rc = cache_dj_flush(c, e, fd);
	cache_ent_put(e);
	return rc;
}

/* The inodes whose records a replay or a close deletes. */
struct dj_list {
	struct cache *c;
	uint64_t *ino;
	size_t n, cap;
	bool dirs[CACHE_NDIRS]; /* replay: shard directories to fsync */
};

static int list_add(struct dj_list *l, uint64_t ino)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		uint64_t *v = realloc(l->ino, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->ino = v;
		l->cap = cap;
	}
	l->ino[l->n++] = ino;
	return 0;
}

static int list_rec(uint64_t ino, const void *rec, size_t len, void *arg)
{
	(void)rec;
	(void)len;
	return list_add(arg, ino);
}

static int list_del_apply(struct db_txn *txn, void *arg)
{
	struct dj_list *l = arg;
	int rc = 0;

	for (size_t i = 0; !rc && i < l->n; i++)
		rc = cache_data_del_txn(l->c, txn, l->ino[i]);
	return rc;
}

/* Write one record back into its file (start-up: nothing else runs). */
static int replay_rec(uint64_t ino, const void *rec, size_t len, void *arg)
{
	struct dj_list *l = arg;
	struct cache *c = l->c;
	char name[CACHE_NAME_MAX];
	const uint8_t *p = rec;
	struct timespec ts[2];
	struct stat sb;
	uint64_t size;
	int64_t mt[2];
	size_t n;
	int fd, rc = 0;

	if (len < CACHE_DJ_HDR) {
		log_warn("cache: inode %" PRIu64 "'s journaled data is torn",
			 ino);
		return list_add(l, ino);
	}
	memcpy(&size, p, sizeof(size));
	memcpy(mt, p + sizeof(size), sizeof(mt));
	n = len - CACHE_DJ_HDR;
	cache_name(ino, name);
	fd = openat(cache_dirfd(c, ino), name, O_RDWR | O_CREAT | O_CLOEXEC,
		    0600);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0)
		rc = -errno;
	for (size_t done = 0; !rc && done < n;) {
		ssize_t w = pwrite(fd, p + CACHE_DJ_HDR + done, n - done,
				   (off_t)done);

		if (w < 0 && errno != EINTR)
			rc = -errno;
		else if (w > 0)
			done += (size_t)w;
	}
	if (!rc && ftruncate(fd, (off_t)size) < 0)
		rc = -errno;
	/* Never older than what the disk had: a client's cache that saw a
	 * later time is then not taken for current. */
	ts[0].tv_nsec = UTIME_OMIT;
	ts[1] = sb.st_mtim;
	if (mt[0] > sb.st_mtim.tv_sec ||
	    (mt[0] == sb.st_mtim.tv_sec && mt[1] > sb.st_mtim.tv_nsec)) {
		ts[1].tv_sec = (time_t)mt[0];
		ts[1].tv_nsec = (long)mt[1];
	}
	if (!rc && futimens(fd, ts) < 0)
		rc = -errno;
	if (!rc && fdatasync(fd) < 0)
		rc = -errno;
	close(fd);
	if (rc) {
		log_error("cache: inode %" PRIu64
			  ": writing its journaled data back: %s",
			  ino, strerror(-rc));
		return rc;
	}
	l->dirs[ino & (CACHE_NDIRS - 1)] = true;
	metrics_inc(MET_SMALL_REPLAYED);
	return list_add(l, ino);
}

/* Delete the listed records, durably. */
static int list_delete(struct dj_list *l)
{
	return l->n ? db_write(l->c->db, list_del_apply, l) : 0;
}

int cache_dj_replay(struct cache *c)
{
	struct dj_list l = { .c = c };
	struct db_txn *txn;
	int rc = db_read_begin(c->db, &txn);

	if (rc)
		return rc;
	rc = cache_data_each(c, txn, replay_rec, &l);
	db_read_end(c->db, txn);
	for (int d = 0; !rc && d < CACHE_NDIRS; d++)
		if (l.dirs[d] && fsync(c->dirfd[d]) < 0)
			rc = -errno;
	if (!rc)
		rc = list_delete(&l);
	if (!rc && l.n)
		log_info("cache: %zu small files written back from the journal "
			 "after an unclean stop",
			 l.n);
	free(l.ino);
	return rc;
}

int cache_dj_close(struct cache *c)
{
	struct dj_list l = { .c = c };
	struct db_txn *txn;
	int rc;

	if (!c->dj_max)
		return 0;
	if ((rc = db_read_begin(c->db, &txn)))
		return rc;
	rc = cache_data_each(c, txn, list_rec, &l);
	db_read_end(c->db, txn);
	/* The files first, then the records that stood for them. */
	if (!rc && l.n && syncfs(c->rootfd) < 0)
		rc = -errno;
	if (!rc)
		rc = list_delete(&l);
	free(l.ino);
	return rc;
}
