/*
 * Unit tests for fs/: the namespace over real db/, cache/ and the local
 * directory store.  Calls run with ctx.loop = -1, so cache I/O is
 * synchronous; completions may still come from the db writer thread.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/cache.h"
#include "db/db.h"
#include "fs/fs.h"

/* The room of the one READ/WRITE/COMMIT a thread has in flight. */
static _Thread_local struct fs_io io_room;
#include "s3/store.h"
#include "tests/lib/testlib.h"

static char base[] = "/tmp/mapfs-test-fs-XXXXXX";
static int fx_seq;

struct fx {
	char dir[256];
	struct db *db;
	struct cache *cache;
	struct store *st;
	struct fs *fs;
};

static struct fx F;
static const struct fs_ctx ROOT = { .loop = -1, .uid = 0, .gid = 0 };
static const struct fs_opts OPTS = { .dir_ttl_ms = 60000,
				     .upload_delay_ms = 3600000,
				     .default_uid = 7,
				     .default_gid = 8 };

static int fx_open_fs(const struct fs_opts *o)
{
	char p[300];

	snprintf(p, sizeof(p), "%s/db", F.dir);
	if (db_open(p, 256 << 20, 16, &F.db))
		return -1;
	/* The cache keeps its chunk state in the same db: it comes too. */
	snprintf(p, sizeof(p), "%s/cache", F.dir);
	if (cache_open(
		    &(struct cache_opts){ .dir = p, .db = F.db, .nloops = 1 },
		    F.st, &F.cache))
		return -1;
	if (fs_open(o, F.db, F.cache, F.st, &F.fs))
		return -1;
	return 0;
}

static void fx_close_fs(void)
{
	fs_close(F.fs, false);
	cache_close(F.cache);
	db_close(F.db);
	F.fs = NULL;
	F.cache = NULL;
	F.db = NULL;
}

/* A fresh gateway state (db, cache, store) per test. */
static void fx_open(void)
{
	char url[320];

	memset(&F, 0, sizeof(F));
	snprintf(F.dir, sizeof(F.dir), "%s/%d", base, ++fx_seq);
	CU_ASSERT_FATAL(mkdir(F.dir, 0700) == 0);
	snprintf(url, sizeof(url), "file://%s/store", F.dir);
	CU_ASSERT_FATAL(store_open(&(struct store_opts){ .url = url }, &F.st) ==
			0);
	CU_ASSERT_FATAL(fx_open_fs(&OPTS) == 0);
}

static void fx_close(void)
{
	fx_close_fs();
	store_close(F.st);
}

/* Completion waiting: done may run on another thread. */
struct wait {
	pthread_mutex_t m;
	pthread_cond_t c;
	int pending;
	int err;
};

static void w_init(struct wait *w, int n)
{
	pthread_mutex_init(&w->m, NULL);
	pthread_cond_init(&w->c, NULL);
	w->pending = n;
	w->err = 0;
}

static void w_done(void *p, int err)
{
	struct wait *w = p;

	pthread_mutex_lock(&w->m);
	if (err && !w->err)
		w->err = err;
	w->pending--;
	pthread_cond_broadcast(&w->c);
	pthread_mutex_unlock(&w->m);
}

static int w_wait(struct wait *w)
{
	pthread_mutex_lock(&w->m);
	while (w->pending > 0)
		pthread_cond_wait(&w->c, &w->m);
	pthread_mutex_unlock(&w->m);
	pthread_cond_destroy(&w->c);
	pthread_mutex_destroy(&w->m);
	return w->err;
}

static int do_create_as(const struct fs_ctx *ctx, uint64_t dir,
			const char *name, enum fs_create_how how,
			const uint8_t *verf, uint64_t *ino)
{
	static const uint8_t zero[8];
	struct fs_sattr sa = { 0 };
	struct fs_attr a;
	struct fs_wcc wcc;
	struct wait w;
	uint64_t tmp;

	w_init(&w, 1);
	fs_create(F.fs, ctx, dir, name, how, &sa, verf ? verf : zero,
		  ino ? ino : &tmp, &a, &wcc, w_done, &w);
	return w_wait(&w);
}

static int do_create(uint64_t dir, const char *name, uint64_t *ino)
{
	return do_create_as(&ROOT, dir, name, FS_CREATE_GUARDED, NULL, ino);
}

static int do_mkdir_as(const struct fs_ctx *ctx, uint64_t dir, const char *name,
		       uint32_t mode, uint64_t *ino)
{
	struct fs_sattr sa = { .mask = mode ? FS_SET_MODE : 0, .mode = mode };
	struct fs_attr a;
	struct wait w;
	uint64_t tmp;

	w_init(&w, 1);
	fs_mkdir(F.fs, ctx, dir, name, &sa, ino ? ino : &tmp, &a, NULL, w_done,
		 &w);
	return w_wait(&w);
}

static int do_mkdir(uint64_t dir, const char *name, uint64_t *ino)
{
	return do_mkdir_as(&ROOT, dir, name, 0, ino);
}

static int do_remove_as(const struct fs_ctx *ctx, uint64_t dir,
			const char *name, bool rmdir)
{
	struct fs_wcc wcc;
	struct wait w;

	w_init(&w, 1);
	if (rmdir)
		fs_rmdir(F.fs, ctx, dir, name, &wcc, w_done, &w);
	else
		fs_remove(F.fs, ctx, dir, name, &wcc, w_done, &w);
	return w_wait(&w);
}

static int do_remove(uint64_t dir, const char *name)
{
	return do_remove_as(&ROOT, dir, name, false);
}

static int do_rmdir(uint64_t dir, const char *name)
{
	return do_remove_as(&ROOT, dir, name, true);
}

static int do_rename_as(const struct fs_ctx *ctx, uint64_t fd, const char *fn,
			uint64_t td, const char *tn)
{
	struct fs_wcc a, b;
	struct wait w;

	w_init(&w, 1);
	fs_rename(F.fs, ctx, fd, fn, td, tn, &a, &b, w_done, &w);
	return w_wait(&w);
}

static int do_rename(uint64_t fd, const char *fn, uint64_t td, const char *tn)
{
	return do_rename_as(&ROOT, fd, fn, td, tn);
}

static int do_link_as(const struct fs_ctx *ctx, uint64_t ino, uint64_t dir,
		      const char *name)
{
	struct fs_attr a;
	struct fs_wcc wcc;
	struct wait w;

	w_init(&w, 1);
	fs_link(F.fs, ctx, ino, dir, name, &a, &wcc, w_done, &w);
	return w_wait(&w);
}

static int do_link(uint64_t ino, uint64_t dir, const char *name)
{
	return do_link_as(&ROOT, ino, dir, name);
}

static int do_write_as(const struct fs_ctx *ctx, uint64_t ino, uint64_t off,
		       const char *s, enum fs_stable stable)
{
	enum fs_stable committed = FS_UNSTABLE;
	struct fs_wcc wcc;
	struct wait w;
	int rc;

	w_init(&w, 1);
	fs_write(F.fs, &io_room, ctx, ino, off, s, strlen(s), stable,
		 &committed, &wcc, w_done, &w);
	rc = w_wait(&w);
	if (!rc && (committed < stable || !wcc.before_ok || !wcc.after_ok))
		return -1000;
	return rc;
}

static int do_write(uint64_t ino, uint64_t off, const char *s,
		    enum fs_stable stable)
{
	return do_write_as(&ROOT, ino, off, s, stable);
}

static int do_read_as(const struct fs_ctx *ctx, uint64_t ino, uint64_t off,
		      char *buf, size_t len, size_t *n, bool *eof)
{
	struct fs_attr a;
	struct wait w;

	w_init(&w, 1);
	fs_read(F.fs, &io_room, ctx, ino, off, len, buf, n, eof, &a, w_done,
		&w);
	return w_wait(&w);
}

static int do_read(uint64_t ino, uint64_t off, char *buf, size_t len, size_t *n,
		   bool *eof)
{
	return do_read_as(&ROOT, ino, off, buf, len, n, eof);
}

static int do_setattr_as(const struct fs_ctx *ctx, uint64_t ino,
			 const struct fs_sattr *sa,
			 const struct timespec *guard, struct fs_wcc *wcc)
{
	struct fs_wcc tmp;
	struct wait w;

	w_init(&w, 1);
	fs_setattr(F.fs, ctx, ino, sa, guard, wcc ? wcc : &tmp, w_done, &w);
	return w_wait(&w);
}

static int do_reval(uint64_t dir, bool force)
{
	struct wait w;

	w_init(&w, 1);
	fs_revalidate(F.fs, &ROOT, dir, force, w_done, &w);
	return w_wait(&w);
}

