/*
 * nlm/nlm.h - file locking for NFSv3 clients: the Network Lock Manager
 * (NLM v4, program 100021) and the Network Status Monitor (NSM v1,
 * program 100024), as the Open Group's XNFS specification defines them.
 *
 * Locks are kept in memory by this gateway only (nlm/lock.h): clients of
 * one gateway see each other's locks; clients of another gateway on the
 * same bucket do not.  Every call passes the same client check as NFS:
 * a handle's export must admit the caller (secure port included), and a
 * lock belongs to the address it was taken from.  NSM's SM_MON, UNMON
 * and UNMON_ALL are for the local host only; an SM_NOTIFY releases only
 * what the notifying address holds (any, from the local host).  After a restart the gateway's NSM state number goes
 * up, the clients that held locks are sent SM_NOTIFY, and for a grace
 * period only their reclaims are granted.
 */
#ifndef MAPFS_NLM_H
#define MAPFS_NLM_H

#include <stdint.h>

#include "nfsd/nfsd.h"
#include "rpc/rpc.h"

struct db;

#define NLM_PROG 100021
#define NLM_VERS4 4
#define NSM_PROG 100024
#define NSM_VERS1 1

struct nlm_opts {
	/* NFS's exports and handles: every call passes nfsd's client
	 * checks (nfsd_fh_check, nfsd_client_admitted). */
	struct nfsd *nfsd;
	size_t host_max; /* locks+shares+waiters per host */
	/* A cluster's database (NULL: alone): locks live there, shared by
	 * every gateway (nlm/cluster.c). */
	struct db *db;
	const char *state_dir; /* NSM state and client list go in nsm/ */
	/* The name clients mount this service by, sent in SM_NOTIFY (in a
	 * cluster with a floating address: that address or its DNS name);
	 * NULL: the host name. */
	const char *name;
	uint32_t grace_ms;            /* reclaims only, after start */
	uint16_t client_rpcbind_port; /* where clients' rpcbind listens; 111 */
};

struct nlm;

/*
 * Start the lock manager: bump and persist the NSM state number, start
 * the callback thread and send SM_NOTIFY to the clients recorded by the
 * previous run.  Returns 0 or -errno.
 */
int nlm_open(const struct nlm_opts *opts, struct nlm **out);

/* Stop the callback thread and free every lock.  NULL is a no-op. */
void nlm_close(struct nlm *n);

/* The NLM v4 program (100021/4) with ctx = n. */
struct rpc_program nlm_program(struct nlm *n);

/* The NSM v1 program (100024/1) with ctx = n. */
struct rpc_program nsm_program(struct nlm *n);

/* This run's NSM state number (odd: the gateway is up). */
int32_t nlm_nsm_state(const struct nlm *n);

#endif
