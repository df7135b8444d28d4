/* Unit tests for nfsd/handle.c: SipHash-2-4, handle layout and MAC, key file. */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nfsd/handle.h"
#include "tests/lib/testlib.h"

static char dir[] = "/tmp/mapfs-test-handle-XXXXXX";

static const struct handle_key key_a = { { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
					   12, 13, 14, 15 } };
static const struct handle_key key_b = { { 15, 14, 13, 12, 11, 10, 9, 8, 7, 6,
					   5, 4, 3, 2, 1, 0 } };

/* The paper's Appendix A setting: key 00..0f, message 00..(len-1). */
static uint64_t sip_ref(size_t len)
{
	uint8_t msg[64];

	for (size_t i = 0; i < len; i++)
		msg[i] = (uint8_t)i;
	return handle_siphash(key_a.k, msg, len);
}

/*
 * The reference implementation's vectors.h, bytes as published (the
 * 64-bit result little-endian): message lengths 0, 1, 7 (tail only), 8
 * (one word, empty tail) and 15 (the paper's vector: word + 7-byte tail).
 */
static const struct {
	size_t len;
	uint8_t out[8];
} sip_vectors[] = {
	{ 0, { 0x31, 0x0e, 0x0e, 0xdd, 0x47, 0xdb, 0x6f, 0x72 } },
	{ 1, { 0xfd, 0x67, 0xdc, 0x93, 0xc5, 0x39, 0xf8, 0x74 } },
	{ 7, { 0x37, 0xd1, 0x01, 0x8b, 0xf5, 0x00, 0x02, 0xab } },
	{ 8, { 0x62, 0x24, 0x93, 0x9a, 0x79, 0xf5, 0xf5, 0x93 } },
	{ 15, { 0xe5, 0x45, 0xbe, 0x49, 0x61, 0xca, 0x29, 0xa1 } },
};

static void test_siphash_vectors(void)
{
	/* The brief's values, as the paper writes them. */
	CU_ASSERT(sip_ref(15) == 0xa129ca6149be45e5ULL);
	CU_ASSERT(sip_ref(0) == 0x726fdb47dd0e0e31ULL);
	for (size_t i = 0; i < sizeof(sip_vectors) / sizeof(sip_vectors[0]);
	     i++) {
		uint64_t want = 0;

		for (int b = 7; b >= 0; b--)
			want = want << 8 | sip_vectors[i].out[b];
		CU_ASSERT(sip_ref(sip_vectors[i].len) == want);
	}
	/* The key matters. */
	CU_ASSERT(handle_siphash(key_b.k, "", 0) != sip_ref(0));
}

static void test_layout(void)
{
	uint8_t h[HANDLE_LEN];
	static const uint8_t head[20] = {
		HANDLE_VERSION, 0,    0,    0,    0x11, 0x22, 0x33,
		0x44,           0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
		0x07,           0x08, 0xa1, 0xb2, 0xc3, 0xd4,
	};
	uint64_t mac = handle_siphash(key_a.k, head, sizeof(head));

	handle_encode(&key_a, 0x11223344u, 0x0102030405060708ULL, 0xa1b2c3d4u,
		      h);
	CU_ASSERT(memcmp(h, head, sizeof(head)) == 0);
	for (int i = 0; i < 8; i++)
		CU_ASSERT(h[20 + i] == (uint8_t)(mac >> (56 - 8 * i)));
}

static void test_round_trip(void)
{
	static const struct {
		uint32_t exp;
		uint64_t ino;
		uint32_t gen;
	} cases[] = {
		{ 0, 0, 0 },
		{ 1, 1, 1 },
		{ 0xdeadbeefu, 0x123456789abcdef0ULL, 7 },
		{ UINT32_MAX, UINT64_MAX, UINT32_MAX },
	};
	uint8_t h[HANDLE_LEN];
	uint32_t exp, gen;
	uint64_t ino;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		handle_encode(&key_a, cases[i].exp, cases[i].ino, cases[i].gen,
			      h);
		exp = gen = 0x5a5a5a5a;
		ino = 0;
		CU_ASSERT(handle_decode(&key_a, h, sizeof(h), &exp, &ino,
					&gen) == 0);
		CU_ASSERT(exp == cases[i].exp);
		CU_ASSERT(ino == cases[i].ino);
		CU_ASSERT(gen == cases[i].gen);
	}
}

static void test_bit_flips(void)
{
	uint8_t h[HANDLE_LEN], bad[HANDLE_LEN];
	uint32_t exp, gen;
	uint64_t ino;
	int rejected = 0;

	handle_encode(&key_a, 42, 4242, 3, h);
	for (int bit = 0; bit < HANDLE_LEN * 8; bit++) {
		memcpy(bad, h, sizeof(h));
		bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		rejected += handle_decode(&key_a, bad, sizeof(bad), &exp, &ino,
					  &gen) == -EBADF;
	}
	CU_ASSERT(rejected == HANDLE_LEN * 8);
	/* The original still passes: the flips were applied to copies. */
	CU_ASSERT(handle_decode(&key_a, h, sizeof(h), &exp, &ino, &gen) == 0);
}

