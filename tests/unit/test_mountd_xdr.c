/*
 * Unit tests for mountd/mount3.x: every MOUNT v3 argument and result type
 * survives an encode/decode round trip, at empty and maximum sizes, and
 * what is over a bound is refused when decoded.
 */
#include <CUnit/Basic.h>
#include <stdlib.h>
#include <string.h>

#include "mountd/mount3_prot.h"
#include "nfsd/nfsd.h"

#define BUF_SIZE (64 * 1024)

static char buf[BUF_SIZE];

/* Encode *obj with proc; returns the encoded length, or 0 on failure. */
static u_int encode(xdrproc_t proc, void *obj)
{
	XDR x;
	u_int len = 0;

	xdrmem_create(&x, buf, sizeof(buf), XDR_ENCODE);
	if (proc(&x, obj))
		len = xdr_getpos(&x);
	xdr_destroy(&x);
	return len;
}

/* Decode len bytes of buf with proc into zeroed *obj; true on success. */
static bool decode(xdrproc_t proc, void *obj, u_int len)
{
	XDR x;
	bool_t ok;

	xdrmem_create(&x, buf, len, XDR_DECODE);
	ok = proc(&x, obj);
	xdr_destroy(&x);
	return ok;
}

/* A string of len copies of c (caller frees). */
static char *filled(size_t len, char c)
{
	char *s = malloc(len + 1);

	CU_ASSERT_FATAL(s != NULL);
	memset(s, c, len);
	s[len] = '\0';
	return s;
}

/* Raw XDR of a string of n bytes of c, bypassing any length bound. */
static u_int raw_string(u_int n, char c)
{
	XDR x;
	u_int len;
	char *s = filled(n, c);

	xdrmem_create(&x, buf, sizeof(buf), XDR_ENCODE);
	CU_ASSERT_FATAL(xdr_u_int(&x, &n) && xdr_opaque(&x, s, n));
	len = xdr_getpos(&x);
	xdr_destroy(&x);
	free(s);
	return len;
}

static void check_string(xdrproc_t proc, const char *s)
{
	char *in = (char *)s, *out = NULL;
	u_int len = encode(proc, &in);

	/* Length word, bytes, padding to 4. */
	CU_ASSERT(len == 4 + ((strlen(s) + 3) & ~3u));
	CU_ASSERT_FATAL(decode(proc, &out, len));
	CU_ASSERT(out && strcmp(out, s) == 0);
	xdr_free(proc, (char *)&out);
}

static void test_dirpath(void)
{
	char *max = filled(MNTPATHLEN, 'p'),
	     *over = filled(MNTPATHLEN + 1, 'p');
	char *out = NULL;
	static const uint8_t wire[] = { 0,   0,   0,   6,   '/', 'm',
					'a', 'p', 'f', 's', 0,   0 };

	check_string((xdrproc_t)xdr_mnt3_dirpath, "");
	check_string((xdrproc_t)xdr_mnt3_dirpath, "/mapfs");
	check_string((xdrproc_t)xdr_mnt3_dirpath, max);
	/* The bytes on the wire, as RFC 4506 4.11 lays a string out. */
	out = "/mapfs";
	CU_ASSERT(encode((xdrproc_t)xdr_mnt3_dirpath, &out) == sizeof(wire));
	CU_ASSERT(memcmp(buf, wire, sizeof(wire)) == 0);
	out = NULL;

	/* Over MNTPATHLEN: not encoded, and refused when a client sends it. */
	CU_ASSERT(encode((xdrproc_t)xdr_mnt3_dirpath, &over) == 0);
	u_int len = raw_string(MNTPATHLEN + 1, 'p');
	CU_ASSERT(!decode((xdrproc_t)xdr_mnt3_dirpath, &out, len));
	CU_ASSERT(out == NULL);
	free(max);
	free(over);
}

