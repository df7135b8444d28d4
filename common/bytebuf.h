/*
 * common/bytebuf.h - a byte buffer that grows as bytes are added: the
 * encodings of db/ (PostgreSQL's binary parameters) and nlm/ (a file's
 * lock state as one record).
 *
 *   struct bytebuf b = { 0 };
 *   bytebuf_add(&b, &x, sizeof(x));
 *   if (b.bad) ...;               // an allocation failed: b.p holds less
 *   free(b.p);                    // the caller's
 *
 * After a failed allocation every later add is a no-op and bad stays set,
 * so a caller checks once, at the end.
 */
#ifndef MAPFS_COMMON_BYTEBUF_H
#define MAPFS_COMMON_BYTEBUF_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct bytebuf {
	unsigned char *p;
	size_t len, cap;
	bool bad;
};

/* Append n bytes of d (doubling the buffer as needed). */
static inline void bytebuf_add(struct bytebuf *b, const void *d, size_t n)
{
	if (b->bad)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		unsigned char *q;

		while (cap < b->len + n)
			cap *= 2;
		q = realloc(b->p, cap);
		if (!q) {
			b->bad = true;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
}

#endif
