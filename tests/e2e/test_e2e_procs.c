/*
 * tests/e2e/test_e2e_procs.c - every NFSv3 procedure and every MOUNT v3
 * procedure against a real gateway, through libnfs's raw RPC API, with
 * exact nfsstat3 checks on the success path and the main error paths
 * (RFC 1813), and post-op / wcc attributes on failure too.
 *
 * One gateway serves the whole suite; each test works in its own
 * directory under the export root.  The last test stops the gateway with
 * SIGTERM and wants exit 0 and nothing but the ready line on stdout.
 */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

static struct e2e_gw gw;
static struct e2e_rpc *R; /* NFS v3 on the NFS port */
static nfs_fh3 ROOT;

/* ------------------------------------------------------------------ */
/* helpers                                                             */

static void want_wcc_after(const wcc_data *w, const char *what)
{
	E2E_CHECK(w->after.attributes_follow,
		  "%s: wcc_data.after attributes missing (RFC 1813 wants "
		  "them on success and failure)",
		  what);
}

static void want_post_op(const post_op_attr *p, const char *what)
{
	E2E_CHECK(p->attributes_follow, "%s: post_op_attr missing", what);
}

static fattr3 getattr_ok(const nfs_fh3 *fh, const char *what)
{
	GETATTR3res res;

	E2E_RPC(R, e2e_nfs3_getattr(R, fh, &res));
	E2E_REQUIRE(res.status == NFS3_OK, "GETATTR %s: got %s, want NFS3_OK",
		    what, e2e_nfsstat(res.status));
	return res.GETATTR3res_u.resok.obj_attributes;
}

static nfs_fh3 lookup_ok(const nfs_fh3 *dir, const char *name)
{
	LOOKUP3res res;

	E2E_RPC(R, e2e_nfs3_lookup(R, dir, name, &res));
	E2E_REQUIRE(res.status == NFS3_OK, "LOOKUP '%s': got %s, want NFS3_OK",
		    name, e2e_nfsstat(res.status));
	return res.LOOKUP3res_u.resok.object;
}

static int lookup_status(const nfs_fh3 *dir, const char *name)
{
	LOOKUP3res res;

	E2E_RPC(R, e2e_nfs3_lookup(R, dir, name, &res));
	return res.status;
}

/* The handle from a post_op_fh3, or from LOOKUP when the server left it out. */
static nfs_fh3 obj_fh(const post_op_fh3 *p, const nfs_fh3 *dir,
		      const char *name)
{
	if (p->handle_follows)
		return p->post_op_fh3_u.handle;
	return lookup_ok(dir, name);
}

static nfs_fh3 mk_dir(const nfs_fh3 *parent, const char *name)
{
	MKDIR3args a = { .where = { .dir = *parent, .name = (char *)name },
			 .attributes = e2e_sattr_mode(0755) };
	MKDIR3res res;

	E2E_RPC(R, e2e_nfs3_mkdir(R, &a, &res));
	E2E_REQUIRE(res.status == NFS3_OK, "MKDIR '%s': got %s, want NFS3_OK",
		    name, e2e_nfsstat(res.status));
	return obj_fh(&res.MKDIR3res_u.resok.obj, parent, name);
}

static nfs_fh3 mk_file(const nfs_fh3 *dir, const char *name, const void *data,
		       uint32_t len)
{
	CREATE3args a = { .where = { .dir = *dir, .name = (char *)name } };
	CREATE3res res;
	nfs_fh3 fh;

	a.how.mode = UNCHECKED;
	a.how.createhow3_u.obj_attributes = e2e_sattr_mode(0644);
	E2E_RPC(R, e2e_nfs3_create(R, &a, &res));
	E2E_REQUIRE(res.status == NFS3_OK, "CREATE '%s': got %s, want NFS3_OK",
		    name, e2e_nfsstat(res.status));
	fh = obj_fh(&res.CREATE3res_u.resok.obj, dir, name);
	/* In pieces of at most wtmax (1 MiB). */
	for (uint32_t off = 0; off < len; off += 1u << 20) {
		uint32_t n = len - off < (1u << 20) ? len - off : 1u << 20;
		WRITE3res w;

		E2E_RPC(R, e2e_nfs3_write(R, &fh, off, (const char *)data + off,
					  n, FILE_SYNC, &w));
		E2E_REQUIRE(
			w.status == NFS3_OK && w.WRITE3res_u.resok.count == n,
			"WRITE %u bytes to '%s': got %s count %u", n, name,
			e2e_nfsstat(w.status),
			w.status == NFS3_OK ? w.WRITE3res_u.resok.count : 0);
	}
	return fh;
}

/*
 * A fingerprint of a directory's listing (names, fileids) via READDIR,
 * to show that a failed call changed nothing.
 */
static void dir_fingerprint(const nfs_fh3 *dir, char hex[65], int *count)
{
	struct e2e_sha256 s;
	uint8_t d[32];
	cookie3 cookie = 0;
	char verf[NFS3_COOKIEVERFSIZE] = { 0 };
	int n = 0, rounds = 0;

	e2e_sha256_init(&s);
	for (;;) {
		READDIR3args a = { .dir = *dir,
				   .cookie = cookie,
				   .count = 65536 };
		READDIR3res res;
		READDIR3resok *ok;

		memcpy(a.cookieverf, verf, sizeof(verf));
		E2E_RPC(R, e2e_nfs3_readdir(R, &a, &res));
		E2E_REQUIRE(res.status == NFS3_OK,
			    "READDIR for fingerprint: got %s",
			    e2e_nfsstat(res.status));
		ok = &res.READDIR3res_u.resok;
		memcpy(verf, ok->cookieverf, sizeof(verf));
		for (entry3 *e = ok->reply.entries; e; e = e->nextentry) {
			e2e_sha256_update(&s, e->name, strlen(e->name) + 1);
			e2e_sha256_update(&s, &e->fileid, sizeof(e->fileid));
			cookie = e->cookie;
			n++;
		}
		if (ok->reply.eof)
			break;
		E2E_REQUIRE(++rounds < 1000, "READDIR never reached eof");
	}
	e2e_sha256_final(&s, d);
	e2e_digest_hex(d, hex);
	*count = n;
}

/* Does READDIR of dir list name? */
static int dir_has(const nfs_fh3 *dir, const char *name)
{
	READDIR3args a = { .dir = *dir, .cookie = 0, .count = 65536 };
	READDIR3res res;

	E2E_RPC(R, e2e_nfs3_readdir(R, &a, &res));
	E2E_REQUIRE(res.status == NFS3_OK, "READDIR: got %s",
		    e2e_nfsstat(res.status));
	E2E_REQUIRE(res.READDIR3res_u.resok.reply.eof,
		    "READDIR of a small test dir did not fit in 64 KiB");
	for (entry3 *e = res.READDIR3res_u.resok.reply.entries; e;
	     e = e->nextentry)
		if (strcmp(e->name, name) == 0)
			return 1;
	return 0;
}

/* ------------------------------------------------------------------ */
/* suite                                                               */

static int suite_init(void)
{
	if (e2e_gw_start(&gw, 2) != 0)
		return -1;
	R = e2e_rpc_open(gw.nfs_port, NFS_PROGRAM, NFS_V3);
	if (!R)
		return -1;
	if (e2e_root_fh(R, &gw, &ROOT) != 0)
		return -1;
	return 0;
}

static int suite_clean(void)
{
	e2e_rpc_close(R);
	R = NULL;
	e2e_gw_cleanup(&gw);
	return 0;
}

/* ------------------------------------------------------------------ */
/* NFSv3                                                               */

static void test_null(void)
{
	struct e2e_rpc *m;

	E2E_RPC(R, e2e_nfs3_null(R));
	m = e2e_rpc_open(gw.mount_port, MOUNT_PROGRAM, MOUNT_V3);
	E2E_REQUIRE(m, "connect to the mount port %d", gw.mount_port);
	E2E_CHECK(e2e_mnt3_null(m) == 0, "MOUNT NULL: %s", e2e_rpc_error(m));
	e2e_rpc_close(m);
}

static void test_libnfs_mount(void)
{
	struct nfs_context *nfs = e2e_nfs_mount(&gw);
	struct nfs_stat_64 st;
	int rc;

	E2E_REQUIRE(nfs, "libnfs nfs_mount with nfsport=%d mountport=%d",
		    gw.nfs_port, gw.mount_port);
	rc = nfs_stat64(nfs, "/", &st);
	E2E_CHECK(rc == 0, "nfs_stat64('/'): %d %s", rc, nfs_get_error(nfs));
	E2E_CHECK(rc != 0 || (st.nfs_mode & 0170000) == 0040000,
		  "root mode %o is not a directory", (unsigned)st.nfs_mode);
	E2E_CHECK(nfs_get_readmax(nfs) == 1048576 &&
			  nfs_get_writemax(nfs) == 1048576,
		  "libnfs sees readmax %llu writemax %llu, want 1 MiB each",
		  (unsigned long long)nfs_get_readmax(nfs),
		  (unsigned long long)nfs_get_writemax(nfs));
	nfs_destroy_context(nfs);
}

static void test_getattr(void)
{
	nfs_fh3 d = mk_dir(&ROOT, "t_getattr");
	nfs_fh3 f = mk_file(&d, "f", "hello", 5);
	fattr3 ra = getattr_ok(&ROOT, "root");
	fattr3 da = getattr_ok(&d, "dir");
	fattr3 fa = getattr_ok(&f, "file");

	E2E_CHECK(ra.type == NF3DIR, "root type %d, want NF3DIR", ra.type);
	E2E_CHECK(da.type == NF3DIR, "dir type %d, want NF3DIR", da.type);
	E2E_CHECK(fa.type == NF3REG, "file type %d, want NF3REG", fa.type);
	E2E_CHECK(fa.size == 5, "file size %llu, want 5",
		  (unsigned long long)fa.size);
	E2E_CHECK((fa.mode & 07777) == 0644, "file mode %o, want 0644",
		  fa.mode & 07777);
	E2E_CHECK(fa.nlink >= 1, "file nlink %u", fa.nlink);
	E2E_CHECK(fa.fileid != da.fileid && da.fileid != ra.fileid,
		  "fileids not distinct: root %llu dir %llu file %llu",
		  (unsigned long long)ra.fileid, (unsigned long long)da.fileid,
		  (unsigned long long)fa.fileid);
	E2E_CHECK(fa.fsid == ra.fsid, "fsid differs: root %llu file %llu",
		  (unsigned long long)ra.fsid, (unsigned long long)fa.fsid);
}

