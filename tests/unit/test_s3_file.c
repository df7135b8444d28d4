/*
 * Unit tests for s3/: the local-directory backend ("file://").  It must
 * answer like S3 (keys, markers, listing order, tokens, metadata) and
 * never let a key reach outside ROOT or through a symlink.
 */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "s3/store.h"
#include "tests/lib/store_conds.h"

static char base[] = "/tmp/mapfs-test-s3-XXXXXX";

/* A fresh store per test: ROOT = base/<name>/root, so base/<name> shows
 * anything that escaped ROOT. */
struct fx {
	char top[512];
	char root[600];
	struct store *st;
	int fds; /* open fds before the store: none may leak */
};

static int count_fds(void)
{
	struct dirent *de;
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n++;
	closedir(d);
	return n;
}

static void fx_open(struct fx *f, const char *name)
{
	char url[700];
	struct store_opts o = { .url = url };

	snprintf(f->top, sizeof(f->top), "%s/%s", base, name);
	snprintf(f->root, sizeof(f->root), "%s/root", f->top);
	snprintf(url, sizeof(url), "file://%s", f->root);
	CU_ASSERT_FATAL(mkdir(f->top, 0755) == 0);
	f->fds = count_fds();
	CU_ASSERT_FATAL(store_open(&o, &f->st) == 0);
}

static void fx_close(struct fx *f)
{
	store_close(f->st);
	CU_ASSERT(count_fds() == f->fds);
}

static void path_of(const struct fx *f, const char *rel, char *buf, size_t n)
{
	snprintf(buf, n, "%s/%s", f->root, rel);
}

static bool exists(const char *path)
{
	struct stat sb;

	return lstat(path, &sb) == 0;
}

static int count_dir(const char *path)
{
	char cmd[800];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", path);
	p = popen(cmd, "r");
	if (p) {
		if (fscanf(p, "%d", &n) != 1)
			n = -1;
		pclose(p);
	}
	return n;
}

static void write_file(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(write(fd, data, strlen(data)) == (ssize_t)strlen(data));
	close(fd);
}

static int put_str(struct fx *f, const char *key, const char *data)
{
	return store_put(f->st, key, data, strlen(data), NULL, NULL);
}

/* The whole object as a NUL-terminated string (static buffer). */
static const char *get_str(struct fx *f, const char *key)
{
	static char buf[65536];
	size_t got = 0;

	if (store_get(f->st, key, 0, sizeof(buf) - 1, buf, &got))
		return NULL;
	buf[got] = '\0';
	return buf;
}

static const struct store_meta meta_a = {
	.has_mode = true,
	.has_uid = true,
	.has_gid = true,
	.has_mtime = true,
	.mode = 0100640,
	.uid = 1000,
	.gid = 4294967294u,
	.mtime_ns = 1700000000123456789LL,
	.symlink = false,
};

