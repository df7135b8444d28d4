/*
 * tests/fuzz/fuzz_handle.c - handle verification (handle_decode) under a
 * fixed key.
 *
 * Input: one mode byte, then either
 *   raw:     a handle as a client sends it, of any length: if it is
 *            accepted, it must be exactly the handle the gateway would
 *            mint for the fields it carries (nothing else passes);
 *   altered: export id (4), inode (8), generation (4) and an alteration
 *            (HANDLE_LEN bytes XORed into a genuine handle of those
 *            fields): the genuine one must pass with its fields, and an
 *            altered one must fail.  Random bytes never carry a valid
 *            MAC, so only this mode reaches the code past the MAC check.
 */
#include <errno.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"

static void fuzz_raw(const uint8_t *data, size_t size)
{
	uint8_t again[HANDLE_LEN];
	uint32_t export_id, gen;
	uint64_t ino;

	if (handle_decode(&fuzz_key, data, size, &export_id, &ino, &gen))
		return;
	FUZZ_CHECK(size == HANDLE_LEN);
	handle_encode(&fuzz_key, export_id, ino, gen, again);
	FUZZ_CHECK(memcmp(again, data, HANDLE_LEN) == 0);
}

static uint64_t be_get(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static void fuzz_altered(const uint8_t *data, size_t size)
{
	uint8_t h[HANDLE_LEN], delta[HANDLE_LEN] = { 0 }, any = 0;
	uint32_t export_id, gen, e2, g2;
	uint64_t ino, i2;

	if (size < 16)
		return;
	export_id = (uint32_t)be_get(data, 4);
	ino = be_get(data + 4, 8);
	gen = (uint32_t)be_get(data + 12, 4);
	size -= 16;
	memcpy(delta, data + 16, size < HANDLE_LEN ? size : HANDLE_LEN);

	handle_encode(&fuzz_key, export_id, ino, gen, h);
	FUZZ_CHECK(handle_decode(&fuzz_key, h, HANDLE_LEN, &e2, &i2, &g2) == 0);
	FUZZ_CHECK(e2 == export_id && i2 == ino && g2 == gen);
	for (int i = 0; i < HANDLE_LEN; i++) {
		h[i] ^= delta[i];
		any |= delta[i];
	}
	if (any)
		FUZZ_CHECK(handle_decode(&fuzz_key, h, HANDLE_LEN, &e2, &i2,
					 &g2) == -EBADF);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1)
		fuzz_altered(data + 1, size - 1);
	else
		fuzz_raw(data + 1, size - 1);
	return 0;
}
