/*
 * s3/store.c - store_open() dispatch on the URL scheme, and the public
 * wrappers that forward to the backend's vtable.
 */
#include "store_int.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "metrics/metrics.h"

/*
 * Known schemes.  A NULL ops marks a scheme that is recognised but not
 * built yet, so a config naming it fails with ENOTSUP, not a parse error.
 */
static const struct {
	const char *scheme;
	const struct store_ops *ops;
} store_backends[] = {
	{ "file", &store_file_ops },
	{ "s3", &store_s3_ops },
};

/*
 * Open the backend named by opts->url's scheme.  On success *out is owned
 * by the caller (store_close); st->url is a copy owned by the store.
 */
int store_open(const struct store_opts *opts, struct store **out)
{
	const struct store_ops *ops = NULL;
	const char *sep;
	struct store *st;
	size_t n, i;
	bool known = false;
	int err;

	if (!opts || !opts->url || !out)
		return -EINVAL;
	sep = strstr(opts->url, "://");
	if (!sep)
		return -EINVAL;
	n = (size_t)(sep - opts->url);
	for (i = 0; i < sizeof(store_backends) / sizeof(store_backends[0]);
	     i++) {
		if (strlen(store_backends[i].scheme) == n &&
		    memcmp(store_backends[i].scheme, opts->url, n) == 0) {
			known = true;
			ops = store_backends[i].ops;
			break;
		}
	}
	if (!known)
		return -EINVAL;
	if (!ops)
		return -ENOTSUP;

	err = ops->open(opts, &st);
	if (err)
		return err;
	st->ops = ops;
	st->put_max = opts->put_max;
	st->cond_bits = -1; /* not asked yet */
	pthread_mutex_init(&st->cond_lock, NULL);
	st->url = strdup(opts->url);
	if (!st->url) {
		ops->close(st);
		return -ENOMEM;
	}
	*out = st;
	return 0;
}

/* Close the backend and free st (NULL is a no-op). */
void store_close(struct store *st)
{
	char *url;

	if (!st)
		return;
	url = st->url;
	pthread_mutex_destroy(&st->cond_lock);
	st->ops->close(st);
	free(url);
}

/* The URL the store was opened with; valid until store_close(). */
const char *store_url(const struct store *st)
{
	return st->url;
}

static int64_t store_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Whether rc says something of the store's health: -EAGAIN is the
 * backend's "not answering" once its retries are used up; 0 and the
 * errors the server itself answers (no such key, denied, ...) say it is
 * up.  Out of memory, a cancel or an interrupt say nothing either way.
 */
static bool store_rc_up(int rc)
{
	return rc != -EAGAIN && rc != -ENOMEM && rc != -ECANCELED &&
	       rc != -EINTR;
}

/*
 * Fold one operation's result into store_down(), logging the changes
 * (once per outage: the first -EAGAIN and the first answer after it).
 */
static void store_health(struct store *st, int rc)
{
	int64_t since =
		atomic_load_explicit(&st->down_since_ms, memory_order_relaxed);

	if (rc == -EAGAIN && !since) {
		int64_t now = store_now_ms();

		if (atomic_compare_exchange_strong(&st->down_since_ms, &since,
						   now))
			log_warn("store %s: not answering; what needs it waits "
				 "(clients retry) until it does",
				 st->url ? st->url : "");
	} else if (since && store_rc_up(rc)) {
		since = atomic_exchange(&st->down_since_ms, 0);
		if (since) {
			int64_t ms = store_now_ms() - since;

			atomic_store(&st->last_outage_ms, ms);
			atomic_fetch_add(&st->outages_ended, 1);
			log_info("store %s: answering again after %lld ms",
				 st->url ? st->url : "", (long long)ms);
		}
	}
}

/*
 * The wrappers below forward to the backend; a missing op is ENOTSUP.
 * Each counts itself in the metrics and in the store's health,
 * whichever backend runs it.
 */
