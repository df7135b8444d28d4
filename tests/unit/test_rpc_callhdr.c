/*
 * tests/unit/test_rpc_callhdr.c - call header and credential parsing
 * (RFC 5531 section 9 and appendix A), reply header encoding.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "rpc/rpc_int.h"

struct buf {
	uint8_t b[4096];
	size_t len;
};

static void put(struct buf *b, uint32_t v)
{
	uint32_t be = htonl(v);

	memcpy(b->b + b->len, &be, 4);
	b->len += 4;
}

static void put_opaque(struct buf *b, const void *d, uint32_t n)
{
	put(b, n);
	memcpy(b->b + b->len, d, n);
	b->len += n;
	while (b->len % 4)
		b->b[b->len++] = 0;
}

/* AUTH_SYS body: stamp, machinename, uid, gid, gids. */
static void authsys_body(struct buf *b, const char *machine, size_t mlen,
			 uint32_t uid, uint32_t gid, uint32_t ngids)
{
	put(b, 77);
	put_opaque(b, machine, (uint32_t)mlen);
	put(b, uid);
	put(b, gid);
	put(b, ngids);
	for (uint32_t i = 0; i < ngids; i++)
		put(b, 100 + i);
}

/* Call header up to the credential: xid, CALL, rpcvers, prog, vers, proc. */
static void call_start(struct buf *b, uint32_t rpcvers)
{
	b->len = 0;
	put(b, 0x1234abcd);
	put(b, CALL);
	put(b, rpcvers);
	put(b, 100003);
	put(b, 3);
	put(b, 6);
}

/* Credential with flavor and body (cred), verifier AUTH_NONE, 4 arg bytes. */
static void call_finish(struct buf *b, uint32_t flavor, const struct buf *cred,
			uint32_t cred_len_delta)
{
	put(b, flavor);
	put_opaque(b, cred->b, (uint32_t)cred->len);
	if (cred_len_delta) {
		/* Lie about the credential length (it is followed by the
		 * verifier, so the bytes exist). */
		uint32_t be;

		memcpy(&be, b->b + b->len - cred->len - 4, 4);
		be = htonl(ntohl(be) + cred_len_delta);
		memcpy(b->b + b->len - cred->len - 4, &be, 4);
	}
	put(b, AUTH_NONE);
	put(b, 0);
	put(b, 0xdeadbeef);
}

static int parse(const struct buf *b, struct rpc_callhdr *h)
{
	return rpc_callhdr_parse(b->b, b->len, h);
}

static void test_authsys_ok(void)
{
	struct buf b, cred = { .len = 0 };
	struct rpc_callhdr h;

	authsys_body(&cred, "client-7", 8, 1000, 50, 3);
	call_start(&b, 2);
	call_finish(&b, AUTH_SYS, &cred, 0);
	CU_ASSERT_EQUAL_FATAL(parse(&b, &h), 0);
	CU_ASSERT_EQUAL(h.xid, 0x1234abcd);
	CU_ASSERT_EQUAL(h.rpcvers, 2);
	CU_ASSERT_EQUAL(h.prog, 100003);
	CU_ASSERT_EQUAL(h.vers, 3);
	CU_ASSERT_EQUAL(h.proc, 6);
	CU_ASSERT_EQUAL(h.cred.flavor, AUTH_SYS);
	CU_ASSERT_EQUAL(h.cred.stamp, 77);
	CU_ASSERT_STRING_EQUAL(h.cred.machine, "client-7");
	CU_ASSERT_EQUAL(h.cred.uid, 1000);
	CU_ASSERT_EQUAL(h.cred.gid, 50);
	CU_ASSERT_EQUAL(h.cred.ngids, 3);
	CU_ASSERT(h.cred.gids[0] == 100 && h.cred.gids[2] == 102);
	CU_ASSERT_EQUAL(h.body_off, b.len - 4);
}

