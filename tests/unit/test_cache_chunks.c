/*
 * Unit tests for cache/'s chunks: only the chunks a read touches are
 * fetched, a small file in one GET, one GET for two readers of a chunk,
 * a warm restart that downloads nothing (256 MiB, GETs counted),
 * read-modify-write of partial chunks, truncation and the store limit,
 * the dirty journal across a restart, readahead in runs of whole GETs,
 * and eviction keeping the disk usage under the capacity.
 *
 * The store is a real local directory seen through the tests' fake store
 * (tests/lib/fake_store.h), which counts GETs (and their bytes) and can
 * hold them at a gate, so every claim is checked by counts.
 */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/cache_int.h"  /* ntasks: waiting for readahead to settle */
#include "cache/chunks_int.h" /* an entry's chunk states */
#include "db/db.h"
#include "s3/store.h"
#include "tests/lib/fake_store.h"
#include "tests/lib/testlib.h"

#define MIB (1u << 20)
#define WAIT_MS 20000

static char root[] = "/tmp/mapfs-test-chunks-XXXXXX";
static char cache_dir[256], db_dir[256], store_url_buf[300];
static struct store *inner;
static struct db *db;

static struct fake_store *fake;

static void counts_reset(void)
{
	fake_store_counts_reset(fake);
}

static void gate(bool closed)
{
	fake_store_hold(fake, FAKE_GET,
			closed ? FAKE_HOLD_BEFORE : FAKE_HOLD_NONE);
}

/* Wait until n GETs are held at the gate; false after WAIT_MS. */
static bool gate_wait(int n)
{
	return fake_store_held_wait(fake, FAKE_GET, n, WAIT_MS);
}

static struct cache *open_cache(uint64_t readahead, uint64_t capacity)
{
	struct cache_opts o = { .dir = cache_dir,
				.db = db,
				.nloops = 1,
				.chunk_size = MIB,
				.readahead = readahead,
				.capacity = capacity,
				.fetch_threads = 4 };
	struct cache *c = NULL;

	CU_ASSERT_FATAL(cache_open(&o, fake_store_store(fake), &c) == 0);
	return c;
}

static void fill(uint8_t *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (uint8_t)(seed >> 16);
	}
}

static void res_done(void *arg, long res)
{
	*(long *)arg = res;
}

static long fetch(struct cache *c, uint64_t ino, const char *key, uint64_t size,
		  uint64_t off, uint64_t len, bool for_write)
{
	long res = 1;

	cache_fetch(c, -1, ino, &(struct cache_obj){ .key = key, .size = size },
		    off, len, for_write, res_done, &res);
	return res;
}

static long rd(struct cache *c, uint64_t ino, uint64_t off, size_t len,
	       void *buf)
{
	long res = 1;

	cache_read(c, -1, ino, off, len, buf, res_done, &res);
	return res;
}

static long wr(struct cache *c, uint64_t ino, uint64_t off, const void *buf,
	       size_t len, bool sync)
{
	long res = 1;

	cache_write(c, -1, ino, off, buf, len, sync, res_done, &res);
	return res;
}

/* A READ as fs/ does it: on a miss fetch what it needs, read again. */
static long read_through(struct cache *c, uint64_t ino, const char *key,
			 uint64_t size, uint64_t off, size_t len, void *buf)
{
	long res = rd(c, ino, off, len, buf);

	if (res == -ENODATA) {
		res = fetch(c, ino, key, size, off, len, false);
		if (res == 0)
			res = rd(c, ino, off, len, buf);
	}
	return res;
}

/* Let queued fetches (readahead) finish. */
static void fetch_idle(struct cache *c)
{
	pthread_mutex_lock(&c->fetch_lock);
	while (c->ntasks)
		pthread_cond_wait(&c->fetch_idle, &c->fetch_lock);
	pthread_mutex_unlock(&c->fetch_lock);
}

