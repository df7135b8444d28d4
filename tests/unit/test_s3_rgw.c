/*
 * The S3 backend against a real server (radosgw verifies signatures).
 * Skipped (exit 77) unless MAPFS_TEST_S3_ENDPOINT is set, e.g.:
 *
 *   MAPFS_TEST_S3_ENDPOINT=http://127.0.0.1:17480 MAPFS_TEST_S3_BUCKET=bench \
 *   MAPFS_TEST_S3_AK=mapfs MAPFS_TEST_S3_SK=mapfs-secret test_s3_rgw
 *
 * (the keys default to AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY).  Every
 * run works under its own key prefix and deletes what it made.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "s3/store.h"
#include "tests/lib/store_conds.h"

static const char *endpoint, *bucket;
static char url[512];
static struct store *st;

static struct store_opts opts(const char *u)
{
	return (struct store_opts){
		.url = u,
		.s3_endpoint = endpoint,
		.s3_region = getenv("MAPFS_TEST_S3_REGION"),
		.s3_path_style = true,
		.s3_max_requests = 8,
	};
}

static const struct store_meta meta_file = {
	.has_mode = true,
	.has_uid = true,
	.has_gid = true,
	.has_mtime = true,
	.mode = 0100640,
	.uid = 1000,
	.gid = 4294967294u,
	.mtime_ns = 1700000000123456789LL,
};
static const struct store_meta meta_link = {
	.has_mode = true,
	.has_mtime = true,
	.mode = 0120777,
	.mtime_ns = -5,
	.symlink = true,
};

static bool meta_eq(const struct store_meta *x, const struct store_meta *y)
{
	return x->has_mode == y->has_mode && x->has_uid == y->has_uid &&
	       x->has_gid == y->has_gid && x->has_mtime == y->has_mtime &&
	       (!x->has_mode || x->mode == y->mode) &&
	       (!x->has_uid || x->uid == y->uid) &&
	       (!x->has_gid || x->gid == y->gid) &&
	       (!x->has_mtime || x->mtime_ns == y->mtime_ns) &&
	       x->symlink == y->symlink;
}

static void fill(char *buf, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (char)(seed >> 16);
	}
}

static int tmp_fd(const char *data, size_t n)
{
	char path[] = "/tmp/mapfs-s3-rgw-XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0)
		return -1;
	unlink(path);
	if (write(fd, data, n) != (ssize_t)n) {
		close(fd);
		return -1;
	}
	return fd;
}

static void test_put_head_get(void)
{
	const char body[] = "hello, radosgw";
	struct store_info info, head;
	char buf[64];
	size_t got = 99;

	CU_ASSERT_FATAL(store_put(st, "a.txt", body, strlen(body), &meta_file,
				  &info) == 0);
	CU_ASSERT(info.size == strlen(body) && info.etag[0]);
	CU_ASSERT(store_head(st, "a.txt", &head) == 0);
	CU_ASSERT(head.size == strlen(body));
	CU_ASSERT_STRING_EQUAL(head.etag, info.etag);
	CU_ASSERT(meta_eq(&head.meta, &meta_file));
	CU_ASSERT(head.last_modified_ns > 1600000000LL * 1000000000);

	CU_ASSERT(store_get(st, "a.txt", 7, 8, buf, &got) == 0);
	CU_ASSERT(got == 7 && memcmp(buf, "radosgw", 7) == 0);
	CU_ASSERT(store_get(st, "a.txt", 0, 5, buf, &got) == 0);
	CU_ASSERT(got == 5 && memcmp(buf, "hello", 5) == 0);
	CU_ASSERT(store_get(st, "a.txt", strlen(body), 5, buf, &got) == 0);
	CU_ASSERT(got == 0);
	CU_ASSERT(store_get(st, "a.txt", 1000, 5, buf, &got) == 0);
	CU_ASSERT(got == 0);
	CU_ASSERT(store_get(st, "a.txt", 3, 0, buf, &got) == 0 && got == 0);
	CU_ASSERT(store_get(st, "nope", 0, 5, buf, &got) == -ENOENT);
	CU_ASSERT(store_get(st, "nope", 0, 0, buf, &got) == -ENOENT);
	CU_ASSERT(store_head(st, "nope", &head) == -ENOENT);

	/* A symlink: flag, negative mtime, partial metadata. */
	CU_ASSERT(store_put(st, "ln", "a.txt", 5, &meta_link, NULL) == 0);
	CU_ASSERT(store_head(st, "ln", &head) == 0);
	CU_ASSERT(meta_eq(&head.meta, &meta_link));
	/* No metadata at all: nothing made up. */
	CU_ASSERT(store_put(st, "bare", "x", 1, NULL, NULL) == 0);
	CU_ASSERT(store_head(st, "bare", &head) == 0);
	CU_ASSERT(!head.meta.has_mode && !head.meta.has_uid &&
		  !head.meta.has_gid && !head.meta.has_mtime &&
		  !head.meta.symlink);
	/* Overwrite: new bytes, new etag. */
	CU_ASSERT(store_put(st, "a.txt", "v2", 2, &meta_file, &head) == 0);
	CU_ASSERT(strcmp(head.etag, info.etag) != 0);
	CU_ASSERT(store_get(st, "a.txt", 0, sizeof(buf), buf, &got) == 0);
	CU_ASSERT(got == 2 && memcmp(buf, "v2", 2) == 0);

	CU_ASSERT(store_put(st, "bad/../key", "x", 1, NULL, NULL) == -EINVAL);
	CU_ASSERT(store_put(st, "", "x", 1, NULL, NULL) == -EINVAL);
}

