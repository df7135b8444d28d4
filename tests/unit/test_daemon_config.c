/* Unit tests for daemon/config.c: defaults, the INI file, CLI precedence,
 * and bad values named in the error message. */
#include <CUnit/Basic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/config.h"

static char errbuf[4096];

/* Run config_load on a NULL-terminated argv; stderr text in errbuf. */
static int load(struct config *cfg, char **argv)
{
	int argc = 0;
	FILE *err = fmemopen(errbuf, sizeof(errbuf), "w");
	FILE *out = fopen("/dev/null", "w");
	int rc;

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
	char *argv[] = { "mapfs-gw", "--state", "/srv/gw", NULL };

	CU_ASSERT_FATAL(load(&c, argv) == 0);
	CU_ASSERT_STRING_EQUAL(c.store, "file:///srv/gw/store");
	CU_ASSERT_STRING_EQUAL(c.export_path, "/mapfs");
	CU_ASSERT(c.nfs_port == 2049 && c.mount_port == 20048);
	CU_ASSERT(c.threads >= 1);
	CU_ASSERT(!c.no_rpcbind && !c.foreground);
	CU_ASSERT(c.multipart_threshold == 0); /* the store's choice */
	config_free(&c);
}

static void test_file_then_cli(void)
{
	char path[] = "/tmp/mapfs-test-conf-XXXXXX";
	int fd = mkstemp(path);
	const char *ini = "[mapfs-gw]\nexport = /data\nnfs-port = 3049\n"
			  "no-rpcbind = yes\ns3-region = eu-west-1\n";
	struct config c;
	char *argv[] = { "mapfs-gw", "--config",  path, "--nfs-port",
			 "0",        "--threads", "3",  "--multipart-threshold",
			 "96M",      NULL };

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(write(fd, ini, strlen(ini)) == (ssize_t)strlen(ini));
	close(fd);
	CU_ASSERT_FATAL(load(&c, argv) == 0);
	CU_ASSERT_STRING_EQUAL(c.export_path, "/data");
	CU_ASSERT(c.nfs_port == 0); /* the command line wins */
	CU_ASSERT(c.threads == 3);
	CU_ASSERT(c.no_rpcbind);
	CU_ASSERT_STRING_EQUAL(c.s3_region, "eu-west-1");
	CU_ASSERT(c.multipart_threshold == 96ull << 20);
	config_free(&c);
	unlink(path);
}

static void test_bad_values_named(void)
{
	struct {
		char *argv[5];
		const char *needle;
	} cases[] = {
		{ { "mapfs-gw", "--nfs-port", "70000", NULL }, "nfs-port" },
		{ { "mapfs-gw", "--threads", "0", NULL }, "threads" },
		{ { "mapfs-gw", "--async-window", "0", NULL }, "async-window" },
		{ { "mapfs-gw", "--async-window", "10001", NULL },
		  "async-window" },
		{ { "mapfs-gw", "--log-level", "loud", NULL }, "log-level" },
		{ { "mapfs-gw", "--export", "relative", NULL }, "export" },
		{ { "mapfs-gw", "--store", "ftp://x", NULL }, "store" },
		{ { "mapfs-gw", "--bogus", NULL }, "--bogus" },
		{ { "mapfs-gw", "--config", "/nonexistent/x.conf", NULL },
		  "x.conf" },
		{ { "mapfs-gw", "stray", NULL }, "stray" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct config c;

		CU_ASSERT(load(&c, cases[i].argv) == -EINVAL);
		CU_ASSERT(strstr(errbuf, cases[i].needle) != NULL);
		config_free(&c);
	}
}

static void test_unknown_key_in_file(void)
{
	char path[] = "/tmp/mapfs-test-conf-XXXXXX";
	int fd = mkstemp(path);
	const char *ini = "[mapfs-gw]\nexprot = /typo\n";
	struct config c;
	char *argv[] = { "mapfs-gw", "--config", path, NULL };

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(write(fd, ini, strlen(ini)) == (ssize_t)strlen(ini));
	close(fd);
	CU_ASSERT(load(&c, argv) == -EINVAL);
	CU_ASSERT(strstr(errbuf, "exprot") != NULL);
	config_free(&c);
	unlink(path);
}

int main(void)
{
	CU_initialize_registry();
	CU_pSuite s = CU_add_suite("config", NULL, NULL);
	CU_add_test(s, "defaults", test_defaults);
	CU_add_test(s, "file, then the command line", test_file_then_cli);
	CU_add_test(s, "bad values are named", test_bad_values_named);
	CU_add_test(s, "unknown key in the file", test_unknown_key_in_file);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
