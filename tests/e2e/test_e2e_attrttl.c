/*
 * --attr-ttl: an object changed behind the gateway's back (here, in the
 * file store by hand, as another tool would in a bucket) shows its new
 * attributes in GETATTR once the attribute TTL has passed, even though
 * the directory listing TTL is much longer; and not before.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static struct e2e_gw gw;
static struct e2e_rpc *R;
static nfs_fh3 ROOT;

static void put_by_hand(const char *name, const char *body)
{
	char path[E2E_PATH_MAX * 2];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", gw.store, name);
	f = fopen(path, "w");
	E2E_REQUIRE(f != NULL, "create %s", path);
	fputs(body, f);
	fclose(f);
}

static uint64_t size_of(const nfs_fh3 *fh)
{
	GETATTR3res res;

	E2E_RPC(R, e2e_nfs3_getattr(R, fh, &res));
	E2E_REQUIRE(res.status == NFS3_OK, "GETATTR: %s",
		    e2e_nfsstat(res.status));
	return res.GETATTR3res_u.resok.obj_attributes.size;
}

static void test_attr_ttl(void)
{
	static const char *const args[] = { "--attr-ttl", "1", "--dir-ttl",
					    "3600", NULL };
	LOOKUP3res lk;
	nfs_fh3 fh;

	E2E_REQUIRE(e2e_gw_start_args(&gw, 2, args) == 0, "gateway start");
	R = e2e_rpc_open(gw.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(R != NULL, "no RPC connection");
	E2E_REQUIRE(e2e_root_fh(R, &gw, &ROOT) == 0, "no root handle");
	put_by_hand("other-tool.txt", "four");

	E2E_RPC(R, e2e_nfs3_lookup(R, &ROOT, "other-tool.txt", &lk));
	E2E_REQUIRE(lk.status == NFS3_OK, "LOOKUP: %s", e2e_nfsstat(lk.status));
	fh = e2e_fh_dup(R, &lk.LOOKUP3res_u.resok.object);
	E2E_CHECK(size_of(&fh) == 4, "size before the change");

	/* Another tool rewrites it: at once, the gateway may still say 4. */
	put_by_hand("other-tool.txt", "now eighteen bytes");
	usleep(1500 * 1000);
	E2E_CHECK(size_of(&fh) == 18,
		  "GETATTR after the attribute TTL: the new size");

	e2e_rpc_close(R);
	R = NULL;
	E2E_CHECK(e2e_gw_stop(&gw) == 0, "gateway SIGTERM: exit 0");
	e2e_gw_cleanup(&gw);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	CU_pSuite s = CU_add_suite("e2e_attrttl", NULL, NULL);
	CU_add_test(s, "attributes refreshed after --attr-ttl", test_attr_ttl);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
