/*
 * Unit tests for cache/: local data I/O on loops and inline, fetches from
 * a real local-directory store, one download per chunk, errors,
 * attributes, durability across reopen, and the fd table's bound.
 * (Chunk-level behaviour: test_cache_chunks.c.)
 *
 * The cache sees the store through the tests' fake store
 * (tests/lib/fake_store.h), which counts GETs and can hold them at a gate, so "one download for two readers" and "a drop
 * cancels a fetch" are tested by counts and order, never by timing.
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/cache.h"
#include "cache/cache_int.h" /* cache_dir_needs_sync(), fetch_idle */
#include "db/db.h"
#include "s3/store.h"
#include "tests/lib/fake_store.h"
#include "tests/lib/testlib.h"

#define MIB (1u << 20)
#define WAIT_MS 20000     /* generous: only a hang takes this long */
#define FULL (1ull << 40) /* a fetch range past any test object's end */

static char root[] = "/tmp/mapfs-test-cache-XXXXXX";
static char cache_dir[256], store_url_buf[300];
static struct store *inner;
static struct db *db;

/* --- the store: counts GETs and can hold them at a gate ---------------- */

static struct fake_store *fake;

static void gate_close(void)
{
	fake_store_hold(fake, FAKE_GET, FAKE_HOLD_BEFORE);
}

static void gate_open(void)
{
	fake_store_hold(fake, FAKE_GET, FAKE_HOLD_NONE);
}

/* Wait until a GET is held at the gate; false after WAIT_MS. */
static bool gate_wait_entered(void)
{
	return fake_store_held_wait(fake, FAKE_GET, 1, WAIT_MS);
}

/* --- completions and a poll(2) loop over the cache's eventfds ---------- */

struct res {
	int calls;
	long result;
	int loop; /* the loop that delivered it (-1: inline) */
};

static int polling_loop = -1; /* loop whose cache_loop_poll is running */
static int pending;

static void on_done(void *arg, long result)
{
	struct res *r = arg;

	r->calls++;
	r->result = result;
	r->loop = polling_loop;
	pending--;
}

/* Poll loops 0..nloops-1 until no completion is pending. */
static bool run_loops(struct cache *c, int nloops)
{
	struct timespec t0, t;
	struct pollfd pfd[4];

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < nloops; i++)
		pfd[i] = (struct pollfd){ .fd = cache_loop_fd(c, i),
					  .events = POLLIN };
	while (pending > 0) {
		/* As an rpc loop does before it sleeps: submit the batch. */
		for (int i = 0; i < nloops; i++) {
			polling_loop = i;
			cache_loop_flush(c, i);
			polling_loop = -1;
		}
		if (pending <= 0)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 > WAIT_MS)
			return false;
		if (poll(pfd, (nfds_t)nloops, 100) < 0)
			return false;
		for (int i = 0; i < nloops; i++) {
			if (!(pfd[i].revents & POLLIN))
				continue;
			polling_loop = i;
			cache_loop_poll(c, i);
			polling_loop = -1;
		}
	}
	return true;
}

/* --- helpers ------------------------------------------------------------ */

