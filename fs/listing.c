/*
 * fs/listing.c - listings in progress, and who waits for them.
 *
 * One entry per directory whose listing a caller asked for (not forced):
 * a second caller joins it instead of listing the directory again.  A
 * first listing (a directory never listed) merges page by page and says
 * so here after each page (fs_listing_progress): a READDIR from cookie c
 * waits only until entries past c are in, and a READDIR holds back its
 * eof while the listing runs (fs_listing_progressive).  Everyone else
 * waits for the end.
 *
 * Callbacks run after the lock is dropped: a woken READDIR may read the
 * directory, or wait again, from inside its callback.
 */
#include <errno.h>
#include <stdlib.h>

#include "fs_int.h"

struct fs_listing_waiter {
	uint64_t after; /* a cookie, FS_WAIT_NEXT or FS_WAIT_DONE */
	fs_done_fn done;
	void *arg;
	struct fs_listing_waiter *next;
};

struct fs_listing {
	uint64_t dir;
	bool progressive;
	uint64_t since_ms;    /* when it was asked for */
	uint64_t next_cookie; /* dir's, after the last page merged (0: none) */
	struct fs_listing_waiter *waiters;
	struct fs_listing *next;
};

static struct fs_listing *find(struct fs *fs, uint64_t dir)
{
	struct fs_listing *l = fs->listings;

	while (l && l->dir != dir)
		l = l->next;
	return l;
}

/* Can a waiter for after go on now that l has merged what it has? */
static bool ready(const struct fs_listing *l, uint64_t after)
{
	return after < FS_WAIT_NEXT && l->next_cookie &&
	       l->next_cookie - 1 > after;
}

static int add_waiter(struct fs_listing *l, uint64_t after, fs_done_fn done,
		      void *arg)
{
	struct fs_listing_waiter *w = malloc(sizeof(*w));

	if (!w)
		return -ENOMEM;
	*w = (struct fs_listing_waiter){ after, done, arg, l->waiters };
	l->waiters = w;
	return 0;
}

/* See fs_int.h. */
int fs_listing_start(struct fs *fs, uint64_t dir, bool progressive,
		     uint64_t after, fs_done_fn done, void *arg)
{
	struct fs_listing *l;
	int rc;

	pthread_mutex_lock(&fs->listing_lock);
	l = find(fs, dir);
	if (l) {
		rc = ready(l, after) ? 2 : add_waiter(l, after, done, arg);
		pthread_mutex_unlock(&fs->listing_lock);
		return rc;
	}
	l = calloc(1, sizeof(*l));
	if (!l || add_waiter(l, after, done, arg)) {
		pthread_mutex_unlock(&fs->listing_lock);
		free(l);
		return -ENOMEM;
	}
	l->dir = dir;
	l->progressive = progressive;
	if (progressive)
		atomic_fetch_add(&fs->nprogressive, 1);
	l->since_ms = fs_now_ms();
	l->next = fs->listings;
	fs->listings = l;
	pthread_mutex_unlock(&fs->listing_lock);
	return 1;
}

/* See fs_int.h. */
int fs_listing_join(struct fs *fs, uint64_t dir, uint64_t after,
		    fs_done_fn done, void *arg)
{
	struct fs_listing *l;
	int rc = -ENOENT;

	pthread_mutex_lock(&fs->listing_lock);
	l = find(fs, dir);
	if (l && (after != FS_WAIT_NEXT || l->progressive))
		rc = ready(l, after) ? 2 : add_waiter(l, after, done, arg);
	pthread_mutex_unlock(&fs->listing_lock);
	return rc;
}

/* See fs_int.h. */
bool fs_listing_progressive(struct fs *fs, uint64_t dir, uint64_t *since_ms)
{
	struct fs_listing *l;
	bool on;

	/* A listing the caller saw start (it returned, or woke the caller)
	 * counted itself under the lock before. */
	if (!atomic_load(&fs->nprogressive))
		return false;
	pthread_mutex_lock(&fs->listing_lock);
	l = find(fs, dir);
	on = l && l->progressive;
	if (on && since_ms)
		*since_ms = l->since_ms;
	pthread_mutex_unlock(&fs->listing_lock);
	return on;
}

static void wake(struct fs_listing_waiter *w, int err)
{
	while (w) {
		struct fs_listing_waiter *next = w->next;

		w->done(w->arg, err);
		free(w);
		w = next;
	}
}

/* See fs_int.h. */
void fs_listing_progress(struct fs *fs, uint64_t dir, uint64_t next_cookie)
{
	struct fs_listing_waiter *woken = NULL, **p;
	struct fs_listing *l;

	pthread_mutex_lock(&fs->listing_lock);
	l = find(fs, dir);
	if (l) {
		l->next_cookie = next_cookie;
		for (p = &l->waiters; *p;) {
			struct fs_listing_waiter *w = *p;

			if (w->after != FS_WAIT_NEXT && !ready(l, w->after)) {
				p = &w->next;
				continue;
			}
			*p = w->next;
			w->next = woken;
			woken = w;
		}
	}
	pthread_mutex_unlock(&fs->listing_lock);
	wake(woken, 0);
}

/* See fs_int.h. */
void fs_listing_end(struct fs *fs, uint64_t dir, int err)
{
	struct fs_listing *l = NULL, **p;

	pthread_mutex_lock(&fs->listing_lock);
	for (p = &fs->listings; *p; p = &(*p)->next)
		if ((*p)->dir == dir) {
			l = *p;
			*p = l->next;
			if (l->progressive)
				atomic_fetch_sub(&fs->nprogressive, 1);
			break;
		}
	pthread_mutex_unlock(&fs->listing_lock);
	if (!l)
		return;
	wake(l->waiters, err);
	free(l);
}