/* A server on this machine: big objects go up as one PUT (s3/store.h). */
static void test_put_max(void)
{
	CU_ASSERT(strstr(endpoint, "127.0.0.1") == NULL ||
		  store_put_max(st) == 1ull << 30);
}

struct sinkbuf {
	char *buf;
	size_t cap, len;
	int calls;
};

static int sink_keep(void *arg, const void *p, size_t n)
{
	struct sinkbuf *b = arg;

	b->calls++;
	if (b->len + n > b->cap)
		return -EOVERFLOW;
	memcpy(b->buf + b->len, p, n);
	b->len += n;
	return 0;
}

/* A streamed ranged GET hands every byte once, in order; a sink that
 * fails stops it with its error, which is not retried. */
static void test_get_stream(void)
{
	const size_t size = 5 * (1u << 20) + 77;
	char *data = malloc(size);
	struct sinkbuf b = { .buf = malloc(size), .cap = size };
	uint64_t got = 99;
	int fd;

	fill(data, size, 31);
	fd = tmp_fd(data, size);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(store_put_fd(st, "stream", fd, size, NULL, NULL) == 0);
	close(fd);
	CU_ASSERT(store_get_stream(st, "stream", 1000, size, sink_keep, &b,
				   &got) == 0);
	CU_ASSERT(got == size - 1000 && b.len == got);
	CU_ASSERT(memcmp(b.buf, data + 1000, b.len) == 0);
	b = (struct sinkbuf){ .buf = b.buf, .cap = 10 };
	CU_ASSERT(store_get_stream(st, "stream", 0, size, sink_keep, &b,
				   &got) == -EOVERFLOW);
	CU_ASSERT(got < size);
	b = (struct sinkbuf){ .buf = b.buf, .cap = size };
	CU_ASSERT(store_get_stream(st, "stream", size, 10, sink_keep, &b,
				   &got) == 0 &&
		  got == 0 && b.calls == 0);
	CU_ASSERT(store_get_stream(st, "nope", 0, 10, sink_keep, &b, &got) ==
		  -ENOENT);
	CU_ASSERT(store_delete(st, "stream") == 0);
	free(data);
	free(b.buf);
}

/*
 * A slow sink holds up only its own transfer: a GET whose sink waits
 * for another GET to finish must see it finish (the sinks of concurrent
 * GETs land cache data, and once ran all on one I/O thread, one behind
 * the other).
 */
struct slow_sink {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool entered, other_done, waited_out;
};

static int sink_slow(void *arg, const void *p, size_t n)
{
	struct slow_sink *ss = arg;
	struct timespec until;
	int rc = 0;

	(void)p;
	(void)n;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20;
	pthread_mutex_lock(&ss->lock);
	ss->entered = true;
	pthread_cond_broadcast(&ss->cond);
	while (!ss->other_done && rc == 0)
		rc = pthread_cond_timedwait(&ss->cond, &ss->lock, &until);
	if (!ss->other_done)
		ss->waited_out = true;
	pthread_mutex_unlock(&ss->lock);
	return 0;
}

