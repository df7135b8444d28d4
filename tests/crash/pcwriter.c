/*
 * tests/crash/pcwriter.c - the client of the power-cut test.
 *
 *   pcwriter write URL DIR N WORKERS   writes files DIR/f<i>, i < N, from
 *       WORKERS processes (file i by worker i % WORKERS), and prints
 *       "ok <i> <ms>" once the server promised all of file i is stable
 *       (ms: the wall clock's, when the promise came);
 *   pcwriter cut-after URL DIR I GWPID DISKPID  writes file DIR/f<I>
 *       alone, prints its "ok" line, and at once cuts the power itself
 *       (SIGSTOP to the gateway, SIGUSR1 to lossydisk): a cut within
 *       microseconds of the last reply, where every flush the reply
 *       needed must already be done, with no other client's flush to
 *       cover for one it skipped;
 *   pcwriter check URL DIR OKFILE [BEFORE]  reads back every file OKFILE
 *       lists (promised before the wall clock's ms BEFORE, if given: an
 *       async export's promise holds once its window is over) and says
 *       which do not hold what was promised.  Exit 1 if any.
 *
 * URL: nfs://HOST/EXPORT?nfsport=P&mountport=Q.  What a file goes through
 * depends on i % 8, so that every way a small file's data is made stable
 * is cut in the middle somewhere:
 *   0-2  UNSTABLE writes of 1 B..128 KiB, then COMMIT;
 *   3    FILE_SYNC writes (opened O_SYNC) of up to 128 KiB, in two;
 *   4    200-400 KiB, UNSTABLE, then COMMIT (too big for the journal);
 *   5    64 KiB + COMMIT, then grown to 300 KiB + COMMIT;
 *   6    100 KiB + COMMIT, then cut to 10 KiB and grown to 50 KiB
 *        (SETATTRs: zeros from 10 KiB on), its mtime then set (SETATTR)
 *        and checked too;
 *   7    50 KiB + COMMIT, then 10 KiB in its middle rewritten + COMMIT.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/time.h>

#include <nfsc/libnfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define KIB 1024u
#define MAXSZ (400u * KIB)

static uint32_t mix(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352d;
	x ^= x >> 15;
	x *= 0x846ca68b;
	return x ^ (x >> 16);
}

/* Byte j of version v of file i's data. */
static uint8_t byte_of(uint32_t i, uint32_t v, uint32_t j)
{
	return (uint8_t)(mix(i * 2654435761u + v * 40503u + j / 64) + j);
}

static void fill(uint8_t *p, uint32_t i, uint32_t v, uint32_t from, uint32_t to)
{
	for (uint32_t j = from; j < to; j++)
		p[j] = byte_of(i, v, j);
}

/* The size file i of kind k starts with (kinds 0-4). */
static uint32_t size_of(uint32_t i)
{
	uint32_t r = mix(i + 7);

	switch (i % 8) {
	case 3:
		return 2 + r % (128 * KIB - 1);
	case 4:
		return 200 * KIB + r % (200 * KIB);
	default:
		return 1 + r % (128 * KIB);
	}
}

/* The mtime (seconds) kind 6's last SETATTR gives file i. */
static uint64_t mtime_of(uint32_t i)
{
	return 1000000000u + i;
}

/* What file i holds once all of its steps are done: its size. */
static uint32_t expected(uint32_t i, uint8_t *p)
{
	uint32_t n;

	switch (i % 8) {
	case 5:
		fill(p, i, 0, 0, 300 * KIB);
		return 300 * KIB;
	case 6:
		fill(p, i, 0, 0, 10 * KIB);
		memset(p + 10 * KIB, 0, 40 * KIB);
		return 50 * KIB;
	case 7:
		fill(p, i, 0, 0, 50 * KIB);
		fill(p, i, 1, 20 * KIB, 30 * KIB);
		return 50 * KIB;
	default:
		n = size_of(i);
		fill(p, i, 0, 0, n);
		return n;
	}
}

static struct nfs_context *connect_url(const char *url)
{
	struct nfs_context *nfs = nfs_init_context();
	struct nfs_url *u = nfs ? nfs_parse_url_dir(nfs, url) : NULL;

	if (!u) {
		fprintf(stderr, "pcwriter: %s: %s\n", url,
			nfs ? nfs_get_error(nfs) : "no memory");
		exit(2);
	}
	nfs_set_timeout(nfs, 30000);
	if (nfs_mount(nfs, u->server, u->path)) {
		fprintf(stderr, "pcwriter: mount %s: %s\n", url,
			nfs_get_error(nfs));
		exit(2);
	}
	nfs_destroy_url(u);
	return nfs;
}

static int put(struct nfs_context *nfs, struct nfsfh *fh, const uint8_t *p,
	       uint32_t off, uint32_t len)
{
	while (len) {
		uint32_t n = len > 64 * KIB ? 64 * KIB : len;

		if (nfs_pwrite(nfs, fh, off, n, p + off) != (int)n)
			return -1;
		off += n;
		len -= n;
	}
	return 0;
}

