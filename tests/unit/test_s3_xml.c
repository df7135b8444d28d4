/*
 * Unit tests for s3/xml.c (S3's XML documents, read with expat) and
 * s3/errmap.c (HTTP/S3/transport errors to errno).  The documents are
 * shaped like real AWS and radosgw answers, namespace included.
 */
#include <CUnit/Basic.h>
#include <curl/curl.h>
#include <errno.h>
#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3/buf.h"
#include "s3/errmap.h"
#include "s3/xml.h"

#define NS "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\""
#define HDR "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"

static int parse_list(const char *doc, const char *strip, struct store_page *p)
{
	return s3_xml_list(doc, strlen(doc), strip, p);
}

static void test_list_plain(void)
{
	const char *doc =
		HDR "<ListBucketResult " NS ">"
		    "<Name>bench</Name><Prefix></Prefix><KeyCount>2</KeyCount>"
		    "<MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>"
		    "<Contents><Key>a.txt</Key>"
		    "<LastModified>2009-10-12T17:50:30.000Z</LastModified>"
		    "<ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag>"
		    "<Size>434234</Size><StorageClass>STANDARD</StorageClass>"
		    "</Contents>"
		    "<Contents><Key>b &amp; c</Key>"
		    "<LastModified>1970-01-01T00:00:01.5Z</LastModified>"
		    "<ETag>\"x-2\"</ETag><Size>0</Size></Contents>"
		    "</ListBucketResult>";
	struct store_page p;

	CU_ASSERT_FATAL(parse_list(doc, "", &p) == 0);
	CU_ASSERT(p.nentries == 2 && p.nprefixes == 0 && !p.next_token);
	if (p.nentries == 2) {
		CU_ASSERT_STRING_EQUAL(p.entries[0].key, "a.txt");
		CU_ASSERT(p.entries[0].size == 434234);
		CU_ASSERT_STRING_EQUAL(p.entries[0].etag,
				       "fba9dede5f27731c9771645a39863328");
		CU_ASSERT(p.entries[0].last_modified_ns ==
			  1255369830LL * 1000000000);
		CU_ASSERT_STRING_EQUAL(p.entries[1].key, "b & c");
		CU_ASSERT_STRING_EQUAL(p.entries[1].etag, "x-2");
		CU_ASSERT(p.entries[1].last_modified_ns == 1500000000LL);
	}
	store_page_free(&p);
}

/*
 * A url-encoded key with %00 is skipped whole (a key and a prefix): as a
 * C string "a%00x" would be "a" and shadow the real object a.
 */
static void test_list_nul_key(void)
{
	const char *doc = HDR
		"<ListBucketResult " NS ">"
		"<EncodingType>url</EncodingType>"
		"<IsTruncated>false</IsTruncated>"
		"<Contents><Key>a%00x</Key><ETag>\"e1\"</ETag><Size>5</Size>"
		"</Contents>"
		"<Contents><Key>a</Key><ETag>\"e2\"</ETag><Size>7</Size>"
		"</Contents>"
		"<CommonPrefixes><Prefix>d%00ir/</Prefix></CommonPrefixes>"
		"</ListBucketResult>";
	struct store_page p;

	CU_ASSERT_FATAL(parse_list(doc, "", &p) == 0);
	CU_ASSERT_EQUAL(p.nentries, 1);
	CU_ASSERT_EQUAL(p.nprefixes, 0);
	if (p.nentries == 1) {
		CU_ASSERT_STRING_EQUAL(p.entries[0].key, "a");
		CU_ASSERT(p.entries[0].size == 7);
	}
	store_page_free(&p);
}

