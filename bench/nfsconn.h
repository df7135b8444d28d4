/* nfsconn.h: one NFSv3 connection on the libnfs raw async API.
 *
 * A conn is owned by one thread: its calls, its event loop and its callbacks
 * all run there, so nothing in it is locked.  Setup helpers (mkdir, create,
 * lookup, remove) block until their reply; the timed work in items.c issues
 * raw rpc_nfs3_*_async calls on conn->rpc itself, keeps many outstanding, and
 * turns the crank with conn_poll().
 */
#ifndef MAPFS_BENCH_NFSCONN_H
#define MAPFS_BENCH_NFSCONN_H

#include <stddef.h>
#include <stdint.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>

/* Where to connect, from nfs://HOST/EXPORT?nfsport=P&mountport=Q&version=3.
 * A port of 0 means "ask the server's portmapper". */
struct nfs_target {
	char host[256];
	char path[1024];
	int nfsport;
	int mountport;
};

/* Parses url into t.  Returns 0, or -1 with a message in err. */
int target_parse(const char *url, struct nfs_target *t, char *err,
		 size_t errlen);

/* A file handle kept by value, so it outlives the reply it came in. */
struct bfh {
	uint32_t len;
	char data[NFS3_FHSIZE];
};

/* The nfs_fh3 argument form of f; points into f, valid while f is. */
static inline nfs_fh3 bfh_arg(const struct bfh *f)
{
	nfs_fh3 a = { .data = { .data_len = f->len,
				.data_val = (char *)f->data } };
	return a;
}

struct conn {
	struct rpc_context *rpc;
	struct bfh root; /* the export's root, from MOUNT */
	uint32_t rtmax;  /* FSINFO limits of one READ / WRITE */
	uint32_t wtmax;
	int failed;    /* set by the first error; callers stop issuing */
	char err[512]; /* that first error, "PROC: reason" */
};

/* Mounts t's export and connects to its NFS service.  Returns 0, or -1 with
 * the reason in c->err; conn_close() is safe either way. */
int conn_open(struct conn *c, const struct nfs_target *t);

/* Drops the connection.  Outstanding calls complete with RPC_STATUS_CANCEL
 * inside this call, so their callbacks must still find their state. */
void conn_close(struct conn *c);

/* Waits up to timeout_ms for the socket and services it: sends queued calls,
 * runs the callbacks of replies.  Returns 0, or -1 (and sets c->failed) when
 * the connection broke. */
int conn_poll(struct conn *c, int timeout_ms);

/* Records the first error of c as "proc: fmt..."; later ones are dropped. */
void conn_fail(struct conn *c, const char *proc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* For an rpc_cb: 0 when the call got an NFS3_OK reply; otherwise records
 * "proc: RPC error ..." or "proc: NFS3ERR_x (n)" in c and returns -1.
 * data is the reply, whose first member is always the nfsstat3. */
int conn_check(struct conn *c, const char *proc, int rpc_status, void *data);

/* Blocking setup calls.  Each returns 0, or -1 with c->err set. */
/* LOOKUP, or MKDIR, name in dir (an existing directory is fine); its handle
 * in out. */
int conn_mkdir(struct conn *c, const struct bfh *dir, const char *name,
	       struct bfh *out);
/* CREATE UNCHECKED, mode 0644, truncating an existing file; handle in out. */
int conn_create(struct conn *c, const struct bfh *dir, const char *name,
		struct bfh *out);
/* LOOKUP name in dir; handle in out. */
int conn_lookup(struct conn *c, const struct bfh *dir, const char *name,
		struct bfh *out);
/* LOOKUP name in dir: 0 with its handle in out, 1 when it is not there
 * (NOENT), -1 on any other error (c->err set). */
int conn_lookup_try(struct conn *c, const struct bfh *dir, const char *name,
		    struct bfh *out);
/* READDIRPLUS all of dir, pages of maxcount bytes: the entries it lists
 * ("." and ".." included) in *n.  0 or -1. */
int conn_readdirplus_all(struct conn *c, const struct bfh *dir,
			 uint32_t maxcount, uint64_t *n);
/* COMMIT all of fh's unstable writes. */
int conn_commit(struct conn *c, const struct bfh *fh);
/* REMOVE (rmdir: RMDIR) name in dir; a name already gone is fine. */
int conn_remove(struct conn *c, const struct bfh *dir, const char *name,
		int rmdir);
/* RENAME from to to, both in dir. */
int conn_rename(struct conn *c, const struct bfh *dir, const char *from,
		const char *to);

#endif
