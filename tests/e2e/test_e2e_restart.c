/*
 * tests/e2e/test_e2e_restart.c - what survives a gateway restart.
 *
 *  - handles held across a SIGTERM restart still work (GETATTR, READ,
 *    LOOKUP gives the same handle bytes, the root handle is the same);
 *  - WRITE + COMMIT, then kill -9, restart: the bytes read back through
 *    the old handle are identical (SHA-256); metadata replied to before
 *    the kill (CREATE, MKDIR, RENAME, REMOVE) is there after it;
 *  - the write verifier differs between every two runs;
 *  - a 100 MiB file copied in with libnfs (nfs_pwrite in 1 MiB pieces +
 *    nfs_fsync) and out again has the same SHA-256, also after kill -9 and
 *    a restart, read through the handle held before.
 */
#include "harness.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

static struct e2e_gw gw;
static struct e2e_rpc *R;
static nfs_fh3 ROOT;

/* A handle that outlives the connection it came from. */
struct kept {
	unsigned len;
	char data[NFS3_FHSIZE];
};

static struct kept keep(const nfs_fh3 *fh)
{
	struct kept k = { .len = fh->data.data_len };

	E2E_REQUIRE(k.len <= NFS3_FHSIZE, "handle of %u bytes", k.len);
	memcpy(k.data, fh->data.data_val, k.len);
	return k;
}

static nfs_fh3 use(struct kept *k)
{
	nfs_fh3 fh = { { k->len, k->data } };

	return fh;
}

