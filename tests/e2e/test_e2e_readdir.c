/*
 * tests/e2e/test_e2e_readdir.c - READDIR and READDIRPLUS over a directory
 * of 10,000 files with small counts: every name exactly once, cookies
 * strictly increasing, eof at the end, each reply's XDR size within count /
 * maxcount (computed from the decoded reply: RFC 1813 counts the whole
 * encoded READDIR3resok / READDIRPLUS3resok), TOOSMALL for a count no entry
 * fits in, and a cookie verifier that changes when the directory changes.
 */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#define NFILES 10000
#define PREFIX "f"

static struct e2e_gw gw;
static struct e2e_rpc *R;
static nfs_fh3 ROOT, BIG;

static size_t pad4(size_t n)
{
	return (n + 3) & ~(size_t)3;
}

static size_t post_op_attr_size(const post_op_attr *p)
{
	return 4 + (p->attributes_follow ? 84 : 0);
}

static size_t post_op_fh_size(const post_op_fh3 *p)
{
	return 4 + (p->handle_follows
			    ? 4 + pad4(p->post_op_fh3_u.handle.data.data_len)
			    : 0);
}

/* Encoded size of READDIR3resok (without the status word). */
static size_t readdir_resok_size(const READDIR3resok *ok, int *entries)
{
	size_t n = post_op_attr_size(&ok->dir_attributes) + 8;

	*entries = 0;
	for (const entry3 *e = ok->reply.entries; e; e = e->nextentry) {
		n += 4 + 8 + 4 + pad4(strlen(e->name)) + 8;
		(*entries)++;
	}
	return n + 4 + 4;
}

static size_t readdirplus_resok_size(const READDIRPLUS3resok *ok, int *entries)
{
	size_t n = post_op_attr_size(&ok->dir_attributes) + 8;

	*entries = 0;
	for (const entryplus3 *e = ok->reply.entries; e; e = e->nextentry) {
		n += 4 + 8 + 4 + pad4(strlen(e->name)) + 8 +
		     post_op_attr_size(&e->name_attributes) +
		     post_op_fh_size(&e->name_handle);
		(*entries)++;
	}
	return n + 4 + 4;
}

static int is_dot(const char *n)
{
	return strcmp(n, ".") == 0 || strcmp(n, "..") == 0;
}

/* Index of a PREFIX%05d name, or -1. */
static int name_index(const char *n)
{
	char *end;
	long v;

	if (strncmp(n, PREFIX, strlen(PREFIX)) != 0)
		return -1;
	v = strtol(n + strlen(PREFIX), &end, 10);
	if (*end || v < 0 || v >= NFILES || strlen(n) != strlen(PREFIX) + 5)
		return -1;
	return (int)v;
}

struct walk {
	int seen[NFILES];
	int dups, unknown, rounds, max_entries, over, underfilled;
	int nonmono, empty_noeof;
	int extra; /* names outside PREFIX%05d that are not . or .. */
	size_t max_size;
};

static void note_name(struct walk *w, const char *name)
{
	int i = name_index(name);

	if (i < 0) {
		if (!is_dot(name) && w->extra++ < 5)
			fprintf(stderr, "  unexpected name '%s'\n", name);
		return;
	}
	if (w->seen[i]++ == 1 && w->dups++ < 5)
		fprintf(stderr, "  '%s' listed twice\n", name);
}

static void check_walk(struct walk *w, const char *what, int want_full)
{
	int missing = 0;

	for (int i = 0; i < NFILES; i++)
		if (!w->seen[i] && missing++ < 5)
			fprintf(stderr, "  %s: '%s%05d' never listed\n", what,
				PREFIX, i);
	E2E_CHECK(missing == 0, "%s: %d of %d names never listed", what,
		  missing, NFILES);
	E2E_CHECK(w->dups == 0, "%s: %d names listed more than once", what,
		  w->dups);
	E2E_CHECK(w->extra == 0, "%s: %d unexpected names", what, w->extra);
	E2E_CHECK(w->nonmono == 0,
		  "%s: cookies not strictly increasing %d times", what,
		  w->nonmono);
	E2E_CHECK(w->over == 0, "%s: %d replies larger than count", what,
		  w->over);
	E2E_CHECK(!want_full || w->underfilled == 0,
		  "%s: %d replies (not at eof) used less than half of count",
		  what, w->underfilled);
	E2E_CHECK(w->empty_noeof == 0,
		  "%s: %d replies with no entries and no eof", what,
		  w->empty_noeof);
}

