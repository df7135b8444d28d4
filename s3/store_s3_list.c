/*
 * s3/store_s3_list.c - the S3 backend's listings: ListObjectsV2 pages, and
 * ListMultipartUploads (our uploads in progress, and the stale ones a crash
 * left, aborted at open).
 */
#include "store_s3_int.h"
#include "buf.h"
#include "xml.h"
#include "common/log.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LIST_MAX 1000           /* S3's page size limit */
#define MPU_STALE_S (24 * 3600) /* our uploads older than this are debris */

int s3_list(struct store *st, const char *prefix, char delimiter,
	    const char *token, unsigned max_keys, struct store_page *out)
{
	struct store_s3 *s = s3_of(st);
	struct req r = { .method = "GET" };
	struct s3_buf full = { 0 };
	char delim[2] = { delimiter, '\0' }, maxk[16];
	int err;

	memset(out, 0, sizeof(*out));
	if (!prefix || strlen(prefix) > STORE_KEY_MAX)
		return -EINVAL;
	s3_buf_str(&full, s->prefix);
	s3_buf_str(&full, prefix);
	if (s3_buf_err(&full))
		return -ENOMEM;
	if (!max_keys || max_keys > LIST_MAX)
		max_keys = LIST_MAX;
	snprintf(maxk, sizeof(maxk), "%u", max_keys);
	s3_req_query(&r, "list-type", "2");
	s3_req_query(&r, "prefix", full.p);
	s3_req_query(&r, "max-keys", maxk);
	/* Keys may hold bytes XML 1.0 cannot carry: ask for them encoded. */
	s3_req_query(&r, "encoding-type", "url");
	if (delimiter)
		s3_req_query(&r, "delimiter", delim);
	if (token && *token)
		s3_req_query(&r, "continuation-token", token);
	err = s3_do(s, &r);
	if (!err)
		err = s3_xml_list(r.resp.p, r.resp.len, s->prefix, out);
	s3_req_free(&r);
	s3_buf_free(&full);
	return err;
}

/*
 * ListMultipartUploads of every page under our prefix + prefix: fn(arg,
 * store key, upload) for each of ours (its key under our prefix and
 * valid); a non-zero return stops the walk with it.  -ENOTSUP when the
 * server cannot list them (s3rver).
 */
static int uploads_walk(struct store_s3 *s, const char *prefix,
			int (*fn)(void *arg, const char *key,
				  const struct s3_upload *u),
			void *arg)
{
	char *kmark = NULL, *imark = NULL;
	struct s3_buf full = { 0 };
	int err;

	s3_buf_str(&full, s->prefix);
	s3_buf_str(&full, prefix);
	if (s3_buf_err(&full))
		return -ENOMEM;
	do {
		struct req r = { .method = "GET" };
		struct s3_uploads u;

		s3_req_query(&r, "uploads", NULL);
		s3_req_query(&r, "prefix", full.p);
		if (kmark)
			s3_req_query(&r, "key-marker", kmark);
		if (imark)
			s3_req_query(&r, "upload-id-marker", imark);
		err = s3_do(s, &r);
		if (!err)
			err = s3_xml_uploads(r.resp.p, r.resp.len, &u);
		s3_req_free(&r);
		free(kmark);
		free(imark);
		kmark = imark = NULL;
		if (err)
			break;
		for (size_t i = 0; !err && i < u.n; i++) {
			const char *k = u.v[i].key + strlen(s->prefix);

			if (strncmp(u.v[i].key, s->prefix, strlen(s->prefix)) ||
			    s3_key_check(k))
				continue;
			err = fn(arg, k, &u.v[i]);
		}
		if (!err && u.truncated) {
			kmark = u.next_key;
			imark = u.next_id;
			u.next_key = u.next_id = NULL;
		}
		s3_xml_uploads_free(&u);
	} while (kmark);
	s3_buf_free(&full);
	return err;
}

struct stale {
	struct store_s3 *s;
	int64_t cutoff;
	size_t aborted;
};

static int stale_abort(void *arg, const char *key, const struct s3_upload *u)
{
	struct stale *st = arg;

	if (u->initiated_ns && u->initiated_ns <= st->cutoff &&
	    s3_mpu_abort(&st->s->base, key, u->upload_id) == 0)
		st->aborted++;
	return 0;
}

/* See store_s3_int.h. */
void s3_abort_stale_uploads(struct store_s3 *s)
{
	struct stale st = {
		.s = s,
		.cutoff = ((int64_t)time(NULL) - MPU_STALE_S) * 1000000000,
	};
	int err = uploads_walk(s, "", stale_abort, &st);

	if (err == -ENOTSUP)
		log_info("s3: server cannot list multipart uploads; stale ones "
			 "are not cleaned up");
	else if (err)
		log_warn("s3: listing stale multipart uploads: %s",
			 strerror(-err));
	if (st.aborted)
		log_info("s3: aborted %zu stale multipart upload(s)",
			 st.aborted);
}

struct upload_list {
	struct store_upload *v;
	size_t n;
};

static int upload_keep(void *arg, const char *key, const struct s3_upload *u)
{
	struct upload_list *l = arg;

	return store_uploads_add(&l->v, &l->n, key, u->upload_id);
}

int s3_mpu_list(struct store *st, const char *prefix, struct store_upload **out,
		size_t *n)
{
	struct upload_list l = { 0 };
	int err;

	if (!prefix || strlen(prefix) > STORE_KEY_MAX)
		return -EINVAL;
	err = uploads_walk(s3_of(st), prefix, upload_keep, &l);
	if (err) {
		store_uploads_free(l.v, l.n);
		return err;
	}
	*out = l.v;
	*n = l.n;
	return 0;
}
