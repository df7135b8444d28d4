/*
 * nlm/lock.c - the lock table: per-inode lists of locks, queued requests
 * and shares, in shards that each have their own mutex.
 *
 * Invariant: the locks of one owner on one file never overlap (a new
 * lock first removes the owner's locks in its range), so an unlock of a
 * range splits at most one lock in two and needs at most one allocation,
 * made before anything changes.  Lists are short in practice (a file is
 * locked by few owners), so they are plain linked lists.
 *
 * Per-host bound: every reference to a kept owner (a lock, a queued
 * request, a share) is charged to the owner's host in a table of hosts
 * under its own mutex (taken inside a shard's, never around one).  A
 * request that would add to a host at its bound is refused before
 * anything changes; releases are never refused.
 *
 * One file's state as bytes, for a cluster's database, is lock_bytes.c's.
 */
#include "lock_priv.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static uint64_t ino_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

struct shard *lk_shard_of(struct nlm_table *t, uint64_t ino)
{
	return &t->shards[ino_mix(ino) & (t->nshards - 1)];
}

static struct file **bucket_of(struct shard *s, uint64_t ino)
{
	return &s->buckets[(ino_mix(ino) >> 32) % SHARD_BUCKETS];
}

/* [start, end] of (off, len); -EINVAL if it ends before it starts. */
static int range_of(uint64_t off, uint64_t len, uint64_t *start, uint64_t *end)
{
	*start = off;
	/* Length 0, or a range past 2^64, reaches the end of the file. */
	*end = !len || len - 1 > UINT64_MAX - off ? UINT64_MAX : off + len - 1;
	return *end < *start ? -EINVAL : 0;
}

static uint64_t len_of(uint64_t start, uint64_t end)
{
	return end == UINT64_MAX ? 0 : end - start + 1;
}

static bool overlap(uint64_t s1, uint64_t e1, uint64_t s2, uint64_t e2)
{
	return s1 <= e2 && s2 <= e1;
}

void nlm_host_of(const struct sockaddr_storage *ss, struct nlm_host *out)
{
	memset(out, 0, sizeof(*out));
	if (ss->ss_family == AF_INET6) {
		memcpy(out->addr, &((const struct sockaddr_in6 *)ss)->sin6_addr,
		       16);
	} else if (ss->ss_family == AF_INET) {
		out->addr[10] = out->addr[11] = 0xff;
		memcpy(out->addr + 12,
		       &((const struct sockaddr_in *)ss)->sin_addr, 4);
	}
}

static bool host_eq(const struct nlm_host *a, const struct nlm_host *b)
{
	return !memcmp(a->addr, b->addr, sizeof(a->addr));
}

static struct hostc **host_bucket(struct nlm_table *t, const struct nlm_host *h)
{
	uint64_t x = 0;

	for (int i = 0; i < 16; i += 8) {
		uint64_t w;

		memcpy(&w, h->addr + i, 8);
		x = ino_mix(x ^ w);
	}
	return &t->hosts[x % HOST_BUCKETS];
}

/* The host's record with one more reference charged; NULL: no memory. */
static struct hostc *host_charge(struct nlm_table *t, const struct nlm_host *h)
{
	struct hostc **b, *c;

	pthread_mutex_lock(&t->hosts_mu);
	b = host_bucket(t, h);
	for (c = *b; c && !host_eq(&c->host, h); c = c->next)
		;
	if (!c && (c = calloc(1, sizeof(*c)))) {
		c->t = t;
		c->host = *h;
		c->next = *b;
		*b = c;
	}
	if (c)
		c->n++;
	pthread_mutex_unlock(&t->hosts_mu);
	return c;
}

/* One reference less; the record goes with the host's last one. */
static void host_release(struct hostc *c)
{
	struct nlm_table *t = c->t;
	struct hostc **pp;

	pthread_mutex_lock(&t->hosts_mu);
	if (!--c->n) {
		for (pp = host_bucket(t, &c->host); *pp != c; pp = &(*pp)->next)
			;
		*pp = c->next;
		free(c);
	}
	pthread_mutex_unlock(&t->hosts_mu);
}

size_t nlm_table_host_count(struct nlm_table *t, const struct nlm_host *h)
{
	struct hostc *c;
	size_t n = 0;

	pthread_mutex_lock(&t->hosts_mu);
	for (c = *host_bucket(t, h); c && !host_eq(&c->host, h); c = c->next)
		;
	if (c)
		n = c->n;
	pthread_mutex_unlock(&t->hosts_mu);
	return n;
}