static const struct store_meta meta_b = {
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

/* Every item of a listing, entries and prefixes merged in key order. */
struct items {
	char *v[64];
	int n;
	int pages;
};

static void items_free(struct items *it)
{
	for (int i = 0; i < it->n; i++)
		free(it->v[i]);
	it->n = 0;
}

/*
 * All pages of a listing.  Within a page, entries and prefixes are merged
 * by strcmp: S3 order is one order over both.
 */
static int list_all(struct fx *f, const char *prefix, char delim, unsigned max,
		    struct items *it)
{
	struct store_page pg;
	char *tok = NULL;
	int err;

	memset(it, 0, sizeof(*it));
	do {
		size_t e = 0, p = 0;

		err = store_list(f->st, prefix, delim, tok, max, &pg);
		free(tok);
		tok = NULL;
		if (err)
			return err;
		it->pages++;
		if (max && pg.nentries + pg.nprefixes > max)
			err = -E2BIG;
		while (e < pg.nentries || p < pg.nprefixes) {
			const char *s;

			if (p == pg.nprefixes ||
			    (e < pg.nentries &&
			     strcmp(pg.entries[e].key, pg.prefixes[p]) < 0))
				s = pg.entries[e++].key;
			else
				s = pg.prefixes[p++];
			if (it->n < 64)
				it->v[it->n++] = strdup(s);
		}
		if (pg.next_token)
			tok = strdup(pg.next_token);
		store_page_free(&pg);
	} while (tok && !err && it->pages < 100);
	free(tok);
	return err;
}

static bool items_are(const struct items *it, const char *const *want, int n)
{
	if (it->n != n)
		return false;
	for (int i = 0; i < n; i++)
		if (strcmp(it->v[i], want[i]))
			return false;
	return true;
}

static void test_open_urls(void)
{
	struct store_opts o = { 0 };
	struct store *st;
	struct fx f;
	uint64_t total = 0, avail = 0;

	o.url = "ftp://host/x";
	CU_ASSERT(store_open(&o, &st) == -EINVAL);
	o.url = "file://relative/path";
	CU_ASSERT(store_open(&o, &st) == -EINVAL);
	o.url = "/no/scheme";
	CU_ASSERT(store_open(&o, &st) == -EINVAL);

	fx_open(&f, "open");
	CU_ASSERT(strncmp(store_url(f.st), "file:///", 8) == 0);
	CU_ASSERT(strstr(store_url(f.st), "/open/root") != NULL);
	CU_ASSERT(store_statfs(f.st, &total, &avail) == 0);
	CU_ASSERT(total > 0 && avail <= total);
	fx_close(&f);
}

static void test_put_get_head_meta(void)
{
	struct store_info put, head;
	char path[800];
	struct fx f;
	int fd;

	fx_open(&f, "meta");
	CU_ASSERT(store_put(f.st, "a/b.txt", "hello", 5, &meta_a, &put) == 0);
	path_of(&f, "a/b.txt", path, sizeof(path));
	CU_ASSERT(exists(path)); /* key "a/b.txt" is ROOT/a/b.txt */
	CU_ASSERT(put.size == 5);
	CU_ASSERT(store_head(f.st, "a/b.txt", &head) == 0);
	CU_ASSERT(head.size == 5);
	CU_ASSERT(strcmp(head.etag, put.etag) == 0);
	CU_ASSERT(head.last_modified_ns > 0);
	CU_ASSERT(meta_eq(&head.meta, &meta_a));
	CU_ASSERT(head.meta.gid == 4294967294u);
	CU_ASSERT_STRING_EQUAL(get_str(&f, "a/b.txt"), "hello");

	/* A symlink object: negative mtime, flag, partial metadata. */
	CU_ASSERT(store_put(f.st, "ln", "target", 6, &meta_b, NULL) == 0);
	CU_ASSERT(store_head(f.st, "ln", &head) == 0);
	CU_ASSERT(meta_eq(&head.meta, &meta_b));
	CU_ASSERT(!head.meta.has_uid && head.meta.symlink);

	/* No metadata given: none read back. */
	CU_ASSERT(put_str(&f, "plain", "x") == 0);
	CU_ASSERT(store_head(f.st, "plain", &head) == 0);
	CU_ASSERT(!head.meta.has_mode && !head.meta.has_uid &&
		  !head.meta.has_gid && !head.meta.has_mtime &&
		  !head.meta.symlink);

	/* PUT from an fd copies exactly [0, len). */
	path_of(&f, "../src.bin", path, sizeof(path));
	write_file(path, "0123456789");
	fd = open(path, O_RDONLY);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(store_put_fd(f.st, "fromfd", fd, 7, &meta_a, &put) == 0);
	CU_ASSERT(put.size == 7);
	CU_ASSERT(lseek(fd, 0, SEEK_CUR) == 0); /* fd position untouched */
	CU_ASSERT(store_put_fd(f.st, "short", fd, 11, NULL, NULL) == -EIO);
	close(fd);
	CU_ASSERT_STRING_EQUAL(get_str(&f, "fromfd"), "0123456");
	CU_ASSERT(store_head(f.st, "short", &head) == -ENOENT);

	CU_ASSERT(store_head(f.st, "absent", &head) == -ENOENT);
	CU_ASSERT(store_head(f.st, "a", &head) == -ENOENT); /* a dir */
	fx_close(&f);
}

static void test_get_range(void)
{
	char buf[16];
	size_t got;
	struct fx f;

	fx_open(&f, "range");
	CU_ASSERT(put_str(&f, "r", "0123456789") == 0);
	got = 99;
	CU_ASSERT(store_get(f.st, "r", 3, 4, buf, &got) == 0);
	CU_ASSERT(got == 4 && memcmp(buf, "3456", 4) == 0);
	CU_ASSERT(store_get(f.st, "r", 8, 4, buf, &got) == 0);
	CU_ASSERT(got == 2 && memcmp(buf, "89", 2) == 0);
	got = 99;
	CU_ASSERT(store_get(f.st, "r", 10, 4, buf, &got) == 0);
	CU_ASSERT(got == 0);
	got = 99;
	CU_ASSERT(store_get(f.st, "r", UINT64_MAX - 1, 4, buf, &got) == 0);
	CU_ASSERT(got == 0);
	CU_ASSERT(store_get(f.st, "nope", 0, 4, buf, &got) == -ENOENT);
	fx_close(&f);
}

/* What a store_get_stream sink saw; it stops the GET past stop_at bytes. */
struct sinkbuf {
	char *buf;
	size_t cap, len, stop_at;
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
	return b->stop_at && b->len >= b->stop_at ? -ECANCELED : 0;
}

/* A streamed GET: every byte once, in order, in bounded pieces; a sink
 * that says stop ends it with its error. */
static void test_get_stream(void)
{
	const size_t size = 3 * (1u << 20) + 12345;
	char *want = malloc(size), path[800];
	struct sinkbuf b = { .buf = malloc(size), .cap = size };
	uint64_t got = 99;
	struct fx f;
	int fd;

	fx_open(&f, "stream");
	for (size_t i = 0; i < size; i++)
		want[i] = (char)(i * 7 + i / 4096);
	path_of(&f, "../stream-src.bin", path, sizeof(path));
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CU_ASSERT_FATAL(fd >= 0 && write(fd, want, size) == (ssize_t)size);
	CU_ASSERT_FATAL(store_put_fd(f.st, "s", fd, size, NULL, NULL) == 0);
	close(fd);
	unlink(path);
	CU_ASSERT(store_get_stream(f.st, "s", 100, size, sink_keep, &b, &got) ==
		  0);
	CU_ASSERT(got == size - 100 && b.len == got);
	CU_ASSERT(memcmp(b.buf, want + 100, b.len) == 0);
	CU_ASSERT(b.calls >= 4); /* pieces, never the whole in one buffer */
	b = (struct sinkbuf){ .buf = b.buf, .cap = size, .stop_at = 1 };
	CU_ASSERT(store_get_stream(f.st, "s", 0, size, sink_keep, &b, &got) ==
		  -ECANCELED);
	CU_ASSERT(b.calls == 1 && got < size);
	b = (struct sinkbuf){ .buf = b.buf, .cap = size };
	CU_ASSERT(store_get_stream(f.st, "s", size, 10, sink_keep, &b, &got) ==
		  0);
	CU_ASSERT(got == 0 && b.calls == 0);
	CU_ASSERT(store_get_stream(f.st, "nope", 0, 10, sink_keep, &b, &got) ==
		  -ENOENT);
	fx_close(&f);
	free(want);
	free(b.buf);
}

/* One PUT whatever the size (multipart costs a second copy here),
 * unless the opener set a threshold. */
static void test_put_max(void)
{
	struct store_opts o = { .put_max = 64ull << 20 };
	char url[700];
	struct store *st;
	struct fx f;

	fx_open(&f, "putmax");
	CU_ASSERT(store_put_max(f.st) == UINT64_MAX);
	snprintf(url, sizeof(url), "file://%s", f.root);
	o.url = url;
	CU_ASSERT_FATAL(store_open(&o, &st) == 0);
	CU_ASSERT(store_put_max(st) == 64ull << 20);
	store_close(st);
	fx_close(&f);
}

static void test_overwrite_changes_etag(void)
{
	struct store_info i1, i2, i3, h;
	struct fx f;

	fx_open(&f, "etag");
	CU_ASSERT(store_put(f.st, "k", "aaaa", 4, NULL, &i1) == 0);
	CU_ASSERT(store_put(f.st, "k", "bbbb", 4, NULL, &i2) == 0);
	CU_ASSERT(strcmp(i1.etag, i2.etag) != 0);
	CU_ASSERT(store_put(f.st, "k", "bbbb", 4, NULL, &i3) == 0);
	CU_ASSERT(strcmp(i2.etag, i3.etag) != 0);
	CU_ASSERT(store_head(f.st, "k", &h) == 0);
	CU_ASSERT(strcmp(h.etag, i3.etag) == 0);
	CU_ASSERT_STRING_EQUAL(get_str(&f, "k"), "bbbb");
	fx_close(&f);
}

static void test_invalid_keys(void)
{
	static const char *const bad[] = {
		"",
		"/abs",
		"../escape",
		"a/../../escape",
		"a/./b",
		".",
		"..",
		"a/..",
		"a/.",
		"a//b",
		"//",
		"/",
		"a//",
		"./x",
		".mapfs-tmp/x",
		".mapfs-mpu",
		".mapfs-tmp/",
	};
	char longkey[STORE_KEY_MAX + 2], buf[4];
	struct store_info info;
	struct store_page pg;
	struct fx f;
	size_t got;
	char *id;

	fx_open(&f, "keys");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CU_ASSERT(put_str(&f, bad[i], "x") == -EINVAL);
		CU_ASSERT(store_head(f.st, bad[i], &info) == -EINVAL);
		CU_ASSERT(store_get(f.st, bad[i], 0, 4, buf, &got) == -EINVAL);
		CU_ASSERT(store_delete(f.st, bad[i]) == -EINVAL);
		CU_ASSERT(store_copy(f.st, bad[i], "ok", NULL, NULL) ==
			  -EINVAL);
		CU_ASSERT(store_mpu_create(f.st, bad[i], NULL, &id) == -EINVAL);
	}
	CU_ASSERT(put_str(&f, "ok", "x") == 0);
	CU_ASSERT(store_copy(f.st, "ok", "../escape", NULL, NULL) == -EINVAL);
	CU_ASSERT(put_str(&f, NULL, "x") == -EINVAL);
	memset(longkey, 'k', sizeof(longkey) - 1);
	longkey[sizeof(longkey) - 1] = '\0'; /* STORE_KEY_MAX + 1 bytes */
	CU_ASSERT(put_str(&f, longkey, "x") == -EINVAL);
	longkey[STORE_KEY_MAX] = '\0';
	CU_ASSERT(put_str(&f, longkey, "x") == -ENAMETOOLONG); /* one name */

	/* Nothing escaped ROOT; ROOT holds only "ok" and the reserved dirs. */
	CU_ASSERT(count_dir(f.top) == 1);
	CU_ASSERT(count_dir(f.root) == 3);
	/* A prefix that no valid key can have lists nothing. */
	CU_ASSERT(store_list(f.st, "../", '/', NULL, 0, &pg) == 0);
	CU_ASSERT(pg.nentries == 0 && pg.nprefixes == 0 && !pg.next_token);
	CU_ASSERT(store_list(f.st, ".mapfs-tmp/", 0, NULL, 0, &pg) == 0);
	CU_ASSERT(pg.nentries == 0 && pg.nprefixes == 0);
	CU_ASSERT(store_list(f.st, "", '/', "Xbogus", 0, &pg) == -EINVAL);
	fx_close(&f);
}

