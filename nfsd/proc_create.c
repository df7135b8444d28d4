/*
 * nfsd/proc_create.c - CREATE, MKDIR, SYMLINK and MKNOD
 * (RFC 1813 3.3.8-3.3.11).
 *
 * All four make a name in a directory and answer with the new object's
 * handle and attributes and the directory's wcc data, so they share one
 * state (struct nfs3_create_call) and one completion.
 */
#include <string.h>

#include "nfs3_internal.h"

static void create_finish(struct nfs3_create_call *st, nfsstat3 status)
{
	*st->status = status;
	if (status == NFS3_OK) {
		nfs3_post_op_fh(st->n, st->exp.id, &st->attr, st->obj);
		nfs3_post_op_attr(st->n, &st->attr, st->obj_attributes);
		nfs3_wcc(st->n, &st->dir_wcc, st->ok_wcc);
	} else {
		nfs3_wcc(st->n, &st->dir_wcc, st->fail_wcc);
	}
	rpc_call_done(st->call);
}

static void create_done(void *arg, int err)
{
	create_finish(arg, nfs3_status(err));
}

/*
 * The checks all four share: directory handle, a directory, a new name,
 * a writable export.  On NFS3_OK st->dir is the directory's inode; on
 * failure the call has been answered.
 */
static bool create_begin(struct nfs3_create_call *st, struct rpc_call *call,
			 const diropargs3 *where)
{
	nfsstat3 status;

	st->call = call;
	st->n = rpc_call_ctx(call);
	status = nfs3_fh_verify(call, &where->dir, &st->exp, &st->ctx, &st->dir,
				&st->dir_wcc.after);
	if (status != NFS3_OK) {
		create_finish(st, status);
		return false;
	}
	st->dir_wcc.after_ok = true;
	if (st->dir_wcc.after.type != FS_DIR)
		status = NFS3ERR_NOTDIR;
	else
		status = nfs3_name(&where->name, NFS3_NAME_CREATE, st->name);
	if (status == NFS3_OK)
		status = nfs3_writable(&st->exp);
	if (status != NFS3_OK) {
		create_finish(st, status);
		return false;
	}
	return true;
}

static void create_revalidated(void *arg, int err)
{
	struct nfs3_create_call *st = arg;

	if (err) {
		create_finish(st, nfs3_status(err));
		return;
	}
	/* From here on fs fills the directory's wcc. */
	st->dir_wcc.after_ok = false;
	st->go(st);
}

/*
 * Hand the call to fs once the directory's listing is fresh: a name that
 * exists in the store but was never listed (a directory only ever seen as
 * a prefix, or not looked at since the TTL) must be found, or CREATE and
 * MKDIR would answer OK over it and hide it.
 */
static void create_go(struct nfs3_create_call *st,
		      void (*go)(struct nfs3_create_call *st))
{
	st->go = go;
	fs_revalidate(st->n->fs, &st->ctx, st->dir, false, create_revalidated,
		      st);
}

static void create_go_create(struct nfs3_create_call *st)
{
	fs_create(st->n->fs, &st->ctx, st->dir, st->name, st->how, &st->sattr,
		  st->verf, &st->ino, &st->attr, &st->dir_wcc, create_done, st);
}

static void create_go_mkdir(struct nfs3_create_call *st)
{
	fs_mkdir(st->n->fs, &st->ctx, st->dir, st->name, &st->sattr, &st->ino,
		 &st->attr, &st->dir_wcc, create_done, st);
}

static void create_go_symlink(struct nfs3_create_call *st)
{
	fs_symlink(st->n->fs, &st->ctx, st->dir, st->name, st->target,
		   &st->sattr, &st->ino, &st->attr, &st->dir_wcc, create_done,
		   st);
}

static void create_go_mknod(struct nfs3_create_call *st)
{
	fs_mknod(st->n->fs, &st->ctx, st->dir, st->name, st->type, &st->sattr,
		 st->major, st->minor, &st->ino, &st->attr, &st->dir_wcc,
		 create_done, st);
}