/* -ENOLCK when the owner's host may not hold one more thing. */
static int host_room(struct nlm_table *t, const struct nlm_owner *w)
{
	return nlm_table_host_count(t, &w->host) >= t->host_max ? -ENOLCK : 0;
}

bool lk_own_is(const struct own *o, const struct nlm_owner *w)
{
	return o->svid == w->svid && o->ohlen == w->ohlen &&
	       host_eq(&o->hc->host, &w->host) &&
	       !memcmp(o->data, w->oh, w->ohlen) &&
	       !strcmp(o->caller, w->caller);
}

/* For shares: the owner is (host, caller, oh), without svid. */
static bool own_same_share(const struct own *o, const struct nlm_owner *w)
{
	return o->ohlen == w->ohlen && host_eq(&o->hc->host, &w->host) &&
	       !memcmp(o->data, w->oh, w->ohlen) &&
	       !strcmp(o->caller, w->caller);
}

struct own *lk_own_new(struct nlm_table *t, const struct nlm_owner *w)
{
	size_t clen = strlen(w->caller);
	struct own *o = malloc(sizeof(*o) + w->ohlen + clen + 1);

	if (!o)
		return NULL;
	o->hc = host_charge(t, &w->host);
	if (!o->hc) {
		free(o);
		return NULL;
	}
	o->refs = 1;
	o->svid = w->svid;
	o->ohlen = w->ohlen;
	memcpy(o->data, w->oh, w->ohlen);
	o->caller = (char *)o->data + w->ohlen;
	memcpy(o->caller, w->caller, clen + 1);
	return o;
}

/* One more reference to o (under its shard's mutex). */
void lk_own_ref(struct own *o)
{
	o->refs++;
	host_charge(o->hc->t, &o->hc->host);
}

void lk_own_put(struct own *o)
{
	host_release(o->hc);
	if (!--o->refs)
		free(o);
}

static void desc_of(const struct own *o, bool excl, uint64_t off, uint64_t len,
		    struct nlm_lockdesc *d)
{
	*d = (struct nlm_lockdesc){ .owner = { .host = o->hc->host,
					       .caller = o->caller,
					       .oh = o->data,
					       .ohlen = o->ohlen,
					       .svid = o->svid },
				    .excl = excl,
				    .off = off,
				    .len = len };
}

struct file *lk_file_find(struct shard *s, uint64_t ino)
{
	for (struct file *f = *bucket_of(s, ino); f; f = f->next)
		if (f->ino == ino)
			return f;
	return NULL;
}

struct file *lk_file_get(struct shard *s, uint64_t ino)
{
	struct file *f = lk_file_find(s, ino), **b;

	if (f)
		return f;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	b = bucket_of(s, ino);
	f->ino = ino;
	f->next = *b;
	*b = f;
	return f;
}

/* Free f if nothing is left on it. */
void lk_file_trim(struct shard *s, struct file *f)
{
	struct file **pp;

	if (f->locks || f->waiters || f->shares)
		return;
	for (pp = bucket_of(s, f->ino); *pp != f; pp = &(*pp)->next)
		;
	*pp = f->next;
	free(f);
}

/* The first lock of another owner that conflicts with the request. */
static const struct lk *conflict_find(const struct file *f,
				      const struct nlm_owner *w, uint64_t start,
				      uint64_t end, bool excl)
{
	for (const struct lk *l = f->locks; l; l = l->next)
		if ((excl || l->excl) &&
		    overlap(start, end, l->start, l->end) &&
		    !lk_own_is(l->own, w))
			return l;
	return NULL;
}

static void holder_fill(const struct lk *l, struct nlm_holder *h)
{
	h->excl = l->excl;
	h->svid = l->own->svid;
	h->off = l->start;
	h->len = len_of(l->start, l->end);
	h->ohlen = l->own->ohlen;
	memcpy(h->oh, l->own->data, l->own->ohlen);
}

/*
 * Remove o's locks in [start, end]; spare is used (and set to NULL) if a
 * lock has to be split.  Returns true if anything was removed.
 */