static void test_list_prefixes_truncated(void)
{
	const char *doc =
		HDR "<ListBucketResult " NS ">"
		    "<Name>bench</Name><Prefix>pfx%2Fdir%2F</Prefix>"
		    "<Delimiter>%2F</Delimiter><EncodingType>url</EncodingType>"
		    "<IsTruncated>true</IsTruncated>"
		    "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/"
		    "wm36Hy4vbOwM=</NextContinuationToken>"
		    "<Contents><Key>pfx%2Fdir%2F</Key><Size>0</"
		    "Size><ETag>\"d41d8cd98f00b204e9800998ecf8427e\"</ETag></"
		    "Contents>"
		    "<Contents><Key>pfx%2Fdir%2Fsp+ace%2B%25</Key><Size>7</"
		    "Size><ETag>\"e\"</ETag></Contents>"
		    "<CommonPrefixes><Prefix>pfx%2Fdir%2Fsub%2F</Prefix></"
		    "CommonPrefixes>"
		    "<CommonPrefixes><Prefix>pfx%2Fdir%2Fz%2F</Prefix></"
		    "CommonPrefixes>"
		    "</ListBucketResult>";
	struct store_page p;

	CU_ASSERT_FATAL(parse_list(doc, "pfx/", &p) == 0);
	/* The listed prefix's own marker "pfx/dir/" stays (as "dir/"). */
	CU_ASSERT(p.nentries == 2);
	if (p.nentries == 2) {
		CU_ASSERT_STRING_EQUAL(p.entries[0].key, "dir/");
		CU_ASSERT_STRING_EQUAL(p.entries[1].key, "dir/sp ace+%");
	}
	CU_ASSERT(p.nprefixes == 2);
	if (p.nprefixes == 2) {
		CU_ASSERT_STRING_EQUAL(p.prefixes[0], "dir/sub/");
		CU_ASSERT_STRING_EQUAL(p.prefixes[1], "dir/z/");
	}
	CU_ASSERT(p.next_token &&
		  strcmp(p.next_token,
			 "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=") == 0);
	store_page_free(&p);

	/* The store prefix's own marker is never a key of the store. */
	CU_ASSERT_FATAL(
		parse_list(HDR "<ListBucketResult><IsTruncated>false"
			       "</IsTruncated><Contents><Key>pfx/</Key>"
			       "<Size>0</Size></Contents></ListBucketResult>",
			   "pfx/", &p) == 0);
	CU_ASSERT(p.nentries == 0);
	store_page_free(&p);
}

static void test_list_malformed(void)
{
	static const char *const bad[] = {
		/* not well-formed */
		HDR
		"<ListBucketResult><Contents><Key>a</Key></ListBucketResult>",
		HDR "<ListBucketResult><IsTruncated>false</IsTruncated>",
		"",
		"not xml at all",
		/* wrong root */
		HDR "<ListAllMyBucketsResult></ListAllMyBucketsResult>",
		/* a key without Key, a bad size */
		HDR "<ListBucketResult><Contents><Size>1</Size></Contents>"
		    "</ListBucketResult>",
		HDR "<ListBucketResult><Contents><Key>a</Key><Size>-1</Size>"
		    "</Contents></ListBucketResult>",
		HDR "<ListBucketResult><Contents><Key>a</Key><Size>12x</Size>"
		    "</Contents></ListBucketResult>",
		/* truncated without a token */
		HDR "<ListBucketResult><IsTruncated>true</IsTruncated>"
		    "</ListBucketResult>",
		/* bad url encoding */
		HDR "<ListBucketResult><EncodingType>url</EncodingType>"
		    "<Contents><Key>a%zz</Key><Size>1</Size></Contents>"
		    "</ListBucketResult>",
		/* entity expansion: no DTD is accepted */
		HDR "<!DOCTYPE l [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b "
		    "\"&a;&a;&a;\">]>"
		    "<ListBucketResult><Prefix>&b;</Prefix></ListBucketResult>",
		/* text that only looks like a list */
		"IsTruncated>false</IsTruncated><Contents><Key>a</Key>",
	};
	struct store_page p;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse_list(bad[i], "", &p);

		CU_ASSERT(rc == -EIO);
		if (rc != -EIO)
			fprintf(stderr, "accepted bad document %zu (%d)\n", i,
				rc);
		CU_ASSERT(p.nentries == 0 && !p.entries && !p.next_token);
	}
}

