/*
 * tests/faults/fclient.c - the fault campaign's client (issue 48): libnfs
 * calls against one or more gateways, every call logged with its start,
 * end and outcome, for tests/faults/check.py.
 *
 *   fclient run --client ID --seconds S --seed N --log FILE URL...
 *       one client: each call goes to a gateway picked at random among
 *       URLs (nfs://HOST/EXPORT?nfsport=..&mountport=..).  Workloads, mixed:
 *       - set: in /fc/cID, unique names: CREATE, MKDIR, LINK, RENAME and
 *         REMOVE of names the client knows for certain to be there;
 *       - manifest: /fc/cID/mK of a size and bytes from (ID, K), written,
 *         COMMITted, closed: logged with its hash once all answered ok;
 *       - registers: /fc/reg/rJ (J < 20, shared by every client), a write
 *         is open, write of a 32-byte value, COMMIT, close; a read is open,
 *         read, close.
 *   fclient setup URL     make /fc and the registers (idempotent)
 *   fclient walk URL      every entry below /fc: path, type, size, hash
 *   fclient touch URL PATH, fclient stat URL PATH   make a name; is it there
 *
 * A log line, tab-separated:
 *   START_NS END_NS CLIENT GW OP A B OUTCOME
 * OUTCOME is ok, fail:ERRNO (the call answered an error: it did not
 * happen) or unknown (no answer: a timeout or a lost connection; the
 * change may or may not have happened; that gateway's connection is made
 * again for the next call).  Times are CLOCK_REALTIME, so the logs of
 * client machines on one box compare.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nfsc/libnfs.h>

#define MAX_GW 16
#define CALL_TIMEOUT_MS 10000
#define REGISTERS 20
#define VALUE_LEN 32
#define FILES_MAX 100000

struct gw {
	const char *url;
	struct nfs_context *nfs;
	uint64_t retry_ns; /* no mount before this */
};

static struct gw gws[MAX_GW];
static int ngw;
static FILE *logfile;
static int client_id;
static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 1099511628211ull;
	return h;
}

#define FNV0 1469598103934665603ull

static struct nfs_context *mount_url(const char *url)
{
	struct nfs_context *nfs = nfs_init_context();
	struct nfs_url *u;
	char full[512];

	if (!nfs)
		return NULL;
	snprintf(full, sizeof(full), "%s%cautoreconnect=0", url,
		 strchr(url, '?') ? '&' : '?');
	u = nfs_parse_url_dir(nfs, full);
	if (!u) {
		nfs_destroy_context(nfs);
		return NULL;
	}
	nfs_set_timeout(nfs, CALL_TIMEOUT_MS);
	if (nfs_mount(nfs, u->server, u->path)) {
		nfs_destroy_url(u);
		nfs_destroy_context(nfs);
		return NULL;
	}
	nfs_destroy_url(u);
	return nfs;
}

/* Gateway g's context, mounted if it is not (NULL: not now). */
static struct nfs_context *ctx_of(int g)
{
	if (!gws[g].nfs && now_ns() >= gws[g].retry_ns) {
		gws[g].nfs = mount_url(gws[g].url);
		if (!gws[g].nfs)
			gws[g].retry_ns = now_ns() + 500000000u;
	}
	return gws[g].nfs;
}

/* An answer that says nothing of whether the call happened. */
static bool no_answer(int rc)
{
	return rc == -ETIMEDOUT || rc == -EIO || rc == -ENOTCONN ||
	       rc == -ECONNRESET || rc == -EPIPE || rc == -EINTR ||
	       rc == -ECONNREFUSED || rc == -EFAULT;
}

/* Log one call; an unknown outcome drops g's connection. */
static void logc(uint64_t t0, int g, const char *op, const char *a,
		 const char *b, int rc)
{
	char oc[32];

	if (!rc)
		snprintf(oc, sizeof(oc), "ok");
	else if (no_answer(rc))
		snprintf(oc, sizeof(oc), "unknown");
	else
		snprintf(oc, sizeof(oc), "fail:%d", -rc);
	fprintf(logfile, "%" PRIu64 "\t%" PRIu64 "\t%d\t%d\t%s\t%s\t%s\t%s\n",
		t0, now_ns(), client_id, g, op, a, b && *b ? b : "-", oc);
	fflush(logfile);
	if (rc && no_answer(rc) && gws[g].nfs) {
		nfs_destroy_context(gws[g].nfs);
		gws[g].nfs = NULL;
	}
}

/* --- the set: names this client is certain of --- */

static char *files[FILES_MAX]; /* certainly there: regular files */
static int nfiles;
static unsigned seq;