static void test_markers(void)
{
	struct store_info info;
	char path[800];
	struct stat sb;
	struct fx f;

	fx_open(&f, "markers");
	CU_ASSERT(store_put(f.st, "d/e/", NULL, 0, &meta_a, &info) == 0);
	CU_ASSERT(info.size == 0);
	path_of(&f, "d/e", path, sizeof(path));
	CU_ASSERT(stat(path, &sb) == 0 && S_ISDIR(sb.st_mode));
	CU_ASSERT(store_head(f.st, "d/e/", &info) == 0);
	CU_ASSERT(info.size == 0 && meta_eq(&info.meta, &meta_a));
	CU_ASSERT(store_head(f.st, "d/", &info) == 0); /* a parent is a dir */
	CU_ASSERT(store_head(f.st, "d/e", &info) == -ENOENT);
	CU_ASSERT(store_put(f.st, "d/e/", "x", 1, NULL, NULL) == -EINVAL);
	/* Re-PUT replaces the marker's metadata entirely. */
	CU_ASSERT(store_put(f.st, "d/e/", NULL, 0, &meta_b, NULL) == 0);
	CU_ASSERT(store_head(f.st, "d/e/", &info) == 0);
	CU_ASSERT(meta_eq(&info.meta, &meta_b));

	CU_ASSERT(store_delete(f.st, "d/e/") == 0);
	CU_ASSERT(!exists(path));
	CU_ASSERT(store_head(f.st, "d/e/", &info) == -ENOENT);
	CU_ASSERT(store_delete(f.st, "d/e/") == 0); /* absent: still 0 */

	/* A marker with children: the prefix stays, the marker's data goes. */
	CU_ASSERT(store_put(f.st, "m/", NULL, 0, &meta_a, NULL) == 0);
	CU_ASSERT(put_str(&f, "m/x", "1") == 0);
	CU_ASSERT(store_delete(f.st, "m/") == 0);
	CU_ASSERT(store_head(f.st, "m/", &info) == 0);
	CU_ASSERT(!info.meta.has_mode && !info.meta.has_uid);
	CU_ASSERT_STRING_EQUAL(get_str(&f, "m/x"), "1");

	/* Its marker deleted, the prefix goes with its last key, as on S3. */
	CU_ASSERT(store_delete(f.st, "m/x") == 0);
	CU_ASSERT(store_head(f.st, "m/x", &info) == -ENOENT);
	CU_ASSERT(store_head(f.st, "m/", &info) == -ENOENT);
	CU_ASSERT(store_delete(f.st, "m/x") == 0);
	/* An explicit marker outlives its last key; a bare prefix does not. */
	CU_ASSERT(store_put(f.st, "k/", NULL, 0, &meta_a, NULL) == 0);
	CU_ASSERT(put_str(&f, "k/p/q", "1") == 0);
	CU_ASSERT(store_delete(f.st, "k/p/q") == 0);
	CU_ASSERT(store_head(f.st, "k/p/", &info) == -ENOENT);
	CU_ASSERT(store_head(f.st, "k/", &info) == 0);
	CU_ASSERT(meta_eq(&info.meta, &meta_a));
	/* A file and a directory cannot share a name on a local disk. */
	CU_ASSERT(put_str(&f, "m/x/y", "1") == 0);
	CU_ASSERT(put_str(&f, "m", "1") == -EISDIR);
	/* ... also under a condition: no version to conflict with (an
	 * upload took it for another writer's and tried again forever). */
	{
		struct store_cond none = { .kind = STORE_IF_NONE };

		CU_ASSERT(store_put_if(f.st, "m", "1", 1, NULL, &none, NULL) ==
			  -EISDIR);
	}
	CU_ASSERT(put_str(&f, "m/x/y/z", "1") == -ENOTDIR);
	fx_close(&f);
}

