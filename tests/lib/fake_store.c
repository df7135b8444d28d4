/*
 * tests/lib/fake_store.c - the tests' one fake store (fake_store.h): every
 * call counted, faulted or held as the test says, then passed to the
 * inner store.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3/store_int.h"
#include "tests/lib/fake_store.h"

struct fake_store {
	struct store base; /* first: the store the rooms are given */
	struct store *inner;
	atomic_uint faults;
	atomic_int calls[FAKE_CALLS];
	atomic_uint_fast64_t get_bytes, get_most;
	pthread_mutex_t lock; /* the gates */
	pthread_cond_t cond;
	enum fake_hold hold[FAKE_CALLS];
	int reached[FAKE_CALLS]; /* calls at the gate since it was set */
	int pass[FAKE_CALLS];    /* calls the gate lets by before it holds */
};

static struct fake_store *fake_of(struct store *st)
{
	return (struct fake_store *)st;
}

static bool faulty(struct fake_store *f, unsigned fault)
{
	return atomic_load(&f->faults) & fault;
}

/* The gate of kind at where: count the call, wait while it holds there. */
static void gate(struct fake_store *f, enum fake_call kind,
		 enum fake_hold where)
{
	pthread_mutex_lock(&f->lock);
	if (f->hold[kind] == where && f->pass[kind] > 0) {
		f->pass[kind]--;
	} else if (f->hold[kind] == where) {
		f->reached[kind]++;
		pthread_cond_broadcast(&f->cond);
		while (f->hold[kind] == where)
			pthread_cond_wait(&f->cond, &f->lock);
	}
	pthread_mutex_unlock(&f->lock);
}

/* A call of kind begins: counted, held if its gate holds before. */
static void enter(struct fake_store *f, enum fake_call kind)
{
	atomic_fetch_add(&f->calls[kind], 1);
	gate(f, kind, FAKE_HOLD_BEFORE);
}

/* A call of kind landed with rc: held if its gate holds after. */
static int leave(struct fake_store *f, enum fake_call kind, int rc)
{
	gate(f, kind, FAKE_HOLD_AFTER);
	return rc;
}

static void get_counted(struct fake_store *f, uint64_t len)
{
	uint64_t most = atomic_load(&f->get_most);

	atomic_fetch_add(&f->get_bytes, len);
	while (len > most &&
	       !atomic_compare_exchange_weak(&f->get_most, &most, len))
		;
	enter(f, FAKE_GET);
}

static int f_head(struct store *st, const char *key, struct store_info *out)
{
	struct fake_store *f = fake_of(st);

	enter(f, FAKE_HEAD);
	if (faulty(f, FAKE_ALL_DOWN))
		return leave(f, FAKE_HEAD, -EAGAIN);
	return leave(f, FAKE_HEAD, store_head(f->inner, key, out));
}

static int f_get(struct store *st, const char *key, uint64_t off, size_t len,
		 void *buf, size_t *got)
{
	struct fake_store *f = fake_of(st);

	get_counted(f, len);
	if (faulty(f, FAKE_ALL_DOWN))
		return leave(f, FAKE_GET, -EAGAIN);
	return leave(f, FAKE_GET, store_get(f->inner, key, off, len, buf, got));
}

static int f_get_stream(struct store *st, const char *key, const char *if_match,
			uint64_t off, uint64_t len, store_sink_fn sink,
			void *arg, uint64_t *got)
{
	struct fake_store *f = fake_of(st);

	get_counted(f, len);
	if (faulty(f, FAKE_ALL_DOWN))
		return leave(f, FAKE_GET, -EAGAIN);
	return leave(f, FAKE_GET,
		     store_get_stream_if(f->inner, key, if_match, off, len,
					 sink, arg, got));
}

static int f_put(struct store *st, const char *key, const void *buf, size_t len,
		 const struct store_meta *meta, const struct store_cond *cond,
		 struct store_info *out)
{
	struct fake_store *f = fake_of(st);

