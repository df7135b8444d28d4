/*
 * s3/store_file_get.c - the file backend's reads: HEAD, GET into a buffer,
 * and the streaming GET pinned to one version.
 */
#include "store_file_int.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int file_head(struct store *st, const char *key, struct store_info *out)
{
	struct store_file *sf = sf_of(st);
	struct keypath kp;
	struct stat sb;
	int fd, err;

	err = file_key_parse(key, &kp);
	if (err)
		return err;
	if (kp.marker)
		err = file_marker_open(sf, &kp, false, &fd, &sb);
	else
		err = file_obj_open(sf, &kp, &fd, &sb);
	if (err)
		return err;
	file_info_fill(&sb, kp.marker, out);
	err = file_meta_read(fd, &out->meta);
	close(fd);
	return err;
}

/*
 * Open key's object for reading: 0 with *fd (and its stat), 1 for a
 * directory marker (no bytes: no fd), or -errno.
 */
static int read_open(struct store_file *sf, const char *key, int *fd,
		     struct stat *sb)
{
	struct keypath kp;
	int err = file_key_parse(key, &kp);

	if (err)
		return err;
	if (kp.marker) {
		err = file_marker_open(sf, &kp, false, fd, sb);
		if (!err)
			close(*fd);
		return err ? err : 1;
	}
	return file_obj_open(sf, &kp, fd, sb);
}

int file_get(struct store *st, const char *key, uint64_t off, size_t len,
	     void *buf, size_t *got)
{
	struct store_file *sf = sf_of(st);
	struct stat sb;
	size_t done = 0;
	ssize_t n;
	int fd, err;

	*got = 0;
	err = read_open(sf, key, &fd, &sb);
	if (err)
		return err < 0 ? err : 0;
	if (off >= (uint64_t)sb.st_size)
		goto out_close;
	while (done < len) {
		n = pread(fd, (char *)buf + done, len - done,
			  (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*got = done;
out_close:
	close(fd);
	return err;
}

/* The bounce buffer of file_get_stream. */
#define STREAM_BUF (1u << 20)

/* See store_file_int.h. */
int file_get_stream(struct store *st, const char *key, const char *if_match,
		    uint64_t off, uint64_t len, store_sink_fn sink, void *arg,
		    uint64_t *got)
{
	struct store_file *sf = sf_of(st);
	char etag[STORE_ETAG_MAX];
	struct stat sb;
	char *buf = NULL;
	int fd, err;

	*got = 0;
	err = read_open(sf, key, &fd, &sb);
	if (err)
		return err < 0 ? err : 0;
	file_etag_fill(&sb, false, etag);
	if (if_match && strcmp(etag, if_match))
		err = -ESTALE;
	else if (off < (uint64_t)sb.st_size && len &&
		 !(buf = malloc(STREAM_BUF)))
		err = -ENOMEM;
	while (!err && buf && *got < len) {
		size_t want = len - *got < STREAM_BUF ? (size_t)(len - *got)
						      : STREAM_BUF;
		ssize_t n = pread(fd, buf, want, (off_t)(off + *got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			err = -errno;
		else if (n == 0)
			break; /* the end of the object */
		else if (!(err = sink(arg, buf, (size_t)n)))
			*got += (uint64_t)n;
	}
	free(buf);
	close(fd);
	return err;
}
