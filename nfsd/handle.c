/*
 * nfsd/handle.c - NFSv3 file handles: layout, MAC and the secret key.
 *
 * SipHash-2-4 is written from its specification (Aumasson and Bernstein,
 * "SipHash: a fast short-input PRF", 2012): a keyed PRF that is fast on
 * 20-byte inputs and gives a 64-bit tag, enough that a client cannot guess
 * a valid handle for an inode it was never given.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handle.h"

/* Offsets of the handle fields (see nfsd/handle.h). */
enum {
	H_VERSION = 0,
	H_EXPORT = 4,
	H_INO = 8,
	H_GEN = 16,
	H_MAC = 20 /* the MAC covers bytes [0, H_MAC) */
};

static uint64_t le64_get(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void be_put(uint8_t *p, uint64_t v, int nbytes)
{
	for (int i = nbytes - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t be_get(const uint8_t *p, int nbytes)
{
	uint64_t v = 0;

	for (int i = 0; i < nbytes; i++)
		v = v << 8 | p[i];
	return v;
}

static inline uint64_t rotl64(uint64_t x, int b)
{
	return x << b | x >> (64 - b);
}

/* One SipRound (paper, section 2). */
#define SIPROUND(v0, v1, v2, v3)     \
	do {                         \
		v0 += v1;            \
		v1 = rotl64(v1, 13); \
		v1 ^= v0;            \
		v0 = rotl64(v0, 32); \
		v2 += v3;            \
		v3 = rotl64(v3, 16); \
		v3 ^= v2;            \
		v0 += v3;            \
		v3 = rotl64(v3, 21); \
		v3 ^= v0;            \
		v2 += v1;            \
		v1 = rotl64(v1, 17); \
		v1 ^= v2;            \
		v2 = rotl64(v2, 32); \
	} while (0)

/* SipHash-2-4: 2 compression rounds per word, 4 finalization rounds. */
uint64_t handle_siphash(const uint8_t key[16], const void *data, size_t len)
{
	const uint8_t *m = data;
	uint64_t k0 = le64_get(key), k1 = le64_get(key + 8);
	/* "somepseudorandomlygeneratedbytes" */
	uint64_t v0 = k0 ^ 0x736f6d6570736575ULL;
	uint64_t v1 = k1 ^ 0x646f72616e646f6dULL;
	uint64_t v2 = k0 ^ 0x6c7967656e657261ULL;
	uint64_t v3 = k1 ^ 0x7465646279746573ULL;
	size_t full = len & ~(size_t)7;
	uint64_t w;

	for (size_t i = 0; i < full; i += 8) {
		w = le64_get(m + i);
		v3 ^= w;
		SIPROUND(v0, v1, v2, v3);
		SIPROUND(v0, v1, v2, v3);
		v0 ^= w;
	}
	/* Last word: the remaining 0..7 bytes, little-endian, len mod 256 on top. */
	w = (uint64_t)(len & 0xff) << 56;
	for (size_t i = 0; i < len - full; i++)
		w |= (uint64_t)m[full + i] << (8 * i);
	v3 ^= w;
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	v0 ^= w;

	v2 ^= 0xff;
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	return v0 ^ v1 ^ v2 ^ v3;
}

/* Build a handle into out[HANDLE_LEN]. */
void handle_encode(const struct handle_key *key, uint32_t export_id,
		   uint64_t ino, uint32_t gen, uint8_t out[HANDLE_LEN])
{
	memset(out, 0, HANDLE_LEN);
	out[H_VERSION] = HANDLE_VERSION;
	be_put(out + H_EXPORT, export_id, 4);
	be_put(out + H_INO, ino, 8);
	be_put(out + H_GEN, gen, 4);
	be_put(out + H_MAC, handle_siphash(key->k, out, H_MAC), 8);
}

/* Check and unpack a handle: 0 or -EBADF (wrong length, version or MAC). */
int handle_decode(const struct handle_key *key, const void *data, size_t len,
		  uint32_t *export_id, uint64_t *ino, uint32_t *gen)
{
	const uint8_t *h = data;
	uint8_t mac[8];
	uint8_t diff = 0;

	if (len != HANDLE_LEN || h[H_VERSION] != HANDLE_VERSION)
		return -EBADF;
	be_put(mac, handle_siphash(key->k, h, H_MAC), 8);
	/* Constant time: how far a forged MAC matched must not show in timing. */
	for (int i = 0; i < 8; i++)
		diff |= mac[i] ^ h[H_MAC + i];
	if (diff)
		return -EBADF;
	*export_id = (uint32_t)be_get(h + H_EXPORT, 4);
	*ino = be_get(h + H_INO, 8);
	*gen = (uint32_t)be_get(h + H_GEN, 4);
	return 0;
}

/* Read exactly sizeof(out->k) bytes from an existing key file. */
static int key_read(const char *path, struct handle_key *out)
{
	struct stat st;
	size_t got = 0;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		rc = -errno;
		goto out_close;
	}
	/* A short or long key is damage, not something to paper over. */
	if (!S_ISREG(st.st_mode) || st.st_size != (off_t)sizeof(out->k)) {
		rc = -EINVAL;
		goto out_close;
	}
	while (got < sizeof(out->k)) {
		ssize_t r = read(fd, out->k + got, sizeof(out->k) - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = r < 0 ? -errno : -EINVAL;
			goto out_close;
		}
		got += (size_t)r;
	}
out_close:
	close(fd);
	return rc;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* fsync the directory holding path, so a new name in it is durable. */
static int dir_sync(const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	int fd, rc = 0;

	if (!slash)
		strcpy(dir, ".");
	else if (slash == path)
		strcpy(dir, "/");
	else if ((size_t)(slash - path) < sizeof(dir))
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	else
		return -ENAMETOOLONG;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd))
		rc = -errno;
	close(fd);
	return rc;
}

/*
 * Create a new random key at path.  The key is written and synced under a
 * temporary name first and only then given its real name, so a crash
 * leaves either no key or a whole one.  The name is given with link(),
 * not rename(), so that if another process created a key meanwhile it is
 * not replaced under it: that case returns -EEXIST.
 */
static int key_create(const char *path, struct handle_key *out)
{
	char tmp[4096];
	ssize_t r;
	int fd, rc;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >=
	    (int)sizeof(tmp))
		return -ENAMETOOLONG;
	do
		r = getrandom(out->k, sizeof(out->k), 0);
	while (r < 0 && errno == EINTR);
	/* Up to 256 bytes, getrandom() never returns short (getrandom(2)). */
	if (r != (ssize_t)sizeof(out->k))
		return r < 0 ? -errno : -EIO;

	/* A leftover of a crashed process that had our pid. */
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = write_all(fd, out->k, sizeof(out->k));
	if (!rc && fsync(fd))
		rc = -errno;
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && link(tmp, path))
		rc = -errno;
	unlink(tmp);
	if (!rc)
		rc = dir_sync(path);
	return rc;
}

/* Load the secret from path, creating it (random, 0600) if absent. */
int handle_key_load(const char *path, struct handle_key *out)
{
	int rc = key_read(path, out);

	if (rc != -ENOENT)
		return rc;
	rc = key_create(path, out);
	if (rc == -EEXIST) /* another process won the race: use its key */
		rc = key_read(path, out);
	return rc;
}