static void test_setattr(void)
{
	nfs_fh3 d = mk_dir(&ROOT, "t_setattr");
	nfs_fh3 f = mk_file(&d, "f", "0123456789abcdef", 16);
	SETATTR3args a;
	SETATTR3res res;
	fattr3 fa;

	/* mode */
	memset(&a, 0, sizeof(a));
	a.object = f;
	a.new_attributes = e2e_sattr_mode(0600);
	E2E_RPC(R, e2e_nfs3_setattr(R, &a, &res));
	E2E_STATUS("SETATTR mode 0600", res.status, NFS3_OK);
	want_wcc_after(&res.SETATTR3res_u.resok.obj_wcc, "SETATTR mode");
	if (res.SETATTR3res_u.resok.obj_wcc.after.attributes_follow)
		E2E_CHECK((res.SETATTR3res_u.resok.obj_wcc.after.post_op_attr_u
				   .attributes.mode &
			   07777) == 0600,
			  "SETATTR wcc after: mode %o, want 0600",
			  res.SETATTR3res_u.resok.obj_wcc.after.post_op_attr_u
					  .attributes.mode &
				  07777);
	fa = getattr_ok(&f, "after SETATTR mode");
	E2E_CHECK((fa.mode & 07777) == 0600, "mode %o after SETATTR, want 0600",
		  fa.mode & 07777);

	/* size (truncate) */
	a.new_attributes = e2e_sattr_none();
	a.new_attributes.size.set_it = 1;
	a.new_attributes.size.set_size3_u.size = 10;
	E2E_RPC(R, e2e_nfs3_setattr(R, &a, &res));
	E2E_STATUS("SETATTR size 10", res.status, NFS3_OK);
	fa = getattr_ok(&f, "after truncate");
	E2E_CHECK(fa.size == 10, "size %llu after truncate, want 10",
		  (unsigned long long)fa.size);
	{
		READ3res rd;

		E2E_RPC(R, e2e_nfs3_read(R, &f, 0, 100, &rd));
		E2E_STATUS("READ after truncate", rd.status, NFS3_OK);
		if (rd.status == NFS3_OK)
			E2E_CHECK(rd.READ3res_u.resok.count == 10 &&
					  memcmp(rd.READ3res_u.resok.data
							 .data_val,
						 "0123456789", 10) == 0,
				  "READ after truncate: %u bytes, want "
				  "'0123456789'",
				  rd.READ3res_u.resok.count);
	}

	/* mtime set by the client */
	a.new_attributes = e2e_sattr_none();
	a.new_attributes.mtime.set_it = SET_TO_CLIENT_TIME;
	a.new_attributes.mtime.set_mtime_u.mtime.seconds = 1000000000;
	a.new_attributes.mtime.set_mtime_u.mtime.nseconds = 0;
	E2E_RPC(R, e2e_nfs3_setattr(R, &a, &res));
	E2E_STATUS("SETATTR mtime", res.status, NFS3_OK);
	fa = getattr_ok(&f, "after SETATTR mtime");
	E2E_CHECK(fa.mtime.seconds == 1000000000,
		  "mtime %u after SETATTR, want 1000000000", fa.mtime.seconds);

	/* guard: a wrong ctime answers NOT_SYNC and changes nothing */
	fa = getattr_ok(&f, "before guard");
	a.new_attributes = e2e_sattr_mode(0644);
	a.guard.check = 1;
	a.guard.sattrguard3_u.obj_ctime = fa.ctime;
	a.guard.sattrguard3_u.obj_ctime.seconds += 1000;
	E2E_RPC(R, e2e_nfs3_setattr(R, &a, &res));
	E2E_STATUS("SETATTR with a wrong guard ctime", res.status,
		   NFS3ERR_NOT_SYNC);
	want_wcc_after(&res.SETATTR3res_u.resfail.obj_wcc, "SETATTR NOT_SYNC");
	fa = getattr_ok(&f, "after NOT_SYNC");
	E2E_CHECK((fa.mode & 07777) == 0600,
		  "mode %o after a NOT_SYNC SETATTR, want 0600 (unchanged)",
		  fa.mode & 07777);

	/* guard: the right ctime works */
	a.guard.sattrguard3_u.obj_ctime = fa.ctime;
	E2E_RPC(R, e2e_nfs3_setattr(R, &a, &res));
	E2E_STATUS("SETATTR with the right guard ctime", res.status, NFS3_OK);
	fa = getattr_ok(&f, "after guarded SETATTR");
	E2E_CHECK((fa.mode & 07777) == 0644, "mode %o, want 0644",
		  fa.mode & 07777);
}

static void test_lookup(void)
{
	nfs_fh3 d = mk_dir(&ROOT, "t_lookup");
	nfs_fh3 f = mk_file(&d, "f", "x", 1);
	nfs_fh3 sub = mk_dir(&d, "sub");
	LOOKUP3res res;
	fattr3 da = getattr_ok(&d, "dir");
	fattr3 fa = getattr_ok(&f, "file");

	E2E_RPC(R, e2e_nfs3_lookup(R, &d, "f", &res));
	E2E_STATUS("LOOKUP existing", res.status, NFS3_OK);
	if (res.status == NFS3_OK) {
		LOOKUP3resok *ok = &res.LOOKUP3res_u.resok;

		E2E_CHECK(e2e_fh_equal(&ok->object, &f),
			  "LOOKUP handle differs from CREATE's handle");
		want_post_op(&ok->obj_attributes, "LOOKUP obj_attributes");
		want_post_op(&ok->dir_attributes, "LOOKUP dir_attributes");
		if (ok->obj_attributes.attributes_follow)
			E2E_CHECK(ok->obj_attributes.post_op_attr_u.attributes
						  .fileid == fa.fileid,
				  "LOOKUP fileid differs from GETATTR's");
	}

	E2E_RPC(R, e2e_nfs3_lookup(R, &d, "missing", &res));
	E2E_STATUS("LOOKUP missing", res.status, NFS3ERR_NOENT);
	want_post_op(&res.LOOKUP3res_u.resfail.dir_attributes,
		     "LOOKUP NOENT dir_attributes");

	E2E_RPC(R, e2e_nfs3_lookup(R, &f, "x", &res));
	E2E_STATUS("LOOKUP in a file", res.status, NFS3ERR_NOTDIR);

	E2E_RPC(R, e2e_nfs3_lookup(R, &sub, "..", &res));
	E2E_STATUS("LOOKUP '..'", res.status, NFS3_OK);
	if (res.status == NFS3_OK) {
		fattr3 pa = getattr_ok(&res.LOOKUP3res_u.resok.object, "'..'");

		E2E_CHECK(pa.fileid == da.fileid,
			  "LOOKUP sub/.. gave fileid %llu, want the parent's "
			  "%llu",
			  (unsigned long long)pa.fileid,
			  (unsigned long long)da.fileid);
	}
	E2E_RPC(R, e2e_nfs3_lookup(R, &d, ".", &res));
	E2E_STATUS("LOOKUP '.'", res.status, NFS3_OK);
	if (res.status == NFS3_OK) {
		fattr3 pa = getattr_ok(&res.LOOKUP3res_u.resok.object, "'.'");

		E2E_CHECK(pa.fileid == da.fileid,
			  "LOOKUP dir/. gave fileid %llu, want %llu",
			  (unsigned long long)pa.fileid,
			  (unsigned long long)da.fileid);
	}
}

static void test_access(void)
{
	nfs_fh3 d = mk_dir(&ROOT, "t_access");
	nfs_fh3 f = mk_file(&d, "f", "x", 1);
	const uint32_t all = ACCESS3_READ | ACCESS3_LOOKUP | ACCESS3_MODIFY |
			     ACCESS3_EXTEND | ACCESS3_DELETE | ACCESS3_EXECUTE;
	ACCESS3res res;

	E2E_RPC(R, e2e_nfs3_access(R, &f, ACCESS3_READ, &res));
	E2E_STATUS("ACCESS READ on own 0644 file", res.status, NFS3_OK);
	if (res.status == NFS3_OK) {
		E2E_CHECK(res.ACCESS3res_u.resok.access == ACCESS3_READ,
			  "ACCESS READ on own 0644 file: got 0x%x, want 0x%x",
			  res.ACCESS3res_u.resok.access, ACCESS3_READ);
		want_post_op(&res.ACCESS3res_u.resok.obj_attributes,
			     "ACCESS obj_attributes");
	}
	E2E_RPC(R, e2e_nfs3_access(R, &f, all, &res));
	E2E_STATUS("ACCESS all on file", res.status, NFS3_OK);
	if (res.status == NFS3_OK) {
		uint32_t got = res.ACCESS3res_u.resok.access;

		E2E_CHECK((got & ~all) == 0,
			  "ACCESS granted bits 0x%x not asked for", got & ~all);
		E2E_CHECK((got & (ACCESS3_READ | ACCESS3_MODIFY)) ==
				  (ACCESS3_READ | ACCESS3_MODIFY),
			  "ACCESS on own 0644 file: 0x%x lacks READ|MODIFY",
			  got);
	}
	E2E_RPC(R, e2e_nfs3_access(R, &d, ACCESS3_LOOKUP | ACCESS3_READ, &res));
	E2E_STATUS("ACCESS on dir", res.status, NFS3_OK);
	if (res.status == NFS3_OK)
		E2E_CHECK(res.ACCESS3res_u.resok.access ==
				  (ACCESS3_LOOKUP | ACCESS3_READ),
			  "ACCESS LOOKUP|READ on own 0755 dir: got 0x%x",
			  res.ACCESS3res_u.resok.access);
}

