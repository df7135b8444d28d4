/*
 * s3/store_s3_delete.c - the S3 backend's deletes: DeleteObject, and
 * DeleteObjects batches with a fallback to single deletes where the server
 * cannot do them.
 */
#include "store_s3_int.h"
#include "buf.h"
#include "errmap.h"
#include "sign.h"
#include "xml.h"
#include "common/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define DELETE_BATCH 1000 /* S3's DeleteObjects limit */

int s3_del(struct store *st, const char *key)
{
	struct req r = { .method = "DELETE", .key = key };
	int err = s3_key_check(key);

	if (err)
		return err;
	err = s3_do(s3_of(st), &r);
	s3_req_free(&r);
	return err == -ENOENT ? 0 : err;
}

/* One DeleteObjects batch.  *fallback: the server cannot do batches. */
static int delete_batch(struct store_s3 *s, const char *const *keys, size_t n,
			bool *fallback)
{
	struct s3_buf body = { 0 }, full = { 0 };
	char **pk = calloc(n, sizeof(*pk)), md5[32];
	char code[S3_XML_CODE_MAX], key[STORE_KEY_MAX + 1];
	struct req r = { .method = "POST", .body = S3_BODY_MEM };
	size_t i;
	int err = 0, rc;

	if (!pk)
		return -ENOMEM;
	for (i = 0; i < n && !err; i++) {
		s3_buf_reset(&full);
		s3_buf_str(&full, s->prefix);
		s3_buf_str(&full, keys[i]);
		pk[i] = s3_buf_take(&full);
		if (!pk[i])
			err = -ENOMEM;
	}
	if (err)
		goto out_free;
	s3_xml_delete_body(&body, (const char *const *)pk, n);
	err = s3_buf_err(&body);
	if (!err)
		err = s3_md5_b64(body.p, body.len, md5);
	if (err)
		goto out_free;
	s3_req_query(&r, "delete", NULL);
	s3_req_hdr(&r, "content-md5", md5);
	s3_req_hdr(&r, "content-type", "application/xml");
	r.mem = body.p;
	r.len = body.len;
	err = s3_do(s, &r);
	/* s3rver answers 500 for some batches; single deletes work there. */
	if (err == -ENOTSUP || (err == -EAGAIN && r.status == 500)) {
		*fallback = true;
		err = 0;
		goto out_free;
	}
	if (err)
		goto out_free;
	rc = s3_xml_delete_result(r.resp.p, r.resp.len, code, key, sizeof(key));
	if (rc < 0) {
		err = rc;
	} else if (rc > 0 && strcmp(code, "NoSuchKey")) {
		log_debug("s3: DeleteObjects: %s failed: %s", key, code);
		err = s3_errmap(400, code, 0);
	}
out_free:
	s3_req_free(&r);
	s3_buf_free(&body);
	for (i = 0; i < n; i++)
		free(pk[i]);
	free(pk);
	return err;
}

int s3_del_many(struct store *st, const char *const *keys, size_t n)
{
	struct store_s3 *s = s3_of(st);
	int first = 0, err;
	size_t i, at;

	for (i = 0; i < n; i++)
		if (s3_key_check(keys[i]))
			return -EINVAL;
	for (at = 0; at < n; at += DELETE_BATCH) {
		size_t cnt = n - at < DELETE_BATCH ? n - at : DELETE_BATCH;
		bool fallback = false;

		err = delete_batch(s, keys + at, cnt, &fallback);
		/* Like DeleteObjects: every key is tried, the first error kept. */
		for (i = 0; fallback && i < cnt; i++) {
			err = s3_del(st, keys[at + i]);
			if (err && !first)
				first = err;
		}
		if (err && !first)
			first = err;
	}
	return first;
}
