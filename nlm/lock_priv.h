/*
 * nlm/lock_priv.h - what the lock table (lock.c) shares with the file
 * that turns one file's state into bytes and back (lock_bytes.c, above
 * it): the table's shapes and the few steps both take.  Private to those
 * two files.
 */
#ifndef MAPFS_NLM_LOCK_PRIV_H
#define MAPFS_NLM_LOCK_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "lock.h"

#define SHARD_BUCKETS 256
#define HOST_BUCKETS 1024

struct nlm_table;

/* What one host holds: the references of its kept owners. */
struct hostc {
	struct hostc *next;
	struct nlm_table *t;
	struct nlm_host host;
	size_t n; /* under t->hosts_mu */
};

/* A kept owner, shared by the locks, requests and shares it made. */
struct own {
	unsigned refs; /* under the shard's mutex */
	struct hostc *hc;
	int32_t svid;
	uint32_t ohlen;
	char *caller; /* points into data, after the oh bytes */
	uint8_t data[];
};

struct lk {
	struct lk *next;
	struct own *own;
	uint64_t start, end; /* inclusive; end UINT64_MAX: to EOF */
	bool excl;
};

struct waiter {
	struct waiter *next;
	struct own *own;
	uint64_t start, end;
	uint64_t off, len; /* as asked, for the grant callback */
	bool excl;
	void *arg;
};

struct shr {
	struct shr *next;
	struct own *own;
	unsigned access, deny;
};

struct file {
	struct file *next;
	uint64_t ino;
	struct lk *locks;
	struct waiter *waiters; /* FIFO: the oldest first */
	struct shr *shares;
};

struct shard {
	pthread_mutex_t mu;
	struct file *buckets[SHARD_BUCKETS];
};

struct nlm_table {
	struct nlm_table_ops ops;
	size_t host_max;
	pthread_mutex_t hosts_mu;
	struct hostc *hosts[HOST_BUCKETS];
	unsigned nshards;
	struct shard shards[];
};

/* Callbacks collected under a shard's mutex, run after it is released. */
struct pending {
	struct waiter *granted; /* in grant order */
	struct waiter **granted_tail;
	struct waiter *dropped;
	uint64_t ino; /* of the granted ones (one file per call) */
};

/* ino's state in shard s, or NULL. */
struct file *lk_file_find(struct shard *s, uint64_t ino);

/* ino's state in shard s, made empty if missing; NULL: no memory. */
struct file *lk_file_get(struct shard *s, uint64_t ino);

/* Free f if nothing is left on it. */
void lk_file_trim(struct shard *s, struct file *f);

/* Is o the owner w names (host, svid, oh, caller)? */
bool lk_own_is(const struct own *o, const struct nlm_owner *w);

/* A kept owner for w, one reference charged to its host; NULL: no
 * memory or the host is at its bound. */
struct own *lk_own_new(struct nlm_table *t, const struct nlm_owner *w);

/*
 * The same kept owner as w on f, if any lock, request or share of f has
 * it, so that one owner is one struct own per file.
 */
struct own *lk_own_on_file(const struct file *f, const struct nlm_owner *w);

/* Drop a reference to o (under its shard's mutex), freeing it at 0. */
void lk_own_put(struct own *o);

/* One more reference to o (under its shard's mutex). */
void lk_own_ref(struct own *o);

/* The shard ino's state is in. */
struct shard *lk_shard_of(struct nlm_table *t, uint64_t ino);

#endif