/* Walk BIG with READDIR count; fills w.  Returns the final verifier. */
static void walk_readdir(uint32_t count, int want_full, struct walk *w)
{
	cookie3 cookie = 0;
	char verf[NFS3_COOKIEVERFSIZE] = { 0 };

	memset(w, 0, sizeof(*w));
	for (;;) {
		READDIR3args a = { .dir = BIG,
				   .cookie = cookie,
				   .count = count };
		READDIR3res res;
		READDIR3resok *ok;
		size_t sz;
		int n;

		memcpy(a.cookieverf, verf, sizeof(verf));
		E2E_RPC(R, e2e_nfs3_readdir(R, &a, &res));
		E2E_REQUIRE(res.status == NFS3_OK,
			    "READDIR count %u cookie %llu (round %d): got %s",
			    count, (unsigned long long)cookie, w->rounds,
			    e2e_nfsstat(res.status));
		ok = &res.READDIR3res_u.resok;
		memcpy(verf, ok->cookieverf, sizeof(verf));
		sz = readdir_resok_size(ok, &n);
		if (sz > count && w->over++ < 3)
			fprintf(stderr,
				"  READDIR count %u: reply resok is %zu "
				"bytes (%d entries)\n",
				count, sz, n);
		if (want_full && !ok->reply.eof && sz < count / 2 &&
		    w->underfilled++ < 3)
			fprintf(stderr,
				"  READDIR count %u: reply only %zu "
				"bytes (%d entries), not at eof\n",
				count, sz, n);
		if (n == 0 && !ok->reply.eof)
			w->empty_noeof++;
		if (n > w->max_entries)
			w->max_entries = n;
		if (sz > w->max_size)
			w->max_size = sz;
		for (entry3 *e = ok->reply.entries; e; e = e->nextentry) {
			if (e->cookie <= cookie && w->nonmono++ < 3)
				fprintf(stderr, "  cookie %llu after %llu\n",
					(unsigned long long)e->cookie,
					(unsigned long long)cookie);
			cookie = e->cookie;
			note_name(w, e->name);
		}
		w->rounds++;
		if (ok->reply.eof)
			break;
		E2E_REQUIRE(n > 0,
			    "READDIR: empty reply without eof at cookie "
			    "%llu: the walk cannot go on",
			    (unsigned long long)cookie);
		E2E_REQUIRE(w->rounds < 20000,
			    "READDIR: no eof after %d "
			    "replies",
			    w->rounds);
	}
}

