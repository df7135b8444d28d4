/*
 * tests/fuzz/fuzz_rpc_record.c - TCP record marking and the RPC call
 * header, as a connection's bytes reach them.
 *
 * Input: 4 bytes of seed (the record limit and how the stream is split),
 * then the stream.  The stream is parsed twice: fed whole, and fed in
 * pseudo-random pieces, some of them written through the zero-copy
 * window the way a big WRITE is read.  Both must give the same records
 * and the same error, whatever the split.  Every record goes through
 * rpc_callhdr_parse(), whose result must describe a header inside it.
 */
#include <errno.h>
#include <string.h>
#include <sys/types.h>

#include "rpc/rpc_int.h"
#include "tests/fuzz/fuzz.h"

/* Records kept from the whole-stream parse, to compare the split one to. */
#define MAX_RECS 64

struct recs {
	uint8_t *rec[MAX_RECS];
	size_t len[MAX_RECS];
	size_t n;
	ssize_t err; /* 0, or the parser's error that ended the stream */
};

static void recs_free(struct recs *r)
{
	for (size_t i = 0; i < r->n; i++)
		rpc_record_free(r->rec[i]);
}

static void callhdr_check(const uint8_t *rec, size_t len)
{
	struct rpc_callhdr h;
	int rc = rpc_callhdr_parse(rec, len, &h);

	FUZZ_CHECK(rc == 0 || rc == -EPROTO || rc == -EBADMSG ||
		   rc == -EPROTONOSUPPORT || rc == -EACCES);
	if (rc)
		return;
	/* Header words, two opaque_auths (flavor and length words each). */
	FUZZ_CHECK(h.body_off >= 10 * 4 && h.body_off <= len);
	FUZZ_CHECK(h.body_off % 4 == 0);
	FUZZ_CHECK(h.rpcvers == 2);
	FUZZ_CHECK(h.cred.flavor == AUTH_NONE || h.cred.flavor == AUTH_SYS);
	FUZZ_CHECK(h.cred.ngids <= RPC_MAX_GIDS);
	FUZZ_CHECK(memchr(h.cred.machine, '\0', sizeof(h.cred.machine)));
}

/* Feed the whole stream at once (each call stops after one record). */
static void parse_whole(const uint8_t *data, size_t size, size_t max,
			struct recs *out)
{
	struct rpc_recparser p;
	size_t off = 0;

	rpc_recparser_init(&p, max);
	for (;;) {
		uint8_t *rec;
		size_t rl;
		ssize_t r = rpc_recparser_feed(&p, data + off, size - off, &rec,
					       &rl);

		if (r < 0) {
			out->err = r;
			break;
		}
		FUZZ_CHECK((size_t)r <= size - off);
		off += (size_t)r;
		if (!rec) {
			/* No record: the parser must have taken everything. */
			FUZZ_CHECK(off == size);
			break;
		}
		FUZZ_CHECK(rl <= max);
		if (out->n == MAX_RECS) {
			rpc_record_free(rec);
			break;
		}
		out->rec[out->n] = rec;
		out->len[out->n++] = rl;
	}
	rpc_recparser_free(&p);
}

/* xorshift32: cheap, and a pure function of the input's seed. */
static uint32_t next_rand(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* A record out of the split parse must be the next one of the whole. */
static bool record_matches(const struct recs *whole, size_t *i, uint8_t *rec,
			   size_t rl)
{
	bool ok;

	if (*i == whole->n) {
		rpc_record_free(rec);
		return false; /* past what the whole parse kept: stop */
	}
	ok = whole->len[*i] == rl && memcmp(whole->rec[*i], rec, rl) == 0;
	FUZZ_CHECK(ok);
	rpc_record_free(rec);
	(*i)++;
	return true;
}

static void parse_split(const uint8_t *data, size_t size, size_t max,
			uint32_t seed, const struct recs *whole)
{
	struct rpc_recparser p;
	size_t off = 0, i = 0;
	ssize_t err = 0;

	rpc_recparser_init(&p, max);
	while (off < size) {
		uint32_t r = next_rand(&seed);
		size_t piece = 1 + r % 64, rl;
		uint8_t *win, *rec;
		size_t wlen;
		ssize_t got;

		if (piece > size - off)
			piece = size - off;
		if ((r & 0x100) && rpc_recparser_window(&p, &win, &wlen)) {
			/* As the server reads a big fragment: into the record. */
			if (piece > wlen)
				piece = wlen;
			memcpy(win, data + off, piece);
			rpc_recparser_commit(&p, piece);
			off += piece;
			got = rpc_recparser_feed(&p, data + off, 0, &rec, &rl);
			FUZZ_CHECK(got == 0);
			if (rec && !record_matches(whole, &i, rec, rl))
				break;
			continue;
		}
		/* Like the server: feed a piece until it is all taken. */
		while (piece) {
			got = rpc_recparser_feed(&p, data + off, piece, &rec,
						 &rl);
			if (got < 0) {
				err = got;
				break;
			}
			FUZZ_CHECK((size_t)got <= piece);
			off += (size_t)got;
			piece -= (size_t)got;
			if (!rec) {
				FUZZ_CHECK(piece == 0);
				break;
			}
			if (!record_matches(whole, &i, rec, rl)) {
				rpc_recparser_free(&p);
				return;
			}
		}
		if (err)
			break;
	}
	rpc_recparser_free(&p);
	/* Every record of the whole parse came out, and the same error. */
	FUZZ_CHECK(i == whole->n);
	FUZZ_CHECK(err == whole->err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct recs whole = { .n = 0 };
	uint32_t seed;
	size_t max;

	if (size < 4)
		return 0;
	seed = (uint32_t)data[0] << 24 | (uint32_t)data[1] << 16 |
	       (uint32_t)data[2] << 8 | data[3];
	data += 4;
	size -= 4;
	/* Small limits reach -EMSGSIZE; 0 means the server's default. */
	max = seed & 0x8000 ? 1 + (seed >> 16) % 4096 : 1024 * 1024 + 65536;
	parse_whole(data, size, max, &whole);
	for (size_t i = 0; i < whole.n; i++)
		callhdr_check(whole.rec[i], whole.len[i]);
	/* xorshift's state must never be 0. */
	parse_split(data, size, max, seed | 1, &whole);
	recs_free(&whole);
	return 0;
}
