/*
 * s3/xml.h - internal to s3/: the S3 XML documents, read with expat and
 * written with proper escaping.  Never string search: every reader parses
 * the whole document, checks its root element and picks children by name
 * (namespaces ignored).  A document that is not well-formed XML, has a
 * DOCTYPE (entity tricks), or lacks a required field is -EIO.
 */
#ifndef MAPFS_S3_XML_H
#define MAPFS_S3_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "store.h"

#define S3_XML_CODE_MAX 64
#define S3_XML_MSG_MAX 256

/*
 * An <Error> document: its Code and Message (truncated to fit; "" when
 * absent).  Returns 0 if body is one, -EIO if it is anything else.
 */
int s3_xml_error(const char *body, size_t len, char code[S3_XML_CODE_MAX],
		 char msg[S3_XML_MSG_MAX]);

/*
 * A ListObjectsV2 page (<ListBucketResult>) into out (freed with
 * store_page_free).  Keys and prefixes lose their leading strip (the
 * store's key prefix); one that would become empty (the prefix's own
 * marker) is left out.  EncodingType "url" is decoded.  next_token is set
 * only when IsTruncated is true.
 */
int s3_xml_list(const char *body, size_t len, const char *strip,
		struct store_page *out);

/* <InitiateMultipartUploadResult>'s UploadId, malloc'd for the caller. */
int s3_xml_upload_id(const char *body, size_t len, char **upload_id);

/*
 * The ETag (quotes removed; "" when empty, as radosgw answers a complete)
 * and LastModified (0 when absent) of a document whose root is root:
 * "CopyObjectResult", "CopyPartResult" or
 * "CompleteMultipartUploadResult".  last_modified_ns may be NULL.
 */
int s3_xml_etag(const char *body, size_t len, const char *root,
		char etag[STORE_ETAG_MAX], int64_t *last_modified_ns);

struct s3_upload {
	char *key, *upload_id;
	int64_t initiated_ns;
};

/* One <ListMultipartUploadsResult> page; the caller frees with
 * s3_xml_uploads_free.  next_key/next_id are set when truncated. */
struct s3_uploads {
	struct s3_upload *v;
	size_t n;
	bool truncated;
	char *next_key, *next_id;
};
int s3_xml_uploads(const char *body, size_t len, struct s3_uploads *out);
void s3_xml_uploads_free(struct s3_uploads *u);

/*
 * A <DeleteResult>: 0 if it reports no <Error>, else 1 with the first
 * error's Code (and Key, truncated to fit) copied out.
 */
int s3_xml_delete_result(const char *body, size_t len,
			 char code[S3_XML_CODE_MAX], char *key, size_t key_len);

/* The DeleteObjects body for keys[0..n) (quiet mode). */
void s3_xml_delete_body(struct s3_buf *b, const char *const *keys, size_t n);

/* The CompleteMultipartUpload body: parts 1..n with their etags. */
void s3_xml_complete_body(struct s3_buf *b, int n,
			  char (*etags)[STORE_ETAG_MAX]);

/* An ISO 8601 UTC time ("2009-10-12T17:50:30.000Z") as ns; -EINVAL. */
int s3_xml_time(const char *s, int64_t *ns);

#endif
