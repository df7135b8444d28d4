/*
 * tests/e2e/test_e2e_nospc.c - a full cache disk (file backend; the state
 * dir on a 16 MiB tmpfs, the store on another disk):
 *  - files COMMITted before the disk fills keep every byte (SHA-256,
 *    through NFS and in the store);
 *  - a WRITE past the space answers NFS3ERR_NOSPC, or NFS3ERR_JUKEBOX while
 *    dirty data can still drain (issue 4: backpressure is JUKEBOX, so the
 *    client waits for room the uploader can make).  Once nothing is dirty
 *    there is nothing to wait for: then it must be NOSPC (or OK, if the
 *    gateway made room by evicting clean data), never JUKEBOX for ever,
 *    never IO or SERVERFAULT, and the gateway lives;
 *  - what was acknowledged of the file that hit the wall is intact;
 *  - after files are removed through NFS, writes succeed again.
 *
 * Mounting needs root (CI runs the tests as root); without it the test is
 * skipped (exit 77) and says why.
 */
#include "harness.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#define SKIP 77
#define TMPFS_SIZE "16m"
#define CHUNK 65536
#define KEEP_FILES 3
#define KEEP_SIZE ((1u << 20) + 3) /* committed before the disk fills */
#define FILL_MAX (64u << 20)       /* more than the tmpfs can hold */
#define DRAIN_MS 30000             /* dirty data reaches the store within */
#define RETRY_MS 30000             /* a JUKEBOX'd write succeeds within */

static char mnt[64]; /* the tmpfs, also the state dir */
static int mounted;

struct env {
	struct e2e_gw gw;
	struct e2e_rpc *r;
	nfs_fh3 root;
};

static struct env E;

static void unmount(void)
{
	if (mounted && umount2(mnt, 0) != 0) {
		fprintf(stderr, "  umount %s: %s; detaching\n", mnt,
			strerror(errno));
		umount2(mnt, MNT_DETACH);
	}
	mounted = 0;
	if (mnt[0])
		rmdir(mnt);
	mnt[0] = '\0';
}

static void test_cleanup(void)
{
	if (E.r)
		e2e_rpc_close(E.r);
	E.r = NULL;
	if (E.gw.pid > 0)
		E2E_CHECK(e2e_gw_stop(&E.gw) == 0, "gateway SIGTERM: exit 0");
	e2e_gw_cleanup(&E.gw);
	unmount();
}

static nfs_fh3 create(const char *name)
{
	CREATE3args a = { .where = { .dir = E.root, .name = (char *)name } };
	CREATE3res res;

	a.how.mode = UNCHECKED;
	a.how.createhow3_u.obj_attributes = e2e_sattr_mode(0644);
	E2E_RPC(E.r, e2e_nfs3_create(E.r, &a, &res));
	E2E_REQUIRE(res.status == NFS3_OK, "CREATE %s: %s", name,
		    e2e_nfsstat(res.status));
	E2E_REQUIRE(res.CREATE3res_u.resok.obj.handle_follows,
		    "CREATE %s: no handle", name);
	return e2e_fh_dup(E.r,
			  &res.CREATE3res_u.resok.obj.post_op_fh3_u.handle);
}

/* One WRITE; its status (RPC failure ends the test). */
static int write1(const nfs_fh3 *fh, uint64_t off, const void *buf,
		  uint32_t len, stable_how how)
{
	WRITE3res w;

	E2E_RPC(E.r, e2e_nfs3_write(E.r, fh, off, buf, len, how, &w));
	if (w.status == NFS3_OK)
		E2E_REQUIRE(w.WRITE3res_u.resok.count == len,
			    "short WRITE: %u of %u", w.WRITE3res_u.resok.count,
			    len);
	return w.status;
}

static int commit(const nfs_fh3 *fh)
{
	COMMIT3res c;

	E2E_RPC(E.r, e2e_nfs3_commit(E.r, fh, 0, 0, &c));
	return c.status;
}

/* SHA-256 of READ [0, len) into hex; NFS3_OK or the first bad status. */
static int read_sha(const nfs_fh3 *fh, size_t len, char hex[65])
{
	struct e2e_sha256 s;
	uint8_t d[32];
	size_t done = 0;
	READ3res rd;

	e2e_sha256_init(&s);
	while (done < len) {
		uint32_t n =
			len - done > CHUNK ? CHUNK : (uint32_t)(len - done);

		E2E_RPC(E.r, e2e_nfs3_read(E.r, fh, done, n, &rd));
		if (rd.status != NFS3_OK)
			return rd.status;
		if (rd.READ3res_u.resok.count == 0)
			break;
		e2e_sha256_update(&s, rd.READ3res_u.resok.data.data_val,
				  rd.READ3res_u.resok.count);
		done += rd.READ3res_u.resok.count;
	}
	e2e_sha256_final(&s, d);
	e2e_digest_hex(d, hex);
	E2E_CHECK(done == len, "READ: %zu bytes, want %zu", done, len);
	return NFS3_OK;
}