static void test_error(void)
{
	const char *doc = HDR
		"<Error><Code>NoSuchKey</Code>"
		"<Message>The resource you requested does not exist</Message>"
		"<Resource>/mybucket/myfoto.jpg</Resource>"
		"<RequestId>4442587FB7D0A2F9</RequestId></Error>";
	const char *notes = HDR "<Error><Message>only</Message></Error>";
	char code[S3_XML_CODE_MAX], msg[S3_XML_MSG_MAX];

	CU_ASSERT(s3_xml_error(doc, strlen(doc), code, msg) == 0);
	CU_ASSERT_STRING_EQUAL(code, "NoSuchKey");
	CU_ASSERT_STRING_EQUAL(msg,
			       "The resource you requested does not exist");
	CU_ASSERT(s3_xml_error(notes, strlen(notes), code, msg) == 0);
	CU_ASSERT_STRING_EQUAL(code, "");
	doc = HDR "<CopyObjectResult><ETag>\"x\"</ETag></CopyObjectResult>";
	CU_ASSERT(s3_xml_error(doc, strlen(doc), code, msg) == -EIO);
	CU_ASSERT(s3_xml_error("<Error><Code>x", 14, code, msg) == -EIO);
}

static void test_multipart_docs(void)
{
	const char *init =
		HDR "<InitiateMultipartUploadResult " NS ">"
		    "<Bucket>example-bucket</Bucket><Key>example-object</Key>"
		    "<UploadId>"
		    "VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA"
		    "</UploadId>"
		    "</InitiateMultipartUploadResult>";
	const char *cmpl =
		HDR "<CompleteMultipartUploadResult " NS ">"
		    "<Location>http://b.s3.amazonaws.com/k</Location>"
		    "<Bucket>b</Bucket><Key>k</Key>"
		    "<ETag>\"3858f62230ac3c915f300c664312c11f-9\"</ETag>"
		    "</CompleteMultipartUploadResult>";
	const char *rgw =
		HDR "<CompleteMultipartUploadResult " NS ">"
		    "<Location>b/k</Location><Bucket>b</Bucket><Key>k</Key>"
		    "<ETag></ETag></CompleteMultipartUploadResult>";
	const char *copy =
		HDR "<CopyObjectResult>"
		    "<LastModified>2009-10-28T22:32:00.000Z</LastModified>"
		    "<ETag>\"9b2cf535f27731c974343645a3985328\"</ETag>"
		    "</CopyObjectResult>";
	const char *part =
		HDR "<CopyPartResult>"
		    "<LastModified>2011-04-11T20:34:56.000Z</LastModified>"
		    "<ETag>\"9b2cf535f27731c974343645a3985328\"</ETag>"
		    "</CopyPartResult>";
	char etag[STORE_ETAG_MAX], *id = NULL;
	int64_t lm = 0;

	CU_ASSERT(s3_xml_upload_id(init, strlen(init), &id) == 0);
	CU_ASSERT(id && strcmp(id, "VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5"
				   "tMnRzIHVwbG9hZA") == 0);
	free(id);
	CU_ASSERT(s3_xml_upload_id(cmpl, strlen(cmpl), &id) == -EIO);
	CU_ASSERT(s3_xml_etag(cmpl, strlen(cmpl),
			      "CompleteMultipartUploadResult", etag,
			      NULL) == 0);
	CU_ASSERT_STRING_EQUAL(etag, "3858f62230ac3c915f300c664312c11f-9");
	CU_ASSERT(s3_xml_etag(rgw, strlen(rgw), "CompleteMultipartUploadResult",
			      etag, NULL) == 0);
	CU_ASSERT_STRING_EQUAL(etag, "");
	CU_ASSERT(s3_xml_etag(copy, strlen(copy), "CopyObjectResult", etag,
			      &lm) == 0);
	CU_ASSERT_STRING_EQUAL(etag, "9b2cf535f27731c974343645a3985328");
	CU_ASSERT(lm == 1256769120LL * 1000000000);
	CU_ASSERT(s3_xml_etag(part, strlen(part), "CopyPartResult", etag,
			      NULL) == 0);
	/* An <Error> in a 200 or the wrong document is not a result. */
	CU_ASSERT(s3_xml_etag(part, strlen(part), "CopyObjectResult", etag,
			      NULL) == -EIO);
	CU_ASSERT(s3_xml_etag("<Error><Code>InternalError</Code></Error>", 41,
			      "CompleteMultipartUploadResult", etag,
			      NULL) == -EIO);
	/* A 200 with an empty body (a server ignoring x-amz-copy-source). */
	CU_ASSERT(s3_xml_etag("", 0, "CopyPartResult", etag, NULL) == -EIO);
}