/* Put an object of size bytes made by fill(seed), 1 MiB at a time. */
static void put_obj(const char *key, uint64_t size, unsigned seed)
{
	char path[300];
	uint8_t *buf = malloc(MIB);
	int fd;

	snprintf(path, sizeof(path), "%s/obj.tmp", root);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CU_ASSERT_FATAL(fd >= 0 && buf);
	for (uint64_t off = 0; off < size; off += MIB) {
		size_t n = size - off < MIB ? (size_t)(size - off) : MIB;

		fill(buf, n, seed + (unsigned)(off / MIB));
		CU_ASSERT_FATAL(pwrite(fd, buf, n, (off_t)off) == (ssize_t)n);
	}
	CU_ASSERT_FATAL(store_put_fd(inner, key, fd, size, NULL, NULL) == 0);
	close(fd);
	unlink(path);
	free(buf);
}

/* The first n bytes of got are chunk `chunk` of put_obj(seed)'s object. */
static void expect_chunk(const uint8_t *got, uint64_t chunk, unsigned seed,
			 size_t n)
{
	uint8_t *want = malloc(MIB);

	fill(want, MIB, seed + (unsigned)chunk);
	CU_ASSERT(memcmp(got, want, n) == 0);
	free(want);
}

/* Disk bytes of every file under the cache directory (du). */
static uint64_t du_cache(void)
{
	uint64_t total = 0;
	char p[400];

	for (int i = 0; i < 256; i++) {
		struct dirent *de;
		DIR *d;

		snprintf(p, sizeof(p), "%s/%02x", cache_dir, i);
		d = opendir(p);
		if (!d)
			continue;
		while ((de = readdir(d))) {
			struct stat sb;

			if (fstatat(dirfd(d), de->d_name, &sb, 0) == 0 &&
			    S_ISREG(sb.st_mode))
				total += (uint64_t)sb.st_blocks * 512;
		}
		closedir(d);
	}
	return total;
}

/* --- tests -------------------------------------------------------------- */

static void test_partial_read(void)
{
	struct cache *c = open_cache(1, 0);
	uint8_t *buf = malloc(MIB);

	put_obj("eight", 8 * MIB, 100);
	counts_reset();
	CU_ASSERT(read_through(c, 1, "eight", 8 * MIB, 5 * MIB + 4096, 4096,
			       buf) == 4096);
	CU_ASSERT(fake_store_count(fake, FAKE_GET) ==
		  1); /* chunk 5, nothing else */
	CU_ASSERT(rd(c, 1, 5 * MIB, MIB, buf) == MIB);
	expect_chunk(buf, 5, 100, MIB);
	/* A read spanning chunks 5 and 6 fetches only 6. */
	CU_ASSERT(read_through(c, 1, "eight", 8 * MIB, 6 * MIB - 10, 20, buf) ==
		  20);
	CU_ASSERT(fake_store_count(fake, FAKE_GET) == 2);
	CU_ASSERT(rd(c, 1, 0, 10, buf) == -ENODATA); /* chunk 0: never read */
	CU_ASSERT(cache_drop(c, 1) == 0);
	free(buf);
	cache_close(c);
}

static void test_small_file_whole(void)
{
	struct cache *c = open_cache(1, 0);
	uint8_t want[100000], got[100000];

	fill(want, sizeof(want), 7);
	CU_ASSERT_FATAL(
		store_put(inner, "small", want, sizeof(want), NULL, NULL) == 0);
	counts_reset();
	CU_ASSERT(read_through(c, 2, "small", sizeof(want), 50000, 10, got) ==
		  10);
	CU_ASSERT(rd(c, 2, 0, sizeof(got), got) == (long)sizeof(got));
	CU_ASSERT(memcmp(got, want, sizeof(want)) == 0);
	CU_ASSERT(fake_store_count(fake, FAKE_GET) == 1);
	CU_ASSERT(cache_drop(c, 2) == 0);
	cache_close(c);
}

struct reader {
	struct cache *c;
	uint64_t off;
	long res;
	uint8_t buf[64];
};

static void *reader_main(void *p)
{
	struct reader *r = p;

	r->res = read_through(r->c, 3, "shared", 4 * MIB, r->off,
			      sizeof(r->buf), r->buf);
	return NULL;
}

/* Two readers wait on inode 3's entry (the second queued behind the
 * first). */