	enter(f, FAKE_PUT);
	if (faulty(f, FAKE_PUTS_DOWN | FAKE_ALL_DOWN))
		return leave(f, FAKE_PUT, -EAGAIN);
	return leave(f, FAKE_PUT,
		     store_put_if(f->inner, key, buf, len, meta, cond, out));
}

static int f_put_fd(struct store *st, const char *key, int fd, uint64_t len,
		    const struct store_meta *meta,
		    const struct store_cond *cond, struct store_info *out)
{
	struct fake_store *f = fake_of(st);

	enter(f, FAKE_PUT_FD);
	if (faulty(f, FAKE_PUTS_DOWN | FAKE_ALL_DOWN))
		return leave(f, FAKE_PUT_FD, -EAGAIN);
	return leave(f, FAKE_PUT_FD,
		     store_put_fd_if(f->inner, key, fd, len, meta, cond, out));
}

static int f_mpu_create(struct store *st, const char *key,
			const struct store_meta *meta, char **id)
{
	struct fake_store *f = fake_of(st);
	int rc = store_mpu_create(f->inner, key, meta, id);

	if (!rc && faulty(f, FAKE_MPU_LOSE_CREATE)) {
		free(*id);
		*id = NULL;
		rc = -EAGAIN;
	}
	return rc;
}

static int f_mpu_part(struct store *st, const char *key, const char *id,
		      int partno, int fd, uint64_t off, uint64_t len,
		      char etag[STORE_ETAG_MAX])
{
	struct fake_store *f = fake_of(st);

	enter(f, FAKE_PART);
	return leave(
		f, FAKE_PART,
		store_mpu_part(f->inner, key, id, partno, fd, off, len, etag));
}

static int f_mpu_part_copy(struct store *st, const char *key, const char *id,
			   int partno, const char *src, uint64_t off,
			   uint64_t len, char etag[STORE_ETAG_MAX])
{
	struct fake_store *f = fake_of(st);

	if (faulty(f, FAKE_NO_PART_COPY))
		return -ENOTSUP;
	enter(f, FAKE_PART_COPY);
	return leave(f, FAKE_PART_COPY,
		     store_mpu_part_copy(f->inner, key, id, partno, src, off,
					 len, etag));
}

static int f_mpu_complete(struct store *st, const char *key, const char *id,
			  int nparts, char (*etags)[STORE_ETAG_MAX],
			  const struct store_cond *cond, struct store_info *out)
{
	struct fake_store *f = fake_of(st);

	if (faulty(f, FAKE_MPU_FAIL))
		return -EAGAIN;
	return store_mpu_complete_if(f->inner, key, id, nparts, etags, cond,
				     out);
}

static int f_mpu_abort(struct store *st, const char *key, const char *id)
{
	struct fake_store *f = fake_of(st);

	if (faulty(f, FAKE_MPU_FAIL))
		return -EAGAIN;
	return store_mpu_abort(f->inner, key, id);
}

static int f_mpu_list(struct store *st, const char *prefix,
		      struct store_upload **out, size_t *n)
{
	return store_mpu_list(fake_of(st)->inner, prefix, out, n);
}

static int f_list(struct store *st, const char *prefix, char delimiter,
		  const char *token, unsigned max_keys, struct store_page *out)
{
	struct fake_store *f = fake_of(st);

	enter(f, FAKE_LIST);
	return leave(
		f, FAKE_LIST,
		store_list(f->inner, prefix, delimiter, token, max_keys, out));
}

static int f_copy(struct store *st, const char *src, const char *dst,
		  const struct store_meta *meta, struct store_info *out)
{
	struct fake_store *f = fake_of(st);

	enter(f, FAKE_COPY);
	return leave(f, FAKE_COPY, store_copy(f->inner, src, dst, meta, out));
}

static int f_del(struct store *st, const char *key)
{
	return store_delete(fake_of(st)->inner, key);
}

static int f_del_many(struct store *st, const char *const *keys, size_t n)
{
	return store_delete_many(fake_of(st)->inner, keys, n);
}

/* The inner store checks the conditions passed on. */
static int f_cond_native(struct store *st)
{
	(void)st;
	return STORE_COND_ALL;
}

