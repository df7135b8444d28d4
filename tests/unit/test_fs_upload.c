/*
 * Unit tests for fs/'s write-back over the chunked cache: a 200 MiB file
 * goes up as a multipart upload; a small change to a big object keeps
 * the unchanged parts with UploadPartCopy (and falls back to sending
 * them where the store says -ENOTSUP); a write to a big object that is
 * not local fetches only the chunk it covers in part; dirty data past
 * max_dirty, or with the store unreachable, answers -EAGAIN; a multipart upload cut short is aborted
 * at the next start, also one whose id we never learnt (created, then a
 * crash or a lost answer before its id was journaled); with
 * strict_commit, COMMIT answers once the object is in the store; a cold
 * READ that meets our own attributes rewrite before its commit is retried,
 * never ESTALE.  The store is the local-directory backend
 * behind the tests' fake store (tests/lib/fake_store.h), which counts
 * GETs, PUTs, parts and part-copies and fails or holds calls on demand.
 */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "db/db.h"
#include "fs/fs.h"
#include "metrics/metrics.h"
#include "s3/store.h"
#include "tests/lib/fake_store.h"
#include "tests/lib/testlib.h"

/* The room of the one READ/WRITE/COMMIT a thread has in flight. */
static _Thread_local struct fs_io io_room;

#define MIB (1u << 20)

static char base[] = "/tmp/mapfs-test-upload-XXXXXX";
static int seq;
static struct store *inner;
static struct db *db;
static struct cache *cache;
static struct fs *fs;
static const struct fs_ctx ROOT = { .loop = -1 };

/* --- the store: counts what the uploader asks of it, faults on demand -- */

static struct fake_store *fake;
static unsigned faults; /* the fake's fault set, FAKE_* */

static void fault(unsigned which, bool on)
{
	faults = on ? faults | which : faults & ~which;
	fake_store_faults(fake, faults);
}

static int count(enum fake_call kind)
{
	return fake_store_count(fake, kind);
}

static void counts_reset(void)
{
	fake_store_counts_reset(fake);
}

/* --- a fresh gateway state per test ------------------------------------- */

static char fx_dir[300];
static bool strict;        /* the next fs_start's strict_commit */
static bool listing_attrs; /* the next fs_start's listing_attrs */

static int fs_start(uint64_t max_dirty)
{
	return fs_open(&(struct fs_opts){ .dir_ttl_ms = 60000,
					  .upload_delay_ms = 3600000,
					  /* the usual upload's layout */
					  .no_early_upload = true,
					  .max_dirty = max_dirty,
					  .strict_commit = strict,
					  .listing_attrs = listing_attrs },
		       db, cache, fake_store_store(fake), &fs);
}

static void fx_open(uint64_t max_dirty)
{
	char *dir = fx_dir, p[340];

	snprintf(fx_dir, sizeof(fx_dir), "%s/%d", base, ++seq);
	CU_ASSERT_FATAL(mkdir(dir, 0700) == 0);
	snprintf(p, sizeof(p), "file://%s/store", dir);
	CU_ASSERT_FATAL(fake_store_open(p, &fake) == 0);
	inner = fake_store_inner(fake);
	faults = 0;
	snprintf(p, sizeof(p), "%s/db", dir);
	CU_ASSERT_FATAL(db_open(p, 256 << 20, 16, &db) == 0);
	snprintf(p, sizeof(p), "%s/cache", dir);
	CU_ASSERT_FATAL(cache_open(&(struct cache_opts){ .dir = p,
							 .db = db,
							 .nloops = 1,
							 .readahead = 1 },
				   fake_store_store(fake), &cache) == 0);
	CU_ASSERT_FATAL(fs_start(max_dirty) == 0);
}

static void fx_close(void)
{
	fs_close(fs, false);
	cache_close(cache);
	db_close(db);
	fake_store_close(fake);
}

struct wait {
	pthread_mutex_t m;
	pthread_cond_t c;
	bool done;
	int err;
};

static void w_done(void *p, int err)
{
	struct wait *w = p;

	pthread_mutex_lock(&w->m);
	w->err = err;
	w->done = true;
	pthread_cond_broadcast(&w->c);
	pthread_mutex_unlock(&w->m);
}

static int w_wait(struct wait *w)
{
	pthread_mutex_lock(&w->m);
	while (!w->done)
		pthread_cond_wait(&w->c, &w->m);
	pthread_mutex_unlock(&w->m);
	return w->err;
}

#define WAIT_INIT                                                             \
	{                                                                     \
		PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0 \
	}

static int do_write_how(uint64_t ino, uint64_t off, const void *buf, size_t len,
			enum fs_stable how)
{
	struct wait w = WAIT_INIT;
	enum fs_stable committed;
	struct fs_wcc wcc;

	fs_write(fs, &io_room, &ROOT, ino, off, buf, len, how, &committed, &wcc,
		 w_done, &w);
	return w_wait(&w);
}

static int do_write(uint64_t ino, uint64_t off, const void *buf, size_t len)
{
	return do_write_how(ino, off, buf, len, FS_UNSTABLE);
}

static int do_create(const char *name, uint64_t *ino)
{
	static const uint8_t zero[8];
	struct wait w = WAIT_INIT;
	struct fs_sattr sa = { 0 };
	struct fs_wcc wcc;
	struct fs_attr a;

	fs_create(fs, &ROOT, FS_ROOT_INO, name, FS_CREATE_GUARDED, &sa, zero,
		  ino, &a, &wcc, w_done, &w);
	return w_wait(&w);
}

static int do_lookup(const char *name, uint64_t *ino)
{
	struct wait w = WAIT_INIT;

	fs_revalidate(fs, &ROOT, FS_ROOT_INO, true, w_done, &w);
	if (w_wait(&w))
		return -EIO;
	return fs_lookup(fs, &ROOT, FS_ROOT_INO, name, ino, NULL);
}

static void fill(uint8_t *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (uint8_t)(seed >> 16);
	}
}

/* MiB i of the test pattern. */
static void pattern(uint8_t *buf, uint64_t i)
{
	fill(buf, MIB, 77 + (unsigned)i);
}