static void files_add(const char *name)
{
	if (nfiles < FILES_MAX)
		files[nfiles++] = strdup(name);
}

static char *files_take(int i)
{
	char *n = files[i];

	files[i] = files[--nfiles];
	return n;
}

static void set_op(int g, struct nfs_context *nfs)
{
	char dir[64], a[128], b[128], name[64];
	unsigned k = seq++, pick = (unsigned)(rnd() % 100);
	uint64_t t0 = now_ns();
	struct nfsfh *fh;
	int rc;

	snprintf(dir, sizeof(dir), "/fc/c%d", client_id);
	if (pick < 40 || nfiles < 2) {
		snprintf(name, sizeof(name), "n%u", k);
		snprintf(a, sizeof(a), "%s/%s", dir, name);
		rc = nfs_creat(nfs, a, 0644, &fh);
		if (!rc)
			nfs_close(nfs, fh);
		logc(t0, g, "create", name, NULL, rc);
		if (!rc)
			files_add(name);
	} else if (pick < 50) {
		snprintf(name, sizeof(name), "d%u", k);
		snprintf(a, sizeof(a), "%s/%s", dir, name);
		rc = nfs_mkdir(nfs, a);
		logc(t0, g, "mkdir", name, NULL, rc);
	} else if (pick < 65) {
		int i = (int)(rnd() % (unsigned)nfiles);

		snprintf(name, sizeof(name), "h%u", k);
		snprintf(a, sizeof(a), "%s/%s", dir, files[i]);
		snprintf(b, sizeof(b), "%s/%s", dir, name);
		rc = nfs_link(nfs, a, b);
		logc(t0, g, "link", files[i], name, rc);
		if (!rc)
			files_add(name);
	} else if (pick < 82) {
		int i = (int)(rnd() % (unsigned)nfiles);
		char *from = files_take(i);

		snprintf(name, sizeof(name), "r%u", k);
		snprintf(a, sizeof(a), "%s/%s", dir, from);
		snprintf(b, sizeof(b), "%s/%s", dir, name);
		rc = nfs_rename(nfs, a, b);
		logc(t0, g, "rename", from, name, rc);
		if (!rc)
			files_add(name);
		else if (!no_answer(rc))
			files_add(from);
		free(from);
	} else {
		int i = (int)(rnd() % (unsigned)nfiles);
		char *victim = files_take(i);

		snprintf(a, sizeof(a), "%s/%s", dir, victim);
		rc = nfs_unlink(nfs, a);
		logc(t0, g, "remove", victim, NULL, rc);
		if (rc && !no_answer(rc))
			files_add(victim);
		free(victim);
	}
}

/* --- the manifest --- */

/* A write's end: COMMIT (if rc, the write's outcome so far, is 0), then
 * close fh (NULL: not open); the first error. */
static int commit_close(struct nfs_context *nfs, struct nfsfh *fh, int rc)
{
	if (!rc)
		rc = nfs_fsync(nfs, fh);
	if (fh) {
		int c = nfs_close(nfs, fh);

		if (!rc)
			rc = c;
	}
	return rc;
}

static void fill(unsigned char *buf, size_t n, uint64_t seed)
{
	uint64_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (unsigned char)x;
	}
}

static void manifest_op(int g, struct nfs_context *nfs)
{
	unsigned k = seq++;
	size_t size =
		rnd() % 8 == 0 ? 1048576 + rnd() % 1048576 : rnd() % 200000;
	unsigned char *buf = malloc(size + 1);
	char path[128], name[64], val[64];
	uint64_t t0 = now_ns();
	struct nfsfh *fh = NULL;
	int rc;

	fill(buf, size, (uint64_t)client_id << 32 | k);
	snprintf(name, sizeof(name), "m%u", k);
	snprintf(path, sizeof(path), "/fc/c%d/%s", client_id, name);
	rc = nfs_creat(nfs, path, 0644, &fh);
	for (size_t off = 0; !rc && off < size;) {
		size_t n = size - off > 262144 ? 262144 : size - off;
		int w = nfs_pwrite(nfs, fh, off, n, buf + off);

		if (w < 0)
			rc = w;
		else if (w == 0)
			rc = -EIO;
		else
			off += (size_t)w;
	}
	rc = commit_close(nfs, fh, rc);
	snprintf(val, sizeof(val), "%zu:%016" PRIx64, size,
		 fnv(buf, size, FNV0));
	logc(t0, g, "manifest", name, val, rc);
	free(buf);
}

/* --- registers --- */

