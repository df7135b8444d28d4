/*
 * End-to-end tests of a cluster (issue 15): three gateways on one
 * PostgreSQL (tests/pg/pg.sh) and one store (the file store's directory,
 * or one radosgw prefix), driven by raw NFS calls to each of them.
 *
 * - the same handles on every gateway, STALE on all once removed;
 * - close-to-open: what a client of A wrote and COMMITted is what a
 *   client of B reads; creates, renames, SETATTRs and removes show on the
 *   others within a window (measured here, asserted loosely: 5 s);
 * - atomic namespace operations: one of two concurrent CREATEs of a name
 *   wins, two crossing directory renames never make a cycle;
 * - one writer per file: another gateway's WRITE waits (JUKEBOX) while a
 *   file has changes not in the store; a gateway killed -9 and restarted
 *   at once uploads its file, and nobody overwrote it meanwhile; one that
 *   stays dead has its files taken over once its lease ran out, with
 *   everything it had made stable;
 * - PostgreSQL down: cached reads go on, changes answer JUKEBOX, and
 *   everything resumes without a restart when it is back.
 */
#include "harness.h"

#include "../fault/faultctl.h"

#include <nfsc/libnfs-raw-nlm.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#define NGW 3
#define WINDOW_MS 5000 /* what "visible on the others" may take here */

static struct e2e_gw gw[NGW];
static struct e2e_rpc *nfs[NGW];
static nfs_fh3 root[NGW];
static char meta[256];
static const char *names[NGW] = { "gw-a", "gw-b", "gw-c" };

static int start_gw(int i)
{
	static const char *const args[] = { "--grace", "0", "--lease", "3",
					    NULL };
	struct e2e_gw_opts o = { .threads = 2,
				 .meta = meta,
				 .node = names[i],
				 .store_of = i ? &gw[0] : NULL,
				 .upload_delay = "1",
				 .extra_args = args };

	if (e2e_gw_start_opts(&gw[i], &o))
		return -1;
	nfs[i] = e2e_rpc_open(gw[i].nfs_port, NFS_PROGRAM, NFS_V3);
	return nfs[i] && !e2e_root_fh(nfs[i], &gw[i], &root[i]) ? 0 : -1;
}

static int getattr_raw(struct e2e_rpc *r, const nfs_fh3 *fh)
{
	GETATTR3res res;

	return e2e_nfs3_getattr(r, fh, &res) ? -1 : (int)res.status;
}

/* LOOKUP name in dir on gateway i: the status; *fh on OK. */
static int lookup(int i, const nfs_fh3 *dir, const char *name, nfs_fh3 *fh)
{
	LOOKUP3res r;

	if (e2e_nfs3_lookup(nfs[i], dir, name, &r))
		return -1;
	if (r.status == NFS3_OK && fh)
		*fh = e2e_fh_dup(nfs[i], &r.LOOKUP3res_u.resok.object);
	return r.status;
}

/* Poll LOOKUP on gateway i until it answers want; ms it took, or -1. */
static long wait_lookup(int i, const nfs_fh3 *dir, const char *name, int want)
{
	uint64_t t0 = e2e_now_ms();

	while (e2e_now_ms() - t0 < WINDOW_MS) {
		if (lookup(i, dir, name, NULL) == want)
			return (long)(e2e_now_ms() - t0);
		usleep(2000);
	}
	return -1;
}

static int create(int i, const nfs_fh3 *dir, const char *name,
		  enum createmode3 how, nfs_fh3 *fh)
{
	CREATE3args a = { .where = { *dir, (char *)name } };
	CREATE3res r;

	a.how.mode = how;
	a.how.createhow3_u.obj_attributes = e2e_sattr_mode(0644);
	if (e2e_nfs3_create(nfs[i], &a, &r))
		return -1;
	if (r.status == NFS3_OK && fh &&
	    r.CREATE3res_u.resok.obj.handle_follows)
		*fh = e2e_fh_dup(
			nfs[i], &r.CREATE3res_u.resok.obj.post_op_fh3_u.handle);
	return r.status;
}

static int mkdir_on(int i, const nfs_fh3 *dir, const char *name, nfs_fh3 *fh)
{
	MKDIR3args a = { .where = { *dir, (char *)name },
			 .attributes = e2e_sattr_mode(0755) };
	MKDIR3res r;

	if (e2e_nfs3_mkdir(nfs[i], &a, &r))
		return -1;
	if (r.status == NFS3_OK && fh)
		*fh = e2e_fh_dup(nfs[i],
				 &r.MKDIR3res_u.resok.obj.post_op_fh3_u.handle);
	return r.status;
}

static int write_on(int i, const nfs_fh3 *fh, uint64_t off, const void *buf,
		    uint32_t len, stable_how how)
{
	WRITE3res r;

	if (e2e_nfs3_write(nfs[i], fh, off, buf, len, how, &r))
		return -1;
	return r.status;
}

static int commit_on(int i, const nfs_fh3 *fh)
{
	COMMIT3res r;

	if (e2e_nfs3_commit(nfs[i], fh, 0, 0, &r))
		return -1;
	return r.status;
}

/* READ all of a file on gateway i into buf[cap]: bytes, or -status. */
static long read_all(int i, const nfs_fh3 *fh, void *buf, size_t cap)
{
	uint64_t t0 = e2e_now_ms();
	size_t got = 0;

	for (;;) {
		READ3res r;
		uint32_t n = cap - got > 65536 ? 65536 : (uint32_t)(cap - got);

		if (e2e_nfs3_read(nfs[i], fh, got, n, &r))
			return -EIO;
		/* As a client does: JUKEBOX (a file another gateway has not
		 * let go of yet, seen from a replica still behind) is
		 * retried, for as long as a change may take to show. */
		if (r.status == NFS3ERR_JUKEBOX &&
		    e2e_now_ms() - t0 < WINDOW_MS) {
			usleep(100 * 1000);
			continue;
		}
		if (r.status != NFS3_OK)
			return -(long)r.status;
		if (r.READ3res_u.resok.count)
			memcpy((char *)buf + got,
			       r.READ3res_u.resok.data.data_val,
			       r.READ3res_u.resok.count);
		got += r.READ3res_u.resok.count;
		if (r.READ3res_u.resok.eof || !r.READ3res_u.resok.count ||
		    got == cap)
			return (long)got;
	}
}

static int getattr_on(int i, const nfs_fh3 *fh, fattr3 *out)
{
	GETATTR3res r;

	if (e2e_nfs3_getattr(nfs[i], fh, &r))
		return -1;
	if (r.status == NFS3_OK && out)
		*out = r.GETATTR3res_u.resok.obj_attributes;
	return r.status;
}

/* A status, JUKEBOX retried for up to WINDOW_MS (as a client does). */
static int create_retry(int i, const nfs_fh3 *dir, const char *name)
{
	uint64_t t0 = e2e_now_ms();
	int st;

	while ((st = create(i, dir, name, GUARDED, NULL)) == NFS3ERR_JUKEBOX &&
	       e2e_now_ms() - t0 < WINDOW_MS)
		usleep(20 * 1000);
	return st;
}

/*
 * A name made on one gateway, removed on another, made again on the
 * third, round the three, ten times: each CREATE (GUARDED) goes through
 * (a record deleted elsewhere is absent here too, not a newer version
 * that every later change of it would be stale against).
 */
static void test_name_again(void)
{
	nfs_fh3 d[NGW];

	E2E_STATUS("MKDIR again", mkdir_on(0, &root[0], "again", &d[0]),
		   NFS3_OK);
	for (int i = 1; i < NGW; i++) {
		E2E_REQUIRE(wait_lookup(i, &root[i], "again", NFS3_OK) >= 0,
			    "again/ on gateway %d", i);
		E2E_STATUS("LOOKUP again", lookup(i, &root[i], "again", &d[i]),
			   NFS3_OK);
	}
	for (int r = 0; r < 10; r++) {
		/* Made next on a gateway that did not remove it. */
		int a = r % NGW, b = (r + 2) % NGW;
		REMOVE3res res;

		E2E_STATUS("CREATE on a", create_retry(a, &d[a], "f"), NFS3_OK);
		E2E_REQUIRE(wait_lookup(b, &d[b], "f", NFS3_OK) >= 0,
			    "round %d: f on gateway %d", r, b);
		E2E_REQUIRE(!e2e_nfs3_remove(nfs[b], &d[b], "f", &res),
			    "REMOVE");
		E2E_STATUS("REMOVE on b", res.status, NFS3_OK);
		/* Gone everywhere (each replica applies the remove within
		 * its lag; the next round creates on another gateway). */
		for (int g = 0; g < NGW; g++)
			E2E_REQUIRE(wait_lookup(g, &d[g], "f", NFS3ERR_NOENT) >=
					    0,
				    "round %d: f gone on gateway %d", r, g);
	}
	E2E_STATUS("CREATE at the end", create_retry(0, &d[0], "f"), NFS3_OK);
}

/* A handle from A is the same on B and C, and STALE on all once gone. */
static void test_handles(void)
{
	nfs_fh3 a, b, c;

	E2E_STATUS("CREATE h on A", create(0, &root[0], "h", GUARDED, &a),
		   NFS3_OK);
	E2E_REQUIRE(wait_lookup(1, &root[1], "h", NFS3_OK) >= 0,
		    "h not on B within %d ms", WINDOW_MS);
	E2E_STATUS("LOOKUP h on B", lookup(1, &root[1], "h", &b), NFS3_OK);
	E2E_STATUS("LOOKUP h on C", lookup(2, &root[2], "h", &c), NFS3_OK);
	E2E_CHECK(e2e_fh_equal(&a, &b) && e2e_fh_equal(&a, &c),
		  "the handles of h differ between gateways");
	E2E_CHECK(e2e_fh_equal(&root[0], &root[1]) &&
			  e2e_fh_equal(&root[0], &root[2]),
		  "the root handles differ between gateways");
	E2E_STATUS("GETATTR of A's handle on C", getattr_on(2, &a, NULL),
		   NFS3_OK);
	REMOVE3res rr;

	E2E_RPC(nfs[1], e2e_nfs3_remove(nfs[1], &root[1], "h", &rr));
	E2E_STATUS("REMOVE h on B", rr.status, NFS3_OK);
	E2E_CHECK(wait_lookup(0, &root[0], "h", NFS3ERR_NOENT) >= 0 &&
			  wait_lookup(2, &root[2], "h", NFS3ERR_NOENT) >= 0,
		  "h still there on A or C after %d ms", WINDOW_MS);
	E2E_STATUS("GETATTR of the removed h on A", getattr_on(0, &a, NULL),
		   NFS3ERR_STALE);
	E2E_STATUS("GETATTR of the removed h on C", getattr_on(2, &c, NULL),
		   NFS3ERR_STALE);
}

/* Written and COMMITted through A: the same bytes, size and mtime on B. */
static void test_write_a_read_b(void)
{
	size_t len = 3 * 1024 * 1024 + 12345;
	char *data = malloc(len), *back = malloc(len);
	fattr3 fa = { 0 }, fb = { 0 };
	nfs_fh3 f, fbh;
	long got;

	E2E_REQUIRE(data && back, "malloc");
	e2e_fill(data, len, 42);
	E2E_STATUS("CREATE big on A", create(0, &root[0], "big", GUARDED, &f),
		   NFS3_OK);
	for (size_t off = 0; off < len; off += 1u << 20) {
		uint32_t n = len - off > (1u << 20) ? 1u << 20
						    : (uint32_t)(len - off);

		E2E_STATUS("WRITE big on A",
			   write_on(0, &f, off, data + off, n, UNSTABLE),
			   NFS3_OK);
	}
	E2E_STATUS("COMMIT big on A", commit_on(0, &f), NFS3_OK);
	E2E_STATUS("GETATTR big on A", getattr_on(0, &f, &fa), NFS3_OK);
	E2E_REQUIRE(wait_lookup(1, &root[1], "big", NFS3_OK) >= 0,
		    "big not on B");
	/* Close-to-open: B's next GETATTR/open sees A's COMMIT. */
	uint64_t t0 = e2e_now_ms();

	do {
		E2E_STATUS("LOOKUP big on B", lookup(1, &root[1], "big", &fbh),
			   NFS3_OK);
		E2E_STATUS("GETATTR big on B", getattr_on(1, &fbh, &fb),
			   NFS3_OK);
	} while (fb.size != len && e2e_now_ms() - t0 < WINDOW_MS &&
		 !usleep(10000));
	E2E_CHECK(fb.size == len && fb.size == fa.size,
		  "size on B %llu, on A %llu, written %zu",
		  (unsigned long long)fb.size, (unsigned long long)fa.size,
		  len);
	E2E_CHECK(fb.mtime.seconds == fa.mtime.seconds &&
			  fb.mtime.nseconds == fa.mtime.nseconds,
		  "mtime differs between A and B");
	got = read_all(1, &fbh, back, len);
	E2E_CHECK(got == (long)len && !memcmp(data, back, len),
		  "B read %ld bytes, not what A wrote", got);
	/* C too, once the window passed for it (it may lag B). */
	t0 = e2e_now_ms();
	while (getattr_on(2, &fbh, &fb) == NFS3_OK && fb.size != len &&
	       e2e_now_ms() - t0 < WINDOW_MS)
		usleep(10000);
	got = read_all(2, &fbh, back, len);
	E2E_CHECK(got == (long)len && !memcmp(data, back, len),
		  "C read %ld bytes, not what A wrote", got);
	free(data);
	free(back);
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return (x > y) - (x < y);
}

/*
 * Changes on one gateway show on another within the window: creates,
 * renames, mode changes and removes, each timed (median and worst
 * printed; bench/ has the careful measurement).
 */
static void test_visibility(void)
{
	enum { N = 40 };
	long t[4 * N];
	int n = 0;
	nfs_fh3 d;

	E2E_STATUS("MKDIR vis on C", mkdir_on(2, &root[2], "vis", &d), NFS3_OK);
	E2E_REQUIRE(wait_lookup(0, &root[0], "vis", NFS3_OK) >= 0,
		    "vis not on A");
	for (int i = 0; i < N; i++) {
		char a[32], b[32];
		nfs_fh3 f;
		long ms;
		int from = i % NGW, to = (i + 1) % NGW;
		RENAME3res rr;
		REMOVE3res rm;
		SETATTR3args sa = { 0 };
		SETATTR3res sr;
		fattr3 at = { 0 };

		snprintf(a, sizeof(a), "v%d", i);
		snprintf(b, sizeof(b), "w%d", i);
		E2E_STATUS("CREATE", create(from, &d, a, GUARDED, &f), NFS3_OK);
		ms = wait_lookup(to, &d, a, NFS3_OK);
		E2E_CHECK(ms >= 0, "create of %s not seen", a);
		t[n++] = ms;
		E2E_RPC(nfs[from],
			e2e_nfs3_rename(nfs[from], &d, a, &d, b, &rr));
		E2E_STATUS("RENAME", rr.status, NFS3_OK);
		ms = wait_lookup(to, &d, b, NFS3_OK);
		E2E_CHECK(ms >= 0 && lookup(to, &d, a, NULL) == NFS3ERR_NOENT,
			  "rename of %s not seen whole", a);
		t[n++] = ms;
		sa.object = f;
		sa.new_attributes = e2e_sattr_mode(0600);
		E2E_RPC(nfs[from], e2e_nfs3_setattr(nfs[from], &sa, &sr));
		E2E_STATUS("SETATTR", sr.status, NFS3_OK);
		uint64_t t0 = e2e_now_ms();

		while (getattr_on(to, &f, &at) == NFS3_OK &&
		       (at.mode & 07777) != 0600 &&
		       e2e_now_ms() - t0 < WINDOW_MS)
			usleep(2000);
		E2E_CHECK((at.mode & 07777) == 0600, "mode of %s not seen", b);
		t[n++] = (long)(e2e_now_ms() - t0);
		E2E_RPC(nfs[from], e2e_nfs3_remove(nfs[from], &d, b, &rm));
		E2E_STATUS("REMOVE", rm.status, NFS3_OK);
		ms = wait_lookup(to, &d, b, NFS3ERR_NOENT);
		E2E_CHECK(ms >= 0, "remove of %s not seen", b);
		t[n++] = ms;
	}
	qsort(t, (size_t)n, sizeof(t[0]), cmp_long);
	fprintf(stderr,
		"  visibility on another gateway: median %ld ms, "
		"p99 %ld ms, worst %ld ms (%d changes, polled every 2 ms)\n",
		t[n / 2], t[n * 99 / 100], t[n - 1], n);
}

struct racer {
	int gw;
	const nfs_fh3 *dir;
	char name[32];
	pthread_barrier_t *bar;
	int status;
	int mkdir;
	const char *from, *to; /* a rename instead */
	const nfs_fh3 *tdir;
};