static nfs_fh3 mk_symlink(const nfs_fh3 *dir, const char *name,
			  const char *target, SYMLINK3res *res)
{
	SYMLINK3args a = { .where = { .dir = *dir, .name = (char *)name } };

	a.symlink.symlink_attributes = e2e_sattr_none();
	a.symlink.symlink_data = (char *)target;
	E2E_RPC(R, e2e_nfs3_symlink(R, &a, res));
	if (res->status != NFS3_OK)
		return (nfs_fh3){ { 0, NULL } };
	return obj_fh(&res->SYMLINK3res_u.resok.obj, dir, name);
}

static void test_symlink_readlink(void)
{
	nfs_fh3 d = mk_dir(&ROOT, "t_symlink");
	nfs_fh3 f = mk_file(&d, "f", "x", 1);
	SYMLINK3res sres;
	READLINK3res res;
	nfs_fh3 l = mk_symlink(&d, "l", "../some/target", &sres);

	E2E_STATUS("SYMLINK", sres.status, NFS3_OK);
	if (sres.status != NFS3_OK)
		return;
	want_wcc_after(&sres.SYMLINK3res_u.resok.dir_wcc, "SYMLINK dir_wcc");
	E2E_CHECK(getattr_ok(&l, "symlink").type == NF3LNK,
		  "symlink type is not NF3LNK");

	E2E_RPC(R, e2e_nfs3_readlink(R, &l, &res));
	E2E_STATUS("READLINK", res.status, NFS3_OK);
	if (res.status == NFS3_OK)
		E2E_CHECK(strcmp(res.READLINK3res_u.resok.data,
				 "../some/target") == 0,
			  "READLINK: got '%s', want '../some/target'",
			  res.READLINK3res_u.resok.data);

	E2E_RPC(R, e2e_nfs3_readlink(R, &f, &res));
	E2E_STATUS("READLINK of a regular file", res.status, NFS3ERR_INVAL);
	want_post_op(&res.READLINK3res_u.resfail.symlink_attributes,
		     "READLINK INVAL symlink_attributes");

	mk_symlink(&d, "l", "other", &sres);
	E2E_STATUS("SYMLINK over an existing name", sres.status, NFS3ERR_EXIST);
	want_wcc_after(&sres.SYMLINK3res_u.resfail.dir_wcc,
		       "SYMLINK EXIST dir_wcc");
}

/*
 * READs big enough to be spliced from the cache file and small ones
 * copied, at page-aligned and odd offsets (a span of more than a pipe's
 * pages is copied too), odd counts (XDR padding after a spliced payload),
 * up to and past the end: every byte and count is right, and eof too.
 */
static void test_read_shapes(const nfs_fh3 *d)
{
	enum { SIZE = (3 << 20) + 12345 };
	static const uint64_t cases[][2] = {
		{ 0, 65536 },
		{ 1, 65536 },
		{ 4095, 1 << 20 },
		{ 1 << 20, 1 << 20 },
		{ 5, 65539 },
		{ (2 << 20) + 3, 65537 },
		{ SIZE - 70000, 200000 },
		{ 8191, 131073 },
		{ 0, 4096 },
		{ 12, 5 },
		{ SIZE - 1, 65536 },
		{ SIZE, 65536 },
	};
	static char buf[SIZE];
	READ3res res;
	nfs_fh3 f;

	e2e_fill(buf, sizeof(buf), 7);
	f = mk_file(d, "shapes", buf, sizeof(buf));
	for (int round = 0; round < 2; round++) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			uint64_t off = cases[i][0], cnt = cases[i][1];
			uint64_t want = off >= SIZE        ? 0
					: off + cnt > SIZE ? SIZE - off
							   : cnt;
			READ3resok *ok = &res.READ3res_u.resok;

			E2E_RPC(R,
				e2e_nfs3_read(R, &f, off, (uint32_t)cnt, &res));
			E2E_STATUS("READ shape", res.status, NFS3_OK);
			if (res.status != NFS3_OK)
				continue;
			E2E_CHECK(ok->count == want &&
					  ok->data.data_len == want,
				  "READ %llu+%llu: count %u len %u, want %llu",
				  (unsigned long long)off,
				  (unsigned long long)cnt, ok->count,
				  ok->data.data_len, (unsigned long long)want);
			E2E_CHECK(ok->eof == (off + cnt >= SIZE),
				  "READ %llu+%llu: eof %u",
				  (unsigned long long)off,
				  (unsigned long long)cnt, ok->eof);
			E2E_CHECK(ok->data.data_len != want ||
					  memcmp(ok->data.data_val, buf + off,
						 want) == 0,
				  "READ %llu+%llu: wrong bytes",
				  (unsigned long long)off,
				  (unsigned long long)cnt);
			want_post_op(&ok->file_attributes,
				     "READ shape file_attributes");
		}
	}
}

static void test_read(void)
{
	static char buf[10000];
	nfs_fh3 d = mk_dir(&ROOT, "t_read");
	nfs_fh3 f;
	READ3res res;

	e2e_fill(buf, sizeof(buf), 1);
	f = mk_file(&d, "f", buf, sizeof(buf));

	E2E_RPC(R, e2e_nfs3_read(R, &f, 0, 4096, &res));
	E2E_STATUS("READ 0+4096", res.status, NFS3_OK);
	if (res.status == NFS3_OK) {
		READ3resok *ok = &res.READ3res_u.resok;

		E2E_CHECK(ok->count == 4096 && ok->data.data_len == 4096,
			  "READ 0+4096: count %u len %u", ok->count,
			  ok->data.data_len);
		E2E_CHECK(!ok->eof, "READ 0+4096 of 10000 bytes says eof");
		E2E_CHECK(ok->data.data_len == 4096 &&
				  memcmp(ok->data.data_val, buf, 4096) == 0,
			  "READ 0+4096: wrong bytes");
		want_post_op(&ok->file_attributes, "READ file_attributes");
	}
	E2E_RPC(R, e2e_nfs3_read(R, &f, 8192, 4096, &res));
	E2E_STATUS("READ 8192+4096", res.status, NFS3_OK);
	if (res.status == NFS3_OK) {
		READ3resok *ok = &res.READ3res_u.resok;

		E2E_CHECK(ok->count == 1808,
			  "READ 8192+4096: count %u, want "
			  "1808",
			  ok->count);
		E2E_CHECK(ok->eof, "READ to the end: eof not set");
		E2E_CHECK(ok->data.data_len == 1808 &&
				  memcmp(ok->data.data_val, buf + 8192, 1808) ==
					  0,
			  "READ 8192+4096: wrong bytes");
	}
	E2E_RPC(R, e2e_nfs3_read(R, &f, 20000, 100, &res));
	E2E_STATUS("READ past the end", res.status, NFS3_OK);
	if (res.status == NFS3_OK)
		E2E_CHECK(res.READ3res_u.resok.count == 0 &&
				  res.READ3res_u.resok.eof,
			  "READ past the end: count %u eof %u, want 0 and 1",
			  res.READ3res_u.resok.count, res.READ3res_u.resok.eof);
	E2E_RPC(R, e2e_nfs3_read(R, &f, 0, 10000, &res));
	E2E_STATUS("READ exactly the whole file", res.status, NFS3_OK);
	if (res.status == NFS3_OK)
		E2E_CHECK(res.READ3res_u.resok.count == 10000 &&
				  res.READ3res_u.resok.eof,
			  "READ 0+10000 of 10000: count %u eof %u, want "
			  "10000 and 1",
			  res.READ3res_u.resok.count, res.READ3res_u.resok.eof);

	test_read_shapes(&d);

	E2E_RPC(R, e2e_nfs3_read(R, &d, 0, 100, &res));
	E2E_CHECK(res.status == NFS3ERR_ISDIR || res.status == NFS3ERR_INVAL,
		  "READ of a directory: got %s, want NFS3ERR_ISDIR or "
		  "NFS3ERR_INVAL",
		  e2e_nfsstat(res.status));
}

