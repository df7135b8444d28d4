/*
 * tests/e2e/test_e2e_fault.c - the write/read suite through a fault proxy
 * (tests/fault/faultproxy) between the gateway and the S3 server (S3
 * backends only): no fault of the network or the server loses or
 * corrupts a byte, and while none can get through the gateway says
 * NFS3ERR_JUKEBOX and lives on.
 *
 *  - writes: files of several sizes (one byte to several fetch chunks) are
 *    written and COMMITted while the proxy resets connections, answers 503
 *    SlowDown, or crawls; each must reach the bucket with exactly its
 *    bytes (SHA-256, read straight from the server, not through the proxy);
 *  - cold reads: a gateway on a fresh state dir and the same key prefix
 *    has nothing cached, so every READ is a ranged GET through the proxy;
 *    it reads every file under each of resets, 503s, truncated bodies and
 *    low bandwidth, and every digest must match;
 *  - no progress: with the proxy stalled, or answering every request with
 *    503, a READ miss answers JUKEBOX and a LOOKUP of a name the stale
 *    listing has not NOENT, within JUKEBOX_MS; cached data is still
 *    served, the gateway lives, and once the proxy passes again the miss
 *    is served with its bytes;
 *  - new names while the store is away: made at once, and another
 *    writer's of the same names kept when it is back.
 *
 * Every fault mode must have injected something (the proxy counts), or
 * the test proves nothing and fails.  The proxy's seed is fixed, so a
 * failure is repeatable as far as the gateway's own timing allows.
 */
#include "harness.h"
#include "../fault/faultctl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#define CHUNK 65536      /* NFS READ/WRITE size */
#define SEED 20240601ull /* the proxy's random sequence */
#define UPLOAD_MS 90000  /* a COMMITted file reaches S3 within */
#define RETRY_MS 60000   /* a JUKEBOX'd call succeeds within */
/*
 * A call that needs a store making no progress answers JUKEBOX within
 * this: DESIGN.md asks for JUKEBOX when a request "cannot finish in time",
 * the store's own retry budget is 20 s (s3/store_s3.c RETRY_BUDGET_MS),
 * and clients give up on a call after 30 s (the harness) to 60 s (Linux
 * timeo=600).
 */
#define JUKEBOX_MS 25000