static void test_list_delimiter(void)
{
	static const char *const top[] = { "a-b", "a/", "b" };
	static const char *const in_a[] = { "a/", "a/e/", "a/w", "a/x",
					    "a/y/" };
	static const char *const in_a_partial[] = { "a/w", "a/x" };
	struct store_page pg;
	struct items it;
	struct fx f;

	fx_open(&f, "listdelim");
	CU_ASSERT(put_str(&f, "a/x", "xx") == 0);
	CU_ASSERT(put_str(&f, "a/y/z", "z") == 0);
	CU_ASSERT(put_str(&f, "a-b", "ab") == 0);
	CU_ASSERT(put_str(&f, "b", "b") == 0);
	CU_ASSERT(put_str(&f, "a/w", "w") == 0);
	CU_ASSERT(store_put(f.st, "a/e/", NULL, 0, NULL, NULL) == 0);

	CU_ASSERT(store_list(f.st, "", '/', NULL, 0, &pg) == 0);
	CU_ASSERT_FATAL(pg.nentries == 2 && pg.nprefixes == 1);
	CU_ASSERT_STRING_EQUAL(pg.entries[0].key, "a-b");
	CU_ASSERT(pg.entries[0].size == 2);
	CU_ASSERT_STRING_EQUAL(pg.entries[1].key, "b");
	CU_ASSERT_STRING_EQUAL(pg.prefixes[0], "a/");
	CU_ASSERT(pg.next_token == NULL);
	store_page_free(&pg);

	/* One item a page shows the single S3 order: "a-b" < "a/" < "b". */
	CU_ASSERT(list_all(&f, "", '/', 1, &it) == 0);
	CU_ASSERT(items_are(&it, top, 3));
	CU_ASSERT(it.pages == 3);
	items_free(&it);

	/* The directory's own marker, objects, and subdirectories (the
	 * empty one too) as prefixes. */
	CU_ASSERT(store_list(f.st, "a/", '/', NULL, 0, &pg) == 0);
	CU_ASSERT_FATAL(pg.nentries == 3 && pg.nprefixes == 2);
	CU_ASSERT_STRING_EQUAL(pg.entries[0].key, "a/");
	CU_ASSERT(pg.entries[0].size == 0);
	CU_ASSERT_STRING_EQUAL(pg.entries[1].key, "a/w");
	CU_ASSERT_STRING_EQUAL(pg.entries[2].key, "a/x");
	CU_ASSERT_STRING_EQUAL(pg.prefixes[0], "a/e/");
	CU_ASSERT_STRING_EQUAL(pg.prefixes[1], "a/y/");
	store_page_free(&pg);
	CU_ASSERT(list_all(&f, "a/", '/', 2, &it) == 0);
	CU_ASSERT(items_are(&it, in_a, 5));
	items_free(&it);

	/* A prefix that ends inside a name. */
	CU_ASSERT(list_all(&f, "a/w", '/', 0, &it) == 0);
	CU_ASSERT(it.n == 1 && strcmp(it.v[0], "a/w") == 0);
	items_free(&it);
	CU_ASSERT(list_all(&f, "a/", '/', 0, &it) == 0);
	items_free(&it);
	CU_ASSERT(store_put(f.st, "a/xylo", "1", 1, NULL, NULL) == 0);
	CU_ASSERT(list_all(&f, "a/x", '/', 0, &it) == 0);
	CU_ASSERT(it.n == 2 && !strcmp(it.v[0], "a/x") &&
		  !strcmp(it.v[1], "a/xylo"));
	items_free(&it);
	CU_ASSERT(store_delete(f.st, "a/xylo") == 0);
	CU_ASSERT(list_all(&f, "a/", '/', 0, &it) == 0);
	CU_ASSERT(items_are(&it, in_a, 5));
	items_free(&it);
	CU_ASSERT(list_all(&f, "a/w", 0, 0, &it) == 0);
	CU_ASSERT(items_are(&it, in_a_partial, 1));
	items_free(&it);

	CU_ASSERT(store_list(f.st, "nodir/", '/', NULL, 0, &pg) == 0);
	CU_ASSERT(pg.nentries == 0 && pg.nprefixes == 0);
	CU_ASSERT(store_list(f.st, "b/", '/', NULL, 0, &pg) == 0); /* a file */
	CU_ASSERT(pg.nentries == 0 && pg.nprefixes == 0);
	fx_close(&f);
}