static bool range_remove(struct file *f, const struct own *o, uint64_t start,
			 uint64_t end, struct lk **spare)
{
	struct lk **pp = &f->locks, *l;
	bool changed = false;

	while ((l = *pp)) {
		if (l->own != o || !overlap(start, end, l->start, l->end)) {
			pp = &l->next;
			continue;
		}
		changed = true;
		if (l->start < start && l->end > end) {
			/* The hole is inside: keep both ends. */
			struct lk *tail = *spare;

			*spare = NULL;
			*tail = *l;
			tail->start = end + 1;
			lk_own_ref(tail->own);
			l->end = start - 1;
			l->next = tail;
			pp = &tail->next;
		} else if (l->start < start) {
			l->end = start - 1;
			pp = &l->next;
		} else if (l->end > end) {
			l->start = end + 1;
			pp = &l->next;
		} else {
			*pp = l->next;
			lk_own_put(l->own);
			free(l);
		}
	}
	return changed;
}

/*
 * The same kept owner as w on f, if any lock, request or share of f has
 * it, so that one owner is one struct own per file.
 */
struct own *lk_own_on_file(const struct file *f, const struct nlm_owner *w)
{
	for (struct lk *l = f->locks; l; l = l->next)
		if (lk_own_is(l->own, w))
			return l->own;
	for (struct waiter *q = f->waiters; q; q = q->next)
		if (lk_own_is(q->own, w))
			return q->own;
	return NULL;
}

/*
 * Install o's lock [start, end] on f, which has no conflicting lock:
 * replace what o held there, then merge with o's adjacent locks of the
 * same type.  new and spare are preallocated; the function takes new
 * and, if it splits a lock, spare (setting *spare to NULL).
 */
static void lock_install(struct file *f, struct own *o, uint64_t start,
			 uint64_t end, bool excl, struct lk *new,
			 struct lk **spare)
{
	struct lk **pp = &f->locks, *l;

	range_remove(f, o, start, end, spare);
	while ((l = *pp)) {
		bool touches = l->own == o && l->excl == excl &&
			       ((l->end != UINT64_MAX && l->end + 1 == start) ||
				(end != UINT64_MAX && end + 1 == l->start));

		if (!touches) {
			pp = &l->next;
			continue;
		}
		if (l->start < start)
			start = l->start;
		if (l->end > end)
			end = l->end;
		*pp = l->next;
		lk_own_put(l->own);
		free(l);
	}
	lk_own_ref(o);
	*new = (struct lk){ .next = f->locks,
			    .own = o,
			    .start = start,
			    .end = end,
			    .excl = excl };
	f->locks = new;
}

/*
 * Grant, oldest first, the queued requests of f that no longer conflict;
 * they move to p->granted.  A request that cannot get memory stays
 * queued (the next release retries it).
 */
static void waiters_wake(struct file *f, struct pending *p)
{
	struct waiter **pp = &f->waiters, *w;

	while ((w = *pp)) {
		struct nlm_owner o = { w->own->hc->host, w->own->caller,
				       w->own->data, w->own->ohlen,
				       w->own->svid };
		struct lk *new, *spare;

		if (conflict_find(f, &o, w->start, w->end, w->excl)) {
			pp = &w->next;
			continue;
		}
		new = malloc(sizeof(*new));
		spare = malloc(sizeof(*spare));
		if (!new || !spare) {
			free(new);
			free(spare);
			pp = &w->next;
			continue;
		}
		lock_install(f, w->own, w->start, w->end, w->excl, new, &spare);
		free(spare);
		*pp = w->next;
		w->next = NULL;
		*p->granted_tail = w;
		p->granted_tail = &w->next;
		p->ino = f->ino;
	}
}

static void pending_init(struct pending *p)
{
	p->granted = p->dropped = NULL;
	p->granted_tail = &p->granted;
	p->ino = 0;
}

/* Run the callbacks of p; no table lock may be held. */
static void pending_run(struct nlm_table *t, struct shard *s, struct pending *p)
{
	struct waiter *w, *next;

	for (w = p->granted; w; w = next) {
		struct nlm_lockdesc d;

		next = w->next;
		desc_of(w->own, w->excl, w->off, w->len, &d);
		t->ops.grant(t->ops.ctx, p->ino, &d, w->arg);
		/* The owner may be shared with the lock just installed. */
		pthread_mutex_lock(&s->mu);
		lk_own_put(w->own);
		pthread_mutex_unlock(&s->mu);
		free(w);
	}
	for (w = p->dropped; w; w = next) {
		next = w->next;
		t->ops.drop(t->ops.ctx, w->arg);
		pthread_mutex_lock(&s->mu);
		lk_own_put(w->own);
		pthread_mutex_unlock(&s->mu);
		free(w);
	}
}