static void test_authnone_ok(void)
{
	struct buf b, cred = { .len = 0 };
	struct rpc_callhdr h;

	call_start(&b, 2);
	call_finish(&b, AUTH_NONE, &cred, 0);
	CU_ASSERT_EQUAL_FATAL(parse(&b, &h), 0);
	CU_ASSERT_EQUAL(h.cred.flavor, AUTH_NONE);
	CU_ASSERT_EQUAL(h.cred.ngids, 0);
	CU_ASSERT_EQUAL(h.body_off, b.len - 4);
}

/* Every prefix that ends inside the header is refused as garbage. */
static void test_truncated(void)
{
	struct buf b, cred = { .len = 0 };
	struct rpc_callhdr h;

	authsys_body(&cred, "m", 1, 1, 1, 2);
	call_start(&b, 2);
	call_finish(&b, AUTH_SYS, &cred, 0);
	for (size_t n = 0; n < b.len - 4; n++)
		CU_ASSERT_EQUAL(rpc_callhdr_parse(b.b, n, &h), -EBADMSG);
	/* The xid is known once 4 bytes are there. */
	rpc_callhdr_parse(b.b, 20, &h);
	CU_ASSERT_EQUAL(h.xid, 0x1234abcd);
}

static void test_not_a_call(void)
{
	struct buf b, cred = { .len = 0 };
	struct rpc_callhdr h;
	uint32_t reply = htonl(REPLY);

	call_start(&b, 2);
	call_finish(&b, AUTH_NONE, &cred, 0);
	memcpy(b.b + 4, &reply, 4);
	CU_ASSERT_EQUAL(parse(&b, &h), -EPROTO);
}

static void test_rpcvers3(void)
{
	struct buf b, cred = { .len = 0 };
	struct rpc_callhdr h;

	call_start(&b, 3);
	call_finish(&b, AUTH_NONE, &cred, 0);
	CU_ASSERT_EQUAL(parse(&b, &h), -EPROTONOSUPPORT);
	CU_ASSERT_EQUAL(h.xid, 0x1234abcd);
	CU_ASSERT_EQUAL(h.rpcvers, 3);
}

static void test_machinename_length(void)
{
	char name[300];
	struct buf b, cred;
	struct rpc_callhdr h;

	memset(name, 'a', sizeof(name));
	cred.len = 0;
	authsys_body(&cred, name, 255, 1, 1, 0);
	call_start(&b, 2);
	call_finish(&b, AUTH_SYS, &cred, 0);
	CU_ASSERT_EQUAL(parse(&b, &h), 0);
	CU_ASSERT_EQUAL(strlen(h.cred.machine), 255);

	cred.len = 0;
	authsys_body(&cred, name, 256, 1, 1, 0);
	call_start(&b, 2);
	call_finish(&b, AUTH_SYS, &cred, 0);
	CU_ASSERT_EQUAL(parse(&b, &h), -EACCES);
}

static void test_gids(void)
{
	struct buf b, cred;
	struct rpc_callhdr h;

	cred.len = 0;
	authsys_body(&cred, "m", 1, 1, 1, 16);
	call_start(&b, 2);
	call_finish(&b, AUTH_SYS, &cred, 0);
	CU_ASSERT_EQUAL(parse(&b, &h), 0);
	CU_ASSERT_EQUAL(h.cred.ngids, 16);
	CU_ASSERT_EQUAL(h.cred.gids[15], 115);

	cred.len = 0;
	authsys_body(&cred, "m", 1, 1, 1, 17);
	call_start(&b, 2);
	call_finish(&b, AUTH_SYS, &cred, 0);
	CU_ASSERT_EQUAL(parse(&b, &h), -EACCES);
}

static void test_cred_length_mismatch(void)
{
	struct buf b, cred = { .len = 0 };
	struct rpc_callhdr h;

	authsys_body(&cred, "m", 1, 1, 1, 2);
	/* Body longer than its fields: the declared length includes the
	 * verifier's flavor word. */
	call_start(&b, 2);
	call_finish(&b, AUTH_SYS, &cred, 4);
	CU_ASSERT_EQUAL(parse(&b, &h), -EACCES);
	/* Body shorter than its fields: the last gid is cut off. */
	call_start(&b, 2);
	call_finish(&b, AUTH_SYS, &cred, (uint32_t)-4);
	CU_ASSERT_EQUAL(parse(&b, &h), -EACCES);
}

