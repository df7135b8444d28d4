/*
 * nfsd/nfs3_wire.c - hand-written XDR for the replies on the hot path.
 *
 * GETATTR, LOOKUP, ACCESS and READ answer with fixed-size structures
 * (fattr3, post_op_attr), and READ with a payload that must not be
 * copied.  rpcgen's encoders size a reply in one pass (xdr_sizeof), write
 * it field by field through function pointers in another, and READ's
 * data would be copied into the reply; here the bytes go straight into
 * the transport's reply buffer.  The layouts are RFC 1813's (2.6, 3.3.6),
 * and tests/unit compares every encoder with rpcgen's output.
 */
#include <endian.h>
#include <string.h>

#include "nfsd/nfs3_internal.h"

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