/* Put an object of n MiB of the pattern straight into the store. */
static void put_pattern(const char *key, unsigned n)
{
	char path[300];
	uint8_t *buf = malloc(MIB);
	FILE *f;

	snprintf(path, sizeof(path), "%s/obj.tmp", base);
	f = fopen(path, "w+");
	CU_ASSERT_FATAL(f && buf);
	for (unsigned i = 0; i < n; i++) {
		pattern(buf, i);
		CU_ASSERT_FATAL(fwrite(buf, 1, MIB, f) == MIB);
	}
	fflush(f);
	CU_ASSERT_FATAL(store_put_fd(inner, key, fileno(f), (uint64_t)n * MIB,
				     NULL, NULL) == 0);
	fclose(f);
	unlink(path);
	free(buf);
}

/* Create name through fs/ and write n MiB of the pattern into it. */
static void create_pattern(const char *name, unsigned n, uint64_t *ino)
{
	uint8_t *buf = malloc(MIB);

	CU_ASSERT_FATAL(buf && do_create(name, ino) == 0);
	for (unsigned i = 0; i < n; i++) {
		pattern(buf, i);
		CU_ASSERT_FATAL(do_write(*ino, (uint64_t)i * MIB, buf, MIB) ==
				0);
	}
	free(buf);
}

/*
 * The store's object is n MiB of the pattern, except len bytes of byte
 * value patch at off (len 0: none).
 */
static bool store_matches(const char *key, unsigned n, uint64_t off, size_t len,
			  uint8_t patch)
{
	uint8_t *want = malloc(MIB), *got = malloc(MIB);
	struct store_info info;
	bool ok = store_head(inner, key, &info) == 0 &&
		  info.size == (uint64_t)n * MIB;

	for (unsigned i = 0; ok && i < n; i++) {
		uint64_t lo = (uint64_t)i * MIB;
		size_t g = 0;

		pattern(want, i);
		for (uint64_t b = off; b < off + len; b++)
			if (b >= lo && b < lo + MIB)
				want[b - lo] = patch;
		ok = store_get(inner, key, lo, MIB, got, &g) == 0 && g == MIB &&
		     memcmp(want, got, MIB) == 0;
	}
	free(want);
	free(got);
	return ok;
}

/* --- tests -------------------------------------------------------------- */

/* A 200 MiB file written through fs/ goes up in 8 parts of 25 MiB, one
 * per upload thread. */
static void test_multipart_200mib(void)
{
	uint64_t ino;

	fx_open(0);
	create_pattern("two-hundred", 200, &ino);
	counts_reset();
	CU_ASSERT(fs_flush(fs) == 0);
	CU_ASSERT(count(FAKE_PART) == 8);
	CU_ASSERT(count(FAKE_PART_COPY) == 0); /* nothing old to copy */
	CU_ASSERT(count(FAKE_GET) == 0);       /* all of it was local */
	CU_ASSERT(store_matches("two-hundred", 200, 0, 0, 0));
	fx_close();
}

/* 4 KiB changed in a 200 MiB object: one part sent, seven copied. */
static void test_part_copy(void)
{
	uint8_t patch[4096];
	uint64_t ino, off = 100ull * MIB + 12345;

	fx_open(0);
	put_pattern("big", 200);
	CU_ASSERT_FATAL(do_lookup("big", &ino) == 0);
	memset(patch, 0xee, sizeof(patch));
	counts_reset();
	CU_ASSERT_FATAL(do_write(ino, off, patch, sizeof(patch)) == 0);
	/* Not local before: only the chunk the write covers in part. */
	CU_ASSERT(count(FAKE_GET) == 1);
	CU_ASSERT(fs_flush(fs) == 0);
	CU_ASSERT(count(FAKE_PART_COPY) == 7);
	CU_ASSERT(count(FAKE_PART) == 1);
	/* The part sent (100..125 MiB) needed its other 24 chunks. */
	CU_ASSERT(count(FAKE_GET) == 25);
	CU_ASSERT(store_matches("big", 200, off, sizeof(patch), 0xee));
	fx_close();
}

/*
 * A store that takes 1 GiB in one PUT (the file store, loopback S3): a
 * new 200 MiB file goes in one PUT, but a 4 KiB change of a 200 MiB
 * object that is not local goes as parts again (seven copied), instead
 * of fetching the 199 MiB it lacks into the cache first.
 */
static void test_put_max_local_only(void)
{
	uint8_t patch[4096];
	uint64_t ino, off = 100ull * MIB + 12345;

	fx_open(0);
	fake_store_put_max(fake, 1ull << 30);
	create_pattern("new", 200, &ino);
	counts_reset();
	CU_ASSERT(fs_flush(fs) == 0);
	CU_ASSERT(count(FAKE_PUT_FD) == 1 && count(FAKE_PART) == 0);
	CU_ASSERT(store_matches("new", 200, 0, 0, 0));

	put_pattern("old", 200);
	CU_ASSERT_FATAL(do_lookup("old", &ino) == 0);
	memset(patch, 0xee, sizeof(patch));
	CU_ASSERT_FATAL(do_write(ino, off, patch, sizeof(patch)) == 0);
	counts_reset();
	CU_ASSERT(fs_flush(fs) == 0);
	CU_ASSERT(count(FAKE_PUT_FD) == 0);
	CU_ASSERT(count(FAKE_PART_COPY) == 7 && count(FAKE_PART) == 1);
	CU_ASSERT(count(FAKE_GET) == 24);
	CU_ASSERT(store_matches("old", 200, off, sizeof(patch), 0xee));
	fx_close();
}

/* A store without part-copy: the unchanged parts are sent instead
 * (80 MiB: 5 parts of the smallest size, 16 MiB). */
static void test_part_copy_fallback(void)
{
	uint8_t patch[100];
	uint64_t ino;

	fx_open(0);
	put_pattern("nocopy", 80);
	CU_ASSERT_FATAL(do_lookup("nocopy", &ino) == 0);
	memset(patch, 0x11, sizeof(patch));
	CU_ASSERT_FATAL(do_write(ino, 5 * MIB, patch, sizeof(patch)) == 0);
	fault(FAKE_NO_PART_COPY, true);
	counts_reset();
	CU_ASSERT(fs_flush(fs) == 0);
	CU_ASSERT(count(FAKE_PART_COPY) == 0);
	CU_ASSERT(count(FAKE_PART) == 5);
	CU_ASSERT(store_matches("nocopy", 80, 5 * MIB, sizeof(patch), 0x11));
	fx_close();
}