/* The decoder the MNT and UMNT procedures really use. */
static void test_proc_dirpath_decoder(void)
{
	struct nfsd n;
	struct rpc_program p;
	char *out = NULL;
	u_int len;
	XDR x;
	static const char nul_path[] = "/mapfs/a\0b";
	u_int nul_len = sizeof(nul_path) - 1;

	memset(&n, 0, sizeof(n));
	p = mountd_program(&n);
	CU_ASSERT(p.prog == 100005 && p.vers == 3);
	CU_ASSERT_FATAL(p.nprocs == 6);
	CU_ASSERT(p.ctx == &n);
	xdrproc_t mnt = p.procs[MOUNTPROC3_MNT].decode;
	CU_ASSERT_FATAL(mnt != NULL);
	CU_ASSERT(p.procs[MOUNTPROC3_UMNT].decode == mnt);

	len = raw_string(MNTPATHLEN, 'q');
	CU_ASSERT(decode(mnt, &out, len));
	CU_ASSERT(out && strlen(out) == MNTPATHLEN);
	xdr_free(mnt, (char *)&out);
	CU_ASSERT(out == NULL);

	len = raw_string(MNTPATHLEN + 1, 'q');
	CU_ASSERT(!decode(mnt, &out, len));
	CU_ASSERT(out == NULL);

	/* A truncated string. */
	len = raw_string(8, 'q');
	CU_ASSERT(!decode(mnt, &out, len - 4));
	CU_ASSERT(out == NULL);

	/* An embedded NUL: the generic decoder silently shortens, ours refuses. */
	xdrmem_create(&x, buf, sizeof(buf), XDR_ENCODE);
	CU_ASSERT_FATAL(xdr_u_int(&x, &nul_len) &&
			xdr_opaque(&x, (char *)nul_path, nul_len));
	len = xdr_getpos(&x);
	xdr_destroy(&x);
	CU_ASSERT(decode((xdrproc_t)xdr_mnt3_dirpath, &out, len));
	CU_ASSERT(out && strcmp(out, "/mapfs/a") == 0);
	xdr_free((xdrproc_t)xdr_mnt3_dirpath, (char *)&out);
	CU_ASSERT(!decode(mnt, &out, len));
	CU_ASSERT(out == NULL);
}

static void test_name(void)
{
	char *max = filled(MNTNAMLEN, 'n'), *out = NULL;

	check_string((xdrproc_t)xdr_mnt3_name, "");
	check_string((xdrproc_t)xdr_mnt3_name, "client1.example");
	check_string((xdrproc_t)xdr_mnt3_name, max);
	u_int len = raw_string(MNTNAMLEN + 1, 'n');
	CU_ASSERT(!decode((xdrproc_t)xdr_mnt3_name, &out, len));
	CU_ASSERT(out == NULL);
	free(max);
}

static void check_fhandle(u_int n)
{
	char data[MNT3_FHSIZE + 1];
	fhandle3 in = { n, data }, out = { 0, NULL };
	u_int len;

	for (u_int i = 0; i < n; i++)
		data[i] = (char)(i * 7 + 1);
	len = encode((xdrproc_t)xdr_fhandle3, &in);
	if (n > MNT3_FHSIZE) {
		CU_ASSERT(len == 0);
		return;
	}
	CU_ASSERT(len == 4 + ((n + 3) & ~3u));
	CU_ASSERT_FATAL(decode((xdrproc_t)xdr_fhandle3, &out, len));
	CU_ASSERT(out.fhandle3_len == n);
	CU_ASSERT(n == 0 || memcmp(out.fhandle3_val, data, n) == 0);
	xdr_free((xdrproc_t)xdr_fhandle3, (char *)&out);
}

static void test_fhandle(void)
{
	fhandle3 out = { 0, NULL };

	check_fhandle(0);
	check_fhandle(HANDLE_LEN);
	check_fhandle(MNT3_FHSIZE);
	check_fhandle(MNT3_FHSIZE + 1);
	u_int len = raw_string(MNT3_FHSIZE + 1, 'h');
	CU_ASSERT(!decode((xdrproc_t)xdr_fhandle3, &out, len));
	CU_ASSERT(out.fhandle3_val == NULL);
}

static void test_mountstat(void)
{
	static const mountstat3 all[] = {
		MNT3_OK,         MNT3ERR_PERM,
		MNT3ERR_NOENT,   MNT3ERR_IO,
		MNT3ERR_ACCES,   MNT3ERR_NOTDIR,
		MNT3ERR_INVAL,   MNT3ERR_NAMETOOLONG,
		MNT3ERR_NOTSUPP, MNT3ERR_SERVERFAULT,
	};
	static const int numbers[] = {
		0, 1, 2, 5, 13, 20, 22, 63, 10004, 10006
	};

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		mountstat3 in = all[i], out = MNT3ERR_IO;

		CU_ASSERT((int)in == numbers[i]); /* RFC 1813 Appendix I */
		CU_ASSERT_FATAL(encode((xdrproc_t)xdr_mountstat3, &in) == 4);
		CU_ASSERT(decode((xdrproc_t)xdr_mountstat3, &out, 4));
		CU_ASSERT(out == in);
	}
}

