/*
 * s3/store_s3_put.c - the S3 backend's writes: PUT from memory or a file,
 * multipart uploads, the conditions of both (If-Match, If-None-Match: *)
 * and what a 412 means, and the probe of which conditions the server
 * honours.
 */
#include "store_s3_int.h"
#include "buf.h"
#include "xml.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* cond's headers on r (none for NULL); buf keeps the If-Match value. */
static void cond_headers(struct store_s3 *s, struct req *r,
			 const struct store_cond *cond,
			 char buf[STORE_ETAG_MAX + 2])
{
	if (!cond || cond->kind == STORE_IF_ANY)
		return;
	if (cond->kind == STORE_IF_NONE) {
		s3_req_hdr(r, "if-none-match", "*");
		return;
	}
	if (atomic_load(&s->match_bare))
		snprintf(buf, STORE_ETAG_MAX + 2, "%s", cond->etag);
	else
		snprintf(buf, STORE_ETAG_MAX + 2, "\"%s\"", cond->etag);
	s3_req_hdr(r, "if-match", buf);
}

/*
 * A conditional write of key was answered 412 (-ESTALE): what it means,
 * from a HEAD.  The object carries cond's write id: our own write, from
 * a try whose answer was lost (then 0, *out from the HEAD).  -ENOENT for
 * an If-Match of a key that is gone; *again (with -ESTALE) when the
 * object is the very version If-Match named, so the server compared the
 * quotes too: from now on it is sent bare.  Else -ESTALE (someone else
 * wrote it) or the HEAD's error.
 */
static int cond_settle(struct store *st, const char *key,
		       const struct store_cond *cond, struct store_info *out,
		       bool *again)
{
	struct store_s3 *s = s3_of(st);
	struct store_info info;
	int err = s3_head(st, key, &info);

	*again = false;
	if (err == -ENOENT)
		return cond->kind == STORE_IF_MATCH ? -ENOENT : -ESTALE;
	if (err)
		return err;
	if (cond->wid[0] && !strcmp(info.meta.wid, cond->wid)) {
		if (out)
			*out = info;
		return 0;
	}
	if (cond->kind == STORE_IF_MATCH && !strcmp(info.etag, cond->etag) &&
	    !atomic_exchange(&s->match_bare, true)) {
		log_info("s3: %s compares If-Match without the quotes; sending "
			 "it bare",
			 s->origin);
		*again = true;
	}
	return -ESTALE;
}

/*
 * PUT of r's body (set up by the caller) with meta, if cond holds.  A
 * retry that meets its own earlier success (412) tells it by the write
 * id meta carries (cond_settle).
 */
static int put_common(struct store *st, const char *key, const struct req *body,
		      uint64_t len, const struct store_meta *meta,
		      const struct store_cond *cond, struct store_info *out)
{
	char ifm[STORE_ETAG_MAX + 2];
	bool again = true;
	struct meta_bufs mb;
	int err = s3_key_check(key);

	if (err)
		return err;
	if (s3_is_marker(key) && len)
		return -EINVAL;
	while (again) {
		struct req r = *body;

		again = false;
		r.method = "PUT";
		r.key = key;
		r.len = len;
		s3_meta_headers(&r, key, meta, &mb);
		cond_headers(s3_of(st), &r, cond, ifm);
		err = s3_do(s3_of(st), &r);
		if (!err)
			s3_write_info(&r, len, meta, out);
		s3_req_free(&r);
		if (err == -ESTALE && cond)
			err = cond_settle(st, key, cond, out, &again);
	}
	return err;
}

int s3_put(struct store *st, const char *key, const void *buf, size_t len,
	   const struct store_meta *meta, const struct store_cond *cond,
	   struct store_info *out)
{
	struct req r = { .body = S3_BODY_MEM, .mem = len ? buf : "" };

	return put_common(st, key, &r, len, meta, cond, out);
}

int s3_put_fd(struct store *st, const char *key, int fd, uint64_t len,
	      const struct store_meta *meta, const struct store_cond *cond,
	      struct store_info *out)
{
	struct req r = { .body = S3_BODY_FD, .fd = fd };

	return put_common(st, key, &r, len, meta, cond, out);
}

static bool upload_id_ok(const char *id)
{
	return id && *id && strlen(id) < 1024;
}

