/*
 * rpc/callhdr.c - RPC call header parsing and reply header encoding
 * (RFC 5531 section 9), AUTH_NONE and AUTH_SYS credentials (appendix A).
 *
 * The header is a fixed sequence of 32-bit big-endian words, so it is read
 * directly from the record: no XDR stream per call on the hot path.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "rpc_int.h"

/* RFC 5531 section 8.2: opaque_auth bodies are at most 400 bytes. */
#define RPC_AUTH_BODY_MAX 400

struct rd {
	const uint8_t *p;
	size_t len, off;
};

static bool rd_u32(struct rd *r, uint32_t *v)
{
	uint32_t be;

	if (r->len - r->off < 4)
		return false;
	memcpy(&be, r->p + r->off, 4);
	*v = ntohl(be);
	r->off += 4;
	return true;
}

/* XDR opaque data is padded to a multiple of 4 bytes. */
static size_t xdr_pad(size_t n)
{
	return (n + 3) & ~(size_t)3;
}

/*
 * AUTH_SYS body (RFC 5531 appendix A): stamp, machinename<255>, uid, gid,
 * gids<16>.  The body must be exactly what the credential length said.
 */
static int authsys_parse(const uint8_t *body, size_t len, struct rpc_cred *c)
{
	struct rd r = { .p = body, .len = len };
	uint32_t mlen;

	if (!rd_u32(&r, &c->stamp) || !rd_u32(&r, &mlen))
		return -EACCES;
	if (mlen > RPC_MACHINE_MAX || xdr_pad(mlen) > r.len - r.off)
		return -EACCES;
	memcpy(c->machine, body + r.off, mlen);
	c->machine[mlen] = '\0';
	r.off += xdr_pad(mlen);
	if (!rd_u32(&r, &c->uid) || !rd_u32(&r, &c->gid) ||
	    !rd_u32(&r, &c->ngids))
		return -EACCES;
	if (c->ngids > RPC_MAX_GIDS)
		return -EACCES;
	for (uint32_t i = 0; i < c->ngids; i++)
		if (!rd_u32(&r, &c->gids[i]))
			return -EACCES;
	return r.off == r.len ? 0 : -EACCES;
}

/* Read one opaque_auth; the body is returned in place, not copied. */
static int auth_read(struct rd *r, uint32_t *flavor, const uint8_t **body,
		     uint32_t *blen)
{
	if (!rd_u32(r, flavor) || !rd_u32(r, blen))
		return -EBADMSG;
	if (*blen > RPC_AUTH_BODY_MAX)
		return -EACCES;
	if (xdr_pad(*blen) > r->len - r->off)
		return -EBADMSG;
	*body = r->p + r->off;
	r->off += xdr_pad(*blen);
	return 0;
}

int rpc_callhdr_parse(const uint8_t *rec, size_t len, struct rpc_callhdr *h)
{
	struct rd r = { .p = rec, .len = len };
	uint32_t mtype, flavor, blen;
	const uint8_t *body;
	int rc;

	h->xid = h->rpcvers = h->prog = h->vers = h->proc = 0;
	h->body_off = 0;
	h->cred.flavor = AUTH_NONE;
	h->cred.stamp = h->cred.uid = h->cred.gid = h->cred.ngids = 0;
	h->cred.machine[0] = '\0';
	if (!rd_u32(&r, &h->xid) || !rd_u32(&r, &mtype))
		return -EBADMSG;
	if (mtype != CALL)
		return -EPROTO;
	if (!rd_u32(&r, &h->rpcvers))
		return -EBADMSG;
	/* Reply RPC_MISMATCH before trusting any later field (section 9). */
	if (h->rpcvers != RPC_MSG_VERSION)
		return -EPROTONOSUPPORT;
	if (!rd_u32(&r, &h->prog) || !rd_u32(&r, &h->vers) ||
	    !rd_u32(&r, &h->proc))
		return -EBADMSG;

	rc = auth_read(&r, &flavor, &body, &blen);
	if (rc)
		return rc;
	switch (flavor) {
	case AUTH_NONE:
		/* Section 10.1: AUTH_NONE carries an empty body. */
		if (blen)
			return -EACCES;
		break;
	case AUTH_SYS:
		h->cred.flavor = AUTH_SYS;
		rc = authsys_parse(body, blen, &h->cred);
		if (rc)
			return rc;
		break;
	default:
		return -EACCES;
	}

	/* Verifier: AUTH_SYS and AUTH_NONE callers both send AUTH_NONE. */
	rc = auth_read(&r, &flavor, &body, &blen);
	if (rc)
		return rc;
	if (flavor != AUTH_NONE)
		return -EACCES;
	h->body_off = r.off;
	return 0;
}

static uint8_t *put_u32(uint8_t *p, uint32_t v)
{
	uint32_t be = htonl(v);

	memcpy(p, &be, 4);
	return p + 4;
}

size_t rpc_reply_hdr_encode(uint8_t *p, const struct rpc_reply_hdr *h)
{
	uint8_t *q = p;

	q = put_u32(q, h->xid);
	q = put_u32(q, REPLY);
	q = put_u32(q, h->rstat);
	if (h->rstat == MSG_ACCEPTED) {
		/* Our verifier is always AUTH_NONE with an empty body. */
		q = put_u32(q, AUTH_NONE);
		q = put_u32(q, 0);
		q = put_u32(q, h->astat);
		if (h->astat == PROG_MISMATCH) {
			q = put_u32(q, h->low);
			q = put_u32(q, h->high);
		}
	} else {
		q = put_u32(q, h->jstat);
		if (h->jstat == RPC_MISMATCH) {
			q = put_u32(q, h->low);
			q = put_u32(q, h->high);
		} else {
			q = put_u32(q, h->why);
		}
	}
	return (size_t)(q - p);
}