static void walk_readdirplus(uint32_t dircount, uint32_t maxcount,
			     struct walk *w, int *no_attr, int *no_fh,
			     int *bad_fh)
{
	cookie3 cookie = 0;
	char verf[NFS3_COOKIEVERFSIZE] = { 0 };
	int checked = 0;

	memset(w, 0, sizeof(*w));
	*no_attr = *no_fh = *bad_fh = 0;
	for (;;) {
		READDIRPLUS3args a = { .dir = BIG,
				       .cookie = cookie,
				       .dircount = dircount,
				       .maxcount = maxcount };
		READDIRPLUS3res res;
		READDIRPLUS3resok *ok;
		size_t sz;
		int n;

		memcpy(a.cookieverf, verf, sizeof(verf));
		E2E_RPC(R, e2e_nfs3_readdirplus(R, &a, &res));
		E2E_REQUIRE(res.status == NFS3_OK,
			    "READDIRPLUS maxcount %u cookie %llu (round %d): "
			    "got %s",
			    maxcount, (unsigned long long)cookie, w->rounds,
			    e2e_nfsstat(res.status));
		ok = &res.READDIRPLUS3res_u.resok;
		memcpy(verf, ok->cookieverf, sizeof(verf));
		sz = readdirplus_resok_size(ok, &n);
		if (sz > maxcount && w->over++ < 3)
			fprintf(stderr,
				"  READDIRPLUS maxcount %u: reply resok "
				"is %zu bytes (%d entries)\n",
				maxcount, sz, n);
		if (!ok->reply.eof && sz < maxcount / 2 && w->underfilled++ < 3)
			fprintf(stderr,
				"  READDIRPLUS maxcount %u: reply only "
				"%zu bytes (%d entries), not at eof\n",
				maxcount, sz, n);
		if (n == 0 && !ok->reply.eof)
			w->empty_noeof++;
		if (n > w->max_entries)
			w->max_entries = n;
		for (entryplus3 *e = ok->reply.entries; e; e = e->nextentry) {
			if (e->cookie <= cookie && w->nonmono++ < 3)
				fprintf(stderr, "  cookie %llu after %llu\n",
					(unsigned long long)e->cookie,
					(unsigned long long)cookie);
			cookie = e->cookie;
			note_name(w, e->name);
			if (is_dot(e->name))
				continue;
			if (!e->name_attributes.attributes_follow)
				(*no_attr)++;
			if (!e->name_handle.handle_follows) {
				(*no_fh)++;
			} else if (checked < 40 &&
				   (name_index(e->name) % 250) == 0) {
				GETATTR3res ga;

				checked++;
				E2E_RPC(R, e2e_nfs3_getattr(
						   R,
						   &e->name_handle.post_op_fh3_u
							    .handle,
						   &ga));
				if (ga.status != NFS3_OK ||
				    ga.GETATTR3res_u.resok.obj_attributes
						    .fileid != e->fileid)
					(*bad_fh)++;
			}
		}
		w->rounds++;
		if (ok->reply.eof)
			break;
		E2E_REQUIRE(n > 0,
			    "READDIRPLUS: empty reply without eof at "
			    "cookie %llu",
			    (unsigned long long)cookie);
		E2E_REQUIRE(w->rounds < 20000,
			    "READDIRPLUS: no eof after %d "
			    "replies",
			    w->rounds);
	}
}

