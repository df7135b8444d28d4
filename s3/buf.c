/* s3/buf.c - the growable byte string of s3/buf.h. */
#include "buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Make room for n more bytes plus the terminating NUL. */
static bool buf_reserve(struct s3_buf *b, size_t n)
{
	size_t cap;
	char *p;

	if (b->oom)
		return false;
	if (b->len + n + 1 <= b->cap)
		return true;
	cap = b->cap ? b->cap : 256;
	while (cap < b->len + n + 1) {
		if (cap > ((size_t)-1) / 2) {
			b->oom = true;
			return false;
		}
		cap *= 2;
	}
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void s3_buf_add(struct s3_buf *b, const void *data, size_t n)
{
	if (!buf_reserve(b, n))
		return;
	if (n)
		memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void s3_buf_str(struct s3_buf *b, const char *s)
{
	s3_buf_add(b, s, strlen(s));
}

void s3_buf_fmt(struct s3_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = true;
		return;
	}
	if (!buf_reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void s3_buf_uri(struct s3_buf *b, const char *s, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *c;

	for (c = (const unsigned char *)s; *c; c++) {
		if ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
		    (*c >= '0' && *c <= '9') || *c == '-' || *c == '.' ||
		    *c == '_' || *c == '~' || (keep_slash && *c == '/')) {
			s3_buf_add(b, c, 1);
		} else {
			char esc[3] = { '%', hex[*c >> 4], hex[*c & 15] };

			s3_buf_add(b, esc, 3);
		}
	}
}

void s3_buf_xml(struct s3_buf *b, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&':
			s3_buf_str(b, "&amp;");
			break;
		case '<':
			s3_buf_str(b, "&lt;");
			break;
		case '>':
			s3_buf_str(b, "&gt;");
			break;
		case '"':
			s3_buf_str(b, "&quot;");
			break;
		case '\'':
			s3_buf_str(b, "&apos;");
			break;
		/* Parsers normalise raw CR, LF and TAB; references survive. */
		case '\r':
			s3_buf_str(b, "&#13;");
			break;
		case '\n':
			s3_buf_str(b, "&#10;");
			break;
		case '\t':
			s3_buf_str(b, "&#9;");
			break;
		default:
			s3_buf_add(b, s, 1);
		}
	}
}

int s3_buf_err(const struct s3_buf *b)
{
	return b->oom ? -ENOMEM : 0;
}

void s3_buf_reset(struct s3_buf *b)
{
	b->len = 0;
	b->oom = false;
	if (b->p)
		b->p[0] = '\0';
}

void s3_buf_free(struct s3_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

char *s3_buf_take(struct s3_buf *b)
{
	char *p = b->oom ? NULL : b->p;

	if (b->oom)
		free(b->p);
	else if (!p)
		p = strdup("");
	memset(b, 0, sizeof(*b));
	return p;
}
