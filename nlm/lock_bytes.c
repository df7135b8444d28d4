/*
 * nlm/lock_bytes.c - one file's locks, requests and shares as bytes and
 * back (nlm_table_export, nlm_table_import): a cluster keeps each locked
 * file's state in its database, so that every gateway grants from the
 * same table (cluster.c).  Built on the table's own steps (lock_priv.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytebuf.h"
#include "lock_priv.h"

/*
 * Format (native byte order, as every record of a cluster): per lock,
 * request and share, a kind byte ('L', 'W', 'S'), the owner (host 16,
 * svid 4, ohlen 4, oh, callerlen 2, caller) and then a lock's start, end,
 * excl; a request's start, end, off, len, excl, arglen 4, arg; a share's
 * access, deny.  Locks, requests (in queue order) and shares, in order.
 */
static void wb_owner(struct bytebuf *b, const struct own *o)
{
	uint16_t cl = (uint16_t)strlen(o->caller);

	bytebuf_add(b, o->hc->host.addr, 16);
	bytebuf_add(b, &o->svid, 4);
	bytebuf_add(b, &o->ohlen, 4);
	bytebuf_add(b, o->data, o->ohlen);
	bytebuf_add(b, &cl, 2);
	bytebuf_add(b, o->caller, cl);
}

int nlm_table_export(struct nlm_table *t, uint64_t ino,
		     size_t (*arg_save)(void *arg, void *buf, size_t cap),
		     void **out, size_t *len)
{
	struct shard *s = lk_shard_of(t, ino);
	struct bytebuf b = { 0 };
	unsigned char abuf[NLM_ARG_MAX];
	struct file *f;

	pthread_mutex_lock(&s->mu);
	f = lk_file_find(s, ino);
	for (struct lk *l = f ? f->locks : NULL; l; l = l->next) {
		uint8_t x = l->excl;

		bytebuf_add(&b, "L", 1);
		wb_owner(&b, l->own);
		bytebuf_add(&b, &l->start, 8);
		bytebuf_add(&b, &l->end, 8);
		bytebuf_add(&b, &x, 1);
	}
	for (struct waiter *w = f ? f->waiters : NULL; w; w = w->next) {
		uint8_t x = w->excl;
		uint32_t al = (uint32_t)arg_save(w->arg, abuf, sizeof(abuf));

		bytebuf_add(&b, "W", 1);
		wb_owner(&b, w->own);
		bytebuf_add(&b, &w->start, 8);
		bytebuf_add(&b, &w->end, 8);
		bytebuf_add(&b, &w->off, 8);
		bytebuf_add(&b, &w->len, 8);
		bytebuf_add(&b, &x, 1);
		bytebuf_add(&b, &al, 4);
		bytebuf_add(&b, abuf, al);
	}
	for (struct shr *h = f ? f->shares : NULL; h; h = h->next) {
		bytebuf_add(&b, "S", 1);
		wb_owner(&b, h->own);
		bytebuf_add(&b, &h->access, 4);
		bytebuf_add(&b, &h->deny, 4);
	}
	pthread_mutex_unlock(&s->mu);
	if (b.bad) {
		free(b.p);
		return -ENOMEM;
	}
	*out = b.p;
	*len = b.len;
	return 0;
}

struct rbuf {
	const unsigned char *p, *end;
};

static bool rb_get(struct rbuf *r, void *d, size_t n)
{
	if ((size_t)(r->end - r->p) < n)
		return false;
	memcpy(d, r->p, n);
	r->p += n;
	return true;
}

/* An owner from r, kept on f (one struct own per owner and file). */
static struct own *rb_owner(struct nlm_table *t, struct file *f, struct rbuf *r)
{
	struct nlm_owner w = { 0 };
	char caller[NLM_CALLER_MAX + 1];
	uint8_t oh[NLM_OH_MAX];
	uint16_t cl;
	struct own *o;

	if (!rb_get(r, w.host.addr, 16) || !rb_get(r, &w.svid, 4) ||
	    !rb_get(r, &w.ohlen, 4) || w.ohlen > NLM_OH_MAX ||
	    !rb_get(r, oh, w.ohlen) || !rb_get(r, &cl, 2) ||
	    cl > NLM_CALLER_MAX || !rb_get(r, caller, cl))
		return NULL;
	caller[cl] = '\0';
	w.oh = oh;
	w.caller = caller;
	o = lk_own_on_file(f, &w);
	for (struct shr *h = f->shares; !o && h; h = h->next)
		if (lk_own_is(h->own, &w))
			o = h->own;
	if (o) {
		lk_own_ref(o);
		return o;
	}
	return lk_own_new(t, &w);
}

int nlm_table_import(struct nlm_table *t, uint64_t ino, const void *p,
		     size_t len, void *(*arg_load)(const void *p, size_t len))
{
	struct shard *s = lk_shard_of(t, ino);
	struct rbuf r = { p, (const unsigned char *)p + len };
	struct lk **lt;
	struct waiter **wt;
	struct shr **st;
	struct file *f;
	int rc = 0;

	pthread_mutex_lock(&s->mu);
	f = lk_file_get(s, ino);
	if (!f) {
		pthread_mutex_unlock(&s->mu);
		return -ENOMEM;
	}
	for (lt = &f->locks; *lt; lt = &(*lt)->next)
		;
	for (wt = &f->waiters; *wt; wt = &(*wt)->next)
		;
	for (st = &f->shares; *st; st = &(*st)->next)
		;
	while (!rc && r.p < r.end) {
		char kind = (char)*r.p++;
		struct own *o = rb_owner(t, f, &r);
		uint8_t x;

		if (!o) {
			rc = -EIO;
			break;
		}
		if (kind == 'L') {
			struct lk *l = calloc(1, sizeof(*l));

			if (!l || !rb_get(&r, &l->start, 8) ||
			    !rb_get(&r, &l->end, 8) || !rb_get(&r, &x, 1)) {
				free(l);
				lk_own_put(o);
				rc = l ? -EIO : -ENOMEM;
				break;
			}
			l->own = o;
			l->excl = x;
			*lt = l;
			lt = &l->next;
		} else if (kind == 'W') {
			struct waiter *w = calloc(1, sizeof(*w));
			uint32_t al;

			if (!w || !rb_get(&r, &w->start, 8) ||
			    !rb_get(&r, &w->end, 8) ||
			    !rb_get(&r, &w->off, 8) ||
			    !rb_get(&r, &w->len, 8) || !rb_get(&r, &x, 1) ||
			    !rb_get(&r, &al, 4) || (size_t)(r.end - r.p) < al) {
				free(w);
				lk_own_put(o);
				rc = w ? -EIO : -ENOMEM;
				break;
			}
			w->arg = arg_load(r.p, al);
			r.p += al;
			w->own = o;
			w->excl = x;
			*wt = w;
			wt = &w->next;
		} else if (kind == 'S') {
			struct shr *h = calloc(1, sizeof(*h));

			if (!h || !rb_get(&r, &h->access, 4) ||
			    !rb_get(&r, &h->deny, 4)) {
				free(h);
				lk_own_put(o);
				rc = h ? -EIO : -ENOMEM;
				break;
			}
			h->own = o;
			*st = h;
			st = &h->next;
		} else {
			lk_own_put(o);
			rc = -EIO;
		}
	}
	lk_file_trim(s, f);
	pthread_mutex_unlock(&s->mu);
	return rc;
}
