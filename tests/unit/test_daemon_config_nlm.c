/* Unit tests for the locking options of daemon/config.c: defaults, values,
 * and the port clashes refused. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "daemon/config.h"

static char errbuf[4096];

static int load(struct config *cfg, char **argv)
{
	int argc = 0, rc;
	FILE *err = fmemopen(errbuf, sizeof(errbuf), "w");
	FILE *out = fopen("/dev/null", "w");

	while (argv[argc])
		argc++;
	rc = config_load(cfg, argc, argv, out, err);
	fclose(err);
	fclose(out);
	return rc;
}

static void test_defaults(void)
{
	struct config c;
	char *argv[] = { "mapfs-gw", NULL };

	CU_ASSERT_FATAL(load(&c, argv) == 0);
	CU_ASSERT_EQUAL(c.nlm_port, 0);
	CU_ASSERT_EQUAL(c.grace_ms, 45000);
	CU_ASSERT_EQUAL(c.nlm_client_rpcbind_port, 111);
	config_free(&c);
}

static void test_values(void)
{
	struct config c;
	char *argv[] = { "mapfs-gw", "--nlm-port", "4001",
			 "--grace",  "0",          "--nlm-client-rpcbind-port",
			 "1111",     NULL };

	CU_ASSERT_FATAL(load(&c, argv) == 0);
	CU_ASSERT_EQUAL(c.nlm_port, 4001);
	CU_ASSERT_EQUAL(c.grace_ms, 0);
	CU_ASSERT_EQUAL(c.nlm_client_rpcbind_port, 1111);
	config_free(&c);
}

static void test_refused(void)
{
	struct config c;
	char *same[] = { "mapfs-gw", "--nlm-port", "2049", NULL };
	char *zero[] = { "mapfs-gw", "--nlm-client-rpcbind-port", "0", NULL };
	char *neg[] = { "mapfs-gw", "--grace", "-1", NULL };

	CU_ASSERT(load(&c, same) < 0);
	CU_ASSERT(strstr(errbuf, "nlm-port") != NULL);
	config_free(&c);
	CU_ASSERT(load(&c, zero) < 0);
	CU_ASSERT(strstr(errbuf, "nlm-client-rpcbind-port") != NULL);
	config_free(&c);
	CU_ASSERT(load(&c, neg) < 0);
	CU_ASSERT(strstr(errbuf, "grace") != NULL);
	config_free(&c);
}

int main(void)
{
	CU_pSuite s;
	unsigned failed;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite("nlm_config", NULL, NULL);
	CU_add_test(s, "defaults", test_defaults);
	CU_add_test(s, "values", test_values);
	CU_add_test(s, "refused", test_refused);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