static int suite_init(void)
{
	MKDIR3args a;
	MKDIR3res res;
	LOOKUP3res lr;
	uint64_t t0;

	if (e2e_gw_start(&gw, 2) != 0)
		return -1;
	R = e2e_rpc_open(gw.nfs_port, NFS_PROGRAM, NFS_V3);
	if (!R || e2e_root_fh(R, &gw, &ROOT) != 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.where.dir = ROOT;
	a.where.name = "big";
	a.attributes = e2e_sattr_mode(0755);
	if (e2e_nfs3_mkdir(R, &a, &res) != 0 || res.status != NFS3_OK) {
		fprintf(stderr, "e2e: MKDIR big: %s\n", e2e_rpc_error(R));
		return -1;
	}
	if (e2e_nfs3_lookup(R, &ROOT, "big", &lr) != 0 ||
	    lr.status != NFS3_OK) {
		fprintf(stderr, "e2e: LOOKUP big failed\n");
		return -1;
	}
	BIG = lr.LOOKUP3res_u.resok.object;
	t0 = e2e_now_ms();
	if (e2e_create_many(R, &BIG, PREFIX, NFILES, 64) != 0) {
		e2e_gw_dump_log(&gw);
		return -1;
	}
	fprintf(stderr, "e2e: created %d files in %llu ms\n", NFILES,
		(unsigned long long)(e2e_now_ms() - t0));
	return 0;
}

static int suite_clean(void)
{
	e2e_rpc_close(R);
	R = NULL;
	e2e_gw_cleanup(&gw);
	return 0;
}

static void test_readdir_1024(void)
{
	static struct walk w;

	walk_readdir(1024, 1, &w);
	check_walk(&w, "READDIR count 1024", 1);
	E2E_CHECK(w.max_entries <= 40,
		  "READDIR count 1024: up to %d entries in one reply (a "
		  "32-byte entry cannot fit more than 31)",
		  w.max_entries);
	fprintf(stderr, "  READDIR 1024: %d replies, up to %d entries\n",
		w.rounds, w.max_entries);
}

static void test_readdir_4096(void)
{
	static struct walk w;

	walk_readdir(4096, 1, &w);
	check_walk(&w, "READDIR count 4096", 1);
	fprintf(stderr, "  READDIR 4096: %d replies, up to %d entries\n",
		w.rounds, w.max_entries);
}

static void test_readdir_large(void)
{
	static struct walk w;

	walk_readdir(1048576, 0, &w);
	check_walk(&w, "READDIR count 1 MiB", 0);
}

static void test_readdirplus_4096(void)
{
	static struct walk w;
	int no_attr, no_fh, bad_fh;

	walk_readdirplus(1024, 4096, &w, &no_attr, &no_fh, &bad_fh);
	check_walk(&w, "READDIRPLUS maxcount 4096", 1);
	E2E_CHECK(no_attr == 0, "READDIRPLUS: %d entries without attributes",
		  no_attr);
	E2E_CHECK(no_fh == 0, "READDIRPLUS: %d entries without a handle",
		  no_fh);
	E2E_CHECK(bad_fh == 0,
		  "READDIRPLUS: %d handles whose GETATTR fileid "
		  "differs from the entry's",
		  bad_fh);
	fprintf(stderr, "  READDIRPLUS 4096: %d replies, up to %d entries\n",
		w.rounds, w.max_entries);
}

static void test_readdirplus_16k(void)
{
	static struct walk w;
	int no_attr, no_fh, bad_fh;

	walk_readdirplus(8192, 16384, &w, &no_attr, &no_fh, &bad_fh);
	check_walk(&w, "READDIRPLUS maxcount 16384", 1);
	E2E_CHECK(no_fh == 0 && no_attr == 0,
		  "READDIRPLUS: %d entries without a handle, %d without "
		  "attributes",
		  no_fh, no_attr);
}

static void test_toosmall(void)
{
	READDIR3args a = { .dir = BIG, .cookie = 0, .count = 100 };
	READDIR3res res;
	READDIRPLUS3args pa = {
		.dir = BIG, .cookie = 0, .dircount = 100, .maxcount = 100
	};
	READDIRPLUS3res pres;

	E2E_RPC(R, e2e_nfs3_readdir(R, &a, &res));
	if (res.status == NFS3_OK) {
		int n;
		size_t sz = readdir_resok_size(&res.READDIR3res_u.resok, &n);

		E2E_CHECK(n >= 1 && sz <= 100,
			  "READDIR count 100: OK with %d entries in %zu bytes; "
			  "want NFS3ERR_TOOSMALL, or >= 1 entry within 100 "
			  "bytes",
			  n, sz);
	} else {
		E2E_STATUS("READDIR count 100", res.status, NFS3ERR_TOOSMALL);
		E2E_CHECK(res.READDIR3res_u.resfail.dir_attributes
				  .attributes_follow,
			  "READDIR %s: dir_attributes missing",
			  e2e_nfsstat(res.status));
	}

	E2E_RPC(R, e2e_nfs3_readdirplus(R, &pa, &pres));
	if (pres.status == NFS3_OK) {
		int n;
		size_t sz = readdirplus_resok_size(
			&pres.READDIRPLUS3res_u.resok, &n);

		E2E_CHECK(n >= 1 && sz <= 100,
			  "READDIRPLUS maxcount 100: OK with %d entries in %zu "
			  "bytes; want NFS3ERR_TOOSMALL, or >= 1 entry within "
			  "100 bytes",
			  n, sz);
	} else {
		E2E_STATUS("READDIRPLUS maxcount 100", pres.status,
			   NFS3ERR_TOOSMALL);
	}

	a.count = 0;
	E2E_RPC(R, e2e_nfs3_readdir(R, &a, &res));
	E2E_STATUS("READDIR count 0", res.status, NFS3ERR_TOOSMALL);
}

static void get_verf(char verf[NFS3_COOKIEVERFSIZE])
{
	READDIR3args a = { .dir = BIG, .cookie = 0, .count = 1024 };
	READDIR3res res;

	E2E_RPC(R, e2e_nfs3_readdir(R, &a, &res));
	E2E_REQUIRE(res.status == NFS3_OK, "READDIR: %s",
		    e2e_nfsstat(res.status));
	memcpy(verf, res.READDIR3res_u.resok.cookieverf, NFS3_COOKIEVERFSIZE);
}

/*
 * Cookies stay valid while the directory changes: a walk that started
 * before a CREATE goes on from its cookie with the new verifier and sees
 * every old name exactly once.  The verifier itself changes.
 */
static void test_verifier_and_stability(void)
{
	static struct walk w;
	char v1[NFS3_COOKIEVERFSIZE], v2[NFS3_COOKIEVERFSIZE];
	char v3[NFS3_COOKIEVERFSIZE];
	cookie3 cookie = 0;
	int rounds = 0, zs_created = 0;
	CREATE3args ca = { .where = { .dir = BIG, .name = "zz_new" } };
	CREATE3res cres;
	REMOVE3res rres;

	memset(&w, 0, sizeof(w));
	get_verf(v1);
	get_verf(v2);
	E2E_CHECK(memcmp(v1, v2, sizeof(v1)) == 0,
		  "cookie verifier changed without a change to the directory");

	/* read the first 100 replies, then create, then go on */
	for (;;) {
		READDIR3args a = { .dir = BIG,
				   .cookie = cookie,
				   .count = 1024 };
		READDIR3res res;

		memcpy(a.cookieverf, cookie ? v2 : v1, NFS3_COOKIEVERFSIZE);
		E2E_RPC(R, e2e_nfs3_readdir(R, &a, &res));
		E2E_REQUIRE(res.status == NFS3_OK,
			    "READDIR from cookie %llu with the current "
			    "verifier: got %s",
			    (unsigned long long)cookie,
			    e2e_nfsstat(res.status));
		for (entry3 *e = res.READDIR3res_u.resok.reply.entries; e;
		     e = e->nextentry) {
			if (e->cookie <= cookie)
				w.nonmono++;
			cookie = e->cookie;
			if (strcmp(e->name, "zz_new") == 0)
				zs_created++;
			else
				note_name(&w, e->name);
		}
		if (res.READDIR3res_u.resok.reply.eof)
			break;
		E2E_REQUIRE(++rounds < 20000, "no eof");
		if (rounds == 100) {
			ca.how.mode = GUARDED;
			ca.how.createhow3_u.g_obj_attributes =
				e2e_sattr_mode(0644);
			E2E_RPC(R, e2e_nfs3_create(R, &ca, &cres));
			E2E_STATUS("CREATE zz_new mid-walk", cres.status,
				   NFS3_OK);
			get_verf(v2);
			E2E_CHECK(memcmp(v1, v2, sizeof(v1)) != 0,
				  "cookie verifier unchanged after a CREATE in "
				  "the directory");
		}
	}
	check_walk(&w, "READDIR across a CREATE", 0);
	E2E_CHECK(zs_created <= 1, "zz_new listed %d times", zs_created);

	E2E_RPC(R, e2e_nfs3_remove(R, &BIG, "zz_new", &rres));
	E2E_STATUS("REMOVE zz_new", rres.status, NFS3_OK);
	get_verf(v3);
	E2E_CHECK(memcmp(v3, v2, sizeof(v3)) != 0,
		  "cookie verifier unchanged after a REMOVE in the directory");
}

/* Last: SIGTERM is a clean exit, and stdout held only the ready line. */
static void test_sigterm(void)
{
	E2E_REQUIRE(gw.pid > 0, "the gateway is not running any more");
	E2E_CHECK(e2e_gw_stop(&gw) == 0, "SIGTERM: exit status is not 0");
	E2E_CHECK(gw.extra_stdout == 0,
		  "stdout had %zu bytes beyond the ready line",
		  gw.extra_stdout);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("e2e_readdir", suite_init, suite_clean);
	CU_add_test(s, "READDIR count 1024 over 10,000 files",
		    test_readdir_1024);
	CU_add_test(s, "READDIR count 4096", test_readdir_4096);
	CU_add_test(s, "READDIR count 1 MiB", test_readdir_large);
	CU_add_test(s, "READDIRPLUS maxcount 4096", test_readdirplus_4096);
	CU_add_test(s, "READDIRPLUS maxcount 16384", test_readdirplus_16k);
	CU_add_test(s, "count too small", test_toosmall);
	CU_add_test(s, "cookie verifier and stable cookies",
		    test_verifier_and_stability);
	CU_add_test(s, "SIGTERM exits 0", test_sigterm);
	return e2e_run_cunit();
}