/* (Re)connect R and ROOT to the running gateway. */
static void connect_raw(void)
{
	e2e_rpc_close(R);
	R = e2e_rpc_open(gw.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(R, "raw connect to the NFS port %d", gw.nfs_port);
	E2E_REQUIRE(e2e_root_fh(R, &gw, &ROOT) == 0, "MNT after (re)start");
}

static void restart_after(int how_kill9)
{
	e2e_rpc_close(R);
	R = NULL;
	if (how_kill9)
		E2E_REQUIRE(e2e_gw_kill9(&gw) == 0, "kill -9");
	else
		E2E_REQUIRE(e2e_gw_stop(&gw) == 0, "SIGTERM: exit not 0");
	E2E_REQUIRE(e2e_gw_restart(&gw) == 0, "restart on the same state");
	connect_raw();
}

static nfs_fh3 lookup_ok(const nfs_fh3 *dir, const char *name)
{
	LOOKUP3res res;

	E2E_RPC(R, e2e_nfs3_lookup(R, dir, name, &res));
	E2E_REQUIRE(res.status == NFS3_OK, "LOOKUP '%s': got %s, want NFS3_OK",
		    name, e2e_nfsstat(res.status));
	return res.LOOKUP3res_u.resok.object;
}

static nfs_fh3 mk_dir(const nfs_fh3 *parent, const char *name)
{
	MKDIR3args a = { .where = { .dir = *parent, .name = (char *)name },
			 .attributes = e2e_sattr_mode(0755) };
	MKDIR3res res;

	E2E_RPC(R, e2e_nfs3_mkdir(R, &a, &res));
	E2E_REQUIRE(res.status == NFS3_OK, "MKDIR '%s': got %s", name,
		    e2e_nfsstat(res.status));
	return lookup_ok(parent, name);
}

static nfs_fh3 mk_file(const nfs_fh3 *dir, const char *name)
{
	CREATE3args a = { .where = { .dir = *dir, .name = (char *)name } };
	CREATE3res res;

	a.how.mode = GUARDED;
	a.how.createhow3_u.g_obj_attributes = e2e_sattr_mode(0644);
	E2E_RPC(R, e2e_nfs3_create(R, &a, &res));
	E2E_REQUIRE(res.status == NFS3_OK, "CREATE '%s': got %s", name,
		    e2e_nfsstat(res.status));
	return lookup_ok(dir, name);
}

/* Write buf in 64 KiB UNSTABLE pieces; returns the (single) verifier. */
static void write_all(const nfs_fh3 *fh, const char *buf, size_t len,
		      stable_how how, char verf[NFS3_WRITEVERFSIZE])
{
	int first = 1;

	for (size_t off = 0; off < len; off += 65536) {
		uint32_t n = len - off < 65536 ? (uint32_t)(len - off) : 65536;
		WRITE3res w;

		E2E_RPC(R, e2e_nfs3_write(R, fh, off, buf + off, n, how, &w));
		E2E_REQUIRE(
			w.status == NFS3_OK && w.WRITE3res_u.resok.count == n,
			"WRITE %u at %zu: %s count %u", n, off,
			e2e_nfsstat(w.status),
			w.status == NFS3_OK ? w.WRITE3res_u.resok.count : 0);
		if (first)
			memcpy(verf, w.WRITE3res_u.resok.verf,
			       NFS3_WRITEVERFSIZE);
		else
			E2E_CHECK(memcmp(verf, w.WRITE3res_u.resok.verf,
					 NFS3_WRITEVERFSIZE) == 0,
				  "write verifier changed within one run");
		first = 0;
	}
}

/* SHA-256 of the whole file read through fh in `chunk` pieces. */
static void read_sha(const nfs_fh3 *fh, uint32_t chunk, uint64_t want_size,
		     char hex[65])
{
	struct e2e_sha256 s;
	uint8_t d[32];
	uint64_t off = 0;

	e2e_sha256_init(&s);
	for (;;) {
		READ3res rd;
		READ3resok *ok;

		E2E_RPC(R, e2e_nfs3_read(R, fh, off, chunk, &rd));
		E2E_REQUIRE(rd.status == NFS3_OK, "READ at %llu: got %s",
			    (unsigned long long)off, e2e_nfsstat(rd.status));
		ok = &rd.READ3res_u.resok;
		E2E_REQUIRE(ok->count == ok->data.data_len,
			    "READ count %u but %u data bytes", ok->count,
			    ok->data.data_len);
		e2e_sha256_update(&s, ok->data.data_val, ok->data.data_len);
		off += ok->count;
		if (ok->eof)
			break;
		E2E_REQUIRE(ok->count > 0, "READ at %llu: 0 bytes, no eof",
			    (unsigned long long)off);
		E2E_REQUIRE(off <= want_size, "READ past the size %llu",
			    (unsigned long long)want_size);
	}
	E2E_CHECK(off == want_size, "read %llu bytes, want %llu",
		  (unsigned long long)off, (unsigned long long)want_size);
	e2e_sha256_final(&s, d);
	e2e_digest_hex(d, hex);
}

/* The tests share one gateway; a failed restart leaves none. */
static void need_gw(void)
{
	E2E_REQUIRE(R != NULL && gw.pid > 0,
		    "no gateway connection (an earlier restart failed)");
}

static int suite_init(void)
{
	if (e2e_gw_start(&gw, 2) != 0)
		return -1;
	R = e2e_rpc_open(gw.nfs_port, NFS_PROGRAM, NFS_V3);
	if (!R || e2e_root_fh(R, &gw, &ROOT) != 0)
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

static void test_sha256_vectors(void)
{
	char hex[65];
	static char mil[1000000];

	e2e_sha256_hex("abc", 3, hex);
	E2E_CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a"
			      "9cb410ff61f20015ad") == 0,
		  "sha256('abc') = %s", hex);
	e2e_sha256_hex("", 0, hex);
	E2E_CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b93"
			      "4ca495991b7852b855") == 0,
		  "sha256('') = %s", hex);
	memset(mil, 'a', sizeof(mil));
	e2e_sha256_hex(mil, sizeof(mil), hex);
	E2E_CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a49720"
			      "0e046d39ccc7112cd0") == 0,
		  "sha256(10^6 x 'a') = %s", hex);
}

