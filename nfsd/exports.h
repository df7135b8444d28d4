/*
 * nfsd/exports.h - the export table: who may mount and use what, and as
 * whom (exports(5) syntax).
 *
 * A table is built once (exports_load() or exports_default()), given ids
 * (exports_set_ids()) and then published; a published table is never
 * changed except for the lazily resolved root inode of each export.  A
 * reload builds a new table and swaps it in (exports_publish()): readers
 * on the event loops never take a lock, they pin the current table in
 * their loop's own slot for the few instructions they need it, and the
 * writer frees the old table once no slot holds it (hazard pointers).
 *
 * Paths are canonical and absolute.  The base path (--export) names the
 * root of the namespace; every export is the base or a directory below it.
 */
#ifndef MAPFS_EXPORTS_H
#define MAPFS_EXPORTS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "fs/fs.h"
#include "nfsd/handle.h"
#include "rpc/rpc.h"

#define EXPORTS_ANON_DEFAULT 65534u /* anonuid/anongid, as exports(5) */
#define EXPORTS_PATH_MAX 1024       /* MNTPATHLEN */

/* Options of one client rule (exports(5) names). */
enum {
	EXPORTS_RW = 1u << 0,          /* rw; else ro */
	EXPORTS_ROOT_SQUASH = 1u << 1, /* uid/gid 0 -> anonuid/anongid */
	EXPORTS_ALL_SQUASH = 1u << 2,  /* every uid/gid -> anon */
	EXPORTS_SECURE = 1u << 3,      /* source port < 1024 required */
	EXPORTS_ASYNC = 1u << 4 /* async: durable after the reply (fs_ctx) */
};

/* One network a rule admits: a host is a network of its full length. */
struct exports_net {
	int family;       /* AF_INET or AF_INET6 */
	uint8_t addr[16]; /* network order, bits past prefix zero */
	unsigned prefix;
};

/* One client(options) of an export line. */
struct exports_rule {
	char *spec; /* the client as written: "10.0.0.0/8", "*", a name */
	bool any;   /* "*" */
	struct exports_net *nets; /* a name may resolve to several */
	size_t nnets;
	unsigned flags;
	uint32_t anonuid, anongid;
};

/* One exported directory and its rules, in line order. */
struct exports_entry {
	char *path; /* canonical: "/mapfs/projects/a" */
	const char
		*below; /* inside path: the part below the base ("" = base) */
	unsigned line;  /* where the file defined it, for messages */
	uint32_t id;    /* export id in handles (exports_set_ids) */
	_Atomic uint64_t root_ino; /* 0 until resolved */
	struct exports_rule *rules;
	size_t nrules;
};

struct exports {
	char *base; /* canonical --export path */
	struct exports_entry *entries;
	size_t n;
};

/*
 * Parse exports(5) text (len bytes; file names it in messages) whose
 * paths must lie at or below base.  Returns 0 with *out (free with
 * exports_free), or -EINVAL with "FILE:LINE: what" in err, or -ENOMEM.
 * Host names are resolved here.
 */
int exports_parse(const char *text, size_t len, const char *file,
		  const char *base, struct exports **out, char *err,
		  size_t errcap);

/* exports_parse() with flags: EXPORTS_PARSE_NO_RESOLVE makes a host
 * name an error instead of a lookup (the fuzz target: no DNS). */
#define EXPORTS_PARSE_NO_RESOLVE 1u
int exports_parse_flags(const char *text, size_t len, const char *file,
			const char *base, unsigned flags, struct exports **out,
			char *err, size_t errcap);

/*
 * exports_parse() of a file.  -ENOENT (err says so) when it does not
 * exist, so that the caller can decide what that means.
 */
int exports_load(const char *path, const char *base, struct exports **out,
		 char *err, size_t errcap);

/*
 * The table of a gateway given no exports file: base to this host only
 * (127.0.0.1 and ::1), rw, no_root_squash, insecure: the administrator's
 * own machine.  0 or -errno.
 */
int exports_localhost(const char *base, struct exports **out);

/*
 * Give every export its id: a MAC of its path under key, so it is stable
 * across restarts and reloads and differs between gateways.  -EEXIST
 * (with the two paths in err) if two ids collide.
 */
int exports_set_ids(struct exports *t, const struct handle_key *key, char *err,
		    size_t errcap);

void exports_free(struct exports *t);

/* The export with this id, or NULL. */
struct exports_entry *exports_find_id(const struct exports *t, uint32_t id);

/* The first rule of e, in line order, that admits peer; NULL if none. */
const struct exports_rule *exports_match(const struct exports_entry *e,
					 const struct sockaddr_storage *peer);

/* Whether peer's source port satisfies r's secure option. */
bool exports_port_ok(const struct exports_rule *r,
		     const struct sockaddr_storage *peer);

/*
 * MNT's choice for canonical path: the deepest export at or above it
 * that has a rule for peer.  Returns 0 with *e and *r, -EACCES if some
 * export contains path but none admits peer, -ENOENT if none contains it.
 */
int exports_mount_find(const struct exports *t, const char *path,
		       const struct sockaddr_storage *peer,
		       struct exports_entry **e, const struct exports_rule **r);

/*
 * The identity fs/ sees for credential c under rule r (exports(5)
 * squashing; AUTH_NONE is anonymous).  ctx->loop is left alone.
 */
void exports_squash(const struct exports_rule *r, const struct rpc_cred *c,
		    struct fs_ctx *ctx);

/*
 * Canonical form of an absolute path into out[cap]: no empty or "."
 * components, ".." resolved lexically (never above "/"), no trailing
 * slash.  0, -ENOENT for a relative path, -ENAMETOOLONG.
 */
int exports_path_canon(const char *in, char *out, size_t cap);

/*
 * The part of canonical path p below canonical dir ("" for dir itself,
 * "a/b" below it), or NULL if p is not at or below dir.
 */
const char *exports_path_below(const char *p, const char *dir);

/* --- publication ------------------------------------------------------ */

struct exports_slot {
	_Alignas(64) _Atomic(struct exports *) held;
};

struct exports_pub {
	_Atomic(struct exports *) cur;
	struct exports_slot *slots; /* one per event loop */
	int nslots;
	pthread_mutex_t lock; /* between writers only */
};

/* nslots readers (loops 0..nslots-1), no table yet.  0 or -errno. */
int exports_pub_init(struct exports_pub *p, int nslots);

/* Free the current table and the slots (no reader may be left). */
void exports_pub_fini(struct exports_pub *p);

/*
 * The current table, held in slot until exports_unpin(slot); NULL if
 * none or slot is out of range.  Never blocks; not nestable per slot.
 */
struct exports *exports_pin(struct exports_pub *p, int slot);
void exports_unpin(struct exports_pub *p, int slot);

/*
 * Make t (now owned by p) the current table, wait until no reader holds
 * the old one, and free it.  Readers pinning after the swap see t.
 */
void exports_publish(struct exports_pub *p, struct exports *t);

#endif