static bool two_waiters(void *arg)
{
	struct cache *c = arg;
	struct cache_entshard *s = cache_ent_shard(c, 3);
	bool two;

	pthread_mutex_lock(&s->lock);
	two = cache_ent_find_locked(s, 3)->waiters &&
	      cache_ent_find_locked(s, 3)->waiters->next;
	pthread_mutex_unlock(&s->lock);
	return two;
}

/* Two readers of one missing chunk, the GET held: one GET. */
static void test_one_get_per_chunk(void)
{
	struct cache *c = open_cache(1, 0);
	struct reader a = { .c = c, .off = 2 * MIB + 1 },
		      b = { .c = c, .off = 3 * MIB - 64 };
	pthread_t ta, tb;
	uint8_t *chunk = malloc(MIB);

	put_obj("shared", 4 * MIB, 300);
	counts_reset();
	gate(true);
	pthread_create(&ta, NULL, reader_main, &a);
	CU_ASSERT_FATAL(gate_wait(1));
	pthread_create(&tb, NULL, reader_main, &b);
	/* b must be queued on the same chunk before the GET is let go. */
	CU_ASSERT(test_wait_until(two_waiters, c, 2000, 1));
	gate(false);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	CU_ASSERT(a.res == 64 && b.res == 64);
	CU_ASSERT(fake_store_count(fake, FAKE_GET) == 1);
	fill(chunk, MIB, 302);
	CU_ASSERT(memcmp(a.buf, chunk + 1, 64) == 0);
	CU_ASSERT(memcmp(b.buf, chunk + MIB - 64, 64) == 0);
	CU_ASSERT(cache_drop(c, 3) == 0);
	free(chunk);
	cache_close(c);
}

/* Cold read of 256 MiB, then a restart: the warm read makes no GET. */
static void test_warm_restart_256mib(void)
{
	const uint64_t size = 256ull * MIB;
	struct cache *c = open_cache(16 * MIB, 0);
	struct cache_usage u;
	uint8_t *buf = malloc(MIB);

	put_obj("big256", size, 1000);
	counts_reset();
	for (uint64_t off = 0; off < size; off += MIB) {
		CU_ASSERT(read_through(c, 4, "big256", size, off, MIB, buf) ==
			  MIB);
		if (off % (32 * MIB) == 0)
			expect_chunk(buf, off / MIB, 1000, MIB);
	}
	fetch_idle(c);
	CU_ASSERT(fake_store_get_bytes(fake) == size); /* each chunk once */
	cache_close(c);

	c = open_cache(16 * MIB, 0);
	cache_usage(c, &u);
	CU_ASSERT(u.used == size && u.dirty == 0);
	counts_reset();
	for (uint64_t off = 0; off < size; off += MIB) {
		CU_ASSERT(rd(c, 4, off, MIB, buf) == MIB);
		if (off % (32 * MIB) == 16 * MIB)
			expect_chunk(buf, off / MIB, 1000, MIB);
	}
	fetch_idle(c);
	CU_ASSERT(fake_store_count(fake, FAKE_GET) == 0);
	CU_ASSERT(cache_drop(c, 4) == 0);
	cache_usage(c, &u);
	CU_ASSERT(u.used == 0); /* every test leaves nothing behind */
	free(buf);
	cache_close(c);
}