/* Past max_dirty, WRITE and CREATE answer -EAGAIN until a flush. */
static void test_max_dirty(void)
{
	uint8_t *buf = calloc(1, MIB);
	uint64_t ino, ino2;
	int rc = 0;
	unsigned i;

	fx_open(8 * MIB);
	CU_ASSERT_FATAL(do_create("dirty", &ino) == 0);
	for (i = 0; i < 32 && !rc; i++)
		rc = do_write(ino, (uint64_t)i * MIB, buf, MIB);
	/* 8 MiB in, then refused (later only if the syncer freed some). */
	CU_ASSERT(rc == -EAGAIN && i >= 9);
	CU_ASSERT(do_create("more", &ino2) == -EAGAIN);
	CU_ASSERT(fs_flush(fs) == 0);
	CU_ASSERT(do_write(ino, 8ull * MIB, buf, MIB) == 0);
	CU_ASSERT(do_create("more", &ino2) == 0);
	free(buf);
	fx_close();
}

/* Multipart uploads in the file store's staging area. */
static int mpu_pending(void)
{
	char p[400];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(p, sizeof(p), "%s/store/.mapfs-mpu", fx_dir);
	d = opendir(p);
	if (!d)
		return 0;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* An upload cut short (neither completed nor aborted) is aborted at the
 * next start, and the file still goes up. */
static void test_mpu_recover(void)
{
	uint64_t ino;

	fx_open(0);
	create_pattern("cut-short", 70, &ino);
	fault(FAKE_MPU_FAIL, true);
	CU_ASSERT(fs_flush(fs) == -EAGAIN);
	CU_ASSERT(mpu_pending() > 0);
	fs_close(fs, false);
	fault(FAKE_MPU_FAIL, false);
	CU_ASSERT_FATAL(fs_start(0) == 0);
	CU_ASSERT(fs_flush(fs) == 0);
	/* The syncer aborts them as it starts, on its own thread. */
	for (int i = 0; i < 1000 && mpu_pending(); i++)
		usleep(10000);
	CU_ASSERT(mpu_pending() == 0);
	CU_ASSERT(store_matches("cut-short", 70, 0, 0, 0));
	fx_close();
}

/*
 * An upload made in the store whose id we never learnt: what a kill -9
 * between CreateMultipartUpload and the journal entry of its id leaves,
 * here made by answers lost after the store made the upload.  The ones
 * of earlier tries are aborted before the next try, the last one at the
 * next start, and the file still goes up.
 */
static void test_mpu_lost_create(void)
{
	uint64_t ino;

	fx_open(0);
	create_pattern("lost-id", 70, &ino);
	fault(FAKE_MPU_LOSE_CREATE, true);
	CU_ASSERT(fs_flush(fs) == -EAGAIN); /* tried a few times */
	CU_ASSERT(mpu_pending() == 1);
	fs_close(fs, false);
	fault(FAKE_MPU_LOSE_CREATE, false);
	CU_ASSERT_FATAL(fs_start(0) == 0);
	CU_ASSERT(fs_flush(fs) == 0);
	CU_ASSERT(mpu_pending() == 0);
	CU_ASSERT(store_matches("lost-id", 70, 0, 0, 0));
	fx_close();
}

static int do_commit(uint64_t ino)
{
	struct wait w = WAIT_INIT;
	struct fs_wcc wcc;

	fs_commit(fs, &io_room, &ROOT, ino, &wcc, w_done, &w);
	return w_wait(&w);
}

/* --strict-commit: once COMMIT answers, the object is in the store
 * (the upload delay of an hour would keep it out otherwise). */
static void test_strict_commit(void)
{
	struct store_info info;
	uint64_t ino, ino2;

	strict = true;
	fx_open(0);
	strict = false;
	create_pattern("strict", 3, &ino);
	CU_ASSERT(store_head(inner, "strict", &info) == -ENOENT);
	CU_ASSERT(do_commit(ino) == 0);
	CU_ASSERT(store_matches("strict", 3, 0, 0, 0));
	/* An empty new file: its (empty) object too. */
	CU_ASSERT_FATAL(do_create("empty", &ino2) == 0);
	CU_ASSERT(do_commit(ino2) == 0);
	CU_ASSERT(store_head(inner, "empty", &info) == 0 && info.size == 0);
	/* A FILE_SYNC WRITE is a COMMIT of its own: a Linux client that
	 * flushes in one WRITE sends no COMMIT after it. */
	CU_ASSERT_FATAL(do_create("fsync", &ino2) == 0);
	CU_ASSERT(do_commit(ino2) == 0);
	CU_ASSERT(do_write_how(ino2, 0, "synced", 6, FS_FILE_SYNC) == 0);
	CU_ASSERT(store_head(inner, "fsync", &info) == 0 && info.size == 6);
	/* An UNSTABLE one waits for its COMMIT, as before. */
	CU_ASSERT(do_write(ino2, 6, "+later", 6) == 0);
	CU_ASSERT(store_head(inner, "fsync", &info) == 0 && info.size == 6);
	fx_close();
}

/*
 * An upload journals the file's cached chunks clean (a read then takes
 * them from the cache file, not the store): the cache file's bytes must
 * be on the disk first.  Written without a COMMIT they were in the page
 * cache only, and a crash of the machine after the upload's commit left
 * clean records over bytes it lost.  The upload now syncs the file (one
 * file flush, and its name's directory) before it commits.
 */
static void test_upload_syncs_cache_file(void)
{
	uint64_t ino, flushes;

	fx_open(0);
	create_pattern("unsynced", 2, &ino);
	flushes = metrics_get(MET_FLUSH_FILE);
	CU_ASSERT(fs_flush(fs) == 0);
	CU_ASSERT(store_matches("unsynced", 2, 0, 0, 0));
	CU_ASSERT(metrics_get(MET_FLUSH_FILE) - flushes >= 1);
	fx_close();
}

/*
 * --strict-commit with many other files dirty: a pass used to look at the
 * first 256 of them only (by inode number), so a COMMIT of a file made
 * after 300 others still dirty never saw its upload and answered -EAGAIN
 * (JUKEBOX) after its tries, however long the client retried.
 */
static void test_strict_commit_many_dirty(void)
{
	struct store_info info;
	char name[32];
	uint64_t ino;

	strict = true;
	fx_open(0);
	strict = false;
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "dirty%03d", i);
		CU_ASSERT_FATAL(do_create(name, &ino) == 0);
		CU_ASSERT_FATAL(do_write(ino, 0, name, strlen(name)) == 0);
	}
	CU_ASSERT_FATAL(do_create("last", &ino) == 0);
	CU_ASSERT_FATAL(do_write(ino, 0, "committed", 9) == 0);
	CU_ASSERT(do_commit(ino) == 0);
	CU_ASSERT(store_head(inner, "last", &info) == 0 && info.size == 9);
	/* The others wait for their own COMMIT (the hour's delay). */
	CU_ASSERT(store_head(inner, "dirty000", &info) == -ENOENT);
	fx_close();
}