static void test_list_paging(void)
{
	static const char *const seven[] = { "p0", "p1", "p2", "p3",
					     "p4", "p5", "p6" };
	static const char *const rolled[] = { "q/", "q/a/", "q/b", "q/c/",
					      "q/d" };
	char key[8];
	struct items it;
	struct fx f;

	fx_open(&f, "paging");
	for (int i = 6; i >= 0; i--) {
		snprintf(key, sizeof(key), "p%d", i);
		CU_ASSERT(put_str(&f, key, key) == 0);
	}
	CU_ASSERT(list_all(&f, "", '/', 2, &it) == 0);
	CU_ASSERT(items_are(&it, seven, 7));
	CU_ASSERT(it.pages == 4);
	items_free(&it);
	CU_ASSERT(list_all(&f, "p", 0, 2, &it) == 0);
	CU_ASSERT(items_are(&it, seven, 7));
	items_free(&it);

	/* A page that ends on a common prefix resumes after all its keys. */
	CU_ASSERT(put_str(&f, "q/a/1", "1") == 0);
	CU_ASSERT(put_str(&f, "q/a/2", "2") == 0);
	CU_ASSERT(put_str(&f, "q/b", "b") == 0);
	CU_ASSERT(put_str(&f, "q/c/1", "1") == 0);
	CU_ASSERT(put_str(&f, "q/d", "d") == 0);
	for (unsigned max = 1; max <= 3; max++) {
		CU_ASSERT(list_all(&f, "q/", '/', max, &it) == 0);
		CU_ASSERT(items_are(&it, rolled, 5));
		items_free(&it);
	}
	fx_close(&f);
}

static void test_list_recursive(void)
{
	static const char *const all[] = {
		"r/",    "r/a",    "r/b-x",   "r/b/",
		"r/b/c", "r/b/d/", "r/b/d/e", "r/m/",
	};
	static const char *const gen[] = { "r-",   "r/",  "r/a", "r/b",
					   "r/m/", "r0/", "r0/x" };
	struct items it;
	struct fx f;
	char *id;

	fx_open(&f, "recursive");
	CU_ASSERT(put_str(&f, "r/b/d/e", "e") == 0);
	CU_ASSERT(put_str(&f, "r/a", "a") == 0);
	CU_ASSERT(put_str(&f, "r/b-x", "x") == 0);
	CU_ASSERT(put_str(&f, "r/b/c", "c") == 0);
	CU_ASSERT(store_put(f.st, "r/m/", NULL, 0, NULL, NULL) == 0);
	for (unsigned max = 0; max <= 3; max++) {
		CU_ASSERT(list_all(&f, "r/", 0, max, &it) == 0);
		CU_ASSERT(items_are(&it, all, 8));
		items_free(&it);
	}
	/* Staging and upload dirs never show, even mid-upload. */
	CU_ASSERT(store_mpu_create(f.st, "r/big", NULL, &id) == 0);
	CU_ASSERT(list_all(&f, "", 0, 0, &it) == 0);
	CU_ASSERT(items_are(&it, all, 8));
	items_free(&it);
	CU_ASSERT(store_mpu_abort(f.st, "r/big", id) == 0);
	free(id);

	/* Any delimiter rolls up, like S3's. */
	CU_ASSERT(put_str(&f, "r-", "1") == 0);
	CU_ASSERT(put_str(&f, "r0/x", "1") == 0);
	CU_ASSERT(put_str(&f, "q", "1") == 0);
	CU_ASSERT(list_all(&f, "r", 'b', 0, &it) == 0);
	CU_ASSERT(items_are(&it, gen, 7));
	items_free(&it);
	fx_close(&f);
}

static void test_copy(void)
{
	struct store_info info, src;
	struct fx f;

	fx_open(&f, "copy");
	CU_ASSERT(store_put(f.st, "src", "payload", 7, &meta_a, &src) == 0);
	CU_ASSERT(store_copy(f.st, "src", "dst/keep", NULL, &info) == 0);
	CU_ASSERT(info.size == 7 && meta_eq(&info.meta, &meta_a));
	CU_ASSERT(strcmp(info.etag, src.etag) != 0);
	CU_ASSERT_STRING_EQUAL(get_str(&f, "dst/keep"), "payload");
	CU_ASSERT(store_head(f.st, "dst/keep", &info) == 0);
	CU_ASSERT(meta_eq(&info.meta, &meta_a));

	CU_ASSERT(store_copy(f.st, "src", "dst/new", &meta_b, NULL) == 0);
	CU_ASSERT(store_head(f.st, "dst/new", &info) == 0);
	CU_ASSERT(meta_eq(&info.meta, &meta_b));
	CU_ASSERT_STRING_EQUAL(get_str(&f, "dst/new"), "payload");
	/* The source is untouched; copying onto itself replaces metadata. */
	CU_ASSERT(store_head(f.st, "src", &info) == 0);
	CU_ASSERT(meta_eq(&info.meta, &meta_a));
	CU_ASSERT(strcmp(info.etag, src.etag) == 0);
	CU_ASSERT(store_copy(f.st, "src", "src", &meta_b, NULL) == 0);
	CU_ASSERT(store_head(f.st, "src", &info) == 0);
	CU_ASSERT(meta_eq(&info.meta, &meta_b));
	CU_ASSERT_STRING_EQUAL(get_str(&f, "src"), "payload");

	CU_ASSERT(store_copy(f.st, "absent", "x", NULL, NULL) == -ENOENT);
	/* Markers copy to markers (a directory rename). */
	CU_ASSERT(store_put(f.st, "dm/", NULL, 0, &meta_a, NULL) == 0);
	CU_ASSERT(store_copy(f.st, "dm/", "dn/", NULL, NULL) == 0);
	CU_ASSERT(store_head(f.st, "dn/", &info) == 0);
	CU_ASSERT(meta_eq(&info.meta, &meta_a));
	CU_ASSERT(store_copy(f.st, "dm/", "dfile", NULL, NULL) == -EINVAL);
	CU_ASSERT(store_copy(f.st, "src", "dx/", NULL, NULL) == -EINVAL);
	fx_close(&f);
}