/* A write to a file not local: only the chunks it covers in part. */
static void test_write_rmw(void)
{
	struct cache *c = open_cache(1, 0);
	uint8_t *buf = malloc(4 * MIB), *patch = malloc(2 * MIB);

	put_obj("rmw", 4 * MIB, 400);
	memset(patch, 0xab, 2 * MIB);
	counts_reset();
	/* [1.5 MiB, 2.5 MiB): chunks 1 and 2 in part. */
	CU_ASSERT(fetch(c, 5, "rmw", 4 * MIB, MIB + MIB / 2, MIB, true) == 0);
	CU_ASSERT(fake_store_count(fake, FAKE_GET) == 2);
	CU_ASSERT(wr(c, 5, MIB + MIB / 2, patch, MIB, false) == MIB);
	/* Chunk 3 whole: no GET, and the write needs none. */
	CU_ASSERT(fetch(c, 5, "rmw", 4 * MIB, 3 * MIB, MIB, true) == 0);
	CU_ASSERT(wr(c, 5, 3 * MIB, patch, MIB, false) == MIB);
	CU_ASSERT(fake_store_count(fake, FAKE_GET) == 2);
	/* A partial write to chunk 0, not local: refused until fetched. */
	CU_ASSERT(wr(c, 5, 10, patch, 10, false) == -ENODATA);
	CU_ASSERT(read_through(c, 5, "rmw", 4 * MIB, 0, 4 * MIB, buf) ==
		  4 * MIB);
	CU_ASSERT(fake_store_count(fake, FAKE_GET) == 3);
	expect_chunk(buf, 0, 400, MIB);
	expect_chunk(buf + MIB, 1, 400, MIB / 2);
	CU_ASSERT(memcmp(buf + MIB + MIB / 2, patch, MIB) == 0);
	fill(patch + MIB, MIB, 400 + 2); /* chunk 2 as it was */
	CU_ASSERT(memcmp(buf + 2 * MIB + MIB / 2, patch + MIB + MIB / 2,
			 MIB / 2) == 0);
	memset(patch, 0xab, MIB);
	CU_ASSERT(memcmp(buf + 3 * MIB, patch, MIB) == 0);
	/* What the upload may copy from the old object, and what not. */
	CU_ASSERT(cache_range_clean(c, 5, 0, MIB));
	CU_ASSERT(!cache_range_clean(c, 5, 0, 2 * MIB));
	CU_ASSERT(!cache_range_clean(c, 5, 3 * MIB, MIB));
	CU_ASSERT(cache_drop(c, 5) == 0);
	free(buf);
	free(patch);
	cache_close(c);
}

/* Past a truncation nothing comes from the store, also after a restart. */
static void test_truncate_limit(void)
{
	struct cache *c = open_cache(1, 0);
	uint8_t *buf = malloc(3 * MIB), *zero = calloc(1, 3 * MIB);

	put_obj("cut", 3 * MIB, 500);
	counts_reset();
	CU_ASSERT(fetch(c, 6, "cut", 3 * MIB, 0, 0, false) == 0); /* local */
	CU_ASSERT(cache_is_local(c, 6) &&
		  fake_store_count(fake, FAKE_GET) == 0);
	CU_ASSERT(cache_truncate(c, 6, MIB + 100) == 0);
	CU_ASSERT(cache_truncate(c, 6, 3 * MIB) == 0);
	cache_close(c);
	c = open_cache(1, 0);
	CU_ASSERT(read_through(c, 6, "cut", 3 * MIB, 0, 3 * MIB, buf) ==
		  3 * MIB);
	CU_ASSERT(fake_store_count(fake, FAKE_GET) ==
		  2); /* chunk 0, 100 B of chunk 1 */
	expect_chunk(buf, 0, 500, MIB);
	expect_chunk(buf + MIB, 1, 500, 100);
	CU_ASSERT(memcmp(buf + MIB + 100, zero, 2 * MIB - 100) == 0);
	CU_ASSERT(!cache_range_clean(c, 6, 0, 2 * MIB));
	CU_ASSERT(cache_drop(c, 6) == 0);
	free(buf);
	free(zero);
	cache_close(c);
}

static struct cache *clean_c;
static struct cache_stat clean_st;

static uint64_t clean_ino = 7;

static int clean_apply(struct db_txn *txn, void *arg)
{
	(void)arg;
	return cache_clean(clean_c, txn, clean_ino, clean_st.wseq,
			   clean_st.size);
}

/*
 * Dirty chunks below the store limit survive a restart; bytes written
 * past it need no record (they are read from the file, never fetched)
 * and make no journal change; cache_clean() makes both clean.
 */
