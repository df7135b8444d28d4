/*
 * fs/strict.c - COMMITs and stable WRITEs that reply only once the file
 * is in the store (--strict-commit, the cluster's default): many at once.
 *
 * A client waiting for its file joins the queue (fs_sync_async) and a
 * thread serves it: every file asked for since the last pass began goes
 * up in the next pass together (the syncer's uploads in parallel, as many
 * as the store takes, their records committed in the same group commits),
 * instead of one pass per file, one file after the other, on the fs
 * workers (before: sixteen clients' COMMITs took sixteen round trips of
 * the store and of the cluster's database in turn).  FS_STRICT_THREADS
 * threads take turns: a pass holds the syncer's lock only for its store
 * half (syncer.c, sync_pass with later), so the next pass uploads while
 * this one's records are committed.  A file written again during its
 * upload stays in the queue for the next pass; one that keeps changing,
 * or a store error, answers -EAGAIN (the client retries).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/waiter.h"
#include "db/db.h"
#include "fs_int.h"
#include "sync_int.h"

/* Passes for one file that is written again during its uploads. */
#define STRICT_TRIES 100
/* Between passes for files written again (~2 s for STRICT_TRIES). */
#define STRICT_AGAIN_MS 20

struct strict_req {
	struct strict_req *next;
	uint64_t ino;
	fs_done_fn done;
	void *arg;
	int tries;
};

/* Is ino still to be written to the store?  (Gone counts as done.) */
static bool inode_dirty(struct fs *fs, uint64_t ino)
{
	struct fs_inode in;
	struct db_txn *txn;
	bool dirty = true;

	if (db_read_begin(fs->db, &txn))
		return true;
	if (fs_inode_get(fs, txn, ino, &in) == -ESTALE)
		dirty = false;
	else
		dirty = in.flags & FS_F_DIRTY;
	db_read_end(fs->db, txn);
	return dirty;
}

/* A pass's files: taken when the pass holds the syncer's lock. */
struct strict_take {
	struct fs *fs;
	struct strict_req *reqs; /* this thread's to send again, then all */
	uint64_t *inos;
	int rc; /* no pass: -ENOMEM, or -EAGAIN with the store known down */
};

/* fs_sync_taken's take: every request queued so far joins this pass. */
static size_t strict_take(void *p, uint64_t **out)
{
	struct strict_take *t = p;
	struct fs *fs = t->fs;
	size_t n = 0, k = 0;

	pthread_mutex_lock(&fs->strict_lock);
	while (fs->strict_head) {
		struct strict_req *r = fs->strict_head;

		fs->strict_head = r->next;
		r->next = t->reqs;
		t->reqs = r;
	}
	pthread_mutex_unlock(&fs->strict_lock);
	for (struct strict_req *r = t->reqs; r; r = r->next)
		n++;
	if (!n)
		return 0;
	/* Known down: the COMMITs are retried, not held for the store's
	 * retries (the probe tells when it is back). */
	t->inos = malloc(n * sizeof(*t->inos));
	t->rc = !t->inos ? -ENOMEM : store_down(fs->store) ? -EAGAIN : 0;
	if (t->rc)
		return 0;
	for (struct strict_req *r = t->reqs; r; r = r->next)
		t->inos[k++] = r->ino;
	*out = t->inos;
	return n;
}

/*
 * One pass for the files asked for until it holds the syncer's lock (and
 * *again, this thread's written again during their last upload); each
 * answered, or kept in *again.
 */
