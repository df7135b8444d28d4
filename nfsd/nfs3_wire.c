/*
 * nfsd/nfs3_wire.c - hand-written XDR for the calls on the hot path.
 *
 * Arguments: rpcgen's decoders calloc every handle (and copy WRITE's
 * data, up to a MiB, into a calloc'ed buffer) and the transport frees it
 * all again; here a handle is copied into room beside the arguments and
 * WRITE's data and LOOKUP's name stay where they are in the request.
 *
 * Replies:
 * GETATTR, LOOKUP, ACCESS and READ answer with fixed-size structures
 * (fattr3, post_op_attr), and READ with a payload that must not be
 * copied.  rpcgen's encoders size a reply in one pass (xdr_sizeof), write
 * it field by field through function pointers in another, and READ's
 * data would be copied into the reply; here the bytes go straight into
 * the transport's reply buffer.  The layouts are RFC 1813's (2.6, 3.3.6),
 * and tests/unit compares every encoder with rpcgen's output.
 */
#include <endian.h>
#include <limits.h>
#include <string.h>

#include "nfs3_internal.h"

uint8_t *nfs3_put_u32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
	return p + 4;
}

uint8_t *nfs3_put_u64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
	return p + 8;
}

static uint8_t *put_time(uint8_t *p, const struct timespec *ts)
{
	nfstime3 t = nfs3_time(ts);

	p = nfs3_put_u32(p, t.seconds);
	return nfs3_put_u32(p, t.nseconds);
}

uint8_t *nfs3_put_fattr3(uint8_t *p, const struct nfsd *n,
			 const struct fs_attr *attr)
{
	/* enum fs_type is numbered as ftype3. */
	p = nfs3_put_u32(p, (uint32_t)attr->type);
	p = nfs3_put_u32(p, attr->mode & 07777);
	p = nfs3_put_u32(p, attr->nlink);
	p = nfs3_put_u32(p, attr->uid);
	p = nfs3_put_u32(p, attr->gid);
	p = nfs3_put_u64(p, attr->size);
	p = nfs3_put_u64(p, attr->used);
	p = nfs3_put_u32(p, attr->rdev_major);
	p = nfs3_put_u32(p, attr->rdev_minor);
	p = nfs3_put_u64(p, n->fsid);
	p = nfs3_put_u64(p, attr->ino);
	p = put_time(p, &attr->atime);
	p = put_time(p, &attr->mtime);
	return put_time(p, &attr->ctime);
}

uint8_t *nfs3_put_post_op_attr(uint8_t *p, const struct nfsd *n,
			       const struct fs_attr *attr)
{
	p = nfs3_put_u32(p, attr != NULL);
	return attr ? nfs3_put_fattr3(p, n, attr) : p;
}

uint8_t *nfs3_put_getattr_ok(uint8_t *p, const struct nfsd *n,
			     const struct fs_attr *attr)
{
	return nfs3_put_fattr3(nfs3_put_u32(p, NFS3_OK), n, attr);
}

uint8_t *nfs3_put_access_ok(uint8_t *p, const struct nfsd *n,
			    const struct fs_attr *attr, uint32_t access)
{
	p = nfs3_put_post_op_attr(nfs3_put_u32(p, NFS3_OK), n, attr);
	return nfs3_put_u32(p, access);
}

uint8_t *nfs3_put_lookup_ok(uint8_t *p, const struct nfsd *n,
			    uint32_t export_id, const struct fs_attr *attr,
			    const struct fs_attr *dir_attr)
{
	_Static_assert(HANDLE_LEN % 4 == 0, "a handle needs no padding");
	p = nfs3_put_u32(p, NFS3_OK);
	p = nfs3_put_u32(p, HANDLE_LEN);
	handle_encode(&n->key, export_id, attr->ino, attr->gen, p);
	p = nfs3_put_post_op_attr(p + HANDLE_LEN, n, attr);
	return nfs3_put_post_op_attr(p, n, dir_attr);
}