static int lookup(uint64_t dir, const char *name, uint64_t *ino)
{
	struct fs_attr a;
	uint64_t tmp;

	return fs_lookup(F.fs, &ROOT, dir, name, ino ? ino : &tmp, &a);
}

/* ---- readdir collection ---- */

#define MAXENT 1100
struct listing {
	int n, budget;
	uint64_t ino[MAXENT], cookie[MAXENT];
	char name[MAXENT][FS_NAME_MAX + 1];
	bool attrs_ok;
};

static int collect(void *p, uint64_t ino, const char *name, uint64_t cookie,
		   const struct fs_attr *attr)
{
	struct listing *l = p;

	if (l->budget-- <= 0 || l->n >= MAXENT)
		return 1;
	if (attr && attr->ino != ino)
		l->attrs_ok = false;
	l->ino[l->n] = ino;
	l->cookie[l->n] = cookie;
	snprintf(l->name[l->n], sizeof(l->name[0]), "%s", name);
	l->n++;
	return 0;
}

static int find(const struct listing *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->name[i], name))
			return i;
	return -1;
}

static int list_all(uint64_t dir, uint64_t cookie, struct listing *l,
		    uint64_t *verf, bool *eof)
{
	struct fs_attr da;

	memset(l, 0, sizeof(*l));
	l->budget = MAXENT;
	l->attrs_ok = true;
	return fs_readdir(F.fs, &ROOT, dir, cookie, true, collect, l, verf, eof,
			  &da);
}

/* ---- tests ---- */

static void test_create_lookup_getattr(void)
{
	uint64_t f, f2, d, ino;
	struct fs_attr a;
	struct listing l;
	uint64_t verf;
	bool eof;

	fx_open();
	CU_ASSERT(do_create(FS_ROOT_INO, "a.txt", &f) == 0);
	CU_ASSERT(f > FS_ROOT_INO);
	CU_ASSERT(lookup(FS_ROOT_INO, "a.txt", &ino) == 0 && ino == f);
	CU_ASSERT(fs_getattr(F.fs, f, &a) == 0);
	CU_ASSERT(a.type == FS_REG && a.mode == 0644 && a.size == 0 &&
		  a.nlink == 1 && a.gen != 0 && a.ino == f);
	CU_ASSERT(do_create(FS_ROOT_INO, "a.txt", NULL) == -EEXIST);
	CU_ASSERT(do_create_as(&ROOT, FS_ROOT_INO, "a.txt", FS_CREATE_UNCHECKED,
			       NULL, &f2) == 0);
	CU_ASSERT(f2 == f);
	CU_ASSERT(do_mkdir(FS_ROOT_INO, "d", &d) == 0);
	CU_ASSERT(do_create_as(&ROOT, FS_ROOT_INO, "d", FS_CREATE_UNCHECKED,
			       NULL, NULL) == -EISDIR);
	CU_ASSERT(lookup(FS_ROOT_INO, ".", &ino) == 0 && ino == FS_ROOT_INO);
	CU_ASSERT(lookup(FS_ROOT_INO, "..", &ino) == 0 && ino == FS_ROOT_INO);
	CU_ASSERT(lookup(d, "..", &ino) == 0 && ino == FS_ROOT_INO);
	CU_ASSERT(lookup(FS_ROOT_INO, "nope", NULL) == -ENOENT);
	CU_ASSERT(lookup(f, "x", NULL) == -ENOTDIR);
	CU_ASSERT(fs_getattr(F.fs, 999999, &a) == -ESTALE);
	CU_ASSERT(fs_getattr(F.fs, FS_ROOT_INO, &a) == 0 && a.nlink == 3);
	CU_ASSERT(list_all(FS_ROOT_INO, 0, &l, &verf, &eof) == 0);
	CU_ASSERT(eof && l.n == 4 && l.attrs_ok);
	CU_ASSERT(find(&l, ".") == 0 && l.cookie[0] == 1);
	CU_ASSERT(find(&l, "..") == 1 && l.cookie[1] == 2);
	CU_ASSERT(find(&l, "a.txt") >= 2 && find(&l, "d") >= 2);
	fx_close();
}

static void test_names(void)
{
	char n255[256], n256[257];

	fx_open();
	memset(n255, 'x', 255);
	n255[255] = '\0';
	memset(n256, 'y', 256);
	n256[256] = '\0';
	CU_ASSERT(do_create(FS_ROOT_INO, "", NULL) == -EINVAL);
	CU_ASSERT(do_create(FS_ROOT_INO, ".", NULL) == -EINVAL);
	CU_ASSERT(do_create(FS_ROOT_INO, "..", NULL) == -EINVAL);
	CU_ASSERT(do_create(FS_ROOT_INO, "a/b", NULL) == -EINVAL);
	CU_ASSERT(do_mkdir(FS_ROOT_INO, "..", NULL) == -EINVAL);
	CU_ASSERT(do_create(FS_ROOT_INO, n256, NULL) == -ENAMETOOLONG);
	CU_ASSERT(do_create(FS_ROOT_INO, n255, NULL) == 0);
	CU_ASSERT(lookup(FS_ROOT_INO, n255, NULL) == 0);
	CU_ASSERT(lookup(FS_ROOT_INO, n256, NULL) == -ENAMETOOLONG);
	CU_ASSERT(do_rename(FS_ROOT_INO, n255, FS_ROOT_INO, "..") == -EINVAL);
	CU_ASSERT(do_remove(FS_ROOT_INO, "") == -EINVAL);
	fx_close();
}

static void test_mkdir_rmdir_remove(void)
{
	uint64_t d, f;
	struct fs_attr a;

	fx_open();
	CU_ASSERT(do_mkdir(FS_ROOT_INO, "d", &d) == 0);
	CU_ASSERT(fs_getattr(F.fs, d, &a) == 0 && a.type == FS_DIR &&
		  a.nlink == 2 && a.mode == 0755);
	CU_ASSERT(do_mkdir(FS_ROOT_INO, "d", NULL) == -EEXIST);
	CU_ASSERT(do_create(d, "f", &f) == 0);
	CU_ASSERT(do_mkdir(FS_ROOT_INO, "d", NULL) == -EEXIST);
	CU_ASSERT(do_create(f, "x", NULL) == -ENOTDIR);
	CU_ASSERT(do_rmdir(FS_ROOT_INO, "d") == -ENOTEMPTY);
	CU_ASSERT(do_rmdir(d, "f") == -ENOTDIR);
	CU_ASSERT(do_remove(FS_ROOT_INO, "d") == -EISDIR);
	CU_ASSERT(do_rmdir(d, ".") == -EINVAL);
	CU_ASSERT(do_rmdir(d, "..") == -EINVAL);
	CU_ASSERT(do_remove(d, "nope") == -ENOENT);
	CU_ASSERT(do_remove(d, "f") == 0);
	CU_ASSERT(fs_getattr(F.fs, f, &a) == -ESTALE);
	CU_ASSERT(do_rmdir(FS_ROOT_INO, "d") == 0);
	CU_ASSERT(lookup(FS_ROOT_INO, "d", NULL) == -ENOENT);
	CU_ASSERT(fs_getattr(F.fs, FS_ROOT_INO, &a) == 0 && a.nlink == 2);
	fx_close();
}

static void test_rename(void)
{
	uint64_t a, b, sub, x, y, ino, e1, full;
	struct fs_attr at;

	fx_open();
	CU_ASSERT_FATAL(do_mkdir(FS_ROOT_INO, "a", &a) == 0);
	CU_ASSERT_FATAL(do_mkdir(FS_ROOT_INO, "b", &b) == 0);
	CU_ASSERT_FATAL(do_mkdir(a, "sub", &sub) == 0);
	CU_ASSERT_FATAL(do_create(a, "x", &x) == 0);
	CU_ASSERT_FATAL(do_create(b, "y", &y) == 0);
	/* Across directories, keeping the inode. */
	CU_ASSERT(do_rename(a, "x", b, "x2") == 0);
	CU_ASSERT(lookup(a, "x", NULL) == -ENOENT);
	CU_ASSERT(lookup(b, "x2", &ino) == 0 && ino == x);
	CU_ASSERT(do_rename(a, "missing", b, "z") == -ENOENT);
	/* Into its own subtree, or onto itself as its own child. */
	CU_ASSERT(do_rename(FS_ROOT_INO, "a", sub, "a") == -EINVAL);
	CU_ASSERT(do_rename(FS_ROOT_INO, "a", a, "a") == -EINVAL);
	/* Type rules. */
	CU_ASSERT(do_rename(b, "x2", a, "sub") == -EISDIR);
	CU_ASSERT(do_rename(a, "sub", b, "y") == -ENOTDIR);
	CU_ASSERT(do_mkdir(FS_ROOT_INO, "full", &full) == 0);
	CU_ASSERT(do_create(full, "f", NULL) == 0);
	CU_ASSERT(do_rename(a, "sub", FS_ROOT_INO, "full") == -ENOTEMPTY);
	CU_ASSERT(do_mkdir(FS_ROOT_INO, "empty", &e1) == 0);
	CU_ASSERT(do_rename(a, "sub", FS_ROOT_INO, "empty") == 0);
	CU_ASSERT(fs_getattr(F.fs, e1, &at) == -ESTALE);
	CU_ASSERT(lookup(FS_ROOT_INO, "empty", &ino) == 0 && ino == sub);
	CU_ASSERT(lookup(sub, "..", &ino) == 0 && ino == FS_ROOT_INO);
	CU_ASSERT(fs_getattr(F.fs, a, &at) == 0 && at.nlink == 2);
	/* Same entry: a no-op. */
	CU_ASSERT(do_rename(b, "y", b, "y") == 0);
	CU_ASSERT(lookup(b, "y", &ino) == 0 && ino == y);
	/* File over file replaces it. */
	CU_ASSERT(do_rename(b, "x2", b, "y") == 0);
	CU_ASSERT(lookup(b, "y", &ino) == 0 && ino == x);
	CU_ASSERT(lookup(b, "x2", NULL) == -ENOENT);
	CU_ASSERT(fs_getattr(F.fs, y, &at) == -ESTALE);
	fx_close();
}

