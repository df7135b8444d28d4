/*
 * Unit tests for the NFSv3 wire types (nfsd/nfs3.x) and nfsd's checks of
 * what comes off the wire.
 *
 * Every argument and result type of the 22 procedures, ok and fail arms,
 * makes a round trip: encode, decode into a fresh struct, encode again and
 * compare the bytes; xdr_sizeof agrees; every shorter buffer fails to
 * decode.  Golden bytes written out from RFC 1813 catch a .x whose field
 * order differs from the RFC (a round trip alone would not).
 */
#include <CUnit/Basic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nfsd/nfs3_internal.h"

#define BUF_MAX (64 * 1024)
#define MAX_PROCS 128

/* Every codec round-tripped, to check that all of the table's are. */
static xdrproc_t seen[MAX_PROCS];
static unsigned nseen;

static void mark_seen(xdrproc_t proc)
{
	unsigned i;

	for (i = 0; i < nseen; i++)
		if (seen[i] == proc)
			return;
	if (nseen < MAX_PROCS)
		seen[nseen++] = proc;
}

static bool was_seen(xdrproc_t proc)
{
	unsigned i;

	for (i = 0; i < nseen; i++)
		if (seen[i] == proc)
			return true;
	return false;
}

/* Encode obj; returns the length, or 0 (with a failed assertion). */
static u_int encode(xdrproc_t proc, void *obj, char *buf, u_int cap)
{
	XDR x;
	u_int len;

	xdrmem_create(&x, buf, cap, XDR_ENCODE);
	if (!proc(&x, obj, 0)) {
		CU_FAIL("encode failed");
		xdr_destroy(&x);
		return 0;
	}
	len = xdr_getpos(&x);
	xdr_destroy(&x);
	return len;
}

/* Decode len bytes into a fresh zeroed object of size; NULL on failure. */
static void *decode(xdrproc_t proc, const char *buf, u_int len, size_t size)
{
	void *obj = calloc(1, size);
	XDR x;
	bool ok;

	CU_ASSERT_FATAL(obj != NULL);
	xdrmem_create(&x, (char *)buf, len, XDR_DECODE);
	ok = proc(&x, obj, 0);
	/* A decode that succeeds must have used exactly the bytes given. */
	if (ok && xdr_getpos(&x) != len)
		ok = false;
	xdr_destroy(&x);
	if (!ok) {
		xdr_free(proc, obj);
		free(obj);
		return NULL;
	}
	return obj;
}

/*
 * The round trip.  Returns the encoded length, so callers can check
 * sizes they know.
 */
static u_int roundtrip(xdrproc_t proc, void *obj, size_t size, const char *what)
{
	static char a[BUF_MAX], b[BUF_MAX];
	u_int len, len2, cut;
	void *copy;

	mark_seen(proc);
	len = encode(proc, obj, a, sizeof(a));
	CU_ASSERT_FATAL(len > 0);
	CU_ASSERT_EQUAL(len % 4, 0);
	CU_ASSERT_EQUAL(xdr_sizeof(proc, obj), len);

	copy = decode(proc, a, len, size);
	if (!copy) {
		fprintf(stderr, "%s: decode failed\n", what);
		CU_FAIL("decode of a whole encoding failed");
		return len;
	}
	len2 = encode(proc, copy, b, sizeof(b));
	CU_ASSERT_EQUAL(len2, len);
	if (len2 != len || memcmp(a, b, len) != 0) {
		fprintf(stderr, "%s: re-encoding differs\n", what);
		CU_FAIL("re-encoding differs");
	}
	xdr_free(proc, copy);
	free(copy);

	/* Every shorter buffer is a truncated message: it must not decode. */
	for (cut = 0; cut < len; cut++) {
		copy = decode(proc, a, cut, size);
		if (copy) {
			fprintf(stderr, "%s: decoded from %u of %u bytes\n",
				what, cut, len);
			CU_FAIL("truncated buffer decoded");
			xdr_free(proc, copy);
			free(copy);
			break;
		}
	}
	return len;
}