static void test_bad_flavors(void)
{
	struct buf b, cred = { .len = 0 }, big = { .len = 0 };
	struct rpc_callhdr h;

	/* Unknown credential flavor (RPCSEC_GSS is not served). */
	call_start(&b, 2);
	call_finish(&b, 6, &cred, 0);
	CU_ASSERT_EQUAL(parse(&b, &h), -EACCES);

	/* AUTH_NONE with a body. */
	put(&cred, 1);
	call_start(&b, 2);
	call_finish(&b, AUTH_NONE, &cred, 0);
	CU_ASSERT_EQUAL(parse(&b, &h), -EACCES);

	/* A credential over the 400-byte opaque_auth limit. */
	memset(big.b, 0, 404);
	big.len = 404;
	call_start(&b, 2);
	call_finish(&b, AUTH_SYS, &big, 0);
	CU_ASSERT_EQUAL(parse(&b, &h), -EACCES);

	/* Verifier of an unknown flavor. */
	cred.len = 0;
	call_start(&b, 2);
	put(&b, AUTH_NONE);
	put(&b, 0);
	put(&b, 9);
	put(&b, 0);
	CU_ASSERT_EQUAL(parse(&b, &h), -EACCES);
}

static uint32_t word(const uint8_t *p, int i)
{
	uint32_t be;

	memcpy(&be, p + 4 * i, 4);
	return ntohl(be);
}

static void test_reply_hdr(void)
{
	uint8_t p[RPC_REPLY_HDR_MAX];
	struct rpc_reply_hdr h = { .xid = 9,
				   .rstat = MSG_ACCEPTED,
				   .astat = SUCCESS };

	CU_ASSERT_EQUAL(rpc_reply_hdr_encode(p, &h), 24);
	CU_ASSERT(word(p, 0) == 9 && word(p, 1) == REPLY && word(p, 2) == 0);
	CU_ASSERT(word(p, 3) == AUTH_NONE && word(p, 4) == 0 &&
		  word(p, 5) == SUCCESS);

	h.astat = PROG_MISMATCH;
	h.low = 2;
	h.high = 4;
	CU_ASSERT_EQUAL(rpc_reply_hdr_encode(p, &h), 32);
	CU_ASSERT(word(p, 5) == PROG_MISMATCH && word(p, 6) == 2 &&
		  word(p, 7) == 4);

	h.rstat = MSG_DENIED;
	h.jstat = RPC_MISMATCH;
	CU_ASSERT_EQUAL(rpc_reply_hdr_encode(p, &h), 24);
	CU_ASSERT(word(p, 2) == MSG_DENIED && word(p, 3) == RPC_MISMATCH &&
		  word(p, 4) == 2 && word(p, 5) == 4);

	h.jstat = AUTH_ERROR;
	h.why = AUTH_TOOWEAK;
	CU_ASSERT_EQUAL(rpc_reply_hdr_encode(p, &h), 20);
	CU_ASSERT(word(p, 3) == AUTH_ERROR && word(p, 4) == AUTH_TOOWEAK);
}

int main(void)
{
	CU_pSuite s;
	unsigned fails;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite("rpc_callhdr", NULL, NULL);
	if (!s || !CU_add_test(s, "AUTH_SYS ok", test_authsys_ok) ||
	    !CU_add_test(s, "AUTH_NONE ok", test_authnone_ok) ||
	    !CU_add_test(s, "truncated header", test_truncated) ||
	    !CU_add_test(s, "not a call", test_not_a_call) ||
	    !CU_add_test(s, "rpcvers 3", test_rpcvers3) ||
	    !CU_add_test(s, "machinename length", test_machinename_length) ||
	    !CU_add_test(s, "16 and 17 gids", test_gids) ||
	    !CU_add_test(s, "cred length mismatch",
			 test_cred_length_mismatch) ||
	    !CU_add_test(s, "bad flavors", test_bad_flavors) ||
	    !CU_add_test(s, "reply header", test_reply_hdr)) {
		CU_cleanup_registry();
		return 2;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
