/*
 * Renaming a directory of 10,000 files that are already in the store: the
 * namespace change is visible at once, the store keys move in the
 * background (journaled copies + deletes), and other clients are served
 * meanwhile.  Afterwards every object sits under the new prefix and none
 * under the old.  Bounds are generous: this checks "not blocked for the
 * length of 10,000 copies", not a speed.
 */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define NFILES 10000

static struct e2e_gw gw;

static int count_dir(const char *rel)
{
	char path[E2E_PATH_MAX * 2];
	struct dirent *d;
	DIR *dp;
	int n = 0;

	snprintf(path, sizeof(path), "%s/%s", gw.store, rel);
	dp = opendir(path);
	if (!dp)
		return -1;
	while ((d = readdir(dp)))
		n += d->d_name[0] != '.';
	closedir(dp);
	return n;
}

/* Wait up to ms for dir rel of the store to hold want entries. */
static int wait_count(const char *rel, int want, int ms)
{
	uint64_t t0 = e2e_now_ms();
	int n;

	while ((n = count_dir(rel)) != want && e2e_now_ms() - t0 < (uint64_t)ms)
		usleep(200 * 1000);
	return n;
}

static void test_big_dir_rename(void)
{
	static const char *const args[] = { "--upload-delay", "0", NULL };
	struct e2e_rpc *r, *other;
	nfs_fh3 root, dir;
	MKDIR3args mk = { 0 };
	MKDIR3res mres;
	RENAME3res rres;
	LOOKUP3res lk;
	uint64_t t0, worst = 0;
	int n;

	E2E_REQUIRE(e2e_gw_start_args(&gw, 2, args) == 0, "gateway start");
	r = e2e_rpc_open(gw.nfs_port, NFS_PROGRAM, NFS_V3);
	other = e2e_rpc_open(gw.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(r && other, "no RPC connection");
	E2E_REQUIRE(e2e_root_fh(r, &gw, &root) == 0, "no root handle");
	mk.where.dir = root;
	mk.where.name = "big";
	mk.attributes = e2e_sattr_mode(0755);
	E2E_RPC(r, e2e_nfs3_mkdir(r, &mk, &mres));
	E2E_REQUIRE(mres.status == NFS3_OK, "MKDIR big: %s",
		    e2e_nfsstat(mres.status));
	dir = e2e_fh_dup(r, &mres.MKDIR3res_u.resok.obj.post_op_fh3_u.handle);
	E2E_REQUIRE(e2e_create_many(r, &dir, "f", NFILES, 64) == 0,
		    "create %d files", NFILES);
	/* All of them in the store first, so the rename must move keys. */
	n = wait_count("big", NFILES, 120000);
	E2E_REQUIRE(n == NFILES, "store holds %d of %d objects under big/", n,
		    NFILES);

	t0 = e2e_now_ms();
	E2E_RPC(r, e2e_nfs3_rename(r, &root, "big", &root, "moved", &rres));
	E2E_STATUS("RENAME big -> moved", rres.status, NFS3_OK);
	E2E_CHECK(e2e_now_ms() - t0 < 30000, "RENAME answered after %llu ms",
		  (unsigned long long)(e2e_now_ms() - t0));
	/* Visible at once, while the keys still move. */
	E2E_RPC(r, e2e_nfs3_lookup(r, &root, "moved", &lk));
	E2E_STATUS("LOOKUP moved right after the RENAME", lk.status, NFS3_OK);
	E2E_RPC(r, e2e_nfs3_lookup(r, &root, "big", &lk));
	E2E_STATUS("LOOKUP big right after the RENAME", lk.status,
		   NFS3ERR_NOENT);

	/* Another client is served while the copies run. */
	for (int i = 0; i < 50; i++) {
		GETATTR3res ga;
		uint64_t t = e2e_now_ms();

		E2E_RPC(other, e2e_nfs3_getattr(other, &root, &ga));
		E2E_STATUS("GETATTR / from another client", ga.status, NFS3_OK);
		if (e2e_now_ms() - t > worst)
			worst = e2e_now_ms() - t;
		usleep(20 * 1000);
	}
	E2E_CHECK(worst < 5000, "another client waited %llu ms for a GETATTR",
		  (unsigned long long)worst);

	n = wait_count("moved", NFILES, 300000);
	E2E_CHECK(n == NFILES, "store holds %d of %d objects under moved/", n,
		  NFILES);
	n = wait_count("big", -1, 60000);
	E2E_CHECK(n == -1, "the old prefix big/ still holds %d entries", n);

	e2e_rpc_close(other);
	e2e_rpc_close(r);
	E2E_CHECK(e2e_gw_stop(&gw) == 0, "gateway SIGTERM: exit 0");
	e2e_gw_cleanup(&gw);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	CU_pSuite s = CU_add_suite("e2e_bigrename", NULL, NULL);
	CU_add_test(s, "rename a directory of 10,000 stored files",
		    test_big_dir_rename);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
