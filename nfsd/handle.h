/*
 * nfsd/handle.h - NFSv3 file handles: small, stable and unforgeable.
 *
 * Wire layout (HANDLE_LEN bytes, big-endian): version (1), reserved (3),
 * export id (4), inode (8), generation (4), MAC (8).  The MAC is
 * SipHash-2-4 over the first 20 bytes under a 128-bit per-gateway secret
 * kept in STATE/handle.key, so handles survive restarts but cannot be
 * made or altered by a client.
 */
#ifndef MAPFS_HANDLE_H
#define MAPFS_HANDLE_H

#include <stddef.h>
#include <stdint.h>

#define HANDLE_LEN 28
#define HANDLE_VERSION 1

struct handle_key {
	uint8_t k[16];
};

/*
 * Load the secret from path, creating it (random, mode 0600) if absent.
 * Returns 0 or -errno.
 */
int handle_key_load(const char *path, struct handle_key *out);

/* Build a handle into out[HANDLE_LEN]. */
void handle_encode(const struct handle_key *key, uint32_t export_id,
		   uint64_t ino, uint32_t gen, uint8_t out[HANDLE_LEN]);

/*
 * Check and unpack a handle.  Returns 0, or -EBADF (wrong length, version
 * or MAC: NFS3ERR_BADHANDLE).  Existence and generation are for the
 * caller to check (NFS3ERR_STALE).
 */
int handle_decode(const struct handle_key *key, const void *data, size_t len,
		  uint32_t *export_id, uint64_t *ino, uint32_t *gen);

/* SipHash-2-4 with a 128-bit key (exposed for the test vectors). */
uint64_t handle_siphash(const uint8_t key[16], const void *data, size_t len);

#endif