/* SHA-256 of the store's file for name (file backend: store/NAME). */
static int store_sha(const char *name, size_t len, char hex[65])
{
	char path[E2E_PATH_MAX + 64];
	struct stat st;
	FILE *f;
	char *buf;
	size_t got;

	snprintf(path, sizeof(path), "%s/%s", E.gw.store, name);
	if (stat(path, &st) != 0 || (size_t)st.st_size != len)
		return -1;
	f = fopen(path, "rb");
	if (!f)
		return -1;
	buf = malloc(len ? len : 1);
	E2E_REQUIRE(buf, "malloc");
	got = fread(buf, 1, len, f);
	fclose(f);
	e2e_sha256_hex(buf, got, hex);
	free(buf);
	return got == len ? 0 : -1;
}

static int store_sha_until(const char *name, size_t len, const char *want)
{
	uint64_t t0 = e2e_now_ms();
	char hex[65];

	while (e2e_now_ms() - t0 < DRAIN_MS) {
		if (store_sha(name, len, hex) == 0 && strcmp(hex, want) == 0)
			return 0;
		usleep(200000);
	}
	return -1;
}

/*
 * After a mismatch: which CHUNK-sized blocks of name differ, through NFS
 * and in the store, and whether they read as zeros (a hole).
 */
static void report_bad_blocks(const nfs_fh3 *fh, const char *name, uint64_t len,
			      char *want)
{
	char path[E2E_PATH_MAX + 64];
	char *got = malloc(CHUNK);
	FILE *f;
	int shown = 0;

	snprintf(path, sizeof(path), "%s/%s", E.gw.store, name);
	f = fopen(path, "rb");
	E2E_REQUIRE(got, "malloc");
	for (uint64_t off = 0; off < len && shown < 8; off += CHUNK) {
		READ3res rd;
		size_t n = 0, sn = 0;
		bool zero = true, szero = true, sbad;

		e2e_fill(want, CHUNK, 7000 + off / CHUNK);
		E2E_RPC(E.r, e2e_nfs3_read(E.r, fh, off, CHUNK, &rd));
		if (rd.status == NFS3_OK) {
			n = rd.READ3res_u.resok.count;
			memcpy(got, rd.READ3res_u.resok.data.data_val, n);
		}
		for (size_t i = 0; i < n; i++)
			zero &= got[i] == 0;
		bool bad = rd.status != NFS3_OK || n != CHUNK ||
			   memcmp(got, want, CHUNK) != 0;
		if (f && fseeko(f, (off_t)off, SEEK_SET) == 0)
			sn = fread(got, 1, CHUNK, f);
		for (size_t i = 0; i < sn; i++)
			szero &= got[i] == 0;
		sbad = sn != CHUNK || memcmp(got, want, CHUNK) != 0;
		if (!bad && !sbad)
			continue;
		fprintf(stderr, "  %s @%llu: NFS %s%s%s, store %s%s\n", name,
			(unsigned long long)off, e2e_nfsstat(rd.status),
			bad ? " other bytes" : " ok",
			bad && zero ? " (zeros)" : "",
			sbad ? "other bytes" : "ok",
			sbad && szero ? " (zeros)" : "");
		shown++;
	}
	if (f)
		fclose(f);
	free(got);
}