static struct cache *open_cache(int nloops, unsigned ring_depth,
				unsigned max_open)
{
	struct cache_opts o = { .dir = cache_dir,
				.db = db,
				.nloops = nloops,
				.ring_depth = ring_depth,
				.chunk_size = MIB,
				.readahead = 1, /* none: GETs are counted */
				.fetch_threads = 4,
				.max_open = max_open };
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

static long sync_read(struct cache *c, uint64_t ino, uint64_t off, size_t len,
		      void *buf)
{
	struct res r = { 0 };

	pending = 1;
	cache_read(c, -1, ino, off, len, buf, on_done, &r);
	CU_ASSERT(r.calls == 1 && r.loop == -1);
	return r.result;
}

static long sync_write(struct cache *c, uint64_t ino, uint64_t off,
		       const void *buf, size_t len, bool sync)
{
	struct res r = { 0 };

	pending = 1;
	cache_write(c, -1, ino, off, buf, len, sync, on_done, &r);
	CU_ASSERT(r.calls == 1 && r.loop == -1);
	return r.result;
}

static int count_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* --- tests -------------------------------------------------------------- */

static void test_roundtrip_sync(void)
{
	struct cache *c = open_cache(1, 0, 0);
	char buf[16] = { 0 };
	char path[300];
	struct stat sb;

	CU_ASSERT(cache_create(c, 0x1234) == 0);
	CU_ASSERT(cache_is_local(c, 0x1234));
	CU_ASSERT(sync_write(c, 0x1234, 0, "hello", 5, false) == 5);
	CU_ASSERT(sync_read(c, 0x1234, 0, sizeof(buf), buf) == 5);
	CU_ASSERT(memcmp(buf, "hello", 5) == 0);
	CU_ASSERT(sync_read(c, 0x1234, 5, sizeof(buf), buf) == 0); /* EOF */
	CU_ASSERT(sync_read(c, 0x1234, 2, 2, buf) == 2);
	CU_ASSERT(memcmp(buf, "ll", 2) == 0);
	/* The documented layout: DIR/XX/INO. */
	snprintf(path, sizeof(path), "%s/34/0000000000001234", cache_dir);
	CU_ASSERT(stat(path, &sb) == 0 && sb.st_size == 5);
	cache_close(c);
}

static void test_roundtrip_async(void)
{
	struct cache *c = open_cache(1, 0, 0);
	size_t len = 300 * 1024;
	uint8_t *data = malloc(len), *back = calloc(1, len + 100);
	struct res w = { 0 }, r = { 0 }, e = { 0 };

	fill(data, len, 1);
	CU_ASSERT_FATAL(cache_create(c, 2) == 0);
	pending = 1;
	cache_write(c, 0, 2, 0, data, len, true, on_done, &w);
	CU_ASSERT(w.calls == 0); /* a loop's completion comes from poll */
	CU_ASSERT_FATAL(run_loops(c, 1));
	CU_ASSERT(w.calls == 1 && w.result == (long)len && w.loop == 0);

	pending = 2;
	cache_read(c, 0, 2, 0, len + 100, back, on_done, &r);
	cache_read(c, 0, 2, len, 100, back + len, on_done, &e);
	CU_ASSERT_FATAL(run_loops(c, 1));
	CU_ASSERT(r.calls == 1 && r.result == (long)len && r.loop == 0);
	CU_ASSERT(memcmp(back, data, len) == 0);
	CU_ASSERT(e.calls == 1 && e.result == 0); /* at EOF */
	free(data);
	free(back);
	cache_close(c);
}

/* Pages of [off, off+len) of the file at path that are in the page cache. */
static long resident(const char *path, size_t off, size_t len)
{
	long page = sysconf(_SC_PAGESIZE), n = 0;
	int fd = open(path, O_RDONLY);
	unsigned char vec[1024];
	void *m;

	CU_ASSERT_FATAL(fd >= 0 && len / (size_t)page <= sizeof(vec));
	m = mmap(NULL, off + len, PROT_READ, MAP_SHARED, fd, 0);
	CU_ASSERT_FATAL(m != MAP_FAILED);
	CU_ASSERT_FATAL(mincore((char *)m + off, len, vec) == 0);
	for (size_t i = 0; i < len / (size_t)page; i++)
		n += vec[i] & 1;
	munmap(m, off + len);
	close(fd);
	return n;
}

/*
 * --cache-direct: aligned writes go around the page cache, from a
 * registered buffer when the data is not aligned in memory; an unaligned
 * write stays buffered; reads of either kind see every byte.
 */
static void test_direct(void)
{
	struct cache_opts o = { .dir = cache_dir,
				.db = db,
				.nloops = 1,
				.chunk_size = MIB,
				.readahead = 1,
				.fetch_threads = 1,
				.direct = true };
	enum { A = 1 << 20, B = 8192, C = 100 };
	uint8_t *a = malloc(A + 1), *b = NULL, *back = NULL;
	uint8_t *img = calloc(1, 3 * MIB);
	struct res r[6] = { { 0 } };
	struct cache *c = NULL;
	char path[300];
	int probe;

	snprintf(path, sizeof(path), "%s/direct-probe", cache_dir);
	probe = open(path, O_RDWR | O_CREAT | O_DIRECT, 0600);
	if (probe < 0) {
		fprintf(stderr, "no O_DIRECT here (%s): not tested\n",
			strerror(errno));
		free(a);
		free(img);
		return;
	}
	close(probe);
	unlink(path);
	CU_ASSERT_FATAL(posix_memalign((void **)&b, 4096, B) == 0 &&
			posix_memalign((void **)&back, 4096, 3 * MIB) == 0);
	CU_ASSERT_FATAL(cache_open(&o, fake_store_store(fake), &c) == 0);
	CU_ASSERT_FATAL(cache_create(c, 0x77) == 0);
	fill(a + 1, A, 7);
	fill(b, B, 8);
	memcpy(img, a + 1, A);
	memcpy(img + MIB, b, B);
	memcpy(img + 2 * MIB + 5, "0123456789", 10);
	pending = 3;
	cache_write(c, 0, 0x77, 0, a + 1, A, false, on_done, &r[0]);
	cache_write(c, 0, 0x77, MIB, b, B, false, on_done, &r[1]);
	cache_write(c, 0, 0x77, 2 * MIB + 5, img + 2 * MIB + 5, 10, false,
		    on_done, &r[2]);
	CU_ASSERT_FATAL(run_loops(c, 1));
	CU_ASSERT(r[0].result == A && r[1].result == B && r[2].result == 10);
	snprintf(path, sizeof(path), "%s/77/0000000000000077", cache_dir);
	CU_ASSERT_EQUAL(resident(path, 0, MIB + B), 0);
	CU_ASSERT_EQUAL(resident(path, 2 * MIB, 4096), 1);

	memset(back, 0xee, 3 * MIB);
	pending = 2;
	cache_read(c, 0, 0x77, 0, MIB, back, on_done, &r[3]);
	cache_read(c, 0, 0x77, MIB, 2 * MIB, back + MIB, on_done, &r[4]);
	CU_ASSERT_FATAL(run_loops(c, 1));
	CU_ASSERT(r[3].result == MIB && r[4].result == MIB + 15);
	CU_ASSERT(memcmp(back, img, 2 * MIB + 15) == 0);
	CU_ASSERT_EQUAL(resident(path, 0, 2 * MIB), 0);
	/* Unaligned: through the page cache, which sees the direct bytes. */
	pending = 1;
	cache_read(c, 0, 0x77, 7, 3, back, on_done, &r[5]);
	CU_ASSERT_FATAL(run_loops(c, 1));
	CU_ASSERT(r[5].result == 3 && memcmp(back, img + 7, 3) == 0);

	/* Fetched data lands around the page cache too, but its tail. */
	{
		size_t len = 2 * MIB + 123;
		struct cache_obj obj = { .key = "direct-odd", .size = len };
		struct res f = { 0 };

		fill(img, len, 9);
		CU_ASSERT_FATAL(
			store_put(inner, obj.key, img, len, NULL, NULL) == 0);
		cache_fetch(c, -1, 0x78, &obj, 0, FULL, false, on_done, &f);
		CU_ASSERT(f.calls == 1 && f.result == 0);
		snprintf(path, sizeof(path), "%s/78/0000000000000078",
			 cache_dir);
		CU_ASSERT_EQUAL(resident(path, 0, 2 * MIB), 0);
		CU_ASSERT_EQUAL(resident(path, 2 * MIB, 4096), 1);
		memset(back, 0xee, 3 * MIB);
		CU_ASSERT(sync_read(c, 0x78, 0, len, back) == (long)len);
		CU_ASSERT(memcmp(back, img, len) == 0);
	}
	cache_close(c);
	free(a);
	free(b);
	free(back);
	free(img);
}

/* More operations than the ring's CQ holds: the rest wait their turn. */
static void test_ring_backlog(void)
{
	struct cache *c = open_cache(1, 4, 0);
	enum { N = 200, SZ = 4096 };
	static uint8_t data[N][SZ], back[N][SZ];
	static struct res w[N], r[N];

	CU_ASSERT_FATAL(cache_create(c, 3) == 0);
	pending = N;
	for (int i = 0; i < N; i++) {
		fill(data[i], SZ, 100 + i);
		cache_write(c, 0, 3, (uint64_t)i * SZ, data[i], SZ, i % 2,
			    on_done, &w[i]);
	}
	CU_ASSERT_FATAL(run_loops(c, 1));
	pending = N;
	for (int i = 0; i < N; i++)
		cache_read(c, 0, 3, (uint64_t)i * SZ, SZ, back[i], on_done,
			   &r[i]);
	CU_ASSERT_FATAL(run_loops(c, 1));
	for (int i = 0; i < N; i++) {
		CU_ASSERT(w[i].calls == 1 && w[i].result == SZ);
		CU_ASSERT(r[i].calls == 1 && r[i].result == SZ);
		CU_ASSERT(memcmp(back[i], data[i], SZ) == 0);
	}
	cache_close(c);
}

static void test_not_local(void)
{
	struct cache *c = open_cache(1, 0, 0);
	struct res r = { 0 }, w = { 0 }, s = { 0 };
	struct cache_stat st;
	struct timespec mt = { 1, 0 };
	char buf[8];
	int fd;

	CU_ASSERT(!cache_is_local(c, 999));
	CU_ASSERT(sync_read(c, 999, 0, sizeof(buf), buf) == -ENODATA);
	CU_ASSERT(sync_write(c, 999, 0, "x", 1, false) == -ENODATA);
	pending = 3;
	cache_read(c, 0, 999, 0, sizeof(buf), buf, on_done, &r);
	cache_write(c, 0, 999, 0, "x", 1, true, on_done, &w);
	cache_sync(c, 0, 999, on_done, &s);
	CU_ASSERT(r.calls == 0 && w.calls == 0 && s.calls == 0);
	CU_ASSERT_FATAL(run_loops(c, 1));
	CU_ASSERT(r.result == -ENODATA && r.loop == 0);
	CU_ASSERT(w.result == -ENODATA && s.result == -ENODATA);
	CU_ASSERT(cache_stat(c, 999, &st) == -ENODATA);
	CU_ASSERT(cache_truncate(c, 999, 10) == -ENODATA);
	CU_ASSERT(cache_set_mtime(c, 999, &mt) == -ENODATA);
	CU_ASSERT(cache_open_fd(c, 999, &fd) == -ENODATA);
	/* Writing does not make an inode local: nothing was created. */
	CU_ASSERT(!cache_is_local(c, 999));
	cache_close(c);
}

static void test_fetch_5mib(void)
{
	struct cache *c = open_cache(1, 0, 0);
	size_t len = 5 * MIB;
	uint8_t *data = malloc(len), *back = malloc(len);
	struct cache_obj obj = { .key = "dir/big.bin", .size = len };
	struct res f = { 0 }, f2 = { 0 };
	int fd;

	if (!data || !back) {
		CU_FAIL("no memory");
		free(data);
		free(back);
		cache_close(c);
		return;
	}
	fill(data, len, 5);
	CU_ASSERT_FATAL(store_put(inner, obj.key, data, len, NULL, NULL) == 0);
	fake_store_counts_reset(fake);
	pending = 1;
	cache_fetch(c, -1, 50, &obj, 0, FULL, false, on_done, &f);
	CU_ASSERT(f.calls == 1 && f.result == 0 && f.loop == -1);
	CU_ASSERT(fake_store_count(fake, FAKE_GET) ==
		  5); /* five 1 MiB ranges */
	CU_ASSERT(cache_is_local(c, 50));
	memset(back, 0, len);
	CU_ASSERT(sync_read(c, 50, 0, len, back) == (long)len);
	CU_ASSERT(memcmp(back, data, len) == 0);
	/* The upload path sees the same bytes through its own fd. */
	CU_ASSERT_FATAL(cache_open_fd(c, 50, &fd) == 0);
	memset(back, 0, len);
	CU_ASSERT(pread(fd, back, len, 0) == (ssize_t)len);
	CU_ASSERT(memcmp(back, data, len) == 0);
	cache_close_fd(c, 50, fd);

	/* Local now: completes on the loop without a GET. */
	pending = 1;
	cache_fetch(c, 0, 50, &obj, 0, FULL, false, on_done, &f2);
	CU_ASSERT(f2.calls == 0);
	CU_ASSERT_FATAL(run_loops(c, 1));
	CU_ASSERT(f2.result == 0 && f2.loop == 0);
	CU_ASSERT(fake_store_count(fake, FAKE_GET) == 5);
	free(data);
	free(back);
	cache_close(c);
}

static void test_fetch_odd_size_and_empty(void)
{
	struct cache *c = open_cache(1, 0, 0);
	size_t len = 2 * MIB + 123;
	uint8_t *data = malloc(len), *back = malloc(len + 10);
	struct cache_obj obj = { .key = "odd", .size = len };
	struct cache_obj empty = { .key = "empty", .size = 0 };
	struct res f = { 0 }, e = { 0 };
	struct cache_stat st;

	fill(data, len, 7);
	CU_ASSERT_FATAL(store_put(inner, "odd", data, len, NULL, NULL) == 0);
	CU_ASSERT_FATAL(store_put(inner, "empty", "", 0, NULL, NULL) == 0);
	fake_store_counts_reset(fake);
	pending = 2;
	cache_fetch(c, 0, 60, &obj, 0, FULL, false, on_done, &f);
	cache_fetch(c, 0, 61, &empty, 0, FULL, false, on_done, &e);
	CU_ASSERT_FATAL(run_loops(c, 1));
	CU_ASSERT(f.result == 0 && f.loop == 0 && e.result == 0 && e.loop == 0);
	CU_ASSERT(fake_store_count(fake, FAKE_GET) ==
		  3); /* the empty one fetched nothing */
	CU_ASSERT(sync_read(c, 60, 0, len + 10, back) == (long)len);
	CU_ASSERT(memcmp(back, data, len) == 0);
	CU_ASSERT(cache_stat(c, 61, &st) == 0 && st.size == 0);
	free(data);
	free(back);
	cache_close(c);
}

/* Two readers of one missing inode, on two loops: one download. */
static void test_fetch_shared(void)
{
	struct cache *c = open_cache(2, 0, 0);
	size_t len = 3 * MIB;
	uint8_t *data = malloc(len), *back = malloc(len);
	struct cache_obj obj = { .key = "shared", .size = len };
	struct res a = { 0 }, b = { 0 };

	fill(data, len, 9);
	CU_ASSERT_FATAL(store_put(inner, "shared", data, len, NULL, NULL) == 0);
	fake_store_counts_reset(fake);
	gate_close();
	pending = 2;
	cache_fetch(c, 0, 70, &obj, 0, FULL, false, on_done, &a);
	/* The download is under way (and held): the second reader joins. */
	CU_ASSERT_FATAL(gate_wait_entered());
	cache_fetch(c, 1, 70, &obj, 0, FULL, false, on_done, &b);
	gate_open();
	CU_ASSERT_FATAL(run_loops(c, 2));
	CU_ASSERT(a.calls == 1 && a.result == 0 && a.loop == 0);
	CU_ASSERT(b.calls == 1 && b.result == 0 && b.loop == 1);
	CU_ASSERT(fake_store_count(fake, FAKE_GET) == 3);
	CU_ASSERT(sync_read(c, 70, 0, len, back) == (long)len);
	CU_ASSERT(memcmp(back, data, len) == 0);
	free(data);
	free(back);
	cache_close(c);
}

static void test_fetch_error(void)
{
	struct cache *c = open_cache(2, 0, 0);
	struct cache_obj obj = { .key = "no/such/key", .size = 4 * MIB };
	struct res a = { 0 }, b = { 0 }, s = { 0 };

	gate_close();
	pending = 2;
	cache_fetch(c, 0, 80, &obj, 0, FULL, false, on_done, &a);
	CU_ASSERT_FATAL(gate_wait_entered());
	cache_fetch(c, 1, 80, &obj, 0, FULL, false, on_done, &b);
	gate_open();
	CU_ASSERT_FATAL(run_loops(c, 2));
	CU_ASSERT(a.calls == 1 && a.result == -ENOENT && a.loop == 0);
	CU_ASSERT(b.calls == 1 && b.result == -ENOENT && b.loop == 1);
	/* Local (an entry), but nothing of it readable. */
	CU_ASSERT(cache_is_local(c, 80));
	CU_ASSERT(sync_read(c, 80, 0, 8, (char[8]){ 0 }) == -ENODATA);
	/* Once the failed chunks are free again, a worker-thread fetch
	 * tries again (in flight, it would share their error). */
	pthread_mutex_lock(&c->fetch_lock);
	while (c->ntasks)
		pthread_cond_wait(&c->fetch_idle, &c->fetch_lock);
	pthread_mutex_unlock(&c->fetch_lock);
	fake_store_counts_reset(fake);
	pending = 1;
	cache_fetch(c, -1, 80, &obj, 0, FULL, false, on_done, &s);
	CU_ASSERT(s.calls == 1 && s.result == -ENOENT);
	CU_ASSERT(fake_store_count(fake, FAKE_GET) >= 1);
	cache_close(c);
}

/* A drop while a fetch runs: the fetch must not install stale data. */
static void test_drop_cancels_fetch(void)
{
	struct cache *c = open_cache(1, 0, 0);
	struct cache_obj obj = { .key = "stale", .size = 5 };
	struct res a = { 0 };

	CU_ASSERT_FATAL(store_put(inner, "stale", "stale", 5, NULL, NULL) == 0);
	gate_close();
	pending = 1;
	cache_fetch(c, 0, 90, &obj, 0, FULL, false, on_done, &a);
	CU_ASSERT_FATAL(gate_wait_entered());
	CU_ASSERT(cache_drop(c, 90) == 0);
	gate_open();
	CU_ASSERT_FATAL(run_loops(c, 1));
	CU_ASSERT(a.calls == 1 && a.result == -EAGAIN);
	CU_ASSERT(!cache_is_local(c, 90));
	cache_close(c);
}

static void test_attrs_and_drop(void)
{
	struct cache *c = open_cache(1, 0, 0);
	uint8_t data[10000], back[200];
	struct timespec mt = { 1234567890, 123456789 };
	struct cache_stat st;
	char path[300];
	int fd;

	fill(data, sizeof(data), 3);
	CU_ASSERT_FATAL(cache_create(c, 0x2ff) == 0);
	CU_ASSERT(sync_write(c, 0x2ff, 0, data, sizeof(data), false) ==
		  (long)sizeof(data));
	CU_ASSERT_FATAL(cache_stat(c, 0x2ff, &st) == 0);
	CU_ASSERT(st.size == sizeof(data) && st.blocks_bytes >= sizeof(data));
	CU_ASSERT(cache_truncate(c, 0x2ff, 100) == 0);
	CU_ASSERT(cache_stat(c, 0x2ff, &st) == 0 && st.size == 100);
	CU_ASSERT(sync_read(c, 0x2ff, 0, sizeof(back), back) == 100);
	CU_ASSERT(memcmp(back, data, 100) == 0);
	CU_ASSERT(cache_truncate(c, 0x2ff, MIB) == 0);
	CU_ASSERT(sync_read(c, 0x2ff, 500, 100, back) == 100);
	CU_ASSERT(back[0] == 0 && back[99] == 0); /* the hole reads zeros */
	CU_ASSERT(cache_set_mtime(c, 0x2ff, &mt) == 0);
	CU_ASSERT(cache_stat(c, 0x2ff, &st) == 0 && st.size == MIB);
	CU_ASSERT(st.mtime.tv_sec == mt.tv_sec &&
		  st.mtime.tv_nsec == mt.tv_nsec);
	/* create replaces: empty again. */
	CU_ASSERT(cache_create(c, 0x2ff) == 0);
	CU_ASSERT(cache_stat(c, 0x2ff, &st) == 0 && st.size == 0);

	/* An fd handed out before the drop stays usable; the name goes. */
	CU_ASSERT_FATAL(cache_open_fd(c, 0x2ff, &fd) == 0);
	CU_ASSERT(cache_drop(c, 0x2ff) == 0);
	CU_ASSERT(!cache_is_local(c, 0x2ff));
	CU_ASSERT(sync_read(c, 0x2ff, 0, 10, back) == -ENODATA);
	CU_ASSERT(cache_stat(c, 0x2ff, &st) == -ENODATA);
	snprintf(path, sizeof(path), "%s/ff/00000000000002ff", cache_dir);
	CU_ASSERT(access(path, F_OK) < 0 && errno == ENOENT);
	CU_ASSERT(cache_drop(c, 0x2ff) == 0); /* already gone: fine */
	cache_close_fd(c, 0x2ff, fd);
	cache_close(c);
}

static void test_sync(void)
{
	struct cache *c = open_cache(1, 0, 0);
	struct res w = { 0 }, s = { 0 }, s2 = { 0 };

	CU_ASSERT_FATAL(cache_create(c, 0x42) == 0);
	/* The create put a name in 42/ that no fsync covers yet. */
	CU_ASSERT(cache_dir_needs_sync(c, 0x42));
	pending = 2;
	cache_write(c, 0, 0x42, 0, "data", 4, false, on_done, &w);
	cache_sync(c, 0, 0x42, on_done, &s);
	CU_ASSERT_FATAL(run_loops(c, 1));
	CU_ASSERT(w.result == 4 && s.calls == 1 && s.result == 0);
	CU_ASSERT(!cache_dir_needs_sync(c, 0x42));

	/* A synced write covers a new name too; inline as well. */
	CU_ASSERT_FATAL(cache_create(c, 0x142) == 0);
	CU_ASSERT(cache_dir_needs_sync(c, 0x142));
	CU_ASSERT(sync_write(c, 0x142, 0, "x", 1, true) == 1);
	CU_ASSERT(!cache_dir_needs_sync(c, 0x142));
	CU_ASSERT_FATAL(cache_create(c, 0x242) == 0);
	pending = 1;
	cache_sync(c, -1, 0x242, on_done, &s2);
	CU_ASSERT(s2.calls == 1 && s2.result == 0 && s2.loop == -1);
	CU_ASSERT(!cache_dir_needs_sync(c, 0x242));
	cache_close(c);
}

static void test_write_extends(void)
{
	struct cache *c = open_cache(1, 0, 0);
	struct res w = { 0 }, r = { 0 };
	struct cache_stat st;
	char back[8] = { 0 }, zero[8] = { 0 }, z[8];

	CU_ASSERT_FATAL(cache_create(c, 7) == 0);
	pending = 1;
	cache_write(c, 0, 7, MIB, "abc", 3, false, on_done, &w);
	CU_ASSERT_FATAL(run_loops(c, 1));
	CU_ASSERT(w.result == 3);
	CU_ASSERT(cache_stat(c, 7, &st) == 0 && st.size == MIB + 3);
	pending = 1;
	cache_read(c, 0, 7, MIB, sizeof(back), back, on_done, &r);
	CU_ASSERT_FATAL(run_loops(c, 1));
	CU_ASSERT(r.result == 3 && memcmp(back, "abc", 3) == 0);
	CU_ASSERT(sync_read(c, 7, 4096, sizeof(z), z) == sizeof(z));
	CU_ASSERT(memcmp(z, zero, sizeof(z)) == 0);
	CU_ASSERT(sync_write(c, 7, 2 * MIB, "de", 2, false) == 2);
	CU_ASSERT(cache_stat(c, 7, &st) == 0 && st.size == 2 * MIB + 2);
	cache_close(c);
}

static void test_reopen(void)
{
	struct cache *c = open_cache(1, 0, 0);
	struct cache_obj obj = { .key = "persist", .size = 6 };
	struct res f = { 0 };
	char buf[16] = { 0 };

	CU_ASSERT_FATAL(store_put(inner, "persist", "fetchd", 6, NULL, NULL) ==
			0);
	CU_ASSERT_FATAL(cache_create(c, 0xabc) == 0);
	CU_ASSERT(sync_write(c, 0xabc, 0, "written", 7, true) == 7);
	pending = 1;
	cache_fetch(c, -1, 0xabd, &obj, 0, FULL, false, on_done, &f);
	CU_ASSERT(f.result == 0);
	cache_close(c);

	c = open_cache(1, 0, 0);
	CU_ASSERT(cache_is_local(c, 0xabc) && cache_is_local(c, 0xabd));
	CU_ASSERT(sync_read(c, 0xabc, 0, sizeof(buf), buf) == 7);
	CU_ASSERT(memcmp(buf, "written", 7) == 0);
	CU_ASSERT(sync_read(c, 0xabd, 0, sizeof(buf), buf) == 6);
	CU_ASSERT(memcmp(buf, "fetchd", 6) == 0);
	cache_close(c);
}

static int open_fds(void)
{
	return count_entries("/proc/self/fd");
}

/* Many inodes through a small table: all work, open fds stay bounded. */
static void test_fd_bound(void)
{
	struct cache *c = open_cache(1, 0, 64); /* one entry per shard */
	int base = open_fds();
	enum { N = 600 };
	char b;

	for (uint64_t i = 0; i < N; i++) {
		CU_ASSERT(cache_create(c, 10000 + i) == 0);
		CU_ASSERT(sync_write(c, 10000 + i, 0, &(char){ (char)i }, 1,
				     false) == 1);
	}
	for (uint64_t i = 0; i < N; i++) {
		CU_ASSERT(sync_read(c, 10000 + i, 0, 1, &b) == 1);
		CU_ASSERT(b == (char)i);
	}
	CU_ASSERT(open_fds() - base <= 64);
	cache_close(c);
}

/* The inode behind ino's cache file (0 if there is none). */
static ino_t file_ino(uint64_t ino)
{
	char path[400];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/%02x/%016llx", cache_dir,
		 (unsigned)(ino & 0xff), (unsigned long long)ino);
	return stat(path, &sb) == 0 ? sb.st_ino : 0;
}

