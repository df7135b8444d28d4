/*
 * nfsd/nfs3_internal.h - private to the NFSv3 procedures of nfsd/.
 *
 * Every procedure has one shape: decoded args -> name/handle checks ->
 * fs_*() -> nfsstat3 -> post-op / wcc attributes on success and failure
 * -> rpc_call_done().
 *
 * Per-call state lives in the result memory.  The transport hands a
 * handler zeroed memory of proc->res_size bytes that stays valid until
 * the call is finished, then encodes and xdr_frees only the rpcgen result
 * at its start.  So each asynchronous procedure declares a state struct
 * whose first member is its rpcgen result, and sets res_size to the size
 * of that struct: no allocation, no free path, and the fs out-parameters
 * live exactly as long as fs may write them.  After rpc_call_done() the
 * state is gone and must not be touched.
 */
#ifndef MAPFS_NFS3_INTERNAL_H
#define MAPFS_NFS3_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fs/fs.h"
#include "nfsd/nfs3_prot.h"
#include "nfsd.h"

/*
 * Directory replies: the preferred size (FSINFO dtpref) and the cap on
 * READDIR count and READDIRPLUS dircount.  rpcgen encodes and frees the
 * entry lists recursively, one stack frame chain per entry; with at least
 * 24 bytes per entry the cap bounds a reply to ~2700 entries.
 */
#define NFS3_DIR_MAX (64u * 1024)

/* The largest file: S3's object size limit (5 TiB). */
#define NFS3_MAXFILESIZE (5ull << 40)

/* --- nfs3_common.c --------------------------------------------------- */

/* nfsstat3 for a negative errno (0 is NFS3_OK). */
nfsstat3 nfs3_status(int err);

/*
 * The export a call's handle names, as this client may use it: copied
 * out of the export table during the check, so it stays valid for the
 * call's life whatever a reload does meanwhile.
 */
struct nfs3_export {
	uint32_t id;    /* for every handle minted in the reply */
	uint64_t root;  /* the export's root directory: ".." stops there */
	bool read_only; /* ro rule (or --read-only) */
};

/*
 * Check a handle and the caller's right to use it, and fetch the
 * object's attributes.  NFS3_OK with *exp, *ctx (the caller as the
 * rule squashes it, on the call's loop), *ino and *attr; or
 * NFS3ERR_BADHANDLE (length, version or MAC), NFS3ERR_STALE (export not
 * in the table, or its root unknown; inode gone, generation changed),
 * NFS3ERR_ACCES (no rule of the export admits the client),
 * NFS3ERR_PERM (the rule is secure and the source port is not, as
 * knfsd answers), or the mapped fs_getattr error.
 */
nfsstat3 nfs3_fh_verify(struct rpc_call *call, const nfs_fh3 *fh,
			struct nfs3_export *exp, struct fs_ctx *ctx,
			uint64_t *ino, struct fs_attr *attr);

/* A handle of export_id for attr's inode into fh (freed with the result). */
bool nfs3_fh_make(const struct nfsd *n, uint32_t export_id,
		  const struct fs_attr *attr, nfs_fh3 *fh);

/* post_op_fh3 for attr's inode; none when attr is NULL or memory ran out. */
void nfs3_post_op_fh(const struct nfsd *n, uint32_t export_id,
		     const struct fs_attr *attr, post_op_fh3 *out);

/* A time on the wire: seconds clamped to 32 bits. */
nfstime3 nfs3_time(const struct timespec *ts);

/* fattr3 of attr: fsid is n's, fileid the inode (2.6). */
void nfs3_fattr(const struct nfsd *n, const struct fs_attr *attr, fattr3 *out);

/* post_op_attr of attr; none when attr is NULL. */
void nfs3_post_op_attr(const struct nfsd *n, const struct fs_attr *attr,
		       post_op_attr *out);

/* post_op_attr read afresh from fs; none if ino cannot be read. */
void nfs3_post_op_getattr(const struct nfsd *n, uint64_t ino,
			  post_op_attr *out);

/* wcc_data from what fs reported (RFC 1813 2.6). */
void nfs3_wcc(const struct nfsd *n, const struct fs_wcc *wcc, wcc_data *out);