static void test_handles_after_sigterm(void)
{
	static char data[200000];
	char sha_before[65], sha_after[65], verf[NFS3_WRITEVERFSIZE];
	nfs_fh3 d, sub, f, g;
	struct kept kroot, kd, ksub, kf, kg;
	fattr3 fa_before;
	GETATTR3res ga;

	need_gw();

	e2e_fill(data, sizeof(data), 11);
	d = mk_dir(&ROOT, "keep");
	sub = mk_dir(&d, "sub");
	f = mk_file(&d, "f.bin");
	g = mk_file(&sub, "g.txt");
	write_all(&f, data, sizeof(data), FILE_SYNC, verf);
	write_all(&g, "hello", 5, FILE_SYNC, verf);
	kroot = keep(&ROOT);
	kd = keep(&d);
	ksub = keep(&sub);
	kf = keep(&f);
	kg = keep(&g);
	E2E_RPC(R, e2e_nfs3_getattr(R, &f, &ga));
	fa_before = ga.GETATTR3res_u.resok.obj_attributes;
	read_sha(&f, 65536, sizeof(data), sha_before);

	restart_after(0);

	E2E_CHECK(e2e_fh_equal(&ROOT, &(nfs_fh3){ { kroot.len, kroot.data } }),
		  "root handle changed across a restart");
	{
		nfs_fh3 h = use(&kf);

		E2E_RPC(R, e2e_nfs3_getattr(R, &h, &ga));
		E2E_STATUS("GETATTR with a pre-restart handle", ga.status,
			   NFS3_OK);
		if (ga.status == NFS3_OK) {
			fattr3 *a = &ga.GETATTR3res_u.resok.obj_attributes;

			E2E_CHECK(a->fileid == fa_before.fileid &&
					  a->size == fa_before.size &&
					  a->mtime.seconds ==
						  fa_before.mtime.seconds &&
					  a->mtime.nseconds ==
						  fa_before.mtime.nseconds,
				  "attributes changed across a restart: "
				  "fileid %llu->%llu size %llu->%llu",
				  (unsigned long long)fa_before.fileid,
				  (unsigned long long)a->fileid,
				  (unsigned long long)fa_before.size,
				  (unsigned long long)a->size);
			read_sha(&h, 65536, sizeof(data), sha_after);
			E2E_CHECK(strcmp(sha_before, sha_after) == 0,
				  "data through the old handle differs after "
				  "restart: %s vs %s",
				  sha_before, sha_after);
		}
	}
	{
		nfs_fh3 hd = use(&kd), hs = use(&ksub), hg = use(&kg);
		nfs_fh3 l = lookup_ok(&hd, "f.bin");
		nfs_fh3 ls = lookup_ok(&hs, "g.txt");
		READ3res rd;

		E2E_CHECK(e2e_fh_equal(&l, &(nfs_fh3){ { kf.len, kf.data } }),
			  "LOOKUP after restart gives other handle bytes");
		E2E_CHECK(e2e_fh_equal(&ls, &hg),
			  "LOOKUP sub/g.txt after restart gives other bytes");
		E2E_RPC(R, e2e_nfs3_read(R, &hg, 0, 100, &rd));
		E2E_STATUS("READ with a pre-restart handle", rd.status,
			   NFS3_OK);
		if (rd.status == NFS3_OK)
			E2E_CHECK(rd.READ3res_u.resok.count == 5 &&
					  memcmp(rd.READ3res_u.resok.data
							 .data_val,
						 "hello", 5) == 0,
				  "READ sub/g.txt after restart: wrong bytes");
	}
}