static void test_multipart(void)
{
	char etags[4][STORE_ETAG_MAX], bad[STORE_ETAG_MAX], path[800];
	char want[4096 + 50 + 30 + 1];
	struct store_info info, head;
	struct fx f;
	char *id = NULL;
	int fd, n = 0;

	fx_open(&f, "mpu2");
	CU_ASSERT(put_str(&f, "src",
			  "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
			  "QRSTUVWXYZ0123456789") == 0);
	path_of(&f, "../part.bin", path, sizeof(path));
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CU_ASSERT_FATAL(fd >= 0);
	for (int i = 0; i < 4096 + 100; i++)
		CU_ASSERT_FATAL(write(fd, &"0123456789"[i % 10], 1) == 1);
	for (int i = 0; i < 4096; i++)
		want[n++] = "0123456789"[i % 10];
	for (int i = 4100; i < 4150; i++)
		want[n++] = "0123456789"[i % 10];
	memcpy(want + n, "uvwxyzABCDEFGHIJKLMNOPQRSTUVWX", 30);
	n += 30;
	want[n] = '\0';

	CU_ASSERT_FATAL(store_mpu_create(f.st, "out/big", &meta_a, &id) == 0);
	/* A re-sent part replaces the first one wholly (new etag). */
	CU_ASSERT(store_mpu_part(f.st, "out/big", id, 1, fd, 0, 10, etags[0]) ==
		  0);
	CU_ASSERT(store_mpu_part(f.st, "out/big", id, 1, fd, 0, 4096,
				 etags[3]) == 0);
	CU_ASSERT(strcmp(etags[0], etags[3]) != 0);
	CU_ASSERT(store_mpu_complete(f.st, "out/big", id, 1, etags, NULL) ==
		  -EINVAL);
	memcpy(etags[0], etags[3], STORE_ETAG_MAX);
	CU_ASSERT(store_mpu_part(f.st, "out/big", id, 2, fd, 4100, 50,
				 etags[1]) == 0);
	CU_ASSERT(store_mpu_part_copy(f.st, "out/big", id, 3, "src", 20, 30,
				      etags[2]) == 0);
	/* Wrong key, bad part numbers, a range past the source's end. */
	CU_ASSERT(store_mpu_part(f.st, "out/other", id, 1, fd, 0, 1, bad) ==
		  -ENOENT);
	CU_ASSERT(store_mpu_part(f.st, "out/big", id, 0, fd, 0, 1, bad) ==
		  -EINVAL);
	CU_ASSERT(store_mpu_part(f.st, "out/big", id, 10001, fd, 0, 1, bad) ==
		  -EINVAL);
	CU_ASSERT(store_mpu_part_copy(f.st, "out/big", id, 4, "src", 60, 10,
				      bad) == -EINVAL);
	CU_ASSERT(store_mpu_part_copy(f.st, "out/big", id, 4, "absent", 0, 1,
				      bad) == -ENOENT);
	close(fd);
	CU_ASSERT(store_head(f.st, "out/big", &head) == -ENOENT);
	/* Part 4 was never uploaded. */
	CU_ASSERT(store_mpu_complete(f.st, "out/big", id, 4, etags, NULL) ==
		  -EINVAL);
	CU_ASSERT(store_mpu_complete(f.st, "out/big", id, 3, etags, &info) ==
		  0);
	CU_ASSERT(info.size == (uint64_t)n);
	CU_ASSERT(meta_eq(&info.meta, &meta_a));
	CU_ASSERT(store_head(f.st, "out/big", &head) == 0);
	CU_ASSERT(head.size == (uint64_t)n);
	CU_ASSERT(strcmp(head.etag, info.etag) == 0);
	CU_ASSERT(meta_eq(&head.meta, &meta_a));
	CU_ASSERT_STRING_EQUAL(get_str(&f, "out/big"), want);
	/* The upload is gone. */
	path_of(&f, ".mapfs-mpu", path, sizeof(path));
	CU_ASSERT(count_dir(path) == 0);
	CU_ASSERT(store_mpu_abort(f.st, "out/big", id) == -ENOENT);
	free(id);
	fx_close(&f);
}

static void test_mpu_abort(void)
{
	struct store_info info;
	char path[800], etag[STORE_ETAG_MAX];
	struct fx f;
	char *id;
	int fd;

	fx_open(&f, "abort");
	path_of(&f, "../p.bin", path, sizeof(path));
	write_file(path, "part-bytes");
	fd = open(path, O_RDONLY);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(store_mpu_create(f.st, "k", NULL, &id) == 0);
	CU_ASSERT(store_mpu_part(f.st, "k", id, 1, fd, 0, 10, etag) == 0);
	CU_ASSERT(store_mpu_abort(f.st, "other", id) == -ENOENT);
	CU_ASSERT(store_mpu_abort(f.st, "k", id) == 0);
	CU_ASSERT(store_mpu_part(f.st, "k", id, 2, fd, 0, 10, etag) == -ENOENT);
	CU_ASSERT(store_mpu_abort(f.st, "k", id) == -ENOENT);
	CU_ASSERT(store_head(f.st, "k", &info) == -ENOENT);
	path_of(&f, ".mapfs-mpu", path, sizeof(path));
	CU_ASSERT(count_dir(path) == 0);
	/* An upload id is never a path. */
	CU_ASSERT(store_mpu_abort(f.st, "k", "../../../etc") == -EINVAL);
	CU_ASSERT(store_mpu_part(f.st, "k", "..", 1, fd, 0, 1, etag) ==
		  -EINVAL);
	CU_ASSERT(store_mpu_create(f.st, "dir/", NULL, &id) == -EINVAL);
	close(fd);
	free(id);
	fx_close(&f);
}

