/*
 * s3/store_file_put.c - the file backend's writes: PUT from memory or a
 * file, and multipart uploads (a directory per upload under
 * ROOT/.mapfs-mpu, its parts files, joined at completion).
 */
#include "store_file_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define UPLOAD_ID_BYTES 16

/*
 * A PUT of len bytes, from buf or (buf NULL) from fd src: staged, then
 * renamed into place if cond holds (a marker key has no bytes).
 */
static int put_staged(struct store *st, const char *key, const void *buf,
		      int src, uint64_t len, const struct store_meta *meta,
		      const struct store_cond *cond, struct store_info *out)
{
	struct store_file *sf = sf_of(st);
	char tmp[TMP_NAME_MAX];
	struct keypath kp;
	int fd, err;

	err = file_key_parse(key, &kp);
	if (err)
		return err;
	if (kp.marker)
		return len ? -EINVAL : file_marker_put(sf, &kp, meta, out);
	err = file_tmp_create(sf->stage_fd, tmp, &fd);
	if (err)
		return err;
	err = buf ? file_write_all(fd, buf, (size_t)len)
		  : file_copy_bytes(src, 0, fd, 0, len);
	if (!err)
		err = file_stage_commit(sf, fd, tmp, &kp, meta, cond, out);
	if (err)
		unlinkat(sf->stage_fd, tmp, 0);
	close(fd);
	return err;
}

int file_put(struct store *st, const char *key, const void *buf, size_t len,
	     const struct store_meta *meta, const struct store_cond *cond,
	     struct store_info *out)
{
	return put_staged(st, key, len ? buf : "", -1, len, meta, cond, out);
}

int file_put_fd(struct store *st, const char *key, int src, uint64_t len,
		const struct store_meta *meta, const struct store_cond *cond,
		struct store_info *out)
{
	return put_staged(st, key, NULL, src, len, meta, cond, out);
}

bool file_upload_id_ok(const char *id)
{
	size_t i;

	if (!id || strlen(id) != 2 * UPLOAD_ID_BYTES)
		return false;
	for (i = 0; i < 2 * UPLOAD_ID_BYTES; i++)
		if (!((id[i] >= '0' && id[i] <= '9') ||
		      (id[i] >= 'a' && id[i] <= 'f')))
			return false;
	return true;
}

/*
 * Open upload id's directory.  An id that does not exist or belongs to
 * another key is ENOENT (S3's NoSuchUpload); a malformed one is EINVAL.
 */
static int upload_open(const struct store_file *sf, const char *key,
		       const char *id, int *out)
{
	char buf[STORE_KEY_MAX + 1];
	ssize_t n;
	int fd, err;

	if (!file_upload_id_ok(id))
		return -EINVAL;
	err = file_dir_step(sf->mpu_fd, id, 0, &fd);
	if (err)
		return err;
	n = fgetxattr(fd, XA_MPU_KEY, buf, sizeof(buf));
	if (n < 0) {
		err = errno == ENODATA ? -ENOENT : -errno;
		goto out_close;
	}
	if ((size_t)n != strlen(key) || memcmp(buf, key, (size_t)n)) {
		err = -ENOENT;
		goto out_close;
	}
	*out = fd;
	return 0;
out_close:
	close(fd);
	return err;
}

/* Remove upload id's directory and its parts (ufd is that directory). */
static int upload_remove(const struct store_file *sf, int ufd, const char *id)
{
	struct dirent *de;
	int err = 0;
	DIR *d;

	err = file_dir_scan(ufd, &d);
	if (err)
		return err;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (unlinkat(ufd, de->d_name, 0) && errno != ENOENT && !err)
			err = -errno;
	}
	closedir(d);
	if (!err && unlinkat(sf->mpu_fd, id, AT_REMOVEDIR))
		err = -errno;
	return err;
}

int file_mpu_create(struct store *st, const char *key,
		    const struct store_meta *meta, char **upload_id)
{
	struct store_file *sf = sf_of(st);
	char id[2 * UPLOAD_ID_BYTES + 1];
	struct keypath kp;
	int fd, err;

	err = file_key_parse(key, &kp);
	if (err)
		return err;
	if (kp.marker)
		return -EINVAL;
	err = file_rand_hex(id, UPLOAD_ID_BYTES);
	if (err)
		return err;
	if (mkdirat(sf->mpu_fd, id, 0700))
		return -errno;
	err = file_dir_step(sf->mpu_fd, id, 0, &fd);
	if (err)
		goto out_rmdir;
	err = file_xattr_store(fd, XA_MPU_KEY, key);
	if (!err)
		err = file_meta_write(fd, meta);
	if (!err && (fsync(fd) || fsync(sf->mpu_fd)))
		err = -errno;
	close(fd);
	if (err)
		goto out_rmdir;
	*upload_id = strdup(id);
	if (!*upload_id) {
		err = -ENOMEM;
		goto out_rmdir;
	}
	return 0;
out_rmdir:
	unlinkat(sf->mpu_fd, id, AT_REMOVEDIR);
	return err;
}

/*
 * Store bytes [off, off+len) of in as part partno of the upload in ufd:
 * staged beside it and renamed, so a re-sent part replaces the old one
 * whole.  The etag is taken after the rename, as complete will see it.
 */
