/*
 * nfsd/proc_remove.c - REMOVE and RMDIR (RFC 1813 3.3.12, 3.3.13).
 *
 * Both take a name out of a directory and answer with the directory's
 * wcc data: one state (struct nfs3_remove_call) and one completion.
 */
#include "nfs3_internal.h"

static void remove_finish(struct nfs3_remove_call *st, nfsstat3 status)
{
	*st->status = status;
	nfs3_wcc(st->n, &st->dir_wcc,
		 status == NFS3_OK ? st->ok_wcc : st->fail_wcc);
	rpc_call_done(st->call);
}

static void remove_done(void *arg, int err)
{
	remove_finish(arg, nfs3_status(err));
}

/*
 * The checks both share.  Returns true with *dir set when the call may
 * go to fs; otherwise the call has been answered.  "." and ".." are
 * refused here (INVAL, as POSIX rmdir) rather than trusted to fs.
 */
static bool remove_begin(struct nfs3_remove_call *st, struct rpc_call *call,
			 const diropargs3 *object, uint64_t *dir)
{
	struct nfs3_export exp;
	nfsstat3 status;

	st->call = call;
	st->n = rpc_call_ctx(call);
	status = nfs3_fh_verify(call, &object->dir, &exp, &st->ctx, dir,
				&st->dir_wcc.after);
	if (status != NFS3_OK) {
		remove_finish(st, status);
		return false;
	}
	st->dir_wcc.after_ok = true;
	if (st->dir_wcc.after.type != FS_DIR)
		status = NFS3ERR_NOTDIR;
	else
		status = nfs3_name(&object->name, NFS3_NAME_CHANGE, st->name);
	if (status == NFS3_OK)
		status = nfs3_writable(&exp);
	if (status != NFS3_OK) {
		remove_finish(st, status);
		return false;
	}
	return true;
}

static void remove_revalidated(void *arg, int err)
{
	struct nfs3_remove_call *st = arg;

	if (err) {
		remove_finish(st, nfs3_status(err));
		return;
	}
	/* From here on fs fills the directory's wcc. */
	st->dir_wcc.after_ok = false;
	if (st->rmdir)
		fs_rmdir(st->n->fs, &st->ctx, st->dir, st->name, &st->dir_wcc,
			 remove_done, st);
	else
		fs_remove(st->n->fs, &st->ctx, st->dir, st->name, &st->dir_wcc,
			  remove_done, st);
}

/*
 * Remove once the directory's listing is fresh, so a name that exists in
 * the store but was not yet listed is found rather than answered NOENT.
 */
static void remove_go(struct nfs3_remove_call *st, uint64_t dir, bool rmdir)
{
	st->dir = dir;
	st->rmdir = rmdir;
	fs_revalidate(st->n->fs, &st->ctx, dir, false, remove_revalidated, st);
}

/* REMOVE a non-directory. */
void nfs3_proc_remove(struct rpc_call *call, void *argp, void *resp)
{
	struct nfs3_remove_call *st = resp;
	REMOVE3args *args = argp;
	uint64_t dir;

	st->status = &st->res.remove.status;
	st->ok_wcc = &st->res.remove.REMOVE3res_u.resok.dir_wcc;
	st->fail_wcc = &st->res.remove.REMOVE3res_u.resfail.dir_wcc;
	if (!remove_begin(st, call, &args->object, &dir))
		return;
	remove_go(st, dir, false);
}

/* RMDIR an empty directory. */
void nfs3_proc_rmdir(struct rpc_call *call, void *argp, void *resp)
{
	struct nfs3_remove_call *st = resp;
	RMDIR3args *args = argp;
	uint64_t dir;

	st->status = &st->res.rmdir.status;
	st->ok_wcc = &st->res.rmdir.RMDIR3res_u.resok.dir_wcc;
	st->fail_wcc = &st->res.rmdir.RMDIR3res_u.resfail.dir_wcc;
	if (!remove_begin(st, call, &args->object, &dir))
		return;
	remove_go(st, dir, true);
}
