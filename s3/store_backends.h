/*
 * s3/store_backends.h - internal to s3/: the backends store_open()
 * dispatches to.  Callers outside s3/ use s3/store.h only.
 */
#ifndef MAPFS_STORE_BACKENDS_H
#define MAPFS_STORE_BACKENDS_H

#include "s3/store.h"

/* "file:///abs/path": objects are files under a local directory. */
extern const struct store_ops store_file_ops;

/* "s3://bucket[/prefix]": objects in an S3 bucket, over libcurl. */
extern const struct store_ops store_s3_ops;

/* For the backends' mpu_list: append a copy of (key, upload_id) to the
 * array *v of *n uploads.  0 or -ENOMEM (the array stays as it was). */
int store_uploads_add(struct store_upload **v, size_t *n, const char *key,
		      const char *upload_id);

#endif