static void test_full_disk(void)
{
	char names[KEEP_FILES][32], sha[KEEP_FILES][65], hex[65];
	nfs_fh3 keep[KEEP_FILES], big, again;
	char *buf = malloc(KEEP_SIZE > CHUNK ? KEEP_SIZE : CHUNK);
	struct e2e_gw_opts o = { .threads = 2,
				 .upload_delay = "0",
				 .state_dir = mnt };
	uint64_t acked = 0, t0;
	int st = NFS3_OK, first_fail, jukes = 0;

	E2E_REQUIRE(buf, "malloc");
	E2E_REQUIRE(e2e_gw_start_opts(&E.gw, &o) == 0,
		    "gateway start with its state on a %s tmpfs", TMPFS_SIZE);
	E.r = e2e_rpc_open(E.gw.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(E.r, "NFS connection");
	E2E_REQUIRE(e2e_root_fh(E.r, &E.gw, &E.root) == 0, "root handle");

	/* Committed before the disk fills: these must survive it. */
	for (int i = 0; i < KEEP_FILES; i++) {
		snprintf(names[i], sizeof(names[i]), "keep%d", i);
		e2e_fill(buf, KEEP_SIZE, 100 + (uint64_t)i);
		e2e_sha256_hex(buf, KEEP_SIZE, sha[i]);
		keep[i] = create(names[i]);
		for (uint32_t off = 0; off < KEEP_SIZE; off += CHUNK) {
			uint32_t n = KEEP_SIZE - off > CHUNK ? CHUNK
							     : KEEP_SIZE - off;

			E2E_REQUIRE(write1(&keep[i], off, buf + off, n,
					   UNSTABLE) == NFS3_OK,
				    "WRITE %s", names[i]);
		}
		E2E_REQUIRE(commit(&keep[i]) == NFS3_OK, "COMMIT %s", names[i]);
	}

	/*
	 * Once they are up (clean, evictable), the fill runs into the dirty
	 * limit (half the cache) while eviction and uploads run under it.
	 * Without this wait that path came only now and then, and on it
	 * (an upload read a chunk the evictor punched meanwhile) a chunk of
	 * big went up as zeros and read back so.
	 */
	for (int i = 0; i < KEEP_FILES; i++)
		E2E_REQUIRE(store_sha_until(names[i], KEEP_SIZE, sha[i]) == 0,
			    "%s: not in the store with its bytes", names[i]);
	/* Fill the disk: UNSTABLE writes until one is refused. */
	big = create("big");
	while (acked < FILL_MAX) {
		e2e_fill(buf, CHUNK, 7000 + acked / CHUNK);
		st = write1(&big, acked, buf, CHUNK, UNSTABLE);
		if (st != NFS3_OK)
			break;
		acked += CHUNK;
	}
	first_fail = st;
	fprintf(stderr, "  disk full after %llu bytes of big: %s\n",
		(unsigned long long)acked, e2e_nfsstat(st));
	E2E_REQUIRE(acked < FILL_MAX,
		    "%u bytes written to a %s tmpfs and no "
		    "WRITE refused",
		    FILL_MAX, TMPFS_SIZE);
	E2E_CHECK(st == NFS3ERR_NOSPC || st == NFS3ERR_JUKEBOX,
		  "WRITE past the space: got %s, want NFS3ERR_NOSPC (or "
		  "NFS3ERR_JUKEBOX while dirty data drains)",
		  e2e_nfsstat(st));
	E2E_REQUIRE(e2e_gw_alive(&E.gw), "gateway died on a full disk");

	/* What was acknowledged is kept: COMMIT it and let it drain. */
	st = commit(&big);
	E2E_STATUS("COMMIT big on a full disk", st, NFS3_OK);
	for (int i = 0; i < KEEP_FILES; i++)
		E2E_CHECK(store_sha_until(names[i], KEEP_SIZE, sha[i]) == 0,
			  "%s: not in the store with its bytes", names[i]);

	/* Nothing dirty is left to drain once big is up: no JUKEBOX now. */
	t0 = e2e_now_ms();
	do {
		if (st == NFS3ERR_JUKEBOX)
			usleep(500000);
		e2e_fill(buf, CHUNK, 7000 + acked / CHUNK);
		st = write1(&big, acked, buf, CHUNK, UNSTABLE);
		jukes += st == NFS3ERR_JUKEBOX;
	} while (st == NFS3ERR_JUKEBOX && e2e_now_ms() - t0 < DRAIN_MS);
	fprintf(stderr, "  after the drain: %s (%d JUKEBOX first)\n",
		e2e_nfsstat(st), jukes);
	E2E_CHECK(st == NFS3ERR_NOSPC || st == NFS3_OK,
		  "WRITE on a full disk with nothing left to drain: got %s "
		  "(JUKEBOX for %d ms counts as a hang), want NFS3ERR_NOSPC "
		  "(or OK if room was made)",
		  e2e_nfsstat(st), DRAIN_MS);
	if (st == NFS3_OK)
		acked += CHUNK;

	/* Nothing already committed is corrupted. */
	for (int i = 0; i < KEEP_FILES; i++) {
		E2E_STATUS(names[i], read_sha(&keep[i], KEEP_SIZE, hex),
			   NFS3_OK);
		E2E_CHECK(strcmp(hex, sha[i]) == 0,
			  "READ %s on a full disk: other bytes", names[i]);
	}
	{
		struct e2e_sha256 s;
		uint8_t d[32];
		char want[65];

		e2e_sha256_init(&s);
		for (uint64_t off = 0; off < acked; off += CHUNK) {
			e2e_fill(buf, CHUNK, 7000 + off / CHUNK);
			e2e_sha256_update(&s, buf, CHUNK);
		}
		e2e_sha256_final(&s, d);
		e2e_digest_hex(d, want);
		E2E_STATUS("READ big", read_sha(&big, acked, hex), NFS3_OK);
		E2E_CHECK(strcmp(hex, want) == 0,
			  "big: the %llu bytes "
			  "acknowledged before %s read back other bytes",
			  (unsigned long long)acked, e2e_nfsstat(first_fail));
		if (strcmp(hex, want))
			report_bad_blocks(&big, "big", acked, buf);
	}

	/* Free the space through NFS; writes work again. */
	{
		REMOVE3res rr;

		E2E_RPC(E.r, e2e_nfs3_remove(E.r, &E.root, "big", &rr));
		E2E_STATUS("REMOVE big", rr.status, NFS3_OK);
	}
	/*
	 * The removed file's cache space is released after the REMOVE's
	 * commit, not inside it: allow that moment before CREATE must work.
	 */
	t0 = e2e_now_ms();
	for (;;) {
		CREATE3args a = { .where = { .dir = E.root, .name = "again" } };
		CREATE3res res;

		a.how.mode = UNCHECKED;
		a.how.createhow3_u.obj_attributes = e2e_sattr_mode(0644);
		E2E_RPC(E.r, e2e_nfs3_create(E.r, &a, &res));
		if ((res.status == NFS3ERR_NOSPC ||
		     res.status == NFS3ERR_JUKEBOX) &&
		    e2e_now_ms() - t0 < RETRY_MS) {
			usleep(100000);
			continue;
		}
		E2E_REQUIRE(res.status == NFS3_OK &&
				    res.CREATE3res_u.resok.obj.handle_follows,
			    "CREATE again after space was freed: %s",
			    e2e_nfsstat(res.status));
		again = e2e_fh_dup(
			E.r, &res.CREATE3res_u.resok.obj.post_op_fh3_u.handle);
		break;
	}
	e2e_fill(buf, KEEP_SIZE, 4242);
	e2e_sha256_hex(buf, KEEP_SIZE, hex);
	t0 = e2e_now_ms();
	for (uint32_t off = 0; off < KEEP_SIZE;) {
		uint32_t n = KEEP_SIZE - off > CHUNK ? CHUNK : KEEP_SIZE - off;

		st = write1(&again, off, buf + off, n, UNSTABLE);
		if (st == NFS3ERR_JUKEBOX && e2e_now_ms() - t0 < RETRY_MS) {
			usleep(200000);
			continue;
		}
		if (st != NFS3_OK)
			break;
		off += n;
	}
	E2E_STATUS("WRITE after space was freed", st, NFS3_OK);
	E2E_STATUS("COMMIT after space was freed", commit(&again), NFS3_OK);
	E2E_CHECK(store_sha_until("again", KEEP_SIZE, hex) == 0,
		  "again: not in the store with its bytes");
	E2E_CHECK(e2e_gw_alive(&E.gw), "gateway alive at the end");
	free(buf);
}

int main(void)
{
	CU_pSuite s;

	if (e2e_backend() != E2E_BACKEND_FILE) {
		fprintf(stderr, "test_e2e_nospc: file backend only\n");
		return 1;
	}
	snprintf(mnt, sizeof(mnt), "/tmp/mapfs-e2e-nospc-XXXXXX");
	if (!mkdtemp(mnt)) {
		perror("mkdtemp");
		return 1;
	}
	if (mount("tmpfs", mnt, "tmpfs", MS_NOSUID | MS_NODEV,
		  "size=" TMPFS_SIZE ",mode=0700") != 0) {
		fprintf(stderr,
			"test_e2e_nospc: SKIPPED: cannot mount a "
			"tmpfs on %s (%s); this test needs root (CI runs it "
			"as root)\n",
			mnt, strerror(errno));
		rmdir(mnt);
		return SKIP;
	}
	mounted = 1;
	atexit(unmount);
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite_with_setup_and_teardown("e2e_nospc", NULL, NULL, NULL,
						 test_cleanup);
	CU_add_test(s, "full cache disk: NOSPC, no corruption, recovery",
		    test_full_disk);
	return e2e_run_cunit();
}
