/*
 * s3/store_file_copy.c - the file backend's server-side copies, staged like
 * a PUT.
 */
#include "store_file_int.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

/* See store_file_int.h. */
int file_copy(struct store *st, const char *src, const char *dst,
	      const struct store_meta *meta, struct store_info *out)
{
	struct store_file *sf = sf_of(st);
	struct keypath skp, dkp;
	struct store_meta smeta;
	char tmp[TMP_NAME_MAX];
	struct stat sb;
	int sfd, fd, err;

	err = file_key_parse(src, &skp);
	if (!err)
		err = file_key_parse(dst, &dkp);
	if (err)
		return err;
	if (skp.marker != dkp.marker)
		return -EINVAL;
	if (skp.marker)
		err = file_marker_open(sf, &skp, false, &sfd, &sb);
	else
		err = file_obj_open(sf, &skp, &sfd, &sb);
	if (err)
		return err;
	if (!meta) {
		err = file_meta_read(sfd, &smeta);
		if (err)
			goto out_close_src;
		meta = &smeta;
	}
	if (skp.marker) {
		err = file_marker_put(sf, &dkp, meta, out);
		goto out_close_src;
	}
	err = file_tmp_create(sf->stage_fd, tmp, &fd);
	if (err)
		goto out_close_src;
	err = file_copy_bytes(sfd, 0, fd, 0, (uint64_t)sb.st_size);
	if (!err)
		err = file_stage_commit(sf, fd, tmp, &dkp, meta, NULL, out);
	if (err)
		unlinkat(sf->stage_fd, tmp, 0);
	close(fd);
out_close_src:
	close(sfd);
	return err;
}