static void register_op(int g, struct nfs_context *nfs)
{
	unsigned r = (unsigned)(rnd() % REGISTERS), k = seq++;
	char path[64], reg[16], val[VALUE_LEN + 1];
	uint64_t t0 = now_ns();
	struct nfsfh *fh = NULL;
	int rc;

	snprintf(reg, sizeof(reg), "r%u", r);
	snprintf(path, sizeof(path), "/fc/reg/%s", reg);
	if (rnd() % 2) {
		int n = snprintf(val, sizeof(val), "c%d-%u", client_id, k);

		memset(val + n, ' ', VALUE_LEN - (size_t)n);
		val[VALUE_LEN] = '\0';
		rc = nfs_open(nfs, path, O_WRONLY, &fh);
		if (!rc) {
			int w = nfs_pwrite(nfs, fh, 0, VALUE_LEN, val);

			rc = w == VALUE_LEN ? 0 : w < 0 ? w : -EIO;
		}
		rc = commit_close(nfs, fh, rc);
		/* the value without its padding */
		val[strcspn(val, " ")] = '\0';
		logc(t0, g, "write", reg, val, rc);
		return;
	}
	memset(val, 0, sizeof(val));
	rc = nfs_open(nfs, path, O_RDONLY, &fh);
	if (!rc) {
		int n = nfs_pread(nfs, fh, 0, VALUE_LEN, val);

		rc = n < 0 ? n : 0;
		if (n >= 0)
			val[n] = '\0';
		nfs_close(nfs, fh);
	}
	val[strcspn(val, " ")] = '\0';
	if (!rc && !val[0])
		snprintf(val, sizeof(val), "(empty)");
	logc(t0, g, "read", reg, val, rc);
}

/* --- commands --- */

static int cmd_setup(const char *url)
{
	struct nfs_context *nfs = mount_url(url);
	char path[64];
	struct nfsfh *fh;
	int rc;

	if (!nfs) {
		fprintf(stderr, "fclient: cannot mount %s\n", url);
		return 2;
	}
	rc = nfs_mkdir(nfs, "/fc");
	if (!rc || rc == -EEXIST)
		rc = nfs_mkdir(nfs, "/fc/reg");
	for (int r = 0; (!rc || rc == -EEXIST) && r < REGISTERS; r++) {
		snprintf(path, sizeof(path), "/fc/reg/r%d", r);
		rc = nfs_creat(nfs, path, 0644, &fh);
		if (!rc) {
			char v[VALUE_LEN];

			memset(v, ' ', sizeof(v));
			memcpy(v, "init", 4);
			if (nfs_pwrite(nfs, fh, 0, VALUE_LEN, v) != VALUE_LEN ||
			    nfs_fsync(nfs, fh))
				rc = -EIO;
			nfs_close(nfs, fh);
		}
	}
	if (rc && rc != -EEXIST) {
		fprintf(stderr, "fclient: setup: %s\n", nfs_get_error(nfs));
		nfs_destroy_context(nfs);
		return 1;
	}
	nfs_destroy_context(nfs);
	return 0;
}