static void test_exclusive(void)
{
	const uint8_t v1[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	const uint8_t v2[8] = { 8, 7, 6, 5, 4, 3, 2, 1 };
	uint64_t a, b;

	fx_open();
	CU_ASSERT(do_create_as(&ROOT, FS_ROOT_INO, "e", FS_CREATE_EXCLUSIVE, v1,
			       &a) == 0);
	CU_ASSERT(do_create_as(&ROOT, FS_ROOT_INO, "e", FS_CREATE_EXCLUSIVE, v1,
			       &b) == 0);
	CU_ASSERT(a == b);
	CU_ASSERT(do_create_as(&ROOT, FS_ROOT_INO, "e", FS_CREATE_EXCLUSIVE, v2,
			       &b) == -EEXIST);
	CU_ASSERT(do_create(FS_ROOT_INO, "plain", NULL) == 0);
	CU_ASSERT(do_create_as(&ROOT, FS_ROOT_INO, "plain", FS_CREATE_EXCLUSIVE,
			       v1, NULL) == -EEXIST);
	fx_close();
}

static void test_readdir_cookies(void)
{
	struct listing l, l2;
	uint64_t verf1, verf2, verf3, d;
	char name[16];
	bool eof;

	fx_open();
	CU_ASSERT_FATAL(do_mkdir(FS_ROOT_INO, "d", &d) == 0);
	for (int i = 1; i <= 5; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		CU_ASSERT(do_create(d, name, NULL) == 0);
	}
	CU_ASSERT(list_all(d, 0, &l, &verf1, &eof) == 0 && eof && l.n == 7);
	CU_ASSERT(list_all(d, 0, &l2, &verf2, &eof) == 0 && verf1 == verf2);
	int i1 = find(&l, "f1"), i3 = find(&l, "f3");

	CU_ASSERT_FATAL(i1 >= 0 && i3 >= 0);
	CU_ASSERT(do_remove(d, "f2") == 0);
	CU_ASSERT(do_create(d, "g", NULL) == 0);
	CU_ASSERT(list_all(d, l.cookie[i1], &l2, &verf3, &eof) == 0 && eof);
	CU_ASSERT(verf3 != verf1);
	/* From f1's cookie: f3, f4, f5 (same cookies as before), then g. */
	CU_ASSERT(l2.n == 4);
	CU_ASSERT(find(&l2, "f2") < 0 && find(&l2, "f1") < 0);
	CU_ASSERT(find(&l2, "f3") == 0 && l2.cookie[0] == l.cookie[i3]);
	CU_ASSERT(find(&l2, "g") == 3);
	/* A stopping emit is not eof, and resumes where it stopped. */
	memset(&l2, 0, sizeof(l2));
	l2.budget = 3;
	CU_ASSERT(fs_readdir(F.fs, &ROOT, d, 0, false, collect, &l2, &verf3,
			     &eof, NULL) == 0);
	CU_ASSERT(!eof && l2.n == 3);
	CU_ASSERT(list_all(FS_ROOT_INO + 999, 0, &l2, &verf3, &eof) == -ESTALE);
	fx_close();
}

static void test_readdir_pages(void)
{
	enum { N = 1000 };
	static struct listing page;
	static int seen[N];
	uint64_t d, cookie = 0, verf;
	struct wait w;
	char name[32];
	bool eof = false;
	int total = 0, calls = 0;

	fx_open();
	CU_ASSERT_FATAL(do_mkdir(FS_ROOT_INO, "big", &d) == 0);
	/* All submitted at once: the group commit takes them together. */
	static uint64_t inos[N];
	static struct fs_attr attrs[N];
	static struct fs_wcc wccs[N];
	struct fs_sattr sa = { 0 };
	static const uint8_t zero[8];

	w_init(&w, N);
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "file%04d", i);
		fs_create(F.fs, &ROOT, d, name, FS_CREATE_GUARDED, &sa, zero,
			  &inos[i], &attrs[i], &wccs[i], w_done, &w);
	}
	CU_ASSERT_FATAL(w_wait(&w) == 0);
	memset(seen, 0, sizeof(seen));
	while (!eof && calls < 1000) {
		memset(&page, 0, sizeof(page));
		page.budget = 7;
		page.attrs_ok = true;
		CU_ASSERT_FATAL(fs_readdir(F.fs, &ROOT, d, cookie, true,
					   collect, &page, &verf, &eof,
					   NULL) == 0);
		calls++;
		for (int i = 0; i < page.n; i++) {
			int k;

			total++;
			if (sscanf(page.name[i], "file%d", &k) == 1 && k >= 0 &&
			    k < N)
				seen[k]++;
			cookie = page.cookie[i];
		}
		CU_ASSERT(page.attrs_ok);
		CU_ASSERT(page.n > 0 || eof);
	}
	CU_ASSERT(eof);
	CU_ASSERT(total == N + 2);
	int once = 0;

	for (int i = 0; i < N; i++)
		once += seen[i] == 1;
	CU_ASSERT(once == N);
	CU_ASSERT(calls >= (N + 2) / 7);
	fx_close();
}

