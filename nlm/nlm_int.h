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

#include "nlm/lock.h"
#include "nlm/nlm.h"
#include "nlm/nlm4_prot.h"
#include "nlm/sm_prot.h"

struct nlm_cb;

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
	char *state_dir;  /* STATE/nsm */
	char hostname[256];
	int32_t state;    /* NSM state number of this run */
	uint64_t grace_end_ns; /* CLOCK_MONOTONIC */
	struct nlm_table *table;
	struct nlm_cb *cb;

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
	int tries;        /* attempts before done() gets the error */
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

/* Free the in-memory client set and SM_MON list. */
void nsm_free(struct nlm *n);

#endif
