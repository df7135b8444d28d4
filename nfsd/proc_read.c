/*
 * nfsd/proc_read.c - READ (RFC 1813 3.3.6).
 *
 * A successful reply is hand-encoded into the transport's reply buffer.
 * Its data is never copied in user space: a big READ moves the cache
 * file's pages into a pipe and from there into the socket (splice), a
 * small one (or one the loop has no pipe for) is read straight into the
 * reply buffer after its head, page-aligned where the file offset is (so
 * that --cache-direct can read it with O_DIRECT).  Failures go through rpcgen as usual.
 */
#include <errno.h>
#include <string.h>

#include "metrics/metrics.h"
#include "nfs3_internal.h"

/*
 * READs of at least this many bytes are spliced: io_uring runs a splice
 * on a worker thread, a hand-off that costs more than copying a few KiB.
 */
#define NFS3_SPLICE_MIN (64u << 10)
#define PAGE 4096u

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
	uint32_t n = (uint32_t)st->nread;
	uint8_t *p;

	if (err < 0) {
		st->res.status = nfs3_status(err);
		nfs3_post_op_getattr(
			st->n, st->ino,
			&st->res.READ3res_u.resfail.file_attributes);
		rpc_call_done(st->call);
		return;
	}
	metrics_add(MET_NFS_READ_BYTES, n);
	p = nfs3_put_read_head(st->head, st->n, &st->attr, n, st->eof);
	if (st->spliced) {
		rpc_call_done_splice(st->call, NFS3_XDR_READ_HEAD, n);
		return;
	}
	/* The data is in place after the head; pad the opaque to 4. */
	memset(p + n, 0, (4 - (n & 3)) & 3);
	rpc_call_done_body(st->call, NFS3_XDR_READ_HEAD + ((n + 3) & ~3u));
}

/* READ: at most rtmax bytes (FSINFO). */
void nfs3_proc_read(struct rpc_call *call, void *argp, void *resp)
{
	struct nfs3_read_call *st = resp;
	READ3args *args = argp;
	struct nfs3_export exp;
	struct fs_attr attr;
	nfsstat3 status;
	size_t count, span;
	int pfd = -1;

	st->call = call;
	st->n = rpc_call_ctx(call);
	status = nfs3_fh_verify(call, &args->file, &exp, &st->ctx, &st->ino,
				&attr);
	if (status != NFS3_OK) {
		read_fail(st, status, NULL);
		return;
	}
	if (attr.type != FS_REG) {
		read_fail(st,
			  attr.type == FS_DIR ? NFS3ERR_ISDIR : NFS3ERR_INVAL,
			  &attr);
		return;
	}
	/* 3.3.6: the server may return less than asked for. */
	count = args->count < st->n->rtmax ? args->count : st->n->rtmax;
	/* The pages the range touches, from the first one's start. */
	span = ((args->offset & (PAGE - 1)) + count + PAGE - 1) &
	       ~(size_t)(PAGE - 1);
	if (count >= NFS3_SPLICE_MIN)
		pfd = rpc_call_pipe(call, span);
	st->spliced = pfd >= 0;
	/* Page-aligned data can be read with O_DIRECT (--cache-direct). */
	if (st->spliced)
		st->head = rpc_call_body(call, NFS3_XDR_READ_HEAD);
	else if (args->offset % PAGE)
		st->head = rpc_call_body(call, NFS3_XDR_READ_HEAD + count + 3);
	else
		st->head =
			rpc_call_body_aligned(call, NFS3_XDR_READ_HEAD,
					      NFS3_XDR_READ_HEAD + count + 3);
	if (!st->head) {
		read_fail(st, nfs3_status(-ENOMEM), &attr);
		return;
	}
	if (st->spliced)
		fs_read_splice(st->n->fs, &st->io, &st->ctx, st->ino,
			       args->offset, count, pfd, &st->nread, &st->eof,
			       &st->attr, read_done, st);
	else
		fs_read(st->n->fs, &st->io, &st->ctx, st->ino, args->offset,
			count, st->head + NFS3_XDR_READ_HEAD, &st->nread,
			&st->eof, &st->attr, read_done, st);
}