static void test_io_setattr(void)
{
	char buf[256];
	struct fs_attr a;
	struct fs_sattr sa;
	struct fs_wcc wcc;
	uint64_t f, d, l;
	size_t n, len;
	bool eof;

	fx_open();
	CU_ASSERT_FATAL(do_create(FS_ROOT_INO, "f", &f) == 0);
	CU_ASSERT(do_write(f, 0, "hello world", FS_UNSTABLE) == 0);
	CU_ASSERT(do_read(f, 0, buf, sizeof(buf), &n, &eof) == 0);
	CU_ASSERT(n == 11 && eof && !memcmp(buf, "hello world", 11));
	CU_ASSERT(do_write(f, 100, "tail", FS_FILE_SYNC) == 0);
	CU_ASSERT(fs_getattr(F.fs, f, &a) == 0 && a.size == 104);
	CU_ASSERT(do_read(f, 0, buf, 50, &n, &eof) == 0 && n == 50 && !eof);
	CU_ASSERT(do_read(f, 100, buf, 50, &n, &eof) == 0 && n == 4 && eof &&
		  !memcmp(buf, "tail", 4));
	/* Truncate, chmod, guard. */
	sa = (struct fs_sattr){ .mask = FS_SET_SIZE, .size = 5 };
	CU_ASSERT(do_setattr_as(&ROOT, f, &sa, NULL, &wcc) == 0);
	CU_ASSERT(wcc.before_ok && wcc.before_size == 104 && wcc.after_ok &&
		  wcc.after.size == 5);
	CU_ASSERT(do_read(f, 0, buf, sizeof(buf), &n, &eof) == 0 && n == 5 &&
		  eof && !memcmp(buf, "hello", 5));
	sa = (struct fs_sattr){ .mask = FS_SET_MODE, .mode = 0600 };
	CU_ASSERT(do_setattr_as(&ROOT, f, &sa, NULL, NULL) == 0);
	CU_ASSERT(fs_getattr(F.fs, f, &a) == 0 && a.mode == 0600);
	struct timespec bad = a.ctime;

	bad.tv_sec -= 10;
	sa.mode = 0640;
	CU_ASSERT(do_setattr_as(&ROOT, f, &sa, &bad, &wcc) == -ECANCELED);
	CU_ASSERT(wcc.after_ok && wcc.after.mode == 0600);
	CU_ASSERT(do_setattr_as(&ROOT, f, &sa, &a.ctime, NULL) == 0);
	CU_ASSERT(fs_getattr(F.fs, f, &a) == 0 && a.mode == 0640);
	sa = (struct fs_sattr){ .mask = FS_SET_MTIME,
				.mtime = { .tv_sec = 1000000, .tv_nsec = 5 } };
	CU_ASSERT(do_setattr_as(&ROOT, f, &sa, NULL, NULL) == 0);
	CU_ASSERT(fs_getattr(F.fs, f, &a) == 0 && a.mtime.tv_sec == 1000000);
	/* COMMIT, and the wrong kinds of object. */
	struct wait w;

	w_init(&w, 1);
	fs_commit(F.fs, &io_room, &ROOT, f, &wcc, w_done, &w);
	CU_ASSERT(w_wait(&w) == 0 && wcc.after_ok);
	CU_ASSERT(do_mkdir(FS_ROOT_INO, "d", &d) == 0);
	CU_ASSERT(do_read(d, 0, buf, 10, &n, &eof) == -EISDIR);
	CU_ASSERT(fs_readlink(F.fs, &ROOT, f, buf, sizeof(buf), &len, &a) ==
		  -EINVAL);
	sa = (struct fs_sattr){ .mask = FS_SET_SIZE, .size = 0 };
	CU_ASSERT(do_setattr_as(&ROOT, d, &sa, NULL, NULL) == -EISDIR);
	w_init(&w, 1);
	fs_symlink(F.fs, &ROOT, FS_ROOT_INO, "l", "some/target", NULL, &l, &a,
		   NULL, w_done, &w);
	CU_ASSERT(w_wait(&w) == 0 && a.type == FS_LNK && a.size == 11);
	CU_ASSERT(fs_readlink(F.fs, &ROOT, l, buf, sizeof(buf), &len, &a) == 0);
	CU_ASSERT(len == 11 && !strcmp(buf, "some/target"));
	w_init(&w, 1);
	fs_mknod(F.fs, &ROOT, FS_ROOT_INO, "n", FS_FIFO, NULL, 0, 0, &l, &a,
		 NULL, w_done, &w);
	CU_ASSERT(w_wait(&w) == 0 && a.type == FS_FIFO && a.size == 0);
	CU_ASSERT(do_read(l, 0, buf, 10, &n, &eof) == -EINVAL);
	w_init(&w, 1);
	fs_mknod(F.fs, &ROOT, FS_ROOT_INO, "c", FS_CHR, NULL, 4, 64, &l, &a,
		 NULL, w_done, &w);
	CU_ASSERT(w_wait(&w) == 0 && a.type == FS_CHR && a.rdev_major == 4 &&
		  a.rdev_minor == 64);
	/* Devices are root's: anyone else gets EPERM. */
	const struct fs_ctx user = { .loop = -1, .uid = 1000, .gid = 1000 };

	w_init(&w, 1);
	fs_mknod(F.fs, &user, FS_ROOT_INO, "b", FS_BLK, NULL, 8, 0, &l, &a,
		 NULL, w_done, &w);
	CU_ASSERT(w_wait(&w) == -EPERM);
	w_init(&w, 1);
	fs_mknod(F.fs, &ROOT, FS_ROOT_INO, "n", FS_SOCK, NULL, 0, 0, &l, &a,
		 NULL, w_done, &w);
	CU_ASSERT(w_wait(&w) == -EEXIST);
	w_init(&w, 1);
	fs_link(F.fs, &ROOT, f, FS_ROOT_INO, "hard", &a, NULL, w_done, &w);
	CU_ASSERT(w_wait(&w) == 0 && a.nlink == 2);
	/* UNCHECKED on an existing file applies the size (truncation). */
	static const uint8_t zero[8];
	uint64_t f2;

	sa = (struct fs_sattr){ .mask = FS_SET_SIZE, .size = 0 };
	w_init(&w, 1);
	fs_create(F.fs, &ROOT, FS_ROOT_INO, "f", FS_CREATE_UNCHECKED, &sa, zero,
		  &f2, &a, &wcc, w_done, &w);
	CU_ASSERT(w_wait(&w) == 0 && f2 == f && a.size == 0);
	CU_ASSERT(fs_getattr(F.fs, f, &a) == 0 && a.size == 0);
	fx_close();
}

static void test_persist(void)
{
	uint64_t d, f, ino, g;
	struct fs_attr a, b;
	struct fs_opts ro = OPTS;

	fx_open();
	CU_ASSERT_FATAL(do_mkdir(FS_ROOT_INO, "keep", &d) == 0);
	CU_ASSERT_FATAL(do_create(d, "file", &f) == 0);
	CU_ASSERT(fs_getattr(F.fs, f, &a) == 0);
	fx_close_fs();
	CU_ASSERT_FATAL(fx_open_fs(&OPTS) == 0);
	CU_ASSERT(lookup(FS_ROOT_INO, "keep", &ino) == 0 && ino == d);
	CU_ASSERT(lookup(d, "file", &ino) == 0 && ino == f);
	CU_ASSERT(fs_getattr(F.fs, f, &b) == 0 && b.gen == a.gen &&
		  b.ino == a.ino);
	CU_ASSERT(do_create(d, "new", &g) == 0 && g > f);
	fx_close_fs();
	ro.read_only = true;
	CU_ASSERT_FATAL(fx_open_fs(&ro) == 0);
	CU_ASSERT(do_create(d, "nope", NULL) == -EROFS);
	CU_ASSERT(do_remove(d, "file") == -EROFS);
	CU_ASSERT(lookup(d, "file", NULL) == 0);
	fx_close();
}

static int get_obj(const char *key, char *buf, size_t cap, size_t *got)
{
	return store_get(F.st, key, 0, cap, buf, got);
}

