/*
 * nfsd/nfs3_common.c - what every NFSv3 procedure needs: the caller's
 * identity, handle checks, and conversions between fs/ and wire types.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics.h"
#include "nfs3_internal.h"

nfsstat3 nfs3_status(int err)
{
	nfsstat3 s = err == 0 ? NFS3_OK : (nfsstat3)nfsd_errno_to_stat(err);

	if (s == NFS3ERR_JUKEBOX)
		metrics_inc(MET_NFS_JUKEBOX); /* metrics: one per reply */
	return s;
}

/*
 * The export half of a handle check, with the table pinned: which
 * export, whether this client may use it, and as whom.
 */
static nfsstat3 nfs3_export_check(struct nfsd *n, struct rpc_call *call,
				  uint32_t export_id, struct nfs3_export *exp,
				  struct fs_ctx *ctx)
{
	const struct sockaddr_storage *peer = rpc_call_peer(call);
	const struct exports_rule *r;
	struct exports_entry *e;
	struct exports *t;
	nfsstat3 status = NFS3_OK;
	int loop = rpc_call_loop(call);

	t = exports_pin(&n->exports, loop);
	/* An export no longer in the table is gone: STALE (2.3.3). */
	e = t ? exports_find_id(t, export_id) : NULL;
	if (!e) {
		status = NFS3ERR_STALE;
		goto out_unpin;
	}
	r = exports_match(e, peer);
	if (!r) {
		status = NFS3ERR_ACCES;
		goto out_unpin;
	}
	if (!exports_port_ok(r, peer)) {
		status = NFS3ERR_PERM; /* knfsd's answer to an insecure port */
		goto out_unpin;
	}
	exp->id = e->id;
	exp->root = nfsd_export_root(n, e, loop);
	exp->read_only = n->read_only || !(r->flags & EXPORTS_RW);
	if (!exp->root) {
		status = NFS3ERR_STALE;
		goto out_unpin;
	}
	memset(ctx, 0, sizeof(*ctx));
	ctx->loop = loop;
	ctx->async = (r->flags & EXPORTS_ASYNC) != 0;
	exports_squash(r, rpc_call_cred(call), ctx);
out_unpin:
	exports_unpin(&n->exports, loop);
	return status;
}

/* nfs3_fh_verify() for a call of any program served with n's exports. */
static nfsstat3 fh_verify(struct nfsd *n, struct rpc_call *call,
			  const nfs_fh3 *fh, struct nfs3_export *exp,
			  struct fs_ctx *ctx, uint64_t *ino,
			  struct fs_attr *attr)
{
	uint32_t export_id, gen;
	nfsstat3 status;
	int err;

	if (handle_decode(&n->key, fh->data.data_val, fh->data.data_len,
			  &export_id, ino, &gen) < 0)
		return NFS3ERR_BADHANDLE;
	status = nfs3_export_check(n, call, export_id, exp, ctx);
	if (status != NFS3_OK)
		return status;
	err = fs_getattr(n->fs, *ino, attr);
	/* For a handle, a missing inode is STALE, never NOENT. */
	if (err == -ESTALE || err == -ENOENT)
		return NFS3ERR_STALE;
	if (err < 0)
		return nfs3_status(err);
	if (attr->gen != gen)
		return NFS3ERR_STALE;
	return NFS3_OK;
}

nfsstat3 nfs3_fh_verify(struct rpc_call *call, const nfs_fh3 *fh,
			struct nfs3_export *exp, struct fs_ctx *ctx,
			uint64_t *ino, struct fs_attr *attr)
{
	return fh_verify(rpc_call_ctx(call), call, fh, exp, ctx, ino, attr);
}

int nfsd_fh_check(struct nfsd *n, struct rpc_call *call, const void *fh,
		  size_t len, uint64_t *ino)
{
	nfs_fh3 h = { .data = { .data_len = (u_int)len,
				.data_val = (char *)(uintptr_t)fh } };
	struct nfs3_export exp;
	struct fs_attr attr;
	struct fs_ctx ctx;

	switch (fh_verify(n, call, &h, &exp, &ctx, ino, &attr)) {
	case NFS3_OK:
		return 0;
	case NFS3ERR_BADHANDLE:
		return -EBADF;
	case NFS3ERR_STALE:
		return -ESTALE;
	case NFS3ERR_PERM:
		return -EPERM;
	case NFS3ERR_ACCES:
		return -EACCES;
	default:
		return -EIO;
	}
}

