/*
 * s3/buf.h - internal to s3/: a growable byte string for building
 * canonical requests, URLs and XML bodies, and for collecting responses.
 *
 * The buffer is always NUL-terminated once anything was added.  A failed
 * allocation latches: later appends do nothing and s3_buf_err() reports
 * -ENOMEM, so builders check once at the end instead of after every call.
 */
#ifndef MAPFS_S3_BUF_H
#define MAPFS_S3_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct s3_buf {
	char *p;
	size_t len, cap;
	bool oom;
};

/* Append n bytes (or a C string, or printf output) to b. */
void s3_buf_add(struct s3_buf *b, const void *data, size_t n);
void s3_buf_str(struct s3_buf *b, const char *s);
void s3_buf_fmt(struct s3_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Append s percent-encoded as SigV4 and S3 want (RFC 3986: everything but
 * A-Z a-z 0-9 - . _ ~ becomes %XX in upper-case hex); '/' is kept as is
 * when keep_slash (object paths), encoded otherwise (query values).
 */
void s3_buf_uri(struct s3_buf *b, const char *s, bool keep_slash);

/* Append s with & < > " ' escaped for XML text and attribute values. */
void s3_buf_xml(struct s3_buf *b, const char *s);

/* 0, or -ENOMEM if any append failed. */
int s3_buf_err(const struct s3_buf *b);

/* Forget the contents, keep the memory. */
void s3_buf_reset(struct s3_buf *b);

/* Free the memory and zero b. */
void s3_buf_free(struct s3_buf *b);

/* Hand the string to the caller (who frees it) and zero b; NULL on OOM. */
char *s3_buf_take(struct s3_buf *b);

#endif