static void check_mountres_ok(u_int fhlen, u_int nflavors)
{
	char fh[MNT3_FHSIZE];
	int flavors[4] = { 1, 0, 6, 390003 };
	mountres3 in, out;
	u_int len;

	memset(&in, 0, sizeof(in));
	memset(&out, 0, sizeof(out));
	for (u_int i = 0; i < fhlen; i++)
		fh[i] = (char)(0xa0 + i);
	in.fhs_status = MNT3_OK;
	in.mountres3_u.mountinfo.fhandle.fhandle3_len = fhlen;
	in.mountres3_u.mountinfo.fhandle.fhandle3_val = fh;
	in.mountres3_u.mountinfo.auth_flavors.auth_flavors_len = nflavors;
	in.mountres3_u.mountinfo.auth_flavors.auth_flavors_val = flavors;
	len = encode((xdrproc_t)xdr_mountres3, &in);
	CU_ASSERT(len == 4 + 4 + ((fhlen + 3) & ~3u) + 4 + 4 * nflavors);
	CU_ASSERT_FATAL(decode((xdrproc_t)xdr_mountres3, &out, len));
	mountres3_ok *ok = &out.mountres3_u.mountinfo;
	CU_ASSERT(out.fhs_status == MNT3_OK);
	CU_ASSERT(ok->fhandle.fhandle3_len == fhlen);
	CU_ASSERT(fhlen == 0 ||
		  memcmp(ok->fhandle.fhandle3_val, fh, fhlen) == 0);
	CU_ASSERT(ok->auth_flavors.auth_flavors_len == nflavors);
	CU_ASSERT(nflavors == 0 ||
		  memcmp(ok->auth_flavors.auth_flavors_val, flavors,
			 nflavors * sizeof(int)) == 0);
	xdr_free((xdrproc_t)xdr_mountres3, (char *)&out);
}

static void test_mountres(void)
{
	mountres3 in, out;

	check_mountres_ok(HANDLE_LEN, 1);
	check_mountres_ok(HANDLE_LEN, 2);
	check_mountres_ok(MNT3_FHSIZE, 4);
	check_mountres_ok(0, 0);

	/* A failure carries the status alone. */
	memset(&in, 0, sizeof(in));
	memset(&out, 0, sizeof(out));
	in.fhs_status = MNT3ERR_NOENT;
	CU_ASSERT_FATAL(encode((xdrproc_t)xdr_mountres3, &in) == 4);
	CU_ASSERT(decode((xdrproc_t)xdr_mountres3, &out, 4));
	CU_ASSERT(out.fhs_status == MNT3ERR_NOENT);
	/* An OK whose body is missing is refused. */
	in.fhs_status = MNT3_OK;
	encode((xdrproc_t)xdr_mountstat3, &in.fhs_status);
	CU_ASSERT(!decode((xdrproc_t)xdr_mountres3, &out, 4));
	xdr_free((xdrproc_t)xdr_mountres3, (char *)&out);
}