static int store_done(struct store *st, enum metrics_store_op op, int rc,
		      uint64_t bytes)
{
	metrics_store_op(op, rc, bytes);
	store_health(st, rc);
	return rc;
}

static int store_counted(struct store *st, enum metrics_store_op op, int rc)
{
	return store_done(st, op, rc, 0);
}

uint64_t store_outages_ended(const struct store *st, uint64_t *last_ms)
{
	uint64_t n = atomic_load(&st->outages_ended);

	*last_ms = (uint64_t)atomic_load(&st->last_outage_ms);
	return n;
}

bool store_down(const struct store *st)
{
	return atomic_load_explicit(&st->down_since_ms, memory_order_relaxed) !=
	       0;
}

int store_probe(struct store *st)
{
	struct store_info info;
	int rc = store_head(st, STORE_PROBE_KEY, &info);

	return store_rc_up(rc) ? 0 : rc;
}

int store_head(struct store *st, const char *key, struct store_info *out)
{
	if (!st->ops->head)
		return -ENOTSUP;
	return store_counted(st, MET_OP_HEAD, st->ops->head(st, key, out));
}

int store_get(struct store *st, const char *key, uint64_t off, size_t len,
	      void *buf, size_t *got)
{
	if (!st->ops->get)
		return -ENOTSUP;
	int rc = st->ops->get(st, key, off, len, buf, got);

	return store_done(st, MET_OP_GET, rc, rc || !got ? 0 : *got);
}

/* The bounce buffer of a backend without get_stream. */
#define STREAM_PIECE (1u << 20)

/* get_stream over get: GETs of up to STREAM_PIECE bytes, one at a time. */
static int get_stream_pieces(struct store *st, const char *key, uint64_t off,
			     uint64_t len, store_sink_fn sink, void *arg,
			     uint64_t *got)
{
	size_t cap = len < STREAM_PIECE ? (size_t)len : STREAM_PIECE;
	void *buf = malloc(cap ? cap : 1);
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	while (*got < len) {
		size_t want = len - *got < cap ? (size_t)(len - *got) : cap;
		size_t n = 0;

		rc = st->ops->get(st, key, off + *got, want, buf, &n);
		if (!rc && n)
			rc = sink(arg, buf, n);
		if (rc)
			break;
		*got += n;
		if (n < want)
			break; /* the end of the object */
	}
	free(buf);
	return rc;
}

int store_get_stream(struct store *st, const char *key, uint64_t off,
		     uint64_t len, store_sink_fn sink, void *arg, uint64_t *got)
{
	return store_get_stream_if(st, key, NULL, off, len, sink, arg, got);
}

/* The pin of a backend without get_stream: the version is checked by a
 * HEAD first, and a GET's answer cannot be pinned (a window). */
int store_get_stream_if(struct store *st, const char *key, const char *if_match,
			uint64_t off, uint64_t len, store_sink_fn sink,
			void *arg, uint64_t *got)
{
	int rc;

	*got = 0;
	if (if_match && !*if_match)
		if_match = NULL;
	if (st->ops->get_stream) {
		rc = st->ops->get_stream(st, key, if_match, off, len, sink, arg,
					 got);
	} else if (st->ops->get) {
		struct store_info info;

		/* (A store without HEAD, a test's, cannot pin.) */
		if (!st->ops->head)
			if_match = NULL;
		rc = if_match ? st->ops->head(st, key, &info) : 0;
		if (!rc && if_match && strcmp(info.etag, if_match))
			rc = -ESTALE;
		if (!rc)
			rc = get_stream_pieces(st, key, off, len, sink, arg,
					       got);
	} else {
		return -ENOTSUP;
	}
	return store_done(st, MET_OP_GET, rc, rc ? 0 : *got);
}

/*
 * The backend's cond_native, asked until it can tell (0 bits: none).
 * Said once in the log when some condition is not honoured.
 */
