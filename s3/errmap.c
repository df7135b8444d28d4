/* s3/errmap.c - HTTP, S3 and libcurl errors to errno, in one table. */
#include "errmap.h"

#include <curl/curl.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

/* S3 error codes first: they are more precise than the status. */
static const struct {
	const char *code;
	int err;
} code_map[] = {
	{ "NoSuchKey", -ENOENT },
	{ "NoSuchUpload", -ENOENT },
	{ "NoSuchBucket", -ENXIO },
	{ "AccessDenied", -EACCES },
	{ "AllAccessDisabled", -EACCES },
	{ "AccountProblem", -EACCES },
	{ "InvalidAccessKeyId", -EACCES },
	{ "SignatureDoesNotMatch", -EACCES },
	{ "InvalidToken", -EACCES },
	{ "SlowDown", -EAGAIN },
	{ "ServiceUnavailable", -EAGAIN },
	{ "InternalError", -EAGAIN },
	{ "RequestTimeout", -EAGAIN },
	{ "ExpiredToken", -EAGAIN }, /* credentials are refreshed first */
	{ "OperationAborted", -EAGAIN },
	{ "ConditionalRequestConflict", -EAGAIN }, /* a racing write: retry */
	{ "NotImplemented", -ENOTSUP },
	{ "InvalidRange", -ERANGE },
	{ "InvalidPart", -EINVAL },
	{ "InvalidPartOrder", -EINVAL },
	{ "EntityTooSmall", -EINVAL },
	{ "EntityTooLarge", -EFBIG },
	{ "KeyTooLongError", -ENAMETOOLONG },
	{ "BadDigest", -EIO },
	/* A conditional request found another version: someone else's. */
	{ "PreconditionFailed", -ESTALE },
};

static const struct {
	long status;
	int err;
} status_map[] = {
	{ 400, -EINVAL },  { 403, -EACCES }, { 404, -ENOENT },
	{ 405, -ENOTSUP }, { 408, -EAGAIN }, { 416, -ERANGE },
	{ 412, -ESTALE },  { 429, -EAGAIN }, { 500, -EAGAIN },
	{ 501, -ENOTSUP }, { 502, -EAGAIN }, { 503, -EAGAIN },
	{ 504, -EAGAIN },
};

/* Transport failures that a later try may not see. */
static const CURLcode transient[] = {
	CURLE_COULDNT_RESOLVE_HOST,
	CURLE_COULDNT_CONNECT,
	CURLE_OPERATION_TIMEDOUT,
	CURLE_SEND_ERROR,
	CURLE_RECV_ERROR,
	CURLE_GOT_NOTHING,
	CURLE_PARTIAL_FILE,
	CURLE_SSL_CONNECT_ERROR,
	CURLE_HTTP2,
	CURLE_HTTP2_STREAM,
};

int s3_errmap(long status, const char *code, int transport)
{
	size_t i;

	if (transport) {
		for (i = 0; i < sizeof(transient) / sizeof(transient[0]); i++)
			if ((CURLcode)transport == transient[i])
				return -EAGAIN;
		return -EIO;
	}
	if (code && *code) {
		for (i = 0; i < sizeof(code_map) / sizeof(code_map[0]); i++)
			if (strcmp(code, code_map[i].code) == 0)
				return code_map[i].err;
	}
	if (status >= 200 && status < 300 && !(code && *code))
		return 0;
	for (i = 0; i < sizeof(status_map) / sizeof(status_map[0]); i++)
		if (status == status_map[i].status)
			return status_map[i].err;
	return -EIO;
}

bool s3_err_retryable(int err)
{
	return err == -EAGAIN;
}
