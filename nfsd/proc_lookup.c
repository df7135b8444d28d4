/*
 * nfsd/proc_lookup.c - LOOKUP and READLINK (RFC 1813 3.3.3, 3.3.5).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nfs3_internal.h"

static void lookup_fail(struct nfs3_lookup_call *st, nfsstat3 status,
			const struct fs_attr *dir_attr)
{
	st->res.status = status;
	nfs3_post_op_attr(st->n, dir_attr,
			  &st->res.LOOKUP3res_u.resfail.dir_attributes);
	rpc_call_done(st->call);
}

/* The directory is fresh enough: look the name up and answer. */
static void lookup_revalidated(void *arg, int err)
{
	struct nfs3_lookup_call *st = arg;
	LOOKUP3resok *ok = &st->res.LOOKUP3res_u.resok;
	struct fs_attr attr, dir_attr;
	const struct fs_attr *dp;
	const char *name = st->name;
	uint8_t *p, *end;
	bool dir_ok = false;
	uint64_t ino;

	/*
	 * ".." of the export root is the root itself: the client must not
	 * get a handle to what lies above the export.
	 */
	if (st->dir == st->exp.root && strcmp(name, "..") == 0)
		name = ".";
	/* Read with the lookup: revalidation may have changed the dir. */
	if (err == 0)
		err = fs_lookup_at(st->n->fs, &st->ctx, st->dir, name, &ino,
				   &attr, &dir_attr, &dir_ok);
	if (!dir_ok)
		dir_ok = fs_getattr(st->n->fs, st->dir, &dir_attr) == 0;
	dp = dir_ok ? &dir_attr : NULL;
	if (err < 0) {
		lookup_fail(st, nfs3_status(err), dp);
		return;
	}
	p = rpc_call_body(st->call, NFS3_XDR_LOOKUP_OK_MAX);
	if (p) {
		end = nfs3_put_lookup_ok(p, st->n, st->exp.id, &attr, dp);
		rpc_call_done_body(st->call, (size_t)(end - p));
		return;
	}
	if (!nfs3_fh_make(st->n, st->exp.id, &attr, &ok->object)) {
		lookup_fail(st, nfs3_status(-ENOMEM), dp);
		return;
	}
	st->res.status = NFS3_OK;
	nfs3_post_op_attr(st->n, &attr, &ok->obj_attributes);
	nfs3_post_op_attr(st->n, dp, &ok->dir_attributes);
	rpc_call_done(st->call);
}

/* LOOKUP: revalidate the directory against the store, then look up. */
void nfs3_proc_lookup(struct rpc_call *call, void *argp, void *resp)
{
	struct nfs3_lookup_call *st = resp;
	LOOKUP3args *args = argp;
	struct fs_attr dir_attr;
	nfsstat3 status;

	st->call = call;
	st->n = rpc_call_ctx(call);
	status = nfs3_fh_verify(call, &args->what.dir, &st->exp, &st->ctx,
				&st->dir, &dir_attr);
	if (status != NFS3_OK) {
		lookup_fail(st, status, NULL);
		return;
	}
	if (dir_attr.type != FS_DIR)
		status = NFS3ERR_NOTDIR;
	else
		status =
			nfs3_name(&args->what.name, NFS3_NAME_LOOKUP, st->name);
	if (status != NFS3_OK) {
		lookup_fail(st, status, &dir_attr);
		return;
	}
	/* The handle check just read the directory: fresh, nothing to do. */
	if (dir_attr.listed)
		lookup_revalidated(st, 0);
	else
		fs_revalidate_name(st->n->fs, &st->ctx, st->dir, st->name,
				   lookup_revalidated, st);
}

/* READLINK: the target as stored; only symlinks have one (3.3.5). */
void nfs3_proc_readlink(struct rpc_call *call, void *argp, void *resp)
{
	struct nfsd *n = rpc_call_ctx(call);
	READLINK3args *args = argp;
	READLINK3res *res = resp;
	struct nfs3_export exp;
	struct fs_attr attr, now;
	struct fs_ctx ctx;
	char *buf = NULL;
	size_t len = 0;
	uint64_t ino;
	int err;

	res->status =
		nfs3_fh_verify(call, &args->symlink, &exp, &ctx, &ino, &attr);
	if (res->status != NFS3_OK) {
		nfs3_post_op_attr(
			n, NULL,
			&res->READLINK3res_u.resfail.symlink_attributes);
		rpc_call_done(call);
		return;
	}
	if (attr.type != FS_LNK) {
		res->status = NFS3ERR_INVAL;
	} else {
		buf = malloc(FS_PATH_MAX + 1);
		err = buf ? fs_readlink(n->fs, &ctx, ino, buf, FS_PATH_MAX + 1,
					&len, &now)
			  : -ENOMEM;
		res->status = nfs3_status(err);
	}
	if (res->status != NFS3_OK) {
		free(buf);
		nfs3_post_op_attr(
			n, &attr,
			&res->READLINK3res_u.resfail.symlink_attributes);
		rpc_call_done(call);
		return;
	}
	/* buf is the result's now: freed with it by the transport. */
	res->READLINK3res_u.resok.data.nfspath3_len = (u_int)len;
	res->READLINK3res_u.resok.data.nfspath3_val = buf;
	nfs3_post_op_attr(n, &now,
			  &res->READLINK3res_u.resok.symlink_attributes);
	rpc_call_done(call);
}