static void *race(void *p)
{
	struct racer *r = p;

	pthread_barrier_wait(r->bar);
	if (r->from) {
		RENAME3res rr;

		r->status = e2e_nfs3_rename(nfs[r->gw], r->dir, r->from,
					    r->tdir, r->to, &rr)
				    ? -1
				    : (int)rr.status;
	} else if (r->mkdir) {
		r->status = mkdir_on(r->gw, r->dir, r->name, NULL);
	} else {
		r->status = create(r->gw, r->dir, r->name, GUARDED, NULL);
	}
	return NULL;
}

/* Two gateways CREATE (or MKDIR) one name at once: exactly one wins. */
static void test_create_race(void)
{
	pthread_barrier_t bar;
	nfs_fh3 d;
	int won = 0;

	E2E_STATUS("MKDIR race on A", mkdir_on(0, &root[0], "race", &d),
		   NFS3_OK);
	E2E_REQUIRE(wait_lookup(1, &root[1], "race", NFS3_OK) >= 0 &&
			    wait_lookup(2, &root[2], "race", NFS3_OK) >= 0,
		    "race not everywhere");
	pthread_barrier_init(&bar, NULL, 2);
	for (int i = 0; i < 20; i++) {
		struct racer r[2];
		pthread_t t[2];

		for (int k = 0; k < 2; k++) {
			r[k] = (struct racer){ .gw = (i + k) % NGW,
					       .dir = &d,
					       .bar = &bar,
					       .mkdir = i % 2 };
			snprintf(r[k].name, sizeof(r[k].name), "n%d", i);
			pthread_create(&t[k], NULL, race, &r[k]);
		}
		for (int k = 0; k < 2; k++)
			pthread_join(t[k], NULL);
		int ok = (r[0].status == NFS3_OK) + (r[1].status == NFS3_OK);
		int exist = (r[0].status == NFS3ERR_EXIST) +
			    (r[1].status == NFS3ERR_EXIST);

		E2E_CHECK(ok == 1 && exist == 1, "round %d: %s on %s, %s on %s",
			  i, e2e_nfsstat(r[0].status), names[r[0].gw],
			  e2e_nfsstat(r[1].status), names[r[1].gw]);
		won += ok == 1;
	}
	pthread_barrier_destroy(&bar);
	E2E_CHECK(won == 20, "%d of 20 races had one winner", won);
}

/*
 * x and y, side by side; A moves x into y while B moves y into x: at
 * most one succeeds (the other would make a cycle: EINVAL, or finds its
 * source gone), and both stay reachable from the root exactly once.
 */
static void test_rename_cycle(void)
{
	pthread_barrier_t bar;

	pthread_barrier_init(&bar, NULL, 2);
	for (int i = 0; i < 10; i++) {
		char x[16], y[16];
		nfs_fh3 hx, hy, hx1, hy1;
		struct racer r[2];
		pthread_t t[2];

		snprintf(x, sizeof(x), "x%d", i);
		snprintf(y, sizeof(y), "y%d", i);
		E2E_STATUS("MKDIR x", mkdir_on(0, &root[0], x, &hx), NFS3_OK);
		E2E_STATUS("MKDIR y", mkdir_on(0, &root[0], y, &hy), NFS3_OK);
		E2E_REQUIRE(wait_lookup(1, &root[1], y, NFS3_OK) >= 0 &&
				    lookup(1, &root[1], x, &hx1) == NFS3_OK &&
				    lookup(1, &root[1], y, &hy1) == NFS3_OK,
			    "x, y not on B");
		r[0] = (struct racer){ .gw = 0,
				       .dir = &root[0],
				       .from = x,
				       .to = x,
				       .tdir = &hy,
				       .bar = &bar };
		r[1] = (struct racer){ .gw = 1,
				       .dir = &root[1],
				       .from = y,
				       .to = y,
				       .tdir = &hx1,
				       .bar = &bar };
		for (int k = 0; k < 2; k++)
			pthread_create(&t[k], NULL, race, &r[k]);
		for (int k = 0; k < 2; k++)
			pthread_join(t[k], NULL);
		E2E_CHECK(!(r[0].status == NFS3_OK && r[1].status == NFS3_OK),
			  "round %d: both crossing renames succeeded", i);
		/* Exactly one of them is still at the root, the other in it. */
		usleep(100 * 1000);
		int at_root = (lookup(2, &root[2], x, NULL) == NFS3_OK) +
			      (lookup(2, &root[2], y, NULL) == NFS3_OK);
		int nested = (lookup(2, &hy, x, NULL) == NFS3_OK) +
			     (lookup(2, &hx, y, NULL) == NFS3_OK);

		E2E_CHECK(at_root + nested == 2 && nested <= 1,
			  "round %d: %d at the root, %d nested (lost or cycle)",
			  i, at_root, nested);
	}
	pthread_barrier_destroy(&bar);
}

/*
 * One writer: a file A changed and did not COMMIT is A's; B's WRITE to
 * it answers JUKEBOX (and asks A to upload and let go), and goes through
 * once A has; the bytes end as both wrote them, in order.
 */
static void test_one_writer(void)
{
	nfs_fh3 f, fb;
	char buf[64];
	long got;
	int st = -1;

	E2E_STATUS("CREATE own on A", create(0, &root[0], "own", GUARDED, &f),
		   NFS3_OK);
	E2E_STATUS("WRITE own on A", write_on(0, &f, 0, "aaaa", 4, UNSTABLE),
		   NFS3_OK);
	E2E_REQUIRE(wait_lookup(1, &root[1], "own", NFS3_OK) >= 0 &&
			    lookup(1, &root[1], "own", &fb) == NFS3_OK,
		    "own not on B");
	E2E_STATUS("WRITE own on B while A holds it",
		   write_on(1, &fb, 4, "bbbb", 4, FILE_SYNC), NFS3ERR_JUKEBOX);
	/* A was asked to upload and let go: B gets in (a client retries). */
	uint64_t t0 = e2e_now_ms();

	while (e2e_now_ms() - t0 < 15000 &&
	       (st = write_on(1, &fb, 4, "bbbb", 4, FILE_SYNC)) ==
		       NFS3ERR_JUKEBOX)
		usleep(100 * 1000);
	E2E_STATUS("WRITE own on B after A let go", st, NFS3_OK);
	E2E_STATUS("COMMIT own on B", commit_on(1, &fb), NFS3_OK);
	t0 = e2e_now_ms();
	do
		got = read_all(2, &fb, buf, sizeof(buf));
	while ((got != 8 || memcmp(buf, "aaaabbbb", 8)) &&
	       e2e_now_ms() - t0 < WINDOW_MS && !usleep(20000));
	fattr3 fc = { 0 };

	getattr_on(2, &fb, &fc);
	E2E_CHECK(got == 8 && !memcmp(buf, "aaaabbbb", 8),
		  "C read %ld bytes '%.*s' (size %llu), want aaaabbbb", got,
		  got > 0 ? (int)got : 0, buf, (unsigned long long)fc.size);
}

/*
 * Directories made on A and removed on B before A wrote their markers:
 * A's record goes with B's change, and A's note that it had a marker to
 * write stayed, so A's syncer skipped it for ever and `flush` on A gave
 * up ("files are changed without pause"): found by the fault campaign
 * (issue 48).  A flush on A now finishes.
 */
static void test_removed_elsewhere(void)
{
	char name[32], out[512];
	int made = 0;

	for (int k = 0; k < 20; k++) {
		nfs_fh3 d;
		RMDIR3res r;

		snprintf(name, sizeof(name), "gone%d", k);
		if (mkdir_on(0, &root[0], name, &d) != NFS3_OK)
			continue;
		if (wait_lookup(1, &root[1], name, NFS3_OK) < 0)
			continue;
		E2E_RPC(nfs[1], e2e_nfs3_rmdir(nfs[1], &root[1], name, &r));
		made += r.status == NFS3_OK;
	}
	E2E_REQUIRE(made > 0, "no directory made on A and removed on B");
	uint64_t t0 = e2e_now_ms();
	int rc = e2e_ctl(&gw[0], "flush", out, sizeof(out));

	E2E_CHECK(rc == 0, "flush on A after %d directories removed on B: %s",
		  made, out);
	E2E_CHECK(e2e_now_ms() - t0 < 20000, "flush on A took %llu ms",
		  (unsigned long long)(e2e_now_ms() - t0));
}

/* A (killed or stopped) started again on its state, its client with it.
 * 0 or -1. */
static int restart_a(void)
{
	if (e2e_gw_restart(&gw[0]))
		return -1;
	nfs[0] = e2e_rpc_open(gw[0].nfs_port, NFS_PROGRAM, NFS_V3);
	return nfs[0] && !e2e_root_fh(nfs[0], &gw[0], &root[0]) ? 0 : -1;
}

/* The write id (x-amz-meta-mapfs-wid, user.mapfs.wid) of the store's
 * object at path; "" if none. */
static void store_wid(const char *path, char *out, size_t cap)
{
	out[0] = '\0';
	if (e2e_backend_is_s3()) {
		struct e2e_s3_resp r;
		char key[512];

		e2e_s3_key(&gw[0], path, key, sizeof(key));
		if (!e2e_s3_request("HEAD", key, NULL, NULL, 0, NULL, &r)) {
			if (e2e_s3_header(&r, "x-amz-meta-mapfs-wid", out, cap))
				out[0] = '\0';
			e2e_s3_resp_free(&r);
		}
		return;
	}
	char fp[E2E_PATH_MAX * 2];
	ssize_t n;

	snprintf(fp, sizeof(fp), "%s/%s", gw[0].store, path);
	n = getxattr(fp, "user.mapfs.wid", out, cap - 1);
	out[n > 0 ? n : 0] = '\0';
}

/* An object at path with body and write id wid, as a gateway's upload
 * leaves it.  0 or -1. */
static int store_put_wid(const char *path, const char *body, const char *wid)
{
	if (e2e_backend_is_s3()) {
		struct e2e_s3_resp r;
		char key[512], hdr[128];
		const char *hdrs[] = { hdr, NULL };
		int rc;

		snprintf(hdr, sizeof(hdr), "x-amz-meta-mapfs-wid: %s", wid);
		e2e_s3_key(&gw[0], path, key, sizeof(key));
		if (e2e_s3_request("PUT", key, NULL, body, strlen(body), hdrs,
				   &r))
			return -1;
		rc = r.code == 200 ? 0 : -1;
		e2e_s3_resp_free(&r);
		return rc;
	}
	char fp[E2E_PATH_MAX * 2];
	FILE *f;

	snprintf(fp, sizeof(fp), "%s/%s", gw[0].store, path);
	f = fopen(fp, "w");
	if (!f)
		return -1;
	fputs(body, f);
	fclose(f);
	return setxattr(fp, "user.mapfs.wid", wid, strlen(wid), 0);
}

/*
 * A's upload of a file landed and the commit that says so did not (A cut
 * off from the database, or killed in between), and A is gone: the file
 * taken over is that object, A's own upload of it.  Before, the taker
 * found the record never uploaded, sent zeros, met A's object and moved
 * the file aside as a conflict with its own upload: the client's name
 * then showed nothing it had made (found by the fault campaign, issue
 * 48).  A's landed upload is made here by hand, as A would have.
 */
static void test_takeover_finds_upload(void)
{
	static const char body[] = "the owner's upload, commit lost";
	char wid[128], mine[160], out[4096], buf[64];
	nfs_fh3 c, f, fb;
	fattr3 fa = { 0 };
	long got = -1;
	uint64_t t0;

	/* A COMMITted file of A's: its object tells the namespace's id. */
	E2E_STATUS("CREATE widref on A",
		   create(0, &root[0], "widref", GUARDED, &c), NFS3_OK);
	E2E_STATUS("WRITE widref on A (FILE_SYNC)",
		   write_on(0, &c, 0, "x", 1, FILE_SYNC), NFS3_OK);
	store_wid("widref", wid, sizeof(wid));
	char *dash = strchr(wid, '-'), *last = strrchr(wid, '-');

	E2E_REQUIRE(dash && last && last > dash, "widref's write id '%s'", wid);
	E2E_STATUS("CREATE landed on A",
		   create(0, &root[0], "landed", GUARDED, &f), NFS3_OK);
	E2E_REQUIRE(getattr_on(0, &f, &fa) == NFS3_OK, "GETATTR landed");
	E2E_REQUIRE(wait_lookup(1, &root[1], "landed", NFS3_OK) >= 0 &&
			    lookup(1, &root[1], "landed", &fb) == NFS3_OK,
		    "landed not on B");
	E2E_REQUIRE(e2e_gw_kill9(&gw[0]) == 0, "kill -9 A");
	e2e_rpc_close(nfs[0]);
	nfs[0] = NULL;
	/* A's upload of "landed": node 1's write id, this namespace and
	 * inode, a hash of its own. */
	const char *second = strchr(dash + 1, '-'); /* after the nsid */

	snprintf(mine, sizeof(mine), "%.*s%" PRIx64 "-00000000000000aa",
		 (int)(second - wid) + 1, wid, (uint64_t)fa.fileid);
	E2E_REQUIRE(store_put_wid("landed", body, mine) == 0, "PUT landed");
	t0 = e2e_now_ms();
	do
		got = read_all(1, &fb, buf, sizeof(buf));
	while ((got != (long)strlen(body) || memcmp(buf, body, (size_t)got)) &&
	       e2e_now_ms() - t0 < 30000 && !usleep(200 * 1000));
	E2E_CHECK(got == (long)strlen(body) && !memcmp(buf, body, (size_t)got),
		  "B reads %ld bytes '%.*s' of landed, want A's upload", got,
		  got > 0 ? (int)got : 0, buf);
	E2E_CHECK(e2e_ctl(&gw[1], "flush", out, sizeof(out)) == 0 &&
			  e2e_ctl(&gw[2], "flush", out, sizeof(out)) == 0,
		  "flush: %s", out);
	E2E_CHECK(e2e_gw_log_count(&gw[1], "landed.conflict") == 0 &&
			  e2e_gw_log_count(&gw[2], "landed.conflict") == 0,
		  "landed moved aside as a conflict with its own upload");
	E2E_CHECK(lookup(1, &root[1], "landed", &fb) == NFS3_OK,
		  "the name landed is gone");
	E2E_REQUIRE(restart_a() == 0, "A back");
}

/* A started again with its store requests through a fault proxy started
 * here (fp), or (fp NULL) straight to the store again.  0 or -1. */
static int restart_a_via(struct fault_proxy *fp)
{
	e2e_rpc_close(nfs[0]);
	nfs[0] = NULL;
	if (gw[0].pid && e2e_gw_stop(&gw[0]))
		return -1;
	if (fp) {
		const char *port = strrchr(e2e_s3_server()->endpoint, ':');

		if (fault_proxy_start(fp, atoi(port + 1), "pass", 48))
			return -1;
	}
	gw[0].opts.s3_endpoint = fp ? fp->endpoint : NULL;
	return restart_a();
}

/* Poll until the store's count of objects under path is want, up to ms.
 * The last count. */
static int wait_store_count(const char *path, int want, uint32_t ms)
{
	uint64_t t0 = e2e_now_ms();
	int n;

	while ((n = e2e_store_count(&gw[1], path)) != want &&
	       e2e_now_ms() - t0 < ms)
		usleep(100 * 1000);
	return n;
}

/* How many of the objects PREFIX0 .. PREFIX(n-1) are in the store (n up
 * to 10: on S3 a name is a prefix of its key). */
static int store_count_each(const char *prefix, int n)
{
	char name[64];
	int got = 0;

	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "%s%d", prefix, i);
		got += e2e_store_count(&gw[1], name) > 0;
	}
	return got;
}

/* Flush every gateway; 0, or -1 with the reason in out. */
static int flush_all(char *out, size_t cap)
{
	for (int i = 0; i < NGW; i++)
		if (gw[i].pid && e2e_ctl(&gw[i], "flush", out, cap))
			return -1;
	return 0;
}

/*
 * A link made on A whose store copy could not run yet (A's store
 * requests fail), removed through B meanwhile: B's delete of the name's
 * key ran at once, and A's copy, once its store answers, must not put
 * the removed name's object back (it had nothing to delete any more: no
 * name of the file is at that key, nothing copies from it).  Before, it
 * did, for good: an object no name has, and the next listing of the
 * directory took it back as a file (the fault campaign, issue 48, seed 3).
 */
