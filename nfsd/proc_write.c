/*
 * nfsd/proc_write.c - WRITE and COMMIT (RFC 1813 3.3.7, 3.3.21).
 *
 * Both answer with the write verifier, fixed for the life of the process
 * and new on every start: a client that sees it change knows that the
 * server restarted and resends every UNSTABLE write not yet committed.
 */
#include <string.h>

#include "metrics/metrics.h"
#include "nfs3_internal.h"

static void write_finish(struct nfs3_write_call *st, nfsstat3 status)
{
	WRITE3resok *ok = &st->res.WRITE3res_u.resok;

	st->res.status = status;
	if (status != NFS3_OK) {
		nfs3_wcc(st->n, &st->wcc,
			 &st->res.WRITE3res_u.resfail.file_wcc);
		rpc_call_done(st->call);
		return;
	}
	nfs3_wcc(st->n, &st->wcc, &ok->file_wcc);
	metrics_add(MET_NFS_WRITE_BYTES, st->count);
	ok->count = (count3)st->count;
	ok->committed = (stable_how)st->committed;
	memcpy(ok->verf, st->verf, NFS3_WRITEVERFSIZE);
	rpc_call_done(st->call);
}

static void write_done(void *arg, int err)
{
	write_finish(arg, nfs3_status(err));
}

/* WRITE: count must match the data; at most wtmax of it is written. */
void nfs3_proc_write(struct rpc_call *call, void *argp, void *resp)
{
	struct nfs3_write_call *st = resp;
	WRITE3args *args = argp;
	struct nfs3_export exp;
	nfsstat3 status;
	uint64_t ino;

	st->call = call;
	st->n = rpc_call_ctx(call);
	/* Taken before the data lands: should this node drop it later (its
	 * file taken over, see fs_write_epoch), the COMMIT's differs. */
	nfsd_write_verf(st->n, st->verf);
	status = nfs3_fh_verify(call, &args->file, &exp, &st->ctx, &ino,
				&st->wcc.after);
	if (status != NFS3_OK) {
		write_finish(st, status);
		return;
	}
	st->wcc.after_ok = true;
	status = nfs3_writable(&exp);
	if (status == NFS3_OK && st->wcc.after.type != FS_REG)
		status = st->wcc.after.type == FS_DIR ? NFS3ERR_ISDIR
						      : NFS3ERR_INVAL;
	/* 3.3.7: count is the data's length; a mismatch is a broken call. */
	if (status == NFS3_OK && args->count != args->data.data_len)
		status = NFS3ERR_INVAL;
	/* rpcgen does not range-check enums. */
	if (status == NFS3_OK && args->stable != UNSTABLE &&
	    args->stable != DATA_SYNC && args->stable != FILE_SYNC)
		status = NFS3ERR_INVAL;
	if (status != NFS3_OK) {
		write_finish(st, status);
		return;
	}
	st->wcc.after_ok = false;
	/* A short write is legal (3.3.7): the client sends the rest. */
	st->count = args->count < st->n->wtmax ? args->count : st->n->wtmax;
	/* stable_how is numbered as enum fs_stable. */
	fs_write(st->n->fs, &st->io, &st->ctx, ino, args->offset,
		 args->data.data_val, st->count, (enum fs_stable)args->stable,
		 &st->committed, &st->wcc, write_done, st);
}

static void commit_finish(struct nfs3_commit_call *st, nfsstat3 status)
{
	st->res.status = status;
	if (status != NFS3_OK) {
		nfs3_wcc(st->n, &st->wcc,
			 &st->res.COMMIT3res_u.resfail.file_wcc);
	} else {
		nfs3_wcc(st->n, &st->wcc, &st->res.COMMIT3res_u.resok.file_wcc);
		nfsd_write_verf(st->n,
				(uint8_t *)st->res.COMMIT3res_u.resok.verf);
	}
	rpc_call_done(st->call);
}

static void commit_done(void *arg, int err)
{
	commit_finish(arg, nfs3_status(err));
}

/*
 * COMMIT: the whole file is made stable, whatever offset and count say
 * (3.3.21 allows committing more than asked).
 */
void nfs3_proc_commit(struct rpc_call *call, void *argp, void *resp)
{
	struct nfs3_commit_call *st = resp;
	COMMIT3args *args = argp;
	struct nfs3_export exp;
	nfsstat3 status;
	uint64_t ino;

	st->call = call;
	st->n = rpc_call_ctx(call);
	/*
	 * No ROFS here: COMMIT changes nothing a client can see, and data
	 * written before a reload made the export ro must still reach
	 * stable storage.
	 */
	status = nfs3_fh_verify(call, &args->file, &exp, &st->ctx, &ino,
				&st->wcc.after);
	if (status != NFS3_OK) {
		commit_finish(st, status);
		return;
	}
	fs_commit(st->n->fs, &st->io, &st->ctx, ino, &st->wcc, commit_done, st);
}