static void strict_pass(struct fs *fs, struct strict_req **again)
{
	struct strict_take t = { .fs = fs, .reqs = *again };
	bool progress;
	int rc;

	*again = NULL;
	rc = fs_sync_taken(fs, strict_take, &t, &progress);
	free(t.inos);
	if (!rc)
		rc = t.rc;
	struct strict_req *reqs = t.reqs;

	while (reqs) {
		struct strict_req *r = reqs;

		reqs = r->next;
		if (!rc && inode_dirty(fs, r->ino) &&
		    ++r->tries < STRICT_TRIES) {
			/* Written again during its upload: the next pass. */
			r->next = *again;
			*again = r;
			continue;
		}
		r->done(r->arg, rc == -ENOMEM             ? rc
				: rc                      ? -EAGAIN
				: inode_dirty(fs, r->ino) ? -EAGAIN
							  : 0);
		free(r);
	}
}

static void *strict_main(void *p)
{
	struct fs *fs = p;
	struct strict_req *again = NULL;

	pthread_mutex_lock(&fs->strict_lock);
	for (;;) {
		if (!fs->strict_head && !fs->strict_stop) {
			if (!again) {
				pthread_cond_wait(&fs->strict_wake,
						  &fs->strict_lock);
			} else {
				struct timespec ts;

				clock_gettime(CLOCK_REALTIME, &ts);
				ts.tv_nsec += STRICT_AGAIN_MS * 1000000L;
				if (ts.tv_nsec >= 1000000000L) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000L;
				}
				pthread_cond_timedwait(&fs->strict_wake,
						       &fs->strict_lock, &ts);
			}
		}
		bool work = fs->strict_head || again;

		pthread_mutex_unlock(&fs->strict_lock);
		/* The ones written again go with the new ones. */
		if (work)
			strict_pass(fs, &again);
		pthread_mutex_lock(&fs->strict_lock);
		if (fs->strict_stop && !fs->strict_head && !again)
			break;
	}
	pthread_mutex_unlock(&fs->strict_lock);
	return NULL;
}

/* See fs_int.h. */
void fs_sync_async(struct fs *fs, uint64_t ino, fs_done_fn done, void *arg)
{
	struct strict_req *r = calloc(1, sizeof(*r));

	if (!r) {
		done(arg, -ENOMEM);
		return;
	}
	r->ino = ino;
	r->done = done;
	r->arg = arg;
	pthread_mutex_lock(&fs->strict_lock);
	r->next = fs->strict_head;
	fs->strict_head = r;
	pthread_cond_signal(&fs->strict_wake);
	pthread_mutex_unlock(&fs->strict_lock);
}

/* See fs_int.h. */
int fs_sync_inode(struct fs *fs, uint64_t ino)
{
	struct waiter w;

	waiter_init(&w);
	fs_sync_async(fs, ino, waiter_done, &w);
	return waiter_wait(&w);
}

/* See fs_int.h. */
int fs_strict_start(struct fs *fs)
{
	int rc;

	pthread_mutex_init(&fs->strict_lock, NULL);
	pthread_cond_init(&fs->strict_wake, NULL);
	fs->nstrict = 0;
	for (int i = 0; i < FS_STRICT_THREADS; i++) {
		rc = -pthread_create(&fs->strict_threads[i], NULL, strict_main,
				     fs);
		if (rc)
			break;
		pthread_setname_np(fs->strict_threads[i], "fs-strict");
		fs->nstrict++;
	}
	if (!fs->nstrict) {
		pthread_cond_destroy(&fs->strict_wake);
		pthread_mutex_destroy(&fs->strict_lock);
		return rc;
	}
	fs->strict_started = true;
	return 0;
}

/* See fs_int.h. */
void fs_strict_stop(struct fs *fs)
{
	if (!fs->strict_started)
		return;
	pthread_mutex_lock(&fs->strict_lock);
	fs->strict_stop = true;
	pthread_cond_broadcast(&fs->strict_wake);
	pthread_mutex_unlock(&fs->strict_lock);
	for (int i = 0; i < fs->nstrict; i++)
		pthread_join(fs->strict_threads[i], NULL);
	pthread_cond_destroy(&fs->strict_wake);
	pthread_mutex_destroy(&fs->strict_lock);
	fs->strict_started = false;
}
