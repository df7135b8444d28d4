/*
 * rpc/record.c - TCP record marking (RFC 5531 section 11).
 *
 * A record is a sequence of fragments, each preceded by a 4-byte mark:
 * the top bit says "last fragment", the low 31 bits are its length.  The
 * parser accepts its input split anywhere (down to one byte at a time) and
 * hands out each complete record as one contiguous buffer.
 *
 * The buffers are the transport's reply buffers (outbuf.c) used as plain
 * memory, so on a loop a request, like its reply, comes from the loop's
 * pool: a GETATTR or a 1 MiB WRITE allocates nothing.
 *
 * A buffer grows with the bytes that really arrived, not with what a
 * record mark announces: a fragment starts in a small buffer and gets
 * one of its full size only once the small one is full, so a socket that
 * announced a big record and went quiet (or trickles) holds kilobytes,
 * not a megabyte.  A big WRITE pays one copy of the small buffer.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_int.h"

/* The buffer that holds record bytes at rec. */
static struct rpc_outbuf *rec_buf(uint8_t *rec)
{
	return (struct rpc_outbuf *)(void *)(rec -
					     offsetof(struct rpc_outbuf, data));
}

void rpc_record_free(uint8_t *rec)
{
	if (rec)
		rpc_outbuf_free(rec_buf(rec));
}

void rpc_recparser_init(struct rpc_recparser *p, size_t max_record)
{
	memset(p, 0, sizeof(*p));
	p->max_record = max_record;
	p->in_header = true;
}

void rpc_recparser_free(struct rpc_recparser *p)
{
	rpc_record_free(p->buf);
	p->buf = NULL;
	p->len = p->cap = 0;
}

/* What the first buffer of a record asks for: a pool's small buffer. */
#define REC_SMALL 8192

/*
 * Room in the buffer for n more bytes of the current fragment (and the
 * byte that keeps an empty record's buffer non-NULL): a small buffer
 * while the record is small so far, else one for the whole fragment.
 */
static int rec_room(struct rpc_recparser *p, size_t n)
{
	size_t want = p->len + n + 1, full = p->len + p->frag_left + 1;
	struct rpc_outbuf *ob;

	if (want <= p->cap)
		return 0;
	ob = rpc_outbuf_new(want <= REC_SMALL && full > REC_SMALL ? REC_SMALL
								  : full);
	if (!ob)
		return -ENOMEM;
	if (p->len)
		memcpy(ob->data, p->buf, p->len);
	rpc_record_free(p->buf);
	p->buf = ob->data;
	p->cap = ob->cap;
	return 0;
}

/*
 * A new fragment of flen bytes starts: check the record limit before any
 * byte of it arrives, so a huge mark is refused at once.
 */
static int frag_begin(struct rpc_recparser *p, uint32_t mark)
{
	uint32_t flen = mark & RPC_FRAG_LEN_MASK;

	if (flen > p->max_record || p->len > p->max_record - flen)
		return -EMSGSIZE;
	p->frag_left = flen;
	p->last_frag = (mark & RPC_LAST_FRAG) != 0;
	p->in_header = false;
	return rec_room(p, 0);
}

ssize_t rpc_recparser_feed(struct rpc_recparser *p, const uint8_t *data,
			   size_t len, uint8_t **rec, size_t *reclen)
{
	size_t off = 0, n;
	int rc;

	*rec = NULL;
	*reclen = 0;
	for (;;) {
		if (p->in_header) {
			if (off == len)
				return (ssize_t)off;
			n = 4 - (size_t)p->hdr_have;
			if (n > len - off)
				n = len - off;
			p->in_record = true;
			memcpy(p->hdr + p->hdr_have, data + off, n);
			p->hdr_have += (int)n;
			off += n;
			if (p->hdr_have < 4)
				return (ssize_t)off;
			p->hdr_have = 0;
			rc = frag_begin(p, (uint32_t)p->hdr[0] << 24 |
						   (uint32_t)p->hdr[1] << 16 |
						   (uint32_t)p->hdr[2] << 8 |
						   p->hdr[3]);
			if (rc)
				return rc;
		}
		if (p->frag_left) {
			if (off == len)
				return (ssize_t)off;
			n = p->frag_left;
			if (n > len - off)
				n = len - off;
			rc = rec_room(p, n);
			if (rc)
				return rc;
			memcpy(p->buf + p->len, data + off, n);
			p->len += n;
			p->frag_left -= (uint32_t)n;
			off += n;
			if (p->frag_left)
				return (ssize_t)off;
		}
		/* Fragment complete; zero-length fragments are legal. */
		p->in_header = true;
		if (p->last_frag) {
			p->in_record = false;
			*rec = p->buf;
			*reclen = p->len;
			p->buf = NULL;
			p->len = p->cap = 0;
			return (ssize_t)off;
		}
	}
}

bool rpc_recparser_window(struct rpc_recparser *p, uint8_t **win,
			  size_t *winlen)
{
	if (p->in_header || !p->frag_left)
		return false;
	/* A full small buffer: this is when the fragment's one is made. */
	if (p->len + 1 >= p->cap && rec_room(p, p->frag_left))
		return false;
	*win = p->buf + p->len;
	*winlen = p->cap - p->len - 1;
	if (*winlen > p->frag_left)
		*winlen = p->frag_left;
	return true;
}

void rpc_recparser_commit(struct rpc_recparser *p, size_t n)
{
	p->len += n;
	p->frag_left -= (uint32_t)n;
}
