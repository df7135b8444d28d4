/*
 * nlm/lock.h - the gateway's lock table: POSIX byte-range locks, DOS
 * share reservations and queued blocking requests, per inode.
 *
 * The table knows nothing of XDR or sockets: nlm/ decodes a call, turns
 * its handle into an inode and asks here.  Locks live in memory only and
 * belong to this gateway (another gateway on the same bucket has its own
 * table).  The table is sharded by inode: every shard has its own mutex,
 * so lock traffic on different files does not contend.
 *
 * An owner is (host address, caller name, svid, owner handle): where the
 * calls come from, the client's host name, its process-ish id and its
 * opaque owner bytes.  The address is part of it so that no other host
 * can name (and release) a client's locks by sending its name, svid and
 * owner bytes; a host holds at most the table's per-host bound of locks,
 * shares and queued requests together.  Locks of one owner never
 * conflict with each other; a new lock of an owner replaces what that
 * owner held in the range (upgrade, downgrade), and adjacent or
 * overlapping ranges of the same type merge, as fcntl(2) does locally.
 * A range is (offset, length) with length 0 meaning "to the end of file".
 */
#ifndef MAPFS_NLM_LOCK_H
#define MAPFS_NLM_LOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NLM_OH_MAX 1024 /* owner handle bytes (MAXNETOBJ_SZ) */

struct sockaddr_storage;

/* A client host: its address, IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d). */
struct nlm_host {
	uint8_t addr[16];
};

/* The host of a peer address (its port is not part of it). */
void nlm_host_of(const struct sockaddr_storage *ss, struct nlm_host *out);

/* A view of an owner; the table copies what it keeps. */
struct nlm_owner {
	struct nlm_host host;
	const char *caller;
	const void *oh;
	uint32_t ohlen;
	int32_t svid;
};

/* A lock request or a held lock, as the table is asked or answers. */
struct nlm_lockdesc {
	struct nlm_owner owner;
	bool excl;
	uint64_t off, len; /* len 0: to the end of the file */
};

/* The lock that stands in the way (TEST's holder, a denial's reason). */
struct nlm_holder {
	bool excl;
	int32_t svid;
	uint64_t off, len;
	uint32_t ohlen;
	uint8_t oh[NLM_OH_MAX];
};

/*
 * What the table does with a queued request.  grant: the request now
 * holds its lock (already installed); arg is the caller's again and the
 * lock stays until unlocked.  drop: the request was cancelled or its
 * owner freed without being granted; arg is the caller's again.  Both
 * run without any table lock held, on the thread whose call caused them,
 * and may call back into the table.
 */
struct nlm_table_ops {
	void (*grant)(void *ctx, uint64_t ino, const struct nlm_lockdesc *lk,
		      void *arg);
	void (*drop)(void *ctx, void *arg);
	void *ctx;
};

struct nlm_table;

/*
 * A new empty table with 2^shard_bits shards, where one host may hold at
 * most host_max locks, shares and queued requests together.  Returns 0
 * or -errno.
 */
int nlm_table_new(unsigned shard_bits, size_t host_max,
		  const struct nlm_table_ops *ops, struct nlm_table **out);

/* Free the table; queued requests are handed to ops->drop first. */
void nlm_table_free(struct nlm_table *t);

/*
 * Would lk be granted now?  0 if so; -EAGAIN if another owner's lock
 * conflicts (described in *conflict when it is not NULL).
 */
int nlm_table_test(struct nlm_table *t, uint64_t ino,
		   const struct nlm_lockdesc *lk, struct nlm_holder *conflict);

/*
 * Take lk.  Returns 0 when granted; -EAGAIN when it conflicts and
 * block_arg is NULL (a non-blocking request); -EINPROGRESS when it
 * conflicts and block_arg is not NULL: the request is queued and
 * block_arg is the table's until ops->grant or ops->drop hands it back;
 * -EALREADY when the same request (owner, range, type) is already
 * queued: block_arg stays the caller's.  -EINVAL for a range that ends
 * before it starts, -ENOLCK when the owner's host is at its bound,
 * -ENOMEM.
 */
int nlm_table_lock(struct nlm_table *t, uint64_t ino,
		   const struct nlm_lockdesc *lk, void *block_arg);

/*
 * Release the owner's locks in lk's range (lk->excl is ignored), split
 * what is only partly covered, then grant queued requests that no longer
 * conflict.  Unlocking what is not held succeeds.  Returns 0 or -ENOMEM
 * (a split needed memory; nothing changed).
 */
int nlm_table_unlock(struct nlm_table *t, uint64_t ino,
		     const struct nlm_lockdesc *lk);

/*
 * Withdraw a queued request equal to lk (owner, range, type); its arg
 * goes to ops->drop.  Returns 0, or -ENOENT when none is queued.
 */
int nlm_table_cancel(struct nlm_table *t, uint64_t ino,
		     const struct nlm_lockdesc *lk);

/*
 * DOS share reservation of (caller, oh) on ino: access is what the owner
 * does (bit 1 read, bit 2 write), deny what it forbids others.  An owner
 * that already has a share on ino has it replaced.  Returns 0, or
 * -EAGAIN when another owner's share conflicts, -ENOLCK (the host is at
 * its bound), -ENOMEM.
 */
int nlm_table_share(struct nlm_table *t, uint64_t ino,
		    const struct nlm_owner *owner, unsigned access,
		    unsigned deny);

/* Remove (caller, oh)'s share on ino; absent is success. */
void nlm_table_unshare(struct nlm_table *t, uint64_t ino,
		       const struct nlm_owner *owner);

/*
 * Forget everything of caller (it restarted, or said FREE_ALL) that came
 * from host (NULL: from any address): its locks and shares are released,
 * its queued requests dropped, and others' queued requests granted where
 * they now can be.  Returns the number of locks, shares and requests
 * removed.
 */
size_t nlm_table_free_all(struct nlm_table *t, const char *caller,
			  const struct nlm_host *host);

/* What host holds now: locks, shares and queued requests together. */
size_t nlm_table_host_count(struct nlm_table *t, const struct nlm_host *host);

/* ---- a cluster's table: one file's state as bytes ------------------ */

#define NLM_ARG_MAX 1200    /* a queued request's saved argument */
#define NLM_CALLER_MAX 1024 /* a caller name, as kept */

/*
 * Everything held and queued on ino, as bytes (malloc'd into *out, the
 * caller frees).  arg_save writes a queued request's argument into buf
 * (at most cap bytes): its length.  0 or -ENOMEM.
 */
int nlm_table_export(struct nlm_table *t, uint64_t ino,
		     size_t (*arg_save)(void *arg, void *buf, size_t cap),
		     void **out, size_t *len);

/*
 * Add what nlm_table_export() wrote (of any table) to ino here, with no
 * conflict check (it was consistent where it was made); arg_load makes a
 * queued request's argument (NULL is a valid one) from its bytes.
 * 0, -EIO (malformed: what came before stays), -ENOMEM.
 */
int nlm_table_import(struct nlm_table *t, uint64_t ino, const void *p,
		     size_t len, void *(*arg_load)(const void *p, size_t len));

/* What each host holds: up to cap into out; the number of hosts. */
struct nlm_host_count {
	struct nlm_host host;
	size_t n;
};
size_t nlm_table_hosts(struct nlm_table *t, struct nlm_host_count *out,
		       size_t cap);

/* Counts over the whole table (for tests and logs). */
void nlm_table_count(struct nlm_table *t, size_t *locks, size_t *waiters,
		     size_t *shares);

#endif