static void test_commit_then_kill9(void)
{
	static char data[3 << 20];
	char sha_before[65], sha_after[65], v1[NFS3_WRITEVERFSIZE];
	char v2[NFS3_WRITEVERFSIZE];
	struct kept kf, kdir;
	nfs_fh3 d, f;
	COMMIT3res c;
	char name[32];

	need_gw();
	d = mk_dir(&ROOT, "crash");
	f = mk_file(&d, "data.bin");

	e2e_fill(data, sizeof(data), 22);
	e2e_sha256_hex(data, sizeof(data), sha_before);
	write_all(&f, data, sizeof(data), UNSTABLE, v1);
	E2E_RPC(R, e2e_nfs3_commit(R, &f, 0, 0, &c));
	E2E_STATUS("COMMIT", c.status, NFS3_OK);
	E2E_CHECK(c.status != NFS3_OK || memcmp(c.COMMIT3res_u.resok.verf, v1,
						NFS3_WRITEVERFSIZE) == 0,
		  "COMMIT verifier differs from WRITE's in one run");

	/* metadata: each of these got its reply before the kill */
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "m%02d", i);
		mk_file(&d, name);
	}
	mk_dir(&d, "dir_made");
	{
		RENAME3res rn;
		REMOVE3res rm;

		E2E_RPC(R, e2e_nfs3_rename(R, &d, "m00", &d, "renamed", &rn));
		E2E_STATUS("RENAME before kill -9", rn.status, NFS3_OK);
		E2E_RPC(R, e2e_nfs3_remove(R, &d, "m01", &rm));
		E2E_STATUS("REMOVE before kill -9", rm.status, NFS3_OK);
	}
	kf = keep(&f);
	kdir = keep(&d);

	restart_after(1);

	{
		nfs_fh3 h = use(&kf), hd = use(&kdir);
		LOOKUP3res lr;

		read_sha(&h, 1048576, sizeof(data), sha_after);
		E2E_CHECK(strcmp(sha_before, sha_after) == 0,
			  "committed data lost in kill -9: sha256 %s, want %s",
			  sha_after, sha_before);
		for (int i = 2; i < 20; i++) {
			snprintf(name, sizeof(name), "m%02d", i);
			E2E_RPC(R, e2e_nfs3_lookup(R, &hd, name, &lr));
			E2E_STATUS("LOOKUP of a file created before kill -9",
				   lr.status, NFS3_OK);
		}
		E2E_RPC(R, e2e_nfs3_lookup(R, &hd, "dir_made", &lr));
		E2E_STATUS("LOOKUP of a dir made before kill -9", lr.status,
			   NFS3_OK);
		E2E_RPC(R, e2e_nfs3_lookup(R, &hd, "renamed", &lr));
		E2E_STATUS("LOOKUP of the RENAME target after kill -9",
			   lr.status, NFS3_OK);
		E2E_RPC(R, e2e_nfs3_lookup(R, &hd, "m00", &lr));
		E2E_STATUS("LOOKUP of the RENAME source after kill -9",
			   lr.status, NFS3ERR_NOENT);
		E2E_RPC(R, e2e_nfs3_lookup(R, &hd, "m01", &lr));
		E2E_STATUS("LOOKUP of a REMOVEd name after kill -9", lr.status,
			   NFS3ERR_NOENT);

		write_all(&h, "x", 1, UNSTABLE, v2);
		E2E_CHECK(memcmp(v1, v2, NFS3_WRITEVERFSIZE) != 0,
			  "write verifier is the same before and after a "
			  "kill -9 restart");
	}
}

static void test_verifier_per_run(void)
{
	char v[3][NFS3_WRITEVERFSIZE];
	nfs_fh3 f;
	struct kept kf;

	need_gw();
	f = mk_file(&ROOT, "verf.bin");
	kf = keep(&f);

	for (int run = 0; run < 3; run++) {
		nfs_fh3 h = use(&kf);
		COMMIT3res c;

		write_all(&h, "abcd", 4, UNSTABLE, v[run]);
		E2E_RPC(R, e2e_nfs3_commit(R, &h, 0, 0, &c));
		E2E_STATUS("COMMIT", c.status, NFS3_OK);
		if (c.status == NFS3_OK)
			E2E_CHECK(memcmp(c.COMMIT3res_u.resok.verf, v[run],
					 NFS3_WRITEVERFSIZE) == 0,
				  "run %d: COMMIT verifier != WRITE verifier",
				  run);
		if (run < 2)
			restart_after(0);
	}
	E2E_CHECK(memcmp(v[0], v[1], NFS3_WRITEVERFSIZE) != 0 &&
			  memcmp(v[1], v[2], NFS3_WRITEVERFSIZE) != 0 &&
			  memcmp(v[0], v[2], NFS3_WRITEVERFSIZE) != 0,
		  "the write verifier repeats across SIGTERM restarts");
}

#define BIG_SIZE (100u << 20)
#define PIECE (1u << 20)