static void test_wrong_length(void)
{
	uint8_t h[HANDLE_LEN + 40] = { 0 };
	uint32_t exp, gen;
	uint64_t ino;

	handle_encode(&key_a, 1, 2, 3, h);
	CU_ASSERT(handle_decode(&key_a, h, 0, &exp, &ino, &gen) == -EBADF);
	CU_ASSERT(handle_decode(&key_a, h, HANDLE_LEN - 1, &exp, &ino, &gen) ==
		  -EBADF);
	/* A valid handle with trailing bytes is still not a handle. */
	CU_ASSERT(handle_decode(&key_a, h, HANDLE_LEN + 1, &exp, &ino, &gen) ==
		  -EBADF);
	CU_ASSERT(handle_decode(&key_a, h, 64, &exp, &ino, &gen) == -EBADF);
	CU_ASSERT(handle_decode(&key_a, h, HANDLE_LEN, &exp, &ino, &gen) == 0);
}

static void test_other_key(void)
{
	uint8_t h[HANDLE_LEN];
	uint32_t exp, gen;
	uint64_t ino;

	handle_encode(&key_b, 1, 2, 3, h);
	CU_ASSERT(handle_decode(&key_a, h, sizeof(h), &exp, &ino, &gen) ==
		  -EBADF);
	CU_ASSERT(handle_decode(&key_b, h, sizeof(h), &exp, &ino, &gen) == 0);
}

/* Names in dir other than "." and "..". */
static int dir_entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static int write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	int ok;

	if (fd < 0)
		return -1;
	ok = write(fd, buf, len) == (ssize_t)len;
	close(fd);
	return ok ? 0 : -1;
}

static void test_key_file(void)
{
	char path[256], path2[256];
	struct handle_key k1, k2, k3;
	struct stat st;

	snprintf(path, sizeof(path), "%s/handle.key", dir);
	snprintf(path2, sizeof(path2), "%s/other.key", dir);
	CU_ASSERT_FATAL(handle_key_load(path, &k1) == 0);
	CU_ASSERT_FATAL(stat(path, &st) == 0);
	CU_ASSERT(st.st_size == 16);
	CU_ASSERT((st.st_mode & 07777) == 0600);
	/* The temporary file is gone. */
	CU_ASSERT(dir_entries() == 1);

	memset(&k2, 0, sizeof(k2));
	CU_ASSERT(handle_key_load(path, &k2) == 0);
	CU_ASSERT(memcmp(k1.k, k2.k, sizeof(k1.k)) == 0);

	/* A second key is random, not a constant. */
	CU_ASSERT(handle_key_load(path2, &k3) == 0);
	CU_ASSERT(memcmp(k1.k, k3.k, sizeof(k1.k)) != 0);
	unlink(path2);

	/* A missing directory is reported, not papered over. */
	snprintf(path2, sizeof(path2), "%s/nodir/handle.key", dir);
	CU_ASSERT(handle_key_load(path2, &k3) == -ENOENT);
}

static void test_key_wrong_size(void)
{
	char path[256];
	uint8_t buf[17] = { 1, 2, 3 }, back[17];
	struct handle_key k;
	int fd;

	snprintf(path, sizeof(path), "%s/bad.key", dir);
	for (size_t len = 0; len <= 17; len += 1) {
		if (len == 16)
			continue;
		CU_ASSERT_FATAL(write_file(path, buf, len) == 0);
		CU_ASSERT(handle_key_load(path, &k) == -EINVAL);
		/* Rejected, and left as it was for the operator to look at. */
		fd = open(path, O_RDONLY);
		CU_ASSERT_FATAL(fd >= 0);
		CU_ASSERT(read(fd, back, sizeof(back)) == (ssize_t)len);
		close(fd);
		CU_ASSERT(memcmp(buf, back, len) == 0);
	}
	unlink(path);
}

int main(void)
{
	if (!mkdtemp(dir))
		return 2;
	CU_initialize_registry();
	CU_pSuite s = CU_add_suite("handle", NULL, NULL);
	CU_add_test(s, "siphash-2-4 vectors", test_siphash_vectors);
	CU_add_test(s, "wire layout", test_layout);
	CU_add_test(s, "encode/decode round trip", test_round_trip);
	CU_add_test(s, "every bit flip is BADHANDLE", test_bit_flips);
	CU_add_test(s, "wrong length", test_wrong_length);
	CU_add_test(s, "handle of another key", test_other_key);
	CU_add_test(s, "key file create and reload", test_key_file);
	CU_add_test(s, "key file of the wrong size", test_key_wrong_size);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	if (test_rmtree(dir) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return failed ? 1 : 0;
}
