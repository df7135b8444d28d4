/*
 * nfsd/nfs3_program.c - the NFSv3 program (100003/3): one dispatch table.
 *
 * args_size and res_size are what the transport allocates per call.  An
 * asynchronous procedure's res_size is that of its state struct, which
 * begins with the rpcgen result (see nfsd/nfs3_internal.h).
 *
 * Flags: IDEMPOTENT where a repeat has the same effect and answer (the
 * duplicate-request cache need not replay it); MAKES_WRITE where the
 * call changes the namespace or data; MAKES_IO where it moves file data.
 */
#include <stddef.h>

#include "nfs3_internal.h"

#define NFS3_STATE_FIRST(type)                          \
	_Static_assert(offsetof(struct type, res) == 0, \
		       #type ": the result must come first")

NFS3_STATE_FIRST(nfs3_setattr_call);
NFS3_STATE_FIRST(nfs3_lookup_call);
NFS3_STATE_FIRST(nfs3_read_call);
NFS3_STATE_FIRST(nfs3_write_call);
NFS3_STATE_FIRST(nfs3_commit_call);
NFS3_STATE_FIRST(nfs3_create_call);
NFS3_STATE_FIRST(nfs3_remove_call);
NFS3_STATE_FIRST(nfs3_rename_call);
NFS3_STATE_FIRST(nfs3_link_call);
NFS3_STATE_FIRST(nfs3_readdir_call);

/* NULL: answers, so a client (or rpcinfo -t) knows the server is up. */
void nfs3_proc_null(struct rpc_call *call, void *args, void *res)
{
	(void)args;
	(void)res;
	rpc_call_done(call);
}

static const struct rpc_proc nfs3_procs[] = {
	[NFSPROC3_NULL] = {
		.name = "NULL",
		.handler = nfs3_proc_null,
		.flags = RPC_PROC_IDEMPOTENT | RPC_PROC_AUTH_NONE_OK,
	},
	[NFSPROC3_GETATTR] = {
		.name = "GETATTR",
		.decode = (xdrproc_t)nfs3_getattr_args_xdr,
		.args_size = sizeof(struct nfs3_getattr_args),
		.encode = (xdrproc_t)xdr_GETATTR3res,
		.res_size = sizeof(struct nfs3_getattr_call),
		.handler = nfs3_proc_getattr,
		.flags = RPC_PROC_IDEMPOTENT,
	},
	[NFSPROC3_SETATTR] = {
		.name = "SETATTR",
		.decode = (xdrproc_t)xdr_SETATTR3args,
		.args_size = sizeof(SETATTR3args),
		.encode = (xdrproc_t)xdr_SETATTR3res,
		.res_size = sizeof(struct nfs3_setattr_call),
		.handler = nfs3_proc_setattr,
		.flags = RPC_PROC_MAKES_WRITE,
	},
	[NFSPROC3_LOOKUP] = {
		.name = "LOOKUP",
		.decode = (xdrproc_t)nfs3_lookup_args_xdr,
		.args_size = sizeof(struct nfs3_lookup_args),
		.encode = (xdrproc_t)xdr_LOOKUP3res,
		.res_size = sizeof(struct nfs3_lookup_call),
		.handler = nfs3_proc_lookup,
		.flags = RPC_PROC_IDEMPOTENT,
	},
	[NFSPROC3_ACCESS] = {
		.name = "ACCESS",
		.decode = (xdrproc_t)nfs3_access_args_xdr,
		.args_size = sizeof(struct nfs3_access_args),
		.encode = (xdrproc_t)xdr_ACCESS3res,
		.res_size = sizeof(ACCESS3res),
		.handler = nfs3_proc_access,
		.flags = RPC_PROC_IDEMPOTENT,
	},
	[NFSPROC3_READLINK] = {
		.name = "READLINK",
		.decode = (xdrproc_t)xdr_READLINK3args,
		.args_size = sizeof(READLINK3args),
		.encode = (xdrproc_t)xdr_READLINK3res,
		.res_size = sizeof(READLINK3res),
		.handler = nfs3_proc_readlink,
		.flags = RPC_PROC_IDEMPOTENT,
	},
	[NFSPROC3_READ] = {
		.name = "READ",
		.decode = (xdrproc_t)nfs3_read_args_xdr,
		.args_size = sizeof(struct nfs3_read_args),
		.encode = (xdrproc_t)xdr_READ3res,
		.res_size = sizeof(struct nfs3_read_call),
		.handler = nfs3_proc_read,
		.flags = RPC_PROC_IDEMPOTENT | RPC_PROC_MAKES_IO,
	},
	[NFSPROC3_WRITE] = {
		.name = "WRITE",
		.decode = (xdrproc_t)nfs3_write_args_xdr,
		.args_size = sizeof(struct nfs3_write_args),
		.encode = (xdrproc_t)xdr_WRITE3res,
		.res_size = sizeof(struct nfs3_write_call),
		.handler = nfs3_proc_write,
		.flags = RPC_PROC_MAKES_WRITE | RPC_PROC_MAKES_IO,
	},
	[NFSPROC3_CREATE] = {
		.name = "CREATE",
		.decode = (xdrproc_t)xdr_CREATE3args,
		.args_size = sizeof(CREATE3args),
		.encode = (xdrproc_t)xdr_CREATE3res,
		.res_size = sizeof(struct nfs3_create_call),
		.handler = nfs3_proc_create,
		.flags = RPC_PROC_MAKES_WRITE,
	},
	[NFSPROC3_MKDIR] = {
		.name = "MKDIR",
		.decode = (xdrproc_t)xdr_MKDIR3args,
		.args_size = sizeof(MKDIR3args),
		.encode = (xdrproc_t)xdr_MKDIR3res,
		.res_size = sizeof(struct nfs3_create_call),
		.handler = nfs3_proc_mkdir,
		.flags = RPC_PROC_MAKES_WRITE,
	},
	[NFSPROC3_SYMLINK] = {
		.name = "SYMLINK",
		.decode = (xdrproc_t)xdr_SYMLINK3args,
		.args_size = sizeof(SYMLINK3args),
		.encode = (xdrproc_t)xdr_SYMLINK3res,
		.res_size = sizeof(struct nfs3_create_call),
		.handler = nfs3_proc_symlink,
		.flags = RPC_PROC_MAKES_WRITE,
	},
	[NFSPROC3_MKNOD] = {
		.name = "MKNOD",
		.decode = (xdrproc_t)xdr_MKNOD3args,
		.args_size = sizeof(MKNOD3args),
		.encode = (xdrproc_t)xdr_MKNOD3res,
		.res_size = sizeof(struct nfs3_create_call),
		.handler = nfs3_proc_mknod,
		.flags = RPC_PROC_MAKES_WRITE,
	},
	[NFSPROC3_REMOVE] = {
		.name = "REMOVE",
		.decode = (xdrproc_t)xdr_REMOVE3args,
		.args_size = sizeof(REMOVE3args),
		.encode = (xdrproc_t)xdr_REMOVE3res,
		.res_size = sizeof(struct nfs3_remove_call),
		.handler = nfs3_proc_remove,
		.flags = RPC_PROC_MAKES_WRITE,
	},
	[NFSPROC3_RMDIR] = {
		.name = "RMDIR",
		.decode = (xdrproc_t)xdr_RMDIR3args,
		.args_size = sizeof(RMDIR3args),
		.encode = (xdrproc_t)xdr_RMDIR3res,
		.res_size = sizeof(struct nfs3_remove_call),
		.handler = nfs3_proc_rmdir,
		.flags = RPC_PROC_MAKES_WRITE,
	},
	[NFSPROC3_RENAME] = {
		.name = "RENAME",
		.decode = (xdrproc_t)xdr_RENAME3args,
		.args_size = sizeof(RENAME3args),
		.encode = (xdrproc_t)xdr_RENAME3res,
		.res_size = sizeof(struct nfs3_rename_call),
		.handler = nfs3_proc_rename,
		.flags = RPC_PROC_MAKES_WRITE,
	},
	[NFSPROC3_LINK] = {
		.name = "LINK",
		.decode = (xdrproc_t)xdr_LINK3args,
		.args_size = sizeof(LINK3args),
		.encode = (xdrproc_t)xdr_LINK3res,
		.res_size = sizeof(struct nfs3_link_call),
		.handler = nfs3_proc_link,
		.flags = RPC_PROC_MAKES_WRITE,
	},
	[NFSPROC3_READDIR] = {
		.name = "READDIR",
		.decode = (xdrproc_t)xdr_READDIR3args,
		.args_size = sizeof(READDIR3args),
		.encode = (xdrproc_t)xdr_READDIR3res,
		.res_size = sizeof(struct nfs3_readdir_call),
		.handler = nfs3_proc_readdir,
		.flags = RPC_PROC_IDEMPOTENT,
	},
	[NFSPROC3_READDIRPLUS] = {
		.name = "READDIRPLUS",
		.decode = (xdrproc_t)xdr_READDIRPLUS3args,
		.args_size = sizeof(READDIRPLUS3args),
		.encode = (xdrproc_t)xdr_READDIRPLUS3res,
		.res_size = sizeof(struct nfs3_readdir_call),
		.handler = nfs3_proc_readdirplus,
		.flags = RPC_PROC_IDEMPOTENT,
	},
	[NFSPROC3_FSSTAT] = {
		.name = "FSSTAT",
		.decode = (xdrproc_t)xdr_FSSTAT3args,
		.args_size = sizeof(FSSTAT3args),
		.encode = (xdrproc_t)xdr_FSSTAT3res,
		.res_size = sizeof(FSSTAT3res),
		.handler = nfs3_proc_fsstat,
		.flags = RPC_PROC_IDEMPOTENT,
	},
	[NFSPROC3_FSINFO] = {
		.name = "FSINFO",
		.decode = (xdrproc_t)xdr_FSINFO3args,
		.args_size = sizeof(FSINFO3args),
		.encode = (xdrproc_t)xdr_FSINFO3res,
		.res_size = sizeof(FSINFO3res),
		.handler = nfs3_proc_fsinfo,
		.flags = RPC_PROC_IDEMPOTENT,
	},
	[NFSPROC3_PATHCONF] = {
		.name = "PATHCONF",
		.decode = (xdrproc_t)xdr_PATHCONF3args,
		.args_size = sizeof(PATHCONF3args),
		.encode = (xdrproc_t)xdr_PATHCONF3res,
		.res_size = sizeof(PATHCONF3res),
		.handler = nfs3_proc_pathconf,
		.flags = RPC_PROC_IDEMPOTENT,
	},
	/* Idempotent, and it makes written data durable rather than new. */
	[NFSPROC3_COMMIT] = {
		.name = "COMMIT",
		.decode = (xdrproc_t)nfs3_commit_args_xdr,
		.args_size = sizeof(struct nfs3_commit_args),
		.encode = (xdrproc_t)xdr_COMMIT3res,
		.res_size = sizeof(struct nfs3_commit_call),
		.handler = nfs3_proc_commit,
		.flags = RPC_PROC_IDEMPOTENT | RPC_PROC_MAKES_IO,
	},
};

_Static_assert(sizeof(nfs3_procs) / sizeof(nfs3_procs[0]) == 22,
	       "RFC 1813 defines 22 procedures");

struct rpc_program nfsd_program(struct nfsd *n)
{
	return (struct rpc_program){
		.name = "nfs",
		.prog = NFS_PROGRAM,
		.vers = NFS_V3,
		.procs = nfs3_procs,
		.nprocs = sizeof(nfs3_procs) / sizeof(nfs3_procs[0]),
		.ctx = n,
	};
}