/*
 * --strict-commit, two COMMITs of one file taken by one pass (two clients,
 * or in a cluster a client's COMMIT and another gateway's request that
 * this one let go of the file): the pass made an upload of the file for
 * each, in parallel, and the later PUT replaced the object whose ETag the
 * record kept (the same write id passed its condition), so every reader
 * after it found the store "changed under a fetch" and a WRITE answered
 * STALE (test_e2e_cluster, "one writer per file", 2 runs in 12 under
 * load).  One upload per file per pass.
 */
static void test_strict_commit_twice_one_pass(void)
{
	static struct fs_io io1, io2, io3; /* a room per call in flight */
	struct wait w1 = WAIT_INIT, w2 = WAIT_INIT, w3 = WAIT_INIT;
	struct fs_wcc wcc1, wcc2, wcc3;
	struct store_info info;
	uint64_t first, twice;

	strict = true;
	fx_open(0);
	strict = false;
	CU_ASSERT_FATAL(do_create("first", &first) == 0);
	CU_ASSERT_FATAL(do_write(first, 0, "first", 5) == 0);
	CU_ASSERT_FATAL(do_create("twice", &twice) == 0);
	CU_ASSERT_FATAL(do_write(twice, 0, "twice", 5) == 0);
	fake_store_counts_reset(fake);
	/* A pass holds the syncer's lock while first's PUT is held; the two
	 * COMMITs of twice queue meanwhile and the next pass takes both. */
	fake_store_hold(fake, FAKE_PUT_FD, FAKE_HOLD_BEFORE);
	fs_commit(fs, &io1, &ROOT, first, &wcc1, w_done, &w1);
	CU_ASSERT(fake_store_held_wait(fake, FAKE_PUT_FD, 1, 20000));
	fs_commit(fs, &io2, &ROOT, twice, &wcc2, w_done, &w2);
	fs_commit(fs, &io3, &ROOT, twice, &wcc3, w_done, &w3);
	usleep(100 * 1000); /* both queued, a thread waits for the lock */
	fake_store_hold(fake, FAKE_PUT_FD, FAKE_HOLD_NONE);
	CU_ASSERT(w_wait(&w1) == 0);
	CU_ASSERT(w_wait(&w2) == 0);
	CU_ASSERT(w_wait(&w3) == 0);
	CU_ASSERT(store_head(inner, "twice", &info) == 0 && info.size == 5);
	CU_ASSERT_EQUAL(count(FAKE_PUT_FD), 2); /* first's, twice's */
	fx_close();
}

/*
 * --strict-commit from many clients at once: one pass uploads while the
 * one before commits its records (a file whose commit is on the way is
 * left to the next pass).  Each thread rewrites its own file and
 * COMMITs it, over and over: every COMMIT that answers 0 finds its bytes
 * in the store.
 */
#define SC_THREADS 8
#define SC_ROUNDS 15

struct sc_arg {
	int id;
	uint64_t ino;
	int bad;
};

static void *sc_thread(void *p)
{
	struct sc_arg *a = p;
	char key[32], want[64], got[64];

	snprintf(key, sizeof(key), "sc%d", a->id);
	for (int r = 0; r < SC_ROUNDS; r++) {
		size_t n = (size_t)snprintf(want, sizeof(want),
					    "file %d, round %02d", a->id, r);
		size_t g = 0;

		if (do_write(a->ino, 0, want, n) || do_commit(a->ino) ||
		    store_get(inner, key, 0, sizeof(got), got, &g) || g != n ||
		    memcmp(got, want, n))
			a->bad++;
	}
	return NULL;
}

static void test_strict_commit_parallel(void)
{
	struct sc_arg args[SC_THREADS];
	pthread_t t[SC_THREADS];
	char name[32];

	strict = true;
	fx_open(0);
	strict = false;
	for (int i = 0; i < SC_THREADS; i++) {
		args[i] = (struct sc_arg){ .id = i };
		snprintf(name, sizeof(name), "sc%d", i);
		CU_ASSERT_FATAL(do_create(name, &args[i].ino) == 0);
	}
	for (int i = 0; i < SC_THREADS; i++)
		CU_ASSERT_FATAL(
			pthread_create(&t[i], NULL, sc_thread, &args[i]) == 0);
	for (int i = 0; i < SC_THREADS; i++) {
		pthread_join(t[i], NULL);
		CU_ASSERT(args[i].bad == 0);
	}
	fx_close();
}

/*
 * The store unreachable: changes land in the cache and the journal (only
 * a stable write that needs the store waits) and go up once it is back.
 * (Before issue 17, WRITE and CREATE answered -EAGAIN the whole outage.)
 */
static void test_store_down(void)
{
	struct store_info info;
	uint64_t ino, ino2;

	fx_open(0);
	CU_ASSERT_FATAL(do_create("before", &ino) == 0);
	CU_ASSERT(do_write(ino, 0, "x", 1) == 0);
	fault(FAKE_PUTS_DOWN, true);
	CU_ASSERT(fs_flush(fs) == -EAGAIN);
	CU_ASSERT(store_down(fake_store_store(fake)));
	CU_ASSERT(do_write(ino, 1, "y", 1) == 0);
	CU_ASSERT(do_create("during", &ino2) == 0);
	CU_ASSERT(do_write(ino2, 0, "z", 1) == 0);
	fault(FAKE_PUTS_DOWN, false);
	CU_ASSERT(fs_flush(fs) == 0);
	CU_ASSERT(store_head(inner, "before", &info) == 0 && info.size == 2);
	CU_ASSERT(store_head(inner, "during", &info) == 0 && info.size == 1);
	fx_close();
}