/*
 * wcc_data for a call that failed before reaching fs: no before, after
 * from attr (none when NULL).  The object did not change, so that is
 * still the truth.
 */
void nfs3_wcc_unchanged(const struct nfsd *n, const struct fs_attr *attr,
			wcc_data *out);

/* sattr3 into fs form: NFS3_OK or NFS3ERR_INVAL (nseconds >= 10^9). */
nfsstat3 nfs3_sattr(const sattr3 *in, struct fs_sattr *out);

/* What a name is for; decides how "." and ".." are treated. */
enum nfs3_name_use {
	NFS3_NAME_LOOKUP, /* looked up: "." and ".." are fine */
	NFS3_NAME_CREATE, /* made: "." and ".." exist already (EXIST) */
	NFS3_NAME_CHANGE  /* removed or renamed: not allowed (INVAL) */
};

/*
 * One path component into out, NUL-terminated: NFS3_OK, NOENT (empty, as
 * POSIX), INVAL (a '/' or NUL byte), NAMETOOLONG (> FS_NAME_MAX bytes),
 * or the use's answer for "." and "..".
 */
nfsstat3 nfs3_name(const filename3 *in, enum nfs3_name_use use,
		   char out[FS_NAME_MAX + 1]);

/* A symlink target into out: NFS3_OK, INVAL (empty or NUL), NAMETOOLONG. */
nfsstat3 nfs3_path(const nfspath3 *in, char out[FS_PATH_MAX + 1]);

/* NFS3ERR_ROFS for a read-only export, else NFS3_OK. */
nfsstat3 nfs3_writable(const struct nfs3_export *exp);

/*
 * Exact XDR sizes for directory replies (RFC 1813 3.3.16/3.3.17 count
 * the encoded bytes).  An entry's size includes the "value follows" word
 * before it; the base covers status, dir attributes, verifier, the list's
 * final FALSE and eof.
 */
size_t nfs3_xdr_readdir_base_size(void);
size_t nfs3_xdr_entry3_size(size_t namelen);
size_t nfs3_xdr_entryplus3_size(size_t namelen, bool attrs, bool fh);
/* The part of an entry READDIRPLUS's dircount counts: fileid, name, cookie. */
size_t nfs3_xdr_dirinfo_size(size_t namelen);

/* --- nfs3_wire.c: hand-written encoders of the hot replies ---------- */

/*
 * Byte-for-byte what the rpcgen encoders write (tests compare them), but
 * straight into the reply buffer in one pass: no size pass, no per-field
 * calls, nothing to free.  Each writes at p and returns the end.
 */
#define NFS3_XDR_FATTR3 84u
/* READ3res up to the data: status, post_op_attr, count, eof, length. */
#define NFS3_XDR_READ_HEAD (4u + 4u + NFS3_XDR_FATTR3 + 4u + 4u + 4u)

uint8_t *nfs3_put_u32(uint8_t *p, uint32_t v);
uint8_t *nfs3_put_u64(uint8_t *p, uint64_t v);
uint8_t *nfs3_put_fattr3(uint8_t *p, const struct nfsd *n,
			 const struct fs_attr *attr);
/* post_op_attr: FALSE, or TRUE and the fattr3 (attr NULL: none). */
uint8_t *nfs3_put_post_op_attr(uint8_t *p, const struct nfsd *n,
			       const struct fs_attr *attr);
/* Successful GETATTR3res, ACCESS3res, LOOKUP3res (dir_attr may be NULL). */
#define NFS3_XDR_GETATTR_OK (4u + NFS3_XDR_FATTR3)
#define NFS3_XDR_ACCESS_OK (4u + 4u + NFS3_XDR_FATTR3 + 4u)
#define NFS3_XDR_LOOKUP_OK_MAX \
	(4u + 4u + HANDLE_LEN + 2u * (4u + NFS3_XDR_FATTR3))
uint8_t *nfs3_put_getattr_ok(uint8_t *p, const struct nfsd *n,
			     const struct fs_attr *attr);
uint8_t *nfs3_put_access_ok(uint8_t *p, const struct nfsd *n,
			    const struct fs_attr *attr, uint32_t access);