static void *slow_get_run(void *arg)
{
	uint64_t got;

	return (void *)(intptr_t)store_get_stream(st, "lane/slow", 0, 4096,
						  sink_slow, arg, &got);
}

static void test_slow_sink(void)
{
	struct slow_sink ss = { .lock = PTHREAD_MUTEX_INITIALIZER,
				.cond = PTHREAD_COND_INITIALIZER };
	char buf[16];
	size_t got = 0;
	pthread_t t;
	void *ret;

	CU_ASSERT_FATAL(store_put(st, "lane/slow", "slow", 4, NULL, NULL) == 0);
	CU_ASSERT_FATAL(store_put(st, "lane/fast", "fast", 4, NULL, NULL) == 0);
	CU_ASSERT_FATAL(pthread_create(&t, NULL, slow_get_run, &ss) == 0);
	pthread_mutex_lock(&ss.lock);
	while (!ss.entered)
		pthread_cond_wait(&ss.cond, &ss.lock);
	pthread_mutex_unlock(&ss.lock);
	/* The slow sink is running now, on its transfer's thread. */
	CU_ASSERT(store_get(st, "lane/fast", 0, sizeof(buf), buf, &got) == 0);
	CU_ASSERT(got == 4 && memcmp(buf, "fast", 4) == 0);
	pthread_mutex_lock(&ss.lock);
	ss.other_done = true;
	pthread_cond_broadcast(&ss.cond);
	pthread_mutex_unlock(&ss.lock);
	pthread_join(t, &ret);
	CU_ASSERT(ret == NULL);
	CU_ASSERT(!ss.waited_out);
	CU_ASSERT(store_delete(st, "lane/slow") == 0);
	CU_ASSERT(store_delete(st, "lane/fast") == 0);
}

static void test_put_fd_and_markers(void)
{
	const size_t n = 3u << 20;
	char *data = malloc(n), *back = malloc(n);
	struct store_info info;
	size_t got = 0;
	int fd;

	CU_ASSERT_FATAL(data && back);
	fill(data, n, 7);
	fd = tmp_fd(data, n);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(store_put_fd(st, "big.bin", fd, n, &meta_file, &info) == 0);
	CU_ASSERT(info.size == n);
	CU_ASSERT(store_get(st, "big.bin", 0, n, back, &got) == 0);
	CU_ASSERT(got == n && memcmp(data, back, n) == 0);
	CU_ASSERT(store_get(st, "big.bin", n - 10, 100, back, &got) == 0);
	CU_ASSERT(got == 10 && memcmp(data + n - 10, back, 10) == 0);
	/* A file shorter than announced fails, and nothing is stored. */
	CU_ASSERT(store_put_fd(st, "short.bin", fd, n + 10, NULL, NULL) < 0);
	CU_ASSERT(store_head(st, "short.bin", &info) == -ENOENT);
	close(fd);

	CU_ASSERT(store_put(st, "dir/", "x", 1, NULL, NULL) == -EINVAL);
	CU_ASSERT(store_put(st, "dir/", NULL, 0, &meta_file, NULL) == 0);
	CU_ASSERT(store_head(st, "dir/", &info) == 0);
	CU_ASSERT(info.size == 0 && meta_eq(&info.meta, &meta_file));
	CU_ASSERT(store_get(st, "dir/", 0, 10, back, &got) == 0 && got == 0);
	free(data);
	free(back);
}

static bool page_has(const struct store_page *p, const char *key)
{
	for (size_t i = 0; i < p->nentries; i++)
		if (strcmp(p->entries[i].key, key) == 0)
			return true;
	return false;
}

static bool page_has_prefix(const struct store_page *p, const char *pfx)
{
	for (size_t i = 0; i < p->nprefixes; i++)
		if (strcmp(p->prefixes[i], pfx) == 0)
			return true;
	return false;
}