static void test_write_commit(void)
{
	static char buf[65536], back[65536];
	nfs_fh3 d = mk_dir(&ROOT, "t_write");
	nfs_fh3 f = mk_file(&d, "f", NULL, 0);
	WRITE3res w1, w2;
	COMMIT3res c;
	READ3res rd;

	e2e_fill(buf, sizeof(buf), 2);
	E2E_RPC(R, e2e_nfs3_write(R, &f, 0, buf, 32768, UNSTABLE, &w1));
	E2E_STATUS("WRITE UNSTABLE", w1.status, NFS3_OK);
	E2E_REQUIRE(w1.status == NFS3_OK, "cannot go on without a write");
	E2E_CHECK(w1.WRITE3res_u.resok.count == 32768,
		  "WRITE UNSTABLE count %u, want 32768",
		  w1.WRITE3res_u.resok.count);
	want_wcc_after(&w1.WRITE3res_u.resok.file_wcc, "WRITE file_wcc");

	E2E_RPC(R, e2e_nfs3_write(R, &f, 32768, buf + 32768, 32768, FILE_SYNC,
				  &w2));
	E2E_STATUS("WRITE FILE_SYNC", w2.status, NFS3_OK);
	E2E_REQUIRE(w2.status == NFS3_OK, "cannot go on without a write");
	E2E_CHECK(w2.WRITE3res_u.resok.committed == FILE_SYNC,
		  "WRITE FILE_SYNC: committed %d, want FILE_SYNC (2)",
		  w2.WRITE3res_u.resok.committed);
	E2E_CHECK(memcmp(w1.WRITE3res_u.resok.verf, w2.WRITE3res_u.resok.verf,
			 NFS3_WRITEVERFSIZE) == 0,
		  "write verifier changed between two WRITEs of one process");
	if (w2.WRITE3res_u.resok.file_wcc.after.attributes_follow)
		E2E_CHECK(w2.WRITE3res_u.resok.file_wcc.after.post_op_attr_u
					  .attributes.size == 65536,
			  "WRITE wcc after: size %llu, want 65536",
			  (unsigned long long)w2.WRITE3res_u.resok.file_wcc
				  .after.post_op_attr_u.attributes.size);

	E2E_RPC(R, e2e_nfs3_commit(R, &f, 0, 0, &c));
	E2E_STATUS("COMMIT", c.status, NFS3_OK);
	if (c.status == NFS3_OK) {
		E2E_CHECK(memcmp(c.COMMIT3res_u.resok.verf,
				 w1.WRITE3res_u.resok.verf,
				 NFS3_WRITEVERFSIZE) == 0,
			  "COMMIT verifier differs from WRITE's");
		want_wcc_after(&c.COMMIT3res_u.resok.file_wcc,
			       "COMMIT file_wcc");
	}

	E2E_RPC(R, e2e_nfs3_read(R, &f, 0, 65536, &rd));
	E2E_STATUS("READ back", rd.status, NFS3_OK);
	if (rd.status == NFS3_OK) {
		memcpy(back, rd.READ3res_u.resok.data.data_val,
		       rd.READ3res_u.resok.data.data_len < sizeof(back)
			       ? rd.READ3res_u.resok.data.data_len
			       : sizeof(back));
		E2E_CHECK(rd.READ3res_u.resok.count == 65536 &&
				  memcmp(back, buf, sizeof(buf)) == 0,
			  "READ back %u bytes differs from what was written",
			  rd.READ3res_u.resok.count);
	}

	/* a sparse write past the end extends the file with zeroes */
	E2E_RPC(R, e2e_nfs3_write(R, &f, 100000, "tail", 4, FILE_SYNC, &w1));
	E2E_STATUS("WRITE past the end", w1.status, NFS3_OK);
	E2E_CHECK(getattr_ok(&f, "after sparse write").size == 100004,
		  "size after a write at 100000+4 is not 100004");
	E2E_RPC(R, e2e_nfs3_read(R, &f, 70000, 16, &rd));
	if (rd.status == NFS3_OK) {
		static const char zero[16];

		E2E_CHECK(rd.READ3res_u.resok.count == 16 &&
				  memcmp(rd.READ3res_u.resok.data.data_val,
					 zero, 16) == 0,
			  "READ of a hole is not zeroes");
	}

	E2E_RPC(R, e2e_nfs3_write(R, &d, 0, "x", 1, UNSTABLE, &w1));
	E2E_CHECK(w1.status == NFS3ERR_ISDIR || w1.status == NFS3ERR_INVAL,
		  "WRITE to a directory: got %s, want NFS3ERR_ISDIR or "
		  "NFS3ERR_INVAL",
		  e2e_nfsstat(w1.status));
	want_wcc_after(&w1.WRITE3res_u.resfail.file_wcc,
		       "WRITE to a directory file_wcc");
}

static void do_create(const nfs_fh3 *dir, const char *name, createmode3 m,
		      const char *verf, CREATE3res *res)
{
	CREATE3args a = { .where = { .dir = *dir, .name = (char *)name } };

	a.how.mode = m;
	if (m == EXCLUSIVE)
		memcpy(a.how.createhow3_u.verf, verf, NFS3_CREATEVERFSIZE);
	else
		a.how.createhow3_u.obj_attributes = e2e_sattr_mode(0644);
	E2E_RPC(R, e2e_nfs3_create(R, &a, res));
}

static void test_create(void)
{
	nfs_fh3 d = mk_dir(&ROOT, "t_create");
	nfs_fh3 f = mk_file(&d, "f", "abc", 3);
	nfs_fh3 x1;
	CREATE3res res;
	fattr3 fa = getattr_ok(&f, "f");

	do_create(&d, "new", UNCHECKED, NULL, &res);
	E2E_STATUS("CREATE UNCHECKED new", res.status, NFS3_OK);
	if (res.status == NFS3_OK) {
		want_post_op(&res.CREATE3res_u.resok.obj_attributes,
			     "CREATE obj_attributes");
		want_wcc_after(&res.CREATE3res_u.resok.dir_wcc,
			       "CREATE dir_wcc");
	}

	do_create(&d, "f", UNCHECKED, NULL, &res);
	E2E_STATUS("CREATE UNCHECKED existing", res.status, NFS3_OK);
	if (res.status == NFS3_OK) {
		nfs_fh3 h = obj_fh(&res.CREATE3res_u.resok.obj, &d, "f");

		E2E_CHECK(getattr_ok(&h, "f again").fileid == fa.fileid,
			  "CREATE UNCHECKED of an existing file made a new "
			  "file");
	}

	do_create(&d, "f", GUARDED, NULL, &res);
	E2E_STATUS("CREATE GUARDED existing", res.status, NFS3ERR_EXIST);
	want_wcc_after(&res.CREATE3res_u.resfail.dir_wcc,
		       "CREATE EXIST dir_wcc");

	do_create(&d, "g", GUARDED, NULL, &res);
	E2E_STATUS("CREATE GUARDED new", res.status, NFS3_OK);

	do_create(&d, "x", EXCLUSIVE, "verf0001", &res);
	E2E_STATUS("CREATE EXCLUSIVE new", res.status, NFS3_OK);
	if (res.status == NFS3_OK) {
		x1 = obj_fh(&res.CREATE3res_u.resok.obj, &d, "x");
		x1 = e2e_fh_dup(R, &x1);
		do_create(&d, "x", EXCLUSIVE, "verf0001", &res);
		E2E_STATUS("CREATE EXCLUSIVE retry, same verifier", res.status,
			   NFS3_OK);
		if (res.status == NFS3_OK) {
			nfs_fh3 x2 =
				obj_fh(&res.CREATE3res_u.resok.obj, &d, "x");

			E2E_CHECK(getattr_ok(&x2, "x retry").fileid ==
					  getattr_ok(&x1, "x").fileid,
				  "EXCLUSIVE retry returned another file");
		}
		do_create(&d, "x", EXCLUSIVE, "verf0002", &res);
		E2E_STATUS("CREATE EXCLUSIVE, other verifier", res.status,
			   NFS3ERR_EXIST);
	}
	do_create(&d, "f", EXCLUSIVE, "verf0003", &res);
	E2E_STATUS("CREATE EXCLUSIVE over a file made UNCHECKED", res.status,
		   NFS3ERR_EXIST);

	do_create(&f, "y", UNCHECKED, NULL, &res);
	E2E_STATUS("CREATE in a file", res.status, NFS3ERR_NOTDIR);
}

static void test_mkdir(void)
{
	nfs_fh3 d = mk_dir(&ROOT, "t_mkdir");
	MKDIR3args a = { .where = { .dir = d, .name = "sub" },
			 .attributes = e2e_sattr_mode(0750) };
	MKDIR3res res;

	mk_file(&d, "f", "x", 1);
	E2E_RPC(R, e2e_nfs3_mkdir(R, &a, &res));
	E2E_STATUS("MKDIR", res.status, NFS3_OK);
	if (res.status == NFS3_OK) {
		nfs_fh3 s = obj_fh(&res.MKDIR3res_u.resok.obj, &d, "sub");
		fattr3 sa = getattr_ok(&s, "new dir");

		E2E_CHECK(sa.type == NF3DIR, "MKDIR made type %d", sa.type);
		E2E_CHECK((sa.mode & 07777) == 0750, "MKDIR mode %o, want 0750",
			  sa.mode & 07777);
		want_wcc_after(&res.MKDIR3res_u.resok.dir_wcc, "MKDIR dir_wcc");
	}
	E2E_RPC(R, e2e_nfs3_mkdir(R, &a, &res));
	E2E_STATUS("MKDIR existing dir", res.status, NFS3ERR_EXIST);
	want_wcc_after(&res.MKDIR3res_u.resfail.dir_wcc, "MKDIR EXIST dir_wcc");
	a.where.name = "f";
	E2E_RPC(R, e2e_nfs3_mkdir(R, &a, &res));
	E2E_STATUS("MKDIR over a file", res.status, NFS3ERR_EXIST);
}

/* MKNOD of type t named name in d: the status; *h the handle on OK. */
static int mknod_as(const nfs_fh3 *d, const char *name, ftype3 t,
		    uint32_t major, uint32_t minor, nfs_fh3 *h)
{
	MKNOD3args a = { .where = { .dir = *d, .name = (char *)name } };
	MKNOD3res res;

	a.what.type = t;
	if (t == NF3CHR) {
		a.what.mknoddata3_u.chr_device.dev_attributes =
			e2e_sattr_mode(0640);
		a.what.mknoddata3_u.chr_device.spec.specdata1 = major;
		a.what.mknoddata3_u.chr_device.spec.specdata2 = minor;
	} else if (t == NF3BLK) {
		a.what.mknoddata3_u.blk_device.dev_attributes =
			e2e_sattr_mode(0640);
		a.what.mknoddata3_u.blk_device.spec.specdata1 = major;
		a.what.mknoddata3_u.blk_device.spec.specdata2 = minor;
	} else if (t == NF3SOCK) {
		a.what.mknoddata3_u.sock_attributes = e2e_sattr_mode(0640);
	} else if (t == NF3FIFO) {
		a.what.mknoddata3_u.pipe_attributes = e2e_sattr_mode(0640);
	}
	E2E_RPC(R, e2e_nfs3_mknod(R, &a, &res));
	if (res.status == NFS3_OK) {
		want_wcc_after(&res.MKNOD3res_u.resok.dir_wcc, "MKNOD dir_wcc");
		if (h)
			*h = obj_fh(&res.MKNOD3res_u.resok.obj, d, name);
	} else {
		want_wcc_after(&res.MKNOD3res_u.resfail.dir_wcc,
			       "MKNOD failure dir_wcc");
	}
	return res.status;
}

/*
 * MKNOD (issue 22): FIFOs, sockets and (for root) devices are made, with
 * their type, mode and device number; they have no data to READ; a
 * regular file is BADTYPE; an existing name is EXIST.
 */