static void test_100mib(void)
{
	static char buf[PIECE], back[PIECE];
	struct nfs_context *nfs;
	struct nfsfh *fh = NULL;
	struct e2e_sha256 s;
	uint8_t d[32];
	char sha_in[65], sha_out[65], sha_raw[65];
	struct kept kf;
	uint64_t t0 = e2e_now_ms();
	int rc;

	need_gw();
	nfs = e2e_nfs_mount(&gw);
	E2E_REQUIRE(nfs, "libnfs mount");
	rc = nfs_creat(nfs, "/big100.bin", 0644, &fh);
	E2E_REQUIRE(rc == 0, "nfs_creat /big100.bin: %s", nfs_get_error(nfs));
	e2e_sha256_init(&s);
	for (uint64_t off = 0; off < BIG_SIZE; off += PIECE) {
		size_t done = 0;

		e2e_fill(buf, PIECE, 1000 + off / PIECE);
		e2e_sha256_update(&s, buf, PIECE);
		while (done < PIECE) {
			rc = nfs_pwrite(nfs, fh, off + done, PIECE - done,
					buf + done);
			E2E_REQUIRE(rc > 0, "nfs_pwrite at %llu: %d %s",
				    (unsigned long long)(off + done), rc,
				    nfs_get_error(nfs));
			done += (size_t)rc;
		}
	}
	e2e_sha256_final(&s, d);
	e2e_digest_hex(d, sha_in);
	rc = nfs_fsync(nfs, fh);
	E2E_REQUIRE(rc == 0, "nfs_fsync: %d %s", rc, nfs_get_error(nfs));
	nfs_close(nfs, fh);
	fprintf(stderr, "  100 MiB in: %llu ms\n",
		(unsigned long long)(e2e_now_ms() - t0));

	t0 = e2e_now_ms();
	rc = nfs_open(nfs, "/big100.bin", O_RDONLY, &fh);
	E2E_REQUIRE(rc == 0, "nfs_open: %s", nfs_get_error(nfs));
	e2e_sha256_init(&s);
	for (uint64_t off = 0; off < BIG_SIZE;) {
		rc = nfs_pread(nfs, fh, off, PIECE, back);
		E2E_REQUIRE(rc > 0, "nfs_pread at %llu: %d %s",
			    (unsigned long long)off, rc, nfs_get_error(nfs));
		e2e_sha256_update(&s, back, (size_t)rc);
		off += (uint64_t)rc;
	}
	rc = nfs_pread(nfs, fh, BIG_SIZE, PIECE, back);
	E2E_CHECK(rc == 0, "nfs_pread at the end: %d, want 0", rc);
	nfs_close(nfs, fh);
	e2e_sha256_final(&s, d);
	e2e_digest_hex(d, sha_out);
	fprintf(stderr, "  100 MiB out: %llu ms\n",
		(unsigned long long)(e2e_now_ms() - t0));
	E2E_CHECK(strcmp(sha_in, sha_out) == 0,
		  "100 MiB copied out differs: sha256 %s, want %s", sha_out,
		  sha_in);
	nfs_destroy_context(nfs);

	{
		nfs_fh3 h = lookup_ok(&ROOT, "big100.bin");

		kf = keep(&h);
	}
	restart_after(1);
	{
		nfs_fh3 h = use(&kf);
		GETATTR3res ga;

		E2E_RPC(R, e2e_nfs3_getattr(R, &h, &ga));
		E2E_STATUS("GETATTR of the 100 MiB file after kill -9",
			   ga.status, NFS3_OK);
		if (ga.status == NFS3_OK)
			E2E_CHECK(ga.GETATTR3res_u.resok.obj_attributes.size ==
					  BIG_SIZE,
				  "size after kill -9: %llu, want %u",
				  (unsigned long long)ga.GETATTR3res_u.resok
					  .obj_attributes.size,
				  BIG_SIZE);
		read_sha(&h, PIECE, BIG_SIZE, sha_raw);
		E2E_CHECK(strcmp(sha_in, sha_raw) == 0,
			  "100 MiB after kill -9 through the old handle: "
			  "sha256 %s, want %s",
			  sha_raw, sha_in);
	}
}

static uint32_t nlink_of(const nfs_fh3 *fh, const char *what)
{
	GETATTR3res ga;

	E2E_RPC(R, e2e_nfs3_getattr(R, fh, &ga));
	E2E_STATUS(what, ga.status, NFS3_OK);
	return ga.status == NFS3_OK
		       ? ga.GETATTR3res_u.resok.obj_attributes.nlink
		       : 0;
}

