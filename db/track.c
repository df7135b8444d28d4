/*
 * db/track.c - the records one group of changes read and wrote, for its
 * commit in the cluster: the reads with the versions they saw (checked
 * there), the writes in order (reduced to the last value per key).
 *
 * Keys and values are copied into one arena, so a group of thousands of
 * changes costs a few reallocations, not an allocation per record.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "track_int.h"

void db_track_init(struct db_track *t)
{
	memset(t, 0, sizeof(*t));
}

void db_track_reset(struct db_track *t)
{
	t->nreads = t->nwrites = t->alen = 0;
	if (t->rhash)
		memset(t->rhash, 0, t->rhcap * sizeof(*t->rhash));
}

void db_track_free(struct db_track *t)
{
	free(t->reads);
	free(t->writes);
	free(t->arena);
	free(t->rhash);
	memset(t, 0, sizeof(*t));
}

/* Copy n bytes into the arena: their offset, or (size_t)-1. */
static size_t arena_put(struct db_track *t, const void *p, size_t n)
{
	size_t off = t->alen;

	if (t->alen + n > t->acap) {
		size_t cap = t->acap ? t->acap * 2 : 64 << 10;
		unsigned char *a;

		while (cap < t->alen + n)
			cap *= 2;
		a = realloc(t->arena, cap);
		if (!a)
			return (size_t)-1;
		t->arena = a;
		t->acap = cap;
	}
	if (n)
		memcpy(t->arena + off, p, n);
	t->alen += n;
	return off;
}

static uint32_t rec_hash(unsigned tbl, const void *key, size_t klen)
{
	const unsigned char *p = key;
	uint32_t h = 2166136261u ^ tbl;

	for (size_t i = 0; i < klen; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static bool rec_is(const struct db_track *t, const struct db_rec *r,
		   unsigned tbl, const void *key, size_t klen)
{
	return r->tbl == tbl && r->klen == klen &&
	       !memcmp(db_rec_key(t, r), key, klen);
}

/* Slot of (tbl, key) in hash h[cap] over recs: found or empty. */
static uint32_t *slot_of(const struct db_track *t, uint32_t *h, size_t cap,
			 const struct db_rec *recs, unsigned tbl,
			 const void *key, size_t klen)
{
	size_t i = rec_hash(tbl, key, klen) & (cap - 1);

	while (h[i] && !rec_is(t, &recs[h[i] - 1], tbl, key, klen))
		i = (i + 1) & (cap - 1);
	return &h[i];
}

static int rhash_grow(struct db_track *t)
{
	size_t cap = t->rhcap ? t->rhcap * 2 : 1024;
	uint32_t *h = calloc(cap, sizeof(*h));

	if (!h)
		return -ENOMEM;
	for (size_t i = 0; i < t->nreads; i++) {
		const struct db_rec *r = &t->reads[i];

		*slot_of(t, h, cap, t->reads, r->tbl, db_rec_key(t, r),
			 r->klen) = (uint32_t)i + 1;
	}
	free(t->rhash);
	t->rhash = h;
	t->rhcap = cap;
	return 0;
}

int db_track_read(struct db_track *t, unsigned tbl, const struct db_val *key,
		  uint64_t ver)
{
	uint32_t *s;
	size_t off;

	if ((t->nreads + 1) * 2 > t->rhcap && rhash_grow(t))
		return -ENOMEM;
	s = slot_of(t, t->rhash, t->rhcap, t->reads, tbl, key->data, key->size);
	if (*s)
		return 0; /* the first read of a key is the one checked */
	if (t->nreads == t->capr) {
		size_t cap = t->capr ? t->capr * 2 : 256;
		struct db_rec *n = realloc(t->reads, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->reads = n;
		t->capr = cap;
	}
	off = arena_put(t, key->data, key->size);
	if (off == (size_t)-1)
		return -ENOMEM;
	t->reads[t->nreads] = (struct db_rec){
		.tbl = tbl, .koff = off, .klen = key->size, .ver = ver
	};
	*s = (uint32_t)++t->nreads;
	return 0;
}

bool db_track_read_ver(const struct db_track *t, unsigned tbl,
		       const struct db_val *key, uint64_t *ver)
{
	uint32_t *s;

	if (!t->rhcap)
		return false;
	s = slot_of(t, t->rhash, t->rhcap, t->reads, tbl, key->data, key->size);
	if (!*s)
		return false;
	*ver = t->reads[*s - 1].ver;
	return true;
}

int db_track_write(struct db_track *t, unsigned tbl, const struct db_val *key,
		   const struct db_val *val)
{
	struct db_rec *r;
	size_t koff, voff = 0;

	if (t->nwrites == t->capw) {
		size_t cap = t->capw ? t->capw * 2 : 256;
		struct db_rec *n = realloc(t->writes, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->writes = n;
		t->capw = cap;
	}
	koff = arena_put(t, key->data, key->size);
	if (koff == (size_t)-1 ||
	    (val && (voff = arena_put(t, val->data, val->size)) == (size_t)-1))
		return -ENOMEM;
	r = &t->writes[t->nwrites++];
	*r = (struct db_rec){ .tbl = tbl,
			      .koff = koff,
			      .klen = key->size,
			      .voff = voff,
			      .vlen = val ? val->size : 0,
			      .del = !val };
	return 0;
}

int db_track_final(struct db_track *t)
{
	size_t cap = 16, n = 0;
	uint32_t *h;

	while (cap < t->nwrites * 2)
		cap *= 2;
	h = calloc(cap, sizeof(*h));
	if (!h)
		return -ENOMEM;
	/* Walk back: the first seen of a key is its last value; keep it at
	 * the place of the key's first write. */
	for (size_t i = t->nwrites; i-- > 0;) {
		struct db_rec *r = &t->writes[i];
		uint32_t *s = slot_of(t, h, cap, t->writes, r->tbl,
				      db_rec_key(t, r), r->klen);

		if (*s) {
			struct db_rec *last = &t->writes[*s - 1];

			/* Move the last value back to this (earlier) place. */
			*r = *last;
			last->klen = (size_t)-1; /* dropped below */
		}
		*s = (uint32_t)i + 1;
	}
	for (size_t i = 0; i < t->nwrites; i++) {
		struct db_rec *r = &t->writes[i];
		struct db_val k;

		if (r->klen == (size_t)-1)
			continue;
		k = (struct db_val){ r->klen, t->arena + r->koff };
		r->ver = 0;
		if (t->rhcap) {
			uint32_t *s = slot_of(t, t->rhash, t->rhcap, t->reads,
					      r->tbl, k.data, k.size);

			if (*s) {
				r->ver = t->reads[*s - 1].ver;
				t->reads[*s - 1].written = true;
			}
		}
		t->writes[n++] = *r;
	}
	t->nwrites = n;
	free(h);
	return 0;
}