static int cond_bits(struct store *st)
{
	int bits = atomic_load_explicit(&st->cond_bits, memory_order_acquire);

	if (bits >= 0)
		return bits;
	if (!st->ops->cond_native)
		bits = 0;
	else if ((bits = st->ops->cond_native(st)) < 0)
		return 0; /* cannot tell yet: HEAD this time, ask again */
	/* Many uploads ask at once: the one that tells says it. */
	int unknown = -1;

	if (!atomic_compare_exchange_strong(&st->cond_bits, &unknown, bits))
		return bits;
	if (bits != STORE_COND_ALL)
		log_warn(
			"store %s: ignores conditions on%s%s%s; those uploads "
			"HEAD their key first, and a write by another client "
			"between the HEAD and the upload is overwritten",
			st->url ? st->url : "",
			bits & STORE_COND_NONE_OK ? "" : " If-None-Match PUTs,",
			bits & STORE_COND_MATCH_OK ? "" : " If-Match PUTs,",
			bits & STORE_COND_MPU_OK ? "" : " multipart completes");
	return bits;
}

/* Does cond (not STORE_IF_ANY) hold for key now?  One HEAD: 0, -ESTALE,
 * -ENOENT (STORE_IF_MATCH of a key that is gone) or the HEAD's error.
 * An object that carries cond's write id is an earlier try of this same
 * write (its answer lost; on a lax server perhaps cut short): it is
 * written over. */
static int cond_by_head(struct store *st, const char *key,
			const struct store_cond *cond)
{
	struct store_info info;
	int rc = store_head(st, key, &info);

	if (!rc && cond->wid[0] && !strcmp(info.meta.wid, cond->wid))
		return 0;
	if (cond->kind == STORE_IF_NONE)
		return rc == -ENOENT ? 0 : rc ? rc : -ESTALE;
	if (rc)
		return rc;
	return strcmp(info.etag, cond->etag) ? -ESTALE : 0;
}

/* Was cond's write found to meet its condition by an earlier try? */
static bool cond_ok_seen(struct store *st, const struct store_cond *cond)
{
	bool seen = false;

	pthread_mutex_lock(&st->cond_lock);
	for (unsigned i = 0; cond->wid[0] && i < STORE_COND_OK_MAX && !seen;
	     i++)
		seen = !strcmp(st->cond_ok[i], cond->wid);
	pthread_mutex_unlock(&st->cond_lock);
	return seen;
}

/*
 * cond_by_head, once per write: a later try of the same write (same id)
 * goes on without asking again, so what a cut try left on a lax server
 * (s3rver keeps the bytes it got, but not the metadata) is written over,
 * not taken for another writer's.  The window of the HEAD fallback is
 * then from the first HEAD to the try that succeeds.
 */
static int cond_head_once(struct store *st, const char *key,
			  const struct store_cond *cond)
{
	int rc;

	if (cond_ok_seen(st, cond))
		return 0;
	rc = cond_by_head(st, key, cond);
	if (!rc && cond->wid[0]) {
		pthread_mutex_lock(&st->cond_lock);
		snprintf(st->cond_ok[st->cond_ok_next++ % STORE_COND_OK_MAX],
			 STORE_WID_MAX, "%s", cond->wid);
		pthread_mutex_unlock(&st->cond_lock);
	}
	return rc;
}

/*
 * The part of cond the backend cannot check itself, checked with a HEAD
 * of key now: 0 (the write may go, with *pass, what remains for the
 * request: NULL for none), or cond_by_head's error.
 */
static int cond_check(struct store *st, const char *key,
		      const struct store_cond *cond, bool mpu,
		      const struct store_cond **pass)
{
	int need;

	*pass = NULL;
	if (!cond || cond->kind == STORE_IF_ANY)
		return 0;
	need = mpu                           ? STORE_COND_MPU_OK
	       : cond->kind == STORE_IF_NONE ? STORE_COND_NONE_OK
					     : STORE_COND_MATCH_OK;
	if (cond_bits(st) & need) {
		*pass = cond;
		return 0;
	}
	return cond_head_once(st, key, cond);
}