static void test_link_copy_after_remove(void)
{
	struct fault_proxy fp;
	REMOVE3res rr;
	char out[512];

	nfs_fh3 f;
	LINK3res lr;

	E2E_REQUIRE(restart_a_via(&fp) == 0, "A through a proxy");
	E2E_STATUS("CREATE cpsrc2 on A",
		   create(0, &root[0], "cpsrc2", GUARDED, &f), NFS3_OK);
	E2E_STATUS("WRITE cpsrc2 (FILE_SYNC)",
		   write_on(0, &f, 0, "cpsrc2", 6, FILE_SYNC), NFS3_OK);
	E2E_REQUIRE(wait_store_count("cpsrc2", 1, 10000) == 1,
		    "cpsrc2 not in the store");
	E2E_CHECK(fault_proxy_mode(&fp, "reset 1.0") == 0, "cut A's store");
	E2E_RPC(nfs[0], e2e_nfs3_link(nfs[0], &f, &root[0], "cplink2", &lr));
	E2E_STATUS("LINK cpsrc2 cplink2 on A", lr.status, NFS3_OK);
	E2E_CHECK(wait_lookup(1, &root[1], "cplink2", NFS3_OK) >= 0,
		  "cplink2 not on B");
	E2E_RPC(nfs[1], e2e_nfs3_remove(nfs[1], &root[1], "cplink2", &rr));
	E2E_STATUS("REMOVE cplink2 on B", rr.status, NFS3_OK);
	E2E_CHECK(e2e_ctl(&gw[1], "flush", out, sizeof(out)) == 0,
		  "flush on B: %s", out);
	/* A's store answers again: its queued copy runs now. */
	E2E_CHECK(fault_proxy_mode(&fp, "pass") == 0, "A's store back");
	E2E_CHECK(flush_all(out, sizeof(out)) == 0, "flush: %s", out);
	int n = e2e_store_count(&gw[1], "cplink2");

	E2E_CHECK(n == 0,
		  "the removed link cplink2 is in the store again (%d "
		  "objects): A's copy ran after B's delete",
		  n);
	E2E_CHECK(e2e_store_count(&gw[1], "cpsrc2") == 1,
		  "cpsrc2 is not in the store");
	E2E_CHECK(lookup(0, &root[0], "cplink2", NULL) == NFS3ERR_NOENT &&
			  lookup(1, &root[1], "cplink2", NULL) == NFS3ERR_NOENT,
		  "cplink2 is back in the namespace");
	E2E_REQUIRE(restart_a_via(NULL) == 0, "A straight to the store");
	fault_proxy_stop(&fp);
}

/*
 * A second name made and at once renamed, before the LINK's store copy
 * ran (and for half of the files the first name then removed): the name
 * it has now gets its object, the one it had none, and reads back.
 * Before, a rename queued nothing for a name whose object was not there
 * yet, and the copy went to the old name: the file's name had no object
 * (the fault campaign, issue 48, seed 3, where the copy waited for a
 * paused node's queue).
 */
static void test_link_renamed_at_once(void)
{
	char out[512], from[32], ln[32], to[32];
	RENAME3res rn;
	REMOVE3res rr;
	LINK3res lr;
	nfs_fh3 f;

	for (int i = 0; i < 10; i++) {
		snprintf(from, sizeof(from), "lo%d", i);
		snprintf(ln, sizeof(ln), "ll%d", i);
		snprintf(to, sizeof(to), "lm%d", i);
		E2E_STATUS("CREATE on A",
			   create(0, &root[0], from, GUARDED, &f), NFS3_OK);
		E2E_STATUS("WRITE (FILE_SYNC)",
			   write_on(0, &f, 0, from, strlen(from), FILE_SYNC),
			   NFS3_OK);
		E2E_RPC(nfs[0], e2e_nfs3_link(nfs[0], &f, &root[0], ln, &lr));
		E2E_STATUS("LINK on A", lr.status, NFS3_OK);
		E2E_RPC(nfs[0], e2e_nfs3_rename(nfs[0], &root[0], ln, &root[0],
						to, &rn));
		E2E_STATUS("RENAME the link on A", rn.status, NFS3_OK);
		if (i % 2) {
			/* The renamed link is the file's only name now. */
			E2E_RPC(nfs[0],
				e2e_nfs3_remove(nfs[0], &root[0], from, &rr));
			E2E_STATUS("REMOVE the first name on A", rr.status,
				   NFS3_OK);
		}
	}
	E2E_CHECK(flush_all(out, sizeof(out)) == 0, "flush: %s", out);
	for (int i = 0; i < 10; i++) {
		char want[32], buf[64];
		nfs_fh3 fb;
		long got = -1;

		snprintf(to, sizeof(to), "lm%d", i);
		snprintf(want, sizeof(want), "lo%d", i);
		if (lookup(1, &root[1], to, &fb) == NFS3_OK)
			got = read_all(1, &fb, buf, sizeof(buf));
		E2E_CHECK(got == (long)strlen(want) &&
				  !memcmp(buf, want, (size_t)got),
			  "%s reads %ld bytes on B, want '%s'", to, got, want);
	}
	E2E_CHECK(store_count_each("lm", 10) == 10,
		  "%d of the 10 renamed links have their object",
		  store_count_each("lm", 10));
	E2E_CHECK(store_count_each("ll", 10) == 0,
		  "%d objects at the links' old names",
		  store_count_each("ll", 10));
	E2E_CHECK(store_count_each("lo", 10) == 5,
		  "%d of the 5 first names kept have their object (and the "
		  "5 removed none)",
		  store_count_each("lo", 10));
}

/*
 * A stored file renamed and at once removed: the rename's copy finds the
 * file gone and has nothing to do, and the flush finishes with neither
 * name in the store.  (While this session's fence was being built, such
 * a copy failed for good on the missing inode, and every later flush gave
 * up: found by the fault campaign.)
 */
static void test_renamed_then_removed(void)
{
	char out[512], from[32], to[32];
	RENAME3res rn;
	REMOVE3res rr;
	nfs_fh3 f;

	for (int i = 0; i < 10; i++) {
		snprintf(from, sizeof(from), "rr%d", i);
		snprintf(to, sizeof(to), "rs%d", i);
		E2E_STATUS("CREATE on A",
			   create(0, &root[0], from, GUARDED, &f), NFS3_OK);
		E2E_STATUS("WRITE (FILE_SYNC)",
			   write_on(0, &f, 0, from, strlen(from), FILE_SYNC),
			   NFS3_OK);
		E2E_RPC(nfs[0], e2e_nfs3_rename(nfs[0], &root[0], from,
						&root[0], to, &rn));
		E2E_STATUS("RENAME on A", rn.status, NFS3_OK);
		E2E_RPC(nfs[0], e2e_nfs3_remove(nfs[0], &root[0], to, &rr));
		E2E_STATUS("REMOVE on A", rr.status, NFS3_OK);
	}
	E2E_CHECK(flush_all(out, sizeof(out)) == 0, "flush: %s", out);
	E2E_CHECK(store_count_each("rr", 10) == 0 &&
			  store_count_each("rs", 10) == 0,
		  "objects left: %d rr*, %d rs*", store_count_each("rr", 10),
		  store_count_each("rs", 10));
}

/*
 * A link made on A whose store copy could not run yet (A's store
 * requests fail), and the file's first name removed through B: B's
 * delete of that key waits for A's copy from it, which came first (the
 * queues of two nodes keep their commits' order where they touch a key
 * in common).  Before, B's delete ran at once, A's copy then found no
 * source and the link's object was never made: a name with no object,
 * its bytes gone from the store (the fault campaign, issue 48, seed 3).
 */
static void test_link_copy_before_remove(void)
{
	struct fault_proxy fp;
	REMOVE3res rr;
	LINK3res lr;
	char out[512], buf[64];
	nfs_fh3 f, g;
	long got;

	E2E_REQUIRE(restart_a_via(&fp) == 0, "A through a proxy");
	E2E_STATUS("CREATE orig on A", create(0, &root[0], "orig", GUARDED, &f),
		   NFS3_OK);
	E2E_STATUS("WRITE orig (FILE_SYNC)",
		   write_on(0, &f, 0, "orig's bytes", 12, FILE_SYNC), NFS3_OK);
	E2E_REQUIRE(wait_store_count("orig", 1, 10000) == 1,
		    "orig not in the store");
	E2E_CHECK(fault_proxy_mode(&fp, "reset 1.0") == 0, "cut A's store");
	E2E_RPC(nfs[0], e2e_nfs3_link(nfs[0], &f, &root[0], "linked", &lr));
	E2E_STATUS("LINK orig linked on A", lr.status, NFS3_OK);
	E2E_CHECK(wait_lookup(1, &root[1], "linked", NFS3_OK) >= 0,
		  "linked not on B");
	E2E_RPC(nfs[1], e2e_nfs3_remove(nfs[1], &root[1], "orig", &rr));
	E2E_STATUS("REMOVE orig on B", rr.status, NFS3_OK);
	usleep(1500 * 1000); /* B's passes: its delete must wait */
	E2E_CHECK(e2e_store_count(&gw[1], "orig") == 1,
		  "B deleted orig's object before A's copy from it ran");
	E2E_CHECK(fault_proxy_mode(&fp, "pass") == 0, "A's store back");
	E2E_CHECK(flush_all(out, sizeof(out)) == 0, "flush: %s", out);
	E2E_CHECK(wait_store_count("orig", 0, 10000) == 0,
		  "orig's object is still in the store");
	E2E_CHECK(e2e_store_count(&gw[1], "linked") == 1,
		  "the link's object was never made");
	E2E_REQUIRE(lookup(1, &root[1], "linked", &g) == NFS3_OK,
		    "LOOKUP linked on B");
	got = read_all(1, &g, buf, sizeof(buf));
	E2E_CHECK(got == 12 && !memcmp(buf, "orig's bytes", 12),
		  "linked reads %ld bytes on B", got);
	E2E_REQUIRE(restart_a_via(NULL) == 0, "A straight to the store");
	fault_proxy_stop(&fp);
}

/*
 * A is stopped (SIGSTOP) past its lease with a store request of its
 * queue on its way (held up in the network): the others take A's queue
 * over only once its fence is over (two leases past A's claim), one of
 * them, so A's request lands first; a second name A made and B removed
 * meanwhile stays removed.  Before, B and C both ran A's records as soon
 * as they saw A down, and A ran them again when it came back: two runs
 * of one record, in any order with the records after it, put removed
 * names back (the fault campaign, issue 48, seed 3).
 */
static void test_stopped_queue_fenced(void)
{
	struct fault_proxy fp;
	REMOVE3res rr;
	char out[512];
	nfs_fh3 f;
	LINK3res lr;
	int early = -1;

	E2E_REQUIRE(restart_a_via(&fp) == 0, "A through a proxy");
	E2E_STATUS("CREATE fsrc on A", create(0, &root[0], "fsrc", GUARDED, &f),
		   NFS3_OK);
	E2E_STATUS("WRITE fsrc (FILE_SYNC)",
		   write_on(0, &f, 0, "fsrc", 4, FILE_SYNC), NFS3_OK);
	E2E_REQUIRE(wait_lookup(1, &root[1], "fsrc", NFS3_OK) >= 0,
		    "fsrc not on B");
	/* A's copy of the new name goes out and is held up. */
	E2E_CHECK(fault_proxy_mode(&fp, "stall") == 0, "stall A's store");
	E2E_RPC(nfs[0], e2e_nfs3_link(nfs[0], &f, &root[0], "flink", &lr));
	E2E_STATUS("LINK fsrc flink on A", lr.status, NFS3_OK);
	E2E_REQUIRE(wait_lookup(1, &root[1], "flink", NFS3_OK) >= 0,
		    "flink not on B");
	usleep(600 * 1000); /* a pass or two of A's: the copy is sent */
	E2E_REQUIRE(kill(gw[0].pid, SIGSTOP) == 0, "SIGSTOP A");
	uint64_t t0 = e2e_now_ms();

	/* A's lease (3 s) runs out and the others see it; its fence holds
	 * for two leases more. */
	while (e2e_now_ms() - t0 < 6000) {
		if (early < 0 && e2e_store_count(&gw[1], "flink") > 0)
			early = (int)(e2e_now_ms() - t0);
		usleep(100 * 1000);
	}
	E2E_CHECK(early < 0,
		  "A's queued copy ran elsewhere %d ms after A stopped (lease "
		  "3 s), while A's own was on its way",
		  early);
	E2E_RPC(nfs[1], e2e_nfs3_remove(nfs[1], &root[1], "flink", &rr));
	E2E_STATUS("REMOVE flink on B", rr.status, NFS3_OK);
	/* A's request lands; A goes on. */
	E2E_CHECK(fault_proxy_mode(&fp, "pass") == 0, "A's store back");
	E2E_REQUIRE(kill(gw[0].pid, SIGCONT) == 0, "SIGCONT A");
	E2E_CHECK(flush_all(out, sizeof(out)) == 0, "flush: %s", out);
	int n = wait_store_count("flink", 0, 20000);

	E2E_CHECK(n == 0, "the removed name flink is in the store (%d)", n);
	E2E_CHECK(e2e_store_count(&gw[1], "fsrc") == 1,
		  "fsrc is not in the store");
	for (int i = 0; i < NGW; i++)
		E2E_CHECK(e2e_gw_log_count(&gw[i], "flink.conflict") == 0 &&
				  e2e_gw_log_count(&gw[i], "fsrc.conflict") ==
					  0,
			  "a conflict copy on gateway %d", i);
	E2E_REQUIRE(restart_a_via(NULL) == 0, "A straight to the store");
	fault_proxy_stop(&fp);
}

/*
 * A is killed -9 and stays dead.  Once its lease ran out the others take
 * its files over: what reached the store (its stable WRITE: with the
 * default --cluster-commit store, in the store before the reply) is the
 * file; what it had not made stable (an UNSTABLE write, a file never
 * uploaded) is gone, and B's client, whose verifier changed, would
 * resend it.  A's clients' writes go on through B.  When A comes back it
 * drops its stale changes and reads the file as B left it.
 */
static void test_kill_takeover(void)
{
	nfs_fh3 f, g, fb, gb;
	char buf[64];
	long got = 0;
	int st = -1;

	E2E_STATUS("CREATE crash on A",
		   create(0, &root[0], "crash", GUARDED, &f), NFS3_OK);
	E2E_STATUS("WRITE crash on A (FILE_SYNC)",
		   write_on(0, &f, 0, "stable-data", 11, FILE_SYNC), NFS3_OK);
	E2E_STATUS("WRITE crash on A (UNSTABLE, never committed)",
		   write_on(0, &f, 11, "+unstable", 9, UNSTABLE), NFS3_OK);
	E2E_STATUS("CREATE never on A",
		   create(0, &root[0], "never", GUARDED, &g), NFS3_OK);
	E2E_STATUS("WRITE never on A (UNSTABLE)",
		   write_on(0, &g, 0, "lost", 4, UNSTABLE), NFS3_OK);
	E2E_REQUIRE(wait_lookup(1, &root[1], "never", NFS3_OK) >= 0 &&
			    lookup(1, &root[1], "crash", &fb) == NFS3_OK &&
			    lookup(1, &root[1], "never", &gb) == NFS3_OK,
		    "crash and never not on B");
	/* A's handles outlive its connection's memory: A's client keeps
	 * them across the restart. */
	char fbuf[NFS3_FHSIZE], gbuf[NFS3_FHSIZE];

	E2E_REQUIRE(f.data.data_len <= sizeof(fbuf) &&
			    g.data.data_len <= sizeof(gbuf),
		    "handles too long");
	memcpy(fbuf, f.data.data_val, f.data.data_len);
	memcpy(gbuf, g.data.data_val, g.data.data_len);
	f.data.data_val = fbuf;
	g.data.data_val = gbuf;
	E2E_REQUIRE(e2e_gw_kill9(&gw[0]) == 0, "kill -9 A");
	e2e_rpc_close(nfs[0]);
	nfs[0] = NULL;
	uint64_t t0 = e2e_now_ms();

	while (e2e_now_ms() - t0 < 30000 &&
	       (st = write_on(1, &fb, 11, "+b", 2, FILE_SYNC)) ==
		       NFS3ERR_JUKEBOX)
		usleep(100 * 1000);
	E2E_STATUS("WRITE crash on B once A's lease ran out", st, NFS3_OK);
	fprintf(stderr,
		"  [B's WRITE of A's file went through %llu ms after "
		"the kill -9 (lease 3 s)]\n",
		(unsigned long long)(e2e_now_ms() - t0));
	got = read_all(1, &fb, buf, sizeof(buf));
	E2E_CHECK(got == 13 && !memcmp(buf, "stable-data+b", 13),
		  "B reads %ld bytes '%.*s', want stable-data+b", got,
		  got > 0 ? (int)got : 0, buf);
	t0 = e2e_now_ms();
	do
		got = read_all(1, &gb, buf, sizeof(buf));
	while (got == -NFS3ERR_JUKEBOX && e2e_now_ms() - t0 < 10000 &&
	       !usleep(100 * 1000));
	E2E_CHECK(got == 0,
		  "never on B: %ld bytes (nothing reached the "
		  "store)",
		  got);
	/* Taken over by B or C: from C, B waits for it to let go. */
	t0 = e2e_now_ms();
	while (e2e_now_ms() - t0 < 10000 &&
	       (st = write_on(1, &gb, 0, "new", 3, FILE_SYNC)) ==
		       NFS3ERR_JUKEBOX)
		usleep(100 * 1000);
	E2E_STATUS("WRITE never on B", st, NFS3_OK);
	E2E_CHECK(
		e2e_log_count(gw[1].log, "took over", false) +
				e2e_log_count(gw[2].log, "took over", false) >=
			2,
		"the takeovers are logged");

	E2E_REQUIRE(restart_a() == 0, "restart A, connect again");
	E2E_CHECK(e2e_log_count(gw[0].log, "was taken over", false) >= 2,
		  "A says its changes of crash and never were dropped");
	t0 = e2e_now_ms();
	do
		got = read_all(0, &f, buf, sizeof(buf));
	while ((got != 13 || memcmp(buf, "stable-data+b", 13)) &&
	       e2e_now_ms() - t0 < 10000 && !usleep(100 * 1000));
	E2E_CHECK(got == 13 && !memcmp(buf, "stable-data+b", 13),
		  "A reads %ld bytes '%.*s' of crash, want B's", got,
		  got > 0 ? (int)got : 0, buf);
	t0 = e2e_now_ms();
	do
		got = read_all(0, &g, buf, sizeof(buf));
	while ((got != 3 || memcmp(buf, "new", 3)) &&
	       e2e_now_ms() - t0 < 10000 && !usleep(100 * 1000));
	E2E_CHECK(got == 3 && !memcmp(buf, "new", 3),
		  "A reads %ld bytes of never, want B's 'new'", got);
}