static void test_uploads(void)
{
	const char *doc = HDR
		"<ListMultipartUploadsResult " NS ">"
		"<Bucket>bucket</Bucket><KeyMarker></KeyMarker>"
		"<UploadIdMarker></UploadIdMarker>"
		"<NextKeyMarker>my-movie.m2ts</NextKeyMarker>"
		"<NextUploadIdMarker>"
		"YW55IGlkZWEgd2h5IGVsdmluZydzIHVwbG9hZCBmYWlsZWQ</"
		"NextUploadIdMarker>"
		"<MaxUploads>3</MaxUploads><IsTruncated>true</IsTruncated>"
		"<Upload><Key>my-divisor</Key>"
		"<UploadId>XMgbGlrZSBlbHZpbmcncyBub3QgaGF2aW5nIG11Y2ggbHVjaw</"
		"UploadId>"
		"<Initiated>2010-11-10T20:48:33.000Z</Initiated></Upload>"
		"<Upload><Key>my-movie.m2ts</Key>"
		"<UploadId>"
		"VXBsb2FkIElEIGZvciBlbHZpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA</"
		"UploadId>"
		"<Initiated>2010-11-10T20:48:33.000Z</Initiated></Upload>"
		"</ListMultipartUploadsResult>";
	struct s3_uploads u;

	CU_ASSERT_FATAL(s3_xml_uploads(doc, strlen(doc), &u) == 0);
	CU_ASSERT(u.n == 2 && u.truncated);
	if (u.n == 2) {
		CU_ASSERT_STRING_EQUAL(u.v[1].key, "my-movie.m2ts");
		CU_ASSERT(u.v[0].initiated_ns == 1289422113LL * 1000000000);
	}
	CU_ASSERT(u.next_key && strcmp(u.next_key, "my-movie.m2ts") == 0);
	CU_ASSERT(u.next_id &&
		  strcmp(u.next_id,
			 "YW55IGlkZWEgd2h5IGVsdmluZydzIHVwbG9hZCBmYWlsZWQ") ==
			  0);
	s3_xml_uploads_free(&u);
	doc = HDR "<ListMultipartUploadsResult><Upload><Key>k</Key></Upload>"
		  "</ListMultipartUploadsResult>";
	CU_ASSERT(s3_xml_uploads(doc, strlen(doc), &u) == -EIO);
}

static void test_delete_result(void)
{
	const char *ok = HDR "<DeleteResult " NS "><Deleted><Key>a</Key>"
			     "</Deleted></DeleteResult>";
	const char *quiet = HDR "<DeleteResult " NS "/>";
	const char *bad =
		HDR "<DeleteResult " NS ">"
		    "<Deleted><Key>a</Key></Deleted>"
		    "<Error><Key>sample2.txt</Key><Code>AccessDenied</Code>"
		    "<Message>Access Denied</Message></Error>"
		    "<Error><Key>x</Key><Code>InternalError</Code></Error>"
		    "</DeleteResult>";
	char code[S3_XML_CODE_MAX], key[64];

	CU_ASSERT(s3_xml_delete_result(ok, strlen(ok), code, key,
				       sizeof(key)) == 0);
	CU_ASSERT(s3_xml_delete_result(quiet, strlen(quiet), code, key,
				       sizeof(key)) == 0);
	CU_ASSERT(s3_xml_delete_result(bad, strlen(bad), code, key,
				       sizeof(key)) == 1);
	CU_ASSERT_STRING_EQUAL(code, "AccessDenied");
	CU_ASSERT_STRING_EQUAL(key, "sample2.txt");
	CU_ASSERT(s3_xml_delete_result("<Delete", 7, code, key, sizeof(key)) ==
		  -EIO);
}

