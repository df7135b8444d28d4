/*
 * tests/e2e/test_e2e_fsck.c - `mapfs-gw fsck` on a real gateway: a tree
 * of every kind (files, directories, an empty one, a symlink, a hard
 * link, a rename, a removal) flushed is clean (exit 0); an object or a
 * marker deleted behind the gateway's back is found (exit 1), and
 * --repair writes it again from the cache, the same bytes; an object put
 * into a listed directory behind its back is said (left: fsck never
 * deletes); a gateway that is not running is exit 2.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static struct e2e_gw gw;
static struct nfs_context *C;
static char out[1 << 16];

#define A_SIZE 70000

/* `mapfs-gw fsck ARGS` of gw: its exit status, its output in out. */
static int fsck(const char *args)
{
	char line[E2E_PATH_MAX * 2 + 64];
	size_t n;
	FILE *p;
	int st;

	snprintf(line, sizeof(line), "'%s' fsck --state '%s' %s 2>&1",
		 getenv("MAPFS_GW"), gw.state, args);
	p = popen(line, "r");
	E2E_REQUIRE(p != NULL, "popen");
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void flush(void)
{
	char buf[4096];

	E2E_REQUIRE(e2e_ctl(&gw, "flush", buf, sizeof(buf)) == 0, "flush: %s",
		    buf);
}

static void put_file(const char *path, size_t size, unsigned seed)
{
	struct nfsfh *fh;
	char *buf = malloc(size);

	E2E_REQUIRE(buf != NULL, "malloc");
	for (size_t i = 0; i < size; i++)
		buf[i] = (char)(seed * 31 + i * 7);
	E2E_REQUIRE(nfs_creat(C, path, 0644, &fh) == 0, "creat %s: %s", path,
		    nfs_get_error(C));
	E2E_REQUIRE(nfs_write(C, fh, size, buf) == (int)size, "write %s", path);
	nfs_close(C, fh);
	free(buf);
}

/* The store's object at rel (a namespace path; "d/" a marker) into a
 * malloc'd buffer (*len); NULL if there is none. */
static char *store_get(const char *rel, size_t *len)
{
	char path[E2E_PATH_MAX * 2];
	struct stat sb;

	if (e2e_backend_is_s3()) {
		struct e2e_s3_resp r;
		char key[E2E_PATH_MAX];
		char *b = NULL;

		e2e_s3_key(&gw, rel, key, sizeof(key));
		E2E_REQUIRE(e2e_s3_request("GET", key, NULL, NULL, 0, NULL,
					   &r) == 0,
			    "GET %s", key);
		if (r.code == 200) {
			b = malloc(r.len + 1);
			memcpy(b, r.body, r.len);
			*len = r.len;
		}
		e2e_s3_resp_free(&r);
		return b;
	}
	snprintf(path, sizeof(path), "%s/%s", gw.store, rel);
	if (stat(path, &sb))
		return NULL;
	if (S_ISDIR(sb.st_mode)) {
		*len = 0;
		return strdup("");
	}
	FILE *f = fopen(path, "r");
	char *b = malloc((size_t)sb.st_size + 1);

	*len = fread(b, 1, (size_t)sb.st_size, f);
	fclose(f);
	return b;
}

/* Delete the store's object at rel behind the gateway's back. */
static void store_delete(const char *rel)
{
	char path[E2E_PATH_MAX * 2];

	if (e2e_backend_is_s3()) {
		struct e2e_s3_resp r;
		char key[E2E_PATH_MAX];

		e2e_s3_key(&gw, rel, key, sizeof(key));
		E2E_REQUIRE(e2e_s3_request("DELETE", key, NULL, NULL, 0, NULL,
					   &r) == 0 &&
				    r.code == 204,
			    "DELETE %s", key);
		e2e_s3_resp_free(&r);
		return;
	}
	snprintf(path, sizeof(path), "%s/%s", gw.store, rel);
	if (path[strlen(path) - 1] == '/') {
		path[strlen(path) - 1] = '\0';
		E2E_REQUIRE(rmdir(path) == 0, "rmdir %s: %s", path,
			    strerror(errno));
	} else {
		E2E_REQUIRE(unlink(path) == 0, "unlink %s: %s", path,
			    strerror(errno));
	}
}

static int suite_init(void)
{
	/* Listings trusted an hour: the gateway does not list the store
	 * again by itself while the test changes it behind its back. */
	static const struct e2e_gw_opts o = { .upload_delay = "1",
					      .dir_ttl = "3600" };
	if (e2e_gw_start_opts(&gw, &o))
		return -1;
	C = e2e_nfs_mount(&gw);
	return C ? 0 : -1;
}

static void make_tree(void)
{
	struct nfsfh *fh;

	put_file("/a", A_SIZE, 1);
	E2E_REQUIRE(!nfs_mkdir(C, "/d") && !nfs_mkdir(C, "/d/e") &&
			    !nfs_mkdir(C, "/d/f"),
		    "mkdir: %s", nfs_get_error(C));
	put_file("/d/b", 3000, 2);
	put_file("/d/f/c", 10, 3);
	put_file("/r0", 100, 4);
	put_file("/gone", 100, 5);
	E2E_REQUIRE(
		!nfs_symlink(C, "a", "/l") && !nfs_link(C, "/d/b", "/d/hard") &&
			!nfs_rename(C, "/r0", "/r") && !nfs_unlink(C, "/gone"),
		"symlink, link, rename, unlink: %s", nfs_get_error(C));
	/* A file made and left empty, too. */
	E2E_REQUIRE(!nfs_creat(C, "/empty", 0644, &fh), "creat: %s",
		    nfs_get_error(C));
	nfs_close(C, fh);
}

static int suite_clean(void)
{
	int rc;

	if (C)
		nfs_destroy_context(C);
	rc = e2e_gw_stop(&gw);
	e2e_gw_cleanup(&gw);
	return rc == 0 ? 0 : -1;
}

static void test_clean(void)
{
	make_tree();
	flush();
	E2E_CHECK(fsck("") == 0, "fsck of a flushed tree: not clean:\n%s", out);
	E2E_CHECK(strstr(out, "fsck: clean"), "no 'clean' line:\n%s", out);
	E2E_CHECK(strstr(out, "10 records, 10 names, 10 objects"),
		  "records miscounted:\n%s", out);
	/* Also while changes are under way: in flux, not found. */
	put_file("/d/new", 5000, 6);
	E2E_CHECK(fsck("") == 0, "fsck with an upload under way:\n%s", out);
	/* (A cluster's COMMIT is an upload: nothing left to say there.) */
	E2E_CHECK(strstr(out, e2e_meta_is_pg() ? "0 files to upload"
					       : "1 files to upload"),
		  "the upload not said:\n%s", out);
	flush();
}

static void test_missing_object(void)
{
	size_t len = 0;
	char *before = store_get("a", &len), *after;

	E2E_REQUIRE(before && len == A_SIZE, "a not in the store");
	store_delete("a");
	E2E_CHECK(fsck("") == 1, "a missing object not found:\n%s", out);
	E2E_CHECK(strstr(out, "missing object a: "), "not named:\n%s", out);
	E2E_CHECK(strstr(out, "1 found, 0 repaired"), "summary:\n%s", out);
	E2E_CHECK(!store_get("a", &len), "fsck without --repair changed it");

	E2E_CHECK(fsck("--repair") == 1, "repair's status:\n%s", out);
	E2E_CHECK(strstr(out, "uploaded again from the cache"),
		  "not repaired:\n%s", out);
	flush();
	after = store_get("a", &len);
	E2E_CHECK(after && len == A_SIZE && !memcmp(before, after, A_SIZE),
		  "the object is not back as it was (%zu bytes)", len);
	E2E_CHECK(fsck("") == 0, "not clean after the repair:\n%s", out);
	free(before);
	free(after);
}

static void test_missing_marker_and_link(void)
{
	size_t len;
	char *b;

	store_delete("d/e/");
	store_delete("d/hard");
	E2E_CHECK(fsck("") == 1, "not found:\n%s", out);
	E2E_CHECK(strstr(out, "missing object d/e/: the marker"),
		  "the marker not named:\n%s", out);
	E2E_CHECK(strstr(out, "missing object d/hard: the object of a further"),
		  "the link's object not named:\n%s", out);
	E2E_CHECK(fsck("--repair") == 1 && strstr(out, "2 repaired"),
		  "repair:\n%s", out);
	flush();
	b = store_get("d/e/", &len);
	E2E_CHECK(b != NULL, "the marker is not back");
	free(b);
	b = store_get("d/hard", &len);
	E2E_CHECK(b && len == 3000, "the link's object is not back");
	free(b);
	E2E_CHECK(fsck("") == 0, "not clean after the repair:\n%s", out);
}

static void test_unnamed_object(void)
{
	char path[E2E_PATH_MAX * 2];

	if (e2e_backend_is_s3()) {
		/* A PUT now is newer than every listing: said, not found. */
		const char *keys[1];
		char key[E2E_PATH_MAX];

		e2e_s3_key(&gw, "d/ghost", key, sizeof(key));
		keys[0] = key;
		E2E_REQUIRE(e2e_s3_put_many(keys, 1, "boo") == 1, "PUT");
		E2E_CHECK(fsck("") == 0, "a new object is no finding:\n%s",
			  out);
		E2E_CHECK(strstr(out, "1 written since"), "not said:\n%s", out);
		store_delete("d/ghost");
		return;
	}
	/* The file store's object with a time before d's last listing: a
	 * name the gateway lost (a delete that never ran, say). */
	struct timeval tv[2];
	FILE *f;

	snprintf(path, sizeof(path), "%s/d/ghost", gw.store);
	f = fopen(path, "w");
	E2E_REQUIRE(f != NULL, "create %s", path);
	fputs("boo", f);
	fclose(f);
	gettimeofday(&tv[0], NULL);
	tv[0].tv_sec -= 3600 * 24;
	tv[1] = tv[0];
	E2E_REQUIRE(utimes(path, tv) == 0, "utimes");
	E2E_CHECK(fsck("--repair") == 1, "an unnamed object not found:\n%s",
		  out);
	E2E_CHECK(strstr(out, "unnamed object d/ghost: 3 bytes"),
		  "not named:\n%s", out);
	E2E_CHECK(strstr(out, "fsck never deletes"), "not left:\n%s", out);
	E2E_CHECK(access(path, F_OK) == 0, "fsck deleted it");
	unlink(path);
}

static void test_not_running(void)
{
	char line[E2E_PATH_MAX + 64];
	int st;

	snprintf(line, sizeof(line),
		 "'%s' fsck --state /nonexistent/mapfs >/dev/null 2>&1",
		 getenv("MAPFS_GW"));
	st = system(line);
	E2E_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2,
		  "fsck without a gateway: status %d, want 2", st);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite("fsck", suite_init, suite_clean);
	CU_add_test(s, "a flushed tree is clean", test_clean);
	CU_add_test(s, "a missing object is found and uploaded again",
		    test_missing_object);
	CU_add_test(s, "a missing marker and link object are written again",
		    test_missing_marker_and_link);
	CU_add_test(s, "an unnamed object is said and left",
		    test_unnamed_object);
	CU_add_test(s, "no gateway: exit 2", test_not_running);
	return e2e_run_cunit();
}