/*
 * A renamed directory's store work outlives its gateway (issue 49): A
 * renames a directory of 200 files that are in the store (its queue:
 * 400 copies and deletes, shared in the database, numbered for A) and
 * is killed -9 at once; once its lease ran out a survivor runs A's queue
 * before its own, and the store holds every file under the new name and
 * none under the old.  Then A comes back.
 */
static void test_kill_queue_takeover(void)
{
	nfs_fh3 d, f;
	char name[32];
	int n_new = -1, n_old = -1;

	E2E_STATUS("MKDIR qd on A", mkdir_on(0, &root[0], "qd", &d), NFS3_OK);
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		E2E_STATUS("CREATE in qd", create(0, &d, name, GUARDED, &f),
			   NFS3_OK);
		/* FILE_SYNC: in the store before the reply (strict). */
		E2E_STATUS("WRITE in qd (FILE_SYNC)",
			   write_on(0, &f, 0, name, strlen(name), FILE_SYNC),
			   NFS3_OK);
	}
	E2E_REQUIRE(e2e_store_count(&gw[0], "qd/") == 200,
		    "the 200 files are not all in the store: %d",
		    e2e_store_count(&gw[0], "qd/"));
	RENAME3res rr;

	E2E_REQUIRE(e2e_nfs3_rename(nfs[0], &root[0], "qd", &root[0], "qe",
				    &rr) == 0 &&
			    rr.status == NFS3_OK,
		    "RENAME qd qe on A");
	E2E_REQUIRE(e2e_gw_kill9(&gw[0]) == 0, "kill -9 A");
	e2e_rpc_close(nfs[0]);
	nfs[0] = NULL;
	fprintf(stderr, "  [A killed with %d of 200 objects moved]\n",
		e2e_store_count(&gw[1], "qe/"));
	uint64_t t0 = e2e_now_ms();

	while (e2e_now_ms() - t0 < 60000) {
		n_new = e2e_store_count(&gw[1], "qe/");
		n_old = e2e_store_count(&gw[1], "qd/");
		if (n_new == 200 && n_old == 0)
			break;
		usleep(200 * 1000);
	}
	E2E_CHECK(n_new == 200 && n_old == 0,
		  "after A's death the store has %d under qe/ and %d under "
		  "qd/, want 200 and 0",
		  n_new, n_old);
	fprintf(stderr,
		"  [A's queue ran on a survivor: all moved %llu ms after "
		"the kill -9 (lease 3 s)]\n",
		(unsigned long long)(e2e_now_ms() - t0));
	E2E_STATUS("LOOKUP qe on B", lookup(1, &root[1], "qe", NULL), NFS3_OK);
	E2E_REQUIRE(restart_a() == 0, "restart A, connect again");
}

/*
 * A is killed -9 and comes back before its lease ran out for anyone to
 * notice: nothing was taken over, and what it had not uploaded (an
 * UNSTABLE write, not lost on its disk) goes up from its cache.
 */
static void test_kill_restart(void)
{
	nfs_fh3 f, fb;
	char buf[64];
	long got = 0;

	E2E_STATUS("CREATE quick on A",
		   create(0, &root[0], "quick", GUARDED, &f), NFS3_OK);
	E2E_STATUS("WRITE quick on A (UNSTABLE)",
		   write_on(0, &f, 0, "kept-on-disk", 12, UNSTABLE), NFS3_OK);
	E2E_REQUIRE(wait_lookup(1, &root[1], "quick", NFS3_OK) >= 0 &&
			    lookup(1, &root[1], "quick", &fb) == NFS3_OK,
		    "quick not on B");
	E2E_REQUIRE(e2e_gw_kill9(&gw[0]) == 0, "kill -9 A");
	e2e_rpc_close(nfs[0]);
	nfs[0] = NULL;
	E2E_REQUIRE(restart_a() == 0, "restart A, connect again");
	uint64_t t0 = e2e_now_ms();

	do
		got = read_all(1, &fb, buf, sizeof(buf));
	while ((got != 12 || memcmp(buf, "kept-on-disk", 12)) &&
	       e2e_now_ms() - t0 < 20000 && !usleep(100 * 1000));
	E2E_CHECK(got == 12 && !memcmp(buf, "kept-on-disk", 12),
		  "B reads %ld bytes '%.*s' after A came back", got,
		  got > 0 ? (int)got : 0, buf);
}

/* ---- kill -9 between the cluster's commit and the gateway's own ---------- */

enum { LB_DIRS = 4, LB_PER_DIR = 6, LB_MAX = 400 };

struct lb_thread {
	nfs_fh3 dir;
	int id;
	_Atomic int *made, *stop;
	int tried; /* names b<id>-0 .. b<id>-(tried - 1) were sent */
};

/* Creates b<id>-N in dir on A, one after the other, until the kill. */
static void *lb_main(void *p)
{
	struct lb_thread *t = p;
	struct e2e_rpc *r = e2e_rpc_open(gw[0].nfs_port, NFS_PROGRAM, NFS_V3);

	while (r && !*t->stop && t->tried < LB_MAX) {
		char name[32];
		CREATE3args a = { .where = { t->dir, name } };
		CREATE3res res;

		snprintf(name, sizeof(name), "b%d-%d", t->id, t->tried++);
		a.how.mode = GUARDED;
		a.how.createhow3_u.obj_attributes = e2e_sattr_mode(0644);
		if (e2e_nfs3_create(r, &a, &res) || res.status != NFS3_OK)
			break;
		(*t->made)++;
	}
	e2e_rpc_close(r);
	return NULL;
}

/*
 * A gateway killed -9 after PostgreSQL committed a change of its (the
 * file is the gateway's: its owner) and before its own LMDB commit did:
 * the cluster says the file is A's, A's disk knows nothing of it.  Before
 * the fix A never uploaded nor let go of such a file and every other
 * gateway's WRITE of it answered JUKEBOX for ever (found by hand: 12 of
 * 2,400 files after a kill under creates).  Now A takes such files back
 * when it starts (HEAD; what reached the store, or zeros of the record's
 * size) and they are written like any other.  24 clients create in four
 * directories on A; the kill lands in that window for some commit in
 * nearly every round (up to four rounds until A's log says so).
 */
static void test_kill_between_commits(void)
{
	int rounds = 0, hit = 0;

	for (; rounds < 4 && !hit; rounds++) {
		struct lb_thread t[LB_DIRS * LB_PER_DIR];
		pthread_t th[LB_DIRS * LB_PER_DIR];
		_Atomic int made = 0, stop = 0;
		nfs_fh3 d[LB_DIRS], db[LB_DIRS];
		char dname[32];

		for (int i = 0; i < LB_DIRS; i++) {
			snprintf(dname, sizeof(dname), "lb%d-%d", rounds, i);
			E2E_STATUS("MKDIR on A",
				   mkdir_on(0, &root[0], dname, &d[i]),
				   NFS3_OK);
			E2E_REQUIRE(
				wait_lookup(1, &root[1], dname, NFS3_OK) >= 0 &&
					lookup(1, &root[1], dname, &db[i]) ==
						NFS3_OK,
				"%s not on B", dname);
		}
		for (int i = 0; i < LB_DIRS * LB_PER_DIR; i++) {
			t[i] = (struct lb_thread){ .dir = d[i / LB_PER_DIR],
						   .id = i,
						   .made = &made,
						   .stop = &stop };
			E2E_REQUIRE(
				!pthread_create(&th[i], NULL, lb_main, &t[i]),
				"thread");
		}
		uint64_t t0 = e2e_now_ms();

		while (made < 300 && e2e_now_ms() - t0 < 10000)
			usleep(5000);
		E2E_REQUIRE(e2e_gw_kill9(&gw[0]) == 0, "kill -9 A");
		stop = 1;
		for (int i = 0; i < LB_DIRS * LB_PER_DIR; i++)
			pthread_join(th[i], NULL);
		e2e_rpc_close(nfs[0]);
		nfs[0] = NULL;
		E2E_REQUIRE(restart_a() == 0, "restart A, connect again");
		sleep(1); /* B sees every commit that landed */

		/* Every file the cluster has is written from B: JUKEBOX
		 * while A uploads and lets go, then OK. */
		size_t cap = LB_DIRS * LB_PER_DIR * LB_MAX, n = 0, wrong = 0;
		nfs_fh3 *fh = calloc(cap, sizeof(*fh));

		E2E_REQUIRE(fh != NULL, "memory");
		for (int i = 0; i < LB_DIRS * LB_PER_DIR; i++)
			for (int k = 0; k < t[i].tried; k++) {
				char name[32];

				snprintf(name, sizeof(name), "b%d-%d", i, k);
				if (lookup(1, &db[i / LB_PER_DIR], name,
					   &fh[n]) == NFS3_OK)
					n++;
			}
		size_t left = n;

		t0 = e2e_now_ms();
		while (left && e2e_now_ms() - t0 < 20000) {
			size_t k = 0;

			for (size_t i = 0; i < left; i++) {
				int st = write_on(1, &fh[i], 0, "x", 1,
						  UNSTABLE);

				if (st == NFS3ERR_JUKEBOX)
					fh[k++] = fh[i];
				else if (st != NFS3_OK)
					wrong++;
			}
			left = k;
			if (left)
				usleep(200 * 1000);
		}
		free(fh);
		hit = e2e_log_count(gw[0].log, "took back", false);
		fprintf(stderr,
			"  [round %d: %d creates answered before the kill, %zu "
			"files in the cluster, %d taken back by A]\n",
			rounds + 1, (int)made, n, hit);
		E2E_CHECK(wrong == 0, "%zu WRITEs on B failed", wrong);
		E2E_CHECK(left == 0,
			  "%zu of %zu files still answer JUKEBOX on B 20 s "
			  "after A came back",
			  left, n);
		if (left)
			return;
	}
	E2E_CHECK(hit > 0,
		  "in %d rounds no kill fell between a commit in PostgreSQL "
		  "and A's own: nothing tested",
		  rounds);
}

/* ---- the machine restarted: the state loaded again ---------------------- */

/* Write text into path (made or emptied).  0 or -1. */
static int file_put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int rc = f && fputs(text, f) >= 0 ? 0 : -1;

	if (f && fclose(f))
		rc = -1;
	return rc;
}

/* Zero the first bytes of path (both of LMDB's meta pages).  0 or -1. */
static int file_tear(const char *path)
{
	static const char zeros[8192];
	FILE *f = fopen(path, "r+");
	int rc = f && fwrite(zeros, 1, sizeof(zeros), f) == sizeof(zeros) ? 0
									  : -1;

	if (f && fclose(f))
		rc = -1;
	return rc;
}

/* READ all of fh on gateway i until it says want (JUKEBOX, a cold cache
 * and a takeover under way are waited for, up to 10 s). */
static bool reads_back(int i, const nfs_fh3 *fh, const char *want)
{
	uint64_t t0 = e2e_now_ms();
	char buf[64];
	long got;

	do
		got = read_all(i, fh, buf, sizeof(buf));
	while ((got != (long)strlen(want) || memcmp(buf, want, got)) &&
	       e2e_now_ms() - t0 < 10000 && !usleep(100 * 1000));
	return got == (long)strlen(want) && !memcmp(buf, want, got);
}

/* A WRITE of fh from gateway i, JUKEBOX retried up to 20 s: the status. */
static int write_retry(int i, const nfs_fh3 *fh, const char *data)
{
	uint64_t t0 = e2e_now_ms();
	int st;

	while ((st = write_on(i, fh, 0, data, strlen(data), FILE_SYNC)) ==
		       NFS3ERR_JUKEBOX &&
	       e2e_now_ms() - t0 < 20000)
		usleep(100 * 1000);
	return st;
}

/*
 * With the cluster's default --cluster-commit store a gateway's database
 * is not flushed per commit: PostgreSQL and the store hold whatever a
 * reply promised.  A crash of the machine may tear it; the gateway notes
 * its boot while it runs so, and a start on another boot throws its
 * database and its cache away and loads the cluster again.  Here A is
 * killed -9, its note made another boot's, its database torn (both meta
 * pages zeroed: LMDB could not open it) and a stray file left in its
 * cache: A starts, says why it starts empty, has every name and every
 * committed byte (by its old handles too), and takes its own files back
 * so that B writes them.  A clean stop leaves no note.
 */
static void test_machine_restart(void)
{
	char note[E2E_PATH_MAX + 32], data[E2E_PATH_MAX + 32],
		stray[E2E_PATH_MAX + 32], fbuf[NFS3_FHSIZE];
	nfs_fh3 f, g, d, x, fb, gb, h;
	RENAME3res rr;

	E2E_STATUS("CREATE mr-data on A",
		   create(0, &root[0], "mr-data", GUARDED, &f), NFS3_OK);
	E2E_STATUS("WRITE mr-data on A (FILE_SYNC)",
		   write_on(0, &f, 0, "committed-bytes", 15, FILE_SYNC),
		   NFS3_OK);
	E2E_STATUS("CREATE mr-empty on A",
		   create(0, &root[0], "mr-empty", GUARDED, &g), NFS3_OK);
	E2E_STATUS("MKDIR mr-dir on A", mkdir_on(0, &root[0], "mr-dir", &d),
		   NFS3_OK);
	E2E_STATUS("CREATE mr-dir/old on A", create(0, &d, "old", GUARDED, &x),
		   NFS3_OK);
	E2E_STATUS("WRITE mr-dir/old on A (FILE_SYNC)",
		   write_on(0, &x, 0, "renamed", 7, FILE_SYNC), NFS3_OK);
	E2E_RPC(nfs[0], e2e_nfs3_rename(nfs[0], &d, "old", &d, "new", &rr));
	E2E_STATUS("RENAME mr-dir/old new on A", rr.status, NFS3_OK);
	E2E_REQUIRE(f.data.data_len <= sizeof(fbuf), "handle too long");
	memcpy(fbuf, f.data.data_val, f.data.data_len);
	f.data.data_val = fbuf;

	snprintf(note, sizeof(note), "%s/db/unflushed", gw[0].state);
	snprintf(data, sizeof(data), "%s/db/data.mdb", gw[0].state);
	snprintf(stray, sizeof(stray), "%s/cache/00/stray", gw[0].state);
	E2E_CHECK(access(note, F_OK) == 0,
		  "A runs with its database unflushed: no %s", note);
	E2E_REQUIRE(e2e_gw_kill9(&gw[0]) == 0, "kill -9 A");
	e2e_rpc_close(nfs[0]);
	nfs[0] = NULL;
	E2E_REQUIRE(file_put(note, "another-boot\n") == 0 &&
			    file_tear(data) == 0 &&
			    file_put(stray, "not whole") == 0,
		    "the machine's crash made up in %s", gw[0].state);
	E2E_REQUIRE(restart_a() == 0, "A starts on a torn database");
	E2E_CHECK(e2e_log_count(gw[0].log,
				"the machine restarted while its last "
				"commits were not flushed",
				false) == 1,
		  "A says why it starts empty");
	E2E_CHECK(access(stray, F_OK) != 0, "A threw its cache away");
	E2E_CHECK(reads_back(0, &f, "committed-bytes"),
		  "A reads mr-data by its old handle");
	E2E_STATUS("LOOKUP mr-empty on A", lookup(0, &root[0], "mr-empty", &h),
		   NFS3_OK);
	E2E_REQUIRE(lookup(0, &root[0], "mr-dir", &d) == NFS3_OK,
		    "LOOKUP mr-dir on A");
	E2E_STATUS("LOOKUP mr-dir/old on A", lookup(0, &d, "old", &h),
		   NFS3ERR_NOENT);
	E2E_REQUIRE(lookup(0, &d, "new", &h) == NFS3_OK,
		    "LOOKUP mr-dir/new on A");
	E2E_CHECK(reads_back(0, &h, "renamed"), "A reads mr-dir/new");
	/* A's files are written from B: A took them back. */
	E2E_REQUIRE(lookup(1, &root[1], "mr-data", &fb) == NFS3_OK &&
			    lookup(1, &root[1], "mr-empty", &gb) == NFS3_OK,
		    "LOOKUP on B");
	E2E_STATUS("WRITE mr-data on B", write_retry(1, &fb, "BBBBBBBBB"),
		   NFS3_OK);
	E2E_STATUS("WRITE mr-empty on B", write_retry(1, &gb, "b-too"),
		   NFS3_OK);
	E2E_CHECK(reads_back(0, &f, "BBBBBBBBB-bytes"),
		  "A reads B's write of mr-data");

	E2E_REQUIRE(e2e_gw_stop(&gw[0]) == 0, "A stops");
	e2e_rpc_close(nfs[0]);
	nfs[0] = NULL;
	E2E_CHECK(access(note, F_OK) != 0,
		  "a clean stop flushed A's database and removed its note");
	E2E_REQUIRE(restart_a() == 0, "A starts again");
}

