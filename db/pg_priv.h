/*
 * db/pg_priv.h - what the files of the PostgreSQL engine share (pg.c,
 * pg_schema.c, pg_commit.c, pg_log.c): the engine's state and a few
 * helpers.  Nothing outside them includes it (pg_int.h is the engine's
 * face).
 */
#ifndef MAPFS_DB_PG_PRIV_H
#define MAPFS_DB_PG_PRIV_H

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "pg_int.h"

#define SCHEMA_VERSION 2
#define LOG_KEEP_S 600        /* log entries and tokens kept this long */
#define RECONNECT_MIN_MS 1000 /* between attempts of a connection */
#define START_BACKOFF_MAX_MS 10000
#define FOLLOW_PAGE 2000       /* records handed over at a time */
#define DOUBT_WAIT_MAX_MS 2000 /* for a lost commit's backend to end */
#define DOUBT_GIVEUP_MS 5000   /* to learn whether a lost commit landed */
#define PRUNE_EVERY_MS 10000   /* how often a node prunes the log */

/* A queue of store work this node holds the claim to run (pg_runners.c). */
struct db_pg_run {
	uint32_t queue;         /* whose: a node's id */
	uint64_t held_until_ms; /* the claim surely holds until, this clock */
	uint64_t from_ms;       /* its last runner's fence is over from */
};

struct db_pg {
	struct db_cluster_opts o;
	char instance[33];
	/* This process's id in the log (its own commits the follower
	 * skips); a new one once a commit's answer is lost, so that the
	 * follower applies that commit should it have landed. */
	atomic_uint inst_id;
	/* Commits numbered above this are read again by the next follow,
	 * whoever made them (UINT64_MAX: none): a lost commit whose fate
	 * stayed unknown, which the follower may have passed over as this
	 * process's own before the id changed. */
	_Atomic uint64_t rescan_seq;
	char cluster_id[33];
	uint32_t node_id;
	struct db_pg_sinks sinks;
	atomic_bool wr_up; /* the last commit got an answer (commit threads) */
	atomic_bool abandon;

	pthread_mutex_t svc_lock;
	struct pgc svc;

	/* The notifier (notifier_main). */
	pthread_t notifier;
	bool notifier_started;
	pthread_mutex_t n_lock;
	pthread_cond_t n_cond;
	bool n_pending, n_stop;
	struct pgc ntf;

	struct pgc fol;
	bool listening;
	uint64_t lease_next_ms, prune_next_ms;
	/* Until when this node's lease surely holds, by this clock (ms). */
	uint64_t held_until_ms;
	/* Renewing without a gap since (ms; 0: the last renewal failed),
	 * and the last renewal that went through. */
	uint64_t renewing_since_ms, renewed_ms;
	/* Membership as last read (the follower's): ids of the nodes whose
	 * lease ran out, sorted. */
	pthread_mutex_t nodes_lock;
	uint32_t *down;
	size_t ndown;
	bool nodes_known;
	/* The queues this node claimed at its last renewal (under
	 * nodes_lock). */
	struct db_pg_run *runs;
	size_t nruns;
};

struct db_pg_conn {
	struct db_pg *pg;
	struct pgc p;
	uint64_t last_seq; /* of its last commit: a later one is above */
};

/* pg.c: one statement with text parameters, its result if it has the
 * status want (else NULL, the error logged). */
PGresult *db_pg_exec_text(PGconn *c, const char *sql, int n,
			  const char *const *params, ExecStatusType want);
/* pg.c: (re)connect p (0, -EAGAIN; quiet: say nothing of a failure). */
int db_pg_pgc_connect(struct db_pg *pg, struct pgc *p, bool quiet);
void db_pg_pgc_close(struct pgc *p);
/* pg.c: renew the lease on the follower's connection c (and read who is
 * down). */
void db_pg_lease_tick(struct db_pg *pg, PGconn *c, uint64_t applied_xmin);
/* pg_runners.c: claim the queues of store work this node is to run, on
 * the follower's connection c, with the lease renewal sent at sent. */
void db_pg_runners_tick(struct db_pg *pg, PGconn *c, uint64_t sent);
/* pg_runners.c: give this process's claims up (it runs nothing more). */
void db_pg_runners_release(struct db_pg *pg, PGconn *c);
/* pg_log.c: the follower's session settings and its prepared read. */
extern const char db_pg_follow_session[];
/* pg.c: wake the followers soon (the notifier sends one NOTIFY). */
void db_pg_notify_kick(struct db_pg *pg);
void *db_pg_notifier_main(void *arg);

#endif