/* All the steps of file i; 0 once every one was promised stable. */
static int write_one(struct nfs_context *nfs, const char *dir, uint32_t i,
		     uint8_t *p)
{
	char path[256];
	struct nfsfh *fh;
	uint32_t n = size_of(i);
	int sync = i % 8 == 3, rc;

	snprintf(path, sizeof(path), "%s/f%" PRIu32, dir, i);
	if (nfs_open2(nfs, path,
		      O_CREAT | O_WRONLY | O_TRUNC | (sync ? O_SYNC : 0), 0644,
		      &fh))
		return -1;
	switch (i % 8) {
	case 3:
		fill(p, i, 0, 0, n);
		rc = put(nfs, fh, p, 0, n / 2) ||
		     put(nfs, fh, p, n / 2, n - n / 2);
		break;
	case 5:
		fill(p, i, 0, 0, 300 * KIB);
		rc = put(nfs, fh, p, 0, 64 * KIB) || nfs_fsync(nfs, fh) ||
		     put(nfs, fh, p, 64 * KIB, 236 * KIB) || nfs_fsync(nfs, fh);
		break;
	case 6:
		fill(p, i, 0, 0, 100 * KIB);
		rc = put(nfs, fh, p, 0, 100 * KIB) || nfs_fsync(nfs, fh) ||
		     nfs_ftruncate(nfs, fh, 10 * KIB) ||
		     nfs_ftruncate(nfs, fh, 50 * KIB);
		break;
	case 7:
		fill(p, i, 0, 0, 50 * KIB);
		rc = put(nfs, fh, p, 0, 50 * KIB) || nfs_fsync(nfs, fh);
		fill(p, i, 1, 20 * KIB, 30 * KIB);
		rc = rc || put(nfs, fh, p, 20 * KIB, 10 * KIB) ||
		     nfs_fsync(nfs, fh);
		break;
	default:
		fill(p, i, 0, 0, n);
		rc = put(nfs, fh, p, 0, n) || nfs_fsync(nfs, fh);
		break;
	}
	nfs_close(nfs, fh);
	if (!rc && i % 8 == 6) {
		struct timeval tv[2] = { { (time_t)mtime_of(i), 0 },
					 { (time_t)mtime_of(i), 0 } };

		rc = nfs_utimes(nfs, path, tv);
	}
	return rc ? -1 : 0;
}

/*
 * Whether every thread of process pid is stopped (io_uring's workers,
 * which never stop and answer no client, aside): SIGSTOP stops them one
 * after another, and a thread still running after the cut could answer
 * a call whose flush the cut dropped.
 */
static bool all_stopped(pid_t pid)
{
	char path[320], line[512];
	struct dirent *d;
	bool all = true;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (!(dir = opendir(path)))
		return true; /* gone */
	while (all && (d = readdir(dir))) {
		char *st;
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid,
			 d->d_name);
		if ((f = fopen(path, "r"))) {
			bool io = fgets(line, sizeof(line), f) &&
				  !strncmp(line, "iou-", 4);

			fclose(f);
			if (io)
				continue;
		}
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid,
			 d->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		if (fgets(line, sizeof(line), f) && (st = strrchr(line, ')')))
			all = st[1] == ' ' && st[2] && strchr("TtZX", st[2]);
		fclose(f);
	}
	closedir(dir);
	return all;
}

/* One file alone, its "ok" line, then the power cut at once. */
static int do_cut_after(const char *url, const char *dir, uint32_t i, pid_t gw,
			pid_t disk)
{
	struct nfs_context *nfs = connect_url(url);
	uint8_t *p = malloc(MAXSZ);
	struct timeval tv;
	int rc;

	if (!p || (nfs_mkdir(nfs, dir) && nfs_mkdir(nfs, dir) != -EEXIST)) {
		fprintf(stderr, "pcwriter: mkdir %s: %s\n", dir,
			nfs_get_error(nfs));
		return 2;
	}
	rc = write_one(nfs, dir, i, p);
	gettimeofday(&tv, NULL);
	if (!rc)
		printf("ok %" PRIu32 " %" PRIu64 "\n", i,
		       (uint64_t)tv.tv_sec * 1000 +
			       (uint64_t)tv.tv_usec / 1000);
	else
		fprintf(stderr, "pcwriter: f%" PRIu32 ": %s\n", i,
			nfs_get_error(nfs));
	fflush(stdout);
	if (kill(gw, SIGSTOP)) {
		perror("pcwriter: the stop");
		return 2;
	}
	for (int n = 0; n < 5000 && !all_stopped(gw); n++)
		usleep(1000);
	if (!all_stopped(gw) || kill(disk, SIGUSR1)) {
		fprintf(stderr,
			"pcwriter: the cut: the gateway did not stop\n");
		return 2;
	}
	return rc ? 1 : 0;
}