static void test_dirty_journal(void)
{
	struct cache *c = open_cache(1, 0);
	struct cache_usage u;
	struct cache_stat st;
	uint64_t epoch;
	char back[5];

	put_obj("dj", 3 * MIB, 900);
	CU_ASSERT_FATAL(read_through(c, 7, "dj", 3 * MIB, 2 * MIB, 5, back) ==
			5);
	fetch_idle(c); /* settled: a fetched chunk is BUSY until journaled */
	CU_ASSERT(wr(c, 7, 2 * MIB, "dirty", 5, true) == 5);
	CU_ASSERT(wr(c, 7, 4 * MIB, "grow!", 5, true) == 5);
	cache_usage(c, &u);
	CU_ASSERT(u.dirty == 2 * MIB);
	cache_close(c);
	c = open_cache(1, 0);
	cache_usage(c, &u);
	CU_ASSERT(u.dirty == MIB);
	counts_reset();
	CU_ASSERT(rd(c, 7, 2 * MIB, 5, back) == 5 && !memcmp(back, "dirty", 5));
	CU_ASSERT(rd(c, 7, 4 * MIB, 5, back) == 5 && !memcmp(back, "grow!", 5));
	CU_ASSERT(fake_store_count(fake, FAKE_GET) == 0);
	CU_ASSERT(cache_range_clean(c, 7, 0, 0)); /* nothing: trivially */
	CU_ASSERT(!cache_range_clean(c, 7, 2 * MIB, 5));
	CU_ASSERT_FATAL(cache_stat(c, 7, &st) == 0);
	CU_ASSERT(st.size == 4 * MIB + 5);
	/* A write after the snapshot: the upload it saw is stale. */
	CU_ASSERT(wr(c, 7, 2 * MIB, "x", 1, false) == 1);
	CU_ASSERT(cache_clean(c, NULL, 7, st.wseq, st.size) == -EBUSY);
	CU_ASSERT_FATAL(cache_stat(c, 7, &st) == 0);
	/* As the syncer does: in db/'s writer, after the journal so far. */
	clean_c = c;
	clean_st = st;
	CU_ASSERT(db_write(db, clean_apply, NULL) == 0);
	cache_usage(c, &u);
	CU_ASSERT(u.dirty == 0);
	CU_ASSERT(cache_range_clean(c, 7, 2 * MIB, st.size - 2 * MIB));
	cache_close(c);
	c = open_cache(1, 0);
	cache_usage(c, &u);
	CU_ASSERT(u.dirty == 0 &&
		  cache_range_clean(c, 7, 2 * MIB, st.size - 2 * MIB));
	/* Past the old limit is readable, without a fetch, after restart. */
	CU_ASSERT(rd(c, 7, 4 * MIB, 5, back) == 5 && !memcmp(back, "grow!", 5));
	CU_ASSERT(fake_store_count(fake, FAKE_GET) == 0);
	/* Cleaned again: a write waits for the namespace's mark, since a
	 * writer may have read the record before that clean committed. */
	CU_ASSERT(wr(c, 7, 4 * MIB, "more!", 5, false) == 5);
	CU_ASSERT_FATAL(cache_stat(c, 7, &st) == 0);
	/* A mark whose transaction ran before this clean (the same group
	 * commit: its done comes after the clean) does not cover it. */
	epoch = cache_clean_epoch(c, 7);
	clean_c = c; /* the cache opened again */
	clean_st = st;
	CU_ASSERT(db_write(db, clean_apply, NULL) == 0);
	CU_ASSERT(wr(c, 7, 4 * MIB, "again", 5, false) == -EUCLEAN);
	cache_usage(c, &u);
	CU_ASSERT(u.dirty == 0);
	cache_marked(c, 7, epoch);
	CU_ASSERT(wr(c, 7, 4 * MIB, "again", 5, false) == -EUCLEAN);
	cache_marked(c, 7, cache_clean_epoch(c, 7));
	CU_ASSERT(wr(c, 7, 4 * MIB, "again", 5, false) == 5);
	CU_ASSERT(rd(c, 7, 4 * MIB, 5, back) == 5 && !memcmp(back, "again", 5));
	CU_ASSERT(cache_drop(c, 7) == 0);
	cache_close(c);
}