#define RT(type, obj) \
	roundtrip((xdrproc_t)xdr_##type, &(obj), sizeof(type), #type)

/* --- sample values ----------------------------------------------------- */

static char fh_bytes[NFS3_FHSIZE];
static char name_max[FS_NAME_MAX];
static char data_bytes[3000];

static nfs_fh3 fh(u_int len)
{
	nfs_fh3 f = { .data = { .data_len = len, .data_val = fh_bytes } };

	return f;
}

static filename3 name(const char *s)
{
	filename3 n = { .filename3_len = (u_int)strlen(s),
			.filename3_val = (char *)s };

	return n;
}

static filename3 long_name(void)
{
	filename3 n = { .filename3_len = sizeof(name_max),
			.filename3_val = name_max };

	return n;
}

static fattr3 fattr(uint64_t fileid)
{
	fattr3 f = {
		.type = NF3REG,
		.mode = 0644,
		.nlink = 1,
		.uid = 1000,
		.gid = 1000,
		.size = 0x123456789ull,
		.used = 8192,
		.rdev = { 0, 0 },
		.fsid = 7,
		.fileid = fileid,
		.atime = { 1, 2 },
		.mtime = { 3, 4 },
		.ctime = { 5, 6 },
	};

	return f;
}

static post_op_attr attrs(bool follow)
{
	post_op_attr p = { .attributes_follow = follow };

	if (follow)
		p.post_op_attr_u.attributes = fattr(42);
	return p;
}

static wcc_data wcc(bool before, bool after)
{
	wcc_data w = { .before = { .attributes_follow = before },
		       .after = attrs(after) };

	if (before) {
		w.before.pre_op_attr_u.attributes.size = 100;
		w.before.pre_op_attr_u.attributes.mtime.seconds = 7;
		w.before.pre_op_attr_u.attributes.ctime.nseconds = 8;
	}
	return w;
}

static post_op_fh3 post_fh(bool follow)
{
	post_op_fh3 p = { .handle_follows = follow };

	if (follow)
		p.post_op_fh3_u.handle = fh(HANDLE_LEN);
	return p;
}

static sattr3 sattr_all(void)
{
	sattr3 s = {
		.mode = { TRUE, { .mode = 0755 } },
		.uid = { TRUE, { .uid = 1 } },
		.gid = { TRUE, { .gid = 2 } },
		.size = { TRUE, { .size = 1ull << 40 } },
		.atime = { SET_TO_CLIENT_TIME, { .atime = { 9, 10 } } },
		.mtime = { SET_TO_SERVER_TIME, { .mtime = { 0, 0 } } },
	};

	return s;
}

static sattr3 sattr_none(void)
{
	sattr3 s;

	memset(&s, 0, sizeof(s)); /* all FALSE / DONT_CHANGE */
	return s;
}

static diropargs3 dirop(filename3 n)
{
	diropargs3 d = { .dir = fh(HANDLE_LEN), .name = n };

	return d;
}

static void init_samples(void)
{
	size_t i;

	for (i = 0; i < sizeof(fh_bytes); i++)
		fh_bytes[i] = (char)(0xa0 + i);
	memset(name_max, 'n', sizeof(name_max));
	for (i = 0; i < sizeof(data_bytes); i++)
		data_bytes[i] = (char)i;
}

/* --- round trips, per procedure ----------------------------------------- */

static void test_basic_types(void)
{
	nfs_fh3 f0 = fh(0), f28 = fh(HANDLE_LEN), f64 = fh(NFS3_FHSIZE);
	filename3 n0 = name(""), n255 = long_name();
	nfspath3 p = { .nfspath3_len = 5, .nfspath3_val = "a/b/c" };
	fattr3 fa = fattr(1);
	post_op_attr pa0 = attrs(false), pa1 = attrs(true);
	wcc_data w00 = wcc(false, false), w11 = wcc(true, true);
	post_op_fh3 pf0 = post_fh(false), pf1 = post_fh(true);
	sattr3 s0 = sattr_none(), s1 = sattr_all();
	diropargs3 d = dirop(n255);

	RT(nfs_fh3, f0);
	RT(nfs_fh3, f28);
	CU_ASSERT_EQUAL(RT(nfs_fh3, f64), 4 + NFS3_FHSIZE);
	CU_ASSERT_EQUAL(RT(filename3, n0), 4);
	CU_ASSERT_EQUAL(RT(filename3, n255), 4 + 256);
	RT(nfspath3, p);
	CU_ASSERT_EQUAL(RT(fattr3, fa), 84);
	CU_ASSERT_EQUAL(RT(post_op_attr, pa0), 4);
	CU_ASSERT_EQUAL(RT(post_op_attr, pa1), 88);
	RT(wcc_data, w00);
	CU_ASSERT_EQUAL(RT(wcc_data, w11), 4 + 24 + 88);
	RT(post_op_fh3, pf0);
	RT(post_op_fh3, pf1);
	CU_ASSERT_EQUAL(RT(sattr3, s0), 6 * 4);
	RT(sattr3, s1);
	RT(diropargs3, d);
}

/* A handle longer than NFS3_FHSIZE is not an nfs_fh3: it must not decode. */
static void test_fh_too_long(void)
{
	char buf[4 + 68];
	void *obj;

	memset(buf, 0, sizeof(buf));
	buf[3] = 68;
	obj = decode((xdrproc_t)xdr_nfs_fh3, buf, sizeof(buf), sizeof(nfs_fh3));
	CU_ASSERT_PTR_NULL(obj);
}

static void test_getattr_setattr_access(void)
{
	GETATTR3args ga = { fh(HANDLE_LEN) };
	GETATTR3res gok = { .status = NFS3_OK },
		    gfail = { .status = NFS3ERR_STALE };
	SETATTR3args sa = { fh(HANDLE_LEN),
			    sattr_all(),
			    { TRUE, { .obj_ctime = { 11, 12 } } } };
	SETATTR3args sa0 = { fh(HANDLE_LEN), sattr_none(), { .check = FALSE } };
	SETATTR3res sok = { .status = NFS3_OK },
		    sfail = { .status = NFS3ERR_NOT_SYNC };
	ACCESS3args aa = { fh(HANDLE_LEN), ACCESS3_READ | ACCESS3_EXECUTE };
	ACCESS3res aok = { .status = NFS3_OK },
		   afail = { .status = NFS3ERR_ACCES };

	gok.GETATTR3res_u.resok.obj_attributes = fattr(3);
	sok.SETATTR3res_u.resok.obj_wcc = wcc(true, true);
	sfail.SETATTR3res_u.resfail.obj_wcc = wcc(false, true);
	aok.ACCESS3res_u.resok.obj_attributes = attrs(true);
	aok.ACCESS3res_u.resok.access = ACCESS3_READ;
	afail.ACCESS3res_u.resfail.obj_attributes = attrs(false);

	RT(GETATTR3args, ga);
	RT(GETATTR3res, gok);
	CU_ASSERT_EQUAL(RT(GETATTR3res, gfail), 4);
	RT(SETATTR3args, sa);
	RT(SETATTR3args, sa0);
	RT(SETATTR3res, sok);
	RT(SETATTR3res, sfail);
	RT(ACCESS3args, aa);
	RT(ACCESS3res, aok);
	RT(ACCESS3res, afail);
}

static void test_lookup_readlink(void)
{
	LOOKUP3args la = { dirop(name("file.txt")) };
	LOOKUP3args lmax = { dirop(long_name()) };
	LOOKUP3args lempty = { dirop(name("")) };
	LOOKUP3res lok = { .status = NFS3_OK },
		   lfail = { .status = NFS3ERR_NOENT };
	READLINK3args ra = { fh(HANDLE_LEN) };
	READLINK3res rok = { .status = NFS3_OK },
		     rfail = { .status = NFS3ERR_INVAL };

	lok.LOOKUP3res_u.resok.object = fh(HANDLE_LEN);
	lok.LOOKUP3res_u.resok.obj_attributes = attrs(true);
	lok.LOOKUP3res_u.resok.dir_attributes = attrs(false);
	lfail.LOOKUP3res_u.resfail.dir_attributes = attrs(true);
	rok.READLINK3res_u.resok.symlink_attributes = attrs(true);
	rok.READLINK3res_u.resok.data.nfspath3_len = 7;
	rok.READLINK3res_u.resok.data.nfspath3_val = "../x/yz";
	rfail.READLINK3res_u.resfail.symlink_attributes = attrs(true);

	RT(LOOKUP3args, la);
	RT(LOOKUP3args, lmax);
	RT(LOOKUP3args, lempty);
	RT(LOOKUP3res, lok);
	RT(LOOKUP3res, lfail);
	RT(READLINK3args, ra);
	RT(READLINK3res, rok);
	RT(READLINK3res, rfail);
}

static void test_read_write_commit(void)
{
	READ3args ra = { fh(HANDLE_LEN), 1ull << 33, 1 << 20 };
	READ3res rok = { .status = NFS3_OK }, rempty = { .status = NFS3_OK },
		 rfail = { .status = NFS3ERR_IO };
	WRITE3args wa = {
		fh(HANDLE_LEN), 4096, 3, FILE_SYNC, { 3, data_bytes }
	};
	WRITE3args wbig = { fh(HANDLE_LEN),
			    0,
			    sizeof(data_bytes),
			    UNSTABLE,
			    { sizeof(data_bytes), data_bytes } };
	WRITE3res wok = { .status = NFS3_OK },
		  wfail = { .status = NFS3ERR_NOSPC };
	COMMIT3args ca = { fh(HANDLE_LEN), 0, 0 };
	COMMIT3res cok = { .status = NFS3_OK },
		   cfail = { .status = NFS3ERR_JUKEBOX };

	rok.READ3res_u.resok.file_attributes = attrs(true);
	rok.READ3res_u.resok.count = 1001;
	rok.READ3res_u.resok.eof = TRUE;
	rok.READ3res_u.resok.data.data_len = 1001;
	rok.READ3res_u.resok.data.data_val = data_bytes;
	rempty.READ3res_u.resok.eof = TRUE;
	rfail.READ3res_u.resfail.file_attributes = attrs(false);
	wok.WRITE3res_u.resok.file_wcc = wcc(true, true);
	wok.WRITE3res_u.resok.count = 3;
	wok.WRITE3res_u.resok.committed = DATA_SYNC;
	memcpy(wok.WRITE3res_u.resok.verf, "verifier", 8);
	wfail.WRITE3res_u.resfail.file_wcc = wcc(true, false);
	cok.COMMIT3res_u.resok.file_wcc = wcc(false, true);
	memcpy(cok.COMMIT3res_u.resok.verf, "VERIFIER", 8);
	cfail.COMMIT3res_u.resfail.file_wcc = wcc(false, false);

	RT(READ3args, ra);
	RT(READ3res, rok);
	RT(READ3res, rempty);
	RT(READ3res, rfail);
	RT(WRITE3args, wa);
	RT(WRITE3args, wbig);
	RT(WRITE3res, wok);
	RT(WRITE3res, wfail);
	RT(COMMIT3args, ca);
	RT(COMMIT3res, cok);
	RT(COMMIT3res, cfail);
}

static void test_create_family(void)
{
	CREATE3args cu = { dirop(name("new")), { .mode = UNCHECKED } };
	CREATE3args cg = { dirop(long_name()), { .mode = GUARDED } };
	CREATE3args cx = { dirop(name("x")), { .mode = EXCLUSIVE } };
	CREATE3res cok = { .status = NFS3_OK },
		   cfail = { .status = NFS3ERR_EXIST };
	MKDIR3args ma = { dirop(name("d")), sattr_all() };
	MKDIR3res mok = { .status = NFS3_OK },
		  mfail = { .status = NFS3ERR_NAMETOOLONG };
	SYMLINK3args sa = { dirop(name("l")),
			    { sattr_none(), { 9, "/target/x" } } };
	SYMLINK3res sok = { .status = NFS3_OK },
		    sfail = { .status = NFS3ERR_ROFS };
	MKNOD3args nchr = { dirop(name("c")), { .type = NF3CHR } };
	MKNOD3args nfifo = { dirop(name("f")), { .type = NF3FIFO } };
	MKNOD3args nreg = { dirop(name("r")), { .type = NF3REG } };
	MKNOD3res nok = { .status = NFS3_OK },
		  nfail = { .status = NFS3ERR_NOTSUPP };

	cu.how.createhow3_u.obj_attributes = sattr_all();
	cg.how.createhow3_u.obj_attributes = sattr_none();
	memcpy(cx.how.createhow3_u.verf, "12345678", 8);
	cok.CREATE3res_u.resok.obj = post_fh(true);
	cok.CREATE3res_u.resok.obj_attributes = attrs(true);
	cok.CREATE3res_u.resok.dir_wcc = wcc(true, true);
	cfail.CREATE3res_u.resfail.dir_wcc = wcc(true, true);
	mok.MKDIR3res_u.resok.obj = post_fh(false);
	mok.MKDIR3res_u.resok.obj_attributes = attrs(false);
	mok.MKDIR3res_u.resok.dir_wcc = wcc(false, false);
	mfail.MKDIR3res_u.resfail.dir_wcc = wcc(false, true);
	sok.SYMLINK3res_u.resok.obj = post_fh(true);
	sok.SYMLINK3res_u.resok.obj_attributes = attrs(true);
	sfail.SYMLINK3res_u.resfail.dir_wcc = wcc(true, false);
	nchr.what.mknoddata3_u.device.dev_attributes = sattr_all();
	nchr.what.mknoddata3_u.device.spec.specdata1 = 8;
	nchr.what.mknoddata3_u.device.spec.specdata2 = 1;
	nfifo.what.mknoddata3_u.pipe_attributes = sattr_all();
	nok.MKNOD3res_u.resok.obj = post_fh(true);
	nfail.MKNOD3res_u.resfail.dir_wcc = wcc(true, true);

	RT(CREATE3args, cu);
	RT(CREATE3args, cg);
	RT(CREATE3args, cx);
	RT(CREATE3res, cok);
	RT(CREATE3res, cfail);
	RT(MKDIR3args, ma);
	RT(MKDIR3res, mok);
	RT(MKDIR3res, mfail);
	RT(SYMLINK3args, sa);
	RT(SYMLINK3res, sok);
	RT(SYMLINK3res, sfail);
	RT(MKNOD3args, nchr);
	RT(MKNOD3args, nfifo);
	RT(MKNOD3args, nreg); /* decodes: BADTYPE is nfsd's answer */
	RT(MKNOD3res, nok);
	RT(MKNOD3res, nfail);
}

/* createhow3 has no default arm: an unknown mode is garbage. */
static void test_create_bad_mode(void)
{
	CREATE3args c = { dirop(name("x")), { .mode = EXCLUSIVE } };
	char buf[256];
	u_int len = encode((xdrproc_t)xdr_CREATE3args, &c, buf, sizeof(buf));

	CU_ASSERT_FATAL(len >= 12);
	/* The mode word follows the handle and the name ("x" + 3 pad). */
	CU_ASSERT_EQUAL(buf[4 + HANDLE_LEN + 8 + 3], EXCLUSIVE);
	buf[4 + HANDLE_LEN + 8 + 3] = 3;
	CU_ASSERT_PTR_NULL(decode((xdrproc_t)xdr_CREATE3args, buf, len,
				  sizeof(CREATE3args)));
}

static void test_remove_rename_link(void)
{
	REMOVE3args ra = { dirop(name("gone")) };
	REMOVE3res rok = { .status = NFS3_OK },
		   rfail = { .status = NFS3ERR_NOENT };
	RMDIR3args da = { dirop(long_name()) };
	RMDIR3res dok = { .status = NFS3_OK },
		  dfail = { .status = NFS3ERR_NOTEMPTY };
	RENAME3args na = { dirop(name("a")), dirop(long_name()) };
	RENAME3res nok = { .status = NFS3_OK },
		   nfail = { .status = NFS3ERR_XDEV };
	LINK3args la = { fh(HANDLE_LEN), dirop(name("hard")) };
	LINK3res lok = { .status = NFS3_OK },
		 lfail = { .status = NFS3ERR_NOTSUPP };

	rok.REMOVE3res_u.resok.dir_wcc = wcc(true, true);
	rfail.REMOVE3res_u.resfail.dir_wcc = wcc(false, true);
	dok.RMDIR3res_u.resok.dir_wcc = wcc(true, true);
	dfail.RMDIR3res_u.resfail.dir_wcc = wcc(true, false);
	nok.RENAME3res_u.resok.fromdir_wcc = wcc(true, true);
	nok.RENAME3res_u.resok.todir_wcc = wcc(false, true);
	nfail.RENAME3res_u.resfail.fromdir_wcc = wcc(true, false);
	nfail.RENAME3res_u.resfail.todir_wcc = wcc(false, false);
	lok.LINK3res_u.resok.file_attributes = attrs(true);
	lok.LINK3res_u.resok.linkdir_wcc = wcc(true, true);
	lfail.LINK3res_u.resfail.file_attributes = attrs(true);
	lfail.LINK3res_u.resfail.linkdir_wcc = wcc(false, true);

	RT(REMOVE3args, ra);
	RT(REMOVE3res, rok);
	RT(REMOVE3res, rfail);
	RT(RMDIR3args, da);
	RT(RMDIR3res, dok);
	RT(RMDIR3res, dfail);
	RT(RENAME3args, na);
	RT(RENAME3res, nok);
	RT(RENAME3res, nfail);
	RT(LINK3args, la);
	RT(LINK3res, lok);
	RT(LINK3res, lfail);
}

static const char *const dir_names[] = { ".", "..", "a", "four",
					 "a-much-longer-file-name.txt" };
#define NDIR (sizeof(dir_names) / sizeof(dir_names[0]))

static void test_readdir(void)
{
	READDIR3args a = { fh(HANDLE_LEN), 0, { 0 }, 4096 };
	READDIR3res ok = { .status = NFS3_OK }, empty = { .status = NFS3_OK },
		    fail = { .status = NFS3ERR_BAD_COOKIE };
	entry3 e[NDIR];
	size_t i, want = nfs3_xdr_readdir_base_size();
	READDIR3res *back;
	static char buf[BUF_MAX];
	u_int len;

	memset(e, 0, sizeof(e));
	for (i = 0; i < NDIR; i++) {
		e[i].fileid = 100 + i;
		e[i].name = name(dir_names[i]);
		e[i].cookie = i + 1;
		e[i].nextentry = i + 1 < NDIR ? &e[i + 1] : NULL;
		want += nfs3_xdr_entry3_size(strlen(dir_names[i]));
	}
	ok.READDIR3res_u.resok.dir_attributes = attrs(true);
	memcpy(ok.READDIR3res_u.resok.cookieverf, "cookieVF", 8);
	ok.READDIR3res_u.resok.reply.entries = e;
	ok.READDIR3res_u.resok.reply.eof = TRUE;
	empty.READDIR3res_u.resok.dir_attributes = attrs(true);
	empty.READDIR3res_u.resok.reply.eof = TRUE;
	fail.READDIR3res_u.resfail.dir_attributes = attrs(true);

	RT(READDIR3args, a);
	/* The size nfsd budgets with is the size XDR really writes. */
	CU_ASSERT_EQUAL(RT(READDIR3res, ok), want);
	CU_ASSERT_EQUAL(RT(READDIR3res, empty), nfs3_xdr_readdir_base_size());
	RT(READDIR3res, fail);

	/* And the list comes back whole, in order. */
	len = encode((xdrproc_t)xdr_READDIR3res, &ok, buf, sizeof(buf));
	back = decode((xdrproc_t)xdr_READDIR3res, buf, len, sizeof(*back));
	CU_ASSERT_FATAL(back != NULL);
	{
		entry3 *p = back->READDIR3res_u.resok.reply.entries;

		for (i = 0; i < NDIR && p; i++, p = p->nextentry) {
			CU_ASSERT_EQUAL(p->fileid, 100 + i);
			CU_ASSERT_EQUAL(p->cookie, i + 1);
			CU_ASSERT_EQUAL(p->name.filename3_len,
					strlen(dir_names[i]));
			CU_ASSERT(memcmp(p->name.filename3_val, dir_names[i],
					 p->name.filename3_len) == 0);
		}
		CU_ASSERT_EQUAL(i, NDIR);
		CU_ASSERT_PTR_NULL(p);
	}
	xdr_free((xdrproc_t)xdr_READDIR3res, (char *)back);
	free(back);
}

static void test_readdirplus(void)
{
	READDIRPLUS3args a = { fh(HANDLE_LEN), 77, { 1, 2, 3 }, 8192, 65536 };
	READDIRPLUS3res ok = { .status = NFS3_OK },
			fail = { .status = NFS3ERR_TOOSMALL };
	entryplus3 e[NDIR];
	size_t i, want = nfs3_xdr_readdir_base_size();
	READDIRPLUS3res *back;
	static char buf[BUF_MAX];
	u_int len;

	memset(e, 0, sizeof(e));
	for (i = 0; i < NDIR; i++) {
		/* Mixed: attributes and handles on some entries only. */
		bool with_attr = i != 1, with_fh = i % 2 == 0;

		e[i].fileid = 200 + i;
		e[i].name = i == NDIR - 1 ? long_name() : name(dir_names[i]);
		e[i].cookie = 1000 + i;
		e[i].name_attributes = attrs(with_attr);
		e[i].name_handle = post_fh(with_fh);
		e[i].nextentry = i + 1 < NDIR ? &e[i + 1] : NULL;
		want += nfs3_xdr_entryplus3_size(e[i].name.filename3_len,
						 with_attr, with_fh);
	}
	ok.READDIRPLUS3res_u.resok.dir_attributes = attrs(true);
	ok.READDIRPLUS3res_u.resok.reply.entries = e;
	ok.READDIRPLUS3res_u.resok.reply.eof = FALSE;
	fail.READDIRPLUS3res_u.resfail.dir_attributes = attrs(false);

	RT(READDIRPLUS3args, a);
	CU_ASSERT_EQUAL(RT(READDIRPLUS3res, ok), want);
	RT(READDIRPLUS3res, fail);

	len = encode((xdrproc_t)xdr_READDIRPLUS3res, &ok, buf, sizeof(buf));
	back = decode((xdrproc_t)xdr_READDIRPLUS3res, buf, len, sizeof(*back));
	CU_ASSERT_FATAL(back != NULL);
	{
		entryplus3 *p = back->READDIRPLUS3res_u.resok.reply.entries;

		for (i = 0; i < NDIR && p; i++, p = p->nextentry) {
			CU_ASSERT_EQUAL(p->fileid, 200 + i);
			CU_ASSERT_EQUAL(p->cookie, 1000 + i);
			CU_ASSERT_EQUAL(p->name_attributes.attributes_follow,
					i != 1);
			CU_ASSERT_EQUAL(p->name_handle.handle_follows,
					i % 2 == 0);
			if (p->name_handle.handle_follows)
				CU_ASSERT_EQUAL(p->name_handle.post_op_fh3_u
							.handle.data.data_len,
						HANDLE_LEN);
		}
		CU_ASSERT_EQUAL(i, NDIR);
		CU_ASSERT_FALSE(back->READDIRPLUS3res_u.resok.reply.eof);
	}
	xdr_free((xdrproc_t)xdr_READDIRPLUS3res, (char *)back);
	free(back);
}

static void test_fs_procs(void)
{
	FSSTAT3args sa = { fh(HANDLE_LEN) };
	FSSTAT3res sok = { .status = NFS3_OK },
		   sfail = { .status = NFS3ERR_IO };
	FSINFO3args ia = { fh(HANDLE_LEN) };
	FSINFO3res iok = { .status = NFS3_OK },
		   ifail = { .status = NFS3ERR_STALE };
	PATHCONF3args pa = { fh(HANDLE_LEN) };
	PATHCONF3res pok = { .status = NFS3_OK },
		     pfail = { .status = NFS3ERR_BADHANDLE };
	FSSTAT3resok *s = &sok.FSSTAT3res_u.resok;
	FSINFO3resok *i = &iok.FSINFO3res_u.resok;
	PATHCONF3resok *p = &pok.PATHCONF3res_u.resok;

	s->obj_attributes = attrs(true);
	s->tbytes = ~0ull;
	s->fbytes = 1;
	s->abytes = 2;
	s->tfiles = 3;
	s->ffiles = 4;
	s->afiles = 5;
	i->obj_attributes = attrs(true);
	i->rtmax = i->rtpref = i->wtmax = i->wtpref = 1 << 20;
	i->rtmult = i->wtmult = 4096;
	i->dtpref = NFS3_DIR_MAX;
	i->maxfilesize = NFS3_MAXFILESIZE;
	i->time_delta.nseconds = 1;
	i->properties = FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME;
	p->obj_attributes = attrs(false);
	p->linkmax = 1;
	p->name_max = 255;
	p->no_trunc = p->chown_restricted = p->case_preserving = TRUE;
	sfail.FSSTAT3res_u.resfail.obj_attributes = attrs(true);
	ifail.FSINFO3res_u.resfail.obj_attributes = attrs(false);
	pfail.PATHCONF3res_u.resfail.obj_attributes = attrs(false);

	RT(FSSTAT3args, sa);
	RT(FSSTAT3res, sok);
	RT(FSSTAT3res, sfail);
	RT(FSINFO3args, ia);
	CU_ASSERT_EQUAL(RT(FSINFO3res, iok), 4 + 88 + 7 * 4 + 8 + 8 + 4);
	RT(FSINFO3res, ifail);
	RT(PATHCONF3args, pa);
	CU_ASSERT_EQUAL(RT(PATHCONF3res, pok), 4 + 4 + 6 * 4);
	RT(PATHCONF3res, pfail);
}

/* --- golden bytes from RFC 1813 ---------------------------------------- */

struct wire {
	unsigned char b[512];
	size_t len;
};

static void put32(struct wire *w, uint32_t v)
{
	w->b[w->len++] = (unsigned char)(v >> 24);
	w->b[w->len++] = (unsigned char)(v >> 16);
	w->b[w->len++] = (unsigned char)(v >> 8);
	w->b[w->len++] = (unsigned char)v;
}

static void put64(struct wire *w, uint64_t v)
{
	put32(w, (uint32_t)(v >> 32));
	put32(w, (uint32_t)v);
}

static void put_bytes(struct wire *w, const void *p, size_t n)
{
	put32(w, (uint32_t)n);
	memcpy(w->b + w->len, p, n);
	w->len += n;
	while (w->len % 4)
		w->b[w->len++] = 0;
}

static void expect_bytes(xdrproc_t proc, void *obj, const struct wire *w)
{
	char buf[512];
	u_int len = encode(proc, obj, buf, sizeof(buf));

	CU_ASSERT_EQUAL(len, w->len);
	CU_ASSERT(len == w->len && memcmp(buf, w->b, len) == 0);
}

/* 2.6: fattr3 in declaration order. */
static void put_fattr(struct wire *w, const fattr3 *f)
{
	put32(w, f->type);
	put32(w, f->mode);
	put32(w, f->nlink);
	put32(w, f->uid);
	put32(w, f->gid);
	put64(w, f->size);
	put64(w, f->used);
	put32(w, f->rdev.specdata1);
	put32(w, f->rdev.specdata2);
	put64(w, f->fsid);
	put64(w, f->fileid);
	put32(w, f->atime.seconds);
	put32(w, f->atime.nseconds);
	put32(w, f->mtime.seconds);
	put32(w, f->mtime.nseconds);
	put32(w, f->ctime.seconds);
	put32(w, f->ctime.nseconds);
}

static void test_golden(void)
{
	struct wire w = { .len = 0 };
	GETATTR3res g = { .status = NFS3_OK };
	SETATTR3args s = { fh(4),
			   sattr_none(),
			   { TRUE, { .obj_ctime = { 5, 6 } } } };
	WRITE3args wr = { fh(4), 5, 3, FILE_SYNC, { 3, "xyz" } };
	READDIRPLUS3res rp = { .status = NFS3_OK };
	entryplus3 e = { .fileid = 9,
			 .name = name("ab"),
			 .cookie = 3,
			 .name_attributes = attrs(false),
			 .name_handle = post_fh(true) };

	g.GETATTR3res_u.resok.obj_attributes = fattr(42);
	put32(&w, 0);
	put_fattr(&w, &g.GETATTR3res_u.resok.obj_attributes);
	expect_bytes((xdrproc_t)xdr_GETATTR3res, &g, &w);

	/* 3.3.2: handle, sattr3 (mode uid gid size atime mtime), guard. */
	s.new_attributes.mode.set_it = TRUE;
	s.new_attributes.mode.set_mode3_u.mode = 0755;
	s.new_attributes.gid.set_it = TRUE;
	s.new_attributes.gid.set_gid3_u.gid = 5;
	s.new_attributes.atime.set_it = SET_TO_SERVER_TIME;
	s.new_attributes.mtime.set_it = SET_TO_CLIENT_TIME;
	s.new_attributes.mtime.set_mtime_u.mtime.seconds = 1;
	s.new_attributes.mtime.set_mtime_u.mtime.nseconds = 2;
	w.len = 0;
	put_bytes(&w, fh_bytes, 4);
	put32(&w, 1);
	put32(&w, 0755);
	put32(&w, 0);
	put32(&w, 1);
	put32(&w, 5);
	put32(&w, 0);
	put32(&w, SET_TO_SERVER_TIME);
	put32(&w, SET_TO_CLIENT_TIME);
	put32(&w, 1);
	put32(&w, 2);
	put32(&w, 1);
	put32(&w, 5);
	put32(&w, 6);
	expect_bytes((xdrproc_t)xdr_SETATTR3args, &s, &w);

	/* 3.3.7: file, offset, count, stable, data. */
	w.len = 0;
	put_bytes(&w, fh_bytes, 4);
	put64(&w, 5);
	put32(&w, 3);
	put32(&w, 2);
	put_bytes(&w, "xyz", 3);
	expect_bytes((xdrproc_t)xdr_WRITE3args, &wr, &w);

	/* 3.3.17: one entry with a handle and no attributes. */
	rp.READDIRPLUS3res_u.resok.dir_attributes = attrs(false);
	memcpy(rp.READDIRPLUS3res_u.resok.cookieverf, "\0\0\0\0\0\0\0\x11", 8);
	rp.READDIRPLUS3res_u.resok.reply.entries = &e;
	rp.READDIRPLUS3res_u.resok.reply.eof = TRUE;
	w.len = 0;
	put32(&w, 0);
	put32(&w, 0);
	put64(&w, 0x11);
	put32(&w, 1);
	put64(&w, 9);
	put_bytes(&w, "ab", 2);
	put64(&w, 3);
	put32(&w, 0);
	put32(&w, 1);
	put_bytes(&w, fh_bytes, HANDLE_LEN);
	put32(&w, 0);
	put32(&w, 1);
	expect_bytes((xdrproc_t)xdr_READDIRPLUS3res, &rp, &w);
}

static void test_numbers(void)
{
	CU_ASSERT_EQUAL(NFS_PROGRAM, 100003);
	CU_ASSERT_EQUAL(NFS_V3, 3);
	CU_ASSERT_EQUAL(NFSPROC3_GETATTR, 1);
	CU_ASSERT_EQUAL(NFSPROC3_READ, 6);
	CU_ASSERT_EQUAL(NFSPROC3_LINK, 15);
	CU_ASSERT_EQUAL(NFSPROC3_READDIRPLUS, 17);
	CU_ASSERT_EQUAL(NFSPROC3_COMMIT, 21);
	CU_ASSERT_EQUAL(NFS3ERR_NAMETOOLONG, 63);
	CU_ASSERT_EQUAL(NFS3ERR_STALE, 70);
	CU_ASSERT_EQUAL(NFS3ERR_BADHANDLE, 10001);
	CU_ASSERT_EQUAL(NFS3ERR_JUKEBOX, 10008);
	CU_ASSERT_EQUAL(NF3FIFO, FS_FIFO);
	CU_ASSERT_EQUAL(NF3LNK, FS_LNK);
	CU_ASSERT_EQUAL(FILE_SYNC, FS_FILE_SYNC);
	CU_ASSERT_EQUAL(ACCESS3_EXECUTE, FS_ACCESS_EXECUTE);
	CU_ASSERT_EQUAL(ACCESS3_DELETE, FS_ACCESS_DELETE);
}

/* --- nfsd's checks of decoded values ------------------------------------ */

static void test_names(void)
{
	char out[FS_NAME_MAX + 1];
	char too_long[FS_NAME_MAX + 1];
	filename3 n;

	n = name("file");
	CU_ASSERT_EQUAL(nfs3_name(&n, NFS3_NAME_CREATE, out), NFS3_OK);
	CU_ASSERT_STRING_EQUAL(out, "file");
	n = name("");
	CU_ASSERT_EQUAL(nfs3_name(&n, NFS3_NAME_LOOKUP, out), NFS3ERR_NOENT);
	n = name("a/b");
	CU_ASSERT_EQUAL(nfs3_name(&n, NFS3_NAME_LOOKUP, out), NFS3ERR_INVAL);
	/* "a\0b": a C string would be "a", another file. */
	n.filename3_val = "a\0b";
	n.filename3_len = 3;
	CU_ASSERT_EQUAL(nfs3_name(&n, NFS3_NAME_LOOKUP, out), NFS3ERR_INVAL);
	n = long_name();
	CU_ASSERT_EQUAL(nfs3_name(&n, NFS3_NAME_CREATE, out), NFS3_OK);
	CU_ASSERT_EQUAL(strlen(out), FS_NAME_MAX);
	memset(too_long, 'x', sizeof(too_long));
	n.filename3_val = too_long;
	n.filename3_len = sizeof(too_long);
	CU_ASSERT_EQUAL(nfs3_name(&n, NFS3_NAME_LOOKUP, out),
			NFS3ERR_NAMETOOLONG);
	n = name(".");
	CU_ASSERT_EQUAL(nfs3_name(&n, NFS3_NAME_LOOKUP, out), NFS3_OK);
	CU_ASSERT_EQUAL(nfs3_name(&n, NFS3_NAME_CREATE, out), NFS3ERR_EXIST);
	n = name("..");
	CU_ASSERT_EQUAL(nfs3_name(&n, NFS3_NAME_LOOKUP, out), NFS3_OK);
	CU_ASSERT_EQUAL(nfs3_name(&n, NFS3_NAME_CHANGE, out), NFS3ERR_INVAL);
	n = name("...");
	CU_ASSERT_EQUAL(nfs3_name(&n, NFS3_NAME_CHANGE, out), NFS3_OK);
}

static void test_paths(void)
{
	static char big[FS_PATH_MAX + 1], out[FS_PATH_MAX + 1];
	nfspath3 p = { .nfspath3_len = 6, .nfspath3_val = "../a/b" };

	CU_ASSERT_EQUAL(nfs3_path(&p, out), NFS3_OK);
	CU_ASSERT_STRING_EQUAL(out, "../a/b");
	p.nfspath3_len = 0;
	CU_ASSERT_EQUAL(nfs3_path(&p, out), NFS3ERR_INVAL);
	p.nfspath3_val = "a\0";
	p.nfspath3_len = 2;
	CU_ASSERT_EQUAL(nfs3_path(&p, out), NFS3ERR_INVAL);
	memset(big, 'p', sizeof(big));
	p.nfspath3_val = big;
	p.nfspath3_len = FS_PATH_MAX;
	CU_ASSERT_EQUAL(nfs3_path(&p, out), NFS3_OK);
	p.nfspath3_len = FS_PATH_MAX + 1;
	CU_ASSERT_EQUAL(nfs3_path(&p, out), NFS3ERR_NAMETOOLONG);
}

static void test_sattr(void)
{
	sattr3 s = sattr_all();
	struct fs_sattr f;

	CU_ASSERT_EQUAL(nfs3_sattr(&s, &f), NFS3_OK);
	CU_ASSERT_EQUAL(f.mask, FS_SET_MODE | FS_SET_UID | FS_SET_GID |
					FS_SET_SIZE | FS_SET_ATIME |
					FS_SET_MTIME_NOW);
	CU_ASSERT_EQUAL(f.mode, 0755);
	CU_ASSERT_EQUAL(f.uid, 1);
	CU_ASSERT_EQUAL(f.gid, 2);
	CU_ASSERT_EQUAL(f.size, 1ull << 40);
	CU_ASSERT_EQUAL(f.atime.tv_sec, 9);
	CU_ASSERT_EQUAL(f.atime.tv_nsec, 10);

	s = sattr_none();
	CU_ASSERT_EQUAL(nfs3_sattr(&s, &f), NFS3_OK);
	CU_ASSERT_EQUAL(f.mask, 0);

	s.mtime.set_it = SET_TO_CLIENT_TIME;
	s.mtime.set_mtime_u.mtime.nseconds = 1000000000u;
	CU_ASSERT_EQUAL(nfs3_sattr(&s, &f), NFS3ERR_INVAL);
	/* rpcgen decodes any enum value: 7 is no time_how. */
	s.mtime.set_it = (time_how)7;
	CU_ASSERT_EQUAL(nfs3_sattr(&s, &f), NFS3ERR_INVAL);
}

static void test_fattr(void)
{
	struct nfsd n;
	struct fs_attr a = {
		.ino = 99,
		.gen = 3,
		.type = FS_LNK,
		.mode = 0120777,
		.nlink = 1,
		.uid = 5,
		.gid = 6,
		.size = 10,
		.used = 4096,
		.rdev_major = 1,
		.rdev_minor = 2,
		.atime = { 100, 5 },
		.mtime = { -5, 7 },
		.ctime = { (time_t)1 << 40, 0 },
	};
	fattr3 f;

	memset(&n, 0, sizeof(n));
	n.fsid = 0xabcdef;
	nfs3_fattr(&n, &a, &f);
	CU_ASSERT_EQUAL(f.type, NF3LNK);
	CU_ASSERT_EQUAL(f.mode, 0777); /* the type is not in mode3 */
	CU_ASSERT_EQUAL(f.fsid, 0xabcdef);
	CU_ASSERT_EQUAL(f.fileid, 99);
	CU_ASSERT_EQUAL(f.used, 4096);
	CU_ASSERT_EQUAL(f.rdev.specdata1, 1);
	CU_ASSERT_EQUAL(f.rdev.specdata2, 2);
	CU_ASSERT_EQUAL(f.atime.seconds, 100);
	CU_ASSERT_EQUAL(f.atime.nseconds, 5);
	/* Out of the wire's range: clamped, not wrapped. */
	CU_ASSERT_EQUAL(f.mtime.seconds, 0);
	CU_ASSERT_EQUAL(f.ctime.seconds, UINT32_MAX);
}

/* The attributes the hand-written encoders are checked with. */
static const struct fs_attr wire_attrs[] = {
	{ .ino = 99,
	  .gen = 3,
	  .type = FS_LNK,
	  .mode = 0120777,
	  .nlink = 1,
	  .uid = 5,
	  .gid = 6,
	  .size = 10,
	  .used = 4096,
	  .rdev_major = 1,
	  .rdev_minor = 2,
	  .atime = { 100, 5 },
	  .mtime = { -5, 7 },
	  .ctime = { (time_t)1 << 40, 0 } },
	{ .ino = UINT64_MAX - 1,
	  .type = FS_REG,
	  .mode = 07777,
	  .nlink = UINT32_MAX,
	  .uid = UINT32_MAX,
	  .gid = 0,
	  .size = (5ull << 40) + 3,
	  .used = 1ull << 50,
	  .mtime = { 1700000000, 999999999 } },
	{ .ino = 1, .type = FS_DIR, .mode = 0755, .nlink = 2 },
};

/* rpcgen's bytes of obj, to compare a hand-written encoder with. */
static u_int rpcgen_bytes(xdrproc_t proc, void *obj, char *buf)
{
	return encode(proc, obj, buf, BUF_MAX);
}

/* nfsd/nfs3_wire.c writes exactly what rpcgen would. */
static void test_wire(void)
{
	static char want[BUF_MAX], got[BUF_MAX];
	struct nfsd n;
	u_int len;

	memset(&n, 0, sizeof(n));
	n.fsid = 0x55667788;
	for (size_t i = 0; i < sizeof(wire_attrs) / sizeof(wire_attrs[0]);
	     i++) {
		const struct fs_attr *a = &wire_attrs[i];
		fattr3 f;
		post_op_attr pa;

		nfs3_fattr(&n, a, &f);
		len = rpcgen_bytes((xdrproc_t)xdr_fattr3, &f, want);
		CU_ASSERT_EQUAL(len, NFS3_XDR_FATTR3);
		CU_ASSERT_EQUAL(nfs3_put_fattr3((uint8_t *)got, &n, a) -
					(uint8_t *)got,
				len);
		CU_ASSERT(memcmp(want, got, len) == 0);

		for (int have = 0; have < 2; have++) {
			nfs3_post_op_attr(&n, have ? a : NULL, &pa);
			len = rpcgen_bytes((xdrproc_t)xdr_post_op_attr, &pa,
					   want);
			CU_ASSERT_EQUAL(nfs3_put_post_op_attr((uint8_t *)got,
							      &n,
							      have ? a : NULL) -
						(uint8_t *)got,
					len);
			CU_ASSERT(memcmp(want, got, len) == 0);
		}

		/* GETATTR, ACCESS, LOOKUP (with and without dir attrs). */
		GETATTR3res g = { .status = NFS3_OK };

		nfs3_fattr(&n, a, &g.GETATTR3res_u.resok.obj_attributes);
		len = rpcgen_bytes((xdrproc_t)xdr_GETATTR3res, &g, want);
		CU_ASSERT_EQUAL(len, NFS3_XDR_GETATTR_OK);
		CU_ASSERT_EQUAL(nfs3_put_getattr_ok((uint8_t *)got, &n, a) -
					(uint8_t *)got,
				len);
		CU_ASSERT(memcmp(want, got, len) == 0);

		ACCESS3res ac = { .status = NFS3_OK };

		nfs3_post_op_attr(&n, a, &ac.ACCESS3res_u.resok.obj_attributes);
		ac.ACCESS3res_u.resok.access = 0x2d;
		len = rpcgen_bytes((xdrproc_t)xdr_ACCESS3res, &ac, want);
		CU_ASSERT_EQUAL(len, NFS3_XDR_ACCESS_OK);
		CU_ASSERT_EQUAL(
			nfs3_put_access_ok((uint8_t *)got, &n, a, 0x2d) -
				(uint8_t *)got,
			len);
		CU_ASSERT(memcmp(want, got, len) == 0);

		for (int dir = 0; dir < 2; dir++) {
			const struct fs_attr *da = dir ? &wire_attrs[2] : NULL;
			LOOKUP3res lk = { .status = NFS3_OK };
			LOOKUP3resok *ok = &lk.LOOKUP3res_u.resok;

			CU_ASSERT_FATAL(nfs3_fh_make(&n, 77, a, &ok->object));
			nfs3_post_op_attr(&n, a, &ok->obj_attributes);
			nfs3_post_op_attr(&n, da, &ok->dir_attributes);
			len = rpcgen_bytes((xdrproc_t)xdr_LOOKUP3res, &lk,
					   want);
			free(ok->object.data.data_val);
			CU_ASSERT(len <= NFS3_XDR_LOOKUP_OK_MAX);
			CU_ASSERT_EQUAL(nfs3_put_lookup_ok((uint8_t *)got, &n,
							   77, a, da) -
						(uint8_t *)got,
					len);
			CU_ASSERT(memcmp(want, got, len) == 0);
		}

		/* READ: the head, then the data where rpcgen puts it. */
		for (uint32_t count = 0; count < 9; count += 3) {
			READ3res r;
			char data[16] = "abcdefghijklmno";

			memset(&r, 0, sizeof(r));
			r.status = NFS3_OK;
			nfs3_post_op_attr(&n, a,
					  &r.READ3res_u.resok.file_attributes);
			r.READ3res_u.resok.count = count;
			r.READ3res_u.resok.eof = count == 6;
			r.READ3res_u.resok.data.data_len = count;
			r.READ3res_u.resok.data.data_val = data;
			len = rpcgen_bytes((xdrproc_t)xdr_READ3res, &r, want);
			CU_ASSERT_EQUAL(len, NFS3_XDR_READ_HEAD +
						     ((count + 3) & ~3u));
			memset(got, 0, sizeof(got));
			CU_ASSERT_EQUAL(nfs3_put_read_head((uint8_t *)got, &n,
							   a, count,
							   count == 6) -
						(uint8_t *)got,
					NFS3_XDR_READ_HEAD);
			memcpy(got + NFS3_XDR_READ_HEAD, data, count);
			CU_ASSERT(memcmp(want, got, len) == 0);
		}
	}
}

/*
 * The in-place decoders of nfs3_wire.c: a round trip each (decoded in
 * place, encoded again by rpcgen: the same bytes; every truncation
 * refused), the same fields as rpcgen's decode of those bytes, pointers
 * into the buffer where promised, and a too-long handle refused.
 */
#define RT_INPLACE(name, args)                                            \
	do {                                                              \
		struct name w_ = { .a = (args) };                         \
		roundtrip((xdrproc_t)name##_xdr, &w_, sizeof(w_), #name); \
	} while (0)

static void test_inplace_args(void)
{
	static char buf[BUF_MAX];
	WRITE3args wa = { fh(HANDLE_LEN),
			  1ull << 40,
			  3000,
			  DATA_SYNC,
			  { sizeof(data_bytes), data_bytes } };
	WRITE3args w0 = { fh(0), 0, 0, UNSTABLE, { 0, NULL } };
	LOOKUP3args la = { dirop(name("a.b")) }, lmax = { dirop(long_name()) };
	struct nfs3_write_args *wd;
	struct nfs3_lookup_args *ld;
	u_int len;
	char *bad;

	RT_INPLACE(nfs3_getattr_args, ((GETATTR3args){ fh(HANDLE_LEN) }));
	RT_INPLACE(nfs3_getattr_args, ((GETATTR3args){ fh(NFS3_FHSIZE) }));
	RT_INPLACE(nfs3_access_args, ((ACCESS3args){ fh(HANDLE_LEN), 0x3f }));
	RT_INPLACE(nfs3_lookup_args, la);
	RT_INPLACE(nfs3_lookup_args, lmax);
	RT_INPLACE(nfs3_lookup_args, ((LOOKUP3args){ dirop(name("")) }));
	RT_INPLACE(nfs3_read_args,
		   ((READ3args){ fh(HANDLE_LEN), 1ull << 33, 1 << 20 }));
	RT_INPLACE(nfs3_write_args, wa);
	RT_INPLACE(nfs3_write_args, w0);
	RT_INPLACE(nfs3_commit_args, ((COMMIT3args){ fh(HANDLE_LEN), 7, 9 }));

	/* WRITE: fields as given, data left in the buffer, handle copied. */
	len = encode((xdrproc_t)xdr_WRITE3args, &wa, buf, sizeof(buf));
	wd = decode((xdrproc_t)nfs3_write_args_xdr, buf, len, sizeof(*wd));
	CU_ASSERT_FATAL(wd != NULL);
	CU_ASSERT_EQUAL(wd->a.offset, wa.offset);
	CU_ASSERT_EQUAL(wd->a.count, wa.count);
	CU_ASSERT_EQUAL(wd->a.stable, DATA_SYNC);
	CU_ASSERT_EQUAL(wd->a.data.data_len, sizeof(data_bytes));
	CU_ASSERT(wd->a.data.data_val >= buf &&
		  wd->a.data.data_val < buf + len);
	CU_ASSERT(memcmp(wd->a.data.data_val, data_bytes, sizeof(data_bytes)) ==
		  0);
	CU_ASSERT(wd->a.file.data.data_val == wd->fh);
	CU_ASSERT(wd->a.file.data.data_len == HANDLE_LEN &&
		  memcmp(wd->fh, fh_bytes, HANDLE_LEN) == 0);
	free(wd);

	len = encode((xdrproc_t)xdr_LOOKUP3args, &lmax, buf, sizeof(buf));
	ld = decode((xdrproc_t)nfs3_lookup_args_xdr, buf, len, sizeof(*ld));
	CU_ASSERT_FATAL(ld != NULL);
	CU_ASSERT_EQUAL(ld->a.what.name.filename3_len, sizeof(name_max));
	CU_ASSERT(ld->a.what.name.filename3_val > buf &&
		  memcmp(ld->a.what.name.filename3_val, name_max,
			 sizeof(name_max)) == 0);
	free(ld);

	/* A 68-byte handle, and a WRITE whose data length wraps when
	 * padded: refused as rpcgen refuses them. */
	memset(buf, 0, 4 + 68 + 16);
	buf[3] = 68;
	bad = decode((xdrproc_t)nfs3_getattr_args_xdr, buf, 4 + 68,
		     sizeof(struct nfs3_getattr_args));
	CU_ASSERT_PTR_NULL(bad);
	memset(buf, 0, 64);
	buf[3] = 4;                /* a 4-byte handle */
	buf[23] = 0;               /* stable */
	memset(buf + 24, 0xff, 4); /* data length 2^32 - 1 */
	bad = decode((xdrproc_t)nfs3_write_args_xdr, buf, 64,
		     sizeof(struct nfs3_write_args));
	CU_ASSERT_PTR_NULL(bad);
}

/* Every codec of the dispatch table was round-tripped above. */
static void test_table_covered(void)
{
	struct rpc_program p = nfsd_program(NULL);
	uint32_t i;

	CU_ASSERT_EQUAL(p.prog, NFS_PROGRAM);
	CU_ASSERT_EQUAL(p.vers, NFS_V3);
	CU_ASSERT_EQUAL_FATAL(p.nprocs, 22);
	for (i = 0; i < p.nprocs; i++) {
		const struct rpc_proc *pr = &p.procs[i];

		CU_ASSERT_PTR_NOT_NULL(pr->name);
		CU_ASSERT_PTR_NOT_NULL(pr->handler);
		CU_ASSERT_EQUAL(!!(pr->flags & RPC_PROC_AUTH_NONE_OK), i == 0);
		if (i == NFSPROC3_NULL)
			continue;
		if (!was_seen(pr->decode) || !was_seen(pr->encode)) {
			fprintf(stderr, "%s: codec not round-tripped\n",
				pr->name);
			CU_FAIL("codec not covered");
		}
	}
}

int main(void)
{
	CU_pSuite s;
	unsigned failed;

	init_samples();
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite("nfsd_xdr", NULL, NULL);
	CU_add_test(s, "basic types", test_basic_types);
	CU_add_test(s, "handle too long", test_fh_too_long);
	CU_add_test(s, "GETATTR SETATTR ACCESS", test_getattr_setattr_access);
	CU_add_test(s, "LOOKUP READLINK", test_lookup_readlink);
	CU_add_test(s, "READ WRITE COMMIT", test_read_write_commit);
	CU_add_test(s, "CREATE MKDIR SYMLINK MKNOD", test_create_family);
	CU_add_test(s, "CREATE bad mode", test_create_bad_mode);
	CU_add_test(s, "REMOVE RMDIR RENAME LINK", test_remove_rename_link);
	CU_add_test(s, "READDIR", test_readdir);
	CU_add_test(s, "READDIRPLUS", test_readdirplus);
	CU_add_test(s, "FSSTAT FSINFO PATHCONF", test_fs_procs);
	CU_add_test(s, "golden bytes", test_golden);
	CU_add_test(s, "hand-written encoders = rpcgen", test_wire);
	CU_add_test(s, "in-place argument decoders", test_inplace_args);
	CU_add_test(s, "numbers", test_numbers);
	CU_add_test(s, "names", test_names);
	CU_add_test(s, "paths", test_paths);
	CU_add_test(s, "sattr3", test_sattr);
	CU_add_test(s, "fattr3", test_fattr);
	CU_add_test(s, "table covered", test_table_covered);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
