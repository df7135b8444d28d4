/*
 * nfsd/nfsd.h - the NFSv3 service (RFC 1813) and the MOUNT v3 service.
 *
 * nfsd/ turns decoded NFSv3 calls into fs/ calls: decode -> verify handle
 * -> fs_*() -> status -> post-op / wcc attributes on success and failure
 * -> release.  Only nfsd/ and mountd/ know XDR and nfsstat3.
 */
#ifndef MAPFS_NFSD_H
#define MAPFS_NFSD_H

#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>

#include "nfsd/handle.h"
#include "rpc/rpc.h"

struct fs;

/* State shared by the NFS and MOUNT programs; set up by main. */
struct nfsd {
	struct fs *fs;
	struct handle_key key;
	uint8_t write_verf[8]; /* fixed for the process, new every start */
	uint32_t export_id;
	const char *export_path; /* e.g. "/mapfs" */
	uint64_t root_ino;       /* inode exported at export_path */
	bool read_only;
	uint32_t rtmax, wtmax;   /* FSINFO (1 MiB) */

	/* MOUNT's list of mounts, for DUMP (slow path: a mutex is fine). */
	pthread_mutex_t mounts_lock;
	struct nfsd_mount *mounts;
};

struct nfsd_mount {
	struct nfsd_mount *next;
	char *host;
	char *path;
};

/* Initialise n (fs, key and export fields set by the caller first). */
int nfsd_init(struct nfsd *n);
void nfsd_fini(struct nfsd *n);

/* The NFS v3 program (100003/3) with ctx = n. */
struct rpc_program nfsd_program(struct nfsd *n);

/* The MOUNT v3 program (100005/3) with ctx = n. */
struct rpc_program mountd_program(struct nfsd *n);

/* The one table that maps a negative errno to nfsstat3 (as int). */
int nfsd_errno_to_stat(int err);

#endif
