/*
 * appendsync - append numbered lines to a file, fsync after each, and say
 * how long each took (the failover test's writer, in the guest).
 *
 *   appendsync FILE N PROGRESS
 *
 * Line i is "line <i> of <N>\n" padded to 64 bytes.  After each fsync
 * returns, i is written to PROGRESS (a local file the host watches
 * through the console: "done <i>" lines on stdout too).  At the end it
 * prints the longest wait for one append+fsync and exits 0; any error
 * exits 1 with the reason.  Then it reads FILE back and checks every
 * line (exit 3 on a mismatch): what fsync returned for must be there.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LINE 64

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void line_of(char *buf, long i, long n)
{
	memset(buf, '.', LINE);
	int k = snprintf(buf, LINE, "line %ld of %ld ", i, n);

	buf[k] = '.';
	buf[LINE - 1] = '\n';
}

int main(int argc, char **argv)
{
	char buf[LINE], got[LINE];
	double worst = 0, worst_at = 0, t0 = now();
	long n, worst_i = -1;
	int fd;

	if (argc != 4 || (n = atol(argv[2])) <= 0) {
		fprintf(stderr, "usage: appendsync FILE N PROGRESS\n");
		return 2;
	}
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	for (long i = 0; i < n; i++) {
		double t = now();

		line_of(buf, i, n);
		if (write(fd, buf, LINE) != LINE || fsync(fd)) {
			fprintf(stderr, "appendsync: line %ld: %s\n", i,
				strerror(errno));
			return 1;
		}
		t = now() - t;
		if (t > worst) {
			worst = t;
			worst_i = i;
			worst_at = now() - t0;
		}
		printf("done %ld %.3f\n", i, t);
		fflush(stdout);
		FILE *p = fopen(argv[3], "w");

		if (p) {
			fprintf(p, "%ld\n", i);
			fclose(p);
		}
	}
	close(fd);
	printf("appendsync: %ld lines; the longest append+fsync: line %ld, "
	       "%.2f s (at %.1f s)\n",
	       n, worst_i, worst, worst_at);
	fd = open(argv[1], O_RDONLY);
	for (long i = 0; fd >= 0 && i < n; i++) {
		line_of(buf, i, n);
		if (read(fd, got, LINE) != LINE || memcmp(buf, got, LINE)) {
			printf("appendsync: line %ld differs when read back\n",
			       i);
			return 3;
		}
	}
	if (fd < 0 || read(fd, got, 1) != 0) {
		printf("appendsync: the file is not %ld lines long\n", n);
		return 3;
	}
	printf("appendsync: all %ld lines read back\n", n);
	return 0;
}
