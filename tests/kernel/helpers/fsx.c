/*
 * fsx FILE OPS SEED - a small file-system exerciser in the spirit of
 * fsx-linux: random writes, reads, truncates (up and down), fsyncs and
 * close/reopen cycles on one file, every read checked against an
 * in-memory copy of what the file must hold.  A fixed seed makes a run
 * repeatable.  On the first mismatch it prints the last operations and
 * exits 1; otherwise it prints "fsx: N ops ok" and exits 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAXLEN (1 << 20) /* the file stays below 1 MiB */
#define MAXIO (64 << 10)
#define LOGN 16

static uint8_t model[MAXLEN], buf[MAXIO];
static size_t size;
static uint64_t rng;
static char oplog[LOGN][80];
static long opno;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

static void note(const char *op, long a, long b)
{
	snprintf(oplog[opno % LOGN], sizeof(oplog[0]), "%s %ld %ld", op, a, b);
}

static void fail(const char *what)
{
	fprintf(stderr, "fsx: op %ld: %s\nlast operations:\n", opno, what);
	for (long i = opno - LOGN + 1; i <= opno; i++)
		if (i >= 0)
			fprintf(stderr, "  %ld: %s\n", i, oplog[i % LOGN]);
	exit(1);
}

static void check_read(int fd, size_t off, size_t len)
{
	ssize_t r = pread(fd, buf, len, (off_t)off);
	size_t want = off >= size ? 0 : (size - off < len ? size - off : len);

	if (r < 0 || (size_t)r != want)
		fail("short or failed read");
	for (size_t i = 0; i < want; i++)
		if (buf[i] != model[off + i]) {
			fprintf(stderr, "fsx: byte %zu is %02x, want %02x\n",
				off + i, buf[i], model[off + i]);
			fail("data mismatch");
		}
}

int main(int argc, char **argv)
{
	long ops;
	struct stat st;
	int fd;

	if (argc != 4)
		return 2;
	ops = atol(argv[2]);
	rng = strtoull(argv[3], NULL, 0) | 1;
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return 2;
	for (opno = 0; opno < ops; opno++) {
		uint32_t op = rnd(100);
		size_t off = rnd(MAXLEN - MAXIO), len = 1 + rnd(MAXIO);

		if (op < 40) {
			for (size_t i = 0; i < len; i++)
				buf[i] = (uint8_t)rnd(256);
			note("write", (long)off, (long)len);
			if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len)
				fail("write");
			if (off > size)
				memset(model + size, 0, off - size);
			memcpy(model + off, buf, len);
			if (off + len > size)
				size = off + len;
		} else if (op < 80) {
			note("read", (long)off, (long)len);
			check_read(fd, rnd(2) ? off : off % (size + 1), len);
		} else if (op < 88) {
			size_t n = rnd(MAXLEN);

			note("truncate to, from", (long)n, (long)size);
			if (ftruncate(fd, (off_t)n))
				fail("truncate");
			if (n > size)
				memset(model + size, 0, n - size);
			size = n;
		} else if (op < 93) {
			note("fsync", 0, 0);
			if (fsync(fd))
				fail("fsync");
		} else {
			note("close and reopen", 0, 0);
			close(fd);
			fd = open(argv[1], O_RDWR);
			if (fd < 0)
				fail("reopen");
		}
		if (fstat(fd, &st) || (size_t)st.st_size != size) {
			fprintf(stderr, "fsx: size %lld, want %zu\n",
				(long long)st.st_size, size);
			fail("size mismatch");
		}
	}
	check_read(fd, 0, size < MAXIO ? size : MAXIO);
	for (size_t off = 0; off < size; off += MAXIO)
		check_read(fd, off, MAXIO);
	close(fd);
	printf("fsx: %ld ops ok, final size %zu\n", ops, size);
	return 0;
}
