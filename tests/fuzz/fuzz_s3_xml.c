/*
 * tests/fuzz/fuzz_s3_xml.c - the readers of S3's XML answers (s3/xml.h),
 * one per response kind.
 *
 * Input: one byte picking the reader (and, for listings, the key prefix
 * to strip), then the response body.  Whatever the body, a reader either
 * fails with -EIO or -ENOMEM and leaves nothing to free, or gives a
 * result that holds what its header promises.
 */
#include <errno.h>
#include <string.h>

#include "s3/xml.h"
#include "tests/fuzz/fuzz.h"

static void check_err(int err)
{
	FUZZ_CHECK(err == 0 || err == -EIO || err == -ENOMEM);
}

static void fuzz_list(const char *body, size_t len, const char *strip)
{
	struct store_page page;
	int err = s3_xml_list(body, len, strip, &page);

	check_err(err);
	if (err) {
		/* Freed on failure: nothing left for the caller. */
		FUZZ_CHECK(!page.entries && !page.prefixes && !page.next_token);
		return;
	}
	for (size_t i = 0; i < page.nentries; i++) {
		FUZZ_CHECK(page.entries[i].key && page.entries[i].key[0]);
		FUZZ_CHECK(strlen(page.entries[i].etag) < STORE_ETAG_MAX);
	}
	for (size_t i = 0; i < page.nprefixes; i++)
		FUZZ_CHECK(page.prefixes[i] && page.prefixes[i][0]);
	FUZZ_CHECK(!page.next_token || page.next_token[0]);
	store_page_free(&page);
}

static void fuzz_uploads(const char *body, size_t len)
{
	struct s3_uploads u;
	int err = s3_xml_uploads(body, len, &u);

	check_err(err);
	if (err) {
		FUZZ_CHECK(!u.v && !u.n && !u.next_key && !u.next_id);
		return;
	}
	for (size_t i = 0; i < u.n; i++)
		FUZZ_CHECK(u.v[i].key && u.v[i].upload_id);
	FUZZ_CHECK(!u.truncated || u.next_key);
	s3_xml_uploads_free(&u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const etag_roots[] = {
		"CopyObjectResult",
		"CopyPartResult",
		"CompleteMultipartUploadResult",
	};
	char code[S3_XML_CODE_MAX], msg[S3_XML_MSG_MAX], key[64];
	char etag[STORE_ETAG_MAX];
	const char *body;
	char *id = NULL;
	int64_t ns;
	size_t len;
	int err;

	if (size < 1)
		return 0;
	body = (const char *)data + 1;
	len = size - 1;
	switch (data[0] % 8) {
	case 0:
		err = s3_xml_error(body, len, code, msg);
		check_err(err);
		if (!err)
			FUZZ_CHECK(strlen(code) < S3_XML_CODE_MAX &&
				   strlen(msg) < S3_XML_MSG_MAX);
		break;
	case 1:
		/* No prefix, and the store's prefix of an s3://bucket/pre URL. */
		fuzz_list(body, len, data[0] & 0x80 ? "pre/" : "");
		break;
	case 2:
		err = s3_xml_upload_id(body, len, &id);
		check_err(err);
		FUZZ_CHECK(err ? !id : id && id[0]);
		free(id);
		break;
	case 3:
	case 4:
	case 5:
		err = s3_xml_etag(body, len, etag_roots[data[0] % 8 - 3], etag,
				  data[0] & 0x80 ? &ns : NULL);
		check_err(err);
		if (!err)
			FUZZ_CHECK(strlen(etag) < STORE_ETAG_MAX);
		break;
	case 6:
		fuzz_uploads(body, len);
		break;
	case 7:
		err = s3_xml_delete_result(body, len, code, key, sizeof(key));
		FUZZ_CHECK(err == 0 || err == 1 || err == -EIO ||
			   err == -ENOMEM);
		break;
	}
	return 0;
}