static void test_list(void)
{
	static const char *const keys[] = {
		"l/1",           "l/2", "l/b/3", "l/c/", "l/sp ace+&%<.txt",
		"l/\xe1\x88\xb4"
	};
	struct store_page p;
	char *token = NULL;
	size_t seen = 0, pages = 0;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		CU_ASSERT(store_put(st, keys[i], NULL, 0, NULL, NULL) == 0);
	CU_ASSERT_FATAL(store_list(st, "l/", '/', NULL, 0, &p) == 0);
	CU_ASSERT(p.nentries == 4 && p.nprefixes == 2 && !p.next_token);
	CU_ASSERT(page_has(&p, "l/1") && page_has(&p, "l/2") &&
		  page_has(&p, "l/sp ace+&%<.txt") &&
		  page_has(&p, "l/\xe1\x88\xb4"));
	CU_ASSERT(page_has_prefix(&p, "l/b/") && page_has_prefix(&p, "l/c/"));
	store_page_free(&p);

	/* Paging without a delimiter: every key once, 2 a page. */
	do {
		CU_ASSERT_FATAL(store_list(st, "l/", 0, token, 2, &p) == 0);
		free(token);
		token = p.next_token ? strdup(p.next_token) : NULL;
		seen += p.nentries;
		CU_ASSERT(p.nentries + p.nprefixes <= 2);
		pages++;
		store_page_free(&p);
	} while (token && pages < 10);
	CU_ASSERT(seen == 6 && pages == 3);
	free(token);

	CU_ASSERT(store_list(st, "l/nothing", '/', NULL, 0, &p) == 0);
	CU_ASSERT(p.nentries == 0 && p.nprefixes == 0);
	store_page_free(&p);
}

static void test_copy_delete(void)
{
	struct store_meta other = meta_file;
	struct store_info info;
	char buf[16];
	size_t got;
	const char *many[] = { "m/1", "m/2", "m/3", "m/absent" };
	struct store_page p;

	CU_ASSERT_FATAL(store_put(st, "c/src", "copyme", 6, &meta_file, NULL) ==
			0);
	CU_ASSERT(store_copy(st, "c/src", "c/keep", NULL, &info) == 0);
	CU_ASSERT(info.size == 6 && meta_eq(&info.meta, &meta_file));
	other.uid = 42;
	other.mtime_ns = 5;
	CU_ASSERT(store_copy(st, "c/src", "c/repl", &other, &info) == 0);
	CU_ASSERT(store_head(st, "c/repl", &info) == 0);
	CU_ASSERT(meta_eq(&info.meta, &other));
	CU_ASSERT(store_get(st, "c/repl", 0, sizeof(buf), buf, &got) == 0);
	CU_ASSERT(got == 6 && memcmp(buf, "copyme", 6) == 0);
	CU_ASSERT(store_copy(st, "c/none", "c/x", NULL, NULL) == -ENOENT);
	CU_ASSERT(store_copy(st, "c/src", "c/dir/", NULL, NULL) == -EINVAL);

	CU_ASSERT(store_delete(st, "c/keep") == 0);
	CU_ASSERT(store_head(st, "c/keep", &info) == -ENOENT);
	CU_ASSERT(store_delete(st, "c/keep") == 0);

	for (int i = 0; i < 3; i++)
		CU_ASSERT(store_put(st, many[i], "x", 1, NULL, NULL) == 0);
	CU_ASSERT(store_delete_many(st, many, 4) == 0);
	CU_ASSERT(store_list(st, "m/", 0, NULL, 0, &p) == 0);
	CU_ASSERT(p.nentries == 0);
	store_page_free(&p);
}