/* One file per size per write round: sizes cross the 1 MiB fetch chunk. */
static const size_t sizes[] = { 1, 4097, CHUNK, (1u << 20) + 17,
				(3u << 20) + 5 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Upload faults: PUT answers have no body, so nothing to truncate. */
static const char *const write_modes[] = { "reset 0.01", "503 0.3",
					   "slow 1000000" };
#define NROUNDS (sizeof(write_modes) / sizeof(write_modes[0]))

static const char *const read_modes[] = { "reset 0.005", "503 0.5",
					  "truncate 0.5", "slow 1000000" };

struct file {
	char name[32];
	size_t size;
	uint64_t seed;
	char sha[65];
	int uploaded;
};

static struct file files[NROUNDS * NSIZES];
#define NFILES (sizeof(files) / sizeof(files[0]))

static struct fault_proxy P;
static char prefix[128]; /* the bucket prefix the files live under */
static int written;      /* test_write ran to its end */

struct env {
	struct e2e_gw gw;
	struct e2e_rpc *r;
	nfs_fh3 root;
};

static struct env E;

/* ------------------------------------------------------------------ */

static void *file_data(const struct file *f)
{
	char *p = malloc(f->size ? f->size : 1);

	E2E_REQUIRE(p, "malloc %zu", f->size);
	e2e_fill(p, f->size, f->seed);
	return p;
}

static long injected(void)
{
	long n = fault_proxy_injected(&P);

	E2E_REQUIRE(n >= 0, "faultproxy stats");
	return n;
}

static void set_mode(const char *m)
{
	E2E_REQUIRE(fault_proxy_mode(&P, m) == 0, "faultproxy mode %s", m);
}

static void env_start(const char *dir_ttl, const char *upload_delay,
		      const char *pfx)
{
	struct e2e_gw_opts o = { .threads = 2,
				 .dir_ttl = dir_ttl,
				 .upload_delay = upload_delay,
				 .s3_endpoint = P.endpoint,
				 .s3_prefix = pfx };

	memset(&E, 0, sizeof(E));
	E2E_REQUIRE(e2e_gw_start_opts(&E.gw, &o) == 0,
		    "gateway start through the proxy on %s",
		    e2e_backend_name());
	E.r = e2e_rpc_open(E.gw.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(E.r, "NFS connection");
	E2E_REQUIRE(e2e_root_fh(E.r, &E.gw, &E.root) == 0, "root handle");
}

/* A new connection after a call timed out and broke the old one. */
static void env_reconnect(void)
{
	e2e_rpc_close(E.r);
	E.r = e2e_rpc_open(E.gw.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(E.r, "NFS connection");
	E2E_REQUIRE(e2e_root_fh(E.r, &E.gw, &E.root) == 0, "root handle");
}

static void env_stop(void)
{
	if (E.r)
		e2e_rpc_close(E.r);
	E.r = NULL;
	if (E.gw.pid > 0)
		E2E_CHECK(e2e_gw_stop(&E.gw) == 0, "gateway SIGTERM: exit 0");
	e2e_gw_cleanup(&E.gw);
}

static void test_cleanup(void)
{
	env_stop();
	if (P.ctl_fd >= 0)
		fault_proxy_mode(&P, "pass");
}

/* ------------------------------------------------------------------ */
/* NFS calls that a client retries on JUKEBOX, as a real one does      */

/* LOOKUP name in the root; the status after JUKEBOX retries. */
static int lookup(const char *name, nfs_fh3 *fh, int *jukes)
{
	uint64_t t0 = e2e_now_ms();
	LOOKUP3res res;

	for (;;) {
		E2E_RPC(E.r, e2e_nfs3_lookup(E.r, &E.root, name, &res));
		if (res.status != NFS3ERR_JUKEBOX ||
		    e2e_now_ms() - t0 > RETRY_MS)
			break;
		(*jukes)++;
		usleep(200000);
	}
	if (res.status == NFS3_OK)
		*fh = e2e_fh_dup(E.r, &res.LOOKUP3res_u.resok.object);
	return res.status;
}

static nfs_fh3 create(const char *name, int *jukes)
{
	uint64_t t0 = e2e_now_ms();
	CREATE3args a = { .where = { .dir = E.root, .name = (char *)name } };
	CREATE3res res;

	a.how.mode = UNCHECKED;
	a.how.createhow3_u.obj_attributes = e2e_sattr_mode(0644);
	for (;;) {
		E2E_RPC(E.r, e2e_nfs3_create(E.r, &a, &res));
		if (res.status != NFS3ERR_JUKEBOX ||
		    e2e_now_ms() - t0 > RETRY_MS)
			break;
		(*jukes)++;
		usleep(200000);
	}
	E2E_REQUIRE(res.status == NFS3_OK, "CREATE %s: %s", name,
		    e2e_nfsstat(res.status));
	E2E_REQUIRE(res.CREATE3res_u.resok.obj.handle_follows,
		    "CREATE %s: no handle", name);
	return e2e_fh_dup(E.r,
			  &res.CREATE3res_u.resok.obj.post_op_fh3_u.handle);
}

/* WRITE (UNSTABLE) all of buf and COMMIT, each retried on JUKEBOX. */
static void write_commit(const nfs_fh3 *fh, const char *name, const char *buf,
			 size_t len, int *jukes)
{
	uint64_t t0 = e2e_now_ms();
	WRITE3res w;
	COMMIT3res c;

	for (size_t done = 0; done < len;) {
		uint32_t n =
			len - done > CHUNK ? CHUNK : (uint32_t)(len - done);

		E2E_RPC(E.r, e2e_nfs3_write(E.r, fh, done, buf + done, n,
					    UNSTABLE, &w));
		if (w.status == NFS3ERR_JUKEBOX &&
		    e2e_now_ms() - t0 < RETRY_MS) {
			(*jukes)++;
			usleep(200000);
			continue;
		}
		E2E_REQUIRE(w.status == NFS3_OK, "WRITE %s at %zu: %s", name,
			    done, e2e_nfsstat(w.status));
		E2E_REQUIRE(w.WRITE3res_u.resok.count == n,
			    "short WRITE %s: %u of %u", name,
			    w.WRITE3res_u.resok.count, n);
		done += n;
	}
	for (;;) {
		E2E_RPC(E.r, e2e_nfs3_commit(E.r, fh, 0, 0, &c));
		if (c.status != NFS3ERR_JUKEBOX || e2e_now_ms() - t0 > RETRY_MS)
			break;
		(*jukes)++;
		usleep(200000);
	}
	E2E_REQUIRE(c.status == NFS3_OK, "COMMIT %s: %s", name,
		    e2e_nfsstat(c.status));
}

/*
 * READ the whole of f (retrying JUKEBOX) and compare its SHA-256; 1 if
 * every byte is right.
 */
static int read_check(const nfs_fh3 *fh, const struct file *f, int *jukes)
{
	uint64_t t0 = e2e_now_ms();
	struct e2e_sha256 s;
	uint8_t d[32];
	char hex[65];
	size_t done = 0;
	READ3res rd;

	e2e_sha256_init(&s);
	for (;;) {
		uint32_t n;

		E2E_RPC(E.r, e2e_nfs3_read(E.r, fh, done, CHUNK, &rd));
		if (rd.status == NFS3ERR_JUKEBOX &&
		    e2e_now_ms() - t0 < RETRY_MS) {
			(*jukes)++;
			usleep(200000);
			continue;
		}
		if (rd.status != NFS3_OK) {
			E2E_CHECK(0, "READ %s at %zu: %s", f->name, done,
				  e2e_nfsstat(rd.status));
			return 0;
		}
		n = rd.READ3res_u.resok.count;
		if (done + n > f->size) {
			E2E_CHECK(0, "READ %s: more than its %zu bytes",
				  f->name, f->size);
			return 0;
		}
		e2e_sha256_update(&s, rd.READ3res_u.resok.data.data_val, n);
		done += n;
		if (rd.READ3res_u.resok.eof)
			break;
		if (n == 0) {
			E2E_CHECK(0, "READ %s: 0 bytes at %zu without eof",
				  f->name, done);
			return 0;
		}
	}
	e2e_sha256_final(&s, d);
	e2e_digest_hex(d, hex);
	E2E_CHECK(done == f->size, "READ %s: %zu bytes, want %zu", f->name,
		  done, f->size);
	E2E_CHECK(strcmp(hex, f->sha) == 0, "READ %s: SHA-256 %s, want %s",
		  f->name, hex, f->sha);
	return done == f->size && strcmp(hex, f->sha) == 0;
}

/* GET f straight from the server; 1 if it is there with f's bytes. */
static int in_bucket(const struct file *f)
{
	struct e2e_s3_resp r;
	char key[512], hex[65];
	int ok;

	e2e_s3_key(&E.gw, f->name, key, sizeof(key));
	if (e2e_s3_request("GET", key, NULL, NULL, 0, NULL, &r) != 0)
		return 0;
	ok = r.code == 200 && r.len == f->size;
	if (ok) {
		e2e_sha256_hex(r.body, r.len, hex);
		ok = strcmp(hex, f->sha) == 0;
	}
	e2e_s3_resp_free(&r);
	return ok;
}

/* ------------------------------------------------------------------ */

static void test_write(void)
{
	env_start(NULL, "0", NULL);
	snprintf(prefix, sizeof(prefix), "%s", E.gw.s3_prefix);
	for (size_t r = 0; r < NROUNDS; r++) {
		long inj0 = injected();
		uint64_t t0 = e2e_now_ms();
		int jukes = 0, left;

		set_mode(write_modes[r]);
		for (size_t i = 0; i < NSIZES; i++) {
			struct file *f = &files[r * NSIZES + i];
			nfs_fh3 fh;
			char *data;

			snprintf(f->name, sizeof(f->name), "w%zu-%zu", r,
				 sizes[i]);
			f->size = sizes[i];
			f->seed = 1000 * r + i + 1;
			data = file_data(f);
			e2e_sha256_hex(data, f->size, f->sha);
			fh = create(f->name, &jukes);
			write_commit(&fh, f->name, data, f->size, &jukes);
			free(data);
		}
		/* The syncer uploads through the faults; check what landed. */
		do {
			left = 0;
			for (size_t i = 0; i < NSIZES; i++) {
				struct file *f = &files[r * NSIZES + i];

				if (!f->uploaded)
					f->uploaded = in_bucket(f);
				left += !f->uploaded;
			}
			if (left)
				usleep(300000);
		} while (left && e2e_now_ms() - t0 < UPLOAD_MS);
		fprintf(stderr,
			"  write round '%s': %d JUKEBOX, %ld faults, "
			"uploaded in %llu ms\n",
			write_modes[r], jukes, injected() - inj0,
			(unsigned long long)(e2e_now_ms() - t0));
		for (size_t i = 0; i < NSIZES; i++)
			E2E_CHECK(files[r * NSIZES + i].uploaded,
				  "%s: not in the bucket with its bytes %d ms "
				  "after COMMIT (mode %s)",
				  files[r * NSIZES + i].name, UPLOAD_MS,
				  write_modes[r]);
		E2E_CHECK(injected() > inj0,
			  "mode '%s' injected no fault: "
			  "this round proved nothing",
			  write_modes[r]);
		E2E_REQUIRE(e2e_gw_alive(&E.gw), "gateway alive after '%s'",
			    write_modes[r]);
	}
	set_mode("pass");
	env_stop();
	written = 1;
}

static void test_cold_reads(void)
{
	E2E_REQUIRE(written, "needs the files of the write test");
	for (size_t m = 0; m < sizeof(read_modes) / sizeof(read_modes[0]);
	     m++) {
		uint64_t t0;
		long inj0;
		int jukes = 0, good = 0;

		/* Fresh state, same prefix: nothing is cached. */
		set_mode("pass");
		env_start(NULL, NULL, prefix);
		inj0 = injected();
		t0 = e2e_now_ms();
		set_mode(read_modes[m]);
		for (size_t i = 0; i < NFILES; i++) {
			nfs_fh3 fh;
			int st = lookup(files[i].name, &fh, &jukes);

			E2E_STATUS(files[i].name, st, NFS3_OK);
			if (st == NFS3_OK)
				good += read_check(&fh, &files[i], &jukes);
		}
		fprintf(stderr,
			"  cold reads '%s': %d of %zu files right, %d "
			"JUKEBOX, %ld faults, %llu ms\n",
			read_modes[m], good, NFILES, jukes, injected() - inj0,
			(unsigned long long)(e2e_now_ms() - t0));
		E2E_CHECK(injected() > inj0,
			  "mode '%s' injected no fault: "
			  "these reads proved nothing",
			  read_modes[m]);
		E2E_CHECK(e2e_gw_alive(&E.gw), "gateway alive after '%s'",
			  read_modes[m]);
		set_mode("pass");
		env_stop();
	}
}

/*
 * A call that needs the store, with the proxy letting nothing through:
 * want (JUKEBOX, or for a LOOKUP of a name the listing has not, NOENT
 * from it) within JUKEBOX_MS (an RPC timeout counts as a failure).
 */
static void want_within(const char *what, int is_read, const nfs_fh3 *fh,
			const char *name, int want)
{
	uint64_t t0 = e2e_now_ms(), ms;
	int rc, st = -1;

	if (is_read) {
		READ3res rd;

		rc = e2e_nfs3_read(E.r, fh, 0, 4096, &rd);
		if (!rc)
			st = rd.status;
	} else {
		LOOKUP3res lr;

		rc = e2e_nfs3_lookup(E.r, &E.root, name, &lr);
		if (!rc)
			st = lr.status;
	}
	ms = e2e_now_ms() - t0;
	fprintf(stderr, "  %s: %s after %llu ms\n", what,
		rc ? e2e_rpc_error(E.r) : e2e_nfsstat(st),
		(unsigned long long)ms);
	if (rc) {
		E2E_CHECK(0, "%s: no answer (%s); want %s within %d ms", what,
			  e2e_rpc_error(E.r), e2e_nfsstat(want), JUKEBOX_MS);
		env_reconnect();
		return;
	}
	E2E_STATUS(what, st, want);
	E2E_CHECK(ms <= JUKEBOX_MS,
		  "%s: answered after %llu ms, want "
		  "within %d ms",
		  what, (unsigned long long)ms, JUKEBOX_MS);
}

static void test_no_progress(void)
{
	static const char *const modes[] = { "503 1", "stall" };
	nfs_fh3 fh[NFILES];
	int jukes = 0;

	E2E_REQUIRE(written, "needs the files of the write test");
	set_mode("pass");
	env_start("1", NULL, prefix);
	for (size_t i = 0; i < NFILES; i++)
		E2E_REQUIRE(lookup(files[i].name, &fh[i], &jukes) == NFS3_OK,
			    "LOOKUP %s", files[i].name);
	/* files[0] cached; files[1 + m] stay misses for mode m. */
	E2E_REQUIRE(read_check(&fh[0], &files[0], &jukes), "READ %s",
		    files[0].name);
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		const struct file *miss = &files[NFILES - 1 - m];
		char what[128];
		long inj0 = injected();

		set_mode(modes[m]);
		usleep(1500000); /* past --dir-ttl 1: listings must be redone */
		snprintf(what, sizeof(what), "READ miss %s (proxy '%s')",
			 miss->name, modes[m]);
		want_within(what, 1, &fh[NFILES - 1 - m], NULL,
			    NFS3ERR_JUKEBOX);
		snprintf(what, sizeof(what),
			 "LOOKUP of a new name (proxy '%s')", modes[m]);
		want_within(what, 0, NULL, "not-there-yet", NFS3ERR_NOENT);
		E2E_CHECK(read_check(&fh[0], &files[0], &jukes),
			  "READ of cached %s with the proxy '%s'",
			  files[0].name, modes[m]);
		E2E_REQUIRE(e2e_gw_alive(&E.gw),
			    "gateway died with the proxy "
			    "'%s'",
			    modes[m]);
		E2E_CHECK(e2e_nfs3_null(E.r) == 0,
			  "NULL with the proxy '%s': "
			  "%s",
			  modes[m], e2e_rpc_error(E.r));
		/* A stall injects by doing nothing: it counts no faults. */
		if (strcmp(modes[m], "stall") != 0)
			E2E_CHECK(injected() > inj0,
				  "mode '%s' injected no "
				  "fault",
				  modes[m]);
		set_mode("pass");
		E2E_CHECK(read_check(&fh[NFILES - 1 - m], miss, &jukes),
			  "READ %s once the proxy passes again", miss->name);
	}
	E2E_CHECK(e2e_gw_alive(&E.gw), "gateway alive at the end");
	env_stop();
}

/* ---- the store flapping ---- */

static atomic_int flap_stop;

/* Refused (503 to everything) and back, every second, until told. */
static void *flapper(void *arg)
{
	(void)arg;
	while (!atomic_load(&flap_stop)) {
		fault_proxy_mode(&P, "503 1");
		usleep(1000000);
		fault_proxy_mode(&P, "pass");
		usleep(1000000);
	}
	return NULL;
}

/*
 * The store up and down every second (issue 17): writes, creates and
 * reads of cached data go on through it; once it holds still, every file
 * is in the bucket with its bytes and reads back right: neither the
 * cache nor the journal took harm from uploads cut in every state.
 */
static void test_flapping(void)
{
	struct file fl[NSIZES * 2];
	nfs_fh3 fh[NSIZES * 2];
	pthread_t th;
	uint64_t t0;
	int jukes = 0, left;

	env_start("1", "0", NULL);
	atomic_store(&flap_stop, 0);
	E2E_REQUIRE(pthread_create(&th, NULL, flapper, NULL) == 0, "thread");
	t0 = e2e_now_ms();
	for (size_t i = 0; i < NSIZES * 2; i++) {
		struct file *f = &fl[i];
		char *data;

		memset(f, 0, sizeof(*f));
		snprintf(f->name, sizeof(f->name), "flap%zu", i);
		f->size = sizes[i % NSIZES];
		f->seed = 5000 + i;
		data = file_data(f);
		e2e_sha256_hex(data, f->size, f->sha);
		fh[i] = create(f->name, &jukes);
		write_commit(&fh[i], f->name, data, f->size, &jukes);
		free(data);
		/* Cached data reads through the flapping. */
		E2E_CHECK(read_check(&fh[i / 2], &fl[i / 2], &jukes),
			  "READ %s while the store flaps", fl[i / 2].name);
	}
	/* A few more flaps with the uploads under way. */
	while (e2e_now_ms() - t0 < 8000)
		usleep(200000);
	atomic_store(&flap_stop, 1);
	pthread_join(th, NULL);
	set_mode("pass");
	fprintf(stderr,
		"  %zu files written through a flapping store in "
		"%llu ms, %d JUKEBOX\n",
		NSIZES * 2, (unsigned long long)(e2e_now_ms() - t0), jukes);
	t0 = e2e_now_ms();
	do {
		left = 0;
		for (size_t i = 0; i < NSIZES * 2; i++) {
			if (!fl[i].uploaded)
				fl[i].uploaded = in_bucket(&fl[i]);
			left += !fl[i].uploaded;
		}
		if (left)
			usleep(300000);
	} while (left && e2e_now_ms() - t0 < UPLOAD_MS);
	for (size_t i = 0; i < NSIZES * 2; i++) {
		E2E_CHECK(fl[i].uploaded,
			  "%s: not in the bucket with its "
			  "bytes after the store held still",
			  fl[i].name);
		E2E_CHECK(read_check(&fh[i], &fl[i], &jukes),
			  "READ %s after the flapping", fl[i].name);
	}
	E2E_CHECK(e2e_gw_alive(&E.gw), "gateway alive at the end");
	env_stop();
}

/* ---- new names while the store is away (issue 34) ---- */

#define NEW_NAME_MS 2000 /* a call that makes a name answers within */

/* GET key (under the gateway's prefix) straight from the server: the
 * body into out (cap bytes, NUL-terminated); the HTTP status. */
static int direct_get(const char *path, char *out, size_t cap)
{
	struct e2e_s3_resp r;
	char key[512];
	int code;

	e2e_s3_key(&E.gw, path, key, sizeof(key));
	if (e2e_s3_request("GET", key, NULL, NULL, 0, NULL, &r) != 0)
		return -1;
	code = r.code;
	snprintf(out, cap, "%.*s", (int)r.len, r.body ? r.body : "");
	e2e_s3_resp_free(&r);
	return code;
}

static int direct_put(const char *path, const char *body)
{
	struct e2e_s3_resp r;
	char key[512];
	int code;

	e2e_s3_key(&E.gw, path, key, sizeof(key));
	if (e2e_s3_request("PUT", key, NULL, body, strlen(body), NULL, &r))
		return -1;
	code = r.code;
	e2e_s3_resp_free(&r);
	return code;
}

/* The first key of the bucket under the gateway's prefix that starts
 * with path, into out; 0 or -1. */
static int direct_find(const char *path, char *out, size_t cap)
{
	struct e2e_s3_resp r;
	char *p, *e;
	int rc = -1;

	if (e2e_s3_list(&E.gw, path, &r))
		return -1;
	if (r.code == 200 && (p = strstr(r.body, "<Key>")) &&
	    (e = strstr(p, "</Key>"))) {
		p += 5;
		snprintf(out, cap, "%.*s", (int)(e - p), p);
		rc = 0;
	}
	e2e_s3_resp_free(&r);
	return rc;
}

/* A call's status, and it must come within NEW_NAME_MS. */
static void quick(const char *what, int st, int want, uint64_t t0)
{
	uint64_t ms = e2e_now_ms() - t0;

	E2E_STATUS(what, st, want);
	E2E_CHECK(ms <= NEW_NAME_MS, "%s: answered after %llu ms, want %d",
		  what, (unsigned long long)ms, NEW_NAME_MS);
}

static nfs_fh3 make_file(const nfs_fh3 *dir, const char *name, int how)
{
	CREATE3args a = { .where = { .dir = *dir, .name = (char *)name } };
	uint64_t t0 = e2e_now_ms();
	CREATE3res res;
	char what[80];

	a.how.mode = how;
	if (how == EXCLUSIVE)
		memcpy(a.how.createhow3_u.verf, "verf-ex!",
		       NFS3_CREATEVERFSIZE);
	else
		a.how.createhow3_u.obj_attributes = e2e_sattr_mode(0644);
	E2E_RPC(E.r, e2e_nfs3_create(E.r, &a, &res));
	snprintf(what, sizeof(what), "CREATE %s (store away)", name);
	quick(what, res.status, NFS3_OK, t0);
	E2E_REQUIRE(res.status == NFS3_OK &&
			    res.CREATE3res_u.resok.obj.handle_follows,
		    "CREATE %s", name);
	return e2e_fh_dup(E.r,
			  &res.CREATE3res_u.resok.obj.post_op_fh3_u.handle);
}

/*
 * The store away (the proxy answers 503 to everything) while a client
 * makes new names the ordinary way: a LOOKUP of a name the last listing
 * has not answers NOENT from it, and CREATE (all three modes), MKDIR,
 * SYMLINK, MKNOD, LINK and RENAME to a new name go through within 2 s,
 * as writes do.  Meanwhile another S3 client, which still reaches the
 * server, makes two of those names.  Once the store is back: theirs
 * stay at their names and ours are beside them (NAME.conflict-...),
 * everything else is in the bucket as the NFS client left it, and the
 * log says how many names the outage made.  A directory never listed
 * still waits (JUKEBOX).
 */
static void test_new_names(void)
{
	static const char old_body[] = "old bytes, renamed while away";
	static const char old2_body[] = "renamed onto a name they made";
	nfs_fh3 fold, fold2, fnew, fclash, fex, d, fin, remote, fh;
	char buf[256], key[512];
	int jukes = 0, st;
	uint64_t t0;

	set_mode("pass");
	env_start("1", "0", NULL);
	/* Before: two files up, and a directory another writer made,
	 * seen in the root's listing but never listed itself. */
	fold = create("old.txt", &jukes);
	write_commit(&fold, "old.txt", old_body, strlen(old_body), &jukes);
	fold2 = create("old2.txt", &jukes);
	write_commit(&fold2, "old2.txt", old2_body, strlen(old2_body), &jukes);
	E2E_REQUIRE(direct_put("remote/x", "x") == 200, "PUT remote/x");
	t0 = e2e_now_ms();
	while ((direct_get("old.txt", buf, sizeof(buf)) != 200 ||
		direct_get("old2.txt", buf, sizeof(buf)) != 200) &&
	       e2e_now_ms() - t0 < UPLOAD_MS)
		usleep(200000);
	usleep(1200000); /* past the TTL: the root is listed again */
	E2E_REQUIRE(lookup("remote", &remote, &jukes) == NFS3_OK,
		    "remote/ seen in the root's listing");

	/* The store goes away; the first call that needs it finds out
	 * (its retries, about 20 s) and is answered from the listing. */
	set_mode("503 1");
	usleep(1200000);
	{
		LOOKUP3res lr;

		E2E_RPC(E.r, e2e_nfs3_lookup(E.r, &E.root, "new.txt", &lr));
		E2E_STATUS("LOOKUP new.txt, the store just gone", lr.status,
			   NFS3ERR_NOENT);
	}
	E2E_REQUIRE(e2e_gw_log_count(&E.gw, "not answering") >= 1,
		    "the gateway did not see the store go");

	/* The ordinary ways to make a name, each at once. */
	{
		LOOKUP3res lr;

		t0 = e2e_now_ms();
		E2E_RPC(E.r, e2e_nfs3_lookup(E.r, &E.root, "new.txt", &lr));
		quick("LOOKUP new.txt (store away)", lr.status, NFS3ERR_NOENT,
		      t0);
		/* Never listed: nothing to answer with. */
		E2E_RPC(E.r, e2e_nfs3_lookup(E.r, &remote, "y", &lr));
		E2E_STATUS("LOOKUP in remote/, never listed (store away)",
			   lr.status, NFS3ERR_JUKEBOX);
	}
	fnew = make_file(&E.root, "new.txt", GUARDED);
	write_commit(&fnew, "new.txt", "fresh", 5, &jukes);
	fclash = make_file(&E.root, "clash.txt", UNCHECKED);
	write_commit(&fclash, "clash.txt", "ours", 4, &jukes);
	fex = make_file(&E.root, "excl.txt", EXCLUSIVE);
	{
		MKDIR3args a = { .where = { E.root, "nd" },
				 .attributes = e2e_sattr_mode(0755) };
		MKDIR3res res;

		t0 = e2e_now_ms();
		E2E_RPC(E.r, e2e_nfs3_mkdir(E.r, &a, &res));
		quick("MKDIR nd (store away)", res.status, NFS3_OK, t0);
		E2E_REQUIRE(res.status == NFS3_OK, "MKDIR nd");
		d = e2e_fh_dup(E.r,
			       &res.MKDIR3res_u.resok.obj.post_op_fh3_u.handle);
	}
	{
		LOOKUP3res lr;

		t0 = e2e_now_ms();
		E2E_RPC(E.r, e2e_nfs3_lookup(E.r, &d, "in.txt", &lr));
		quick("LOOKUP nd/in.txt (store away)", lr.status, NFS3ERR_NOENT,
		      t0);
	}
	fin = make_file(&d, "in.txt", GUARDED);
	write_commit(&fin, "nd/in.txt", "inside", 6, &jukes);
	{
		SYMLINK3args a = { .where = { E.root, "sym" } };
		SYMLINK3res res;

		a.symlink.symlink_attributes = e2e_sattr_mode(0777);
		a.symlink.symlink_data = "new.txt";
		t0 = e2e_now_ms();
		E2E_RPC(E.r, e2e_nfs3_symlink(E.r, &a, &res));
		quick("SYMLINK sym (store away)", res.status, NFS3_OK, t0);
	}
	{
		MKNOD3args a = { .where = { E.root, "fifo" } };
		MKNOD3res res;

		a.what.type = NF3FIFO;
		a.what.mknoddata3_u.pipe_attributes = e2e_sattr_mode(0644);
		t0 = e2e_now_ms();
		E2E_RPC(E.r, e2e_nfs3_mknod(E.r, &a, &res));
		quick("MKNOD fifo (store away)", res.status, NFS3_OK, t0);
	}
	{
		LINK3res res;

		t0 = e2e_now_ms();
		E2E_RPC(E.r,
			e2e_nfs3_link(E.r, &fnew, &E.root, "hard.txt", &res));
		quick("LINK hard.txt (store away)", res.status, NFS3_OK, t0);
	}
	{
		RENAME3res res;

		t0 = e2e_now_ms();
		E2E_RPC(E.r, e2e_nfs3_rename(E.r, &E.root, "old.txt", &E.root,
					     "moved.txt", &res));
		quick("RENAME old.txt moved.txt (store away)", res.status,
		      NFS3_OK, t0);
		t0 = e2e_now_ms();
		E2E_RPC(E.r, e2e_nfs3_rename(E.r, &E.root, "old2.txt", &E.root,
					     "clash2.txt", &res));
		quick("RENAME old2.txt clash2.txt (store away)", res.status,
		      NFS3_OK, t0);
	}
	/* A file and a directory, which the other writer makes the other
	 * kind. */
	{
		MKDIR3args a = { .where = { E.root, "df" },
				 .attributes = e2e_sattr_mode(0755) };
		MKDIR3res res;
		nfs_fh3 ff, fdf;

		ff = make_file(&E.root, "fd", GUARDED);
		write_commit(&ff, "fd", "our file", 8, &jukes);
		E2E_RPC(E.r, e2e_nfs3_mkdir(E.r, &a, &res));
		E2E_REQUIRE(res.status == NFS3_OK, "MKDIR df");
		fdf = e2e_fh_dup(
			E.r, &res.MKDIR3res_u.resok.obj.post_op_fh3_u.handle);
		ff = make_file(&fdf, "in", GUARDED);
		write_commit(&ff, "df/in", "in our dir", 10, &jukes);
	}
	/* Another writer, who still reaches the store, makes four of them. */
	E2E_REQUIRE(direct_put("clash.txt", "theirs") == 200, "their PUT");
	E2E_REQUIRE(direct_put("clash2.txt", "theirs too") == 200, "their PUT");
	E2E_REQUIRE(direct_put("fd/theirs", "their dir's file") == 200,
		    "their PUT");
	E2E_REQUIRE(direct_put("df", "their file") == 200, "their PUT");

	/* Back. */
	set_mode("pass");
	t0 = e2e_now_ms();
	while (e2e_gw_log_count(&E.gw, "the outage's changes are in the "
				       "store") < 1 &&
	       e2e_now_ms() - t0 < UPLOAD_MS)
		usleep(200000);
	E2E_CHECK(e2e_gw_log_count(&E.gw, "the outage's changes are in the "
					  "store") >= 1,
		  "no replay done line in the log");
	{
		char *log = e2e_gw_log_read(&E.gw), *p;
		unsigned long names = 0, conflicts = 0;

		p = log ? strstr(log, "the outage's changes are in the store (")
			: NULL;
		if (p)
			(void)sscanf(p,
				     "the outage's changes are in the store "
				     "(%*u ms): %lu names made while it was "
				     "away, %lu of",
				     &names, &conflicts);
		E2E_CHECK(conflicts == 4, "the log says %lu conflicts, want 4",
			  conflicts);
		/* new, clash, excl, nd, in, sym, fifo, hard, two renames,
		 * fd, df, df/in */
		E2E_CHECK(names >= 13, "the log says %lu names were made",
			  names);
		fprintf(stderr, "  [the outage made %lu names]\n", names);
		free(log);
	}
	/* The bucket: what the client left, and theirs kept. */
	st = direct_get("new.txt", buf, sizeof(buf));
	E2E_CHECK(st == 200 && !strcmp(buf, "fresh"), "new.txt: %d %s", st,
		  buf);
	st = direct_get("hard.txt", buf, sizeof(buf));
	E2E_CHECK(st == 200 && !strcmp(buf, "fresh"), "hard.txt: %d %s", st,
		  buf);
	st = direct_get("nd/in.txt", buf, sizeof(buf));
	E2E_CHECK(st == 200 && !strcmp(buf, "inside"), "nd/in.txt: %d %s", st,
		  buf);
	st = direct_get("moved.txt", buf, sizeof(buf));
	E2E_CHECK(st == 200 && !strcmp(buf, old_body), "moved.txt: %d %s", st,
		  buf);
	E2E_CHECK(direct_get("old.txt", buf, sizeof(buf)) == 404,
		  "old.txt still in the bucket after its rename");
	E2E_CHECK(direct_get("old2.txt", buf, sizeof(buf)) == 404,
		  "old2.txt still in the bucket after its rename");
	E2E_CHECK(direct_get("excl.txt", buf, sizeof(buf)) == 200,
		  "excl.txt not in the bucket");
	E2E_CHECK(direct_get("sym", buf, sizeof(buf)) == 200, "sym not there");
	E2E_CHECK(direct_get("fifo", buf, sizeof(buf)) == 200,
		  "fifo not there");
	st = direct_get("clash.txt", buf, sizeof(buf));
	E2E_CHECK(st == 200 && !strcmp(buf, "theirs"),
		  "clash.txt: %d %s, want theirs", st, buf);
	st = direct_get("clash2.txt", buf, sizeof(buf));
	E2E_CHECK(st == 200 && !strcmp(buf, "theirs too"),
		  "clash2.txt: %d %s, want theirs", st, buf);
	E2E_CHECK(direct_find("clash.txt.conflict-", key, sizeof(key)) == 0,
		  "ours of clash.txt is not beside theirs");
	E2E_CHECK(direct_find("clash2.txt.conflict-", key, sizeof(key)) == 0,
		  "ours of clash2.txt (a rename) is not beside theirs");
	if (!direct_find("clash2.txt.conflict-", key, sizeof(key))) {
		const char *slash = strrchr(key, '/');
		char body[256];

		st = direct_get(slash ? slash + 1 : key, body, sizeof(body));
		E2E_CHECK(st == 200 && !strcmp(body, old2_body),
			  "%s: %d %s, want the renamed file's bytes", key, st,
			  body);
	}
	/* The other kind: theirs at the name, ours beside it. */
	st = direct_get("fd/theirs", buf, sizeof(buf));
	E2E_CHECK(st == 200 && !strcmp(buf, "their dir's file"),
		  "fd/theirs: %d %s", st, buf);
	st = direct_get("df", buf, sizeof(buf));
	E2E_CHECK(st == 200 && !strcmp(buf, "their file"), "df: %d %s", st,
		  buf);
	E2E_CHECK(direct_get("fd", buf, sizeof(buf)) == 404,
		  "our file fd was uploaded at their directory's name");
	E2E_CHECK(direct_get("df/in", buf, sizeof(buf)) == 404,
		  "our df/in went under their file's name");
	st = direct_find("fd.conflict-", key, sizeof(key));
	E2E_CHECK(st == 0, "our file fd is not beside their directory");
	if (!st) {
		const char *slash = strrchr(key, '/');

		st = direct_get(slash ? slash + 1 : key, buf, sizeof(buf));
		E2E_CHECK(st == 200 && !strcmp(buf, "our file"), "%s: %d %s",
			  key, st, buf);
	}
	st = direct_find("df.conflict-", key, sizeof(key));
	E2E_CHECK(st == 0, "our directory df is not beside their file");
	if (!st) {
		/* PREFIX/df.conflict-NODE-TIME/ (its marker) or .../in */
		char *dc = strstr(key, "df.conflict-"), *e, path[600];

		if ((e = strchr(dc, '/')))
			*e = '\0';
		snprintf(path, sizeof(path), "%s/in", dc);
		st = direct_get(path, buf, sizeof(buf));
		E2E_CHECK(st == 200 && !strcmp(buf, "in our dir"), "%s: %d %s",
			  path, st, buf);
	}
	/* Through NFS: theirs at the name. */
	t0 = e2e_now_ms();
	do {
		READ3res rd;

		if (lookup("clash.txt", &fh, &jukes) == NFS3_OK &&
		    !e2e_nfs3_read(E.r, &fh, 0, 64, &rd) &&
		    rd.status == NFS3_OK && rd.READ3res_u.resok.count == 6 &&
		    !memcmp(rd.READ3res_u.resok.data.data_val, "theirs", 6))
			break;
		usleep(300000);
	} while (e2e_now_ms() - t0 < UPLOAD_MS);
	E2E_CHECK(e2e_now_ms() - t0 < UPLOAD_MS,
		  "clash.txt through NFS is not theirs");
	(void)fex;
	E2E_CHECK(e2e_gw_alive(&E.gw), "gateway alive at the end");
	env_stop();
}

static int suite_init(void)
{
	const struct e2e_s3 *s3 = e2e_s3_server();
	const char *port;

	if (!s3)
		return 1;
	port = strrchr(s3->endpoint, ':');
	return fault_proxy_start(&P, atoi(port + 1), "pass", SEED) ? 1 : 0;
}

static int suite_clean(void)
{
	return fault_proxy_stop(&P) ? 1 : 0;
}

/* A gateway through the proxy with name (body) in the store, its
 * upload done, and (link not NULL) another name link of it, in the store
 * too; then the store away and name renamed to to. */
static void renamed_while_away(const char *name, const char *body,
			       const char *link, const char *to)
{
	char buf[256];
	int jukes = 0;
	nfs_fh3 f;
	uint64_t t0;

	set_mode("pass");
	env_start("1", "0", NULL);
	f = create(name, &jukes);
	write_commit(&f, name, body, strlen(body), &jukes);
	if (link) {
		LINK3res res;

		E2E_RPC(E.r, e2e_nfs3_link(E.r, &f, &E.root, link, &res));
		E2E_STATUS("LINK", res.status, NFS3_OK);
	}
	t0 = e2e_now_ms();
	while ((direct_get(name, buf, sizeof(buf)) != 200 ||
		(link && direct_get(link, buf, sizeof(buf)) != 200)) &&
	       e2e_now_ms() - t0 < UPLOAD_MS)
		usleep(100000);
	E2E_REQUIRE(
		direct_get(name, buf, sizeof(buf)) == 200 &&
			(!link || direct_get(link, buf, sizeof(buf)) == 200),
		"%s not uploaded", name);
	set_mode("503 1");
	{
		RENAME3res res;

		E2E_RPC(E.r,
			e2e_nfs3_rename(E.r, &E.root, name, &E.root, to, &res));
		E2E_STATUS("RENAME (store away)", res.status, NFS3_OK);
	}
}

/*
 * A rename's COPY that finds its source gone and its target there: the
 * record's COPY and DEL already ran elsewhere (in a cluster, a node that
 * took this one for dead while it was stopped ran its records too; here
 * the store is changed by hand while it is away).  That copy is no other
 * writer's object: the name stays, nothing goes aside.  Before, the
 * target was taken for another writer's and the file moved to
 * NAME.conflict-..., whose own copy then failed: the acknowledged name
 * was gone (found by the fault campaign, issue 48).
 */
static void test_copy_done_elsewhere(void)
{
	static const char body[] = "moved by another node first";
	char buf[256], key[512], out[4096];
	int jukes = 0;
	nfs_fh3 f;

	renamed_while_away("mv.txt", body, NULL, "moved.txt");
	/* The record's work, done by someone else meanwhile. */
	E2E_REQUIRE(direct_put("moved.txt", body) == 200, "PUT moved.txt");
	{
		struct e2e_s3_resp r;

		e2e_s3_key(&E.gw, "mv.txt", key, sizeof(key));
		E2E_REQUIRE(e2e_s3_request("DELETE", key, NULL, NULL, 0, NULL,
					   &r) == 0 &&
				    r.code == 204,
			    "DELETE mv.txt");
		e2e_s3_resp_free(&r);
	}
	set_mode("pass");
	E2E_CHECK(e2e_ctl(&E.gw, "flush", out, sizeof(out)) == 0, "flush: %s",
		  out);
	E2E_CHECK(direct_find("moved.txt.conflict-", key, sizeof(key)) != 0,
		  "moved aside as a conflict: %s", key);
	E2E_CHECK(lookup("moved.txt", &f, &jukes) == NFS3_OK,
		  "the name moved.txt is gone");
	E2E_CHECK(direct_get("moved.txt", buf, sizeof(buf)) == 200 &&
			  !strcmp(buf, body),
		  "moved.txt in the store: '%s'", buf);
	E2E_CHECK(e2e_gw_log_count(&E.gw, "goes to moved.txt.conflict") == 0,
		  "a conflict was logged");
	/* Before: a name with no object left behind, which fsck finds. */
	E2E_CHECK(e2e_ctl(&E.gw, "fsck", out, sizeof(out)) == 0,
		  "fsck after the flush:\n%s", out);
}

/*
 * Put body at to straight into the store, with the id header (e.g.
 * "x-amz-meta-mapfs-wid") that the object at from carries: an upload of
 * the same file, as another node of a cluster would make it.
 */
static void put_with_id_of(const char *from, const char *header, const char *to,
			   const char *body)
{
	char key[512], id[128], hdr[192];
	const char *hdrs[] = { hdr, NULL };
	struct e2e_s3_resp r;

	e2e_s3_key(&E.gw, from, key, sizeof(key));
	E2E_REQUIRE(e2e_s3_request("HEAD", key, NULL, NULL, 0, NULL, &r) == 0 &&
			    r.code == 200 &&
			    !e2e_s3_header(&r, header, id, sizeof(id)),
		    "%s's %s", from, header);
	e2e_s3_resp_free(&r);
	snprintf(hdr, sizeof(hdr), "%s: %s", header, id);
	e2e_s3_key(&E.gw, to, key, sizeof(key));
	E2E_REQUIRE(e2e_s3_request("PUT", key, NULL, body, strlen(body), hdrs,
				   &r) == 0 &&
			    r.code == 200,
		    "PUT %s", to);
	e2e_s3_resp_free(&r);
}

/*
 * A rename's COPY that finds, at the new name, an upload of the file
 * itself (its write id names the file): in a cluster the node that took
 * the file over uploads it to the name its record has now before the
 * cut-off node's COPY of the old object runs.  That is the file's newer
 * version, no other writer's: it stays, nothing goes aside.  Before, the
 * file moved aside as a conflict with its own upload (found by the fault
 * campaign, issue 48).  The upload is made here by hand, with the write
 * id the file's object carries.
 */
static void test_copy_meets_own_upload(void)
{
	static const char body[] = "first version";
	static const char newer[] = "the newer upload, by the taker";
	char buf[256], key[512], out[4096];
	int jukes = 0;
	nfs_fh3 f;

	renamed_while_away("own.txt", body, NULL, "own2.txt");
	/* (the old object stays: the store is away for the gateway) */
	put_with_id_of("own.txt", "x-amz-meta-mapfs-wid", "own2.txt", newer);
	set_mode("pass");
	E2E_CHECK(e2e_ctl(&E.gw, "flush", out, sizeof(out)) == 0, "flush: %s",
		  out);
	E2E_CHECK(direct_find("own2.txt.conflict-", key, sizeof(key)) != 0,
		  "moved aside as a conflict: %s", key);
	E2E_CHECK(e2e_gw_log_count(&E.gw, "goes to own2.txt.conflict") == 0,
		  "a conflict was logged");
	E2E_CHECK(direct_get("own2.txt", buf, sizeof(buf)) == 200 &&
			  !strcmp(buf, newer),
		  "own2.txt in the store: '%s'", buf);
	E2E_CHECK(direct_get("own.txt", buf, sizeof(buf)) == 404,
		  "own.txt still in the store");
	E2E_CHECK(lookup("own2.txt", &f, &jukes) == NFS3_OK,
		  "the name own2.txt is gone");
}

/*
 * The same for a file with two names: its objects carry its link id
 * (x-amz-meta-mapfs-link) in place of a write id, and the taker's upload
 * to the new name did too; before, only a write id was looked at and the
 * file went aside (the fault campaign's seed 2, issue 48).
 */
static void test_copy_meets_own_upload_linked(void)
{
	static const char newer[] = "the newer upload of a linked file";
	char buf[256], out[4096];
	int jukes = 0;
	nfs_fh3 f;

	renamed_while_away("lk.txt", "linked, first version", "lk2.txt",
			   "lk3.txt");
	put_with_id_of("lk2.txt", "x-amz-meta-mapfs-link", "lk3.txt", newer);
	set_mode("pass");
	E2E_CHECK(e2e_ctl(&E.gw, "flush", out, sizeof(out)) == 0, "flush: %s",
		  out);
	E2E_CHECK(e2e_gw_log_count(&E.gw, "goes to lk3.txt.conflict") == 0,
		  "a conflict was logged");
	E2E_CHECK(direct_get("lk3.txt", buf, sizeof(buf)) == 200 &&
			  !strcmp(buf, newer),
		  "lk3.txt in the store: '%s'", buf);
	E2E_CHECK(lookup("lk3.txt", &f, &jukes) == NFS3_OK,
		  "the name lk3.txt is gone");
}

int main(void)
{
	CU_pSuite s;

	if (!e2e_backend_is_s3()) {
		fprintf(stderr,
			"test_e2e_fault: needs an S3 backend "
			"(MAPFS_E2E_STORE=rgw or s3rver), not %s\n",
			e2e_backend_name());
		return 1;
	}
	P.ctl_fd = -1;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite_with_setup_and_teardown(
		"e2e_fault", suite_init, suite_clean, NULL, test_cleanup);
	CU_add_test(s, "writes through resets, 503s, low bandwidth",
		    test_write);
	CU_add_test(s, "cold reads through resets, 503s, cuts, low bandwidth",
		    test_cold_reads);
	CU_add_test(s, "no progress: JUKEBOX, cached data, recovery",
		    test_no_progress);
	CU_add_test(s, "the store flapping every second", test_flapping);
	CU_add_test(s, "new names while the store is away", test_new_names);
	CU_add_test(s, "a rename's copy done elsewhere is no conflict",
		    test_copy_done_elsewhere);
	CU_add_test(s, "a rename's copy meeting the file's own upload",
		    test_copy_meets_own_upload);
	CU_add_test(s, "the same for a file with two names",
		    test_copy_meets_own_upload_linked);
	return e2e_run_cunit();
}