static int do_write(const char *url, const char *dir, uint32_t n, int workers)
{
	struct nfs_context *nfs = connect_url(url);
	int failed = 0;

	if (nfs_mkdir(nfs, dir) && nfs_mkdir(nfs, dir) != -EEXIST) {
		fprintf(stderr, "pcwriter: mkdir %s: %s\n", dir,
			nfs_get_error(nfs));
		return 2;
	}
	nfs_destroy_context(nfs);
	for (int w = 0; w < workers; w++) {
		if (fork() == 0) {
			uint8_t *p = malloc(MAXSZ);
			char line[32];

			nfs = connect_url(url);
			for (uint32_t i = (uint32_t)w; p && i < n;
			     i += (uint32_t)workers) {
				int len;

				/* Not promised (JUKEBOX: the dirty data's
				 * bound): said, and not listed. */
				if (write_one(nfs, dir, i, p)) {
					fprintf(stderr,
						"pcwriter: f%" PRIu32 ": %s\n",
						i, nfs_get_error(nfs));
					continue;
				}
				/* One write per line: the lines of the
				 * workers never mix, and none waits in a
				 * buffer when the cut kills us. */
				struct timeval tv;

				gettimeofday(&tv, NULL);
				len = snprintf(
					line, sizeof(line),
					"ok %" PRIu32 " %" PRIu64 "\n", i,
					(uint64_t)tv.tv_sec * 1000 +
						(uint64_t)tv.tv_usec / 1000);
				if (write(1, line, (size_t)len) != len)
					_exit(1);
			}
			_exit(p ? 0 : 1);
		}
	}
	for (int w = 0; w < workers; w++) {
		int st;

		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			failed = 1;
	}
	return failed;
}

static int do_check(const char *url, const char *dir, const char *okfile,
		    uint64_t before)
{
	struct nfs_context *nfs = connect_url(url);
	uint8_t *want = malloc(MAXSZ), *got = malloc(MAXSZ + 1);
	FILE *f = fopen(okfile, "r");
	unsigned checked = 0, bad = 0, later = 0;
	char text[128];
	uint64_t at_ms;
	uint32_t i;

	if (!f || !want || !got) {
		perror(okfile);
		return 2;
	}
	while (fgets(text, sizeof(text), f)) {
		char path[256];
		struct nfsfh *fh;
		uint32_t n, got_n;
		int err = 0;

		if (sscanf(text, "ok %" SCNu32 " %" SCNu64, &i, &at_ms) != 2)
			continue;
		if (before && at_ms >= before) {
			later++; /* its window was not over at the cut */
			continue;
		}
		n = expected(i, want);
		snprintf(path, sizeof(path), "%s/f%" PRIu32, dir, i);
		checked++;
		if (nfs_open(nfs, path, O_RDONLY, &fh)) {
			printf("f%" PRIu32 ": %s\n", i, nfs_get_error(nfs));
			bad++;
			continue;
		}
		for (got_n = 0; got_n <= MAXSZ;) {
			int r = nfs_pread(nfs, fh, got_n, MAXSZ + 1 - got_n,
					  got + got_n);

			if (r <= 0) {
				err = r < 0;
				break;
			}
			got_n += (uint32_t)r;
		}
		nfs_close(nfs, fh);
		bool mbad = false;

		if (!err && i % 8 == 6) {
			struct nfs_stat_64 st;

			if (nfs_stat64(nfs, path, &st)) {
				err = 1;
			} else if (st.nfs_mtime != mtime_of(i)) {
				printf("f%" PRIu32 " (kind 6): mtime %" PRIu64
				       ", want %" PRIu64 "\n",
				       i, (uint64_t)st.nfs_mtime, mtime_of(i));
				mbad = true;
			}
		}
		if (!err && got_n == n && !memcmp(want, got, n)) {
			bad += mbad;
			continue;
		}
		uint32_t at = 0;

		while (at < n && at < got_n && want[at] == got[at])
			at++;
		printf("f%" PRIu32 " (kind %" PRIu32 "): %s%" PRIu32
		       " bytes, want %" PRIu32 ", first difference at %" PRIu32
		       "\n",
		       i, i % 8, err ? "read error after " : "", got_n, n, at);
		bad++;
	}
	fclose(f);
	free(want);
	free(got);
	nfs_destroy_context(nfs);
	printf("checked %u files promised stable: %u bad (%u promised too "
	       "late to count)\n",
	       checked, bad, later);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[1], "write"))
		return do_write(argv[2], argv[3], (uint32_t)atol(argv[4]),
				atoi(argv[5]));
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "check"))
		return do_check(argv[2], argv[3], argv[4],
				argc == 6 ? strtoull(argv[5], NULL, 10) : 0);
	if (argc == 7 && !strcmp(argv[1], "cut-after"))
		return do_cut_after(argv[2], argv[3], (uint32_t)atol(argv[4]),
				    (pid_t)atol(argv[5]), (pid_t)atol(argv[6]));
	fprintf(stderr, "usage: pcwriter write URL DIR N WORKERS | pcwriter "
			"cut-after URL DIR I GWPID DISKPID | pcwriter check "
			"URL DIR OKFILE [BEFORE_MS]\n");
	return 2;
}