int s3_mpu_create(struct store *st, const char *key,
		  const struct store_meta *meta, char **upload_id)
{
	struct req r = { .method = "POST", .key = key };
	struct meta_bufs mb;
	int err = s3_key_check(key);

	if (err)
		return err;
	s3_req_query(&r, "uploads", NULL);
	s3_meta_headers(&r, key, meta, &mb);
	err = s3_do(s3_of(st), &r);
	if (!err)
		err = s3_xml_upload_id(r.resp.p, r.resp.len, upload_id);
	s3_req_free(&r);
	return err;
}

int s3_mpu_part(struct store *st, const char *key, const char *upload_id,
		int partno, int fd, uint64_t off, uint64_t len,
		char etag[STORE_ETAG_MAX])
{
	struct req r = { .method = "PUT",
			 .key = key,
			 .body = S3_BODY_FD,
			 .fd = fd,
			 .off = off,
			 .len = len };
	char pn[16];
	int err = s3_key_check(key);

	if (err)
		return err;
	if (!upload_id_ok(upload_id) || partno < 1 || partno > MPU_PARTS_MAX)
		return -EINVAL;
	snprintf(pn, sizeof(pn), "%d", partno);
	s3_req_query(&r, "partNumber", pn);
	s3_req_query(&r, "uploadId", upload_id);
	err = s3_do(s3_of(st), &r);
	if (!err && !r.rh.etag[0])
		err = -EIO;
	if (!err)
		snprintf(etag, STORE_ETAG_MAX, "%s", r.rh.etag);
	s3_req_free(&r);
	return err;
}

int s3_mpu_part_copy(struct store *st, const char *key, const char *upload_id,
		     int partno, const char *src, uint64_t off, uint64_t len,
		     char etag[STORE_ETAG_MAX])
{
	struct req r = { .method = "PUT", .key = key, .error_in_200 = true };
	char pn[16], range[64], *cs;
	int err = s3_key_check(key);

	if (!err)
		err = s3_key_check(src);
	if (err)
		return err;
	if (!upload_id_ok(upload_id) || partno < 1 || partno > MPU_PARTS_MAX ||
	    !len)
		return -EINVAL;
	cs = s3_copy_source(s3_of(st), src);
	if (!cs)
		return -ENOMEM;
	snprintf(pn, sizeof(pn), "%d", partno);
	snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, off,
		 off + len - 1);
	s3_req_query(&r, "partNumber", pn);
	s3_req_query(&r, "uploadId", upload_id);
	s3_req_hdr(&r, "x-amz-copy-source", cs);
	s3_req_hdr(&r, "x-amz-copy-source-range", range);
	err = s3_do(s3_of(st), &r);
	/*
	 * A server without UploadPartCopy may take this for an empty part
	 * upload and answer 200: only a CopyPartResult proves the copy.
	 */
	if (!err &&
	    s3_xml_etag(r.resp.p, r.resp.len, "CopyPartResult", etag, NULL))
		err = -ENOTSUP;
	s3_req_free(&r);
	free(cs);
	return err;
}

/* ListParts of one part: 0 if the upload exists, -ENOENT if not. */
static int upload_probe(struct store *st, const char *key,
			const char *upload_id)
{
	struct req r = { .method = "GET", .key = key };
	int err;

	s3_req_query(&r, "uploadId", upload_id);
	s3_req_query(&r, "max-parts", "1");
	err = s3_do(s3_of(st), &r);
	s3_req_free(&r);
	return err;
}

/* Did an upload whose Complete was retried complete on an earlier try?
 * Its id is gone and the key is a multipart object of nparts parts. */
static bool mpu_completed(struct store *st, const char *key,
			  const char *upload_id, int nparts)
{
	struct store_info info;
	char suffix[16];
	size_t el, sl;

	if (upload_probe(st, key, upload_id) != -ENOENT ||
	    s3_head(st, key, &info))
		return false;
	snprintf(suffix, sizeof(suffix), "-%d", nparts);
	el = strlen(info.etag);
	sl = strlen(suffix);
	return el > sl && strcmp(info.etag + el - sl, suffix) == 0;
}

