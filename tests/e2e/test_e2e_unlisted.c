/*
 * A directory whose listing the gateway has not read yet: objects already
 * in the store under it must count for CREATE, MKDIR and REMOVE, not only
 * for LOOKUP and READDIR.  (Found by the bench: a MKDIR of a name that
 * existed in the bucket answered OK and hid the objects under it.)
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

static struct e2e_gw gw;
static struct e2e_rpc *R;
static nfs_fh3 ROOT;

/* An object put into the file store by hand, as another tool would. */
static void put_by_hand(const char *rel, const char *body)
{
	char path[E2E_PATH_MAX * 2];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", gw.store, rel);
	for (char *p = path + strlen(gw.store) + 1; *p; p++) {
		if (*p == '/') {
			*p = 0;
			mkdir(path, 0755);
			*p = '/';
		}
	}
	f = fopen(path, "w");
	E2E_REQUIRE(f != NULL, "create %s", path);
	fputs(body, f);
	fclose(f);
}

static nfs_fh3 lookup(const nfs_fh3 *dir, const char *name)
{
	LOOKUP3res res;

	E2E_RPC(R, e2e_nfs3_lookup(R, dir, name, &res));
	E2E_REQUIRE(res.status == NFS3_OK, "LOOKUP %s: %s", name,
		    e2e_nfsstat(res.status));
	return e2e_fh_dup(R, &res.LOOKUP3res_u.resok.object);
}

static void test_unlisted_dirs(void)
{
	MKDIR3args mk = { 0 };
	MKDIR3res mres;
	CREATE3args cr = { 0 };
	CREATE3res cres;
	REMOVE3res rres;
	nfs_fh3 d, t0;

	E2E_REQUIRE(e2e_gw_start(&gw, 2) == 0, "gateway start");
	R = e2e_rpc_open(gw.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(R != NULL, "no RPC connection");
	E2E_REQUIRE(e2e_root_fh(R, &gw, &ROOT) == 0, "no root handle");
	/* Written behind the gateway's back, before it listed anything. */
	put_by_hand("d/t0/big", "bytes that must not be hidden\n");
	put_by_hand("d/top.txt", "top\n");

	/* MKDIR first thing in a never-listed root: the name exists. */
	mk.where.dir = ROOT;
	mk.where.name = "d";
	mk.attributes = e2e_sattr_mode(0755);
	E2E_RPC(R, e2e_nfs3_mkdir(R, &mk, &mres));
	E2E_STATUS("MKDIR d over an unlisted prefix", mres.status,
		   NFS3ERR_EXIST);

	d = lookup(&ROOT, "d");
	/* d itself was only ever a prefix: its entries are not listed yet. */
	cr.where.dir = d;
	cr.where.name = "top.txt";
	cr.how.mode = GUARDED;
	cr.how.createhow3_u.obj_attributes = e2e_sattr_mode(0644);
	E2E_RPC(R, e2e_nfs3_create(R, &cr, &cres));
	E2E_STATUS("CREATE GUARDED d/top.txt over an unlisted object",
		   cres.status, NFS3ERR_EXIST);

	t0 = lookup(&d, "t0");
	/* REMOVE in t0, which nobody listed: big is found, not NOENT. */
	E2E_RPC(R, e2e_nfs3_remove(R, &t0, "big", &rres));
	E2E_STATUS("REMOVE d/t0/big in an unlisted directory", rres.status,
		   NFS3_OK);
	E2E_CHECK(rres.REMOVE3res_u.resok.dir_wcc.after.attributes_follow,
		  "REMOVE: no post-op attributes of the directory");

	e2e_rpc_close(R);
	R = NULL;
	E2E_CHECK(e2e_gw_stop(&gw) == 0, "gateway SIGTERM: exit 0");
	e2e_gw_cleanup(&gw);
}

/*
 * A READDIRPLUS walk of a directory never listed, of 2,500 objects: three
 * pages of the store's listing, merged page by page while the walk goes
 * on (issue 18).  Every name comes once, with attributes and a handle,
 * and eof only at the end; a second walk sees the same.
 */
static void walk_all(const nfs_fh3 *dir, int *seen, int *n, int *no_attr)
{
	cookie3 cookie = 0;

	*n = *no_attr = 0;
	for (int rounds = 0;; rounds++) {
		READDIRPLUS3args a = { .dir = *dir,
				       .cookie = cookie,
				       .dircount = 4096,
				       .maxcount = 16384 };
		READDIRPLUS3res res;
		int k;

		E2E_REQUIRE(rounds < 10000, "READDIRPLUS: no eof");
		E2E_RPC(R, e2e_nfs3_readdirplus(R, &a, &res));
		E2E_REQUIRE(
			res.status == NFS3_OK, "READDIRPLUS cookie %llu: %s",
			(unsigned long long)cookie, e2e_nfsstat(res.status));
		READDIRPLUS3resok *ok = &res.READDIRPLUS3res_u.resok;

		for (entryplus3 *e = ok->reply.entries; e; e = e->nextentry) {
			cookie = e->cookie;
			if (sscanf(e->name, "f%d", &k) != 1 || k < 0 ||
			    k >= 2500)
				continue;
			seen[k]++;
			(*n)++;
			*no_attr += !e->name_attributes.attributes_follow ||
				    !e->name_handle.handle_follows;
		}
		if (ok->reply.eof)
			break;
	}
}

static void test_first_walk(void)
{
	static int seen[2500];
	char rel[32];
	int n, no_attr, twice = 0;
	nfs_fh3 big;

	E2E_REQUIRE(e2e_gw_start(&gw, 2) == 0, "gateway start");
	R = e2e_rpc_open(gw.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(R != NULL, "no RPC connection");
	E2E_REQUIRE(e2e_root_fh(R, &gw, &ROOT) == 0, "no root handle");
	for (int i = 0; i < 2500; i++) {
		snprintf(rel, sizeof(rel), "big/f%04d", i);
		put_by_hand(rel, "x\n");
	}
	big = lookup(&ROOT, "big");
	for (int round = 0; round < 2; round++) {
		memset(seen, 0, sizeof(seen));
		walk_all(&big, seen, &n, &no_attr);
		for (int i = 0; i < 2500; i++)
			twice += seen[i] != 1;
		E2E_CHECK(n == 2500 && twice == 0 && no_attr == 0,
			  "walk %d: %d names (2500), %d not once, %d without "
			  "attributes or handle",
			  round, n, twice, no_attr);
	}
	e2e_rpc_close(R);
	R = NULL;
	E2E_CHECK(e2e_gw_stop(&gw) == 0, "gateway SIGTERM: exit 0");
	e2e_gw_cleanup(&gw);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	CU_pSuite s = CU_add_suite("e2e_unlisted", NULL, NULL);
	CU_add_test(s, "changes in directories not yet listed",
		    test_unlisted_dirs);
	CU_add_test(s, "a first walk of 2,500 objects", test_first_walk);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