static void test_mknod(void)
{
	nfs_fh3 d = mk_dir(&ROOT, "t_mknod"), h;
	static const struct {
		const char *name;
		ftype3 type;
		uint32_t major, minor;
	} k[] = { { "fifo", NF3FIFO, 0, 0 },
		  { "sock", NF3SOCK, 0, 0 },
		  { "chr", NF3CHR, 1, 3 },
		  { "blk", NF3BLK, 7, 0 } };
	READ3res rd;

	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		E2E_STATUS(k[i].name,
			   mknod_as(&d, k[i].name, k[i].type, k[i].major,
				    k[i].minor, &h),
			   NFS3_OK);
		h = e2e_fh_dup(R, &h);
		fattr3 fa = getattr_ok(&h, k[i].name);

		E2E_CHECK(fa.type == k[i].type && (fa.mode & 07777) == 0640 &&
				  fa.size == 0,
			  "MKNOD %s: type %d mode %o size %llu", k[i].name,
			  fa.type, fa.mode, (unsigned long long)fa.size);
		E2E_CHECK(fa.rdev.specdata1 == k[i].major &&
				  fa.rdev.specdata2 == k[i].minor,
			  "MKNOD %s: rdev %u,%u, want %u,%u", k[i].name,
			  fa.rdev.specdata1, fa.rdev.specdata2, k[i].major,
			  k[i].minor);
		E2E_CHECK(dir_has(&d, k[i].name), "%s not listed", k[i].name);
		E2E_RPC(R, e2e_nfs3_read(R, &h, 0, 10, &rd));
		E2E_STATUS("READ of a special file", rd.status, NFS3ERR_INVAL);
	}
	E2E_STATUS("MKNOD over an existing name",
		   mknod_as(&d, "fifo", NF3FIFO, 0, 0, NULL), NFS3ERR_EXIST);
	E2E_STATUS("MKNOD of a regular file",
		   mknod_as(&d, "reg", NF3REG, 0, 0, NULL), NFS3ERR_BADTYPE);
	E2E_CHECK(!dir_has(&d, "reg"), "MKNOD BADTYPE made 'reg'");
}

static void test_remove(void)
{
	nfs_fh3 d = mk_dir(&ROOT, "t_remove");
	nfs_fh3 f = mk_file(&d, "f", "x", 1);
	REMOVE3res res;
	GETATTR3res ga;
	READ3res rd;

	f = e2e_fh_dup(R, &f);
	mk_dir(&d, "sub");
	E2E_RPC(R, e2e_nfs3_remove(R, &d, "f", &res));
	E2E_STATUS("REMOVE", res.status, NFS3_OK);
	want_wcc_after(&res.REMOVE3res_u.resok.dir_wcc, "REMOVE dir_wcc");
	E2E_STATUS("LOOKUP after REMOVE", lookup_status(&d, "f"),
		   NFS3ERR_NOENT);

	E2E_RPC(R, e2e_nfs3_getattr(R, &f, &ga));
	E2E_STATUS("GETATTR of a removed file's handle", ga.status,
		   NFS3ERR_STALE);
	E2E_RPC(R, e2e_nfs3_read(R, &f, 0, 10, &rd));
	E2E_STATUS("READ of a removed file's handle", rd.status, NFS3ERR_STALE);

	E2E_RPC(R, e2e_nfs3_remove(R, &d, "f", &res));
	E2E_STATUS("REMOVE missing", res.status, NFS3ERR_NOENT);
	want_wcc_after(&res.REMOVE3res_u.resfail.dir_wcc,
		       "REMOVE NOENT dir_wcc");

	E2E_RPC(R, e2e_nfs3_remove(R, &d, "sub", &res));
	E2E_STATUS("REMOVE of a directory", res.status, NFS3ERR_ISDIR);
	want_wcc_after(&res.REMOVE3res_u.resfail.dir_wcc,
		       "REMOVE ISDIR dir_wcc");
	E2E_CHECK(dir_has(&d, "sub"), "REMOVE ISDIR removed the directory");
}

static void test_rmdir(void)
{
	nfs_fh3 d = mk_dir(&ROOT, "t_rmdir");
	nfs_fh3 full = mk_dir(&d, "full");
	nfs_fh3 empty = mk_dir(&d, "empty");
	RMDIR3res res;
	GETATTR3res ga;
	LOOKUP3res lr;

	empty = e2e_fh_dup(R, &empty);
	mk_file(&full, "f", "x", 1);
	mk_file(&d, "file", "x", 1);

	E2E_RPC(R, e2e_nfs3_rmdir(R, &d, "empty", &res));
	E2E_STATUS("RMDIR empty", res.status, NFS3_OK);
	want_wcc_after(&res.RMDIR3res_u.resok.dir_wcc, "RMDIR dir_wcc");
	E2E_RPC(R, e2e_nfs3_getattr(R, &empty, &ga));
	E2E_STATUS("GETATTR of a removed dir's handle", ga.status,
		   NFS3ERR_STALE);
	E2E_RPC(R, e2e_nfs3_lookup(R, &empty, "x", &lr));
	E2E_STATUS("LOOKUP in a removed dir", lr.status, NFS3ERR_STALE);

	E2E_RPC(R, e2e_nfs3_rmdir(R, &d, "full", &res));
	E2E_STATUS("RMDIR non-empty", res.status, NFS3ERR_NOTEMPTY);
	want_wcc_after(&res.RMDIR3res_u.resfail.dir_wcc,
		       "RMDIR NOTEMPTY dir_wcc");
	E2E_CHECK(lookup_status(&full, "f") == NFS3_OK,
		  "RMDIR NOTEMPTY lost the file inside");

	E2E_RPC(R, e2e_nfs3_rmdir(R, &d, "file", &res));
	E2E_STATUS("RMDIR of a file", res.status, NFS3ERR_NOTDIR);
	E2E_CHECK(dir_has(&d, "file"), "RMDIR NOTDIR removed the file");

	E2E_RPC(R, e2e_nfs3_rmdir(R, &d, "missing", &res));
	E2E_STATUS("RMDIR missing", res.status, NFS3ERR_NOENT);
	want_wcc_after(&res.RMDIR3res_u.resfail.dir_wcc, "RMDIR NOENT dir_wcc");
}

static void test_rename(void)
{
	nfs_fh3 d = mk_dir(&ROOT, "t_rename");
	nfs_fh3 f = mk_file(&d, "f", "abc", 3);
	nfs_fh3 a = mk_dir(&d, "a");
	nfs_fh3 b = mk_dir(&a, "b");
	nfs_fh3 full = mk_dir(&d, "full");
	RENAME3res res;
	uint64_t fid = getattr_ok(&f, "f").fileid;

	mk_dir(&d, "full2");
	mk_file(&full, "x", "x", 1);
	mk_file(&d, "victim", "vvvv", 4);

	E2E_RPC(R, e2e_nfs3_rename(R, &d, "f", &d, "g", &res));
	E2E_STATUS("RENAME f -> g", res.status, NFS3_OK);
	want_wcc_after(&res.RENAME3res_u.resok.fromdir_wcc,
		       "RENAME fromdir_wcc");
	want_wcc_after(&res.RENAME3res_u.resok.todir_wcc, "RENAME todir_wcc");
	E2E_STATUS("LOOKUP old name after RENAME", lookup_status(&d, "f"),
		   NFS3ERR_NOENT);
	{
		nfs_fh3 g = lookup_ok(&d, "g");

		E2E_CHECK(getattr_ok(&g, "g").fileid == fid,
			  "RENAME changed the fileid");
		E2E_CHECK(getattr_ok(&f, "old handle after RENAME").fileid ==
				  fid,
			  "the old handle no longer names the renamed file");
	}

	E2E_RPC(R, e2e_nfs3_rename(R, &d, "g", &b, "g2", &res));
	E2E_STATUS("RENAME across directories", res.status, NFS3_OK);
	E2E_CHECK(lookup_status(&b, "g2") == NFS3_OK,
		  "file not found in the new directory after RENAME");

	E2E_RPC(R, e2e_nfs3_rename(R, &b, "g2", &d, "victim", &res));
	E2E_STATUS("RENAME over an existing file", res.status, NFS3_OK);
	{
		nfs_fh3 v = lookup_ok(&d, "victim");

		E2E_CHECK(getattr_ok(&v, "victim").fileid == fid,
			  "RENAME over a file: target is not the source");
	}

	E2E_RPC(R, e2e_nfs3_rename(R, &d, "missing", &d, "z", &res));
	E2E_STATUS("RENAME of a missing name", res.status, NFS3ERR_NOENT);
	want_wcc_after(&res.RENAME3res_u.resfail.fromdir_wcc,
		       "RENAME NOENT fromdir_wcc");
	want_wcc_after(&res.RENAME3res_u.resfail.todir_wcc,
		       "RENAME NOENT todir_wcc");

	E2E_RPC(R, e2e_nfs3_rename(R, &d, "a", &b, "a_inside", &res));
	E2E_STATUS("RENAME a dir into its own subtree", res.status,
		   NFS3ERR_INVAL);
	want_wcc_after(&res.RENAME3res_u.resfail.fromdir_wcc,
		       "RENAME INVAL fromdir_wcc");
	E2E_CHECK(lookup_status(&d, "a") == NFS3_OK &&
			  lookup_status(&b, "a_inside") == NFS3ERR_NOENT,
		  "RENAME into own subtree changed the tree");

	E2E_RPC(R, e2e_nfs3_rename(R, &d, "a", &a, "self", &res));
	E2E_STATUS("RENAME a dir into itself", res.status, NFS3ERR_INVAL);

	E2E_RPC(R, e2e_nfs3_rename(R, &d, "full2", &d, "full", &res));
	E2E_CHECK(res.status == NFS3ERR_NOTEMPTY || res.status == NFS3ERR_EXIST,
		  "RENAME a dir over a non-empty dir: got %s, want "
		  "NFS3ERR_NOTEMPTY or NFS3ERR_EXIST",
		  e2e_nfsstat(res.status));
	E2E_CHECK(lookup_status(&full, "x") == NFS3_OK,
		  "RENAME over a non-empty dir lost its content");

	E2E_RPC(R, e2e_nfs3_rename(R, &d, "victim", &d, "a", &res));
	E2E_CHECK(res.status == NFS3ERR_ISDIR || res.status == NFS3ERR_EXIST,
		  "RENAME a file over a dir: got %s, want NFS3ERR_ISDIR or "
		  "NFS3ERR_EXIST",
		  e2e_nfsstat(res.status));
}