int nlm_table_new(unsigned shard_bits, size_t host_max,
		  const struct nlm_table_ops *ops, struct nlm_table **out)
{
	unsigned n = 1u << (shard_bits > 12 ? 12 : shard_bits);
	struct nlm_table *t = calloc(1, sizeof(*t) + n * sizeof(t->shards[0]));

	if (!t)
		return -ENOMEM;
	t->ops = *ops;
	t->host_max = host_max;
	pthread_mutex_init(&t->hosts_mu, NULL);
	t->nshards = n;
	for (unsigned i = 0; i < n; i++)
		pthread_mutex_init(&t->shards[i].mu, NULL);
	*out = t;
	return 0;
}

void nlm_table_free(struct nlm_table *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < t->nshards; i++) {
		struct shard *s = &t->shards[i];

		for (unsigned b = 0; b < SHARD_BUCKETS; b++) {
			struct file *f, *fnext;

			for (f = s->buckets[b]; f; f = fnext) {
				fnext = f->next;
				while (f->locks) {
					struct lk *l = f->locks;

					f->locks = l->next;
					lk_own_put(l->own);
					free(l);
				}
				while (f->waiters) {
					struct waiter *w = f->waiters;

					f->waiters = w->next;
					t->ops.drop(t->ops.ctx, w->arg);
					lk_own_put(w->own);
					free(w);
				}
				while (f->shares) {
					struct shr *h = f->shares;

					f->shares = h->next;
					lk_own_put(h->own);
					free(h);
				}
				free(f);
			}
		}
		pthread_mutex_destroy(&s->mu);
	}
	pthread_mutex_destroy(&t->hosts_mu);
	free(t);
}

int nlm_table_test(struct nlm_table *t, uint64_t ino,
		   const struct nlm_lockdesc *lk, struct nlm_holder *conflict)
{
	struct shard *s = lk_shard_of(t, ino);
	const struct lk *l = NULL;
	uint64_t start, end;
	struct file *f;

	if (range_of(lk->off, lk->len, &start, &end))
		return -EINVAL;
	pthread_mutex_lock(&s->mu);
	f = lk_file_find(s, ino);
	if (f)
		l = conflict_find(f, &lk->owner, start, end, lk->excl);
	if (l && conflict)
		holder_fill(l, conflict);
	pthread_mutex_unlock(&s->mu);
	return l ? -EAGAIN : 0;
}

/* Queue a blocking request on f (which has a conflict).  Under s->mu. */
static int waiter_queue(struct nlm_table *t, struct file *f,
			const struct nlm_lockdesc *lk, uint64_t start,
			uint64_t end, void *arg)
{
	struct waiter **pp, *w;
	struct own *o;

	for (pp = &f->waiters; (w = *pp); pp = &w->next)
		if (w->start == start && w->end == end && w->excl == lk->excl &&
		    lk_own_is(w->own, &lk->owner))
			return -EALREADY;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	o = lk_own_on_file(f, &lk->owner);
	if (o)
		lk_own_ref(o);
	else if (!(o = lk_own_new(t, &lk->owner))) {
		free(w);
		return -ENOMEM;
	}
	*w = (struct waiter){ .own = o,
			      .start = start,
			      .end = end,
			      .off = lk->off,
			      .len = lk->len,
			      .excl = lk->excl,
			      .arg = arg };
	*pp = w;
	return -EINPROGRESS;
}