static int do_rename(const char *from, const char *to);

/*
 * A flush waits while work moves and gives up only with a reason an
 * operator can act on (issue 50): the store away; a file that fails for
 * good, named, at once rather than after the patience; stopped by its
 * caller.  Then, with the cause gone, it ends with everything up.
 */
static void test_flush_reasons(void)
{
	char why[FS_KEY_TEXT_MAX + 200], p[400];
	atomic_bool cancel;
	uint64_t ino, ino2;
	int64_t t0;

	fx_open(0);
	CU_ASSERT_FATAL(do_create("ok", &ino) == 0);
	CU_ASSERT(do_write(ino, 0, "x", 1) == 0);
	fault(FAKE_PUTS_DOWN, true);
	CU_ASSERT(fs_flush_wait(fs, 1000, NULL, why, sizeof(why)) == -EAGAIN);
	CU_ASSERT(strstr(why, "the store does not answer") != NULL);
	atomic_init(&cancel, true);
	CU_ASSERT(fs_flush_wait(fs, 0, &cancel, why, sizeof(why)) ==
		  -ECANCELED);
	fault(FAKE_PUTS_DOWN, false);
	CU_ASSERT(fs_flush_wait(fs, 0, NULL, why, sizeof(why)) == 0);

	/* A directory in the store where the file goes: its upload fails
	 * for good, and nothing else is left. */
	CU_ASSERT_FATAL(do_create("blocked", &ino2) == 0);
	CU_ASSERT(do_write(ino2, 0, "y", 1) == 0);
	snprintf(p, sizeof(p), "%s/store/blocked", fx_dir);
	CU_ASSERT_FATAL(mkdir(p, 0700) == 0);
	snprintf(p, sizeof(p), "%s/store/blocked/in", fx_dir);
	CU_ASSERT_FATAL(mkdir(p, 0700) == 0);
	t0 = test_now_ms();
	int rc = fs_flush_wait(fs, 20000, NULL, why, sizeof(why));

	CU_ASSERT(rc < 0 && rc != -EAGAIN && rc != -ECANCELED);
	CU_ASSERT(strstr(why, "\"blocked\"") != NULL);
	CU_ASSERT(strstr(why, "fail for good") != NULL);
	CU_ASSERT(test_now_ms() - t0 < 10000); /* not the patience */
	rmdir(p);
	snprintf(p, sizeof(p), "%s/store/blocked", fx_dir);
	rmdir(p);
	CU_ASSERT(fs_flush_wait(fs, 0, NULL, why, sizeof(why)) == 0);

	/* A pass of queued copies and deletes alone is progress: 150
	 * renames are 300 records, more than one pass takes. */
	for (int i = 0; i < 150; i++) {
		char a[16];

		snprintf(a, sizeof(a), "m%d", i);
		CU_ASSERT_FATAL(do_create(a, &ino) == 0);
	}
	CU_ASSERT(fs_flush(fs) == 0);
	for (int i = 0; i < 150; i++) {
		char a[16], b[16];

		snprintf(a, sizeof(a), "m%d", i);
		snprintf(b, sizeof(b), "o%d", i);
		CU_ASSERT(do_rename(a, b) == 0);
	}
	usleep(100000); /* quiet: the renamed files' records are due */
	CU_ASSERT(fs_flush_wait(fs, 1, NULL, why, sizeof(why)) == 0);
	fx_close();
}

static int do_read(uint64_t ino, uint64_t off, size_t len, void *buf,
		   size_t *n);

/*
 * Any store operation that finds the store down (here a fetch for a
 * READ miss, no upload at all) marks it down at once: the next miss is
 * answered without asking the store; once it is back, the syncer's probe
 * finds out without any upload or flush.  New files are accepted
 * meanwhile.
 */
static void test_store_down_probe(void)
{
	char buf[4096];
	uint64_t ino, ino2;
	size_t n;
	int i;

	fx_open(0);
	counts_reset();
	put_pattern("remote", 1);
	CU_ASSERT_FATAL(do_lookup("remote", &ino) == 0);
	fault(FAKE_PUTS_DOWN | FAKE_ALL_DOWN, true);
	CU_ASSERT(do_read(ino, 0, sizeof(buf), buf, &n) == -EAGAIN);
	CU_ASSERT(store_down(fake_store_store(fake)));
	int gets = count(FAKE_GET);

	CU_ASSERT(do_read(ino, 8192, sizeof(buf), buf, &n) == -EAGAIN);
	CU_ASSERT(count(FAKE_GET) == gets); /* not asked */
	CU_ASSERT(do_create("during", &ino2) == 0);
	/* The syncer probes (a HEAD) about every second while down. */
	int heads = count(FAKE_HEAD);

	for (i = 0; i < 40 && count(FAKE_HEAD) < heads + 2; i++)
		usleep(100000);
	CU_ASSERT(count(FAKE_HEAD) >= heads + 2);
	CU_ASSERT(store_down(fake_store_store(fake)));
	fault(FAKE_PUTS_DOWN | FAKE_ALL_DOWN, false);
	for (i = 0; i < 40 && store_down(fake_store_store(fake)); i++)
		usleep(100000);
	CU_ASSERT(!store_down(fake_store_store(fake)));
	CU_ASSERT(count(FAKE_PUT_FD) == 0); /* no upload told it */
	CU_ASSERT(do_read(ino, 0, sizeof(buf), buf, &n) == 0 &&
		  n == sizeof(buf));
	fx_close();
}

static int do_rename(const char *from, const char *to)
{
	struct wait w = WAIT_INIT;
	struct fs_wcc a, b;

	fs_rename(fs, &ROOT, FS_ROOT_INO, from, FS_ROOT_INO, to, &a, &b, w_done,
		  &w);
	return w_wait(&w);
}

static int do_read(uint64_t ino, uint64_t off, size_t len, void *buf, size_t *n)
{
	struct wait w = WAIT_INIT;
	struct fs_attr a;
	bool eof;

	fs_read(fs, &io_room, &ROOT, ino, off, len, buf, n, &eof, &a, w_done,
		&w);
	return w_wait(&w);
}

/* A file partly local, renamed: its other chunks are at the old key
 * until the COPY runs; a READ meanwhile is retried, never NOENT. */