uint8_t *nfs3_put_lookup_ok(uint8_t *p, const struct nfsd *n,
			    uint32_t export_id, const struct fs_attr *attr,
			    const struct fs_attr *dir_attr);
/* A successful READ3res up to its data: NFS3_XDR_READ_HEAD bytes. */
uint8_t *nfs3_put_read_head(uint8_t *p, const struct nfsd *n,
			    const struct fs_attr *attr, uint32_t count,
			    bool eof);

/*
 * The arguments of the hot procedures, decoded in place: the handle's
 * bytes are copied into fh[] beside the rpcgen struct (which comes first,
 * so a handler takes the whole as its rpcgen type), WRITE's data and
 * LOOKUP's name point into the request record, which the transport keeps
 * until the call is finished.  Nothing is allocated, so the XDR_FREE pass
 * frees nothing; XDR_ENCODE (tests, sizing) is rpcgen's.  Same bytes
 * accepted and refused as rpcgen's decoders (tests compare them).
 */
#define NFS3_INPLACE_ARGS(name, type) \
	struct name {                 \
		type a;               \
		char fh[NFS3_FHSIZE]; \
	};                            \
	bool_t name##_xdr(XDR *x, struct name *args)

NFS3_INPLACE_ARGS(nfs3_getattr_args, GETATTR3args);
NFS3_INPLACE_ARGS(nfs3_access_args, ACCESS3args);
NFS3_INPLACE_ARGS(nfs3_lookup_args, LOOKUP3args);
NFS3_INPLACE_ARGS(nfs3_read_args, READ3args);
NFS3_INPLACE_ARGS(nfs3_write_args, WRITE3args);
NFS3_INPLACE_ARGS(nfs3_commit_args, COMMIT3args);

/* --- per-call state of the asynchronous procedures ------------------- */

struct nfs3_getattr_call {
	GETATTR3res res; /* first: see the top of this file */
	struct rpc_call *call;
	struct nfsd *n;
	struct nfs3_export exp;
	struct fs_ctx ctx;
	uint64_t ino;
};

struct nfs3_setattr_call {
	SETATTR3res res; /* first: see the top of this file */
	struct rpc_call *call;
	struct nfsd *n;
	struct fs_ctx ctx;
	struct fs_sattr sattr;
	struct timespec guard_ctime;
	struct fs_wcc wcc;
};

struct nfs3_lookup_call {
	LOOKUP3res res;
	struct rpc_call *call;
	struct nfsd *n;
	struct nfs3_export exp;
	struct fs_ctx ctx;
	uint64_t dir;
	char name[FS_NAME_MAX + 1];
};

struct nfs3_read_call {
	READ3res res; /* failures only: success is hand-encoded */
	struct rpc_call *call;
	struct nfsd *n;
	struct fs_ctx ctx;
	uint64_t ino;
	struct fs_io io;
	uint8_t *head; /* the reply body: head, then (copied) data */
	bool spliced;  /* the data went into the call's pipe */
	size_t nread;
	bool eof;
	struct fs_attr attr;
};

struct nfs3_write_call {
	WRITE3res res;
	struct rpc_call *call;
	struct nfsd *n;
	struct fs_ctx ctx;
	struct fs_io io;
	size_t count;
	enum fs_stable committed;
	struct fs_wcc wcc;
	uint8_t verf[NFS3_WRITEVERFSIZE]; /* as the WRITE began */
};

struct nfs3_commit_call {
	COMMIT3res res;
	struct rpc_call *call;
	struct nfsd *n;
	struct fs_ctx ctx;
	struct fs_io io;
	struct fs_wcc wcc;
};

/*
 * CREATE, MKDIR, SYMLINK and MKNOD: one state and one completion.  Their
 * results have the same fields under different type names, so each
 * handler points the completion at its own result's fields.
 */