/*
 * A write in flight (marked, its bytes not in the file yet) keeps
 * cache_clean() off: an upload that took its snapshot after the write's
 * first tick may have read the file without those bytes, and the write
 * count does not move again until the write is done.  (Found by CI's
 * ThreadSanitizer pass, test_e2e_cache kill -9 loop: a new file's one
 * WRITE in flight while an upload of it empty cleaned it; the record
 * said 0 bytes, the store held none of them, the cache all.)
 */
static void test_clean_write_in_flight(void)
{
	struct cache *c = open_cache(1, 0);
	struct cache_stat st;
	struct pollfd pfd = { .fd = cache_loop_fd(c, 0), .events = POLLIN };
	char back[6] = { 0 };
	long res = 1;

	CU_ASSERT_FATAL(cache_create(c, 11) == 0);
	CU_ASSERT(wr(c, 11, 0, "first", 5, false) == 5);
	/* On loop 0's ring: queued, not submitted until the loop flushes. */
	cache_write(c, 0, 11, 0, "later", 5, false, res_done, &res);
	CU_ASSERT(res == 1);
	CU_ASSERT_FATAL(cache_stat(c, 11, &st) == 0);
	clean_c = c;
	clean_ino = 11;
	clean_st = st;
	CU_ASSERT(db_write(db, clean_apply, NULL) == -EBUSY);
	for (int i = 0; res == 1 && i < 100; i++) {
		cache_loop_flush(c, 0);
		if (res == 1 && poll(&pfd, 1, 100) == 1)
			cache_loop_poll(c, 0);
	}
	CU_ASSERT_FATAL(res == 5);
	/* Done: the count moved on, the snapshot is stale. */
	CU_ASSERT(db_write(db, clean_apply, NULL) == -EBUSY);
	CU_ASSERT_FATAL(cache_stat(c, 11, &st) == 0);
	clean_st = st;
	CU_ASSERT(db_write(db, clean_apply, NULL) == 0);
	CU_ASSERT(rd(c, 11, 0, 5, back) == 5 && !strcmp(back, "later"));
	/* A change the namespace recorded first (SETATTR's truncate, made
	 * after its commit) holds cleans off the same way until done. */
	CU_ASSERT(wr(c, 11, 0, "third", 5, false) == -EUCLEAN);
	cache_marked(c, 11, cache_clean_epoch(c, 11));
	CU_ASSERT(wr(c, 11, 0, "third", 5, false) == 5);
	CU_ASSERT_FATAL(cache_stat(c, 11, &st) == 0);
	struct cache_change *ch = cache_change_begin(c, 11);

	CU_ASSERT_FATAL(ch != NULL);
	CU_ASSERT(cache_change_begin(c, 12) == NULL); /* not local */
	clean_st = st;
	CU_ASSERT(db_write(db, clean_apply, NULL) == -EBUSY);
	CU_ASSERT(cache_truncate(c, 11, 3) == 0);
	cache_change_done(ch);
	CU_ASSERT(db_write(db, clean_apply, NULL) == -EBUSY);
	CU_ASSERT_FATAL(cache_stat(c, 11, &st) == 0 && st.size == 3);
	clean_st = st;
	CU_ASSERT(db_write(db, clean_apply, NULL) == 0);
	clean_ino = 7;
	CU_ASSERT(cache_drop(c, 11) == 0);
	cache_close(c);
}

/* Sequential reads grow a readahead window: chunks arrive ahead. */
static void test_readahead(void)
{
	struct cache *c = open_cache(8 * MIB, 0);
	uint8_t *buf = malloc(MIB);
	int misses = 0;

	put_obj("seq", 32 * MIB, 600);
	counts_reset();
	for (uint64_t off = 0; off < 32 * MIB; off += MIB) {
		if (rd(c, 8, off, MIB, buf) == -ENODATA)
			misses++;
		CU_ASSERT(read_through(c, 8, "seq", 32 * MIB, off, MIB, buf) ==
			  MIB);
		expect_chunk(buf, off / MIB, 600, MIB);
		fetch_idle(c); /* the readahead lands before the next read */
	}
	CU_ASSERT(misses == 1); /* only the first read waited */
	CU_ASSERT(fake_store_get_bytes(fake) == 32 * MIB);
	/* Random reads get no readahead. */
	put_obj("rand", 32 * MIB, 700);
	counts_reset();
	for (int i = 0; i < 4; i++) {
		uint64_t off = (uint64_t)((i * 13 + 5) % 32) * MIB;

		CU_ASSERT(read_through(c, 9, "rand", 32 * MIB, off, 100, buf) ==
			  100);
		fetch_idle(c);
	}
	CU_ASSERT(fake_store_count(fake, FAKE_GET) == 4);
	CU_ASSERT(cache_drop(c, 8) == 0 && cache_drop(c, 9) == 0);
	free(buf);
	cache_close(c);
}

