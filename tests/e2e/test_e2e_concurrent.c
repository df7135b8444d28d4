/*
 * tests/e2e/test_e2e_concurrent.c - 8 clients at once, each a thread with
 * its own libnfs context (own connections), writing and reading its own
 * file of a few MiB in random-sized pieces; every file is checked by
 * SHA-256 from its writer, from another client, and through raw READs.
 */
#include "harness.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#define NCLIENTS 8
#define FILE_SIZE (3u << 20)
#define MAX_PIECE (256u << 10)

static struct e2e_gw gw;

struct client {
	int id;
	pthread_t thr;
	char path[64];
	char sha_written[65];
	char sha_read[65];
	char err[512];
	unsigned pieces;
	uint8_t *data;
};

static struct client clients[NCLIENTS];

#define FAIL(c, ...)                                                       \
	do {                                                               \
		if (!(c)->err[0])                                          \
			snprintf((c)->err, sizeof((c)->err), __VA_ARGS__); \
		goto out;                                                  \
	} while (0)

static void *client_main(void *arg)
{
	struct client *c = arg;
	struct nfs_context *nfs = e2e_nfs_mount(&gw);
	struct nfsfh *fh = NULL;
	uint64_t rnd = 0x1234567ull + (uint64_t)c->id * 7919;
	uint8_t *back = malloc(FILE_SIZE);
	int rc;

	if (!nfs || !back || !c->data)
		FAIL(c, "client %d: mount or malloc failed", c->id);
	e2e_fill(c->data, FILE_SIZE, 500 + (uint64_t)c->id);
	e2e_sha256_hex(c->data, FILE_SIZE, c->sha_written);

	rc = nfs_creat(nfs, c->path, 0644, &fh);
	if (rc)
		FAIL(c, "client %d: nfs_creat %s: %s", c->id, c->path,
		     nfs_get_error(nfs));
	for (size_t off = 0; off < FILE_SIZE;) {
		size_t n = 1 + e2e_rand(&rnd) % MAX_PIECE;

		if (n > FILE_SIZE - off)
			n = FILE_SIZE - off;
		rc = nfs_pwrite(nfs, fh, off, n, c->data + off);
		if (rc <= 0)
			FAIL(c, "client %d: nfs_pwrite %zu at %zu: %d %s",
			     c->id, n, off, rc, nfs_get_error(nfs));
		off += (size_t)rc;
		c->pieces++;
	}
	rc = nfs_fsync(nfs, fh);
	if (rc)
		FAIL(c, "client %d: nfs_fsync: %s", c->id, nfs_get_error(nfs));
	nfs_close(nfs, fh);
	fh = NULL;

	rc = nfs_open(nfs, c->path, O_RDONLY, &fh);
	if (rc)
		FAIL(c, "client %d: nfs_open: %s", c->id, nfs_get_error(nfs));
	memset(back, 0, FILE_SIZE);
	for (size_t off = 0; off < FILE_SIZE;) {
		size_t n = 1 + e2e_rand(&rnd) % MAX_PIECE;

		if (n > FILE_SIZE - off)
			n = FILE_SIZE - off;
		rc = nfs_pread(nfs, fh, off, n, back + off);
		if (rc <= 0)
			FAIL(c, "client %d: nfs_pread %zu at %zu: %d %s", c->id,
			     n, off, rc, nfs_get_error(nfs));
		off += (size_t)rc;
	}
	e2e_sha256_hex(back, FILE_SIZE, c->sha_read);
	if (strcmp(c->sha_read, c->sha_written) != 0) {
		size_t i = 0;

		while (i < FILE_SIZE && back[i] == c->data[i])
			i++;
		FAIL(c, "client %d: read back differs (first at byte %zu)",
		     c->id, i);
	}
out:
	if (fh)
		nfs_close(nfs, fh);
	if (nfs)
		nfs_destroy_context(nfs);
	free(back);
	return NULL;
}

static int suite_init(void)
{
	return e2e_gw_start(&gw, 4);
}

static int suite_clean(void)
{
	e2e_gw_cleanup(&gw);
	for (int i = 0; i < NCLIENTS; i++)
		free(clients[i].data);
	return 0;
}