/* Uploads in progress are listed by key prefix, ids as create gave. */
static void test_mpu_list(void)
{
	struct store_upload *v;
	char *a, *b, *c;
	struct fx f;
	size_t n;

	fx_open(&f, "mpulist");
	CU_ASSERT(store_mpu_list(f.st, "", &v, &n) == 0 && n == 0 && !v);
	CU_ASSERT_FATAL(store_mpu_create(f.st, "d/x", NULL, &a) == 0);
	CU_ASSERT_FATAL(store_mpu_create(f.st, "d/x", NULL, &b) == 0);
	CU_ASSERT_FATAL(store_mpu_create(f.st, "e", NULL, &c) == 0);
	CU_ASSERT(store_mpu_list(f.st, "d/", &v, &n) == 0 && n == 2);
	for (size_t i = 0; i < n; i++)
		CU_ASSERT(!strcmp(v[i].key, "d/x") &&
			  (!strcmp(v[i].upload_id, a) ||
			   !strcmp(v[i].upload_id, b)));
	store_uploads_free(v, n);
	CU_ASSERT(store_mpu_abort(f.st, "d/x", a) == 0);
	CU_ASSERT(store_mpu_list(f.st, "", &v, &n) == 0 && n == 2);
	store_uploads_free(v, n);
	CU_ASSERT(store_mpu_list(f.st, "d/x", &v, &n) == 0 && n == 1 &&
		  !strcmp(v[0].upload_id, b));
	store_uploads_free(v, n);
	CU_ASSERT(store_mpu_abort(f.st, "d/x", b) == 0);
	CU_ASSERT(store_mpu_abort(f.st, "e", c) == 0);
	CU_ASSERT(store_mpu_list(f.st, "", &v, &n) == 0 && n == 0);
	free(a);
	free(b);
	free(c);
	fx_close(&f);
}

static void test_delete_many(void)
{
	static const char *const keys[] = { "dm/a", "dm/b", "dm/absent",
					    "dm/c" };
	static const char *const with_bad[] = { "dm/d", "../x", "dm/e" };
	struct store_info info;
	struct fx f;

	fx_open(&f, "delmany");
	CU_ASSERT(put_str(&f, "dm/a", "a") == 0);
	CU_ASSERT(put_str(&f, "dm/b", "b") == 0);
	CU_ASSERT(put_str(&f, "dm/c", "c") == 0);
	CU_ASSERT(put_str(&f, "keep", "k") == 0);
	CU_ASSERT(store_delete_many(f.st, keys, 4) == 0);
	CU_ASSERT(store_head(f.st, "dm/a", &info) == -ENOENT);
	CU_ASSERT(store_head(f.st, "dm/b", &info) == -ENOENT);
	CU_ASSERT(store_head(f.st, "dm/c", &info) == -ENOENT);
	CU_ASSERT(store_head(f.st, "keep", &info) == 0);
	/* dm/ was only their prefix: it went with them. */
	CU_ASSERT(store_head(f.st, "dm/", &info) == -ENOENT);
	/* Every key is tried; the first error is reported. */
	CU_ASSERT(put_str(&f, "dm/d", "d") == 0);
	CU_ASSERT(put_str(&f, "dm/e", "e") == 0);
	CU_ASSERT(store_delete_many(f.st, with_bad, 3) == -EINVAL);
	CU_ASSERT(store_head(f.st, "dm/d", &info) == -ENOENT);
	CU_ASSERT(store_head(f.st, "dm/e", &info) == -ENOENT);
	fx_close(&f);
}

static void test_hand_written_file(void)
{
	struct store_info info;
	struct items it;
	char path[800];
	struct fx f;

	fx_open(&f, "byhand");
	path_of(&f, "hand", path, sizeof(path));
	CU_ASSERT_FATAL(mkdir(path, 0755) == 0);
	path_of(&f, "hand/made.txt", path, sizeof(path));
	write_file(path, "by hand");
	CU_ASSERT(store_head(f.st, "hand/made.txt", &info) == 0);
	CU_ASSERT(info.size == 7);
	CU_ASSERT(!info.meta.has_mode && !info.meta.has_uid &&
		  !info.meta.has_gid && !info.meta.has_mtime &&
		  !info.meta.symlink);
	CU_ASSERT_STRING_EQUAL(get_str(&f, "hand/made.txt"), "by hand");
	/* Junk in our xattrs reads as absent, not as an error. */
	CU_ASSERT(setxattr(path, "user.mapfs.mode", "12x", 3, 0) == 0);
	CU_ASSERT(setxattr(path, "user.mapfs.uid", "-1", 2, 0) == 0);
	CU_ASSERT(setxattr(path, "user.mapfs.gid", "77", 2, 0) == 0);
	CU_ASSERT(store_head(f.st, "hand/made.txt", &info) == 0);
	CU_ASSERT(!info.meta.has_mode && !info.meta.has_uid);
	CU_ASSERT(info.meta.has_gid && info.meta.gid == 77);
	CU_ASSERT(list_all(&f, "hand/", '/', 0, &it) == 0);
	CU_ASSERT(it.n == 2 && !strcmp(it.v[0], "hand/") &&
		  !strcmp(it.v[1], "hand/made.txt"));
	items_free(&it);
	fx_close(&f);
}

