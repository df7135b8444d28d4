/*
 * s3/store_s3_copy.c - the S3 backend's server-side copies: CopyObject, and
 * part copies for an object past its 5 GiB limit.
 */
#include "store_s3_int.h"
#include "xml.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#define COPY_MAX (5ull << 30) /* CopyObject's limit; above: part copies */
#define COPY_PART (1ull << 30)

/* Copy an object too big for CopyObject as parts of COPY_PART bytes. */
static int copy_multipart(struct store *st, const char *src, const char *dst,
			  const struct store_info *sinfo,
			  const struct store_meta *meta, struct store_info *out)
{
	uint64_t size = sinfo->size;
	int nparts = (int)((size + COPY_PART - 1) / COPY_PART), i;
	char(*etags)[STORE_ETAG_MAX];
	char *id = NULL;
	int err;

	if (nparts > MPU_PARTS_MAX)
		return -EFBIG;
	etags = calloc((size_t)nparts, sizeof(*etags));
	if (!etags)
		return -ENOMEM;
	err = s3_mpu_create(st, dst, meta ? meta : &sinfo->meta, &id);
	for (i = 0; !err && i < nparts; i++) {
		uint64_t off = (uint64_t)i * COPY_PART;
		uint64_t len = size - off < COPY_PART ? size - off : COPY_PART;

		err = s3_mpu_part_copy(st, dst, id, i + 1, src, off, len,
				       etags[i]);
	}
	if (!err)
		err = s3_mpu_complete(st, dst, id, nparts, etags, NULL, out);
	if (err && id)
		s3_mpu_abort(st, dst, id);
	free(id);
	free(etags);
	return err;
}

int s3_copy(struct store *st, const char *src, const char *dst,
	    const struct store_meta *meta, struct store_info *out)
{
	struct req r = { .method = "PUT", .key = dst, .error_in_200 = true };
	struct store_info sinfo;
	struct meta_bufs mb;
	char etag[STORE_ETAG_MAX], *cs;
	int err = s3_key_check(src);

	if (!err)
		err = s3_key_check(dst);
	if (err)
		return err;
	if (s3_is_marker(src) != s3_is_marker(dst))
		return -EINVAL;
	cs = s3_copy_source(s3_of(st), src);
	if (!cs)
		return -ENOMEM;
	s3_req_hdr(&r, "x-amz-copy-source", cs);
	s3_req_hdr(&r, "x-amz-metadata-directive", meta ? "REPLACE" : "COPY");
	if (meta)
		s3_meta_headers(&r, dst, meta, &mb);
	err = s3_do(s3_of(st), &r);
	if (!err)
		err = s3_xml_etag(r.resp.p, r.resp.len, "CopyObjectResult",
				  etag, NULL);
	s3_req_free(&r);
	free(cs);
	if ((err == -EINVAL || err == -EFBIG) &&
	    s3_head(st, src, &sinfo) == 0 && sinfo.size > COPY_MAX)
		return copy_multipart(st, src, dst, &sinfo, meta, out);
	/* CopyObjectResult has no size and (with COPY) no metadata. */
	if (!err && out)
		err = s3_head(st, dst, out);
	return err;
}