/*
 * Hard links (issue 22): two names of one file in two directories, a
 * write through the second read through the first, a kill -9 and a
 * restart (the pair is still one file), the first name removed (the
 * second keeps the bytes), and a SIGTERM restart after that.
 */
static void test_hard_links(void)
{
	static char data[300000];
	char verf[NFS3_WRITEVERFSIZE], want[65], got[65];
	struct kept kd, ksub, kf;
	nfs_fh3 d, sub, f, l;
	LINK3res lr;
	REMOVE3res rm;
	LOOKUP3res lk;

	need_gw();
	e2e_fill(data, sizeof(data), 22);
	d = mk_dir(&ROOT, "links");
	sub = mk_dir(&d, "sub");
	f = mk_file(&d, "a");
	write_all(&f, data, sizeof(data), UNSTABLE, verf);
	E2E_RPC(R, e2e_nfs3_link(R, &f, &sub, "b", &lr));
	E2E_STATUS("LINK links/a -> links/sub/b", lr.status, NFS3_OK);
	l = lookup_ok(&sub, "b");
	E2E_CHECK(e2e_fh_equal(&f, &l), "links/sub/b is another file");
	memcpy(data + 1000, "through the second name", 23);
	write_all(&l, data, 2000, FILE_SYNC, verf);
	e2e_sha256_hex(data, sizeof(data), want);
	read_sha(&f, 65536, sizeof(data), got);
	E2E_CHECK(!strcmp(want, got), "links/a does not show the write "
				      "through links/sub/b");
	kd = keep(&d);
	ksub = keep(&sub);
	kf = keep(&f);

	restart_after(1);
	d = use(&kd);
	sub = use(&ksub);
	f = lookup_ok(&d, "a");
	l = lookup_ok(&sub, "b");
	E2E_CHECK(e2e_fh_equal(&f, &l),
		  "after kill -9 the names are two files");
	E2E_CHECK(e2e_fh_equal(&f, &(nfs_fh3){ { kf.len, kf.data } }),
		  "the file's handle changed across kill -9");
	E2E_CHECK(nlink_of(&f, "GETATTR links/a") == 2, "nlink is not 2");
	read_sha(&l, 65536, sizeof(data), got);
	E2E_CHECK(!strcmp(want, got), "links/sub/b after kill -9: other bytes");
	E2E_RPC(R, e2e_nfs3_remove(R, &d, "a", &rm));
	E2E_STATUS("REMOVE links/a", rm.status, NFS3_OK);
	E2E_CHECK(nlink_of(&l, "GETATTR links/sub/b") == 1, "nlink is not 1");

	restart_after(0);
	d = use(&kd);
	sub = use(&ksub);
	E2E_RPC(R, e2e_nfs3_lookup(R, &d, "a", &lk));
	E2E_STATUS("LOOKUP links/a after REMOVE", lk.status, NFS3ERR_NOENT);
	l = lookup_ok(&sub, "b");
	read_sha(&l, 65536, sizeof(data), got);
	E2E_CHECK(!strcmp(want, got), "links/sub/b lost its bytes when "
				      "links/a was removed");
}

/* Last: SIGTERM is a clean exit, and stdout held only the ready line. */
static void test_sigterm(void)
{
	E2E_REQUIRE(gw.pid > 0, "the gateway is not running any more");
	E2E_CHECK(e2e_gw_stop(&gw) == 0, "SIGTERM: exit status is not 0");
	E2E_CHECK(gw.extra_stdout == 0,
		  "stdout had %zu bytes beyond the ready line",
		  gw.extra_stdout);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("e2e_restart", suite_init, suite_clean);
	CU_add_test(s, "SHA-256 test vectors", test_sha256_vectors);
	CU_add_test(s, "handles survive a SIGTERM restart",
		    test_handles_after_sigterm);
	CU_add_test(s, "WRITE+COMMIT survive kill -9", test_commit_then_kill9);
	CU_add_test(s, "write verifier differs per run", test_verifier_per_run);
	CU_add_test(s, "100 MiB in and out, kill -9, old handle", test_100mib);
	CU_add_test(s, "hard links: two names, kill -9, one removed",
		    test_hard_links);
	CU_add_test(s, "SIGTERM exits 0", test_sigterm);
	return e2e_run_cunit();
}