static void test_rename_partial(void)
{
	uint8_t *want = malloc(MIB), *got = malloc(MIB);
	uint64_t ino;
	size_t n = 0;
	int rc;

	fx_open(0);
	put_pattern("old-name", 4);
	CU_ASSERT_FATAL(do_lookup("old-name", &ino) == 0);
	CU_ASSERT_FATAL(do_write(ino, 0, "abc", 3) == 0);
	CU_ASSERT_FATAL(do_rename("old-name", "new-name") == 0);
	rc = do_read(ino, 2 * MIB, MIB, got, &n);
	CU_ASSERT(rc == 0 || rc == -EAGAIN);
	CU_ASSERT(fs_flush(fs) == 0);
	CU_ASSERT(do_read(ino, 2 * MIB, MIB, got, &n) == 0 && n == MIB);
	pattern(want, 2);
	CU_ASSERT(memcmp(want, got, MIB) == 0);
	free(want);
	free(got);
	fx_close();
}

static void *flush_main(void *p)
{
	*(int *)p = fs_flush(fs);
	return NULL;
}

/*
 * Only a file's attributes changed: the syncer rewrites them by a copy
 * onto itself, which gives the object a new version.  A READ that fetches
 * between that copy and its commit pins the version the record still
 * names and meets the new one: our own rewrite, not another writer's, so
 * the client is told to try again (-EAGAIN: JUKEBOX), and then reads the
 * file.  (It got -ESTALE, a dead handle: CI met it when a cluster node's
 * takeover rewrote a dead node's file under a client's WRITE.)
 */
static void test_meta_rewrite_read(void)
{
	uint8_t *want = malloc(MIB), *got = malloc(MIB);
	struct fs_sattr sa = { .mask = FS_SET_MODE, .mode = 0600 };
	struct wait w = WAIT_INIT;
	struct fs_wcc wcc;
	pthread_t t;
	uint64_t ino;
	size_t n = 0;
	int frc = -1, rc;

	fx_open(0);
	put_pattern("attrs", 1);
	CU_ASSERT_FATAL(do_lookup("attrs", &ino) == 0);
	fs_setattr(fs, &ROOT, ino, &sa, NULL, &wcc, w_done, &w);
	CU_ASSERT_FATAL(w_wait(&w) == 0);
	fake_store_hold(fake, FAKE_COPY, FAKE_HOLD_AFTER);
	CU_ASSERT_FATAL(pthread_create(&t, NULL, flush_main, &frc) == 0);
	CU_ASSERT(fake_store_held_wait(fake, FAKE_COPY, 1, 20000));
	rc = do_read(ino, 0, MIB, got, &n);
	CU_ASSERT(rc == -EAGAIN);
	fake_store_hold(fake, FAKE_COPY, FAKE_HOLD_NONE);
	pthread_join(t, NULL);
	CU_ASSERT(frc == 0);
	CU_ASSERT(do_read(ino, 0, MIB, got, &n) == 0 && n == MIB);
	pattern(want, 0);
	CU_ASSERT(memcmp(want, got, MIB) == 0);
	free(want);
	free(got);
	fx_close();
}

/*
 * A listing of objects no gateway knows HEADs them (owner, mode, mtime,
 * symlink) many at once: they were HEAD one after another, and a cold
 * directory of 10,000 objects waited 10,000 round trips (issue 18).  All
 * four HEADs must be at the gate together; what they said is then what
 * the files show.
 */
static void test_heads_parallel(void)
{
	const struct store_meta meta = {
		.has_mode = true, .has_uid = true, .mode = 0100751, .uid = 4242
	};
	struct wait w = WAIT_INIT;
	struct fs_attr a;
	char name[16];
	uint64_t ino;

	fx_open(0);
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "h%d", i);
		CU_ASSERT_FATAL(store_put(inner, name, "x", 1, &meta, NULL) ==
				0);
	}
	fake_store_hold(fake, FAKE_HEAD, FAKE_HOLD_BEFORE);
	fs_revalidate(fs, &ROOT, FS_ROOT_INO, true, w_done, &w);
	CU_ASSERT(fake_store_held_wait(fake, FAKE_HEAD, 4, 20000));
	fake_store_hold(fake, FAKE_HEAD, FAKE_HOLD_NONE);
	CU_ASSERT_FATAL(w_wait(&w) == 0);
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "h%d", i);
		CU_ASSERT(fs_lookup(fs, &ROOT, FS_ROOT_INO, name, &ino, &a) ==
			  0);
		CU_ASSERT(a.mode == 0751 && a.uid == 4242 && a.size == 1);
	}
	fx_close();
}

/*
 * --listing-attrs: objects new to the namespace are not HEAD at all;
 * they show the listing's size, mode 0644 and the default owner, and
 * read as the store has them.
 */
static void test_listing_attrs(void)
{
	const struct store_meta meta = {
		.has_mode = true, .has_uid = true, .mode = 0100751, .uid = 4242
	};
	uint8_t got[8];
	struct fs_attr a;
	uint64_t ino;
	size_t n = 0;

	listing_attrs = true;
	fx_open(0);
	listing_attrs = false;
	CU_ASSERT_FATAL(store_put(inner, "la", "abc", 3, &meta, NULL) == 0);
	counts_reset();
	CU_ASSERT_FATAL(do_lookup("la", &ino) == 0);
	CU_ASSERT(count(FAKE_HEAD) == 0);
	CU_ASSERT(fs_lookup(fs, &ROOT, FS_ROOT_INO, "la", &ino, &a) == 0);
	CU_ASSERT(a.size == 3 && a.mode == 0644 && a.uid == 0 &&
		  a.type == FS_REG);
	CU_ASSERT(do_read(ino, 0, sizeof(got), got, &n) == 0 && n == 3 &&
		  !memcmp(got, "abc", 3));
	fx_close();
}

/* Waits up to ms for w: its error, or 1 if it is not done by then. */
static int w_wait_ms(struct wait *w, int ms)
{
	struct timespec dl;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += ms / 1000;
	dl.tv_nsec += (long)(ms % 1000) * 1000000;
	if (dl.tv_nsec >= 1000000000) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&w->m);
	while (!w->done && rc == 0)
		rc = pthread_cond_timedwait(&w->c, &w->m, &dl);
	rc = w->done ? w->err : 1;
	pthread_mutex_unlock(&w->m);
	return rc;
}