struct nfs3_create_call {
	union {
		CREATE3res create;
		MKDIR3res mkdir;
		SYMLINK3res symlink;
		MKNOD3res mknod;
	} res;
	struct rpc_call *call;
	struct nfsd *n;
	struct nfs3_export exp;
	struct fs_ctx ctx;
	char name[FS_NAME_MAX + 1];
	char target[FS_PATH_MAX + 1];
	struct fs_sattr sattr;
	uint8_t verf[NFS3_CREATEVERFSIZE];
	uint64_t ino;
	struct fs_attr attr;
	struct fs_wcc dir_wcc;
	nfsstat3 *status;
	post_op_fh3 *obj;
	post_op_attr *obj_attributes;
	wcc_data *ok_wcc, *fail_wcc;
	uint64_t dir;
	enum fs_create_how how;
	enum fs_type type;                       /* MKNOD: what to make */
	uint32_t major, minor;                   /* MKNOD of a device */
	void (*go)(struct nfs3_create_call *st); /* the fs call, once fresh */
};

/* REMOVE and RMDIR, the same way. */
struct nfs3_remove_call {
	union {
		REMOVE3res remove;
		RMDIR3res rmdir;
	} res;
	struct rpc_call *call;
	struct nfsd *n;
	struct fs_ctx ctx;
	char name[FS_NAME_MAX + 1];
	struct fs_wcc dir_wcc;
	nfsstat3 *status;
	wcc_data *ok_wcc, *fail_wcc;
	uint64_t dir;
	bool rmdir;
};

struct nfs3_rename_call {
	RENAME3res res;
	struct rpc_call *call;
	struct nfsd *n;
	struct fs_ctx ctx;
	char from_name[FS_NAME_MAX + 1];
	char to_name[FS_NAME_MAX + 1];
	struct fs_wcc from_wcc, to_wcc;
};

struct nfs3_link_call {
	LINK3res res;
	struct rpc_call *call;
	struct nfsd *n;
	struct fs_ctx ctx;
	uint64_t ino;
	char name[FS_NAME_MAX + 1];
	struct fs_attr attr;
	struct fs_wcc dir_wcc;
};

/* READDIR and READDIRPLUS. */
struct nfs3_readdir_call {
	union {
		READDIR3res readdir;
		READDIRPLUS3res plus;
	} res;
	struct rpc_call *call;
	struct nfsd *n;
	struct nfs3_export exp;
	struct fs_ctx ctx;
	bool plus;
	uint64_t dir;
	struct fs_attr
		dir_attr; /* at verify time: for ".." of the export root */
	uint64_t cookie;
	size_t dircount, maxcount; /* READDIR: both are its count */
	bool reread; /* read again once: the listing ended meanwhile */
};

/* --- handlers (one per procedure, in the proc_*.c files) -------------- */

void nfs3_proc_null(struct rpc_call *call, void *args, void *res);
void nfs3_proc_getattr(struct rpc_call *call, void *args, void *res);
void nfs3_proc_setattr(struct rpc_call *call, void *args, void *res);
void nfs3_proc_lookup(struct rpc_call *call, void *args, void *res);
void nfs3_proc_access(struct rpc_call *call, void *args, void *res);
void nfs3_proc_readlink(struct rpc_call *call, void *args, void *res);
void nfs3_proc_read(struct rpc_call *call, void *args, void *res);
void nfs3_proc_write(struct rpc_call *call, void *args, void *res);
void nfs3_proc_create(struct rpc_call *call, void *args, void *res);
void nfs3_proc_mkdir(struct rpc_call *call, void *args, void *res);
void nfs3_proc_symlink(struct rpc_call *call, void *args, void *res);
void nfs3_proc_mknod(struct rpc_call *call, void *args, void *res);
void nfs3_proc_remove(struct rpc_call *call, void *args, void *res);
void nfs3_proc_rmdir(struct rpc_call *call, void *args, void *res);
void nfs3_proc_rename(struct rpc_call *call, void *args, void *res);
void nfs3_proc_link(struct rpc_call *call, void *args, void *res);
void nfs3_proc_readdir(struct rpc_call *call, void *args, void *res);
void nfs3_proc_readdirplus(struct rpc_call *call, void *args, void *res);
void nfs3_proc_fsstat(struct rpc_call *call, void *args, void *res);
void nfs3_proc_fsinfo(struct rpc_call *call, void *args, void *res);
void nfs3_proc_pathconf(struct rpc_call *call, void *args, void *res);
void nfs3_proc_commit(struct rpc_call *call, void *args, void *res);

#endif