uint8_t *nfs3_put_read_head(uint8_t *p, const struct nfsd *n,
			    const struct fs_attr *attr, uint32_t count,
			    bool eof)
{
	p = nfs3_put_u32(p, NFS3_OK);
	p = nfs3_put_post_op_attr(p, n, attr);
	p = nfs3_put_u32(p, count);
	p = nfs3_put_u32(p, eof);
	return nfs3_put_u32(p, count); /* the opaque's length */
}

/* --- arguments ---------------------------------------------------------- */

/* An opaque<max>'s length and bytes, left in place (padding skipped). */
static bool_t get_opaque(XDR *x, u_int max, u_int *len, char **val)
{
	uint64_t padded;

	if (!xdr_u_int(x, len) || *len > max)
		return FALSE;
	padded = ((uint64_t)*len + 3) & ~(uint64_t)3;
	if (padded > UINT_MAX)
		return FALSE;
	*val = padded ? (char *)xdr_inline(x, (u_int)padded) : NULL;
	return padded == 0 || *val != NULL;
}

/* A handle, copied into fh (NFS3_FHSIZE bytes of room). */
static bool_t get_fh(XDR *x, nfs_fh3 *out, char *fh)
{
	char *p;

	if (!get_opaque(x, NFS3_FHSIZE, &out->data.data_len, &p))
		return FALSE;
	if (out->data.data_len) /* an empty handle has no bytes (p NULL) */
		memcpy(fh, p, out->data.data_len);
	out->data.data_val = fh;
	return TRUE;
}

/* The passes every in-place decoder shares: FREE has nothing to free. */
#define INPLACE_PASSES(x, rpcgen, a)             \
	do {                                     \
		if ((x)->x_op == XDR_FREE)       \
			return TRUE;             \
		if ((x)->x_op != XDR_DECODE)     \
			return rpcgen((x), (a)); \
	} while (0)

bool_t nfs3_getattr_args_xdr(XDR *x, struct nfs3_getattr_args *args)
{
	INPLACE_PASSES(x, xdr_GETATTR3args, &args->a);
	return get_fh(x, &args->a.object, args->fh);
}

bool_t nfs3_access_args_xdr(XDR *x, struct nfs3_access_args *args)
{
	INPLACE_PASSES(x, xdr_ACCESS3args, &args->a);
	return get_fh(x, &args->a.object, args->fh) &&
	       xdr_u_int(x, &args->a.access);
}

bool_t nfs3_lookup_args_xdr(XDR *x, struct nfs3_lookup_args *args)
{
	diropargs3 *d = &args->a.what;

	INPLACE_PASSES(x, xdr_LOOKUP3args, &args->a);
	return get_fh(x, &d->dir, args->fh) &&
	       get_opaque(x, NFS3_XDR_MAX, &d->name.filename3_len,
			  &d->name.filename3_val);
}

bool_t nfs3_read_args_xdr(XDR *x, struct nfs3_read_args *args)
{
	INPLACE_PASSES(x, xdr_READ3args, &args->a);
	return get_fh(x, &args->a.file, args->fh) &&
	       xdr_u_quad_t(x, &args->a.offset) && xdr_u_int(x, &args->a.count);
}

bool_t nfs3_write_args_xdr(XDR *x, struct nfs3_write_args *args)
{
	WRITE3args *a = &args->a;

	INPLACE_PASSES(x, xdr_WRITE3args, a);
	return get_fh(x, &a->file, args->fh) && xdr_u_quad_t(x, &a->offset) &&
	       xdr_u_int(x, &a->count) && xdr_enum(x, (enum_t *)&a->stable) &&
	       get_opaque(x, ~0u, &a->data.data_len, &a->data.data_val);
}

bool_t nfs3_commit_args_xdr(XDR *x, struct nfs3_commit_args *args)
{
	INPLACE_PASSES(x, xdr_COMMIT3args, &args->a);
	return get_fh(x, &args->a.file, args->fh) &&
	       xdr_u_quad_t(x, &args->a.offset) && xdr_u_int(x, &args->a.count);
}