/* What a walk of a directory saw: names f0000..f1499 by number. */
struct walk {
	int n, seen[1500], dirs;
	uint64_t last;
};

static int walk_one(void *p, uint64_t ino, const char *name, uint64_t cookie,
		    const struct fs_attr *attr)
{
	struct walk *wk = p;
	int k;

	(void)ino;
	wk->last = cookie;
	if (sscanf(name, "f%d", &k) == 1 && k >= 0 && k < 1500) {
		wk->seen[k]++;
		wk->n++;
		wk->dirs += attr && attr->type == FS_DIR;
	}
	return 0;
}

static int walk_from(uint64_t dir, uint64_t cookie, struct walk *wk, bool *eof)
{
	struct fs_attr da;
	uint64_t verf;

	return fs_readdir(fs, &ROOT, dir, cookie, true, walk_one, wk, &verf,
			  eof, &da);
}

/*
 * A directory never listed is walked while its listing goes on (issue
 * 18): with the second page of 1,500 objects held, READDIR answers the
 * first page's entries, holds back eof, and waits for more past them; a
 * child's attributes are fresh (no new listing per GETATTR); a LOOKUP
 * of a merged name goes on, of any other waits until it is in or the
 * listing ends.  Then every name is there once.  (A file and a
 * prefix of one name on two pages needs S3: tests/s3.)
 */
static void test_first_listing_progressive(void)
{
	struct wait walk = WAIT_INIT, more = WAIT_INIT, look = WAIT_INIT;
	struct wait name_in = WAIT_INIT, name_later = WAIT_INIT,
		    name_none = WAIT_INIT, name_dots = WAIT_INIT;
	struct walk wk;
	char key[32];
	struct fs_attr a, b;
	uint64_t d, child, last;
	bool eof;

	fx_open(0);
	for (int i = 0; i < 1500; i++) {
		snprintf(key, sizeof(key), "d/f%04d", i);
		CU_ASSERT_FATAL(store_put(inner, key, "x", 1, NULL, NULL) == 0);
	}
	CU_ASSERT_FATAL(do_lookup("d", &d) == 0);
	CU_ASSERT_FATAL(fs_getattr(fs, d, &a) == 0);
	fake_store_hold_after(fake, FAKE_LIST, FAKE_HOLD_BEFORE, 1);
	fs_revalidate_walk(fs, &ROOT, d, 0, w_done, &walk);
	CU_ASSERT_FATAL(w_wait_ms(&walk, 20000) == 0);
	CU_ASSERT(fake_store_held_wait(fake, FAKE_LIST, 1, 20000));

	memset(&wk, 0, sizeof(wk));
	CU_ASSERT(walk_from(d, 0, &wk, &eof) == 0);
	/* One page in (1,000 keys, "d/" itself may be one), less its last
	 * file: a prefix of its name could be on the next page. */
	CU_ASSERT(wk.n >= 998 && wk.n <= 999 && !eof && wk.seen[0] == 1 &&
		  wk.seen[997] == 1 && wk.seen[1499] == 0 && wk.dirs == 0);
	CU_ASSERT(fs_getattr(fs, d, &b) == 0 &&
		  b.mtime.tv_sec == a.mtime.tv_sec &&
		  b.mtime.tv_nsec == a.mtime.tv_nsec);
	last = wk.last;
	memset(&wk, 0, sizeof(wk));
	CU_ASSERT(walk_from(d, last, &wk, &eof) == 0);
	CU_ASSERT(wk.n == 0 && !eof);
	CU_ASSERT(fs_readdir_wait(fs, d, w_done, &more) == 0);
	CU_ASSERT(fs_lookup(fs, &ROOT, d, "f0005", &child, NULL) == 0);
	CU_ASSERT(fs_revalidate_attr(fs, &ROOT, child, w_done, &look) == 0);
	fs_revalidate(fs, &ROOT, d, false, w_done, &look);
	/* A LOOKUP of a name merged goes on; one of a name still to come
	 * (or never), and "..", only the first once it is in. */
	fs_revalidate_name(fs, &ROOT, d, "f0006", w_done, &name_in);
	fs_revalidate_name(fs, &ROOT, d, "f1400", w_done, &name_later);
	fs_revalidate_name(fs, &ROOT, d, "none", w_done, &name_none);
	fs_revalidate_name(fs, &ROOT, d, "..", w_done, &name_dots);
	CU_ASSERT(w_wait_ms(&name_in, 2000) == 0);
	CU_ASSERT(w_wait_ms(&name_dots, 2000) == 0);
	CU_ASSERT(w_wait_ms(&more, 200) == 1 && w_wait_ms(&look, 200) == 1);
	CU_ASSERT(w_wait_ms(&name_later, 10) == 1 &&
		  w_wait_ms(&name_none, 10) == 1);

	fake_store_hold(fake, FAKE_LIST, FAKE_HOLD_NONE);
	CU_ASSERT(w_wait_ms(&more, 20000) == 0);
	CU_ASSERT(w_wait_ms(&look, 20000) == 0);
	CU_ASSERT(w_wait_ms(&name_later, 20000) == 0);
	CU_ASSERT(w_wait_ms(&name_none, 20000) == 0);
	CU_ASSERT(fs_lookup(fs, &ROOT, d, "f1400", &child, NULL) == 0);
	CU_ASSERT(fs_lookup(fs, &ROOT, d, "none", &child, NULL) == -ENOENT);
	memset(&wk, 0, sizeof(wk));
	CU_ASSERT(walk_from(d, 0, &wk, &eof) == 0);
	CU_ASSERT(eof && wk.n == 1500 && wk.dirs == 0);
	for (int i = 0; i < 1500; i++)
		CU_ASSERT(wk.seen[i] == 1);
	/* Listed: a second look is fresh, no page fetched. */
	counts_reset();
	CU_ASSERT(fs_revalidate_attr(fs, &ROOT, child, w_done, &look) == 0);
	CU_ASSERT(count(FAKE_LIST) == 0);
	fx_close();
}

static int do_mkdir_in(uint64_t dir, const char *name, uint64_t *ino)
{
	struct wait w = WAIT_INIT;
	struct fs_sattr sa = { 0 };
	struct fs_wcc wcc;
	struct fs_attr a;

	fs_mkdir(fs, &ROOT, dir, name, &sa, ino, &a, &wcc, w_done, &w);
	return w_wait(&w);
}