int nlm_table_lock(struct nlm_table *t, uint64_t ino,
		   const struct nlm_lockdesc *lk, void *block_arg)
{
	struct shard *s = lk_shard_of(t, ino);
	struct lk *new = NULL, *spare = NULL;
	struct pending p;
	uint64_t start, end;
	struct file *f;
	struct own *o;
	int rc;

	if (range_of(lk->off, lk->len, &start, &end))
		return -EINVAL;
	pending_init(&p);
	pthread_mutex_lock(&s->mu);
	f = lk_file_get(s, ino);
	if (!f) {
		rc = -ENOMEM;
		goto out_unlock;
	}
	if ((rc = host_room(t, &lk->owner)))
		goto out_trim;
	if (conflict_find(f, &lk->owner, start, end, lk->excl)) {
		rc = block_arg ? waiter_queue(t, f, lk, start, end, block_arg)
			       : -EAGAIN;
		goto out_trim;
	}
	new = malloc(sizeof(*new));
	spare = malloc(sizeof(*spare));
	o = lk_own_on_file(f, &lk->owner);
	if (o)
		lk_own_ref(o);
	else
		o = lk_own_new(t, &lk->owner);
	if (!new || !spare || !o) {
		free(new);
		if (o)
			lk_own_put(o);
		rc = -ENOMEM;
		goto out_trim;
	}
	lock_install(f, o, start, end, lk->excl, new, &spare);
	lk_own_put(o);
	/* A downgrade (exclusive to shared) may let others' requests in. */
	waiters_wake(f, &p);
	rc = 0;
out_trim:
	lk_file_trim(s, f);
out_unlock:
	pthread_mutex_unlock(&s->mu);
	free(spare);
	pending_run(t, s, &p);
	return rc;
}

int nlm_table_unlock(struct nlm_table *t, uint64_t ino,
		     const struct nlm_lockdesc *lk)
{
	struct shard *s = lk_shard_of(t, ino);
	struct lk *spare;
	struct pending p;
	uint64_t start, end;
	struct file *f;
	struct own *o;

	if (range_of(lk->off, lk->len, &start, &end))
		return -EINVAL;
	spare = malloc(sizeof(*spare));
	if (!spare)
		return -ENOMEM;
	pending_init(&p);
	pthread_mutex_lock(&s->mu);
	f = lk_file_find(s, ino);
	if (f && (o = lk_own_on_file(f, &lk->owner)) &&
	    range_remove(f, o, start, end, &spare)) {
		waiters_wake(f, &p);
		lk_file_trim(s, f);
	}
	pthread_mutex_unlock(&s->mu);
	free(spare);
	pending_run(t, s, &p);
	return 0;
}

int nlm_table_cancel(struct nlm_table *t, uint64_t ino,
		     const struct nlm_lockdesc *lk)
{
	struct shard *s = lk_shard_of(t, ino);
	struct waiter **pp, *w = NULL;
	struct pending p;
	uint64_t start, end;
	struct file *f;

	if (range_of(lk->off, lk->len, &start, &end))
		return -EINVAL;
	pending_init(&p);
	pthread_mutex_lock(&s->mu);
	f = lk_file_find(s, ino);
	for (pp = f ? &f->waiters : NULL; pp && (w = *pp); pp = &w->next)
		if (w->start == start && w->end == end && w->excl == lk->excl &&
		    lk_own_is(w->own, &lk->owner))
			break;
	if (w) {
		*pp = w->next;
		w->next = NULL;
		p.dropped = w;
		lk_file_trim(s, f);
	}
	pthread_mutex_unlock(&s->mu);
	pending_run(t, s, &p);
	return w ? 0 : -ENOENT;
}

int nlm_table_share(struct nlm_table *t, uint64_t ino,
		    const struct nlm_owner *owner, unsigned access,
		    unsigned deny)
{
	struct shard *s = lk_shard_of(t, ino);
	struct shr *h, *mine = NULL;
	struct file *f;
	int rc = 0;

	pthread_mutex_lock(&s->mu);
	f = lk_file_get(s, ino);
	if (!f) {
		rc = -ENOMEM;
		goto out_unlock;
	}
	if ((rc = host_room(t, owner)))
		goto out_trim;
	for (h = f->shares; h; h = h->next) {
		if (own_same_share(h->own, owner)) {
			mine = h;
			continue;
		}
		if ((h->access & deny) || (h->deny & access)) {
			rc = -EAGAIN;
			goto out_trim;
		}
	}
	if (!mine) {
		mine = calloc(1, sizeof(*mine));
		if (!mine || !(mine->own = lk_own_new(t, owner))) {
			free(mine);
			rc = -ENOMEM;
			goto out_trim;
		}
		mine->next = f->shares;
		f->shares = mine;
	}
	mine->access = access;
	mine->deny = deny;
out_trim:
	lk_file_trim(s, f);
out_unlock:
	pthread_mutex_unlock(&s->mu);
	return rc;
}