/*
 * A dropped file nothing holds is emptied and becomes the next new file
 * (no inode made or freed); one an upload or an I/O still holds is
 * unlinked, and what it writes never shows in a new file; spares left by
 * a crash are emptied, and doubly linked ones are not reused.
 */
static void test_spare(void)
{
	struct cache *c = open_cache(1, 0, 0);
	uint8_t data[8192], back[8192];
	char spare[300], path[400];
	struct cache_stat st;
	struct cache_fd *f;
	time_t t0 = time(NULL);
	ino_t was;
	int fd;

	snprintf(spare, sizeof(spare), "%s/spare", cache_dir);
	fill(data, sizeof(data), 7);
	CU_ASSERT_FATAL(count_entries(spare) == 0);

	/* Idle: recycled, and the next file is it, empty and new. */
	CU_ASSERT_FATAL(cache_create(c, 0x301) == 0);
	CU_ASSERT(sync_write(c, 0x301, 0, data, sizeof(data), true) ==
		  (long)sizeof(data));
	CU_ASSERT(cache_set_mtime(c, 0x301,
				  &(struct timespec){ 1000000000, 0 }) == 0);
	was = file_ino(0x301);
	CU_ASSERT_FATAL(was != 0);
	CU_ASSERT(cache_drop(c, 0x301) == 0);
	CU_ASSERT(file_ino(0x301) == 0 && !cache_is_local(c, 0x301));
	CU_ASSERT(count_entries(spare) == 1);
	CU_ASSERT_FATAL(cache_create(c, 0x402) == 0);
	CU_ASSERT(file_ino(0x402) == was);
	CU_ASSERT(count_entries(spare) == 0);
	CU_ASSERT(cache_stat(c, 0x402, &st) == 0 && st.size == 0 &&
		  st.blocks_bytes == 0 && st.mtime.tv_sec >= t0);
	CU_ASSERT(sync_read(c, 0x402, 0, sizeof(back), back) == 0);

	/* An upload's fd: not reused, and it still reads the old bytes. */
	CU_ASSERT(sync_write(c, 0x402, 0, data, sizeof(data), false) ==
		  (long)sizeof(data));
	CU_ASSERT_FATAL(cache_open_fd(c, 0x402, &fd) == 0);
	CU_ASSERT(cache_drop(c, 0x402) == 0);
	CU_ASSERT(count_entries(spare) == 0);
	memset(back, 0, sizeof(back));
	CU_ASSERT(pread(fd, back, sizeof(back), 0) == (ssize_t)sizeof(data));
	CU_ASSERT(memcmp(back, data, sizeof(data)) == 0);
	cache_close_fd(c, 0x402, fd);
	CU_ASSERT_FATAL(cache_create(c, 0x503) == 0);

	/* An I/O in flight (it holds the table's fd): not reused, and its
	 * late write lands in the orphan, never in the next new file. */
	CU_ASSERT_FATAL(cache_fd_get(c, 0x503, &f) == 0);
	CU_ASSERT(cache_drop(c, 0x503) == 0);
	CU_ASSERT(count_entries(spare) == 0);
	CU_ASSERT(pwrite(f->fd, data, sizeof(data), 0) ==
		  (ssize_t)sizeof(data));
	cache_fd_put(f);
	CU_ASSERT_FATAL(cache_create(c, 0x604) == 0);
	CU_ASSERT(cache_stat(c, 0x604, &st) == 0 && st.size == 0);
	/* Idle once its journal entry is durable (a pending one holds it). */
	CU_ASSERT(sync_write(c, 0x604, 0, data, 1, true) == 1);
	CU_ASSERT(cache_drop(c, 0x604) == 0);
	CU_ASSERT(count_entries(spare) == 1);
	cache_close(c);

	/* After a crash: a spare with data (dropped, not yet emptied), a
	 * spare that is also a live file's name (a rename half-written by a
	 * file system without a journal), junk. */
	snprintf(path, sizeof(path), "%s/s900", spare);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(write(fd, data, 100) == 100);
	close(fd);
	{
		char live[400];

		snprintf(live, sizeof(live), "%s/live", cache_dir);
		fd = open(live, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		CU_ASSERT_FATAL(fd >= 0);
		CU_ASSERT(write(fd, data, 100) == 100);
		close(fd);
		snprintf(path, sizeof(path), "%s/s901", spare);
		CU_ASSERT_FATAL(link(live, path) == 0);
		snprintf(path, sizeof(path), "%s/junk", spare);
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		CU_ASSERT_FATAL(fd >= 0);
		close(fd);
		c = open_cache(1, 0, 0);
		/* s901 and junk go; s900 and the spare from before stay. */
		CU_ASSERT(count_entries(spare) == 2);
		CU_ASSERT(access(path, F_OK) < 0);
		CU_ASSERT(stat(live, &(struct stat){ 0 }) == 0);
		fd = open(live, O_RDONLY | O_CLOEXEC);
		CU_ASSERT(fd >= 0 && read(fd, back, sizeof(back)) == 100);
		close(fd);
		unlink(live);
	}
	/* Either one taken is empty and new. */
	for (uint64_t ino = 0x705; ino <= 0x706; ino++) {
		CU_ASSERT_FATAL(cache_create(c, ino) == 0);
		CU_ASSERT(cache_stat(c, ino, &st) == 0 && st.size == 0 &&
			  st.mtime.tv_sec >= t0);
		CU_ASSERT(sync_read(c, ino, 0, sizeof(back), back) == 0);
	}
	CU_ASSERT(count_entries(spare) == 0);
	cache_close(c);
}

int main(void)
{
	CU_pSuite s;
	unsigned failed;

	if (!mkdtemp(root))
		return 1;
	snprintf(cache_dir, sizeof(cache_dir), "%s/cache/sub", root);
	snprintf(store_url_buf, sizeof(store_url_buf), "file://%s/store", root);
	if (fake_store_open(store_url_buf, &fake))
		return 1;
	inner = fake_store_inner(fake);
	snprintf(cache_dir, sizeof(cache_dir), "%s/db", root);
	if (db_open(cache_dir, 256 << 20, 8, &db))
		return 1;
	snprintf(cache_dir, sizeof(cache_dir), "%s/cache/sub", root);

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("cache_io", NULL, NULL);
	CU_add_test(s, "roundtrip_sync", test_roundtrip_sync);
	CU_add_test(s, "roundtrip_async", test_roundtrip_async);
	CU_add_test(s, "ring_backlog", test_ring_backlog);
	CU_add_test(s, "not_local", test_not_local);
	CU_add_test(s, "fetch_5mib", test_fetch_5mib);
	CU_add_test(s, "fetch_odd_size_and_empty",
		    test_fetch_odd_size_and_empty);
	CU_add_test(s, "fetch_shared", test_fetch_shared);
	CU_add_test(s, "fetch_error", test_fetch_error);
	CU_add_test(s, "drop_cancels_fetch", test_drop_cancels_fetch);
	CU_add_test(s, "attrs_and_drop", test_attrs_and_drop);
	CU_add_test(s, "sync", test_sync);
	CU_add_test(s, "write_extends", test_write_extends);
	CU_add_test(s, "reopen", test_reopen);
	CU_add_test(s, "fd_bound", test_fd_bound);
	CU_add_test(s, "direct", test_direct);
	CU_add_test(s, "spare", test_spare);
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