static void test_multipart(void)
{
	const size_t n1 = 5u << 20; /* S3's smallest non-last part */
	char *data = malloc(n1 + 100), *back = malloc(n1 + 100);
	char etags[3][STORE_ETAG_MAX], bad[2][STORE_ETAG_MAX];
	struct store_info info;
	char *id = NULL, *id2 = NULL;
	struct store_upload *ups;
	size_t got, nups;
	int fd;

	CU_ASSERT_FATAL(data && back);
	fill(data, n1 + 100, 3);
	fd = tmp_fd(data, n1);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(store_put(st, "mp/src", data + n1, 100, NULL, NULL) ==
			0);
	CU_ASSERT_FATAL(store_mpu_create(st, "mp/obj", &meta_file, &id) == 0);
	CU_ASSERT(store_mpu_part(st, "mp/obj", id, 1, fd, 0, n1, etags[0]) ==
		  0);
	CU_ASSERT(store_mpu_part_copy(st, "mp/obj", id, 2, "mp/src", 0, 100,
				      etags[1]) == 0);
	memcpy(bad, etags, sizeof(bad));
	snprintf(bad[1], sizeof(bad[1]), "0123456789abcdef0123456789abcdef");
	CU_ASSERT(store_mpu_complete(st, "mp/obj", id, 2, bad, NULL) ==
		  -EINVAL);
	CU_ASSERT(store_mpu_complete(st, "mp/obj", id, 2, etags, &info) == 0);
	CU_ASSERT(info.size == n1 + 100 && info.etag[0]);
	CU_ASSERT(meta_eq(&info.meta, &meta_file));
	CU_ASSERT(store_get(st, "mp/obj", 0, n1 + 100, back, &got) == 0);
	CU_ASSERT(got == n1 + 100 && memcmp(back, data, n1 + 100) == 0);

	/* A ranged part copy of the middle of a big object. */
	CU_ASSERT_FATAL(store_mpu_create(st, "mp/obj2", NULL, &id2) == 0);
	CU_ASSERT(store_mpu_part_copy(st, "mp/obj2", id2, 1, "mp/obj", 1000, 50,
				      etags[2]) == 0);
	CU_ASSERT(store_mpu_complete(st, "mp/obj2", id2, 1, etags + 2, &info) ==
		  0);
	CU_ASSERT(info.size == 50);
	CU_ASSERT(store_get(st, "mp/obj2", 0, 100, back, &got) == 0);
	CU_ASSERT(got == 50 && memcmp(back, data + 1000, 50) == 0);
	free(id2);
	id2 = NULL;

	CU_ASSERT(store_mpu_create(st, "mp/gone", NULL, &id2) == 0);
	/* Listed by key prefix (ours only), until aborted. */
	CU_ASSERT(store_mpu_list(st, "mp/go", &ups, &nups) == 0 && nups == 1 &&
		  !strcmp(ups[0].key, "mp/gone") &&
		  !strcmp(ups[0].upload_id, id2));
	store_uploads_free(ups, nups);
	CU_ASSERT(store_mpu_abort(st, "mp/gone", id2) == 0);
	CU_ASSERT(store_mpu_list(st, "mp/go", &ups, &nups) == 0 && nups == 0);
	store_uploads_free(ups, nups);
	CU_ASSERT(store_mpu_part(st, "mp/gone", id2, 1, fd, 0, 10, etags[2]) ==
		  -ENOENT);
	CU_ASSERT(store_mpu_abort(st, "mp/gone", id2) == -ENOENT);
	CU_ASSERT(store_mpu_complete(st, "mp/gone", id2, 1, etags, NULL) ==
		  -ENOENT);
	CU_ASSERT(store_head(st, "mp/gone", &info) == -ENOENT);
	CU_ASSERT(store_mpu_part(st, "mp/obj", id, 0, fd, 0, 10, etags[2]) ==
		  -EINVAL);
	close(fd);
	free(id);
	free(id2);
	free(data);
	free(back);
}

struct worker {
	int n;
	int fails;
};

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	char key[64], body[64], back[64];
	size_t got;

	for (int i = 0; i < 10; i++) {
		int len = snprintf(body, sizeof(body), "w%d-i%d", w->n, i);

		snprintf(key, sizeof(key), "t/%d/%d", w->n, i);
		if (store_put(st, key, body, (size_t)len, NULL, NULL) ||
		    store_get(st, key, 0, sizeof(back), back, &got) ||
		    got != (size_t)len || memcmp(body, back, got))
			w->fails++;
	}
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[12];
	struct worker w[12];

	for (int i = 0; i < 12; i++) {
		w[i] = (struct worker){ i, 0 };
		CU_ASSERT_FATAL(
			pthread_create(&t[i], NULL, worker_run, &w[i]) == 0);
	}
	for (int i = 0; i < 12; i++) {
		pthread_join(t[i], NULL);
		CU_ASSERT(w[i].fails == 0);
	}
}

static void test_wrong_secret(void)
{
	char *sk = strdup(getenv("AWS_SECRET_ACCESS_KEY"));
	struct store_opts o = opts(url);
	struct store *bad = NULL;

	setenv("AWS_SECRET_ACCESS_KEY", "definitely-wrong", 1);
	CU_ASSERT(store_open(&o, &bad) == -EACCES);
	setenv("AWS_SECRET_ACCESS_KEY", sk, 1);
	free(sk);
}

