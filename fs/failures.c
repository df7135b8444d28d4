/*
 * fs/failures.c - store work that keeps failing with an error retrying
 * alone cannot fix (a key the store refuses, access denied, a file where
 * the store needs a directory): reported, never retried silently.
 *
 * Each failing key gets one warning when it starts failing (or fails in
 * another way), a count in mapfs_upload_failures_total, a place in
 * `ctl status`, and a backoff of its own (FAIL_BACKOFF_MIN_MS doubling to
 * FAIL_BACKOFF_MAX_MS) so that one bad file neither hammers the store
 * nor slows the uploads of the others.  Its data stays dirty here; the
 * first success is logged and clears it.  In memory only: a restart
 * tries every file again at once, and reports again what still fails.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "fs_int.h"
#include "metrics/metrics.h"

_Static_assert(FS_KEY_TEXT_MAX == STORE_KEY_MAX + 1, "fs.h and store.h agree");

#define FAIL_BACKOFF_MIN_MS 5000
#define FAIL_BACKOFF_MAX_MS 300000

struct fs_fail {
	struct fs_fail *next;
	int err;
	uint32_t backoff_ms;
	uint64_t count, first_ms, next_ms;
	char what[16];
	char key[];
};

bool fs_err_transient(int err)
{
	switch (err) {
	case -EAGAIN: /* the store did not answer: store_down() */
	case -ENOMEM:
	case -ENODATA: /* a cache file being set up */
	case -EINTR:
	case -EBUSY:
	case -ETIMEDOUT:
	case -ECONNRESET:
	case -ECANCELED:
		return true;
	default:
		return false;
	}
}

/* The entry of key, and the link that points at it.  Under fail_lock. */
static struct fs_fail **fail_find(struct fs *fs, const char *key)
{
	struct fs_fail **pp;

	for (pp = &fs->fails; *pp && strcmp((*pp)->key, key); pp = &(*pp)->next)
		;
	return pp;
}

void fs_fail_note(struct fs *fs, const char *what, const char *key, int err)
{
	uint64_t now = fs_now_ms();
	struct fs_fail **pp, *f;
	bool news = false;

	metrics_inc(MET_UPLOAD_FAILURES);
	pthread_mutex_lock(&fs->fail_lock);
	pp = fail_find(fs, key);
	f = *pp;
	if (!f && (f = calloc(1, sizeof(*f) + strlen(key) + 1))) {
		strcpy(f->key, key);
		f->first_ms = now;
		f->next = fs->fails;
		fs->fails = f;
		news = true;
	}
	if (f) {
		news |= f->err != err || strcmp(f->what, what);
		f->err = err;
		snprintf(f->what, sizeof(f->what), "%s", what);
		f->count++;
		f->backoff_ms =
			f->backoff_ms ? f->backoff_ms * 2 : FAIL_BACKOFF_MIN_MS;
		if (f->backoff_ms > FAIL_BACKOFF_MAX_MS)
			f->backoff_ms = FAIL_BACKOFF_MAX_MS;
		f->next_ms = now + f->backoff_ms;
	}
	pthread_mutex_unlock(&fs->fail_lock);
	if (news)
		log_warn("fs: store %s of \"%s\" failed: %s; the change stays "
			 "here and is tried again, at most every %d s (ctl "
			 "status lists what keeps failing)",
			 what, key, strerror(-err), FAIL_BACKOFF_MAX_MS / 1000);
}

void fs_fail_clear(struct fs *fs, const char *key)
{
	struct fs_fail **pp, *f;

	pthread_mutex_lock(&fs->fail_lock);
	pp = fail_find(fs, key);
	if ((f = *pp))
		*pp = f->next;
	pthread_mutex_unlock(&fs->fail_lock);
	if (!f)
		return;
	log_info("fs: store %s of \"%s\" succeeded after %llu failures",
		 f->what, key, (unsigned long long)f->count);
	free(f);
}

bool fs_fail_wait(struct fs *fs, const char *key)
{
	uint64_t now = fs_now_ms();
	struct fs_fail *f;
	bool wait;

	pthread_mutex_lock(&fs->fail_lock);
	f = *fail_find(fs, key);
	wait = f && now < f->next_ms;
	pthread_mutex_unlock(&fs->fail_lock);
	return wait;
}

void fs_fail_stat(struct fs *fs, struct fs_dirty_stat *out)
{
	const struct fs_fail *oldest = NULL;

	pthread_mutex_lock(&fs->fail_lock);
	for (const struct fs_fail *f = fs->fails; f; f = f->next) {
		out->failing++;
		if (!oldest || f->first_ms < oldest->first_ms)
			oldest = f;
	}
	if (oldest) {
		snprintf(out->failing_key, sizeof(out->failing_key), "%s",
			 oldest->key);
		out->failing_err = oldest->err;
	}
	pthread_mutex_unlock(&fs->fail_lock);
}

int fs_fail_each(struct fs *fs,
		 void (*fn)(void *arg, const char *what, const char *key,
			    int err, uint64_t count),
		 void *arg)
{
	struct fs_fail *copy = NULL, *f;
	int rc = 0;

	/* A copy, so that fn runs without the lock (it may block). */
	pthread_mutex_lock(&fs->fail_lock);
	for (const struct fs_fail *x = fs->fails; x; x = x->next) {
		size_t len = sizeof(*x) + strlen(x->key) + 1;

		if (!(f = malloc(len))) {
			rc = -ENOMEM;
			break;
		}
		memcpy(f, x, len);
		f->next = copy;
		copy = f;
	}
	pthread_mutex_unlock(&fs->fail_lock);
	while ((f = copy)) {
		copy = f->next;
		if (!rc)
			fn(arg, f->what, f->key, f->err, f->count);
		free(f);
	}
	return rc;
}

void fs_fail_free(struct fs *fs)
{
	while (fs->fails) {
		struct fs_fail *f = fs->fails;

		fs->fails = f->next;
		free(f);
	}
}