void nlm_table_unshare(struct nlm_table *t, uint64_t ino,
		       const struct nlm_owner *owner)
{
	struct shard *s = lk_shard_of(t, ino);
	struct shr **pp, *h;
	struct file *f;

	pthread_mutex_lock(&s->mu);
	f = lk_file_find(s, ino);
	for (pp = f ? &f->shares : NULL; pp && (h = *pp);) {
		if (!own_same_share(h->own, owner)) {
			pp = &h->next;
			continue;
		}
		*pp = h->next;
		lk_own_put(h->own);
		free(h);
	}
	if (f)
		lk_file_trim(s, f);
	pthread_mutex_unlock(&s->mu);
}

/* Whether o is caller's from host (NULL: any). */
static bool own_of_caller(const struct own *o, const char *caller,
			  const struct nlm_host *host)
{
	return !strcmp(o->caller, caller) &&
	       (!host || host_eq(&o->hc->host, host));
}

/* Remove caller's locks, shares and requests from f.  Under s->mu. */
static size_t file_free_caller(struct file *f, const char *caller,
			       const struct nlm_host *host, struct pending *p)
{
	struct lk **lp = &f->locks, *l;
	struct waiter **wp = &f->waiters, *w;
	struct shr **hp = &f->shares, *h;
	size_t n = 0;

	while ((l = *lp)) {
		if (!own_of_caller(l->own, caller, host)) {
			lp = &l->next;
			continue;
		}
		*lp = l->next;
		lk_own_put(l->own);
		free(l);
		n++;
	}
	while ((w = *wp)) {
		if (!own_of_caller(w->own, caller, host)) {
			wp = &w->next;
			continue;
		}
		*wp = w->next;
		w->next = p->dropped;
		p->dropped = w;
		n++;
	}
	while ((h = *hp)) {
		if (!own_of_caller(h->own, caller, host)) {
			hp = &h->next;
			continue;
		}
		*hp = h->next;
		lk_own_put(h->own);
		free(h);
		n++;
	}
	return n;
}

size_t nlm_table_free_all(struct nlm_table *t, const char *caller,
			  const struct nlm_host *host)
{
	size_t n = 0;

	for (unsigned i = 0; i < t->nshards; i++) {
		struct shard *s = &t->shards[i];

		for (unsigned b = 0; b < SHARD_BUCKETS; b++) {
			struct file *f, *fnext;

			/* One file at a time: grants name one inode. */
			pthread_mutex_lock(&s->mu);
			for (f = s->buckets[b]; f; f = fnext) {
				struct pending p;
				size_t k;

				fnext = f->next;
				pending_init(&p);
				k = file_free_caller(f, caller, host, &p);
				if (!k)
					continue;
				n += k;
				waiters_wake(f, &p);
				lk_file_trim(s, f);
				pthread_mutex_unlock(&s->mu);
				pending_run(t, s, &p);
				pthread_mutex_lock(&s->mu);
				/* The bucket may have changed meanwhile. */
				fnext = s->buckets[b];
			}
			pthread_mutex_unlock(&s->mu);
		}
	}
	return n;
}

void nlm_table_count(struct nlm_table *t, size_t *locks, size_t *waiters,
		     size_t *shares)
{
	size_t nl = 0, nw = 0, ns = 0;

	for (unsigned i = 0; i < t->nshards; i++) {
		struct shard *s = &t->shards[i];

		pthread_mutex_lock(&s->mu);
		for (unsigned b = 0; b < SHARD_BUCKETS; b++)
			for (struct file *f = s->buckets[b]; f; f = f->next) {
				for (struct lk *l = f->locks; l; l = l->next)
					nl++;
				for (struct waiter *w = f->waiters; w;
				     w = w->next)
					nw++;
				for (struct shr *h = f->shares; h; h = h->next)
					ns++;
			}
		pthread_mutex_unlock(&s->mu);
	}
	if (locks)
		*locks = nl;
	if (waiters)
		*waiters = nw;
	if (shares)
		*shares = ns;
}

size_t nlm_table_hosts(struct nlm_table *t, struct nlm_host_count *out,
		       size_t cap)
{
	size_t n = 0;

	pthread_mutex_lock(&t->hosts_mu);
	for (size_t b = 0; b < HOST_BUCKETS; b++)
		for (struct hostc *c = t->hosts[b]; c; c = c->next) {
			if (n < cap)
				out[n] = (struct nlm_host_count){ c->host,
								  c->n };
			n++;
		}
	pthread_mutex_unlock(&t->hosts_mu);
	return n;
}