static void test_symlinks_not_followed(void)
{
	char outside[700], secret[800], path[800], buf[16];
	struct store_info info;
	struct items it;
	struct stat sb;
	struct fx f;
	size_t got;

	fx_open(&f, "symlinks");
	snprintf(outside, sizeof(outside), "%s/outside", f.top);
	CU_ASSERT_FATAL(mkdir(outside, 0755) == 0);
	snprintf(secret, sizeof(secret), "%s/secret", outside);
	write_file(secret, "secret");
	path_of(&f, "ldir", path, sizeof(path));
	CU_ASSERT_FATAL(symlink(outside, path) == 0);
	path_of(&f, "lfile", path, sizeof(path));
	CU_ASSERT_FATAL(symlink(secret, path) == 0);
	CU_ASSERT(put_str(&f, "real", "r") == 0);

	CU_ASSERT(store_head(f.st, "lfile", &info) == -ENOENT);
	CU_ASSERT(store_get(f.st, "lfile", 0, 8, buf, &got) == -ENOENT);
	CU_ASSERT(store_head(f.st, "ldir/secret", &info) == -ENOENT);
	CU_ASSERT(store_get(f.st, "ldir/secret", 0, 8, buf, &got) == -ENOENT);
	CU_ASSERT(store_head(f.st, "ldir/", &info) == -ENOENT);
	CU_ASSERT(store_copy(f.st, "lfile", "copy", NULL, NULL) == -ENOENT);
	CU_ASSERT(put_str(&f, "ldir/new", "x") < 0);
	CU_ASSERT(store_put(f.st, "ldir/sub/", NULL, 0, NULL, NULL) < 0);
	snprintf(path, sizeof(path), "%s/new", outside);
	CU_ASSERT(!exists(path));
	snprintf(path, sizeof(path), "%s/sub", outside);
	CU_ASSERT(!exists(path));
	CU_ASSERT(store_delete(f.st, "ldir/secret") == 0);
	CU_ASSERT(store_delete(f.st, "lfile") == 0);
	CU_ASSERT(store_delete(f.st, "ldir/") == 0);
	CU_ASSERT(exists(secret));
	path_of(&f, "lfile", path, sizeof(path));
	CU_ASSERT(lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode));
	path_of(&f, "ldir", path, sizeof(path));
	CU_ASSERT(lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode));

	CU_ASSERT(list_all(&f, "", 0, 0, &it) == 0);
	CU_ASSERT(it.n == 1 && !strcmp(it.v[0], "real"));
	items_free(&it);
	CU_ASSERT(list_all(&f, "ldir/", 0, 0, &it) == 0);
	CU_ASSERT(it.n == 0);
	items_free(&it);

	/* A PUT over the link replaces the link, not its target. */
	CU_ASSERT(put_str(&f, "lfile", "mine") == 0);
	CU_ASSERT_STRING_EQUAL(get_str(&f, "lfile"), "mine");
	path_of(&f, "lfile", path, sizeof(path));
	CU_ASSERT(lstat(path, &sb) == 0 && S_ISREG(sb.st_mode));
	snprintf(path, sizeof(path), "%s", secret);
	CU_ASSERT(stat(path, &sb) == 0 && sb.st_size == 6);
	fx_close(&f);
}

#define THREADS 4
#define THREAD_KEYS 40

struct worker {
	struct fx *f;
	int id;
	int bad;
};

/*
 * Each thread writes its own prefix while listing the shared root: a
 * listing that shared a directory offset with another thread, or a
 * staging name that collided, would lose or mix up keys.
 */
static void *worker_run(void *arg)
{
	struct worker *w = arg;
	struct store_page pg;
	struct store_info info;
	char key[32], prefix[16];
	struct items it;

	snprintf(prefix, sizeof(prefix), "t%d/", w->id);
	for (int j = 0; j < THREAD_KEYS; j++) {
		snprintf(key, sizeof(key), "t%d/k%02d", w->id, j);
		if (store_put(w->f->st, key, key, strlen(key), NULL, NULL) ||
		    store_head(w->f->st, key, &info) ||
		    info.size != strlen(key))
			w->bad++;
		if (store_list(w->f->st, "", '/', NULL, 0, &pg) ||
		    pg.nprefixes < 1 || pg.nprefixes > THREADS)
			w->bad++;
		store_page_free(&pg);
	}
	if (list_all(w->f, prefix, 0, 7, &it) || it.n != THREAD_KEYS + 1)
		w->bad++;
	items_free(&it);
	return NULL;
}

static void test_threads(void)
{
	struct worker w[THREADS];
	pthread_t t[THREADS];
	struct items it;
	char path[800];
	struct fx f;

	fx_open(&f, "threads");
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ &f, i, 0 };
		CU_ASSERT_FATAL(
			pthread_create(&t[i], NULL, worker_run, &w[i]) == 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		CU_ASSERT(w[i].bad == 0);
	}
	CU_ASSERT(list_all(&f, "", '/', 0, &it) == 0);
	CU_ASSERT(it.n == THREADS);
	items_free(&it);
	path_of(&f, ".mapfs-tmp", path, sizeof(path));
	CU_ASSERT(count_dir(path) == 0); /* nothing left staged */
	fx_close(&f);
}

static int rm_one(const char *path, const struct stat *sb, int type,
		  struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	return remove(path);
}

/* If-Match / If-None-Match on writes, pinned reads (store_conds.c). */
static void test_conditions(void)
{
	struct fx f;
	const char *err;

	fx_open(&f, "conds");
	err = store_conds_check(f.st, "d/");
	if (err)
		fprintf(stderr, "conditions: %s\n", err);
	CU_ASSERT_PTR_NULL(err);
	fx_close(&f);
}

int main(void)
{
	static const struct {
		const char *name;
		CU_TestFunc fn;
	} tests[] = {
		{ "open and urls", test_open_urls },
		{ "put/get/head metadata", test_put_get_head_meta },
		{ "ranged get", test_get_range },
		{ "streamed get", test_get_stream },
		{ "default PUT size", test_put_max },
		{ "overwrite changes etag", test_overwrite_changes_etag },
		{ "invalid keys", test_invalid_keys },
		{ "directory markers", test_markers },
		{ "list with delimiter", test_list_delimiter },
		{ "list paging", test_list_paging },
		{ "list recursive", test_list_recursive },
		{ "copy", test_copy },
		{ "multipart", test_multipart },
		{ "multipart abort", test_mpu_abort },
		{ "multipart list", test_mpu_list },
		{ "delete many", test_delete_many },
		{ "file written by hand", test_hand_written_file },
		{ "symlinks not followed", test_symlinks_not_followed },
		{ "threads", test_threads },
		{ "conditional writes, pinned reads", test_conditions },
	};
	CU_pSuite suite;
	unsigned failed;

	if (!mkdtemp(base))
		return 1;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	suite = CU_add_suite("s3_file", NULL, NULL);
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
	if (!failed)
		nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	else
		fprintf(stderr, "test tree kept in %s\n", base);
	return failed ? 1 : 0;
}