static void test_flush_store(void)
{
	struct store_info si;
	struct fs_sattr sa;
	struct fs_attr a;
	uint64_t d, f, l;
	char buf[64];
	size_t got;
	struct wait w;

	fx_open();
	CU_ASSERT_FATAL(do_mkdir(FS_ROOT_INO, "d", &d) == 0);
	CU_ASSERT_FATAL(do_create(d, "f.txt", &f) == 0);
	CU_ASSERT(do_write(f, 0, "data123", FS_UNSTABLE) == 0);
	sa = (struct fs_sattr){ .mask = FS_SET_MODE | FS_SET_UID | FS_SET_GID,
				.mode = 0640,
				.uid = 1234,
				.gid = 99 };
	CU_ASSERT(do_setattr_as(&ROOT, f, &sa, NULL, NULL) == 0);
	w_init(&w, 1);
	fs_symlink(F.fs, &ROOT, FS_ROOT_INO, "l", "d/f.txt", NULL, &l, &a, NULL,
		   w_done, &w);
	CU_ASSERT(w_wait(&w) == 0);
	CU_ASSERT(store_head(F.st, "d/f.txt", &si) == -ENOENT);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(store_head(F.st, "d/f.txt", &si) == 0);
	CU_ASSERT(si.size == 7 && si.meta.has_mode &&
		  (si.meta.mode & 07777) == 0640 && si.meta.uid == 1234 &&
		  si.meta.gid == 99 && !si.meta.symlink);
	CU_ASSERT(get_obj("d/f.txt", buf, sizeof(buf), &got) == 0 && got == 7 &&
		  !memcmp(buf, "data123", 7));
	CU_ASSERT(store_head(F.st, "d/", &si) == 0);
	CU_ASSERT(store_head(F.st, "l", &si) == 0 && si.meta.symlink);
	CU_ASSERT(get_obj("l", buf, sizeof(buf), &got) == 0 && got == 7 &&
		  !memcmp(buf, "d/f.txt", 7));
	CU_ASSERT(fs_getattr(F.fs, f, &a) == 0 && a.size == 7 &&
		  a.mode == 0640);
	/* A write to a clean file makes it dirty again: uploaded anew. */
	CU_ASSERT(do_write(f, 0, "DATA", FS_UNSTABLE) == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(get_obj("d/f.txt", buf, sizeof(buf), &got) == 0 && got == 7 &&
		  !memcmp(buf, "DATA123", 7));
	CU_ASSERT(do_write(f, 0, "data", FS_UNSTABLE) == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	/* Rename a clean file: the object moves. */
	CU_ASSERT(do_rename(d, "f.txt", d, "g.txt") == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(store_head(F.st, "d/f.txt", &si) == -ENOENT);
	CU_ASSERT(get_obj("d/g.txt", buf, sizeof(buf), &got) == 0 && got == 7 &&
		  !memcmp(buf, "data123", 7));
	/* Rename the directory: every key below moves. */
	CU_ASSERT(do_rename(FS_ROOT_INO, "d", FS_ROOT_INO, "e") == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(store_head(F.st, "d/g.txt", &si) == -ENOENT);
	CU_ASSERT(get_obj("e/g.txt", buf, sizeof(buf), &got) == 0 && got == 7 &&
		  !memcmp(buf, "data123", 7));
	CU_ASSERT(store_head(F.st, "e/", &si) == 0);
	/* A swap through a temporary name replays in order. */
	uint64_t x, y;

	CU_ASSERT(do_create(FS_ROOT_INO, "x", &x) == 0);
	CU_ASSERT(do_write(x, 0, "XXX", FS_UNSTABLE) == 0);
	CU_ASSERT(do_create(FS_ROOT_INO, "y", &y) == 0);
	CU_ASSERT(do_write(y, 0, "YY", FS_UNSTABLE) == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(do_rename(FS_ROOT_INO, "x", FS_ROOT_INO, "t") == 0);
	CU_ASSERT(do_rename(FS_ROOT_INO, "y", FS_ROOT_INO, "x") == 0);
	CU_ASSERT(do_rename(FS_ROOT_INO, "t", FS_ROOT_INO, "y") == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(get_obj("x", buf, sizeof(buf), &got) == 0 && got == 2 &&
		  !memcmp(buf, "YY", 2));
	CU_ASSERT(get_obj("y", buf, sizeof(buf), &got) == 0 && got == 3 &&
		  !memcmp(buf, "XXX", 3));
	CU_ASSERT(store_head(F.st, "t", &si) == -ENOENT);
	/* Remove, then a new file at the same key: delete first, then put. */
	CU_ASSERT(do_remove(FS_ROOT_INO, "x") == 0);
	CU_ASSERT(do_create(FS_ROOT_INO, "x", &x) == 0);
	CU_ASSERT(do_write(x, 0, "new", FS_UNSTABLE) == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(get_obj("x", buf, sizeof(buf), &got) == 0 && got == 3 &&
		  !memcmp(buf, "new", 3));
	CU_ASSERT(do_remove(FS_ROOT_INO, "x") == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(store_head(F.st, "x", &si) == -ENOENT);
	fx_close();
}

static void test_revalidate(void)
{
	struct store_meta m = {
		.has_mode = true, .mode = 0600, .has_uid = true, .uid = 42
	};
	struct store_info si;
	uint64_t ino, sub, mine;
	struct fs_attr a;
	char buf[64];
	size_t n;
	bool eof;

	fx_open();
	CU_ASSERT_FATAL(store_put(F.st, "ext.txt", "abc", 3, &m, &si) == 0);
	CU_ASSERT_FATAL(store_put(F.st, "sub/inner.txt", "in", 2, NULL, &si) ==
			0);
	/* The root is listed at its first access: the store is imported. */
	CU_ASSERT(do_reval(FS_ROOT_INO, false) == 0);
	CU_ASSERT(lookup(FS_ROOT_INO, "ext.txt", &ino) == 0);
	CU_ASSERT(fs_getattr(F.fs, ino, &a) == 0 && a.size == 3 &&
		  a.mode == 0600 && a.uid == 42 && a.gid == 8);
	CU_ASSERT(do_read(ino, 0, buf, sizeof(buf), &n, &eof) == 0 && n == 3 &&
		  eof && !memcmp(buf, "abc", 3));
	CU_ASSERT(lookup(FS_ROOT_INO, "sub", &sub) == 0);
	CU_ASSERT(fs_getattr(F.fs, sub, &a) == 0 && a.type == FS_DIR);
	CU_ASSERT(do_reval(sub, false) == 0);
	CU_ASSERT(lookup(sub, "inner.txt", NULL) == 0);
	/* Fresh: a second revalidation without force sees nothing new. */
	CU_ASSERT_FATAL(store_put(F.st, "late.txt", "z", 1, NULL, &si) == 0);
	CU_ASSERT(do_reval(FS_ROOT_INO, false) == 0);
	CU_ASSERT(lookup(FS_ROOT_INO, "late.txt", NULL) == -ENOENT);
	CU_ASSERT(do_reval(FS_ROOT_INO, true) == 0);
	CU_ASSERT(lookup(FS_ROOT_INO, "late.txt", NULL) == 0);
	/* Local work not in the store yet survives a listing. */
	CU_ASSERT(do_create(FS_ROOT_INO, "mine", &mine) == 0);
	/* Deleted and changed out of band. */
	CU_ASSERT(store_delete(F.st, "ext.txt") == 0);
	CU_ASSERT(store_put(F.st, "late.txt", "longer", 6, NULL, &si) == 0);
	CU_ASSERT(do_reval(FS_ROOT_INO, true) == 0);
	CU_ASSERT(lookup(FS_ROOT_INO, "ext.txt", NULL) == -ENOENT);
	CU_ASSERT(fs_getattr(F.fs, ino, &a) == -ESTALE);
	CU_ASSERT(lookup(FS_ROOT_INO, "mine", NULL) == 0);
	CU_ASSERT(lookup(FS_ROOT_INO, "late.txt", &ino) == 0);
	CU_ASSERT(fs_getattr(F.fs, ino, &a) == 0 && a.size == 6);
	CU_ASSERT(do_read(ino, 0, buf, sizeof(buf), &n, &eof) == 0 && n == 6 &&
		  !memcmp(buf, "longer", 6));
	/* Our own uploads are not taken for foreign objects. */
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(do_reval(FS_ROOT_INO, true) == 0);
	CU_ASSERT(lookup(FS_ROOT_INO, "mine", &ino) == 0 && ino == mine);
	CU_ASSERT(do_rename(FS_ROOT_INO, "mine", FS_ROOT_INO, "moved") == 0);
	CU_ASSERT(do_reval(FS_ROOT_INO, true) == 0);
	CU_ASSERT(lookup(FS_ROOT_INO, "mine", NULL) == -ENOENT);
	CU_ASSERT(lookup(FS_ROOT_INO, "moved", &ino) == 0 && ino == mine);
	CU_ASSERT(do_reval(FS_ROOT_INO + 99999, true) == -ESTALE);
	fx_close();
}

/*
 * A first listing (merged page by page) of a directory that already had
 * entries: one of ours, clean in the store, whose object another client
 * deleted, goes; a new object comes in; local work stays.
 */
static void test_first_listing_vanished(void)
{
	struct store_info si;
	uint64_t d, x, mine;

	fx_open();
	CU_ASSERT_FATAL(store_put(F.st, "d/seed", "s", 1, NULL, &si) == 0);
	CU_ASSERT(do_reval(FS_ROOT_INO, false) == 0);
	CU_ASSERT_FATAL(lookup(FS_ROOT_INO, "d", &d) == 0);
	/* d is not listed yet: these are the entries it had before. */
	CU_ASSERT(do_create(d, "x", &x) == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(do_create(d, "mine", &mine) == 0);
	CU_ASSERT(store_delete(F.st, "d/x") == 0);
	CU_ASSERT(store_put(F.st, "d/y", "y", 1, NULL, &si) == 0);
	CU_ASSERT(do_reval(d, false) == 0);
	CU_ASSERT(lookup(d, "x", NULL) == -ENOENT);
	CU_ASSERT(lookup(d, "y", NULL) == 0);
	CU_ASSERT(lookup(d, "seed", NULL) == 0);
	CU_ASSERT(lookup(d, "mine", NULL) == 0);
	fx_close();
}

/* The object at key holds exactly s. */
static bool obj_is(const char *key, const char *s)
{
	char buf[64];
	size_t got;

	return get_obj(key, buf, sizeof(buf), &got) == 0 && got == strlen(s) &&
	       !memcmp(buf, s, got);
}

static uint32_t nlink_of(uint64_t ino)
{
	struct fs_attr a;

	return fs_getattr(F.fs, ino, &a) ? 0 : a.nlink;
}

static bool reads(uint64_t ino, const char *s)
{
	char buf[64];
	size_t n;
	bool eof;

	return do_read(ino, 0, buf, sizeof(buf), &n, &eof) == 0 &&
	       n == strlen(s) && !memcmp(buf, s, n);
}

static void test_links(void)
{
	struct store_info si;
	uint64_t d, e, a, ino, n, other;

	fx_open();
	CU_ASSERT_FATAL(do_mkdir(FS_ROOT_INO, "d", &d) == 0);
	CU_ASSERT_FATAL(do_mkdir(FS_ROOT_INO, "e", &e) == 0);
	CU_ASSERT_FATAL(do_create(d, "a", &a) == 0);
	CU_ASSERT(do_write(a, 0, "hello", FS_UNSTABLE) == 0);
	/* A new file not in the store yet: its upload makes both names. */
	CU_ASSERT(do_link(a, e, "b") == 0);
	CU_ASSERT(lookup(e, "b", &ino) == 0 && ino == a);
	CU_ASSERT(nlink_of(a) == 2);
	CU_ASSERT(do_link(a, e, "b") == -EEXIST);
	CU_ASSERT(do_link(d, e, "dirlink") == -EPERM);
	CU_ASSERT(do_link(a, FS_ROOT_INO, ".") == -EINVAL);
	/* One inode: a write through one name is read through the other. */
	CU_ASSERT(do_write(ino, 0, "HELLO", FS_UNSTABLE) == 0);
	CU_ASSERT(reads(a, "HELLO"));
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(obj_is("d/a", "HELLO") && obj_is("e/b", "HELLO"));
	/* A changed file goes up to every name. */
	CU_ASSERT(do_write(a, 0, "J", FS_UNSTABLE) == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(obj_is("d/a", "JELLO") && obj_is("e/b", "JELLO"));
	/* The link survives a restart. */
	fx_close_fs();
	CU_ASSERT_FATAL(fx_open_fs(&OPTS) == 0);
	CU_ASSERT(lookup(e, "b", &ino) == 0 && ino == a && nlink_of(a) == 2);
	/* Rename of a second name keeps the link and moves its object. */
	CU_ASSERT(do_rename(e, "b", e, "c") == 0);
	CU_ASSERT(lookup(e, "c", &ino) == 0 && ino == a && nlink_of(a) == 2);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(store_head(F.st, "e/b", &si) == -ENOENT);
	CU_ASSERT(obj_is("e/c", "JELLO"));
	/* Removing the first name leaves the other, which now holds it. */
	CU_ASSERT(do_remove(d, "a") == 0);
	CU_ASSERT(lookup(d, "a", NULL) == -ENOENT);
	CU_ASSERT(nlink_of(a) == 1 && reads(a, "JELLO"));
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(store_head(F.st, "d/a", &si) == -ENOENT);
	CU_ASSERT(obj_is("e/c", "JELLO"));
	CU_ASSERT(do_write(a, 0, "K", FS_UNSTABLE) == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(obj_is("e/c", "KELLO"));
	/* A clean file in the store: the new name is a copy in the store. */
	CU_ASSERT(do_link(a, d, "x") == 0 && do_link(a, d, "y") == 0);
	CU_ASSERT(nlink_of(a) == 3);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(obj_is("d/x", "KELLO") && obj_is("d/y", "KELLO"));
	/* Our own copies are not taken for foreign objects. */
	CU_ASSERT(do_reval(d, true) == 0 && do_reval(e, true) == 0);
	CU_ASSERT(lookup(d, "x", &ino) == 0 && ino == a && nlink_of(a) == 3);
	/* Another writer replaces one name: it splits off, the others stay. */
	CU_ASSERT(store_put(F.st, "d/x", "theirs", 6, NULL, &si) == 0);
	CU_ASSERT(store_delete(F.st, "d/y") == 0);
	CU_ASSERT(do_reval(d, true) == 0);
	CU_ASSERT(lookup(d, "x", &other) == 0 && other != a);
	CU_ASSERT(reads(other, "theirs") && nlink_of(other) == 1);
	CU_ASSERT(lookup(d, "y", NULL) == -ENOENT);
	CU_ASSERT(nlink_of(a) == 1 && reads(a, "KELLO"));
	CU_ASSERT(do_write(a, 0, "L", FS_UNSTABLE) == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(obj_is("e/c", "LELLO") && obj_is("d/x", "theirs"));
	/* Another writer replaces the first name while the file has
	 * changes here: that name is theirs, the file goes on (with the
	 * change) under its other name. */
	{
		uint64_t p, q;

		CU_ASSERT_FATAL(do_create(FS_ROOT_INO, "p", &p) == 0);
		CU_ASSERT(do_write(p, 0, "mine", FS_UNSTABLE) == 0);
		CU_ASSERT(do_link(p, d, "q") == 0);
		CU_ASSERT(fs_flush(F.fs) == 0);
		CU_ASSERT(obj_is("p", "mine") && obj_is("d/q", "mine"));
		CU_ASSERT(do_write(p, 0, "MINE", FS_UNSTABLE) == 0);
		CU_ASSERT(store_put(F.st, "p", "theirs", 6, NULL, &si) == 0);
		CU_ASSERT(fs_flush(F.fs) == 0);
		CU_ASSERT(obj_is("p", "theirs") && obj_is("d/q", "MINE"));
		CU_ASSERT(do_reval(FS_ROOT_INO, true) == 0);
		CU_ASSERT(lookup(FS_ROOT_INO, "p", &q) == 0 && q != p &&
			  reads(q, "theirs"));
		CU_ASSERT(lookup(d, "q", &q) == 0 && q == p &&
			  nlink_of(p) == 1 && reads(p, "MINE"));
	}
	/* Rename over another name of the same file does nothing. */
	CU_ASSERT(do_link(a, e, "c2") == 0);
	CU_ASSERT(do_rename(e, "c", e, "c2") == 0);
	CU_ASSERT(lookup(e, "c", NULL) == 0 && nlink_of(a) == 2);
	/* Replacing one name by rename leaves the file its other name. */
	CU_ASSERT(do_create(FS_ROOT_INO, "n", &n) == 0);
	CU_ASSERT(do_rename(FS_ROOT_INO, "n", e, "c") == 0);
	CU_ASSERT(nlink_of(a) == 1 && reads(a, "LELLO"));
	CU_ASSERT(lookup(e, "c2", &ino) == 0 && ino == a);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(obj_is("e/c2", "LELLO") && obj_is("e/c", ""));
	/* Who may link (fs.protected_hardlinks): the owner, root, or one
	 * who may read and write a file that is not setuid. */
	{
		struct fs_ctx u = { .loop = -1, .uid = 1000, .gid = 1000 };
		struct fs_sattr sa = { .mask = FS_SET_MODE, .mode = 0666 };
		uint64_t pub, own;

		CU_ASSERT_FATAL(do_mkdir_as(&ROOT, FS_ROOT_INO, "pub", 0777,
					    &pub) == 0);
		CU_ASSERT(do_link_as(&u, a, pub, "mine") == -EPERM);
		CU_ASSERT(do_create_as(&u, pub, "own", FS_CREATE_GUARDED, NULL,
				       &own) == 0);
		CU_ASSERT(do_link_as(&u, own, pub, "own2") == 0);
		CU_ASSERT(do_setattr_as(&ROOT, a, &sa, NULL, NULL) == 0);
		CU_ASSERT(do_link_as(&u, a, pub, "mine") == 0);
		CU_ASSERT(do_remove(pub, "mine") == 0);
		sa.mode = 04777;
		CU_ASSERT(do_setattr_as(&ROOT, a, &sa, NULL, NULL) == 0);
		CU_ASSERT(do_link_as(&u, a, pub, "mine") == -EPERM);
		CU_ASSERT(do_link_as(&u, own, FS_ROOT_INO, "x") == -EACCES);
	}
	/* The last name goes: so does the file. */
	CU_ASSERT(do_remove(e, "c2") == 0);
	CU_ASSERT(fs_getattr(F.fs, a, &(struct fs_attr){ 0 }) == -ESTALE);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(store_head(F.st, "e/c2", &si) == -ENOENT);
	fx_close();
}

/* The link id an object carries ("" for none). */
static void link_of(const char *key, char out[STORE_LINK_MAX])
{
	struct store_info si;

	out[0] = '\0';
	if (store_head(F.st, key, &si) == 0)
		memcpy(out, si.meta.link, STORE_LINK_MAX);
}

/* A namespace rebuilt from the store (a new state dir) finds the names of
 * a file to be one file again, by the link id in their metadata. */
static void test_links_rebuild(void)
{
	char la[STORE_LINK_MAX], lb[STORE_LINK_MAX], lc[STORE_LINK_MAX];
	char cmd[600];
	uint64_t d, a, e, ino, ino2;

	fx_open();
	CU_ASSERT_FATAL(do_mkdir(FS_ROOT_INO, "d", &d) == 0);
	CU_ASSERT_FATAL(do_create(FS_ROOT_INO, "a", &a) == 0);
	CU_ASSERT(do_write(a, 0, "shared", FS_UNSTABLE) == 0);
	CU_ASSERT(do_link(a, d, "b") == 0 && do_link(a, FS_ROOT_INO, "c") == 0);
	/* A clean file that gets a second name: both objects learn it. */
	CU_ASSERT_FATAL(do_create(FS_ROOT_INO, "e", &e) == 0);
	CU_ASSERT(do_write(e, 0, "single", FS_UNSTABLE) == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	link_of("e", la);
	CU_ASSERT(la[0] == '\0');
	CU_ASSERT(do_link(e, d, "f") == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	link_of("e", la);
	link_of("d/f", lb);
	CU_ASSERT(la[0] && !strcmp(la, lb));
	CU_ASSERT(obj_is("d/f", "single"));
	link_of("a", la);
	link_of("d/b", lb);
	link_of("c", lc);
	CU_ASSERT(la[0] && !strcmp(la, lb) && !strcmp(la, lc));
	fx_close_fs();
	snprintf(cmd, sizeof(cmd), "%s/db", F.dir);
	CU_ASSERT_FATAL(test_rmtree(cmd) == 0);
	snprintf(cmd, sizeof(cmd), "%s/cache", F.dir);
	CU_ASSERT_FATAL(test_rmtree(cmd) == 0);
	CU_ASSERT_FATAL(fx_open_fs(&OPTS) == 0);
	CU_ASSERT(do_reval(FS_ROOT_INO, true) == 0);
	CU_ASSERT(lookup(FS_ROOT_INO, "a", &ino) == 0);
	CU_ASSERT(lookup(FS_ROOT_INO, "c", &ino2) == 0 && ino2 == ino);
	CU_ASSERT(lookup(FS_ROOT_INO, "d", &d) == 0 && do_reval(d, true) == 0);
	CU_ASSERT(lookup(d, "b", &ino2) == 0 && ino2 == ino);
	CU_ASSERT(nlink_of(ino) == 3 && reads(ino, "shared"));
	CU_ASSERT(lookup(FS_ROOT_INO, "e", &e) == 0 &&
		  lookup(d, "f", &ino2) == 0 && ino2 == e && nlink_of(e) == 2);
	/* And it is one file again: a write goes to every name. */
	CU_ASSERT(do_write(ino, 0, "SH", FS_UNSTABLE) == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(obj_is("a", "SHared") && obj_is("d/b", "SHared") &&
		  obj_is("c", "SHared"));
	fx_close();
}

static void test_perms(void)
{
	struct fs_ctx u = {
		.loop = -1, .uid = 1000, .gid = 1000, .ngids = 1, .gids = { 50 }
	};
	struct fs_ctx o = { .loop = -1, .uid = 1001, .gid = 1001 };
	struct fs_sattr sa;
	struct fs_attr a;
	uint64_t pub, f, ino;
	uint32_t granted;
	char buf[16];
	size_t n;
	bool eof;

	fx_open();
	CU_ASSERT(do_create_as(&u, FS_ROOT_INO, "no", FS_CREATE_GUARDED, NULL,
			       NULL) == -EACCES);
	CU_ASSERT(do_mkdir_as(&u, FS_ROOT_INO, "no", 0, NULL) == -EACCES);
	CU_ASSERT_FATAL(do_mkdir_as(&ROOT, FS_ROOT_INO, "pub", 0777, &pub) ==
			0);
	CU_ASSERT(do_create_as(&u, pub, "u.txt", FS_CREATE_GUARDED, NULL, &f) ==
		  0);
	CU_ASSERT(fs_getattr(F.fs, f, &a) == 0 && a.uid == 1000 &&
		  a.gid == 1000);
	sa = (struct fs_sattr){ .mask = FS_SET_MODE, .mode = 0644 };
	CU_ASSERT(do_setattr_as(&u, f, &sa, NULL, NULL) == 0);
	CU_ASSERT(do_setattr_as(&o, f, &sa, NULL, NULL) == -EPERM);
	sa = (struct fs_sattr){ .mask = FS_SET_UID, .uid = 0 };
	CU_ASSERT(do_setattr_as(&u, f, &sa, NULL, NULL) == -EPERM);
	sa = (struct fs_sattr){ .mask = FS_SET_GID, .gid = 50 };
	CU_ASSERT(do_setattr_as(&u, f, &sa, NULL, NULL) == 0);
	sa.gid = 77;
	CU_ASSERT(do_setattr_as(&u, f, &sa, NULL, NULL) == -EPERM);
	sa = (struct fs_sattr){ .mask = FS_SET_MTIME, .mtime = { 5, 0 } };
	CU_ASSERT(do_setattr_as(&o, f, &sa, NULL, NULL) == -EPERM);
	sa = (struct fs_sattr){ .mask = FS_SET_SIZE, .size = 0 };
	CU_ASSERT(do_setattr_as(&o, f, &sa, NULL, NULL) == -EACCES);
	/* Other users: read yes, write no. */
	struct wait w;
	enum fs_stable c;

	w_init(&w, 1);
	fs_write(F.fs, &io_room, &o, f, 0, "x", 1, FS_UNSTABLE, &c, NULL,
		 w_done, &w);
	CU_ASSERT(w_wait(&w) == -EACCES);
	CU_ASSERT(do_read_as(&o, f, 0, buf, sizeof(buf), &n, &eof) == 0);
	CU_ASSERT(fs_access(F.fs, &o, f, 0x3f, &granted, &a) == 0);
	CU_ASSERT(granted == FS_ACCESS_READ);
	CU_ASSERT(fs_access(F.fs, &u, f, 0x3f, &granted, &a) == 0);
	CU_ASSERT(granted ==
		  (FS_ACCESS_READ | FS_ACCESS_MODIFY | FS_ACCESS_EXTEND));
	CU_ASSERT(fs_access(F.fs, &ROOT, f, 0x3f, &granted, &a) == 0);
	CU_ASSERT(granted ==
		  (FS_ACCESS_READ | FS_ACCESS_MODIFY | FS_ACCESS_EXTEND));
	CU_ASSERT(fs_access(F.fs, &o, pub, 0x3f, &granted, &a) == 0);
	CU_ASSERT(granted ==
		  (FS_ACCESS_READ | FS_ACCESS_LOOKUP | FS_ACCESS_MODIFY |
		   FS_ACCESS_EXTEND | FS_ACCESS_DELETE));
	/* Sticky directory: others may not remove what is not theirs. */
	sa = (struct fs_sattr){ .mask = FS_SET_MODE, .mode = 01777 };
	CU_ASSERT(do_setattr_as(&ROOT, pub, &sa, NULL, NULL) == 0);
	CU_ASSERT(do_remove_as(&o, pub, "u.txt", false) == -EPERM);
	/* Search permission for LOOKUP. */
	CU_ASSERT(do_mkdir_as(&ROOT, FS_ROOT_INO, "closed", 0700, &ino) == 0);
	CU_ASSERT(do_create(ino, "secret", NULL) == 0);
	CU_ASSERT(fs_lookup(F.fs, &u, ino, "secret", &ino, &a) == -EACCES);
	CU_ASSERT(do_remove_as(&u, pub, "u.txt", false) == 0);
	fx_close();
}

static uint32_t mode_of(uint64_t ino)
{
	struct fs_attr a;

	return fs_getattr(F.fs, ino, &a) ? 0xffffffffu : a.mode & 07777;
}

/* A root-owned file of mode m in dir, made by root. */
static uint64_t root_file(uint64_t dir, const char *name, uint32_t m)
{
	struct fs_sattr sa = { .mask = FS_SET_MODE, .mode = m };
	uint64_t f = 0;

	CU_ASSERT_FATAL(do_create(dir, name, &f) == 0);
	CU_ASSERT_FATAL(do_setattr_as(&ROOT, f, &sa, NULL, NULL) == 0);
	return f;
}

/*
 * Who may change what, as Linux decides it (issue 33; pjdfstest through
 * the Linux client found each): a write or a truncate by anyone but root
 * takes set-id away (the object's metadata too), a chown by anyone; a
 * non-owner may not even chown to what is there; a directory that moves
 * to another parent must be writable by its mover; the sticky rule on
 * both names of a RENAME.
 */
static void test_who_may_change(void)
{
	const struct fs_ctx u = { .loop = -1, .uid = 1000, .gid = 1000 };
	const struct fs_ctx o = { .loop = -1, .uid = 1001, .gid = 1001 };
	struct fs_sattr sa;
	struct store_info si;
	uint64_t f, d, t, sub;

	fx_open();
	/* Set-id goes with a write by a user, not by root. */
	f = root_file(FS_ROOT_INO, "suid", 04777);
	CU_ASSERT(do_write(f, 0, "root", FS_UNSTABLE) == 0);
	CU_ASSERT(mode_of(f) == 04777);
	CU_ASSERT(do_write_as(&u, f, 0, "user", FS_UNSTABLE) == 0);
	CU_ASSERT(mode_of(f) == 0777);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(store_head(F.st, "suid", &si) == 0 && si.meta.has_mode &&
		  (si.meta.mode & 07777) == 0777);
	f = root_file(FS_ROOT_INO, "sgid", 02777);
	CU_ASSERT(do_write_as(&u, f, 0, "user", FS_UNSTABLE) == 0);
	CU_ASSERT(mode_of(f) == 0777);
	/* Without group execute S_ISGID is mandatory locking: it stays. */
	f = root_file(FS_ROOT_INO, "sgid-nox", 02766);
	CU_ASSERT(do_write_as(&u, f, 0, "user", FS_UNSTABLE) == 0);
	CU_ASSERT(mode_of(f) == 02766);
	/* A file already dirty loses it too (the fast path of WRITE). */
	f = root_file(FS_ROOT_INO, "dirty", 06777);
	CU_ASSERT(do_write(f, 0, "root", FS_UNSTABLE) == 0);
	CU_ASSERT(do_write_as(&u, f, 4, "user", FS_UNSTABLE) == 0);
	CU_ASSERT(mode_of(f) == 0777);
	/* Truncate by a user; by root it stays. */
	f = root_file(FS_ROOT_INO, "trunc", 06777);
	sa = (struct fs_sattr){ .mask = FS_SET_SIZE, .size = 0 };
	CU_ASSERT(do_setattr_as(&ROOT, f, &sa, NULL, NULL) == 0);
	CU_ASSERT(mode_of(f) == 06777);
	CU_ASSERT(do_setattr_as(&u, f, &sa, NULL, NULL) == 0);
	CU_ASSERT(mode_of(f) == 0777);
	/* chown by root of a file drops it; of a directory it stays. */
	f = root_file(FS_ROOT_INO, "chown", 06755);
	sa = (struct fs_sattr){ .mask = FS_SET_UID | FS_SET_GID,
				.uid = 1000,
				.gid = 1000 };
	CU_ASSERT(do_setattr_as(&ROOT, f, &sa, NULL, NULL) == 0);
	CU_ASSERT(mode_of(f) == 0755);
	CU_ASSERT_FATAL(do_mkdir_as(&ROOT, FS_ROOT_INO, "sgdir", 02775, &d) ==
			0);
	CU_ASSERT(do_setattr_as(&ROOT, d, &sa, NULL, NULL) == 0);
	CU_ASSERT(mode_of(d) == 02775);
	/* The owner may chgrp to the group it has, member or not; a
	 * non-owner may not even chown to what is there (EPERM). */
	sa = (struct fs_sattr){ .mask = FS_SET_UID, .uid = 1000 };
	CU_ASSERT(do_setattr_as(&o, f, &sa, NULL, NULL) == -EPERM);
	CU_ASSERT(do_setattr_as(&u, f, &sa, NULL, NULL) == 0);
	sa = (struct fs_sattr){ .mask = FS_SET_GID, .gid = 1000 };
	CU_ASSERT(do_setattr_as(&o, f, &sa, NULL, NULL) == -EPERM);
	CU_ASSERT(do_setattr_as(&u, f, &sa, NULL, NULL) == 0);

	/* A sticky drop box: others' names can be neither moved away nor
	 * replaced; the owner of the file or of the box may. */
	CU_ASSERT_FATAL(do_mkdir_as(&ROOT, FS_ROOT_INO, "box", 01777, &d) == 0);
	CU_ASSERT_FATAL(do_mkdir_as(&ROOT, FS_ROOT_INO, "pub", 0777, &t) == 0);
	CU_ASSERT(do_create_as(&o, d, "theirs", FS_CREATE_GUARDED, NULL,
			       NULL) == 0);
	CU_ASSERT(do_create_as(&u, d, "mine", FS_CREATE_GUARDED, NULL, NULL) ==
		  0);
	CU_ASSERT(do_rename_as(&u, d, "theirs", t, "took") == -EPERM);
	CU_ASSERT(do_rename_as(&u, d, "theirs", d, "renamed") == -EPERM);
	CU_ASSERT(do_rename_as(&u, d, "mine", d, "theirs") == -EPERM);
	CU_ASSERT(lookup(d, "theirs", &f) == 0 && lookup(d, "mine", &f) == 0);
	CU_ASSERT(do_rename_as(&o, d, "theirs", t, "moved") == 0);
	CU_ASSERT(do_rename_as(&ROOT, d, "mine", d, "root-may") == 0);
	/* A directory that changes parent needs write permission on it
	 * ("..") even in the caller's own sticky box; in place it needs
	 * none. */
	CU_ASSERT_FATAL(do_mkdir_as(&ROOT, FS_ROOT_INO, "ubox", 01777, &d) ==
			0);
	sa = (struct fs_sattr){ .mask = FS_SET_UID, .uid = 1000 };
	CU_ASSERT(do_setattr_as(&ROOT, d, &sa, NULL, NULL) == 0);
	CU_ASSERT_FATAL(do_mkdir_as(&ROOT, d, "rootdir", 0755, &sub) == 0);
	CU_ASSERT(do_rename_as(&u, d, "rootdir", t, "rootdir") == -EACCES);
	CU_ASSERT(do_rename_as(&u, d, "rootdir", d, "inplace") == 0);
	CU_ASSERT(lookup(d, "inplace", &f) == 0 && f == sub);
	fx_close();
}

/*
 * Our own upload landed but its commit was lost (a crash), and the file
 * was written again: the object at the name carries this file's writer
 * id with another version.  It is replaced by the newer bytes, not taken
 * for another writer's (before: ours went aside as a conflict copy, the
 * name kept the older bytes; test_e2e_cache's kill -9 loop found it).
 * A version with a writer id not ours is still another writer's.
 */
static void test_own_earlier(void)
{
	struct store_info si;
	struct store_meta m;
	uint64_t f, other;
	char *dash;

	fx_open();
	CU_ASSERT_FATAL(do_create(FS_ROOT_INO, "w.txt", &f) == 0);
	CU_ASSERT(do_write(f, 0, "first", FS_UNSTABLE) == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT_FATAL(store_head(F.st, "w.txt", &si) == 0);
	m = si.meta;
	dash = strrchr(m.wid, '-');
	CU_ASSERT_FATAL(dash != NULL);
	/* The lost upload: our writer id, another version. */
	snprintf(dash + 1, sizeof(m.wid) - (size_t)(dash + 1 - m.wid), "%s",
		 "0123456789abcdef");
	CU_ASSERT(do_write(f, 0, "THIRD", FS_UNSTABLE) == 0);
	CU_ASSERT_FATAL(store_put(F.st, "w.txt", "second", 6, &m, &si) == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(obj_is("w.txt", "THIRD"));
	CU_ASSERT(do_reval(FS_ROOT_INO, true) == 0);
	CU_ASSERT(lookup(FS_ROOT_INO, "w.txt", &other) == 0 && other == f);
	CU_ASSERT(reads(f, "THIRD"));
	/* Another namespace's writer id (the same node and inode): theirs. */
	memcpy(m.wid, "ffffffff", 8);
	CU_ASSERT(do_write(f, 0, "FOURTH", FS_UNSTABLE) == 0);
	CU_ASSERT_FATAL(store_put(F.st, "w.txt", "fifth!", 6, &m, &si) == 0);
	CU_ASSERT(fs_flush(F.fs) == 0);
	CU_ASSERT(obj_is("w.txt", "fifth!"));
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
	s = CU_add_suite("fs_ns", NULL, NULL);
	CU_add_test(s, "create/lookup/getattr/readdir",
		    test_create_lookup_getattr);
	CU_add_test(s, "names", test_names);
	CU_add_test(s, "mkdir/rmdir/remove", test_mkdir_rmdir_remove);
	CU_add_test(s, "rename", test_rename);
	CU_add_test(s, "exclusive create", test_exclusive);
	CU_add_test(s, "readdir cookies", test_readdir_cookies);
	CU_add_test(s, "readdir pages", test_readdir_pages);
	CU_add_test(s, "io and setattr", test_io_setattr);
	CU_add_test(s, "persist", test_persist);
	CU_add_test(s, "flush to store", test_flush_store);
	CU_add_test(s, "revalidate", test_revalidate);
	CU_add_test(s, "a first listing: what vanished meanwhile",
		    test_first_listing_vanished);
	CU_add_test(s, "permissions", test_perms);
	CU_add_test(s, "who may change what", test_who_may_change);
	CU_add_test(s, "hard links", test_links);
	CU_add_test(s, "an earlier upload of ours whose commit was lost",
		    test_own_earlier);
	CU_add_test(s, "hard links found again in the store",
		    test_links_rebuild);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	if (!failed && test_rmtree(base) != 0)
		return 1;
	return failed ? 1 : 0;
}
