/*
 * nfsd/proc_rename.c - RENAME and LINK (RFC 1813 3.3.14, 3.3.15).
 */
#include "nfs3_internal.h"

static void rename_finish(struct nfs3_rename_call *st, nfsstat3 status)
{
	RENAME3resok *ok = &st->res.RENAME3res_u.resok;
	RENAME3resfail *fail = &st->res.RENAME3res_u.resfail;

	st->res.status = status;
	nfs3_wcc(st->n, &st->from_wcc,
		 status == NFS3_OK ? &ok->fromdir_wcc : &fail->fromdir_wcc);
	nfs3_wcc(st->n, &st->to_wcc,
		 status == NFS3_OK ? &ok->todir_wcc : &fail->todir_wcc);
	rpc_call_done(st->call);
}

static void rename_done(void *arg, int err)
{
	rename_finish(arg, nfs3_status(err));
}

/* Check one side of a RENAME: handle, a directory, a name. */
static nfsstat3 rename_side(struct rpc_call *call, const diropargs3 *side,
			    struct nfs3_export *exp, struct fs_ctx *ctx,
			    uint64_t *dir, struct fs_wcc *wcc, char *name)
{
	nfsstat3 status =
		nfs3_fh_verify(call, &side->dir, exp, ctx, dir, &wcc->after);

	if (status != NFS3_OK)
		return status;
	wcc->after_ok = true;
	if (wcc->after.type != FS_DIR)
		return NFS3ERR_NOTDIR;
	/* "." and ".." can be neither source nor target (INVAL, as POSIX). */
	return nfs3_name(&side->name, NFS3_NAME_CHANGE, name);
}

/* RENAME, POSIX rules (fs): replaces a compatible target atomically. */
void nfs3_proc_rename(struct rpc_call *call, void *argp, void *resp)
{
	struct nfs3_rename_call *st = resp;
	RENAME3args *args = argp;
	struct nfs3_export exp, to_exp;
	uint64_t from_dir, to_dir;
	struct fs_ctx to_ctx;
	nfsstat3 status;

	st->call = call;
	st->n = rpc_call_ctx(call);
	status = rename_side(call, &args->from, &exp, &st->ctx, &from_dir,
			     &st->from_wcc, st->from_name);
	if (status == NFS3_OK)
		status = rename_side(call, &args->to, &to_exp, &to_ctx, &to_dir,
				     &st->to_wcc, st->to_name);
	/*
	 * Two exports are two file systems to the client; knfsd refuses
	 * a rename between them with XDEV (3.3.14), and so do we: else a
	 * directory could be moved out of a subdirectory export.
	 */
	if (status == NFS3_OK && exp.id != to_exp.id)
		status = NFS3ERR_XDEV;
	if (status == NFS3_OK)
		status = nfs3_writable(&exp);
	if (status != NFS3_OK) {
		rename_finish(st, status);
		return;
	}
	st->from_wcc.after_ok = false;
	st->to_wcc.after_ok = false;
	fs_rename(st->n->fs, &st->ctx, from_dir, st->from_name, to_dir,
		  st->to_name, &st->from_wcc, &st->to_wcc, rename_done, st);
}

static void link_finish(struct nfs3_link_call *st, nfsstat3 status,
			const struct fs_attr *file_attr)
{
	LINK3resok *ok = &st->res.LINK3res_u.resok;
	LINK3resfail *fail = &st->res.LINK3res_u.resfail;

	st->res.status = status;
	nfs3_post_op_attr(st->n, file_attr,
			  status == NFS3_OK ? &ok->file_attributes
					    : &fail->file_attributes);
	nfs3_wcc(st->n, &st->dir_wcc,
		 status == NFS3_OK ? &ok->linkdir_wcc : &fail->linkdir_wcc);
	rpc_call_done(st->call);
}

static void link_done(void *arg, int err)
{
	struct nfs3_link_call *st = arg;
	struct fs_attr now;

	if (err == 0) {
		link_finish(st, NFS3_OK, &st->attr);
		return;
	}
	/* fs need not fill attr on failure: read the file afresh. */
	link_finish(st, nfs3_status(err),
		    fs_getattr(st->n->fs, st->ino, &now) == 0 ? &now : NULL);
}

/* LINK: another name for a file, in the same export (else XDEV). */
void nfs3_proc_link(struct rpc_call *call, void *argp, void *resp)
{
	struct nfs3_link_call *st = resp;
	LINK3args *args = argp;
	struct nfs3_export exp, dir_exp;
	struct fs_attr file_attr;
	struct fs_ctx dir_ctx;
	nfsstat3 status;
	uint64_t dir;

	st->call = call;
	st->n = rpc_call_ctx(call);
	status = nfs3_fh_verify(call, &args->file, &exp, &st->ctx, &st->ino,
				&file_attr);
	if (status != NFS3_OK) {
		link_finish(st, status, NULL);
		return;
	}
	status = nfs3_fh_verify(call, &args->link.dir, &dir_exp, &dir_ctx, &dir,
				&st->dir_wcc.after);
	if (status != NFS3_OK) {
		link_finish(st, status, &file_attr);
		return;
	}
	st->dir_wcc.after_ok = true;
	if (st->dir_wcc.after.type != FS_DIR)
		status = NFS3ERR_NOTDIR;
	else
		status =
			nfs3_name(&args->link.name, NFS3_NAME_CREATE, st->name);
	/* As RENAME: a link between two exports is XDEV (3.3.15). */
	if (status == NFS3_OK && exp.id != dir_exp.id)
		status = NFS3ERR_XDEV;
	if (status == NFS3_OK)
		status = nfs3_writable(&exp);
	if (status != NFS3_OK) {
		link_finish(st, status, &file_attr);
		return;
	}
	st->dir_wcc.after_ok = false;
	fs_link(st->n->fs, &st->ctx, st->ino, dir, st->name, &st->attr,
		&st->dir_wcc, link_done, st);
}
