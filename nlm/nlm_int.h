/*
 * nlm/nlm_int.h - private to nlm/: the shared state of the NLM and NSM
 * programs, the callback queue and the NSM client records.
 */
#ifndef MAPFS_NLM_INT_H
#define MAPFS_NLM_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "lock.h"
#include "nlm.h"
#include "nlm/nlm4_prot.h"
#include "nlm/sm_prot.h"

struct nlm_cb;
struct nlm_pool;

/* A queued blocking request: what GRANTED needs to name the lock (kept
 * as bytes in a cluster's record: no pointers). */
struct nlm_block {
	struct sockaddr_storage peer;
	u_int fhlen;
	char fh[MAXNETOBJ_SZ];
};

/* One SM_MON registration: call my_id back when mon_name restarts. */
struct nsm_mon {
	struct nsm_mon *next;
	char *mon_name;
	char *my_name;
	int32_t my_prog, my_vers, my_proc;
	uint8_t priv[16];
	struct sockaddr_storage peer; /* who registered: where to call */
};

struct nlm {
	struct nlm_opts opts;
	char *state_dir; /* STATE/nsm */
	char hostname[256];
	int32_t state;           /* NSM state number of this run */
	uint64_t grace_end_ns;   /* CLOCK_MONOTONIC */
	struct nlm_table *table; /* alone; a cluster's is in the database */
	struct nlm_cb *cb;
	struct nlm_pool *pool; /* a cluster's: calls that wait for it */
	/* The completions of a blocked request, the procedures' (set by
	 * nlm.c): granted, or dropped.  The tables below (lock.c's alone,
	 * cluster.c's in a database) reach nlm4_proc.c only through these. */
	struct nlm_table_ops blocked;

	/* Hosts recorded in STATE/nsm/clients (so each is written once). */
	pthread_mutex_t clients_lock;
	struct nlm_client *clients;
	struct nsm_mon *mons;
};

/* --- callback.c: calls from the gateway to clients ------------------- */

/*
 * The outcome of a callback: err 0 and the decoded result in res (freed
 * by the queue after done returns), or -errno when no reply came.
 */
typedef void (*nlm_cb_done_fn)(void *arg, int err, void *res);

struct nlm_cb_call {
	struct sockaddr_storage addr; /* the client; its port is ignored */
	uint32_t prog, vers, proc;
	xdrproc_t encode; /* args, encoded when queued */
	const void *args;
	xdrproc_t decode; /* results; NULL: the reply is not waited for */
	size_t res_size;
	int tries;           /* attempts before done() gets the error */
	nlm_cb_done_fn done; /* may be NULL */
	void *arg;
};

/*
 * Start the callback thread.  A callback finds the client's service
 * through the client's rpcbind at rpcbind_port (PMAP v2 GETPORT, TCP),
 * then calls it over TCP.  Returns 0 or -errno.
 */
int nlm_cb_start(uint16_t rpcbind_port, struct nlm_cb **out);

/* Stop the thread; queued calls get -ECANCELED in done(). */
void nlm_cb_stop(struct nlm_cb *cb);

/*
 * Queue a call; its args are encoded now, so they need not outlive this.
 * Returns 0, or -ENOMEM / -EINVAL (args did not encode): then done() is
 * not called.
 */
int nlm_cb_queue(struct nlm_cb *cb, const struct nlm_cb_call *c);

/* --- cluster.c: the table, alone or in the cluster's database -------- */

/*
 * nlm_table_test/lock/cancel/unlock/share/unshare/free_all (lock.h) on
 * this gateway's table, or in a cluster on the file's record in the
 * database (blocking: call them off the loops, nlm_defer).  In a cluster
 * a database that does not answer is -ENOLCK (DENIED_NOLOCKS: the client
 * retries); a queued request's block is the record's copy's, and the one
 * passed in is freed.
 */
int nlm_tab_test(struct nlm *n, uint64_t ino, const struct nlm_lockdesc *lk,
		 struct nlm_holder *holder);
int nlm_tab_lock(struct nlm *n, uint64_t ino, const struct nlm_lockdesc *lk,
		 struct nlm_block *block);
int nlm_tab_cancel(struct nlm *n, uint64_t ino, const struct nlm_lockdesc *lk);
int nlm_tab_unlock(struct nlm *n, uint64_t ino, const struct nlm_lockdesc *lk);
int nlm_tab_share(struct nlm *n, uint64_t ino, const struct nlm_owner *owner,
		  unsigned access, unsigned deny);
void nlm_tab_unshare(struct nlm *n, uint64_t ino,
		     const struct nlm_owner *owner);
size_t nlm_tab_free_all(struct nlm *n, const char *caller,
			const struct nlm_host *host);

/* Threads that run calls which wait for the cluster's database. */
int nlm_pool_start(struct nlm *n);
void nlm_pool_stop(struct nlm *n);
/* Run fn(call, args, res) on one of them (it finishes the call). */
void nlm_defer(struct nlm *n, rpc_handler_fn fn, struct rpc_call *call,
	       void *args, void *res);

/* nlm4_proc.c: lock table callbacks (a queued request was granted: tell
 * its client; it was dropped: free it).  grant takes arg. */
void nlm_block_granted(void *ctx, uint64_t ino, const struct nlm_lockdesc *lk,
		       void *arg);
void nlm_block_dropped(void *ctx, void *arg);

/* --- nsm.c: the status monitor --------------------------------------- */

/* Read, bump and persist the state number in n->state_dir. */
int nsm_state_bump(struct nlm *n);

/*
 * Remember caller (at peer) as a client to notify after a restart.
 * 0, or -ENOLCK when peer's address has too many names recorded (its
 * lock must be refused: a restart could not tell it), -ENOMEM.
 */
int nsm_client_note(struct nlm *n, const char *caller,
		    const struct sockaddr_storage *peer);

/*
 * Forget caller's records from host (NULL: from any address): it freed
 * its locks, or told us it restarted.  Returns the records dropped.
 */
size_t nsm_client_forget(struct nlm *n, const char *caller,
			 const struct nlm_host *host);

/* Whether peer is this host's own statd/lockd: 127.0.0.1 or ::1. */
bool nsm_peer_local(const struct sockaddr_storage *peer);

/* Queue SM_NOTIFY to every client the previous run recorded. */
void nsm_notify_clients(struct nlm *n);

/* In a cluster: when a gateway dies, its clients are asked to reclaim
 * (SM_NOTIFY naming n->hostname).  Start before locks are granted; stop
 * before the callback queue goes.  No-ops alone. */
void nsm_cluster_start(struct nlm *n);
void nsm_cluster_stop(struct nlm *n);

/* Free the in-memory client set and SM_MON list. */
void nsm_free(struct nlm *n);

#endif