int s3_mpu_complete(struct store *st, const char *key, const char *upload_id,
		    int nparts, char (*etags)[STORE_ETAG_MAX],
		    const struct store_cond *cond, struct store_info *out)
{
	struct s3_buf body = { 0 };
	char etag[STORE_ETAG_MAX], ifm[STORE_ETAG_MAX + 2];
	bool again = true;
	int err = s3_key_check(key);

	if (err)
		return err;
	if (!upload_id_ok(upload_id) || nparts < 1 || nparts > MPU_PARTS_MAX)
		return -EINVAL;
	s3_xml_complete_body(&body, nparts, etags);
	if (s3_buf_err(&body))
		return -ENOMEM;
	while (again) {
		struct req r = { .method = "POST",
				 .key = key,
				 .body = S3_BODY_MEM,
				 .error_in_200 = true };

		again = false;
		s3_req_query(&r, "uploadId", upload_id);
		s3_req_hdr(&r, "content-type", "application/xml");
		cond_headers(s3_of(st), &r, cond, ifm);
		r.mem = body.p;
		r.len = body.len;
		err = s3_do(s3_of(st), &r);
		if (!err)
			err = s3_xml_etag(r.resp.p, r.resp.len,
					  "CompleteMultipartUploadResult", etag,
					  NULL);
		/* radosgw 16.2 answers 500, not NoSuchUpload, for an aborted
		 * upload. */
		if (err == -EAGAIN && r.status == 500 &&
		    upload_probe(st, key, upload_id) == -ENOENT)
			err = -ENOENT;
		/* A retry after a lost answer finds the upload gone (or the
		 * condition false) because it completed: a multipart ETag
		 * ends in "-<parts>". */
		if ((err == -ENOENT || err == -ESTALE) && r.tries > 1 &&
		    mpu_completed(st, key, upload_id, nparts))
			err = 0;
		else if (err == -ESTALE && cond)
			err = cond_settle(st, key, cond, NULL, &again);
		s3_req_free(&r);
	}
	s3_buf_free(&body);
	/* radosgw's answer has an empty ETag and no size: ask HEAD. */
	if (!err && out)
		err = s3_head(st, key, out);
	return err;
}

int s3_mpu_abort(struct store *st, const char *key, const char *upload_id)
{
	struct req r = { .method = "DELETE", .key = key };
	int err = s3_key_check(key);

	if (err)
		return err;
	if (!upload_id_ok(upload_id))
		return -EINVAL;
	s3_req_query(&r, "uploadId", upload_id);
	err = s3_do(s3_of(st), &r);
	s3_req_free(&r);
	return err;
}

/* Does the server refuse a Complete of key, which exists, under
 * If-None-Match: *?  -ESTALE if it does, 0 if it completed. */
static int cond_probe_mpu(struct store *st, const char *key)
{
	struct store_cond none = { .kind = STORE_IF_NONE };
	char etags[1][STORE_ETAG_MAX], *id = NULL;
	int err = s3_mpu_create(st, key, NULL, &id);
	struct req r = { .method = "PUT",
			 .key = key,
			 .body = S3_BODY_MEM,
			 .mem = "x",
			 .len = 1 };

	if (err)
		return err;
	s3_req_query(&r, "partNumber", "1");
	s3_req_query(&r, "uploadId", id);
	err = s3_do(s3_of(st), &r);
	snprintf(etags[0], sizeof(etags[0]), "%s", r.rh.etag);
	s3_req_free(&r);
	if (!err)
		err = s3_mpu_complete(st, key, id, 1, etags, &none, NULL);
	if (err)
		s3_mpu_abort(st, key, id);
	free(id);
	return err;
}

/* See store_s3_int.h. */
int s3_cond_native(struct store *st)
{
	struct store_cond none = { .kind = STORE_IF_NONE };
	struct store_cond match = {
		.kind = STORE_IF_MATCH,
		.etag = "00000000000000000000000000000000"
	};
	unsigned char raw[8] = { 0 };
	char key[64];
	int bits = 0, err;

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		memset(raw, 0, sizeof(raw)); /* one fixed name: still ours */
	snprintf(key, sizeof(key),
		 STORE_RESERVED_PREFIX
		 "gw-cond-%02x%02x%02x%02x%02x%02x%02x%02x",
		 raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6],
		 raw[7]);
	err = s3_put(st, key, "", 0, NULL, &none, NULL);
	if (err)
		return err;
	err = s3_put(st, key, "", 0, NULL, &none, NULL);
	if (err == -ESTALE)
		bits |= STORE_COND_NONE_OK;
	if (!err || err == -ESTALE)
		err = s3_put(st, key, "", 0, NULL, &match, NULL);
	if (err == -ESTALE)
		bits |= STORE_COND_MATCH_OK;
	if (!err || err == -ESTALE)
		err = cond_probe_mpu(st, key);
	if (err == -ESTALE)
		bits |= STORE_COND_MPU_OK;
	s3_del(st, key);
	return err && err != -ESTALE ? err : bits;
}
