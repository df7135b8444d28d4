/*
 * nfsd/proc_attr.c - GETATTR, SETATTR and ACCESS (RFC 1813 3.3.1-3.3.4).
 */
#include "nfs3_internal.h"

/* GETATTR: the attributes the handle check just read are the answer. */
static void getattr_reply(struct nfs3_getattr_call *st, int err,
			  const struct fs_attr *attr)
{
	uint8_t *p;

	st->res.status = nfs3_status(err);
	if (st->res.status == NFS3_OK &&
	    (p = rpc_call_body(st->call, NFS3_XDR_GETATTR_OK))) {
		uint8_t *end = nfs3_put_getattr_ok(p, st->n, attr);

		rpc_call_done_body(st->call, (size_t)(end - p));
		return;
	}
	if (st->res.status == NFS3_OK)
		nfs3_fattr(st->n, attr,
			   &st->res.GETATTR3res_u.resok.obj_attributes);
	rpc_call_done(st->call);
}

/*
 * After a listing: the store could not be asked (JUKEBOX), or read the
 * attributes again (a file removed out of band answers STALE, as any
 * later call would).
 */
static void getattr_revalidated(void *arg, int err)
{
	struct nfs3_getattr_call *st = arg;
	struct fs_attr attr;

	if (!err)
		err = fs_getattr(st->n->fs, st->ino, &attr);
	getattr_reply(st, err, &attr);
}

/*
 * GETATTR.  Attributes of an object that is only in the store are
 * trusted for the attribute TTL; past it the parent is listed again, so
 * a change made by another S3 client shows (--attr-ttl).
 */
void nfs3_proc_getattr(struct rpc_call *call, void *argp, void *resp)
{
	struct nfs3_getattr_call *st = resp;
	GETATTR3args *args = argp;
	struct fs_attr attr;
	int rc;

	st->call = call;
	st->n = rpc_call_ctx(call);
	st->res.status = nfs3_fh_verify(call, &args->object, &st->exp, &st->ctx,
					&st->ino, &attr);
	if (st->res.status != NFS3_OK) {
		rpc_call_done(call);
		return;
	}
	rc = fs_revalidate_attr(st->n->fs, &st->ctx, st->ino,
				getattr_revalidated, st);
	if (rc <= 0)
		getattr_reply(st, rc, &attr); /* fresh: no second read */
}

static void setattr_finish(struct nfs3_setattr_call *st, nfsstat3 status)
{
	st->res.status = status;
	nfs3_wcc(st->n, &st->wcc,
		 status == NFS3_OK ? &st->res.SETATTR3res_u.resok.obj_wcc
				   : &st->res.SETATTR3res_u.resfail.obj_wcc);
	rpc_call_done(st->call);
}

/* A failed guard comes back as ECANCELED, which maps to NOT_SYNC. */
static void setattr_done(void *arg, int err)
{
	setattr_finish(arg, nfs3_status(err));
}

/* SETATTR, with the optional ctime guard of 3.3.2. */
void nfs3_proc_setattr(struct rpc_call *call, void *argp, void *resp)
{
	struct nfs3_setattr_call *st = resp;
	SETATTR3args *args = argp;
	const struct timespec *guard = NULL;
	struct nfs3_export exp;
	nfsstat3 status;
	uint64_t ino;

	st->call = call;
	st->n = rpc_call_ctx(call);
	status = nfs3_fh_verify(call, &args->object, &exp, &st->ctx, &ino,
				&st->wcc.after);
	if (status != NFS3_OK) {
		setattr_finish(st, status);
		return;
	}
	/* From here on the object is known: failures report it unchanged. */
	st->wcc.after_ok = true;
	status = nfs3_writable(&exp);
	if (status == NFS3_OK)
		status = nfs3_sattr(&args->new_attributes, &st->sattr);
	if (status == NFS3_OK && args->guard.check) {
		const nfstime3 *t = &args->guard.sattrguard3_u.obj_ctime;

		/*
		 * A guard time that is not a time matches no ctime; a
		 * client that sends one gets NOT_SYNC, as for any mismatch.
		 */
		if (t->nseconds >= 1000000000u) {
			status = NFS3ERR_NOT_SYNC;
		} else {
			st->guard_ctime.tv_sec = t->seconds;
			st->guard_ctime.tv_nsec = t->nseconds;
			guard = &st->guard_ctime;
		}
	}
	if (status != NFS3_OK) {
		setattr_finish(st, status);
		return;
	}
	st->wcc.after_ok = false;
	fs_setattr(st->n->fs, &st->ctx, ino, &st->sattr, guard, &st->wcc,
		   setattr_done, st);
}

/* ACCESS: fs decides which of the asked-for bits the caller holds. */
void nfs3_proc_access(struct rpc_call *call, void *argp, void *resp)
{
	struct nfsd *n = rpc_call_ctx(call);
	ACCESS3args *args = argp;
	ACCESS3res *res = resp;
	struct nfs3_export exp;
	struct fs_attr attr, now;
	struct fs_ctx ctx;
	uint32_t granted = 0;
	uint64_t ino;
	uint8_t *p;
	int err;

	res->status =
		nfs3_fh_verify(call, &args->object, &exp, &ctx, &ino, &attr);
	if (res->status != NFS3_OK) {
		nfs3_post_op_attr(n, NULL,
				  &res->ACCESS3res_u.resfail.obj_attributes);
		rpc_call_done(call);
		return;
	}
	/* Bits beyond the six of 3.3.4 mean nothing: never grant them. */
	err = fs_access(n->fs, &ctx, ino,
			args->access & (ACCESS3_READ | ACCESS3_LOOKUP |
					ACCESS3_MODIFY | ACCESS3_EXTEND |
					ACCESS3_DELETE | ACCESS3_EXECUTE),
			&granted, &now);
	/*
	 * Truthful on a read-only export too (3.3.4): what would change
	 * the object is refused there whatever the mode bits say.
	 */
	if (exp.read_only)
		granted &= ~(uint32_t)(ACCESS3_MODIFY | ACCESS3_EXTEND |
				       ACCESS3_DELETE);
	res->status = nfs3_status(err);
	if (res->status == NFS3_OK &&
	    (p = rpc_call_body(call, NFS3_XDR_ACCESS_OK))) {
		uint8_t *end = nfs3_put_access_ok(p, n, &now, granted);

		rpc_call_done_body(call, (size_t)(end - p));
		return;
	}
	if (res->status == NFS3_OK) {
		nfs3_post_op_attr(n, &now,
				  &res->ACCESS3res_u.resok.obj_attributes);
		res->ACCESS3res_u.resok.access = granted;
	} else {
		nfs3_post_op_attr(n, &attr,
				  &res->ACCESS3res_u.resfail.obj_attributes);
	}
	rpc_call_done(call);
}