/*
 * A sequential reader's readahead goes out in runs of whole GETs: with a
 * 32 MiB window and 4 workers, GETs of 8 chunks (a store pays per
 * request), each chunk still fetched once.
 */
static void test_readahead_runs(void)
{
	struct cache *c = open_cache(32 * MIB, 0);
	uint8_t *buf = malloc(MIB);

	put_obj("runs", 64 * MIB, 800);
	counts_reset();
	for (uint64_t off = 0; off < 64 * MIB; off += MIB) {
		CU_ASSERT(read_through(c, 10, "runs", 64 * MIB, off, MIB,
				       buf) == MIB);
		expect_chunk(buf, off / MIB, 800, MIB);
	}
	fetch_idle(c);
	CU_ASSERT(fake_store_get_bytes(fake) == 64 * MIB);
	CU_ASSERT(fake_store_get_most(fake) == 8 * MIB);
	CU_ASSERT(fake_store_count(fake, FAKE_GET) <=
		  16); /* 64 one chunk at a time */
	CU_ASSERT(cache_drop(c, 10) == 0);
	free(buf);
	cache_close(c);
}

/* Reading 3x the capacity keeps du under it; dirty chunks stay. */
static void test_evict_capacity(void)
{
	const uint64_t cap = 16 * MIB, size = 48 * MIB;
	struct cache *c = open_cache(1, cap);
	uint8_t *buf = malloc(MIB);
	struct cache_usage u;
	uint64_t worst = 0;

	put_obj("three-x", size, 800);
	CU_ASSERT_FATAL(cache_create(c, 11) == 0);
	memset(buf, 0x5a, MIB);
	for (int i = 0; i < 4; i++)
		CU_ASSERT(wr(c, 11, (uint64_t)i * MIB, buf, MIB, false) == MIB);
	for (uint64_t off = 0; off < size; off += MIB) {
		uint64_t d = 0;

		CU_ASSERT(read_through(c, 10, "three-x", size, off, MIB, buf) ==
			  MIB);
		expect_chunk(buf, off / MIB, 800, MIB);
		/* The evictor runs behind the reads: give it a second to
		 * bring du back under the limit (one chunk of slack). */
		for (int i = 0; i < 200; i++) {
			d = du_cache();
			if (d <= cap + MIB)
				break;
			usleep(5000);
		}
		if (d > worst)
			worst = d;
	}
	cache_usage(c, &u);
	CU_ASSERT(u.evicted >= (size + 4 * MIB - cap) / MIB - 1);
	CU_ASSERT(u.dirty == 4 * MIB);
	CU_ASSERT(worst <= cap + MIB);
	printf("\n    du at most %llu MiB for capacity %llu MiB, %llu evicted ",
	       (unsigned long long)(worst / MIB),
	       (unsigned long long)(cap / MIB), (unsigned long long)u.evicted);
	for (int i = 0; i < 4; i++) {
		CU_ASSERT(rd(c, 11, (uint64_t)i * MIB, MIB, buf) == MIB);
		CU_ASSERT(buf[0] == 0x5a && buf[MIB - 1] == 0x5a);
	}
	CU_ASSERT(cache_drop(c, 10) == 0 && cache_drop(c, 11) == 0);
	free(buf);
	cache_close(c);
}

/* Bytes of ino's first n chunks that read as local now (-ENODATA: not). */
static int chunks_local(struct cache *c, uint64_t ino, int n, uint8_t *buf)
{
	int local = 0;

	for (int i = 0; i < n; i++)
		local += rd(c, ino, (uint64_t)i * MIB, MIB, buf) == MIB;
	return local;
}