/* CREATE: UNCHECKED and GUARDED with attributes, EXCLUSIVE with a verifier. */
void nfs3_proc_create(struct rpc_call *call, void *argp, void *resp)
{
	struct nfs3_create_call *st = resp;
	CREATE3args *args = argp;
	CREATE3resok *ok = &st->res.create.CREATE3res_u.resok;
	enum fs_create_how how;
	nfsstat3 status = NFS3_OK;

	st->status = &st->res.create.status;
	st->obj = &ok->obj;
	st->obj_attributes = &ok->obj_attributes;
	st->ok_wcc = &ok->dir_wcc;
	st->fail_wcc = &st->res.create.CREATE3res_u.resfail.dir_wcc;
	if (!create_begin(st, call, &args->where))
		return;
	/* The createhow3 decoder admits only the three modes. */
	if (args->how.mode == EXCLUSIVE) {
		/*
		 * 3.3.8: no attributes travel; fs keeps the verifier so a
		 * retry finds its own file, and the client sets the
		 * attributes afterwards with SETATTR.
		 */
		how = FS_CREATE_EXCLUSIVE;
		memcpy(st->verf, args->how.createhow3_u.verf,
		       NFS3_CREATEVERFSIZE);
	} else {
		how = args->how.mode == GUARDED ? FS_CREATE_GUARDED
						: FS_CREATE_UNCHECKED;
		status = nfs3_sattr(&args->how.createhow3_u.obj_attributes,
				    &st->sattr);
	}
	if (status != NFS3_OK) {
		create_finish(st, status);
		return;
	}
	st->how = how;
	create_go(st, create_go_create);
}

/* MKDIR. */
void nfs3_proc_mkdir(struct rpc_call *call, void *argp, void *resp)
{
	struct nfs3_create_call *st = resp;
	MKDIR3args *args = argp;
	MKDIR3resok *ok = &st->res.mkdir.MKDIR3res_u.resok;
	nfsstat3 status;

	st->status = &st->res.mkdir.status;
	st->obj = &ok->obj;
	st->obj_attributes = &ok->obj_attributes;
	st->ok_wcc = &ok->dir_wcc;
	st->fail_wcc = &st->res.mkdir.MKDIR3res_u.resfail.dir_wcc;
	if (!create_begin(st, call, &args->where))
		return;
	status = nfs3_sattr(&args->attributes, &st->sattr);
	if (status != NFS3_OK) {
		create_finish(st, status);
		return;
	}
	create_go(st, create_go_mkdir);
}

/* SYMLINK: the target is stored as given, never resolved by the server. */
void nfs3_proc_symlink(struct rpc_call *call, void *argp, void *resp)
{
	struct nfs3_create_call *st = resp;
	SYMLINK3args *args = argp;
	SYMLINK3resok *ok = &st->res.symlink.SYMLINK3res_u.resok;
	nfsstat3 status;

	st->status = &st->res.symlink.status;
	st->obj = &ok->obj;
	st->obj_attributes = &ok->obj_attributes;
	st->ok_wcc = &ok->dir_wcc;
	st->fail_wcc = &st->res.symlink.SYMLINK3res_u.resfail.dir_wcc;
	if (!create_begin(st, call, &args->where))
		return;
	status = nfs3_path(&args->symlink.symlink_data, st->target);
	if (status == NFS3_OK)
		status = nfs3_sattr(&args->symlink.symlink_attributes,
				    &st->sattr);
	if (status != NFS3_OK) {
		create_finish(st, status);
		return;
	}
	create_go(st, create_go_symlink);
}

/*
 * MKNOD: devices, sockets and FIFOs only (3.3.11: other types are
 * BADTYPE); each becomes a zero-byte object with its type in its mode.
 */
void nfs3_proc_mknod(struct rpc_call *call, void *argp, void *resp)
{
	struct nfs3_create_call *st = resp;
	MKNOD3args *args = argp;
	MKNOD3resok *ok = &st->res.mknod.MKNOD3res_u.resok;
	const sattr3 *sattr;
	uint32_t major = 0, minor = 0;
	nfsstat3 status;

	st->status = &st->res.mknod.status;
	st->obj = &ok->obj;
	st->obj_attributes = &ok->obj_attributes;
	st->ok_wcc = &ok->dir_wcc;
	st->fail_wcc = &st->res.mknod.MKNOD3res_u.resfail.dir_wcc;
	if (!create_begin(st, call, &args->where))
		return;
	switch (args->what.type) {
	case NF3CHR:
	case NF3BLK:
		sattr = &args->what.mknoddata3_u.device.dev_attributes;
		major = args->what.mknoddata3_u.device.spec.specdata1;
		minor = args->what.mknoddata3_u.device.spec.specdata2;
		break;
	case NF3SOCK:
	case NF3FIFO:
		sattr = &args->what.mknoddata3_u.pipe_attributes;
		break;
	default:
		create_finish(st, NFS3ERR_BADTYPE);
		return;
	}
	status = nfs3_sattr(sattr, &st->sattr);
	if (status != NFS3_OK) {
		create_finish(st, status);
		return;
	}
	/* ftype3 is numbered as enum fs_type. */
	st->type = (enum fs_type)args->what.type;
	st->major = major;
	st->minor = minor;
	create_go(st, create_go_mknod);
}