static int do_create_in(uint64_t dir, const char *name, uint64_t *ino)
{
	static const uint8_t zero[8];
	struct wait w = WAIT_INIT;
	struct fs_sattr sa = { 0 };
	struct fs_wcc wcc;
	struct fs_attr a;

	fs_create(fs, &ROOT, dir, name, FS_CREATE_GUARDED, &sa, zero, ino, &a,
		  &wcc, w_done, &w);
	return w_wait(&w);
}

/* The store's object key holds exactly text (NULL: no such object). */
static bool store_holds(const char *key, const char *text)
{
	struct store_info info;
	char buf[64] = { 0 };
	size_t n = 0;
	int rc = store_head(inner, key, &info);

	if (!text)
		return rc == -ENOENT;
	if (rc || info.size != strlen(text) || info.size >= sizeof(buf))
		return false;
	rc = store_get(inner, key, 0, info.size, buf, &n);
	return !rc && n == info.size && !memcmp(buf, text, n);
}

/*
 * The queued store records of renames run many at a time (issue 49), in
 * their order where a key is shared: a chain of renames, a replaced
 * target, a file made again at a renamed directory's old name while
 * more records are queued than a pass takes (its upload must wait for
 * the DELETE of the old object there, or it met that object as another
 * writer's and was moved aside).
 */
static void test_pending_order(void)
{
	uint64_t aside0 = metrics_get(MET_CONFLICTS_ASIDE);
	char name[32], text[32];
	uint64_t d, ino, nd, ni;

	fx_open(0);
	CU_ASSERT_FATAL(do_mkdir_in(FS_ROOT_INO, "d", &d) == 0);
	for (int i = 0; i < 600; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		snprintf(text, sizeof(text), "old %d", i);
		CU_ASSERT_FATAL(do_create_in(d, name, &ino) == 0);
		CU_ASSERT_FATAL(do_write(ino, 0, text, strlen(text)) == 0);
	}
	CU_ASSERT_FATAL(do_create("a", &ino) == 0);
	CU_ASSERT(do_write(ino, 0, "A", 1) == 0);
	CU_ASSERT_FATAL(do_create("x", &ino) == 0);
	CU_ASSERT(do_write(ino, 0, "X", 1) == 0);
	CU_ASSERT_FATAL(do_create("y", &ino) == 0);
	CU_ASSERT(do_write(ino, 0, "Y", 1) == 0);
	CU_ASSERT(fs_flush(fs) == 0);
	CU_ASSERT(store_holds("d/f599", "old 599"));

	/* 1,200 records for d's files: more than one pass runs. */
	CU_ASSERT(do_rename("d", "e") == 0);
	CU_ASSERT(do_rename("a", "b") == 0);
	CU_ASSERT(do_rename("b", "c") == 0);
	CU_ASSERT(do_rename("x", "y") == 0); /* over y */
	CU_ASSERT_FATAL(do_mkdir_in(FS_ROOT_INO, "d", &nd) == 0);
	CU_ASSERT_FATAL(do_create_in(nd, "f599", &ni) == 0);
	CU_ASSERT(do_write(ni, 0, "new", 3) == 0);
	/* The queue as ctl status shows it: its length, its age. */
	struct fs_dirty_stat ds;

	CU_ASSERT(fs_dirty_stat(fs, &ds) == 0);
	CU_ASSERT(ds.pending >= 1200);
	CU_ASSERT(ds.pending_age_ms < 10000);
	CU_ASSERT(fs_flush(fs) == 0);
	CU_ASSERT(fs_dirty_stat(fs, &ds) == 0);
	CU_ASSERT(ds.pending == 0 && ds.pending_age_ms == 0);
	CU_ASSERT(ds.pending_rate > 0);

	CU_ASSERT(store_holds("d/f599", "new"));
	CU_ASSERT(store_holds("e/f599", "old 599"));
	CU_ASSERT(store_holds("e/f0", "old 0"));
	CU_ASSERT(store_holds("d/f0", NULL));
	CU_ASSERT(store_holds("c", "A"));
	CU_ASSERT(store_holds("a", NULL));
	CU_ASSERT(store_holds("b", NULL));
	CU_ASSERT(store_holds("y", "X"));
	CU_ASSERT(store_holds("x", NULL));
	CU_ASSERT_EQUAL(metrics_get(MET_CONFLICTS_ASIDE), aside0);
	fx_close();
}

int main(void)
{
	CU_pSuite s;
	unsigned failed;

	if (!mkdtemp(base))
		return 1;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("fs_upload", NULL, NULL);
	CU_add_test(s, "multipart_200mib", test_multipart_200mib);
	CU_add_test(s, "part_copy", test_part_copy);
	CU_add_test(s, "part_copy_fallback", test_part_copy_fallback);
	CU_add_test(s, "put_max_local_only", test_put_max_local_only);
	CU_add_test(s, "max_dirty", test_max_dirty);
	CU_add_test(s, "mpu_recover", test_mpu_recover);
	CU_add_test(s, "mpu_lost_create", test_mpu_lost_create);
	CU_add_test(s, "upload_syncs_cache_file", test_upload_syncs_cache_file);
	CU_add_test(s, "strict_commit", test_strict_commit);
	CU_add_test(s, "strict_commit_many_dirty",
		    test_strict_commit_many_dirty);
	CU_add_test(s, "strict_commit_twice_one_pass",
		    test_strict_commit_twice_one_pass);
	CU_add_test(s, "strict_commit_parallel", test_strict_commit_parallel);
	CU_add_test(s, "store_down", test_store_down);
	CU_add_test(s, "store_down_probe", test_store_down_probe);
	CU_add_test(s, "rename_partial", test_rename_partial);
	CU_add_test(s, "meta_rewrite_read", test_meta_rewrite_read);
	CU_add_test(s, "heads_parallel", test_heads_parallel);
	CU_add_test(s, "listing_attrs", test_listing_attrs);
	CU_add_test(s, "flush_reasons", test_flush_reasons);
	CU_add_test(s, "pending_order", test_pending_order);
	CU_add_test(s, "first_listing_progressive",
		    test_first_listing_progressive);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	if (!failed && test_rmtree(base) != 0)
		return 1;
	return failed ? 1 : 0;
}