static void test_eight_clients(void)
{
	uint64_t t0 = e2e_now_ms();

	for (int i = 0; i < NCLIENTS; i++) {
		struct client *c = &clients[i];

		memset(c, 0, sizeof(*c));
		c->id = i;
		snprintf(c->path, sizeof(c->path), "/client%d.bin", i);
		c->data = malloc(FILE_SIZE);
		E2E_REQUIRE(pthread_create(&c->thr, NULL, client_main, c) == 0,
			    "pthread_create %d", i);
	}
	for (int i = 0; i < NCLIENTS; i++)
		pthread_join(clients[i].thr, NULL);
	fprintf(stderr, "  %d clients x %u MiB: %llu ms\n", NCLIENTS,
		FILE_SIZE >> 20, (unsigned long long)(e2e_now_ms() - t0));
	for (int i = 0; i < NCLIENTS; i++) {
		E2E_CHECK(clients[i].err[0] == 0, "%s", clients[i].err);
		E2E_CHECK(clients[i].pieces > 5,
			  "client %d wrote in only %u pieces", i,
			  clients[i].pieces);
	}
	E2E_CHECK(e2e_gw_alive(&gw), "gateway died under 8 clients");
}

/* Every file as seen by one fresh client, and by raw READ through LOOKUP. */
static void test_cross_check(void)
{
	struct nfs_context *nfs = e2e_nfs_mount(&gw);
	struct e2e_rpc *r = e2e_rpc_open(gw.nfs_port, NFS_PROGRAM, NFS_V3);
	uint8_t *buf = malloc(FILE_SIZE);
	nfs_fh3 root;

	E2E_REQUIRE(nfs && r && buf, "mount / connect / malloc");
	E2E_REQUIRE(e2e_root_fh(r, &gw, &root) == 0, "MNT");
	for (int i = 0; i < NCLIENTS; i++) {
		struct client *c = &clients[i];
		struct nfs_stat_64 st;
		struct nfsfh *fh;
		char hex[65];
		LOOKUP3res lr;
		size_t off = 0;

		if (c->err[0])
			continue;
		E2E_CHECK(nfs_stat64(nfs, c->path, &st) == 0 &&
				  st.nfs_size == FILE_SIZE,
			  "stat %s: size %llu, want %u", c->path,
			  (unsigned long long)st.nfs_size, FILE_SIZE);
		E2E_REQUIRE(nfs_open(nfs, c->path, O_RDONLY, &fh) == 0,
			    "open %s: %s", c->path, nfs_get_error(nfs));
		while (off < FILE_SIZE) {
			int rc = nfs_pread(nfs, fh, off, 1u << 20, buf + off);

			E2E_REQUIRE(rc > 0, "pread %s at %zu: %d", c->path, off,
				    rc);
			off += (size_t)rc;
		}
		nfs_close(nfs, fh);
		e2e_sha256_hex(buf, FILE_SIZE, hex);
		E2E_CHECK(strcmp(hex, c->sha_written) == 0,
			  "%s read by another client: sha256 %s, want %s",
			  c->path, hex, c->sha_written);

		E2E_RPC(r, e2e_nfs3_lookup(r, &root, c->path + 1, &lr));
		E2E_REQUIRE(lr.status == NFS3_OK, "LOOKUP %s: %s", c->path,
			    e2e_nfsstat(lr.status));
		{
			struct e2e_sha256 s;
			uint8_t d[32];
			uint64_t o = 0;

			e2e_sha256_init(&s);
			while (o < FILE_SIZE) {
				READ3res rd;

				E2E_RPC(r,
					e2e_nfs3_read(
						r,
						&lr.LOOKUP3res_u.resok.object,
						o, 1u << 20, &rd));
				E2E_REQUIRE(rd.status == NFS3_OK &&
						    rd.READ3res_u.resok.count,
					    "raw READ %s at %llu: %s", c->path,
					    (unsigned long long)o,
					    e2e_nfsstat(rd.status));
				e2e_sha256_update(
					&s, rd.READ3res_u.resok.data.data_val,
					rd.READ3res_u.resok.data.data_len);
				o += rd.READ3res_u.resok.count;
			}
			e2e_sha256_final(&s, d);
			e2e_digest_hex(d, hex);
			E2E_CHECK(strcmp(hex, c->sha_written) == 0,
				  "%s via raw READ: sha256 %s, want %s",
				  c->path, hex, c->sha_written);
		}
	}
	free(buf);
	e2e_rpc_close(r);
	nfs_destroy_context(nfs);
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
	s = CU_add_suite("e2e_concurrent", suite_init, suite_clean);
	CU_add_test(s, "8 clients write and read their own files",
		    test_eight_clients);
	CU_add_test(s, "every file checked by another client",
		    test_cross_check);
	CU_add_test(s, "SIGTERM exits 0", test_sigterm);
	return e2e_run_cunit();
}
