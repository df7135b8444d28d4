/*
 * tests/crash/lossydisk.c - a disk that loses what was not flushed, for
 * power-cut tests.
 *
 *   lossydisk IMAGE MOUNTPOINT [fuse options]
 *
 * A FUSE file system with one file, MOUNTPOINT/disk, as big as IMAGE.
 * Writes to it are kept in memory; an fsync of it (what a loop device
 * does for a flush: ext4's journal commits, an fdatasync of a file on it)
 * writes them into IMAGE.  SIGUSR1 is the power cut: what was not
 * flushed is dropped, and every write after it is dropped too (an
 * unmount's write-back included), so that IMAGE holds exactly what was
 * flushed before the cut.  Put a loop device on MOUNTPOINT/disk and a
 * file system on that; unmount after the cut, stop this, start it again
 * on IMAGE: the file system comes back as a machine's would after a
 * power cut.  The disk's writes are 4 KiB blocks in memory (a loop
 * device writes pages); reads see the unflushed blocks.
 */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BLK 4096

static int img = -1;
static uint64_t img_size, nblk;
static uint8_t **ov;    /* nblk slots: a block written, not flushed */
static uint64_t *dirty; /* their indices, ndirty of them */
static uint64_t ndirty;
static volatile sig_atomic_t cut;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void on_cut(int sig)
{
	(void)sig;
	cut = 1;
}

/* Drop what was not flushed (lock held). */
static void drop_locked(void)
{
	for (uint64_t i = 0; i < ndirty; i++) {
		free(ov[dirty[i]]);
		ov[dirty[i]] = NULL;
	}
	ndirty = 0;
}

static int read_img(uint64_t b, uint8_t *buf)
{
	ssize_t n = pread(img, buf, BLK, (off_t)(b * BLK));

	if (n < 0)
		return -errno;
	if (n < BLK)
		memset(buf + n, 0, BLK - (size_t)n);
	return 0;
}

static int ld_getattr(const char *path, struct stat *st,
		      struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof(*st));
	if (!strcmp(path, "/")) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	if (strcmp(path, "/disk"))
		return -ENOENT;
	st->st_mode = S_IFREG | 0600;
	st->st_nlink = 1;
	st->st_size = (off_t)img_size;
	return 0;
}

static int ld_readdir(const char *path, void *buf, fuse_fill_dir_t fill,
		      off_t off, struct fuse_file_info *fi,
		      enum fuse_readdir_flags flags)
{
	(void)off;
	(void)fi;
	(void)flags;
	if (strcmp(path, "/"))
		return -ENOENT;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, "disk", NULL, 0, 0);
	return 0;
}

static int ld_open(const char *path, struct fuse_file_info *fi)
{
	if (strcmp(path, "/disk"))
		return -ENOENT;
	/* Every write reaches us at once: no page cache of the file. */
	fi->direct_io = 1;
	return 0;
}

static int ld_read(const char *path, char *buf, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	uint8_t tmp[BLK];
	size_t done = 0;
	int rc = 0;

	(void)path;
	(void)fi;
	if ((uint64_t)off >= img_size)
		return 0;
	if ((uint64_t)off + size > img_size)
		size = img_size - (uint64_t)off;
	pthread_mutex_lock(&lock);
	while (done < size && !rc) {
		uint64_t at = (uint64_t)off + done, b = at / BLK, in = at % BLK;
		size_t n = BLK - in < size - done ? BLK - in : size - done;

		if (ov[b])
			memcpy(buf + done, ov[b] + in, n);
		else if (!(rc = read_img(b, tmp)))
			memcpy(buf + done, tmp + in, n);
		done += n;
	}
	pthread_mutex_unlock(&lock);
	return rc ? rc : (int)size;
}

static int ld_write(const char *path, const char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	size_t done = 0;
	int rc = 0;

	(void)path;
	(void)fi;
	if ((uint64_t)off + size > img_size)
		return -ENOSPC;
	pthread_mutex_lock(&lock);
	if (cut) {
		drop_locked();
		pthread_mutex_unlock(&lock);
		return (int)size; /* the power is off: it never lands */
	}
	while (done < size && !rc) {
		uint64_t at = (uint64_t)off + done, b = at / BLK, in = at % BLK;
		size_t n = BLK - in < size - done ? BLK - in : size - done;

		if (!ov[b]) {
			if (!(ov[b] = malloc(BLK))) {
				rc = -ENOMEM;
				break;
			}
			if (n < BLK && (rc = read_img(b, ov[b]))) {
				free(ov[b]);
				ov[b] = NULL;
				break;
			}
			dirty[ndirty++] = b;
		}
		memcpy(ov[b] + in, buf + done, n);
		done += n;
	}
	pthread_mutex_unlock(&lock);
	return rc ? rc : (int)size;
}

static int ld_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	int rc = 0;

	(void)path;
	(void)datasync;
	(void)fi;
	pthread_mutex_lock(&lock);
	if (cut) {
		drop_locked();
		pthread_mutex_unlock(&lock);
		return 0;
	}
	for (uint64_t i = 0; i < ndirty && !rc; i++) {
		uint64_t b = dirty[i];

		if (pwrite(img, ov[b], BLK, (off_t)(b * BLK)) != BLK)
			rc = -EIO;
	}
	if (!rc)
		drop_locked();
	pthread_mutex_unlock(&lock);
	return rc;
}

static int ld_flush(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	(void)fi;
	return 0; /* a close, not a flush of the disk's cache */
}

static const struct fuse_operations ops = {
	.getattr = ld_getattr,
	.readdir = ld_readdir,
	.open = ld_open,
	.read = ld_read,
	.write = ld_write,
	.fsync = ld_fsync,
	.flush = ld_flush,
};

int main(int argc, char **argv)
{
	struct stat st;
	char *fargv[16];
	int fargc = 0;

	if (argc < 3 || argc > 12) {
		fprintf(stderr, "usage: lossydisk IMAGE MOUNTPOINT [fuse "
				"options]\n");
		return 2;
	}
	img = open(argv[1], O_RDWR | O_CLOEXEC);
	if (img < 0 || fstat(img, &st) < 0) {
		perror(argv[1]);
		return 1;
	}
	img_size = (uint64_t)st.st_size / BLK * BLK;
	nblk = img_size / BLK;
	ov = calloc(nblk, sizeof(*ov));
	dirty = calloc(nblk, sizeof(*dirty));
	if (!ov || !dirty) {
		fprintf(stderr, "lossydisk: no memory\n");
		return 1;
	}
	signal(SIGUSR1, on_cut);
	fargv[fargc++] = argv[0];
	fargv[fargc++] = "-f";
	fargv[fargc++] = "-o";
	fargv[fargc++] = "default_permissions";
	for (int i = 3; i < argc; i++)
		fargv[fargc++] = argv[i];
	fargv[fargc++] = argv[2];
	fargv[fargc] = NULL;
	return fuse_main(fargc, fargv, &ops, NULL);
}
