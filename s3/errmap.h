/*
 * s3/errmap.h - internal to s3/: the one table from HTTP status, S3 error
 * code and transport failure to a negative errno.
 */
#ifndef MAPFS_S3_ERRMAP_H
#define MAPFS_S3_ERRMAP_H

#include <stdbool.h>

/*
 * The errno for a finished request: status is the HTTP status (0 if none
 * arrived), code the S3 <Code> ("" if none), transport a libcurl
 * CURLcode (0 = the exchange completed).  A 2xx without a code is 0.
 *
 * -ENOENT  NoSuchKey, NoSuchUpload, 404
 * -ENXIO   NoSuchBucket: the bucket itself is gone, which must never read
 *          as "this file was deleted" (fs/ would drop it from the cache)
 * -EACCES  AccessDenied, SignatureDoesNotMatch, InvalidAccessKeyId, 403
 * -EAGAIN  SlowDown, 500/502/503/504, 408, 429, RequestTimeout,
 *          ExpiredToken, timeouts, refused connections and resets
 * -ENOTSUP NotImplemented, 501, 405
 * -ERANGE  InvalidRange, 416 (GET answers 0 bytes for it)
 * -EINVAL  InvalidPart, InvalidPartOrder, EntityTooSmall, other 400s
 * -EIO     anything else
 */
int s3_errmap(long status, const char *code, int transport);

/* True for the errors worth retrying (the -EAGAIN class). */
bool s3_err_retryable(int err);

#endif
