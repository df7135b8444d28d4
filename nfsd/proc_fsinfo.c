/*
 * nfsd/proc_fsinfo.c - FSSTAT, FSINFO and PATHCONF (RFC 1813 3.3.18-20).
 */
#include "nfs3_internal.h"

/* Transfer sizes are multiples of a page: the cache's unit of I/O. */
#define NFS3_IOMULT 4096u

/* FSSTAT: capacity and file counts from fs. */
void nfs3_proc_fsstat(struct rpc_call *call, void *argp, void *resp)
{
	struct nfsd *n = rpc_call_ctx(call);
	FSSTAT3args *args = argp;
	FSSTAT3res *res = resp;
	FSSTAT3resok *ok = &res->FSSTAT3res_u.resok;
	struct fs_statfs sf;
	struct nfs3_export exp;
	struct fs_attr attr;
	struct fs_ctx ctx;
	uint64_t ino;

	res->status =
		nfs3_fh_verify(call, &args->fsroot, &exp, &ctx, &ino, &attr);
	if (res->status != NFS3_OK) {
		nfs3_post_op_attr(n, NULL,
				  &res->FSSTAT3res_u.resfail.obj_attributes);
		rpc_call_done(call);
		return;
	}
	res->status = nfs3_status(fs_statfs(n->fs, &sf));
	if (res->status != NFS3_OK) {
		nfs3_post_op_attr(n, &attr,
				  &res->FSSTAT3res_u.resfail.obj_attributes);
		rpc_call_done(call);
		return;
	}
	nfs3_post_op_attr(n, &attr, &ok->obj_attributes);
	ok->tbytes = sf.total_bytes;
	ok->fbytes = sf.free_bytes;
	ok->abytes = sf.avail_bytes;
	ok->tfiles = sf.total_files;
	ok->ffiles = sf.free_files;
	ok->afiles = sf.avail_files;
	/* The numbers change with every write: never cache them. */
	ok->invarsec = 0;
	rpc_call_done(call);
}

/* FSINFO: the server's limits and preferences (3.3.19). */
void nfs3_proc_fsinfo(struct rpc_call *call, void *argp, void *resp)
{
	struct nfsd *n = rpc_call_ctx(call);
	FSINFO3args *args = argp;
	FSINFO3res *res = resp;
	FSINFO3resok *ok = &res->FSINFO3res_u.resok;
	struct nfs3_export exp;
	struct fs_attr attr;
	struct fs_ctx ctx;
	uint64_t ino;

	res->status =
		nfs3_fh_verify(call, &args->fsroot, &exp, &ctx, &ino, &attr);
	if (res->status != NFS3_OK) {
		nfs3_post_op_attr(n, NULL,
				  &res->FSINFO3res_u.resfail.obj_attributes);
		rpc_call_done(call);
		return;
	}
	nfs3_post_op_attr(n, &attr, &ok->obj_attributes);
	ok->rtmax = n->rtmax;
	ok->rtpref = n->rtmax;
	ok->rtmult = NFS3_IOMULT;
	ok->wtmax = n->wtmax;
	ok->wtpref = n->wtmax;
	ok->wtmult = NFS3_IOMULT;
	ok->dtpref = NFS3_DIR_MAX;
	ok->maxfilesize = NFS3_MAXFILESIZE;
	/* Times are kept to the nanosecond. */
	ok->time_delta.seconds = 0;
	ok->time_delta.nseconds = 1;
	ok->properties =
		FSF3_LINK | FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME;
	rpc_call_done(call);
}

/* PATHCONF: POSIX limits of the export (3.3.20). */
void nfs3_proc_pathconf(struct rpc_call *call, void *argp, void *resp)
{
	struct nfsd *n = rpc_call_ctx(call);
	PATHCONF3args *args = argp;
	PATHCONF3res *res = resp;
	PATHCONF3resok *ok = &res->PATHCONF3res_u.resok;
	struct nfs3_export exp;
	struct fs_attr attr;
	struct fs_ctx ctx;
	uint64_t ino;

	res->status =
		nfs3_fh_verify(call, &args->object, &exp, &ctx, &ino, &attr);
	if (res->status != NFS3_OK) {
		nfs3_post_op_attr(n, NULL,
				  &res->PATHCONF3res_u.resfail.obj_attributes);
		rpc_call_done(call);
		return;
	}
	nfs3_post_op_attr(n, &attr, &ok->obj_attributes);
	ok->linkmax = FS_LINK_MAX;
	ok->name_max = FS_NAME_MAX;
	ok->no_trunc = TRUE; /* long names are refused, never cut */
	ok->chown_restricted = TRUE;
	ok->case_insensitive = FALSE; /* S3 keys are case-sensitive */
	ok->case_preserving = TRUE;
	rpc_call_done(call);
}