static void test_mountlist(void)
{
	char *maxhost = filled(MNTNAMLEN, 'h'),
	     *maxdir = filled(MNTPATHLEN, 'd');
	mountbody b[3] = {
		{ "client-a", "/mapfs", &b[1] },
		{ "10.0.0.2", "/mapfs/sub/dir", &b[2] },
		{ maxhost, maxdir, NULL },
	};
	mountlist in = NULL, out = NULL, m;
	int i = 0;
	u_int len;

	/* The empty list is a single FALSE. */
	CU_ASSERT(encode((xdrproc_t)xdr_mountlist, &in) == 4);
	CU_ASSERT(decode((xdrproc_t)xdr_mountlist, &out, 4) && out == NULL);

	in = &b[0];
	len = encode((xdrproc_t)xdr_mountlist, &in);
	CU_ASSERT_FATAL(len > 0);
	CU_ASSERT_FATAL(decode((xdrproc_t)xdr_mountlist, &out, len));
	for (m = out; m; m = m->ml_next, i++) {
		CU_ASSERT_FATAL(i < 3);
		CU_ASSERT(strcmp(m->ml_hostname, b[i].ml_hostname) == 0);
		CU_ASSERT(strcmp(m->ml_directory, b[i].ml_directory) == 0);
	}
	CU_ASSERT(i == 3);
	xdr_free((xdrproc_t)xdr_mountlist, (char *)&out);
	CU_ASSERT(out == NULL);

	/* Cut short in the middle of the list: refused. */
	CU_ASSERT(!decode((xdrproc_t)xdr_mountlist, &out, len / 2));
	xdr_free((xdrproc_t)xdr_mountlist, (char *)&out);
	free(maxhost);
	free(maxdir);
}

static void test_groups(void)
{
	char *max = filled(MNTNAMLEN, 'g');
	groupnode g[3] = { { "*", &g[1] }, { "", &g[2] }, { max, NULL } };
	mnt3_groups in = NULL, out = NULL, p;
	int i = 0;
	u_int len;

	CU_ASSERT(encode((xdrproc_t)xdr_mnt3_groups, &in) == 4);
	CU_ASSERT(decode((xdrproc_t)xdr_mnt3_groups, &out, 4) && out == NULL);
	in = &g[0];
	len = encode((xdrproc_t)xdr_mnt3_groups, &in);
	CU_ASSERT_FATAL(decode((xdrproc_t)xdr_mnt3_groups, &out, len));
	for (p = out; p; p = p->gr_next, i++) {
		CU_ASSERT_FATAL(i < 3);
		CU_ASSERT(strcmp(p->gr_name, g[i].gr_name) == 0);
	}
	CU_ASSERT(i == 3);
	xdr_free((xdrproc_t)xdr_mnt3_groups, (char *)&out);
	free(max);
}

static void test_exports(void)
{
	groupnode g[2] = { { "*", &g[1] }, { "trusted", NULL } };
	exportnode e[2] = { { "/mapfs", &g[0], &e[1] },
			    { "/other", NULL, NULL } };
	mnt3_exports in = NULL, out = NULL;
	u_int len;

	CU_ASSERT(encode((xdrproc_t)xdr_mnt3_exports, &in) == 4);
	CU_ASSERT(decode((xdrproc_t)xdr_mnt3_exports, &out, 4) && out == NULL);

	in = &e[0];
	len = encode((xdrproc_t)xdr_mnt3_exports, &in);
	CU_ASSERT_FATAL(decode((xdrproc_t)xdr_mnt3_exports, &out, len));
	CU_ASSERT_FATAL(out != NULL);
	CU_ASSERT(strcmp(out->ex_dir, "/mapfs") == 0);
	CU_ASSERT_FATAL(out->ex_groups && out->ex_groups->gr_next);
	CU_ASSERT(strcmp(out->ex_groups->gr_name, "*") == 0);
	CU_ASSERT(strcmp(out->ex_groups->gr_next->gr_name, "trusted") == 0);
	CU_ASSERT(out->ex_groups->gr_next->gr_next == NULL);
	CU_ASSERT_FATAL(out->ex_next != NULL);
	CU_ASSERT(strcmp(out->ex_next->ex_dir, "/other") == 0);
	CU_ASSERT(out->ex_next->ex_groups == NULL);
	CU_ASSERT(out->ex_next->ex_next == NULL);
	xdr_free((xdrproc_t)xdr_mnt3_exports, (char *)&out);
}

int main(void)
{
	CU_initialize_registry();
	CU_pSuite s = CU_add_suite("mountd xdr", NULL, NULL);
	CU_add_test(s, "dirpath", test_dirpath);
	CU_add_test(s, "MNT/UMNT argument decoder", test_proc_dirpath_decoder);
	CU_add_test(s, "name", test_name);
	CU_add_test(s, "fhandle3", test_fhandle);
	CU_add_test(s, "mountstat3", test_mountstat);
	CU_add_test(s, "mountres3", test_mountres);
	CU_add_test(s, "mountlist", test_mountlist);
	CU_add_test(s, "groups", test_groups);
	CU_add_test(s, "exports", test_exports);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