/*
 * PostgreSQL stops: reads of what the gateways have go on, changes of
 * the namespace answer JUKEBOX; once it is back they go through, with
 * nothing lost, and no gateway restarted.
 */
static void test_db_outage(void)
{
	char buf[64];
	nfs_fh3 f, fb;
	long got;
	int st = -1;

	E2E_STATUS("CREATE before on A",
		   create(0, &root[0], "before", GUARDED, &f), NFS3_OK);
	E2E_STATUS("WRITE before", write_on(0, &f, 0, "kept", 4, FILE_SYNC),
		   NFS3_OK);
	E2E_STATUS("COMMIT before", commit_on(0, &f), NFS3_OK);
	E2E_REQUIRE(wait_lookup(1, &root[1], "before", NFS3_OK) >= 0 &&
			    lookup(1, &root[1], "before", &fb) == NFS3_OK,
		    "before not on B");
	/* A's COMMIT is on B once the propagation window passed. */
	uint64_t t1 = e2e_now_ms();

	while ((got = read_all(1, &fb, buf, sizeof(buf))) != 4 &&
	       e2e_now_ms() - t1 < WINDOW_MS)
		usleep(20 * 1000);
	E2E_REQUIRE(got == 4, "read on B: %ld", got);
	E2E_REQUIRE(e2e_pg_down() == 0, "stop PostgreSQL");
	for (int i = 0; i < NGW; i++)
		E2E_STATUS("LOOKUP before while the db is down",
			   lookup(i, &root[i], "before", NULL), NFS3_OK);
	got = read_all(1, &fb, buf, sizeof(buf));
	E2E_CHECK(got == 4 && !memcmp(buf, "kept", 4),
		  "cached read on B while the db is down: %ld", got);
	E2E_STATUS("CREATE while the db is down",
		   create(2, &root[2], "during", GUARDED, NULL),
		   NFS3ERR_JUKEBOX);
	sleep(2);
	E2E_REQUIRE(e2e_pg_up() == 0, "start PostgreSQL again");
	uint64_t t0 = e2e_now_ms();

	while (e2e_now_ms() - t0 < 30000 &&
	       (st = create(2, &root[2], "during", GUARDED, NULL)) ==
		       NFS3ERR_JUKEBOX)
		usleep(200 * 1000);
	E2E_STATUS("CREATE after the db came back", st, NFS3_OK);
	E2E_CHECK(wait_lookup(0, &root[0], "during", NFS3_OK) >= 0,
		  "during not on A after the outage");
	E2E_STATUS("before still there on C",
		   lookup(2, &root[2], "before", NULL), NFS3_OK);
	for (int i = 0; i < NGW; i++)
		E2E_CHECK(e2e_gw_alive(&gw[i]), "%s died in the outage",
			  names[i]);
}

/* Run sql on the database at url (psql).  0 or -1. */
static int psql_at(const char *url, const char *sql)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd), "psql -X -q '%s' -c \"%s\" >/dev/null", url,
		 sql);
	return system(cmd) == 0 ? 0 : -1;
}

static int psql(const char *sql)
{
	return psql_at(meta, sql);
}

/*
 * The database goes read-only (a primary demoted behind our back, or
 * default_transaction_read_only): reads go on, changes answer JUKEBOX,
 * the log says why; once it takes writes again the change goes through
 * and nothing was lost.
 */
static void test_db_read_only(void)
{
	int st = -1;
	char *log;

	E2E_STATUS("CREATE ro-before on A",
		   create(0, &root[0], "ro-before", GUARDED, NULL), NFS3_OK);
	E2E_REQUIRE(
		psql("ALTER SYSTEM SET default_transaction_read_only = on") ==
				0 &&
			psql("SELECT pg_reload_conf()") == 0,
		"make the database read-only");
	/* The reload reaches every backend at its next statement. */
	sleep(1);
	st = create(1, &root[1], "ro-during", GUARDED, NULL);
	E2E_STATUS("CREATE while the database is read-only", st,
		   NFS3ERR_JUKEBOX);
	E2E_STATUS("LOOKUP while the database is read-only",
		   lookup(2, &root[2], "ro-before", NULL), NFS3_OK);
	log = e2e_gw_log_read(&gw[1]);
	E2E_CHECK(log && strstr(log, "the database refuses writes"),
		  "B's log does not say why it waits");
	free(log);
	sleep(2);
	E2E_REQUIRE(psql("ALTER SYSTEM RESET default_transaction_read_only") ==
				    0 &&
			    psql("SELECT pg_reload_conf()") == 0,
		    "make the database writable");
	uint64_t t0 = e2e_now_ms();
	while (e2e_now_ms() - t0 < 30000 &&
	       (st = create(1, &root[1], "ro-during", GUARDED, NULL)) ==
		       NFS3ERR_JUKEBOX)
		usleep(200 * 1000);
	E2E_STATUS("CREATE once the database takes writes", st, NFS3_OK);
	E2E_CHECK(wait_lookup(0, &root[0], "ro-during", NFS3_OK) >= 0,
		  "ro-during not on A");
	for (int i = 0; i < NGW; i++)
		E2E_CHECK(e2e_gw_alive(&gw[i]), "%s died", names[i]);
}

/* How long test_record_locked's other session holds its locks. */
#define HOLD_S 15

/*
 * Another session holds the records a change needs (an administrator's
 * long transaction, a stuck client of the database): the commit gives up
 * its lock wait after a second (the committers' lock_timeout) and runs
 * again, and after a few tries the client gets JUKEBOX, long before the
 * lock is let go, instead of a call that hangs as long as the lock is
 * held.  Once it is let go the change goes through.
 */
static void test_record_locked(void)
{
	char cmd[1024];
	uint64_t t0, took;
	int st;

	snprintf(cmd, sizeof(cmd),
		 "psql -X -q '%s' -c \"BEGIN; SELECT count(*) FROM (SELECT 1"
		 " FROM mapfs_records WHERE tbl = 'inodes' FOR UPDATE) l;"
		 " SELECT pg_sleep(%d); COMMIT\" >/dev/null 2>&1 &",
		 meta, HOLD_S);
	E2E_REQUIRE(system(cmd) == 0, "start the session that holds locks");
	sleep(1);
	t0 = e2e_now_ms();
	st = create(0, &root[0], "held", GUARDED, NULL);
	took = e2e_now_ms() - t0;
	E2E_CHECK(st == NFS3ERR_JUKEBOX || st == NFS3_OK,
		  "CREATE behind a held lock: %s", e2e_nfsstat(st));
	E2E_CHECK(took < (HOLD_S - 2) * 1000ull,
		  "CREATE waited %" PRIu64 " ms behind a lock held %d s", took,
		  HOLD_S);
	t0 = e2e_now_ms();
	while (e2e_now_ms() - t0 < (HOLD_S + 30) * 1000ull &&
	       (st = create(0, &root[0], "held", GUARDED, NULL)) ==
		       NFS3ERR_JUKEBOX)
		usleep(200 * 1000);
	E2E_CHECK(st == NFS3_OK || st == NFS3ERR_EXIST,
		  "CREATE once the lock is let go: %s", e2e_nfsstat(st));
	E2E_CHECK(wait_lookup(1, &root[1], "held", NFS3_OK) >= 0,
		  "held not on B");
}

/* ---- locks across gateways ---- */

/* The NLM port gateway i logged at its last start. */
static int nlm_port(int i)
{
	static const char tag[] = "NLM v4 and NSM v1 on 127.0.0.1:";
	char *log = e2e_gw_log_read(&gw[i]), *p, *last = NULL;
	int port = -1;

	for (p = log; p && (p = strstr(p, tag)); p++)
		last = p;
	if (last)
		port = atoi(last + strlen(tag));
	free(log);
	return port;
}

struct nsync {
	int done, status;
	uint32_t stat;
	int holder_svid;
};

static void nlm_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct nsync *s = priv;

	(void)rpc;
	s->done = 1;
	s->status = status;
	/* Every NLM4 result starts with the cookie, then the stat. */
	if (status == RPC_STATUS_SUCCESS && data)
		s->stat = ((NLM4_LOCKres *)data)->status;
}

static void nlm_test_cb(struct rpc_context *rpc, int status, void *data,
			void *priv)
{
	struct nsync *s = priv;
	NLM4_TESTres *r = data;

	(void)rpc;
	s->done = 1;
	s->status = status;
	if (status == RPC_STATUS_SUCCESS && r) {
		s->stat = r->reply.status;
		if (r->reply.status == NLM4_DENIED)
			s->holder_svid =
				(int)r->reply.nlm4_testreply_u.lock.holder.svid;
	}
}

static int nwait(struct rpc_context *rpc, struct nsync *s, int q)
{
	uint64_t end = e2e_now_ms() + 20000;

	if (q)
		return -1;
	while (!s->done && e2e_now_ms() < end) {
		struct pollfd pfd = { .fd = rpc_get_fd(rpc),
				      .events = (short)rpc_which_events(rpc) };

		if (poll(&pfd, 1, 100) < 0 || rpc_service(rpc, pfd.revents) < 0)
			return -1;
	}
	return s->done && s->status == RPC_STATUS_SUCCESS ? (int)s->stat : -1;
}

static nlm4_lock mk(const nfs_fh3 *fh, const char *host, uint32_t svid)
{
	nlm4_lock l = { .caller_name = (char *)host,
			.svid = svid,
			.oh = (char *)host };

	l.fh.data.data_len = fh->data.data_len;
	l.fh.data.data_val = fh->data.data_val;
	return l;
}

static int nlm_lock_on(struct rpc_context *c, nlm4_lock l, int block)
{
	NLM4_LOCKargs a = {
		.block = (uint32_t)block, .exclusive = 1, .lock = l, .state = 1
	};
	struct nsync s = { 0 };

	return nwait(c, &s, rpc_nlm4_lock_async(c, nlm_cb, &a, &s));
}

static int nlm_unlock_on(struct rpc_context *c, nlm4_lock l)
{
	NLM4_UNLOCKargs a = { .lock = l };
	struct nsync s = { 0 };

	return nwait(c, &s, rpc_nlm4_unlock_async(c, nlm_cb, &a, &s));
}

static int nlm_test_on(struct rpc_context *c, nlm4_lock l, int *svid)
{
	NLM4_TESTargs a = { .exclusive = 1, .lock = l };
	struct nsync s = { 0 };
	int rc = nwait(c, &s, rpc_nlm4_test_async(c, nlm_test_cb, &a, &s));

	if (svid)
		*svid = s.holder_svid;
	return rc;
}

/*
 * Locks are the cluster's: a lock taken through A conflicts with one asked
 * through B (TEST names A's holder), a blocking request queued through B
 * is granted by A's UNLOCK (B's client polls and holds it), and a lock
 * survives the restart of the gateway it was taken through.
 */
static void test_locks(void)
{
	struct e2e_rpc *la, *lb;
	struct rpc_context *a, *b;
	nfs_fh3 f;
	int svid = 0, st = -1;

	E2E_STATUS("CREATE lk on A", create(0, &root[0], "lk", GUARDED, &f),
		   NFS3_OK);
	E2E_REQUIRE(wait_lookup(1, &root[1], "lk", NFS3_OK) >= 0, "lk on B");
	la = e2e_rpc_open(nlm_port(0), NLM_PROGRAM, NLM_V4);
	lb = e2e_rpc_open(nlm_port(1), NLM_PROGRAM, NLM_V4);
	E2E_REQUIRE(la && lb, "NLM connections to A and B");
	a = e2e_rpc_ctx(la);
	b = e2e_rpc_ctx(lb);
	E2E_CHECK(nlm_lock_on(a, mk(&f, "clientA", 11), 0) == NLM4_GRANTED,
		  "LOCK through A");
	st = nlm_test_on(b, mk(&f, "clientB", 22), &svid);
	E2E_CHECK(st == NLM4_DENIED && svid == 11,
		  "TEST through B: %d, holder svid %d, want DENIED by 11", st,
		  svid);
	st = nlm_lock_on(b, mk(&f, "clientB", 22), 0);
	E2E_CHECK(st == NLM4_DENIED, "a non-blocking LOCK through B: %d", st);
	E2E_CHECK(nlm_lock_on(b, mk(&f, "clientB", 22), 1) == NLM4_BLOCKED,
		  "a blocking LOCK through B is queued");
	E2E_CHECK(nlm_unlock_on(a, mk(&f, "clientA", 11)) == NLM4_GRANTED,
		  "UNLOCK through A");
	/* A granted B's queued request; its client's next poll holds it. */
	E2E_CHECK(nlm_lock_on(b, mk(&f, "clientB", 22), 1) == NLM4_GRANTED,
		  "B's poll after A's UNLOCK");
	E2E_CHECK(nlm_test_on(a, mk(&f, "clientA", 11), &svid) == NLM4_DENIED &&
			  svid == 22,
		  "TEST through A sees B's lock (svid %d)", svid);
	/* The gateway B locked through goes and comes back: the lock stays. */
	e2e_rpc_close(lb);
	e2e_rpc_close(nfs[1]);
	nfs[1] = NULL;
	E2E_REQUIRE(e2e_gw_stop(&gw[1]) == 0 && e2e_gw_restart(&gw[1]) == 0,
		    "restart B");
	nfs[1] = e2e_rpc_open(gw[1].nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(nfs[1] && !e2e_root_fh(nfs[1], &gw[1], &root[1]),
		    "B again");
	E2E_CHECK(nlm_test_on(a, mk(&f, "clientA", 11), &svid) == NLM4_DENIED &&
			  svid == 22,
		  "B's lock after B's restart (svid %d)", svid);
	lb = e2e_rpc_open(nlm_port(1), NLM_PROGRAM, NLM_V4);
	E2E_REQUIRE(lb, "NLM connection to B again");
	st = nlm_unlock_on(e2e_rpc_ctx(lb), mk(&f, "clientB", 22));
	E2E_CHECK(st == NLM4_GRANTED, "UNLOCK through B again: %d", st);
	E2E_CHECK(nlm_test_on(a, mk(&f, "clientA", 11), NULL) == NLM4_GRANTED,
		  "the file is free");
	e2e_rpc_close(la);
	e2e_rpc_close(lb);
}

static int suite_init(void)
{
	if (e2e_pg_createdb(meta, sizeof(meta)))
		return -1;
	for (int i = 0; i < NGW; i++)
		if (start_gw(i))
			return -1;
	return 0;
}

static int suite_fini(void)
{
	int bad = 0;

	for (int i = NGW; i-- > 0;) {
		e2e_rpc_close(nfs[i]);
		if (gw[i].pid && e2e_gw_stop(&gw[i]) != 0)
			bad = 1;
		e2e_gw_cleanup(&gw[i]);
	}
	return bad ? -1 : 0;
}

/* ------------------------------------------------------------------ */
/* Bad configurations: a clear error, exit 2, nothing changed          */

static char cdir[64];

/*
 * Run a gateway on its own state dir (sub of cdir) and store with
 * --meta url, --node node and more args (NULL-terminated), until it
 * exits or is ready (then stopped): its exit status, or 1000 if it got
 * ready; its stderr in err[cap].  Waits at most wait_ms for either.
 */
static int gw_try(const char *url, const char *node, const char *state,
		  const char *store, const char *const *more, char *err,
		  size_t cap, int wait_ms)
{
	const char *bin = getenv("MAPFS_GW");
	char errf[128], line[256] = "";
	const char *argv[40];
	int n = 0, p[2], st = -1, rc = -1;
	size_t fill = 0;
	uint64_t t0 = e2e_now_ms();
	pid_t pid;

	snprintf(errf, sizeof(errf), "%s/err", cdir);
	argv[n++] = bin;
	argv[n++] = "--store";
	argv[n++] = store;
	argv[n++] = "--state";
	argv[n++] = state;
	argv[n++] = "--meta";
	argv[n++] = url;
	argv[n++] = "--node";
	argv[n++] = node;
	argv[n++] = "--bind";
	argv[n++] = "127.0.0.1";
	argv[n++] = "--nfs-port";
	argv[n++] = "0";
	argv[n++] = "--mount-port";
	argv[n++] = "0";
	argv[n++] = "--no-rpcbind";
	argv[n++] = "--foreground";
	for (int i = 0; more && more[i] && n < 38; i++)
		argv[n++] = more[i];
	argv[n] = NULL;
	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		int fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0 || dup2(fd, 2) < 0 || dup2(p[1], 1) < 0)
			_exit(99);
		close(p[0]);
		execv(bin, (char *const *)argv);
		_exit(98);
	}
	close(p[1]);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	while (e2e_now_ms() - t0 < (uint64_t)wait_ms) {
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		ssize_t r;

		if (waitpid(pid, &st, WNOHANG) == pid) {
			rc = WIFEXITED(st) ? WEXITSTATUS(st)
					   : 128 + WTERMSIG(st);
			break;
		}
		if (poll(&pf, 1, 50) > 0 &&
		    (r = read(p[0], line + fill, sizeof(line) - 1 - fill)) >
			    0) {
			fill += (size_t)r;
			line[fill] = '\0';
			if (strstr(line, "mapfs-gw: ready")) {
				kill(pid, SIGTERM);
				waitpid(pid, &st, 0);
				rc = 1000;
				break;
			}
		}
	}
	if (rc == -1) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	close(p[0]);
	err[0] = '\0';
	int fd = open(errf, O_RDONLY);

	if (fd >= 0) {
		ssize_t r = read(fd, err, cap - 1);

		err[r > 0 ? r : 0] = '\0';
		close(fd);
	}
	return rc;
}