static void test_link(void)
{
	nfs_fh3 d = mk_dir(&ROOT, "t_link");
	nfs_fh3 f = mk_file(&d, "f", "x", 1);
	LINK3res res;
	FSINFO3res fi;

	E2E_RPC(R, e2e_nfs3_fsinfo(R, &ROOT, &fi));
	E2E_REQUIRE(fi.status == NFS3_OK, "FSINFO: %s", e2e_nfsstat(fi.status));
	E2E_RPC(R, e2e_nfs3_link(R, &f, &d, "hard", &res));
	E2E_CHECK(res.status == NFS3_OK || res.status == NFS3ERR_NOTSUPP,
		  "LINK: got %s, want NFS3_OK or NFS3ERR_NOTSUPP",
		  e2e_nfsstat(res.status));
	if (res.status == NFS3_OK) {
		nfs_fh3 h = lookup_ok(&d, "hard");

		E2E_CHECK(fi.FSINFO3res_u.resok.properties & FSF3_LINK,
			  "LINK works but FSINFO properties lack FSF3_LINK");
		E2E_CHECK(getattr_ok(&h, "hard").fileid ==
				  getattr_ok(&f, "f").fileid,
			  "LINK made a different file");
		E2E_CHECK(getattr_ok(&f, "f").nlink == 2,
			  "nlink after LINK is not 2");
	} else if (res.status == NFS3ERR_NOTSUPP) {
		E2E_CHECK(!(fi.FSINFO3res_u.resok.properties & FSF3_LINK),
			  "LINK answers NOTSUPP but FSINFO properties "
			  "(0x%x) say FSF3_LINK",
			  fi.FSINFO3res_u.resok.properties);
		want_wcc_after(&res.LINK3res_u.resfail.linkdir_wcc,
			       "LINK NOTSUPP linkdir_wcc");
		E2E_CHECK(!dir_has(&d, "hard"),
			  "LINK answered NOTSUPP but 'hard' exists");
	}
	E2E_RPC(R, e2e_nfs3_link(R, &f, &d, "f", &res));
	E2E_CHECK(res.status == NFS3ERR_EXIST || res.status == NFS3ERR_NOTSUPP,
		  "LINK over an existing name: got %s, want NFS3ERR_EXIST "
		  "(or NFS3ERR_NOTSUPP)",
		  e2e_nfsstat(res.status));
}

static int is_dot(const char *n)
{
	return strcmp(n, ".") == 0 || strcmp(n, "..") == 0;
}

static void test_readdir(void)
{
	nfs_fh3 d = mk_dir(&ROOT, "t_readdir");
	static const char *names[] = { "a", "bb", "ccc", "sub", "link" };
	int seen[5] = { 0 };
	READDIR3args a = { .dir = d, .cookie = 0, .count = 8192 };
	READDIR3res res;
	SYMLINK3res sres;
	nfs_fh3 f = mk_file(&d, "a", "x", 1);

	mk_file(&d, "bb", "x", 1);
	mk_file(&d, "ccc", "x", 1);
	mk_dir(&d, "sub");
	mk_symlink(&d, "link", "a", &sres);

	E2E_RPC(R, e2e_nfs3_readdir(R, &a, &res));
	E2E_STATUS("READDIR", res.status, NFS3_OK);
	if (res.status == NFS3_OK) {
		READDIR3resok *ok = &res.READDIR3res_u.resok;

		E2E_CHECK(ok->reply.eof, "READDIR of 5 entries: no eof");
		want_post_op(&ok->dir_attributes, "READDIR dir_attributes");
		for (entry3 *e = ok->reply.entries; e; e = e->nextentry) {
			int k, hit = 0;

			for (k = 0; k < 5; k++)
				if (strcmp(e->name, names[k]) == 0)
					seen[k]++, hit = 1;
			E2E_CHECK(hit || is_dot(e->name),
				  "READDIR lists unknown name '%s'", e->name);
			E2E_CHECK(e->cookie != 0, "READDIR cookie 0 for '%s'",
				  e->name);
		}
		for (int k = 0; k < 5; k++)
			E2E_CHECK(seen[k] == 1, "READDIR lists '%s' %d times",
				  names[k], seen[k]);
	}

	a.dir = f;
	E2E_RPC(R, e2e_nfs3_readdir(R, &a, &res));
	E2E_STATUS("READDIR of a file", res.status, NFS3ERR_NOTDIR);
}

static void test_readdirplus(void)
{
	nfs_fh3 d = mk_dir(&ROOT, "t_readdirplus");
	nfs_fh3 f = mk_file(&d, "a", "xyz", 3);
	READDIRPLUS3args a = {
		.dir = d, .cookie = 0, .dircount = 8192, .maxcount = 32768
	};
	READDIRPLUS3res res;
	int found = 0;

	mk_dir(&d, "sub");
	E2E_RPC(R, e2e_nfs3_readdirplus(R, &a, &res));
	E2E_STATUS("READDIRPLUS", res.status, NFS3_OK);
	if (res.status == NFS3_OK) {
		READDIRPLUS3resok *ok = &res.READDIRPLUS3res_u.resok;

		E2E_CHECK(ok->reply.eof, "READDIRPLUS of 2 entries: no eof");
		want_post_op(&ok->dir_attributes, "READDIRPLUS dir_attributes");
		for (entryplus3 *e = ok->reply.entries; e; e = e->nextentry) {
			if (is_dot(e->name))
				continue;
			found++;
			E2E_CHECK(e->name_attributes.attributes_follow,
				  "READDIRPLUS '%s' without attributes",
				  e->name);
			E2E_CHECK(e->name_handle.handle_follows,
				  "READDIRPLUS '%s' without a handle", e->name);
			if (e->name_handle.handle_follows) {
				fattr3 ea = getattr_ok(
					&e->name_handle.post_op_fh3_u.handle,
					e->name);

				E2E_CHECK(ea.fileid == e->fileid,
					  "READDIRPLUS '%s' handle's fileid "
					  "%llu != entry fileid %llu",
					  e->name,
					  (unsigned long long)ea.fileid,
					  (unsigned long long)e->fileid);
				if (strcmp(e->name, "a") == 0)
					E2E_CHECK(
						ea.size == 3 &&
							e2e_fh_equal(
								&e->name_handle
									 .post_op_fh3_u
									 .handle,
								&f),
						"READDIRPLUS 'a': size %llu "
						"or handle differs from "
						"CREATE's",
						(unsigned long long)ea.size);
			}
		}
		E2E_CHECK(found == 2, "READDIRPLUS listed %d entries, want 2",
			  found);
	}
	a.dir = f;
	E2E_RPC(R, e2e_nfs3_readdirplus(R, &a, &res));
	E2E_STATUS("READDIRPLUS of a file", res.status, NFS3ERR_NOTDIR);
}

static void test_fsstat(void)
{
	FSSTAT3res res;

	E2E_RPC(R, e2e_nfs3_fsstat(R, &ROOT, &res));
	E2E_STATUS("FSSTAT", res.status, NFS3_OK);
	if (res.status == NFS3_OK) {
		FSSTAT3resok *ok = &res.FSSTAT3res_u.resok;

		E2E_CHECK(ok->tbytes > 0 && ok->fbytes <= ok->tbytes &&
				  ok->abytes <= ok->fbytes,
			  "FSSTAT bytes: total %llu free %llu avail %llu",
			  (unsigned long long)ok->tbytes,
			  (unsigned long long)ok->fbytes,
			  (unsigned long long)ok->abytes);
		E2E_CHECK(ok->ffiles <= ok->tfiles && ok->afiles <= ok->ffiles,
			  "FSSTAT files: total %llu free %llu avail %llu",
			  (unsigned long long)ok->tfiles,
			  (unsigned long long)ok->ffiles,
			  (unsigned long long)ok->afiles);
		want_post_op(&ok->obj_attributes, "FSSTAT obj_attributes");
	}
}

static void test_fsinfo(void)
{
	FSINFO3res res;

	E2E_RPC(R, e2e_nfs3_fsinfo(R, &ROOT, &res));
	E2E_STATUS("FSINFO", res.status, NFS3_OK);
	if (res.status == NFS3_OK) {
		FSINFO3resok *ok = &res.FSINFO3res_u.resok;

		E2E_CHECK(ok->rtmax == 1048576, "FSINFO rtmax %u, want 1048576",
			  ok->rtmax);
		E2E_CHECK(ok->wtmax == 1048576, "FSINFO wtmax %u, want 1048576",
			  ok->wtmax);
		E2E_CHECK(ok->rtpref > 0 && ok->rtpref <= ok->rtmax &&
				  ok->wtpref > 0 && ok->wtpref <= ok->wtmax,
			  "FSINFO rtpref %u wtpref %u", ok->rtpref, ok->wtpref);
		E2E_CHECK(ok->dtpref > 0, "FSINFO dtpref 0");
		E2E_CHECK(ok->maxfilesize >= (1ull << 32),
			  "FSINFO maxfilesize %llu < 4 GiB",
			  (unsigned long long)ok->maxfilesize);
		E2E_CHECK(ok->properties & FSF3_SYMLINK,
			  "FSINFO properties 0x%x lack FSF3_SYMLINK (SYMLINK "
			  "works)",
			  ok->properties);
		E2E_CHECK(ok->properties & FSF3_CANSETTIME,
			  "FSINFO properties 0x%x lack FSF3_CANSETTIME "
			  "(SETATTR mtime works)",
			  ok->properties);
		want_post_op(&ok->obj_attributes, "FSINFO obj_attributes");
	}
}

