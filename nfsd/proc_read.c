/*
 * nfsd/proc_read.c - READ (RFC 1813 3.3.6).
 */
#include <errno.h>
#include <stdlib.h>

#include "metrics/metrics.h"
#include "nfsd/nfs3_internal.h"

static void read_fail(struct nfs3_read_call *st, nfsstat3 status,
		      const struct fs_attr *attr)
{
	st->res.status = status;
	nfs3_post_op_attr(st->n, attr,
			  &st->res.READ3res_u.resfail.file_attributes);
	rpc_call_done(st->call);
}

static void read_done(void *arg, int err)
{
	struct nfs3_read_call *st = arg;
	READ3resok *ok = &st->res.READ3res_u.resok;

	if (err < 0) {
		/* Only the ok arm's data is freed by the transport. */
		free(st->buf);
		st->res.status = nfs3_status(err);
		nfs3_post_op_getattr(st->n, st->ino,
				     &st->res.READ3res_u.resfail.file_attributes);
		rpc_call_done(st->call);
		return;
	}
	st->res.status = NFS3_OK;
	metrics_add(MET_NFS_READ_BYTES, st->nread);
	nfs3_post_op_attr(st->n, &st->attr, &ok->file_attributes);
	ok->count = (count3)st->nread;
	ok->eof = st->eof;
	ok->data.data_len = (u_int)st->nread;
	ok->data.data_val = st->buf;
	rpc_call_done(st->call);
}

/* READ: at most rtmax bytes (FSINFO), into a buffer owned by the result. */
void nfs3_proc_read(struct rpc_call *call, void *argp, void *resp)
{
	struct nfs3_read_call *st = resp;
	READ3args *args = argp;
	struct nfs3_export exp;
	struct fs_attr attr;
	nfsstat3 status;
	size_t count;

	st->call = call;
	st->n = rpc_call_ctx(call);
	status = nfs3_fh_verify(call, &args->file, &exp, &st->ctx, &st->ino,
				&attr);
	if (status != NFS3_OK) {
		read_fail(st, status, NULL);
		return;
	}
	if (attr.type != FS_REG) {
		read_fail(st, attr.type == FS_DIR ? NFS3ERR_ISDIR
						  : NFS3ERR_INVAL, &attr);
		return;
	}
	/* 3.3.6: the server may return less than asked for. */
	count = args->count < st->n->rtmax ? args->count : st->n->rtmax;
	st->buf = malloc(count ? count : 1);
	if (!st->buf) {
		read_fail(st, nfs3_status(-ENOMEM), &attr);
		return;
	}
	fs_read(st->n->fs, &st->ctx, st->ino, args->offset, count, st->buf,
		&st->nread, &st->eof, &st->attr, read_done, st);
}