static char cmeta[256], cstore[E2E_PATH_MAX + 16];

static void state_of(const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", cdir, name);
}

/* The first node makes the cluster; the same name twice is refused. */
static void test_node_name_twice(void)
{
	char err[4096], s1[128], s2[128];
	struct e2e_gw one;
	struct e2e_gw_opts o = { .threads = 1, .meta = cmeta, .node = "twin" };
	int rc;

	E2E_REQUIRE(e2e_gw_start_opts(&one, &o) == 0, "first twin");
	snprintf(cstore, sizeof(cstore), "%s%s",
		 e2e_backend_is_s3() ? "" : "file://", one.store);
	state_of("s2", s2, sizeof(s2));
	(void)s1;
	rc = gw_try(cmeta, "twin", s2, cstore, NULL, err, sizeof(err), 20000);
	E2E_CHECK(rc == 2, "a second node named twin: exit %d, want 2", rc);
	E2E_CHECK(strstr(err, "node name twin is in use"),
		  "no clear message: %s", err);
	E2E_CHECK(e2e_gw_stop(&one) == 0, "first twin stops");
	/* Stopped cleanly, its name is free at once. */
	rc = gw_try(cmeta, "twin", s2, cstore, NULL, err, sizeof(err), 20000);
	E2E_CHECK(rc == 1000, "twin after the first stopped: %d\n%s", rc, err);
	e2e_gw_cleanup(&one);
}

/* GETATTR of gateway g's root over a connection of its own. */
static int getattr_root(struct e2e_gw *g)
{
	struct e2e_rpc *r = e2e_rpc_open(g->nfs_port, NFS_PROGRAM, NFS_V3);
	nfs_fh3 rt;
	int st = -1;

	if (r && !e2e_root_fh(r, g, &rt))
		st = getattr_raw(r, &rt);
	e2e_rpc_close(r);
	return st;
}

/*
 * Two processes on one state directory (a typo in a unit, a second
 * service): the second exits 2 at once and says why; nothing of the
 * first's is touched.  `ctl ready` answers yes for the running one, and
 * no once its database is gone.
 */
static void test_state_locked(void)
{
	char err[4096], cmd[600], url[256], store[E2E_PATH_MAX + 16];
	struct e2e_gw one;
	struct e2e_gw_opts o = { .threads = 1, .meta = url, .node = "locker" };
	int rc;

	/* A database of its own: the shared one serves another store. */
	E2E_REQUIRE(e2e_pg_createdb(url, sizeof(url)) == 0, "createdb");
	E2E_REQUIRE(e2e_gw_start_opts(&one, &o) == 0, "the first gateway");
	snprintf(store, sizeof(store), "%s%s",
		 e2e_backend_is_s3() ? "" : "file://", one.store);
	rc = gw_try(url, "locker-2", one.state, store, NULL, err, sizeof(err),
		    20000);
	E2E_CHECK(rc == 2, "a second gateway on its state: exit %d, want 2",
		  rc);
	E2E_CHECK(strstr(err, "is in use by another mapfs-gw"),
		  "no clear message: %s", err);
	E2E_STATUS("the first still answers", getattr_root(&one), NFS3_OK);
	snprintf(cmd, sizeof(cmd), "'%s' ctl --state '%s' ready >/dev/null",
		 getenv("MAPFS_GW"), one.state);
	rc = system(cmd);
	E2E_CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0,
		  "ctl ready of a serving gateway: %d", rc);
	E2E_REQUIRE(e2e_pg_down() == 0, "stop PostgreSQL");
	/* Not ready once its lease may have run out (3/4 of 5 s). */
	uint64_t t0 = e2e_now_ms();

	do
		rc = system(cmd);
	while (WIFEXITED(rc) && WEXITSTATUS(rc) == 0 &&
	       e2e_now_ms() - t0 < 15000 && !usleep(250 * 1000));
	E2E_CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) != 0,
		  "ctl ready with the database down: %d", rc);
	E2E_REQUIRE(e2e_pg_up() == 0, "start PostgreSQL again");
	t0 = e2e_now_ms();
	do
		rc = system(cmd);
	while ((!WIFEXITED(rc) || WEXITSTATUS(rc) != 0) &&
	       e2e_now_ms() - t0 < 30000 && !usleep(250 * 1000));
	E2E_CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0,
		  "ctl ready once the database is back: %d", rc);
	E2E_CHECK(e2e_gw_stop(&one) == 0, "the first stops");
	e2e_gw_cleanup(&one);
}

/* Another --store than the cluster's: exit 2, naming both. */
static void test_other_store(void)
{
	char err[4096], st[128], other[160];

	state_of("s3", st, sizeof(st));
	snprintf(other, sizeof(other), "file://%s/other-store", cdir);
	int rc = gw_try(cmeta, "other", st, other, NULL, err, sizeof(err),
			20000);

	E2E_CHECK(rc == 2, "another store: exit %d, want 2", rc);
	E2E_CHECK(strstr(err, "every gateway of a cluster must use the same"),
		  "no clear message: %s", err);
}

/* A wrong password and a missing database stop at once: exit 2. */
static void test_bad_credentials(void)
{
	char err[4096], st[128], url[300], *host;

	state_of("s4", st, sizeof(st));
	host = strstr(cmeta, "@");
	E2E_REQUIRE(host, "meta URL %s", cmeta);
	snprintf(url, sizeof(url), "postgresql://mapfs_pw:wrong%s", host);
	int rc = gw_try(url, "pw", st, cstore, NULL, err, sizeof(err), 20000);

	E2E_CHECK(rc == 2, "a wrong password: exit %d, want 2", rc);
	E2E_CHECK(strstr(err, "password authentication failed"),
		  "no clear message: %s", err);
	E2E_CHECK(!strstr(err, "wrong"), "the password is in the log: %s", err);
	snprintf(url, sizeof(url), "%.*s/no_such_db",
		 (int)(strrchr(cmeta, '/') - cmeta), cmeta);
	rc = gw_try(url, "nodb", st, cstore, NULL, err, sizeof(err), 20000);
	E2E_CHECK(rc == 2, "a missing database: exit %d, want 2", rc);
	E2E_CHECK(strstr(err, "does not exist"), "no clear message: %s", err);
}

/* A schema newer than the binary: exit 2, saying which. */
static void test_newer_schema(void)
{
	char err[4096], st[128], cmd[512];

	snprintf(cmd, sizeof(cmd),
		 "psql -X -q '%s' -c \"UPDATE mapfs_meta SET "
		 "value = '99' WHERE name = 'schema_version'\" >/dev/null",
		 cmeta);
	E2E_REQUIRE(system(cmd) == 0, "%s", cmd);
	state_of("s5", st, sizeof(st));
	int rc =
		gw_try(cmeta, "new", st, cstore, NULL, err, sizeof(err), 20000);

	E2E_CHECK(rc == 2, "a newer schema: exit %d, want 2", rc);
	E2E_CHECK(strstr(err, "schema is version 99, newer than"),
		  "no clear message: %s", err);
	snprintf(cmd, sizeof(cmd),
		 "psql -X -q '%s' -c \"UPDATE mapfs_meta SET "
		 "value = '1' WHERE name = 'schema_version'\" >/dev/null",
		 cmeta);
	E2E_REQUIRE(system(cmd) == 0, "%s", cmd);
}

/* A state dir with a gateway's own namespace is not overwritten. */
static void test_standalone_state(void)
{
	char err[4096], st[E2E_PATH_MAX];
	struct e2e_gw alone;
	struct e2e_gw_opts o = { .threads = 1 };
	int rc;

	E2E_REQUIRE(e2e_gw_start_opts(&alone, &o) == 0, "a gateway alone");
	E2E_CHECK(e2e_gw_stop(&alone) == 0, "stop it");
	snprintf(st, sizeof(st), "%s", alone.state);
	rc = gw_try(cmeta, "alone", st, cstore, NULL, err, sizeof(err), 20000);
	E2E_CHECK(rc == 2, "its state in a cluster: exit %d, want 2", rc);
	E2E_CHECK(strstr(err, "meta migrate"), "no clear message: %s", err);
	e2e_gw_cleanup(&alone);
}

/* PostgreSQL not there at start: the gateway waits, then serves. */
static void test_db_late(void)
{
	char err[4096], st[128];
	int rc;

	E2E_REQUIRE(e2e_pg_down() == 0, "stop PostgreSQL");
	state_of("s6", st, sizeof(st));
	rc = gw_try(cmeta, "late", st, cstore, NULL, err, sizeof(err), 3000);
	E2E_CHECK(rc == -1, "without a database: %d (want: still waiting)", rc);
	E2E_CHECK(strstr(err, "does not answer") && strstr(err, "retrying"),
		  "it does not say why it waits: %s", err);
	E2E_REQUIRE(e2e_pg_up() == 0, "start PostgreSQL");
	rc = gw_try(cmeta, "late", st, cstore, NULL, err, sizeof(err), 30000);
	E2E_CHECK(rc == 1000, "once the database is back: %d\n%s", rc, err);
}

/*
 * A gateway alone grows into a cluster: `mapfs-gw meta migrate` copies
 * its namespace (files not uploaded yet included) into an empty
 * database; restarted with --meta it serves the same files with the same
 * handles, uploads what it had not, and a new gateway sees it all.  A
 * second migrate into the now full database is refused.
 */