/*
 * A pinned file keeps its clean chunks while reads of 4x the capacity
 * evict everything else (an upload reads them from the cache file: a
 * punched one would go up as zeros); unpinned, they go like the rest.
 */
static void test_pin_evict(void)
{
	const uint64_t cap = 8 * MIB, other = 32 * MIB;
	struct cache *c = open_cache(1, cap);
	uint8_t *buf = malloc(MIB);
	struct cache_pin *pin;

	put_obj("pinned", 4 * MIB, 900);
	put_obj("other", other, 901);
	CU_ASSERT_FATAL(cache_pin(c, 20, 4 * MIB, &pin) == 0);
	CU_ASSERT_FATAL(fetch(c, 20, "pinned", 4 * MIB, 0, 4 * MIB, false) ==
			0);
	for (uint64_t off = 0; off < other; off += MIB) {
		CU_ASSERT(read_through(c, 21, "other", other, off, MIB, buf) ==
			  MIB);
		usleep(20000); /* the evictor runs behind */
	}
	CU_ASSERT(chunks_local(c, 20, 4, buf) == 4);
	for (int i = 0; i < 4; i++) {
		CU_ASSERT(rd(c, 20, (uint64_t)i * MIB, MIB, buf) == MIB);
		expect_chunk(buf, (uint64_t)i, 900, MIB);
	}
	cache_unpin(pin);
	for (int round = 0; round < 2; round++)
		for (uint64_t off = 0; off < other; off += MIB) {
			CU_ASSERT(read_through(c, 21, "other", other, off, MIB,
					       buf) == MIB);
			usleep(20000);
		}
	CU_ASSERT(chunks_local(c, 20, 4, buf) < 4);
	CU_ASSERT(cache_drop(c, 20) == 0 && cache_drop(c, 21) == 0);
	free(buf);
	cache_close(c);
}

/* Records made with one chunk size are never read with another. */
static void test_chunk_size_fixed(void)
{
	struct cache_opts o = {
		.dir = cache_dir, .db = db, .nloops = 1, .chunk_size = 2 * MIB
	};
	struct cache *c = NULL;

	CU_ASSERT(cache_open(&o, fake_store_store(fake), &c) == -EINVAL);
	c = open_cache(1, 0);
	cache_close(c);
}

int main(void)
{
	CU_pSuite s;
	unsigned failed;

	if (!mkdtemp(root))
		return 1;
	snprintf(cache_dir, sizeof(cache_dir), "%s/cache", root);
	snprintf(db_dir, sizeof(db_dir), "%s/db", root);
	snprintf(store_url_buf, sizeof(store_url_buf), "file://%s/store", root);
	if (fake_store_open(store_url_buf, &fake) ||
	    db_open(db_dir, 256 << 20, 8, &db))
		return 1;
	inner = fake_store_inner(fake);

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("cache_chunks", NULL, NULL);
	CU_add_test(s, "partial_read", test_partial_read);
	CU_add_test(s, "small_file_whole", test_small_file_whole);
	CU_add_test(s, "one_get_per_chunk", test_one_get_per_chunk);
	CU_add_test(s, "warm_restart_256mib", test_warm_restart_256mib);
	CU_add_test(s, "write_rmw", test_write_rmw);
	CU_add_test(s, "truncate_limit", test_truncate_limit);
	CU_add_test(s, "dirty_journal", test_dirty_journal);
	CU_add_test(s, "clean_write_in_flight", test_clean_write_in_flight);
	CU_add_test(s, "readahead", test_readahead);
	CU_add_test(s, "readahead_runs", test_readahead_runs);
	CU_add_test(s, "evict_capacity", test_evict_capacity);
	CU_add_test(s, "pin_evict", test_pin_evict);
	CU_add_test(s, "chunk_size_fixed", test_chunk_size_fixed);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	db_close(db);
	fake_store_close(fake);
	if (!failed && test_rmtree(root) != 0)
		return 1;
	return failed ? 1 : 0;
}