static void test_no_bucket(void)
{
	struct store_opts o = opts("s3://mapfs-no-such-bucket-here");
	struct store *bad = NULL;

	CU_ASSERT(store_open(&o, &bad) == -ENXIO);
}

/* A server that is down: open still works, requests say EAGAIN. */
static void test_server_down(void)
{
	struct store_opts o = opts(url);
	struct store_info info;
	struct store *down = NULL;

	o.s3_endpoint = "http://127.0.0.1:1";
	CU_ASSERT_FATAL(store_open(&o, &down) == 0);
	CU_ASSERT(store_head(down, "a.txt", &info) == -EAGAIN);
	store_close(down);
}

/* Delete everything under our prefix. */
static void cleanup(void)
{
	struct store_page p;
	char *token = NULL;

	do {
		if (store_list(st, "", 0, token, 0, &p))
			break;
		free(token);
		token = p.next_token ? strdup(p.next_token) : NULL;
		for (size_t i = 0; i < p.nentries; i++)
			store_delete(st, p.entries[i].key);
		store_page_free(&p);
	} while (token);
	free(token);
}

/* If-Match / If-None-Match on writes, pinned reads (store_conds.c). */
static void test_conditions(void)
{
	const char *err = store_conds_check(st, "conds/");

	if (err)
		fprintf(stderr, "conditions: %s\n", err);
	CU_ASSERT_PTR_NULL(err);
}

int main(void)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} tests[] = {
		{ "put, head, get", test_put_head_get },
		{ "streamed get", test_get_stream },
		{ "a slow sink holds up only its own GET", test_slow_sink },
		{ "one PUT up to 1 GiB on loopback", test_put_max },
		{ "put from fd, markers", test_put_fd_and_markers },
		{ "list", test_list },
		{ "copy, delete", test_copy_delete },
		{ "multipart", test_multipart },
		{ "conditional writes, pinned reads", test_conditions },
		{ "threads", test_threads },
		{ "wrong secret", test_wrong_secret },
		{ "no such bucket", test_no_bucket },
		{ "server down", test_server_down },
	};
	const char *ak = getenv("MAPFS_TEST_S3_AK");
	const char *sk = getenv("MAPFS_TEST_S3_SK");
	struct store_opts o;
	CU_pSuite suite;
	unsigned failed;
	int rc;

	endpoint = getenv("MAPFS_TEST_S3_ENDPOINT");
	if (!endpoint || !*endpoint) {
		printf("test_s3_rgw: SKIPPED: set MAPFS_TEST_S3_ENDPOINT (and "
		       "MAPFS_TEST_S3_BUCKET, MAPFS_TEST_S3_AK/SK) to run "
		       "against a real S3 server\n");
		return 77;
	}
	bucket = getenv("MAPFS_TEST_S3_BUCKET") ? getenv("MAPFS_TEST_S3_BUCKET")
						: "bench";
	if (ak)
		setenv("AWS_ACCESS_KEY_ID", ak, 1);
	if (sk)
		setenv("AWS_SECRET_ACCESS_KEY", sk, 1);
	if (!getenv("AWS_ACCESS_KEY_ID") || !getenv("AWS_SECRET_ACCESS_KEY")) {
		fprintf(stderr, "test_s3_rgw: no keys (MAPFS_TEST_S3_AK/SK)\n");
		return 1;
	}
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	snprintf(url, sizeof(url), "s3://%s/mapfs-test-%d-%ld", bucket,
		 (int)getpid(), (long)time(NULL));
	o = opts(url);
	rc = store_open(&o, &st);
	if (rc) {
		fprintf(stderr, "test_s3_rgw: store_open(%s at %s): %s\n", url,
			endpoint, strerror(-rc));
		return 1;
	}
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	suite = CU_add_suite("s3_rgw", NULL, NULL);
	for (size_t i = 0; suite && i < sizeof(tests) / sizeof(tests[0]); i++)
		if (!CU_add_test(suite, tests[i].name, tests[i].fn))
			suite = NULL;
	if (!suite) {
		CU_cleanup_registry();
		return 1;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	cleanup();
	store_close(st);
	return failed ? 1 : 0;
}
