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

#include "nfsd/exports.h"
#include "nfsd/handle.h"
#include "rpc/rpc.h"

struct fs;

/* State shared by the NFS and MOUNT programs; set up by main. */
struct nfsd {
	struct fs *fs;
	struct handle_key key;
	uint8_t write_verf[8]; /* new every start; see nfsd_write_verf */
	/*
	 * fattr3 fsid.  Every export shows the one namespace, so all share
	 * it, as knfsd's exports of one file system do.
	 */
	uint32_t fsid;
	int nloops;            /* event loops that read the export table */
	bool read_only;        /* --read-only: every export is ro */
	uint32_t rtmax, wtmax; /* FSINFO (1 MiB) */

	/* The export table, swapped whole on reload (nfsd_exports_set). */
	struct exports_pub exports;

	/* MOUNT's list of mounts, for DUMP (slow path: a mutex is fine). */
	pthread_mutex_t mounts_lock;
	struct nfsd_mount *mounts;
	/* The async rules of the table ("PATH CLIENT" lines), for ctl
	 * status and the metrics; under mounts_lock. */
	char *async_rules;
};

struct nfsd_mount {
	struct nfsd_mount *next;
	char *host;
	char *path;
};

/*
 * The current table's async rules, one "PATH CLIENT" per line ("" when
 * none): a copy the caller frees, or NULL without memory.
 */
char *nfsd_async_rules(struct nfsd *n);

/*
 * Initialise n (fs, key, fsid, nloops and read_only set by the caller
 * first).  No exports until nfsd_exports_set(): every MNT is NOENT and
 * every handle STALE.
 */
int nfsd_init(struct nfsd *n);
void nfsd_fini(struct nfsd *n);

/*
 * The write verifier (RFC 1813 3.3.7) now: new at every start, and again
 * each time this node dropped data it had not made stable (fs_write_epoch),
 * so that clients resend their uncommitted writes.
 */
void nfsd_write_verf(const struct nfsd *n, uint8_t out[8]);

/*
 * Publish t (ids set; n owns it now) as the export table.  Calls already
 * checked keep what they were allowed; every later check sees t.  Returns
 * once the old table is freed.  Any thread but an event loop's.
 */
void nfsd_exports_set(struct nfsd *n, struct exports *t);

/*
 * The root inode of export e (of a table the caller holds): resolved from the namespace's
 * stored entries (as root, no store round trip) and remembered in e.
 * 0 if the directory is not (yet) known, or is not a directory.
 */
uint64_t nfsd_export_root(struct nfsd *n, struct exports_entry *e, int loop);

/*
 * The checks of every NFS call, for a handle another program (NLM) was
 * given with call: its MAC, its export in the current table, a rule of
 * that export admitting the caller, the rule's secure port, the inode
 * with the handle's generation.  0 with *ino; -EBADF (not a handle of
 * ours), -ESTALE (export or inode gone), -EACCES (no rule admits the
 * caller), -EPERM (a secure rule, an unprivileged port), -EIO.  Runs
 * inline on the call's loop.
 */
int nfsd_fh_check(struct nfsd *n, struct rpc_call *call, const void *fh,
		  size_t len, uint64_t *ino);

/*
 * Whether some rule of some export admits peer: the client check of
 * calls that carry no handle (NLM FREE_ALL, NSM).  loop: the caller's
 * event loop, or -1 off the loops.
 */
bool nfsd_client_admitted(struct nfsd *n, const struct sockaddr_storage *peer,
			  int loop);

/* The NFS v3 program (100003/3) with ctx = n. */
struct rpc_program nfsd_program(struct nfsd *n);

/* The MOUNT v3 program (100005/3) with ctx = n. */
struct rpc_program mountd_program(struct nfsd *n);

/* The one table that maps a negative errno to nfsstat3 (as int). */
int nfsd_errno_to_stat(int err);

#endif