static int walk(struct nfs_context *nfs, const char *dir)
{
	struct nfsdir *d;
	struct nfsdirent *e;
	int rc = nfs_opendir(nfs, dir, &d);

	if (rc) {
		fprintf(stderr, "fclient: opendir %s: %s\n", dir,
			nfs_get_error(nfs));
		return rc;
	}
	while ((e = nfs_readdir(nfs, d))) {
		char path[1024];

		if (!strcmp(e->name, ".") || !strcmp(e->name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->name);
		if (e->type == 2 /* NF3DIR */) {
			printf("%s\tdir\t0\t-\t-\n", path);
			if ((rc = walk(nfs, path)))
				break;
			continue;
		}
		/* Every byte read back: a manifest's hash, a register's value. */
		struct nfsfh *fh;
		uint64_t h = FNV0, off = 0;
		char buf[65536], first[VALUE_LEN + 1] = "";
		int n;

		if ((rc = nfs_open(nfs, path, O_RDONLY, &fh))) {
			fprintf(stderr, "fclient: open %s: %s\n", path,
				nfs_get_error(nfs));
			break;
		}
		while ((n = nfs_pread(nfs, fh, off, sizeof(buf), buf)) > 0) {
			if (!off) {
				memcpy(first, buf,
				       n < VALUE_LEN ? (size_t)n : VALUE_LEN);
				first[n < VALUE_LEN ? n : VALUE_LEN] = '\0';
			}
			h = fnv(buf, (size_t)n, h);
			off += (uint64_t)n;
		}
		nfs_close(nfs, fh);
		if (n < 0) {
			fprintf(stderr, "fclient: read %s: %s\n", path,
				nfs_get_error(nfs));
			rc = n;
			break;
		}
		first[strcspn(first, " ")] = '\0';
		printf("%s\tfile\t%" PRIu64 "\t%" PRIu64 ":%016" PRIx64
		       "\t%s\n",
		       path, off, off, h,
		       strncmp(dir, "/fc/reg", 7) ? "-" : first);
	}
	nfs_closedir(nfs, d);
	return rc;
}

static int cmd_walk(const char *url)
{
	struct nfs_context *nfs = mount_url(url);
	int rc;

	if (!nfs) {
		fprintf(stderr, "fclient: cannot mount %s\n", url);
		return 2;
	}
	nfs_set_timeout(nfs, 60000);
	rc = walk(nfs, "/fc");
	nfs_destroy_context(nfs);
	return rc ? 1 : 0;
}

static int cmd_run(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "client", required_argument, NULL, 'c' },
		{ "seconds", required_argument, NULL, 's' },
		{ "seed", required_argument, NULL, 'r' },
		{ "log", required_argument, NULL, 'l' },
		{ 0 }
	};
	double seconds = 10;
	uint64_t end;
	char dir[64];
	int c;

	while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			client_id = atoi(optarg);
			break;
		case 's':
			seconds = atof(optarg);
			break;
		case 'r':
			rng ^= strtoull(optarg, NULL, 10) *
			       0x9e3779b97f4a7c15ull;
			break;
		case 'l':
			logfile = fopen(optarg, "a");
			if (!logfile) {
				perror(optarg);
				return 2;
			}
			break;
		default:
			return 2;
		}
	}
	for (; optind < argc && ngw < MAX_GW; optind++)
		gws[ngw++].url = argv[optind];
	if (!ngw || !logfile) {
		fprintf(stderr, "fclient run: --log and a URL needed\n");
		return 2;
	}
	rng ^= (uint64_t)client_id * 0x2545f4914f6cdd1dull;
	/* Its directory, through any gateway that answers. */
	snprintf(dir, sizeof(dir), "/fc/c%d", client_id);
	for (bool made = false; !made;) {
		for (int g = 0; g < ngw && !made; g++) {
			struct nfs_context *nfs = ctx_of(g);
			int rc;

			if (!nfs)
				continue;
			rc = nfs_mkdir(nfs, dir);
			made = !rc || rc == -EEXIST;
		}
		if (!made)
			usleep(200000);
	}
	end = now_ns() + (uint64_t)(seconds * 1e9);
	while (now_ns() < end) {
		int g = (int)(rnd() % (unsigned)ngw);
		struct nfs_context *nfs = ctx_of(g);
		unsigned w = (unsigned)(rnd() % 100);

		if (!nfs) {
			usleep(50000);
			continue;
		}
		if (w < 60)
			set_op(g, nfs);
		else if (w < 75)
			manifest_op(g, nfs);
		else
			register_op(g, nfs);
	}
	for (int g = 0; g < ngw; g++)
		if (gws[g].nfs)
			nfs_destroy_context(gws[g].nfs);
	fclose(logfile);
	return 0;
}

/* touch: create PATH (0: made or there); stat: 0 if PATH is there, 1 if
 * not, 2 if the gateway did not answer. */
static int cmd_path(const char *url, const char *path, bool make)
{
	struct nfs_context *nfs = mount_url(url);
	struct nfs_stat_64 st;
	struct nfsfh *fh;
	int rc;

	if (!nfs)
		return 2;
	if (make) {
		rc = nfs_creat(nfs, path, 0644, &fh);
		if (!rc)
			nfs_close(nfs, fh);
		rc = rc && rc != -EEXIST ? 1 : 0;
	} else {
		rc = nfs_stat64(nfs, path, &st);
		rc = !rc ? 0 : rc == -ENOENT ? 1 : 2;
	}
	nfs_destroy_context(nfs);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "touch"))
		return cmd_path(argv[2], argv[3], true);
	if (argc >= 4 && !strcmp(argv[1], "stat"))
		return cmd_path(argv[2], argv[3], false);
	if (argc >= 3 && !strcmp(argv[1], "setup"))
		return cmd_setup(argv[2]);
	if (argc >= 3 && !strcmp(argv[1], "walk"))
		return cmd_walk(argv[2]);
	if (argc >= 2 && !strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	fprintf(stderr, "usage: fclient setup URL | walk URL | touch URL PATH "
			"| stat URL PATH | run --client ID --seconds S --seed "
			"N --log FILE URL...\n");
	return 2;
}