int store_put(struct store *st, const char *key, const void *buf, size_t len,
	      const struct store_meta *meta, struct store_info *out)
{
	return store_put_if(st, key, buf, len, meta, NULL, out);
}

int store_put_if(struct store *st, const char *key, const void *buf, size_t len,
		 const struct store_meta *meta, const struct store_cond *cond,
		 struct store_info *out)
{
	const struct store_cond *pass;
	int rc;

	if (!st->ops->put)
		return -ENOTSUP;
	rc = cond_check(st, key, cond, false, &pass);
	if (!rc)
		rc = st->ops->put(st, key, buf, len, meta, pass, out);
	return store_done(st, MET_OP_PUT, rc, rc ? 0 : len);
}

int store_put_fd(struct store *st, const char *key, int fd, uint64_t len,
		 const struct store_meta *meta, struct store_info *out)
{
	return store_put_fd_if(st, key, fd, len, meta, NULL, out);
}

int store_put_fd_if(struct store *st, const char *key, int fd, uint64_t len,
		    const struct store_meta *meta,
		    const struct store_cond *cond, struct store_info *out)
{
	const struct store_cond *pass;
	int rc;

	if (!st->ops->put_fd)
		return -ENOTSUP;
	rc = cond_check(st, key, cond, false, &pass);
	if (!rc)
		rc = st->ops->put_fd(st, key, fd, len, meta, pass, out);
	return store_done(st, MET_OP_PUT, rc, rc ? 0 : len);
}

int store_mpu_list(struct store *st, const char *prefix,
		   struct store_upload **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (!st->ops->mpu_list)
		return -ENOTSUP;
	return store_counted(st, MET_OP_MPU,
			     st->ops->mpu_list(st, prefix, out, n));
}

void store_uploads_free(struct store_upload *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].key);
		free(v[i].upload_id);
	}
	free(v);
}

/* Append (key, id) to *v (*n of them), copying both.  0 or -ENOMEM. */
int store_uploads_add(struct store_upload **v, size_t *n, const char *key,
		      const char *upload_id)
{
	struct store_upload *nv = realloc(*v, (*n + 1) * sizeof(**v));

	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[*n].key = strdup(key);
	nv[*n].upload_id = strdup(upload_id);
	if (!nv[*n].key || !nv[*n].upload_id) {
		free(nv[*n].key);
		free(nv[*n].upload_id);
		return -ENOMEM;
	}
	(*n)++;
	return 0;
}

unsigned store_put_parallel(const struct store *st)
{
	return st->ops->put_parallel ? st->ops->put_parallel
				     : STORE_PUT_PARALLEL_DEFAULT;
}

size_t store_key_max(struct store *st)
{
	size_t n = st->ops->key_max ? st->ops->key_max(st) : STORE_KEY_MAX;

	return n < STORE_KEY_MAX ? n : STORE_KEY_MAX;
}

uint64_t store_put_max(struct store *st)
{
	if (st->put_max)
		return st->put_max;
	return st->ops->put_max ? st->ops->put_max(st) : STORE_PUT_MAX_DEFAULT;
}

int store_mpu_create(struct store *st, const char *key,
		     const struct store_meta *meta, char **upload_id)
{
	if (!st->ops->mpu_create)
		return -ENOTSUP;
	return store_counted(st, MET_OP_MPU,
			     st->ops->mpu_create(st, key, meta, upload_id));
}

int store_mpu_part(struct store *st, const char *key, const char *upload_id,
		   int partno, int fd, uint64_t off, uint64_t len,
		   char etag[STORE_ETAG_MAX])
{
	if (!st->ops->mpu_part)
		return -ENOTSUP;
	int rc = st->ops->mpu_part(st, key, upload_id, partno, fd, off, len,
				   etag);

	return store_done(st, MET_OP_MPU, rc, rc ? 0 : len);
}