static int part_store(int ufd, int partno, int in, uint64_t off, uint64_t len,
		      char etag[STORE_ETAG_MAX])
{
	char tmp[TMP_NAME_MAX], name[16];
	struct stat sb;
	int fd, err;

	err = file_tmp_create(ufd, tmp, &fd);
	if (err)
		return err;
	snprintf(name, sizeof(name), "%d", partno);
	err = file_copy_bytes(in, off, fd, 0, len);
	if (!err && fsync(fd))
		err = -errno;
	if (err)
		goto out_unlink;
	if (renameat(ufd, tmp, ufd, name) || fsync(ufd) || fstat(fd, &sb)) {
		err = -errno;
		goto out_unlink;
	}
	file_etag_fill(&sb, false, etag);
	close(fd);
	return 0;
out_unlink:
	unlinkat(ufd, tmp, 0);
	close(fd);
	return err;
}

int file_mpu_part(struct store *st, const char *key, const char *upload_id,
		  int partno, int fd, uint64_t off, uint64_t len,
		  char etag[STORE_ETAG_MAX])
{
	struct keypath kp;
	int ufd, err;

	if (partno < 1 || partno > MPU_PARTS_MAX)
		return -EINVAL;
	err = file_key_parse(key, &kp);
	if (err)
		return err;
	err = upload_open(sf_of(st), key, upload_id, &ufd);
	if (err)
		return err;
	err = part_store(ufd, partno, fd, off, len, etag);
	close(ufd);
	return err;
}

int file_mpu_part_copy(struct store *st, const char *key, const char *upload_id,
		       int partno, const char *src, uint64_t off, uint64_t len,
		       char etag[STORE_ETAG_MAX])
{
	struct store_file *sf = sf_of(st);
	struct keypath kp, skp;
	struct stat sb;
	int ufd, sfd, err;

	if (partno < 1 || partno > MPU_PARTS_MAX)
		return -EINVAL;
	err = file_key_parse(key, &kp);
	if (!err)
		err = file_key_parse(src, &skp);
	if (err)
		return err;
	if (skp.marker)
		return -EINVAL;
	err = upload_open(sf, key, upload_id, &ufd);
	if (err)
		return err;
	err = file_obj_open(sf, &skp, &sfd, &sb);
	if (err)
		goto out_close_upload;
	/* S3 answers InvalidRange for a range past the source's end. */
	if (off > (uint64_t)sb.st_size || len > (uint64_t)sb.st_size - off)
		err = -EINVAL;
	else
		err = part_store(ufd, partno, sfd, off, len, etag);
	close(sfd);
out_close_upload:
	close(ufd);
	return err;
}

/* See store_file_int.h. */
int file_mpu_complete(struct store *st, const char *key, const char *upload_id,
		      int nparts, char (*etags)[STORE_ETAG_MAX],
		      const struct store_cond *cond, struct store_info *out)
{
	struct store_file *sf = sf_of(st);
	char tmp[TMP_NAME_MAX], name[16], etag[STORE_ETAG_MAX];
	struct store_meta meta;
	struct keypath kp;
	struct stat sb;
	uint64_t pos = 0;
	int ufd, fd, pfd, i, err;

	if (nparts < 1 || nparts > MPU_PARTS_MAX)
		return -EINVAL;
	err = file_key_parse(key, &kp);
	if (err)
		return err;
	err = upload_open(sf, key, upload_id, &ufd);
	if (err)
		return err;
	err = file_tmp_create(sf->stage_fd, tmp, &fd);
	if (err)
		goto out_close_upload;
	for (i = 1; i <= nparts && !err; i++) {
		snprintf(name, sizeof(name), "%d", i);
		pfd = openat(ufd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (pfd < 0) {
			err = errno == ENOENT ? -EINVAL : -errno;
			break;
		}
		if (fstat(pfd, &sb)) {
			err = -errno;
		} else {
			file_etag_fill(&sb, false, etag);
			if (strncmp(etag, etags[i - 1], STORE_ETAG_MAX))
				err = -EINVAL;
			else
				err = file_copy_bytes(pfd, 0, fd, pos,
						      (uint64_t)sb.st_size);
			pos += (uint64_t)sb.st_size;
		}
		close(pfd);
	}
	if (!err)
		err = file_meta_read(ufd, &meta);
	if (!err)
		err = file_stage_commit(sf, fd, tmp, &kp, &meta, cond, out);
	if (err)
		goto out_unlink;
	close(fd);
	/* The object is in place: a leftover upload dir is only clutter. */
	upload_remove(sf, ufd, upload_id);
	close(ufd);
	return 0;
out_unlink:
	unlinkat(sf->stage_fd, tmp, 0);
	close(fd);
out_close_upload:
	close(ufd);
	return err;
}

int file_mpu_abort(struct store *st, const char *key, const char *upload_id)
{
	struct store_file *sf = sf_of(st);
	struct keypath kp;
	int ufd, err;

	err = file_key_parse(key, &kp);
	if (err)
		return err;
	err = upload_open(sf, key, upload_id, &ufd);
	if (err)
		return err;
	err = upload_remove(sf, ufd, upload_id);
	close(ufd);
	return err;
}