bool nfsd_client_admitted(struct nfsd *n, const struct sockaddr_storage *peer,
			  int loop)
{
	struct exports *t = exports_pin(&n->exports, loop);
	bool ok = false;

	for (size_t i = 0; t && !ok && i < t->n; i++)
		ok = exports_match(&t->entries[i], peer) != NULL;
	exports_unpin(&n->exports, loop);
	return ok;
}

bool nfs3_fh_make(const struct nfsd *n, uint32_t export_id,
		  const struct fs_attr *attr, nfs_fh3 *fh)
{
	uint8_t *data = malloc(HANDLE_LEN);

	if (!data)
		return false;
	handle_encode(&n->key, export_id, attr->ino, attr->gen, data);
	fh->data.data_len = HANDLE_LEN;
	fh->data.data_val = (char *)data;
	return true;
}

void nfs3_post_op_fh(const struct nfsd *n, uint32_t export_id,
		     const struct fs_attr *attr, post_op_fh3 *out)
{
	/* The handle is optional here (2.6): a client without it LOOKUPs. */
	out->handle_follows = attr && nfs3_fh_make(n, export_id, attr,
						   &out->post_op_fh3_u.handle);
}

/* Wire times are unsigned 32-bit seconds: clamp what does not fit. */
nfstime3 nfs3_time(const struct timespec *ts)
{
	nfstime3 t;

	if (ts->tv_sec < 0) {
		t.seconds = 0;
		t.nseconds = 0;
	} else if ((uint64_t)ts->tv_sec > UINT32_MAX) {
		t.seconds = UINT32_MAX;
		t.nseconds = 999999999;
	} else {
		t.seconds = (uint32_t)ts->tv_sec;
		t.nseconds = (uint32_t)ts->tv_nsec;
	}
	return t;
}

void nfs3_fattr(const struct nfsd *n, const struct fs_attr *attr, fattr3 *out)
{
	/* enum fs_type is numbered as ftype3. */
	out->type = (ftype3)attr->type;
	out->mode = attr->mode & 07777;
	out->nlink = attr->nlink;
	out->uid = attr->uid;
	out->gid = attr->gid;
	out->size = attr->size;
	out->used = attr->used;
	out->rdev.specdata1 = attr->rdev_major;
	out->rdev.specdata2 = attr->rdev_minor;
	out->fsid = n->fsid;
	out->fileid = attr->ino;
	out->atime = nfs3_time(&attr->atime);
	out->mtime = nfs3_time(&attr->mtime);
	out->ctime = nfs3_time(&attr->ctime);
}

void nfs3_post_op_attr(const struct nfsd *n, const struct fs_attr *attr,
		       post_op_attr *out)
{
	out->attributes_follow = attr != NULL;
	if (attr)
		nfs3_fattr(n, attr, &out->post_op_attr_u.attributes);
}

void nfs3_post_op_getattr(const struct nfsd *n, uint64_t ino, post_op_attr *out)
{
	struct fs_attr attr;

	nfs3_post_op_attr(n, fs_getattr(n->fs, ino, &attr) == 0 ? &attr : NULL,
			  out);
}

void nfs3_wcc(const struct nfsd *n, const struct fs_wcc *wcc, wcc_data *out)
{
	out->before.attributes_follow = wcc->before_ok;
	if (wcc->before_ok) {
		wcc_attr *b = &out->before.pre_op_attr_u.attributes;

		b->size = wcc->before_size;
		b->mtime = nfs3_time(&wcc->before_mtime);
		b->ctime = nfs3_time(&wcc->before_ctime);
	}
	nfs3_post_op_attr(n, wcc->after_ok ? &wcc->after : NULL, &out->after);
}

void nfs3_wcc_unchanged(const struct nfsd *n, const struct fs_attr *attr,
			wcc_data *out)
{
	out->before.attributes_follow = FALSE;
	nfs3_post_op_attr(n, attr, &out->after);
}

/* A client time: nseconds beyond a second is not a time (INVAL). */
static bool nfs3_timespec(const nfstime3 *t, struct timespec *out)
{
	if (t->nseconds >= 1000000000u)
		return false;
	out->tv_sec = t->seconds;
	out->tv_nsec = t->nseconds;
	return true;
}