/* An expat reader of our own bodies: every <Key>/<ETag> text, in order. */
struct collect {
	struct s3_buf text, all;
	int in;
};

static void XMLCALL c_start(void *ud, const XML_Char *n, const XML_Char **a)
{
	struct collect *c = ud;

	(void)a;
	if (strcmp(n, "Key") == 0 || strcmp(n, "ETag") == 0) {
		c->in = 1;
		s3_buf_reset(&c->text);
	}
}

static void XMLCALL c_end(void *ud, const XML_Char *n)
{
	struct collect *c = ud;

	(void)n;
	if (c->in) {
		s3_buf_add(&c->text, "", 0);
		s3_buf_fmt(&c->all, "[%s]", c->text.p);
	}
	c->in = 0;
}

static void XMLCALL c_text(void *ud, const XML_Char *s, int len)
{
	struct collect *c = ud;

	if (c->in)
		s3_buf_add(&c->text, s, (size_t)len);
}

static char *reparse(const struct s3_buf *b)
{
	struct collect c = { 0 };
	XML_Parser xp = XML_ParserCreate(NULL);
	int ok;

	XML_SetUserData(xp, &c);
	XML_SetElementHandler(xp, c_start, c_end);
	XML_SetCharacterDataHandler(xp, c_text);
	ok = XML_Parse(xp, b->p, (int)b->len, XML_TRUE) == XML_STATUS_OK;
	XML_ParserFree(xp);
	s3_buf_free(&c.text);
	if (!ok) {
		s3_buf_free(&c.all);
		return NULL;
	}
	return s3_buf_take(&c.all);
}

static void test_escaping(void)
{
	const char *keys[] = { "plain", "a&b<c>d\"e'f", "</Key><Key>evil",
			       "tab\there\nnl\rcr", "\xe1\x88\xb4 utf8" };
	char etags[2][STORE_ETAG_MAX] = { "abc", "x&<y>-2" };
	struct s3_buf b = { 0 };
	char *got;

	s3_xml_delete_body(&b, keys, 5);
	CU_ASSERT_FATAL(s3_buf_err(&b) == 0);
	CU_ASSERT(strstr(b.p, "<Quiet>true</Quiet>") != NULL);
	got = reparse(&b);
	CU_ASSERT(got &&
		  strcmp(got, "[plain][a&b<c>d\"e'f][</Key><Key>evil]"
			      "[tab\there\nnl\rcr][\xe1\x88\xb4 utf8]") == 0);
	if (got && strcmp(got, "[plain][a&b<c>d\"e'f][</Key><Key>evil]"
			       "[tab\there\nnl\rcr][\xe1\x88\xb4 utf8]"))
		fprintf(stderr, "reparsed: %s\n", got);
	free(got);
	s3_buf_free(&b);

	s3_xml_complete_body(&b, 2, etags);
	CU_ASSERT(
		strstr(b.p, "<PartNumber>1</PartNumber><ETag>\"abc\"</ETag>") !=
		NULL);
	CU_ASSERT(strstr(b.p, "<PartNumber>2</PartNumber>") != NULL);
	got = reparse(&b);
	CU_ASSERT(got && strcmp(got, "[\"abc\"][\"x&<y>-2\"]") == 0);
	free(got);
	s3_buf_free(&b);
}

static void test_time(void)
{
	int64_t ns;

	CU_ASSERT(s3_xml_time("2013-05-24T00:00:00Z", &ns) == 0 &&
		  ns == 1369353600LL * 1000000000);
	CU_ASSERT(s3_xml_time("2013-05-24T00:00:00.123456789Z", &ns) == 0 &&
		  ns == 1369353600LL * 1000000000 + 123456789);
	CU_ASSERT(s3_xml_time("2013-05-24", &ns) == -EINVAL);
	CU_ASSERT(s3_xml_time("2013-05-24T00:00:00Zjunk", &ns) == -EINVAL);
	/* The ends of int64 nanoseconds, and past them (fuzz_s3_xml). */
	CU_ASSERT(s3_xml_time("2262-04-11T23:47:16.854775807Z", &ns) == 0 &&
		  ns == INT64_MAX);
	CU_ASSERT(s3_xml_time("1677-09-21T00:12:44Z", &ns) == 0 &&
		  ns == -9223372036LL * 1000000000);
	CU_ASSERT(s3_xml_time("2262-04-11T23:47:16.854775808Z", &ns) ==
		  -EINVAL);
	CU_ASSERT(s3_xml_time("2263-01-01T00:00:00Z", &ns) == -EINVAL);
	CU_ASSERT(s3_xml_time("1677-09-21T00:12:43Z", &ns) == -EINVAL);
	CU_ASSERT(s3_xml_time("1004-10-28T22:32:00.000Z", &ns) == -EINVAL);
}