int store_mpu_part_copy(struct store *st, const char *key,
			const char *upload_id, int partno, const char *src,
			uint64_t off, uint64_t len, char etag[STORE_ETAG_MAX])
{
	if (!st->ops->mpu_part_copy)
		return -ENOTSUP;
	return store_counted(st, MET_OP_MPU,
			     st->ops->mpu_part_copy(st, key, upload_id, partno,
						    src, off, len, etag));
}

int store_mpu_complete(struct store *st, const char *key, const char *upload_id,
		       int nparts, char (*etags)[STORE_ETAG_MAX],
		       struct store_info *out)
{
	return store_mpu_complete_if(st, key, upload_id, nparts, etags, NULL,
				     out);
}

int store_mpu_complete_if(struct store *st, const char *key,
			  const char *upload_id, int nparts,
			  char (*etags)[STORE_ETAG_MAX],
			  const struct store_cond *cond, struct store_info *out)
{
	const struct store_cond *pass;
	int rc;

	if (!st->ops->mpu_complete)
		return -ENOTSUP;
	rc = cond_check(st, key, cond, true, &pass);
	if (!rc)
		rc = st->ops->mpu_complete(st, key, upload_id, nparts, etags,
					   pass, out);
	return store_counted(st, MET_OP_MPU, rc);
}

int store_mpu_abort(struct store *st, const char *key, const char *upload_id)
{
	if (!st->ops->mpu_abort)
		return -ENOTSUP;
	return store_counted(st, MET_OP_MPU,
			     st->ops->mpu_abort(st, key, upload_id));
}

int store_list(struct store *st, const char *prefix, char delimiter,
	       const char *token, unsigned max_keys, struct store_page *out)
{
	if (!st->ops->list)
		return -ENOTSUP;
	return store_counted(
		st, MET_OP_LIST,
		st->ops->list(st, prefix, delimiter, token, max_keys, out));
}

/* Free everything a backend put in page (all malloc'd) and zero it. */
void store_page_free(struct store_page *page)
{
	size_t i;

	if (!page)
		return;
	for (i = 0; i < page->nentries; i++)
		free(page->entries[i].key);
	free(page->entries);
	for (i = 0; i < page->nprefixes; i++)
		free(page->prefixes[i]);
	free(page->prefixes);
	free(page->next_token);
	memset(page, 0, sizeof(*page));
}

int store_copy(struct store *st, const char *src, const char *dst,
	       const struct store_meta *meta, struct store_info *out)
{
	return store_copy_if(st, src, dst, meta, NULL, out);
}

int store_copy_if(struct store *st, const char *src, const char *dst,
		  const struct store_meta *meta, const struct store_cond *cond,
		  struct store_info *out)
{
	int rc = 0;

	if (!st->ops->copy)
		return -ENOTSUP;
	if (cond && cond->kind != STORE_IF_ANY)
		rc = cond_by_head(st, dst, cond);
	if (!rc)
		rc = st->ops->copy(st, src, dst, meta, out);
	return store_counted(st, MET_OP_COPY, rc);
}

int store_delete(struct store *st, const char *key)
{
	if (!st->ops->del)
		return -ENOTSUP;
	return store_counted(st, MET_OP_DELETE, st->ops->del(st, key));
}

int store_delete_many(struct store *st, const char *const *keys, size_t n)
{
	if (!st->ops->del_many)
		return -ENOTSUP;
	return store_counted(st, MET_OP_DELETE, st->ops->del_many(st, keys, n));
}

int store_event_key(struct store *st, const char *bucket, const char *key,
		    char *out, size_t cap)
{
	if (!st->ops->event_key)
		return -ENOTSUP;
	return st->ops->event_key(st, bucket, key, out, cap);
}

int store_statfs(struct store *st, uint64_t *total_bytes, uint64_t *avail_bytes)
{
	if (!st->ops->statfs)
		return -ENOTSUP;
	return st->ops->statfs(st, total_bytes, avail_bytes);
}

bool store_key_reserved(const char *key)
{
	return !strncmp(key, STORE_RESERVED_PREFIX,
			sizeof(STORE_RESERVED_PREFIX) - 1);
}