static void test_pathconf(void)
{
	PATHCONF3res res;

	E2E_RPC(R, e2e_nfs3_pathconf(R, &ROOT, &res));
	E2E_STATUS("PATHCONF", res.status, NFS3_OK);
	if (res.status == NFS3_OK) {
		PATHCONF3resok *ok = &res.PATHCONF3res_u.resok;

		E2E_CHECK(ok->name_max == 255, "PATHCONF name_max %u, want 255",
			  ok->name_max);
		E2E_CHECK(ok->no_trunc,
			  "PATHCONF no_trunc is false "
			  "(NAMETOOLONG is answered, names are not cut)");
		E2E_CHECK(!ok->case_insensitive && ok->case_preserving,
			  "PATHCONF case_insensitive %u case_preserving %u",
			  ok->case_insensitive, ok->case_preserving);
		want_post_op(&ok->obj_attributes, "PATHCONF obj_attributes");
	}
}

/* ------------------------------------------------------------------ */
/* names                                                               */

static int bad_name_status(int st)
{
	return st == NFS3ERR_INVAL || st == NFS3ERR_ACCES ||
	       st == NFS3ERR_NOENT || st == NFS3ERR_EXIST || st == NFS3ERR_PERM;
}

static void check_bad_name(const nfs_fh3 *d, const char *name,
			   const char *label)
{
	CREATE3res cr;
	MKDIR3res mr;
	SYMLINK3res sr;
	REMOVE3res rr;
	RMDIR3res dr;
	RENAME3res nr;
	MKDIR3args ma = { .where = { .dir = *d, .name = (char *)name },
			  .attributes = e2e_sattr_mode(0755) };
	char msg[128];

	snprintf(msg, sizeof(msg), "CREATE %s", label);
	do_create(d, name, GUARDED, NULL, &cr);
	E2E_CHECK(bad_name_status(cr.status),
		  "%s: got %s, want an error "
		  "(INVAL/ACCES/EXIST/NOENT)",
		  msg, e2e_nfsstat(cr.status));
	want_wcc_after(&cr.CREATE3res_u.resfail.dir_wcc, msg);

	snprintf(msg, sizeof(msg), "MKDIR %s", label);
	E2E_RPC(R, e2e_nfs3_mkdir(R, &ma, &mr));
	E2E_CHECK(bad_name_status(mr.status), "%s: got %s, want an error", msg,
		  e2e_nfsstat(mr.status));

	snprintf(msg, sizeof(msg), "SYMLINK %s", label);
	mk_symlink(d, name, "t", &sr);
	E2E_CHECK(bad_name_status(sr.status), "%s: got %s, want an error", msg,
		  e2e_nfsstat(sr.status));

	snprintf(msg, sizeof(msg), "RENAME f -> %s", label);
	E2E_RPC(R, e2e_nfs3_rename(R, d, "f", d, name, &nr));
	E2E_CHECK(bad_name_status(nr.status) || nr.status == NFS3ERR_ISDIR ||
			  nr.status == NFS3ERR_NOTEMPTY,
		  "%s: got %s, want an error", msg, e2e_nfsstat(nr.status));

	if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
		snprintf(msg, sizeof(msg), "LOOKUP %s", label);
		E2E_CHECK(bad_name_status(lookup_status(d, name)),
			  "%s: not an error", msg);
	}
	snprintf(msg, sizeof(msg), "REMOVE %s", label);
	E2E_RPC(R, e2e_nfs3_remove(R, d, name, &rr));
	E2E_CHECK(bad_name_status(rr.status) || rr.status == NFS3ERR_ISDIR,
		  "%s: got %s, want an error", msg, e2e_nfsstat(rr.status));
	want_wcc_after(&rr.REMOVE3res_u.resfail.dir_wcc, msg);

	snprintf(msg, sizeof(msg), "RMDIR %s", label);
	E2E_RPC(R, e2e_nfs3_rmdir(R, d, name, &dr));
	E2E_CHECK(bad_name_status(dr.status) || dr.status == NFS3ERR_NOTEMPTY,
		  "%s: got %s, want an error", msg, e2e_nfsstat(dr.status));
}

static void test_names(void)
{
	nfs_fh3 d = mk_dir(&ROOT, "t_names");
	nfs_fh3 sub;
	char before[65], after[65], long_name[300];
	int nb, na;
	CREATE3res cr;
	fattr3 da_before, da_after;

	mk_file(&d, "f", "x", 1);
	sub = mk_dir(&d, "sub");
	mk_file(&sub, "b", "x", 1);
	dir_fingerprint(&d, before, &nb);
	da_before = getattr_ok(&d, "t_names");

	check_bad_name(&d, "", "of an empty name");
	check_bad_name(&d, "sub/b", "of 'sub/b'");
	check_bad_name(&d, "x/y", "of 'x/y'");
	check_bad_name(&d, "/", "of '/'");
	check_bad_name(&d, ".", "of '.'");
	check_bad_name(&d, "..", "of '..'");

	memset(long_name, 'n', 256);
	long_name[256] = '\0';
	do_create(&d, long_name, GUARDED, NULL, &cr);
	E2E_STATUS("CREATE with a 256-byte name", cr.status,
		   NFS3ERR_NAMETOOLONG);
	want_wcc_after(&cr.CREATE3res_u.resfail.dir_wcc,
		       "CREATE NAMETOOLONG dir_wcc");
	{
		MKDIR3args ma = { .where = { .dir = d, .name = long_name },
				  .attributes = e2e_sattr_mode(0755) };
		MKDIR3res mr;
		RENAME3res nr;

		E2E_RPC(R, e2e_nfs3_mkdir(R, &ma, &mr));
		E2E_STATUS("MKDIR with a 256-byte name", mr.status,
			   NFS3ERR_NAMETOOLONG);
		E2E_STATUS("LOOKUP with a 256-byte name",
			   lookup_status(&d, long_name), NFS3ERR_NAMETOOLONG);
		E2E_RPC(R, e2e_nfs3_rename(R, &d, "f", &d, long_name, &nr));
		E2E_STATUS("RENAME to a 256-byte name", nr.status,
			   NFS3ERR_NAMETOOLONG);
	}

	dir_fingerprint(&d, after, &na);
	da_after = getattr_ok(&d, "t_names after");
	E2E_CHECK(nb == na && strcmp(before, after) == 0,
		  "bad names changed the directory: %d entries before, %d "
		  "after",
		  nb, na);
	E2E_CHECK(da_before.mtime.seconds == da_after.mtime.seconds &&
			  da_before.mtime.nseconds == da_after.mtime.nseconds,
		  "bad names changed the directory's mtime");
	E2E_CHECK(lookup_status(&sub, "b") == NFS3_OK,
		  "sub/b is gone after the bad-name calls");
	E2E_CHECK(getattr_ok(&ROOT, "root").type == NF3DIR,
		  "root is not a directory any more");

	/* the boundary: 255 bytes is a legal name */
	memset(long_name, 'm', 255);
	long_name[255] = '\0';
	do_create(&d, long_name, GUARDED, NULL, &cr);
	E2E_STATUS("CREATE with a 255-byte name", cr.status, NFS3_OK);
	E2E_CHECK(lookup_status(&d, long_name) == NFS3_OK,
		  "LOOKUP of the 255-byte name failed");
}

/* ------------------------------------------------------------------ */
/* handles                                                             */

static void test_forged_handles(void)
{
	nfs_fh3 d = mk_dir(&ROOT, "t_handles");
	nfs_fh3 f = mk_file(&d, "f", "x", 1);
	char raw[NFS3_FHSIZE];
	unsigned len = f.data.data_len;
	nfs_fh3 forged = { { len, raw } };
	GETATTR3res ga;
	LOOKUP3res lr;
	unsigned bad = 0;

	E2E_REQUIRE(len > 0 && len <= NFS3_FHSIZE, "handle length %u", len);
	for (unsigned i = 0; i < len; i++) {
		memcpy(raw, f.data.data_val, len);
		raw[i] ^= 0x01;
		E2E_RPC(R, e2e_nfs3_getattr(R, &forged, &ga));
		if (ga.status != NFS3ERR_BADHANDLE) {
			fprintf(stderr,
				"  byte %u of %u flipped: GETATTR got "
				"%s, want NFS3ERR_BADHANDLE\n",
				i, len, e2e_nfsstat(ga.status));
			bad++;
		}
	}
	E2E_CHECK(bad == 0, "%u of %u one-byte forgeries not BADHANDLE", bad,
		  len);

	memcpy(raw, d.data.data_val, d.data.data_len);
	forged.data.data_len = d.data.data_len;
	raw[d.data.data_len - 1] ^= 0x80;
	E2E_RPC(R, e2e_nfs3_lookup(R, &forged, "f", &lr));
	E2E_STATUS("LOOKUP in a forged dir handle", lr.status,
		   NFS3ERR_BADHANDLE);

	memcpy(raw, f.data.data_val, len);
	forged.data.data_len = len - 1;
	E2E_RPC(R, e2e_nfs3_getattr(R, &forged, &ga));
	E2E_STATUS("GETATTR with a truncated handle", ga.status,
		   NFS3ERR_BADHANDLE);
	forged.data.data_len = 0;
	E2E_RPC(R, e2e_nfs3_getattr(R, &forged, &ga));
	E2E_STATUS("GETATTR with an empty handle", ga.status,
		   NFS3ERR_BADHANDLE);
	memset(raw, 0, sizeof(raw));
	forged.data.data_len = len;
	E2E_RPC(R, e2e_nfs3_getattr(R, &forged, &ga));
	E2E_STATUS("GETATTR with an all-zero handle", ga.status,
		   NFS3ERR_BADHANDLE);

	E2E_CHECK(getattr_ok(&f, "the genuine handle").type == NF3REG,
		  "the genuine handle stopped working");
}

/* ------------------------------------------------------------------ */
/* MOUNT v3                                                            */