/* store_close's last step: the inner store and f go. */
static void f_close(struct store *st)
{
	struct fake_store *f = fake_of(st);

	store_close(f->inner);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
	free(f);
}

static const struct store_ops fake_ops = {
	.scheme = "fake",
	.close = f_close,
	.head = f_head,
	.get = f_get,
	.get_stream = f_get_stream,
	.put = f_put,
	.put_fd = f_put_fd,
	.mpu_create = f_mpu_create,
	.mpu_part = f_mpu_part,
	.mpu_part_copy = f_mpu_part_copy,
	.mpu_complete = f_mpu_complete,
	.mpu_abort = f_mpu_abort,
	.mpu_list = f_mpu_list,
	.list = f_list,
	.copy = f_copy,
	.del = f_del,
	.del_many = f_del_many,
	/* no put_max: S3's default, so big files take the multipart path */
	.cond_native = f_cond_native,
};

/* See fake_store.h. */
int fake_store_open(const char *inner_url, struct fake_store **out)
{
	struct fake_store *f = calloc(1, sizeof(*f));
	char url[512];
	int rc;

	if (!f)
		return -ENOMEM;
	rc = store_open(&(struct store_opts){ .url = inner_url }, &f->inner);
	if (rc) {
		free(f);
		return rc;
	}
	snprintf(url, sizeof(url), "fake+%s", inner_url);
	f->base.ops = &fake_ops;
	f->base.cond_bits = -1;
	f->base.url = strdup(url);
	pthread_mutex_init(&f->base.cond_lock, NULL);
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	if (!f->base.url) {
		store_close(&f->base);
		return -ENOMEM;
	}
	*out = f;
	return 0;
}

/* See fake_store.h. */
void fake_store_close(struct fake_store *f)
{
	if (f)
		store_close(&f->base);
}

/* See fake_store.h. */
struct store *fake_store_store(struct fake_store *f)
{
	return &f->base;
}

/* See fake_store.h. */
struct store *fake_store_inner(struct fake_store *f)
{
	return f->inner;
}

/* See fake_store.h. */
void fake_store_faults(struct fake_store *f, unsigned faults)
{
	atomic_store(&f->faults, faults);
}

/* See fake_store.h. */
int fake_store_count(struct fake_store *f, enum fake_call kind)
{
	return atomic_load(&f->calls[kind]);
}

/* See fake_store.h. */
uint64_t fake_store_get_bytes(struct fake_store *f)
{
	return atomic_load(&f->get_bytes);
}

/* See fake_store.h. */
uint64_t fake_store_get_most(struct fake_store *f)
{
	return atomic_load(&f->get_most);
}

/* See fake_store.h. */
void fake_store_counts_reset(struct fake_store *f)
{
	for (int k = 0; k < FAKE_CALLS; k++)
		atomic_store(&f->calls[k], 0);
	atomic_store(&f->get_bytes, 0);
	atomic_store(&f->get_most, 0);
}

/* See fake_store.h. */
void fake_store_hold(struct fake_store *f, enum fake_call kind,
		     enum fake_hold where)
{
	fake_store_hold_after(f, kind, where, 0);
}

/* See fake_store.h. */
void fake_store_hold_after(struct fake_store *f, enum fake_call kind,
			   enum fake_hold where, int pass)
{
	pthread_mutex_lock(&f->lock);
	f->hold[kind] = where;
	f->reached[kind] = 0;
	f->pass[kind] = pass;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

/* See fake_store.h. */
bool fake_store_held_wait(struct fake_store *f, enum fake_call kind, int n,
			  int timeout_ms)
{
	struct timespec dl;
	bool reached;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (dl.tv_nsec >= 1000000000) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&f->lock);
	while (f->reached[kind] < n && rc == 0)
		rc = pthread_cond_timedwait(&f->cond, &f->lock, &dl);
	reached = f->reached[kind] >= n;
	pthread_mutex_unlock(&f->lock);
	return reached;
}

/* See fake_store.h. */
void fake_store_put_max(struct fake_store *f, uint64_t bytes)
{
	f->base.put_max = bytes;
}