static void test_migrate(void)
{
	static const char *const slow[] = { "--upload-delay", "600", NULL };
	struct e2e_gw alone, joined;
	struct e2e_gw_opts o = { .threads = 1, .extra_args = slow };
	char url[256], cmd[2048], buf[64], fhbuf[64];
	struct e2e_rpc *r;
	nfs_fh3 rt, f;
	int rc;

	E2E_REQUIRE(e2e_pg_createdb(url, sizeof(url)) == 0, "createdb");
	E2E_REQUIRE(e2e_gw_start_opts(&alone, &o) == 0, "a gateway alone");
	r = e2e_rpc_open(alone.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(r && !e2e_root_fh(r, &alone, &rt), "mount it");
	CREATE3args ca = { .where = { rt, "kept" } };
	CREATE3res cr;
	WRITE3res wr;

	ca.how.mode = GUARDED;
	ca.how.createhow3_u.obj_attributes = e2e_sattr_mode(0644);
	E2E_RPC(r, e2e_nfs3_create(r, &ca, &cr));
	E2E_REQUIRE(cr.status == NFS3_OK, "CREATE kept");
	f = e2e_fh_dup(r, &cr.CREATE3res_u.resok.obj.post_op_fh3_u.handle);
	E2E_RPC(r,
		e2e_nfs3_write(r, &f, 0, "not uploaded", 12, FILE_SYNC, &wr));
	E2E_REQUIRE(wr.status == NFS3_OK, "WRITE kept");
	E2E_CHECK(e2e_gw_stop(&alone) == 0, "stop the gateway");
	/* The handle outlives the connection its bytes live in. */
	E2E_REQUIRE(f.data.data_len <= sizeof(fhbuf), "handle size");
	memcpy(fhbuf, f.data.data_val, f.data.data_len);
	f.data.data_val = fhbuf;
	snprintf(cmd, sizeof(cmd),
		 "'%s' meta migrate --state '%s' --store "
		 "'%s%s' --to '%s' --node solo >/dev/null 2>&1",
		 getenv("MAPFS_GW"), alone.state,
		 e2e_backend_is_s3() ? "" : "file://", alone.store, url);
	E2E_CHECK(system(cmd) == 0, "%s", cmd);
	rc = system(cmd);
	E2E_CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2,
		  "a second migrate into a full database: %d", rc);
	/* The same gateway, now a cluster node: its handles still work. */
	snprintf(alone.meta, sizeof(alone.meta), "%s", url);
	alone.opts.node = "solo";
	alone.opts.extra_args = NULL;
	E2E_REQUIRE(e2e_gw_restart(&alone) == 0, "restart with --meta");
	e2e_rpc_close(r);
	r = e2e_rpc_open(alone.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(r, "connect again");
	E2E_STATUS("GETATTR of a handle from before", getattr_raw(r, &f),
		   NFS3_OK);
	struct e2e_gw_opts jo = {
		.threads = 1, .meta = url, .node = "new", .store_of = &alone
	};

	E2E_REQUIRE(e2e_gw_start_opts(&joined, &jo) == 0, "a gateway joins");
	struct e2e_rpc *j = e2e_rpc_open(joined.nfs_port, NFS_PROGRAM, NFS_V3);

	E2E_REQUIRE(j, "connect to the new one");
	E2E_STATUS("GETATTR of the old handle on the new gateway",
		   getattr_raw(j, &f), NFS3_OK);
	uint64_t t0 = e2e_now_ms();
	long got = -1;
	READ3res rr;

	do {
		got = -1;
		if (!e2e_nfs3_read(j, &f, 0, sizeof(buf), &rr) &&
		    rr.status == NFS3_OK) {
			got = rr.READ3res_u.resok.count;
			if (got > 0)
				memcpy(buf, rr.READ3res_u.resok.data.data_val,
				       (size_t)got);
		}
	} while ((got != 12 || memcmp(buf, "not uploaded", 12)) &&
		 e2e_now_ms() - t0 < 30000 && !usleep(200 * 1000));
	E2E_CHECK(got == 12 && !memcmp(buf, "not uploaded", 12),
		  "the new gateway reads %ld bytes of kept", got);
	e2e_rpc_close(j);
	e2e_rpc_close(r);
	E2E_CHECK(e2e_gw_stop(&joined) == 0, "stop the new one");
	E2E_CHECK(e2e_gw_stop(&alone) == 0, "stop the migrated one");
	e2e_gw_cleanup(&joined);
	e2e_gw_cleanup(&alone);
}

/* ---- PostgreSQL fails over ----------------------------------------- */

struct pf {
	_Atomic uint64_t at_ms; /* when the failover began (the test polls) */
	int rc;                 /* read after the join */
};

static void *pf_failover(void *arg)
{
	struct pf *f = arg;

	f->at_ms = e2e_now_ms();
	f->rc = e2e_pg_pair_failover();
	return NULL;
}

/* A call's status, with JUKEBOX retried (counted) for up to 30 s. */
static int pf_retry(int (*call)(struct e2e_rpc *, const nfs_fh3 *, const char *,
				nfs_fh3 *),
		    struct e2e_rpc *r, const nfs_fh3 *fh, const char *name,
		    nfs_fh3 *out, int *jukebox)
{
	uint64_t t0 = e2e_now_ms();
	int st;

	while ((st = call(r, fh, name, out)) == NFS3ERR_JUKEBOX &&
	       e2e_now_ms() - t0 < 30000) {
		(*jukebox)++;
		usleep(50 * 1000);
	}
	return st;
}

static int pf_create(struct e2e_rpc *r, const nfs_fh3 *dir, const char *name,
		     nfs_fh3 *out)
{
	CREATE3args a = { .where = { *dir, (char *)name } };
	CREATE3res res;

	/* UNCHECKED: a retry after a reply lost in the failover opens the
	 * file its first try made, as a client's retransmission would. */
	a.how.mode = UNCHECKED;
	a.how.createhow3_u.obj_attributes = e2e_sattr_mode(0644);
	if (e2e_nfs3_create(r, &a, &res))
		return -1;
	if (res.status == NFS3_OK && res.CREATE3res_u.resok.obj.handle_follows)
		*out = e2e_fh_dup(
			r, &res.CREATE3res_u.resok.obj.post_op_fh3_u.handle);
	return res.status;
}

static int pf_write(struct e2e_rpc *r, const nfs_fh3 *fh, const char *data,
		    nfs_fh3 *unused)
{
	WRITE3res res;

	(void)unused;
	if (e2e_nfs3_write(r, fh, 0, data, (uint32_t)strlen(data), FILE_SYNC,
			   &res))
		return -1;
	return res.status;
}

/*
 * The database fails over under load: a primary with a synchronous
 * standby, the gateways given both (target_session_attrs=read-write).
 * A client of A creates files and writes each FILE_SYNC, one after the
 * other; the primary is killed and the standby promoted.  The client
 * sees JUKEBOX or a wait in the gap and no other error, the gateways reconnect by
 * themselves, and every file it was answered for is on B with its
 * bytes.  (A commit in flight at the kill may also ride the failover
 * out: its connection lost, it asks the new primary whether it landed,
 * and the client only waits.)
 */
static void test_pg_failover(void)
{
	static const char *const args[] = { "--lease", "3", NULL };
	struct e2e_gw g[2] = { 0 };
	struct e2e_rpc *r[2] = { NULL, NULL };
	nfs_fh3 rt[2];
	char url[512], name[32];
	struct pf f = { 0 };
	pthread_t t;
	int n = 0, jukebox = 0, st = NFS3_OK, started = 0;
	uint64_t last_ok, gap = 0, t0;

	E2E_REQUIRE(e2e_pg_pair_start(url, sizeof(url)) == 0,
		    "a primary and a standby");
	for (int i = 0; i < 2; i++) {
		struct e2e_gw_opts o = { .threads = 2,
					 .meta = url,
					 .node = i ? "pf-b" : "pf-a",
					 .store_of = i ? &g[0] : NULL,
					 .upload_delay = "1",
					 .extra_args = args };

		E2E_REQUIRE(e2e_gw_start_opts(&g[i], &o) == 0, "gateway %d", i);
		r[i] = e2e_rpc_open(g[i].nfs_port, NFS_PROGRAM, NFS_V3);
		E2E_REQUIRE(r[i] && !e2e_root_fh(r[i], &g[i], &rt[i]),
			    "connect to gateway %d", i);
	}
	t0 = last_ok = e2e_now_ms();
	/* 2 s of load, the failover, then 6 s more after it began. */
	while (!started || e2e_now_ms() - f.at_ms < 6000) {
		nfs_fh3 fh;

		if (!started && e2e_now_ms() - t0 > 2000) {
			E2E_REQUIRE(!pthread_create(&t, NULL, pf_failover, &f),
				    "failover thread");
			started = 1;
			while (!f.at_ms)
				usleep(1000);
		}
		snprintf(name, sizeof(name), "pf-%d", n);
		st = pf_retry(pf_create, r[0], &rt[0], name, &fh, &jukebox);
		if (st == NFS3_OK)
			st = pf_retry(pf_write, r[0], &fh, name, NULL,
				      &jukebox);
		if (st != NFS3_OK)
			break;
		if (e2e_now_ms() - last_ok > gap)
			gap = e2e_now_ms() - last_ok;
		last_ok = e2e_now_ms();
		n++;
	}
	if (started)
		pthread_join(t, NULL);
	E2E_CHECK(f.rc == 0, "kill the primary, promote the standby");
	E2E_STATUS("create and write through the failover", st, NFS3_OK);
	fprintf(stderr,
		"  [%d files created and written, %d JUKEBOX replies; "
		"the longest wait for one: %llu ms]\n",
		n, jukebox, (unsigned long long)gap);
	/* It happened under the load: clients waited (JUKEBOX, or a commit
	 * that rode it out by asking the new primary whether it landed). */
	E2E_CHECK(jukebox > 0 || gap >= 300,
		  "the failover was not noticed (no JUKEBOX, no wait)");
	/* Every one on B, with its bytes (B's replica may lag a moment). */
	int missing = 0;

	for (int i = 0; i < n; i++) {
		char buf[64];
		nfs_fh3 fh;
		READ3res rr;
		uint64_t t1 = e2e_now_ms();
		int ok = 0;

		snprintf(name, sizeof(name), "pf-%d", i);
		do {
			LOOKUP3res lr;

			if (e2e_nfs3_lookup(r[1], &rt[1], name, &lr) ||
			    lr.status != NFS3_OK)
				continue;
			fh = e2e_fh_dup(r[1], &lr.LOOKUP3res_u.resok.object);
			if (!e2e_nfs3_read(r[1], &fh, 0, sizeof(buf), &rr) &&
			    rr.status == NFS3_OK &&
			    rr.READ3res_u.resok.count == strlen(name) &&
			    !memcmp(rr.READ3res_u.resok.data.data_val, name,
				    strlen(name)))
				ok = 1;
		} while (!ok && e2e_now_ms() - t1 < 5000 && !usleep(50000));
		missing += !ok;
	}
	E2E_CHECK(missing == 0, "%d of %d acknowledged files missing on B",
		  missing, n);
	for (int i = 0; i < 2; i++) {
		e2e_rpc_close(r[i]);
		E2E_CHECK(e2e_gw_stop(&g[i]) == 0, "stop gateway %d", i);
		e2e_gw_cleanup(&g[i]);
	}
}

/* ---- a commit's answer lost with its connection --------------------- */

struct breaker {
	const char *url;
	int times, rc;
	_Atomic int stop;
};

/*
 * Break the connection of a commit in flight, b->times times: psql runs
 * a loop that waits for a gateway's backend running mapfs_commit3 and
 * terminates it (the statistics snapshot cleared each time round).
 */
static void *breaker_main(void *arg)
{
	struct breaker *b = arg;
	char cmd[2048];

	snprintf(cmd, sizeof(cmd),
		 "psql -X -q '%s' -c \"DO \\$\\$ DECLARE n int := 0;"
		 " t timestamptz := clock_timestamp(); BEGIN"
		 " WHILE n < %d AND clock_timestamp() - t < interval '120 s'"
		 " LOOP PERFORM pg_stat_clear_snapshot();"
		 " IF EXISTS (SELECT 1 FROM pg_stat_activity WHERE"
		 " application_name LIKE 'mapfs-gw %%' AND state = 'active'"
		 " AND query LIKE '%%mapfs_commit3%%'"
		 " AND pg_terminate_backend(pid)) THEN n := n + 1;"
		 " PERFORM pg_sleep(0.02); END IF; END LOOP;"
		 " IF n < %d THEN RAISE EXCEPTION 'only %% broken', n; END IF;"
		 " END \\$\\$\" >/dev/null 2>&1",
		 b->url, b->times, b->times);
	b->rc = system(cmd) == 0 ? 0 : -1;
	b->stop = 1;
	return NULL;
}

/* LOOKUP name in dir over r: the status. */
static int lookup_on(struct e2e_rpc *r, const nfs_fh3 *dir, const char *name)
{
	LOOKUP3res res;

	return e2e_nfs3_lookup(r, dir, name, &res) ? -1 : (int)res.status;
}

/* The entries of dir but "." and "..", by READDIR; (size_t)-1 on error. */
static size_t count_entries(struct e2e_rpc *r, const nfs_fh3 *dir)
{
	READDIR3args a = { .dir = *dir, .count = 32768 };
	size_t n = 0;

	for (;;) {
		READDIR3res res;
		entry3 *e;

		if (e2e_nfs3_readdir(r, &a, &res) || res.status != NFS3_OK)
			return (size_t)-1;
		for (e = res.READDIR3res_u.resok.reply.entries; e;
		     e = e->nextentry) {
			if (strcmp(e->name, ".") && strcmp(e->name, ".."))
				n++;
			a.cookie = e->cookie;
		}
		memcpy(a.cookieverf, res.READDIR3res_u.resok.cookieverf,
		       sizeof(a.cookieverf));
		if (res.READDIR3res_u.resok.reply.eof)
			return n;
	}
}

/* A status, JUKEBOX retried for up to 30 s. */
static int tk_retry(int st_of(void *), void *ctx)
{
	uint64_t t0 = e2e_now_ms();
	int st;

	while ((st = st_of(ctx)) == NFS3ERR_JUKEBOX &&
	       e2e_now_ms() - t0 < 30000)
		usleep(20 * 1000);
	return st;
}

struct tk_call {
	struct e2e_rpc *r;
	const nfs_fh3 *dir;
	const char *from, *to;
};

static int tk_create(void *p)
{
	struct tk_call *c = p;
	CREATE3args a = { .where = { *c->dir, (char *)c->from } };
	CREATE3res res;

	a.how.mode = GUARDED;
	a.how.createhow3_u.obj_attributes = e2e_sattr_mode(0644);
	return e2e_nfs3_create(c->r, &a, &res) ? -1 : (int)res.status;
}

static int tk_rename(void *p)
{
	struct tk_call *c = p;
	RENAME3res res;

	return e2e_nfs3_rename(c->r, c->dir, c->from, c->dir, c->to, &res)
		       ? -1
		       : (int)res.status;
}

static int tk_remove(void *p)
{
	struct tk_call *c = p;
	REMOVE3res res;

	return e2e_nfs3_remove(c->r, c->dir, c->from, &res) ? -1
							    : (int)res.status;
}

/*
 * A client creates (GUARDED), renames and removes, one change after the
 * other, on gateway g until *stop; JUKEBOX is retried.  The number of
 * files made, of wrong answers; then the directory must hold exactly
 * what the client was told.
 */
static int tk_load(struct e2e_gw *g, const char *dname, _Atomic int *stop,
		   int max, int *wrong)
{
	struct e2e_rpc *r = e2e_rpc_open(g->nfs_port, NFS_PROGRAM, NFS_V3);
	int n = 0, removed = 0, missing = 0, extra = 0;
	char from[32], to[32];
	nfs_fh3 top, d;
	size_t entries;

	*wrong = 0;
	E2E_REQUIRE(r && !e2e_root_fh(r, g, &top), "connect");
	{
		MKDIR3args a = { .where = { top, (char *)dname },
				 .attributes = e2e_sattr_mode(0755) };
		MKDIR3res res;
		int st;

		while ((st = e2e_nfs3_mkdir(r, &a, &res)
				     ? -1
				     : (int)res.status) == NFS3ERR_JUKEBOX)
			usleep(20 * 1000);
		E2E_REQUIRE(st == NFS3_OK, "MKDIR %s: %s", dname,
			    e2e_nfsstat(st));
		d = e2e_fh_dup(r,
			       &res.MKDIR3res_u.resok.obj.post_op_fh3_u.handle);
	}
	while (!*stop && n < max) {
		struct tk_call c = { r, &d, from, to };
		int st;

		snprintf(from, sizeof(from), "t-%d", n);
		snprintf(to, sizeof(to), "r-%d", n);
		st = tk_retry(tk_create, &c);
		if (st == NFS3_OK)
			st = tk_retry(tk_rename, &c);
		if (st == NFS3_OK && n % 3 == 0) {
			c.from = to;
			st = tk_retry(tk_remove, &c);
			removed++;
		}
		if (st != NFS3_OK) {
			fprintf(stderr, "  file %d: %s\n", n, e2e_nfsstat(st));
			(*wrong)++;
			if (st == -1)
				break;
		}
		n++;
	}
	for (int i = 0; i < n; i++) {
		snprintf(from, sizeof(from), "t-%d", i);
		snprintf(to, sizeof(to), "r-%d", i);
		extra += lookup_on(r, &d, from) == NFS3_OK;
		if (i % 3 == 0)
			extra += lookup_on(r, &d, to) == NFS3_OK;
		else
			missing += lookup_on(r, &d, to) != NFS3_OK;
	}
	entries = count_entries(r, &d);
	E2E_CHECK(missing == 0 && extra == 0,
		  "%s: %d files lost, %d left that should not be", dname,
		  missing, extra);
	E2E_CHECK(entries == (size_t)(n - removed),
		  "%s holds %zu entries, want %d", dname, entries, n - removed);
	e2e_rpc_close(r);
	return n;
}

/* How many times the gateway's log says s. */
static int log_count(struct e2e_gw *g, const char *s)
{
	char *log = e2e_gw_log_read(g), *p = log;
	int n = 0;

	while (p && (p = strstr(p, s))) {
		n++;
		p++;
	}
	free(log);
	return n;
}

/*
 * Commit tokens (issue 32): a commit's connection is broken mid-commit,
 * a hundred times by terminating its backend in PostgreSQL, and again
 * through a proxy that resets the connection at random moments, a reply
 * on its way back included, while a client creates (GUARDED), renames
 * and removes: each change happens once.  The gateway asks the database
 * whether a commit whose answer it lost landed, instead of running it
 * again: no CREATE answers EXIST and no RENAME or REMOVE NOENT for its
 * own earlier success, and the directory holds exactly what the client
 * was told.
 */
static void test_lost_answers(void)
{
	static char db1[256], db2[256];
	struct e2e_gw g = { 0 };
	struct e2e_gw_opts o = { .threads = 2, .meta = db1, .node = "tok-a" };
	struct breaker b = { .url = db1, .times = 100 };
	struct fault_proxy fp;
	char via[512];
	const char *slash;
	pthread_t t;
	int n, wrong, port;

	/* 1: the backend terminated while it runs the commit. */
	E2E_REQUIRE(e2e_pg_createdb(db1, sizeof(db1)) == 0 &&
			    e2e_pg_createdb(db2, sizeof(db2)) == 0,
		    "two databases");
	E2E_REQUIRE(e2e_gw_start_opts(&g, &o) == 0, "gateway");
	E2E_REQUIRE(!pthread_create(&t, NULL, breaker_main, &b), "breaker");
	n = tk_load(&g, "tok", &b.stop, 100000, &wrong);
	pthread_join(t, NULL);
	E2E_CHECK(b.rc == 0, "the database's backends could not be broken "
			     "100 times mid-commit");
	E2E_CHECK(wrong == 0, "%d wrong answers in %d files", wrong, n);
	fprintf(stderr,
		"  [%d files through 100 commits broken in PostgreSQL: %d "
		"asked for]\n",
		n, log_count(&g, "that commit"));
	E2E_CHECK(e2e_gw_stop(&g) == 0, "stop the gateway");
	e2e_gw_cleanup(&g);

	/* 2: the connection reset anywhere (a commit's answer lost on
	 * its way back: it landed), through a proxy. */
	E2E_REQUIRE(sscanf(strrchr(db2, ':') + 1, "%d", &port) == 1,
		    "the database's port in %s", db2);
	E2E_REQUIRE(fault_proxy_start_raw(&fp, port, "pass", 32) == 0,
		    "the proxy");
	slash = strchr(strrchr(db2, ':'), '/');
	snprintf(via, sizeof(via), "%.*s:%d%s", (int)(strrchr(db2, ':') - db2),
		 db2, fp.port, slash);
	o.meta = via;
	o.node = "tok-b";
	E2E_REQUIRE(e2e_gw_start_opts(&g, &o) == 0, "gateway via the proxy");
	E2E_REQUIRE(fault_proxy_mode(&fp, "reset 0.03") == 0, "reset mode");
	{
		_Atomic int stop = 0;
		uint64_t t0 = e2e_now_ms();
		int landed = 0;

		/* Until a hundred resets, at least one of them after a
		 * commit landed (at most 60 s). */
		n = 0;
		wrong = 0;
		while ((fault_proxy_injected(&fp) < 100 || !landed) &&
		       e2e_now_ms() - t0 < 60000) {
			char dn[16];
			int w;

			snprintf(dn, sizeof(dn), "tok%d", n);
			n += tk_load(&g, dn, &stop, 20, &w);
			wrong += w;
			landed = log_count(&g, "that commit landed");
		}
		E2E_CHECK(fault_proxy_mode(&fp, "pass") == 0, "pass mode");
		fprintf(stderr,
			"  [%d files through %ld resets: %d commits asked for, "
			"%d of them had landed]\n",
			n, fault_proxy_injected(&fp),
			log_count(&g, "that commit"), landed);
		E2E_CHECK(wrong == 0, "%d wrong answers in %d files", wrong, n);
		E2E_CHECK(landed > 0, "no reset came after a commit landed");
	}
	E2E_CHECK(e2e_gw_stop(&g) == 0, "stop the gateway");
	e2e_gw_cleanup(&g);
	fault_proxy_stop(&fp);
}

/* ---- tombstones ----------------------------------------------------- */

/* The number in the last "cluster: N tombstones ..." line of g's log. */
static long tombs_dropped(struct e2e_gw *g)
{
	char *log = e2e_gw_log_read(g), *p = log, *last = NULL;
	long n = 0;

	while (p && (p = strstr(p, "cluster: "))) {
		p += strlen("cluster: ");
		if (strstr(p, " tombstones older than the log dropped") ==
		    strchr(p, ' '))
			last = p;
	}
	if (last)
		n = strtol(last, NULL, 10);
	free(log);
	return n;
}

/*
 * A deleted record leaves a tombstone of its version in the replica
 * (so that an older copy read again is skipped), and it must not stay
 * for ever: a namespace that makes and removes names all day would
 * grow without end.  Once the log holds nothing older (pruned; here by
 * hand), the replica drops them, and the names can be made again.
 */
static void test_tombstones(void)
{
	static char db[256];
	static const char *const args[] = { "--log-level", "debug", NULL };
	struct e2e_gw a = { 0 }, b = { 0 };
	struct e2e_gw_opts oa = { .threads = 2,
				  .meta = db,
				  .node = "tomb-a",
				  .extra_args = args },
			   ob = oa;
	struct e2e_rpc *ra, *rb;
	nfs_fh3 ta, tb, da, db_fh;
	char name[32];
	int st;

	E2E_REQUIRE(e2e_pg_createdb(db, sizeof(db)) == 0, "a database");
	E2E_REQUIRE(e2e_gw_start_opts(&a, &oa) == 0, "gateway A");
	ob.node = "tomb-b";
	ob.store_of = &a;
	E2E_REQUIRE(e2e_gw_start_opts(&b, &ob) == 0, "gateway B");
	ra = e2e_rpc_open(a.nfs_port, NFS_PROGRAM, NFS_V3);
	rb = e2e_rpc_open(b.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(ra && rb && !e2e_root_fh(ra, &a, &ta) &&
			    !e2e_root_fh(rb, &b, &tb),
		    "connect");
	{
		MKDIR3args m = { .where = { tb, "tomb" },
				 .attributes = e2e_sattr_mode(0755) };
		MKDIR3res res;

		E2E_REQUIRE(!e2e_nfs3_mkdir(rb, &m, &res) &&
				    res.status == NFS3_OK,
			    "MKDIR on B");
		db_fh = e2e_fh_dup(
			rb, &res.MKDIR3res_u.resok.obj.post_op_fh3_u.handle);
	}
	/* 100 names made and removed on B. */
	for (int i = 0; i < 100; i++) {
		struct tk_call c = { rb, &db_fh, name, NULL };

		snprintf(name, sizeof(name), "n-%d", i);
		st = tk_retry(tk_create, &c);
		if (st == NFS3_OK)
			st = tk_retry(tk_remove, &c);
		E2E_REQUIRE(st == NFS3_OK, "make and remove %s: %s", name,
			    e2e_nfsstat(st));
	}
	/* A name made last, kept: once A sees it, A has applied every
	 * commit before it (a node applies the log in order).  Waiting
	 * for n-99 to be gone was not that: before A applied its create
	 * it was gone too, and earlier names could still be there. */
	{
		struct tk_call c = { rb, &db_fh, "last", NULL };

		E2E_REQUIRE(tk_retry(tk_create, &c) == NFS3_OK, "last on B");
	}
	/* A has applied them all: the directory holds that name alone. */
	{
		uint64_t t0 = e2e_now_ms();
		LOOKUP3res lr;

		while ((e2e_nfs3_lookup(ra, &ta, "tomb", &lr) ||
			lr.status != NFS3_OK) &&
		       e2e_now_ms() - t0 < WINDOW_MS)
			usleep(20000);
		E2E_REQUIRE(lr.status == NFS3_OK, "tomb/ on A");
		da = e2e_fh_dup(ra, &lr.LOOKUP3res_u.resok.object);
		while (lookup_on(ra, &da, "last") != NFS3_OK &&
		       e2e_now_ms() - t0 < WINDOW_MS)
			usleep(20000);
		E2E_CHECK(count_entries(ra, &da) == 1,
			  "tomb/ on A holds only the last name");
	}
	e2e_rpc_close(ra);
	e2e_rpc_close(rb);
	/* The log pruned (as after 10 minutes), then both start again:
	 * each drops the tombstones the deletes left (B its own, A those
	 * it applied). */
	E2E_REQUIRE(e2e_gw_stop(&a) == 0 && e2e_gw_stop(&b) == 0, "stop");
	E2E_REQUIRE(psql_at(db, "DELETE FROM mapfs_log") == 0, "prune");
	E2E_REQUIRE(e2e_gw_restart(&a) == 0 && e2e_gw_restart(&b) == 0,
		    "start again");
	{
		uint64_t t0 = e2e_now_ms();

		while ((tombs_dropped(&a) < 200 || tombs_dropped(&b) < 200) &&
		       e2e_now_ms() - t0 < 10000)
			usleep(100 * 1000);
		fprintf(stderr, "  [tombstones dropped: %ld on A, %ld on B]\n",
			tombs_dropped(&a), tombs_dropped(&b));
		E2E_CHECK(tombs_dropped(&a) >= 200 && tombs_dropped(&b) >= 200,
			  "100 names made and removed leave their tombstones");
	}
	/* The names come back on either. */
	ra = e2e_rpc_open(a.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(ra && !e2e_root_fh(ra, &a, &ta), "connect to A");
	{
		LOOKUP3res lr;

		E2E_REQUIRE(!e2e_nfs3_lookup(ra, &ta, "tomb", &lr) &&
				    lr.status == NFS3_OK,
			    "tomb/ on A again");
		da = e2e_fh_dup(ra, &lr.LOOKUP3res_u.resok.object);
	}
	for (int i = 0; i < 100; i += 7) {
		struct tk_call c = { ra, &da, name, NULL };

		snprintf(name, sizeof(name), "n-%d", i);
		E2E_STATUS("CREATE again on A", tk_retry(tk_create, &c),
			   NFS3_OK);
	}
	e2e_rpc_close(ra);
	E2E_CHECK(e2e_gw_stop(&a) == 0 && e2e_gw_stop(&b) == 0, "stop");
	e2e_gw_cleanup(&a);
	e2e_gw_cleanup(&b);
}

/* ---- the standby promoted mid-commit, again and again ------------- */

struct promoter {
	int times, done, rc;
	uint64_t longest_ms; /* the longest failover + rejoin */
	_Atomic int stop;
};

/* Fail the pair over p->times times, 0.3-0.8 s of load between two. */
static void *promoter_main(void *arg)
{
	struct promoter *p = arg;
	unsigned seed = (unsigned)e2e_now_ms();

	while (p->done < p->times && !p->rc) {
		uint64_t t0;

		usleep(300 * 1000 + (unsigned)(rand_r(&seed) % 500) * 1000);
		t0 = e2e_now_ms();
		if (e2e_pg_pair_failover() || e2e_pg_pair_rejoin()) {
			p->rc = -1;
			break;
		}
		if (e2e_now_ms() - t0 > p->longest_ms)
			p->longest_ms = e2e_now_ms() - t0;
		p->done++;
	}
	p->stop = 1;
	return NULL;
}

/*
 * Commit tokens across a failover (issue 32): the primary is killed
 * and its synchronous standby promoted while a client creates
 * (GUARDED), renames and removes; the old primary comes back as the
 * standby and the pair fails over again, MAPFS_E2E_PROMOTIONS times
 * (3 here; bench/promotions.sh runs 100).  A commit in flight at the
 * kill may have reached the standby: the gateway asks the new primary
 * whether its token landed.  No wrong answer, nothing lost or doubled.
 */
static void test_promotions(void)
{
	static const char *const args[] = { "--lease", "3", NULL };
	const char *env = getenv("MAPFS_E2E_PROMOTIONS");
	struct promoter p = { .times = env ? atoi(env) : 3 };
	struct e2e_gw g = { 0 };
	char url[512];
	pthread_t t;
	int n, wrong;

	if (p.times < 1)
		p.times = 1;
	E2E_REQUIRE(e2e_pg_pair_start(url, sizeof(url)) == 0,
		    "a primary and a standby");
	{
		struct e2e_gw_opts o = { .threads = 2,
					 .meta = url,
					 .node = "prom-a",
					 .extra_args = args };

		E2E_REQUIRE(e2e_gw_start_opts(&g, &o) == 0, "gateway");
	}
	E2E_REQUIRE(!pthread_create(&t, NULL, promoter_main, &p), "promoter");
	n = tk_load(&g, "prom", &p.stop, 1 << 30, &wrong);
	pthread_join(t, NULL);
	E2E_CHECK(p.rc == 0, "failover %d of %d did not go through", p.done + 1,
		  p.times);
	E2E_CHECK(wrong == 0, "%d wrong answers in %d files", wrong, n);
	fprintf(stderr,
		"  [%d files through %d promotions (the longest with its "
		"rejoin %llu ms): %d commits asked for, %d had landed]\n",
		n, p.done, (unsigned long long)p.longest_ms,
		log_count(&g, "that commit"),
		log_count(&g, "that commit landed"));
	E2E_CHECK(e2e_gw_stop(&g) == 0, "stop the gateway");
	e2e_gw_cleanup(&g);
}

/* The one value sql gives on the database at url (psql), into out. */
static int psql_value(const char *url, const char *sql, char *out, size_t cap)
{
	char cmd[2048];
	FILE *f;
	int rc;

	snprintf(cmd, sizeof(cmd), "psql -X -qtA '%s' -c \"%s\"", url, sql);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	out[0] = '\0';
	if (fgets(out, (int)cap, f))
		out[strcspn(out, "\n")] = '\0';
	rc = pclose(f);
	return rc == 0 ? 0 : -1;
}

struct sr_call {
	struct e2e_rpc *r;
	nfs_fh3 dir;
	_Atomic int st; /* INT_MIN: not answered yet */
};

static void *sr_mkdir(void *p)
{
	struct sr_call *c = p;
	MKDIR3args a = { .where = { c->dir, "sr-cut" },
			 .attributes = e2e_sattr_mode(0755) };
	MKDIR3res res;

	c->st = e2e_nfs3_mkdir(c->r, &a, &res) ? -1 : (int)res.status;
	return NULL;
}

/*
 * A commit whose wait for the synchronous standby is cut off is, says
 * PostgreSQL, "committed locally, but might not have been replicated":
 * answered then, a failover to the standby loses a change the client
 * was told is done.  Here no standby answers (synchronous_standby_names
 * names nobody), and the gateway's commit is ended in that wait, as its
 * own doubt does to a commit whose connection was lost (before, it then
 * found the commit landed and answered at once).  The MKDIR must wait
 * until a standby has it, then answer.
 */
static void test_syncrep_cut(void)
{
	struct e2e_gw g = { 0 };
	struct sr_call call = { .st = INT_MIN };
	char url[512], sync_names[256], sql[512];
	pthread_t t;

	E2E_REQUIRE(e2e_pg_pair_start(url, sizeof(url)) == 0,
		    "a primary and a standby");
	{
		struct e2e_gw_opts o = { .threads = 2,
					 .meta = url,
					 .node = "sr-a" };

		E2E_REQUIRE(e2e_gw_start_opts(&g, &o) == 0, "gateway");
	}
	call.r = e2e_rpc_open(g.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(call.r && !e2e_root_fh(call.r, &g, &call.dir),
		    "connect to the gateway");
	E2E_REQUIRE(psql_value(url, "SHOW synchronous_standby_names",
			       sync_names, sizeof(sync_names)) == 0 &&
			    sync_names[0] && !strchr(sync_names, '\''),
		    "the standby is synchronous");
	E2E_REQUIRE(psql_at(url, "ALTER SYSTEM SET synchronous_standby_names"
				 " = 'nobody'") == 0 &&
			    psql_at(url, "SELECT pg_reload_conf()") == 0,
		    "no standby answers");
	E2E_REQUIRE(!pthread_create(&t, NULL, sr_mkdir, &call), "mkdir");
	E2E_CHECK(psql_at(url, "DO \\$\\$ DECLARE t timestamptz :="
			       " clock_timestamp(); BEGIN LOOP"
			       " PERFORM pg_stat_clear_snapshot();"
			       " EXIT WHEN EXISTS (WITH w AS MATERIALIZED"
			       " (SELECT pid FROM pg_stat_activity WHERE"
			       " application_name LIKE 'mapfs-gw %'"
			       " AND wait_event = 'SyncRep'"
			       " AND query LIKE '%mapfs_commit3%')"
			       " SELECT 1 FROM w WHERE"
			       " pg_terminate_backend(pid));"
			       " IF clock_timestamp() - t > interval '20 s'"
			       " THEN RAISE EXCEPTION 'no wait'; END IF;"
			       " PERFORM pg_sleep(0.02); END LOOP;"
			       " END \\$\\$") == 0,
		  "the gateway's commit ended in its wait for the standby");
	sleep(4);
	E2E_CHECK(call.st != NFS3_OK,
		  "MKDIR answered OK while no standby had it");
	snprintf(sql, sizeof(sql),
		 "ALTER SYSTEM SET synchronous_standby_names = '%s'",
		 sync_names);
	E2E_CHECK(psql_at(url, sql) == 0 &&
			  psql_at(url, "SELECT pg_reload_conf()") == 0,
		  "the standby answers again");
	pthread_join(t, NULL);
	E2E_STATUS("MKDIR once the standby has it", call.st, NFS3_OK);
	E2E_STATUS("LOOKUP of it", lookup_on(call.r, &call.dir, "sr-cut"),
		   NFS3_OK);
	e2e_rpc_close(call.r);
	E2E_CHECK(e2e_gw_stop(&g) == 0, "stop the gateway");
	e2e_gw_cleanup(&g);
}

static int config_init(void)
{
	snprintf(cdir, sizeof(cdir), "/tmp/mapfs-e2e-cfg-XXXXXX");
	if (!mkdtemp(cdir))
		return -1;
	return e2e_pg_createdb(cmeta, sizeof(cmeta));
}

static int config_fini(void)
{
	char cmd[128];

	if (!getenv("E2E_KEEP")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cdir);
		if (system(cmd))
			return -1;
	}
	return 0;
}

int main(void)
{
	CU_initialize_registry();
	/* About the cluster engine, not the store: once, on the file store. */
	CU_pSuite c = e2e_backend_is_s3()
			      ? NULL
			      : CU_add_suite("cluster-config", config_init,
					     config_fini);
	if (c) {
		CU_add_test(c, "one node name, one gateway",
			    test_node_name_twice);
		CU_add_test(c, "another store", test_other_store);
		CU_add_test(c, "wrong password, missing database",
			    test_bad_credentials);
		CU_add_test(c, "a newer schema", test_newer_schema);
		CU_add_test(c, "a gateway's own state", test_standalone_state);
		CU_add_test(c, "PostgreSQL late at start", test_db_late);
		CU_add_test(c, "a gateway alone grows into a cluster",
			    test_migrate);
		CU_add_test(c, "one state directory, one process; ctl ready",
			    test_state_locked);
		CU_add_test(c, "a commit's answer lost: asked, not run twice",
			    test_lost_answers);
		CU_add_test(c, "PostgreSQL fails over under load",
			    test_pg_failover);
		CU_add_test(c, "the standby promoted mid-commit, again",
			    test_promotions);
		CU_add_test(c, "a commit cut off in its wait for the standby",
			    test_syncrep_cut);
		CU_add_test(c, "deleted records leave no tombstones for ever",
			    test_tombstones);
	}
	CU_pSuite s = CU_add_suite("cluster", suite_init, suite_fini);
	CU_add_test(s, "one handle on every gateway", test_handles);
	CU_add_test(s, "written on A, read on B", test_write_a_read_b);
	CU_add_test(s, "changes show on the others", test_visibility);
	CU_add_test(s, "concurrent CREATE of one name", test_create_race);
	CU_add_test(s, "removed on one, made again on another",
		    test_name_again);
	CU_add_test(s, "crossing directory renames", test_rename_cycle);
	CU_add_test(s, "one writer per file", test_one_writer);
	CU_add_test(s, "made on A, removed on B: A's flush finishes",
		    test_removed_elsewhere);
	CU_add_test(s, "a link renamed before its copy ran",
		    test_link_renamed_at_once);
	CU_add_test(s, "renamed, then removed at once: nothing to copy",
		    test_renamed_then_removed);
	CU_add_test(s, "kill -9, back at once: nothing lost",
		    test_kill_restart);
	CU_add_test(s, "kill -9, gone: the others take over",
		    test_kill_takeover);
	CU_add_test(s, "taken over: the owner's upload that landed is the file",
		    test_takeover_finds_upload);
	CU_add_test(s, "kill -9 in a renamed directory's store work",
		    test_kill_queue_takeover);
	CU_add_test(s, "kill -9 between the two commits: taken back",
		    test_kill_between_commits);
	CU_add_test(s, "the machine restarted: the state loaded again",
		    test_machine_restart);
	CU_add_test(s, "locks across gateways", test_locks);
	CU_add_test(s, "PostgreSQL down and back", test_db_outage);
	CU_add_test(s, "PostgreSQL read-only and back", test_db_read_only);
	/* A's store requests through a proxy (S3 only). */
	if (e2e_backend_is_s3()) {
		CU_add_test(s,
			    "a link's store copy after its removal elsewhere",
			    test_link_copy_after_remove);
		CU_add_test(s, "a link's first name removed elsewhere first",
			    test_link_copy_before_remove);
		CU_add_test(s, "stopped past its lease: its queue fenced",
			    test_stopped_queue_fenced);
	}
	/* About the engine, not the store: once, on the file store. */
	if (!e2e_backend_is_s3())
		CU_add_test(s, "a record locked by another session",
			    test_record_locked);
	return e2e_run_cunit();
}