static int has_export_entry(mountlist ml)
{
	for (struct mountbody *m = ml; m; m = m->ml_next)
		if (m->ml_directory && strcmp(m->ml_directory, E2E_EXPORT) == 0)
			return 1;
	return 0;
}

static void test_mount_mnt(void)
{
	struct e2e_rpc *m =
		e2e_rpc_open(gw.mount_port, MOUNT_PROGRAM, MOUNT_V3);
	mountres3 res;
	int sys = 0;

	E2E_REQUIRE(m, "connect to the mount port");
	E2E_RPC(m, e2e_mnt3_mnt(m, E2E_EXPORT, &res));
	E2E_CHECK(res.fhs_status == MNT3_OK, "MNT %s: got %s, want MNT3_OK",
		  E2E_EXPORT, e2e_mntstat(res.fhs_status));
	if (res.fhs_status == MNT3_OK) {
		mountres3_ok *ok = &res.mountres3_u.mountinfo;
		nfs_fh3 fh = { { ok->fhandle.fhandle3_len,
				 ok->fhandle.fhandle3_val } };

		E2E_CHECK(fh.data.data_len > 0 &&
				  fh.data.data_len <= NFS3_FHSIZE,
			  "MNT handle length %u", fh.data.data_len);
		E2E_CHECK(e2e_fh_equal(&fh, &ROOT),
			  "two MNTs gave different root handles");
		for (u_int i = 0; i < ok->auth_flavors.auth_flavors_len; i++)
			if (ok->auth_flavors.auth_flavors_val[i] == 1)
				sys = 1;
		E2E_CHECK(sys, "MNT flavours (%u of them) lack AUTH_SYS (1)",
			  ok->auth_flavors.auth_flavors_len);
	}
	e2e_rpc_close(m);
}

static void test_mount_errors(void)
{
	struct e2e_rpc *m =
		e2e_rpc_open(gw.mount_port, MOUNT_PROGRAM, MOUNT_V3);
	mountres3 res;

	mk_file(&ROOT, "t_mount_file", "x", 1);
	E2E_REQUIRE(m, "connect to the mount port");
	E2E_RPC(m, e2e_mnt3_mnt(m, "/nonexistent", &res));
	E2E_CHECK(res.fhs_status == MNT3ERR_NOENT,
		  "MNT /nonexistent: got %s, want MNT3ERR_NOENT",
		  e2e_mntstat(res.fhs_status));
	E2E_RPC(m, e2e_mnt3_mnt(m, E2E_EXPORT "/missing", &res));
	E2E_CHECK(res.fhs_status == MNT3ERR_NOENT,
		  "MNT %s/missing: got %s, want MNT3ERR_NOENT", E2E_EXPORT,
		  e2e_mntstat(res.fhs_status));
	E2E_RPC(m, e2e_mnt3_mnt(m, E2E_EXPORT "/t_mount_file", &res));
	E2E_CHECK(res.fhs_status == MNT3ERR_NOTDIR,
		  "MNT of a file path: got %s, want MNT3ERR_NOTDIR",
		  e2e_mntstat(res.fhs_status));
	e2e_rpc_close(m);
}

static void test_mount_dump_umnt(void)
{
	struct e2e_rpc *m =
		e2e_rpc_open(gw.mount_port, MOUNT_PROGRAM, MOUNT_V3);
	mountres3 res;
	mountlist ml;

	E2E_REQUIRE(m, "connect to the mount port");
	E2E_RPC(m, e2e_mnt3_mnt(m, E2E_EXPORT, &res));
	E2E_REQUIRE(res.fhs_status == MNT3_OK, "MNT: %s",
		    e2e_mntstat(res.fhs_status));
	E2E_RPC(m, e2e_mnt3_dump(m, &ml));
	E2E_CHECK(has_export_entry(ml), "DUMP after MNT does not list %s",
		  E2E_EXPORT);
	for (struct mountbody *b = ml; b; b = b->ml_next)
		E2E_CHECK(b->ml_hostname && *b->ml_hostname,
			  "DUMP entry without a host name");

	/* All our mounts come from 127.0.0.1: UMNT drops the entry. */
	E2E_RPC(m, e2e_mnt3_umnt(m, E2E_EXPORT));
	E2E_RPC(m, e2e_mnt3_dump(m, &ml));
	E2E_CHECK(!has_export_entry(ml), "DUMP after UMNT still lists %s",
		  E2E_EXPORT);

	E2E_RPC(m, e2e_mnt3_mnt(m, E2E_EXPORT, &res));
	E2E_RPC(m, e2e_mnt3_dump(m, &ml));
	E2E_CHECK(has_export_entry(ml),
		  "DUMP after a second MNT does not "
		  "list %s",
		  E2E_EXPORT);
	E2E_RPC(m, e2e_mnt3_umntall(m));
	E2E_RPC(m, e2e_mnt3_dump(m, &ml));
	E2E_CHECK(ml == NULL, "DUMP after UMNTALL is not empty (first: %s %s)",
		  ml ? ml->ml_hostname : "", ml ? ml->ml_directory : "");

	/* A handle stays valid after UMNT (MOUNT is advisory). */
	E2E_CHECK(getattr_ok(&ROOT, "root after UMNTALL").type == NF3DIR,
		  "root handle broke after UMNTALL");
	e2e_rpc_close(m);
}

static void test_mount_export(void)
{
	struct e2e_rpc *m =
		e2e_rpc_open(gw.mount_port, MOUNT_PROGRAM, MOUNT_V3);
	exports ex;
	int found = 0;

	E2E_REQUIRE(m, "connect to the mount port");
	E2E_RPC(m, e2e_mnt3_export(m, &ex));
	for (struct exportnode *e = ex; e; e = e->ex_next)
		if (e->ex_dir && strcmp(e->ex_dir, E2E_EXPORT) == 0)
			found++;
	E2E_CHECK(found == 1, "EXPORT lists %s %d times, want once", E2E_EXPORT,
		  found);
	e2e_rpc_close(m);
}

static void test_mount_on_nfs_port(void)
{
	struct e2e_rpc *m = e2e_rpc_open(gw.nfs_port, MOUNT_PROGRAM, MOUNT_V3);
	mountres3 res;
	exports ex;

	E2E_REQUIRE(m, "connect for MOUNT on the NFS port %d", gw.nfs_port);
	E2E_CHECK(e2e_mnt3_null(m) == 0, "MOUNT NULL on the NFS port: %s",
		  e2e_rpc_error(m));
	E2E_RPC(m, e2e_mnt3_mnt(m, E2E_EXPORT, &res));
	E2E_CHECK(res.fhs_status == MNT3_OK,
		  "MNT on the NFS port: got %s, want MNT3_OK",
		  e2e_mntstat(res.fhs_status));
	if (res.fhs_status == MNT3_OK) {
		nfs_fh3 fh = {
			{ res.mountres3_u.mountinfo.fhandle.fhandle3_len,
			  res.mountres3_u.mountinfo.fhandle.fhandle3_val }
		};

		E2E_CHECK(e2e_fh_equal(&fh, &ROOT),
			  "MNT on the NFS port gave another root handle");
	}
	E2E_RPC(m, e2e_mnt3_export(m, &ex));
	E2E_CHECK(ex && strcmp(ex->ex_dir, E2E_EXPORT) == 0,
		  "EXPORT on the NFS port does not list %s", E2E_EXPORT);
	e2e_rpc_close(m);
}

/* Last: SIGTERM is a clean exit, and stdout held only the ready line. */
static void test_sigterm(void)
{
	e2e_rpc_close(R);
	R = NULL;
	E2E_CHECK(e2e_gw_stop(&gw) == 0, "SIGTERM: exit status is not 0");
	E2E_CHECK(gw.extra_stdout == 0,
		  "stdout had %zu bytes beyond the one ready line",
		  gw.extra_stdout);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("e2e_procs", suite_init, suite_clean);
	CU_add_test(s, "NULL (NFS and MOUNT)", test_null);
	CU_add_test(s, "libnfs mount without rpcbind", test_libnfs_mount);
	CU_add_test(s, "GETATTR", test_getattr);
	CU_add_test(s, "SETATTR (mode, size, mtime, guard)", test_setattr);
	CU_add_test(s, "LOOKUP", test_lookup);
	CU_add_test(s, "ACCESS", test_access);
	CU_add_test(s, "SYMLINK and READLINK", test_symlink_readlink);
	CU_add_test(s, "READ", test_read);
	CU_add_test(s, "WRITE and COMMIT", test_write_commit);
	CU_add_test(s, "CREATE (UNCHECKED, GUARDED, EXCLUSIVE)", test_create);
	CU_add_test(s, "MKDIR", test_mkdir);
	CU_add_test(s, "MKNOD", test_mknod);
	CU_add_test(s, "REMOVE and STALE", test_remove);
	CU_add_test(s, "RMDIR", test_rmdir);
	CU_add_test(s, "RENAME", test_rename);
	CU_add_test(s, "LINK and FSF3_LINK", test_link);
	CU_add_test(s, "READDIR", test_readdir);
	CU_add_test(s, "READDIRPLUS", test_readdirplus);
	CU_add_test(s, "FSSTAT", test_fsstat);
	CU_add_test(s, "FSINFO", test_fsinfo);
	CU_add_test(s, "PATHCONF", test_pathconf);
	CU_add_test(s, "bad names change nothing", test_names);
	CU_add_test(s, "forged handles are BADHANDLE", test_forged_handles);
	CU_add_test(s, "MOUNT MNT", test_mount_mnt);
	CU_add_test(s, "MOUNT MNT errors", test_mount_errors);
	CU_add_test(s, "MOUNT DUMP, UMNT, UMNTALL", test_mount_dump_umnt);
	CU_add_test(s, "MOUNT EXPORT", test_mount_export);
	CU_add_test(s, "MOUNT on the NFS port", test_mount_on_nfs_port);
	CU_add_test(s, "SIGTERM exits 0", test_sigterm);
	return e2e_run_cunit();
}