nfsstat3 nfs3_sattr(const sattr3 *in, struct fs_sattr *out)
{
	memset(out, 0, sizeof(*out));
	if (in->mode.set_it) {
		out->mask |= FS_SET_MODE;
		out->mode = in->mode.set_mode3_u.mode & 07777;
	}
	if (in->uid.set_it) {
		out->mask |= FS_SET_UID;
		out->uid = in->uid.set_uid3_u.uid;
	}
	if (in->gid.set_it) {
		out->mask |= FS_SET_GID;
		out->gid = in->gid.set_gid3_u.gid;
	}
	if (in->size.set_it) {
		out->mask |= FS_SET_SIZE;
		out->size = in->size.set_size3_u.size;
	}
	switch (in->atime.set_it) {
	case DONT_CHANGE:
		break;
	case SET_TO_SERVER_TIME:
		out->mask |= FS_SET_ATIME_NOW;
		break;
	case SET_TO_CLIENT_TIME:
		if (!nfs3_timespec(&in->atime.set_atime_u.atime, &out->atime))
			return NFS3ERR_INVAL;
		out->mask |= FS_SET_ATIME;
		break;
	default: /* rpcgen does not range-check enums */
		return NFS3ERR_INVAL;
	}
	switch (in->mtime.set_it) {
	case DONT_CHANGE:
		break;
	case SET_TO_SERVER_TIME:
		out->mask |= FS_SET_MTIME_NOW;
		break;
	case SET_TO_CLIENT_TIME:
		if (!nfs3_timespec(&in->mtime.set_mtime_u.mtime, &out->mtime))
			return NFS3ERR_INVAL;
		out->mask |= FS_SET_MTIME;
		break;
	default: /* rpcgen does not range-check enums */
		return NFS3ERR_INVAL;
	}
	return NFS3_OK;
}

nfsstat3 nfs3_name(const filename3 *in, enum nfs3_name_use use,
		   char out[FS_NAME_MAX + 1])
{
	size_t len = in->filename3_len;

	if (len == 0)
		return NFS3ERR_NOENT;
	if (len > FS_NAME_MAX)
		return NFS3ERR_NAMETOOLONG;
	/* NUL would cut the C string short and name another file. */
	if (memchr(in->filename3_val, '\0', len) ||
	    memchr(in->filename3_val, '/', len))
		return NFS3ERR_INVAL;
	memcpy(out, in->filename3_val, len);
	out[len] = '\0';
	if (use != NFS3_NAME_LOOKUP &&
	    (strcmp(out, ".") == 0 || strcmp(out, "..") == 0))
		return use == NFS3_NAME_CREATE ? NFS3ERR_EXIST : NFS3ERR_INVAL;
	return NFS3_OK;
}

nfsstat3 nfs3_path(const nfspath3 *in, char out[FS_PATH_MAX + 1])
{
	size_t len = in->nfspath3_len;

	if (len > FS_PATH_MAX)
		return NFS3ERR_NAMETOOLONG;
	if (len == 0 || memchr(in->nfspath3_val, '\0', len))
		return NFS3ERR_INVAL;
	memcpy(out, in->nfspath3_val, len);
	out[len] = '\0';
	return NFS3_OK;
}

nfsstat3 nfs3_writable(const struct nfs3_export *exp)
{
	return exp->read_only ? NFS3ERR_ROFS : NFS3_OK;
}

/* XDR unit sizes, RFC 4506: everything is a multiple of 4 bytes. */
#define XDR_BOOL 4u
#define XDR_U32 4u
#define XDR_U64 8u
#define XDR_FATTR3 (5 * XDR_U32 + 5 * XDR_U64 + 3 * 2 * XDR_U32)

static size_t xdr_opaque_size(size_t len)
{
	return XDR_U32 + ((len + 3) & ~(size_t)3);
}

size_t nfs3_xdr_readdir_base_size(void)
{
	/* status, post_op_attr (present), cookieverf, final FALSE, eof */
	return XDR_U32 + XDR_BOOL + XDR_FATTR3 + NFS3_COOKIEVERFSIZE +
	       XDR_BOOL + XDR_BOOL;
}

size_t nfs3_xdr_dirinfo_size(size_t namelen)
{
	return XDR_U64 + xdr_opaque_size(namelen) + XDR_U64;
}

size_t nfs3_xdr_entry3_size(size_t namelen)
{
	return XDR_BOOL + nfs3_xdr_dirinfo_size(namelen);
}

size_t nfs3_xdr_entryplus3_size(size_t namelen, bool attrs, bool fh)
{
	return nfs3_xdr_entry3_size(namelen) + XDR_BOOL +
	       (attrs ? XDR_FATTR3 : 0) + XDR_BOOL +
	       (fh ? xdr_opaque_size(HANDLE_LEN) : 0);
}
