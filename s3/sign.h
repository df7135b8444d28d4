/*
 * s3/sign.h - internal to s3/: AWS Signature Version 4 (header form).
 *
 * The signer is a pure function of its input: no clock, no I/O, no
 * allocation that outlives a call.  It builds the canonical request
 * (method, URI, sorted and percent-encoded query, lower-cased sorted and
 * trimmed headers, signed header list, payload hash), the string to sign,
 * the signing key and the Authorization header value.  The canonical query
 * string it returns is also what the caller must put in the URL, so what
 * is sent is exactly what was signed (libcurl's own signer signs the query
 * as written; see ../shared/s3/README.md).
 */
#ifndef MAPFS_S3_SIGN_H
#define MAPFS_S3_SIGN_H

#include <stddef.h>

#include "buf.h"

#define S3_SHA256_HEX 65   /* 64 hex digits and a NUL */
#define S3_AMZ_DATE_LEN 17 /* "YYYYMMDDTHHMMSSZ" and a NUL */
#define S3_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"

/* A name and a value; query values and header values are not encoded. */
struct s3_kv {
	const char *name;
	const char *value;
};

struct s3_sign_in {
	const char *method; /* "GET", "PUT", ... */
	const char *uri;    /* canonical URI, already encoded ("/b/k%20x") */
	const struct s3_kv *query; /* raw names and values; value NULL = "" */
	size_t nquery;
	const struct s3_kv
		*headers; /* every header to sign: host, x-amz-date, ... */
	size_t nheaders;
	const char *payload_hash; /* hex SHA-256 or S3_UNSIGNED_PAYLOAD */
	const char *amz_date;     /* the x-amz-date value */
	const char *region, *service;
	const char *access_key, *secret_key;
};

struct s3_sign_out {
	struct s3_buf query; /* canonical query string, for the URL too */
	struct s3_buf creq;  /* canonical request */
	struct s3_buf sts;   /* string to sign */
	struct s3_buf authz; /* Authorization header value (holds no secret) */
};

/*
 * Sign in; fills out (whose buffers the caller frees with
 * s3_sign_out_free, also after an error).  Returns 0, -EINVAL for a
 * malformed input (no date, bad header name) or -ENOMEM.
 */
int s3_sign(const struct s3_sign_in *in, struct s3_sign_out *out);
void s3_sign_out_free(struct s3_sign_out *out);

/* Hex SHA-256 of n bytes (the payload hash).  Returns 0 or -EIO. */
int s3_sha256_hex(const void *data, size_t n, char out[S3_SHA256_HEX]);

/* Base64 MD5 of n bytes (a Content-MD5 value, 24 chars + NUL). */
int s3_md5_b64(const void *data, size_t n, char out[32]);

/* Format t (seconds since the epoch, UTC) as an x-amz-date value. */
void s3_amz_date(long long t, char out[S3_AMZ_DATE_LEN]);

#endif