static void test_errmap(void)
{
	CU_ASSERT(s3_errmap(200, "", 0) == 0);
	CU_ASSERT(s3_errmap(206, NULL, 0) == 0);
	CU_ASSERT(s3_errmap(404, "NoSuchKey", 0) == -ENOENT);
	CU_ASSERT(s3_errmap(404, "", 0) == -ENOENT);
	CU_ASSERT(s3_errmap(404, "NoSuchUpload", 0) == -ENOENT);
	CU_ASSERT(s3_errmap(404, "NoSuchBucket", 0) == -ENXIO);
	CU_ASSERT(s3_errmap(403, "AccessDenied", 0) == -EACCES);
	CU_ASSERT(s3_errmap(403, "SignatureDoesNotMatch", 0) == -EACCES);
	CU_ASSERT(s3_errmap(403, "InvalidAccessKeyId", 0) == -EACCES);
	CU_ASSERT(s3_errmap(403, "", 0) == -EACCES);
	CU_ASSERT(s3_errmap(503, "SlowDown", 0) == -EAGAIN);
	CU_ASSERT(s3_errmap(503, "", 0) == -EAGAIN);
	CU_ASSERT(s3_errmap(500, "", 0) == -EAGAIN);
	CU_ASSERT(s3_errmap(200, "InternalError", 0) == -EAGAIN);
	CU_ASSERT(s3_errmap(501, "NotImplemented", 0) == -ENOTSUP);
	CU_ASSERT(s3_errmap(405, "", 0) == -ENOTSUP);
	CU_ASSERT(s3_errmap(416, "InvalidRange", 0) == -ERANGE);
	CU_ASSERT(s3_errmap(400, "InvalidPart", 0) == -EINVAL);
	CU_ASSERT(s3_errmap(409, "BucketNotEmpty", 0) == -EIO);
	CU_ASSERT(s3_errmap(200, "SomethingOdd", 0) == -EIO);
	CU_ASSERT(s3_errmap(0, "", CURLE_OPERATION_TIMEDOUT) == -EAGAIN);
	CU_ASSERT(s3_errmap(0, "", CURLE_COULDNT_CONNECT) == -EAGAIN);
	CU_ASSERT(s3_errmap(0, "", CURLE_RECV_ERROR) == -EAGAIN);
	CU_ASSERT(s3_errmap(0, "", CURLE_URL_MALFORMAT) == -EIO);
	CU_ASSERT(s3_err_retryable(-EAGAIN) && !s3_err_retryable(-ENOENT));
}

int main(void)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} tests[] = {
		{ "list", test_list_plain },
		{ "a key with %00 skipped", test_list_nul_key },
		{ "list with prefixes, truncated",
		  test_list_prefixes_truncated },
		{ "malformed rejected", test_list_malformed },
		{ "error", test_error },
		{ "multipart and copy results", test_multipart_docs },
		{ "multipart uploads list", test_uploads },
		{ "delete result", test_delete_result },
		{ "request bodies escaped", test_escaping },
		{ "times", test_time },
		{ "errno table", test_errmap },
	};
	CU_pSuite suite;
	unsigned failed;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	suite = CU_add_suite("s3_xml", NULL, NULL);
	for (size_t i = 0; suite && i < sizeof(tests) / sizeof(tests[0]); i++)
		if (!CU_add_test(suite, tests[i].name, tests[i].fn))
			suite = NULL;
	if (!suite) {
		CU_cleanup_registry();
		return 1;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
