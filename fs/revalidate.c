/*
 * fs/revalidate.c - a directory's entries against a store listing.
 *
 * The listing (every page of prefix "dir/" with delimiter '/') runs on a
 * worker thread, never on the caller's loop; one transaction then merges
 * it (reval_merge.c says how).
 *
 * A directory never listed before is merged page by page instead, one
 * transaction a page, while a thread of the listing fetches the pages
 * ahead: READDIR answers from the pages merged (eof held back until the
 * end, listing.c), and the last transaction only removes what vanished.
 *
 * Stale if error: while the store does not answer, a directory listed
 * before (however long ago) is answered from what the namespace holds,
 * and counted (mapfs_stale_answers_total); only one never listed waits
 * (-EAGAIN, the client's JUKEBOX).  The syncer's probe notices the store
 * is back, and the next access lists again.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "common/log.h"
#include "db/db.h"
#include "metrics/metrics.h"
#include "fs_int.h"
#include "reval_int.h"

/* Pages a first listing fetches ahead of its merge. */
#define REVAL_PAGES_AHEAD 4

/* Every page of the listing into op->items (a directory listed before). */
static int reval_list(struct reval_op *op)
{
	struct store_page page;
	char *token = NULL;
	int rc;

	do {
		rc = store_list(op->fs->store, op->prefix, '/', token, 0,
				&page);
		free(token);
		token = NULL;
		if (rc)
			return rc;
		rc = reval_page_items(op, &page);
		if (!rc && page.next_token &&
		    !(token = strdup(page.next_token)))
			rc = -ENOMEM;
		store_page_free(&page);
	} while (!rc && token);
	return rc;
}

/*
 * A first listing's pages, fetched ahead of the merge by a thread of
 * their own (at most REVAL_PAGES_AHEAD waiting).
 */
struct ahead {
	struct reval_op *op;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct store_page q[REVAL_PAGES_AHEAD];
	size_t head, n;
	bool end, stop; /* end: no more pages (err says why); stop: merge
			 * gave up, fetch no more */
	int err;
};

static void *ahead_main(void *p)
{
	struct ahead *a = p;
	struct store_page page;
	char *token = NULL;
	int rc;

	do {
		rc = store_list(a->op->fs->store, a->op->prefix, '/', token, 0,
				&page);
		free(token);
		token = NULL;
		if (rc)
			break;
		if (page.next_token && !(token = strdup(page.next_token)))
			rc = -ENOMEM;
		pthread_mutex_lock(&a->lock);
		while (a->n == REVAL_PAGES_AHEAD && !a->stop)
			pthread_cond_wait(&a->cond, &a->lock);
		if (a->stop) {
			pthread_mutex_unlock(&a->lock);
			store_page_free(&page);
			break;
		}
		a->q[(a->head + a->n++) % REVAL_PAGES_AHEAD] = page;
		pthread_cond_broadcast(&a->cond);
		pthread_mutex_unlock(&a->lock);
	} while (!rc && token);
	free(token);
	pthread_mutex_lock(&a->lock);
	a->end = true;
	a->err = rc;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

/* The next page: 1, 0 at the end, or the fetch's -errno. */
static int ahead_next(struct ahead *a, struct store_page *page)
{
	int rc = 1;

	pthread_mutex_lock(&a->lock);
	while (!a->n && !a->end)
		pthread_cond_wait(&a->cond, &a->lock);
	if (a->n) {
		*page = a->q[a->head];
		a->head = (a->head + 1) % REVAL_PAGES_AHEAD;
		a->n--;
		pthread_cond_broadcast(&a->cond);
	} else {
		rc = a->err;
	}
	pthread_mutex_unlock(&a->lock);
	return rc;
}

/*
 * Could the prefix "name/" still come, on a page after one whose greatest
 * key (without the listing's prefix) is last?  Pages come in key order:
 * only if "name/" sorts after last.
 */
static bool prefix_may_follow(const char *name, const char *last)
{
	size_t n = strlen(name);
	int c = strncmp(name, last, n);

	return c ? c > 0 : (unsigned char)last[n] < '/';
}

/*
 * Before a merge commits: drop the cached data of the clean files whose
 * listed version is not the one their record knows.  The merge drops
 * them too, once committed; but between its commit and that drop a READ
 * served the old bytes while GETATTR already said the new size (seen
 * in CI: an object replaced by another client, read at once).  Dropped
 * first, a READ in between misses, and the fetch, pinned to the old
 * version the store no longer has, waits for the merge (-ESTALE, read
 * again).  Dropping a clean file's cache is always safe: the store has
 * its data.
 */
static void predrop(struct reval_op *op, size_t from, size_t to)
{
	struct fs *fs = op->fs;
	struct db_txn *txn;

	if (db_read_begin(fs->db, &txn))
		return;
	for (size_t i = from; i < to; i++) {
		const struct reval_item *it = &op->items[i];
		struct fs_inode in;
		uint64_t ino;

		if (it->is_dir ||
		    fs_dirent_get(fs, txn, op->dir, it->name, &ino, NULL) ||
		    fs_inode_get(fs, txn, ino, &in) || in.type != FS_REG ||
		    (in.flags & FS_F_DIRTY) ||
		    (in.size == it->size && !strcmp(in.etag, it->etag)))
			continue;
		cache_drop(fs->cache, ino);
	}
	db_read_end(fs->db, txn);
}

/*
 * Merge the items from from on (one page, and what the last one held
 * back): HEADs, one transaction, its cache drops, then READDIRs waiting
 * for these entries go on.  With more pages to come (last: the page's
 * greatest key), a file whose name's prefix may still come waits for
 * the next page, where the directory of that name would win (items_sort):
 * no client sees a name change from file to directory in one walk.
 * *merged: where the items held back begin.
 */
static int merge_page(struct reval_op *op, size_t from, const char *last,
		      size_t *merged)
{
	struct fs *fs = op->fs;
	size_t pl = strlen(op->prefix), to = from;
	int rc;

	reval_items_sort(op, from);
	/* Held back to the end of the array, in order (a stable split). */
	for (size_t i = from, held = 0; i < op->nitems; i++) {
		struct reval_item it = op->items[i];

		if (last && strlen(last) >= pl && !it.is_dir &&
		    prefix_may_follow(it.name, last + pl)) {
			held++;
			continue;
		}
		memmove(&op->items[to + 1], &op->items[to], held * sizeof(it));
		op->items[to++] = it;
	}
	*merged = to;
	rc = reval_head_new(op, from, to);
	if (rc)
		return rc;
	op->page_from = from;
	op->page_to = to;
	predrop(op, from, to);
	rc = db_write(fs->db, reval_apply_page, op);
	if (rc == -EAGAIN && db_clustered(fs->db)) {
		op->missed = true; /* the last transaction merges it all */
		return 0;
	}
	if (rc)
		return rc;
	for (size_t i = 0; i < op->ndrop; i++)
		cache_drop(fs->cache, op->drop[i]);
	for (size_t i = from; i < to; i++) {
		free(op->items[i].info);
		free(op->items[i].target);
		op->items[i].info = NULL;
		op->items[i].target = NULL;
	}
	fs_listing_progress(fs, op->dir, op->next_cookie);
	return 0;
}

/* The greatest key of a page (NULL: an empty one). */
static const char *page_last(const struct store_page *page)
{
	const char *e = page->nentries ? page->entries[page->nentries - 1].key
				       : NULL,
		   *p = page->nprefixes ? page->prefixes[page->nprefixes - 1]
					: NULL;

	return !e ? p : !p ? e : strcmp(e, p) > 0 ? e : p;
}

/* A first listing: pages merged as they come, fetched ahead. */
static int reval_pages(struct reval_op *op)
{
	struct ahead a = { .op = op };
	struct store_page page;
	size_t from = 0; /* the first item not merged yet */
	pthread_t t;
	int rc;

	pthread_mutex_init(&a.lock, NULL);
	pthread_cond_init(&a.cond, NULL);
	rc = -pthread_create(&t, NULL, ahead_main, &a);
	if (rc) {
		rc = reval_list(op); /* no thread: one page after another */
		if (!rc)
			rc = merge_page(op, 0, NULL, &from);
	} else {
		while ((rc = ahead_next(&a, &page)) == 1) {
			char *last = NULL;

			rc = reval_page_items(op, &page);
			if (!rc && page.next_token && page_last(&page) &&
			    !(last = strdup(page_last(&page))))
				rc = -ENOMEM;
			store_page_free(&page);
			if (!rc)
				rc = merge_page(op, from, last, &from);
			free(last);
			if (rc)
				break;
		}
		pthread_mutex_lock(&a.lock);
		a.stop = true;
		pthread_cond_broadcast(&a.cond);
		pthread_mutex_unlock(&a.lock);
		pthread_join(t, NULL);
		for (; a.n; a.n--, a.head = (a.head + 1) % REVAL_PAGES_AHEAD)
			store_page_free(&a.q[a.head]);
	}
	pthread_cond_destroy(&a.cond);
	pthread_mutex_destroy(&a.lock);
	return rc;
}

/*
 * Event listings (fs_store_key_changed) are coalesced per directory: a
 * directory has at most one queued that has not started, since that one
 * will see every change made before it lists.  A slot is freed when its
 * listing starts (reval_job) or ends without one (relist_done).
 */
struct relist_arg {
	struct fs *fs;
	uint64_t dir;
};

static void relist_release(struct fs *fs, uint64_t dir)
{
	pthread_mutex_lock(&fs->relist_lock);
	for (size_t i = 0; i < FS_RELIST_SLOTS; i++)
		if (fs->relist[i] == dir)
			fs->relist[i] = 0;
	pthread_mutex_unlock(&fs->relist_lock);
}

/* 1: dir's slot taken; 0: a listing of dir is queued already; -1: full. */
static int relist_take(struct fs *fs, uint64_t dir)
{
	size_t i, free_at = FS_RELIST_SLOTS;
	int rc = -1;

	pthread_mutex_lock(&fs->relist_lock);
	for (i = 0; i < FS_RELIST_SLOTS && fs->relist[i] != dir; i++)
		if (!fs->relist[i] && free_at == FS_RELIST_SLOTS)
			free_at = i;
	if (i < FS_RELIST_SLOTS) {
		rc = 0;
	} else if (free_at < FS_RELIST_SLOTS) {
		fs->relist[free_at] = dir;
		rc = 1;
	}
	pthread_mutex_unlock(&fs->relist_lock);
	return rc;
}

static void relist_done(void *arg, int err)
{
	struct relist_arg *a = arg;

	(void)err;
	relist_release(a->fs, a->dir);
	free(a);
}

static void reval_job(struct fs *fs, void *p)
{
	struct reval_op *op = p;
	struct fs_inode dir;
	struct db_txn *txn;
	int64_t t[3]; /* listing, HEADs, merge: when each began */
	int rc;

	/* From here on an event's change is seen: the next may queue. */
	if (op->done == relist_done)
		relist_release(fs, op->dir);
	rc = db_read_begin(fs->db, &txn);
	if (rc) {
		reval_free(op, rc);
		return;
	}
	rc = fs_inode_get(fs, txn, op->dir, &dir);
	if (!rc)
		rc = fs_obj_key(fs, txn, &dir, op->prefix, sizeof(op->prefix));
	db_read_end(fs->db, txn);
	if (!rc && op->dir == FS_ROOT_INO)
		op->prefix[0] = '\0';
	/* Fresh meanwhile (a concurrent revalidation): nothing to do. */
	if (!rc && !op->force &&
	    dir.listed_at_ms + fs->opts.dir_ttl_ms > fs_now_ms()) {
		reval_free(op, 0);
		return;
	}
	op->list_start_ms = fs_now_ms();
	t[0] = fs_now_ns();
	if (!rc) {
		op->listed = dir.listed_at_ms != 0;
		op->progressive = op->progressive && !op->listed;
		rc = op->progressive ? reval_pages(op) : reval_list(op);
	}
	t[1] = fs_now_ns();
	/* Sorted for item_find, unless merged page by page into a
	 * directory that had no entry before (nothing can have vanished). */
	if (!rc && (!op->progressive || op->missed ||
		    op->old_cookies != FS_COOKIE_FIRST))
		reval_items_sort(op, 0);
	if (!rc) {
		if (!op->progressive)
			rc = reval_head_new(op, 0, op->nitems);
	}
	t[2] = fs_now_ns();
	/* The store did not answer: what the namespace holds will do. */
	if (rc == -EAGAIN && op->listed) {
		metrics_inc(MET_STALE_ANSWERS);
		log_debug("fs: %s answered from its last listing (store down)",
			  op->prefix);
		reval_free(op, 0);
		return;
	}
	if (!rc) {
		predrop(op, 0, op->nitems);
		rc = db_write(fs->db, reval_apply, op);
		/*
		 * In a cluster the replica has every gateway's entries; a
		 * listing only adds what other S3 writers did.  One that lost
		 * its commit to a storm of changes in the directory (or to
		 * the database being away) is tried at the next access, and
		 * the caller goes on with what the replica has.
		 */
		if (rc == -EAGAIN && db_clustered(fs->db)) {
			log_debug("fs: listing of %s not merged now (busy)",
				  op->prefix);
			op->ndrop = 0;
			rc = 0;
		}
	}
	for (size_t i = 0; !rc && i < op->ndrop; i++)
		cache_drop(fs->cache, op->drop[i]);
	log_debug("fs: listed \"%s\": %zu names in %.1f ms (pages %.1f, "
		  "%zu HEADs %.1f, merge %.1f): %s",
		  op->prefix, op->nitems, (fs_now_ns() - t[0]) / 1e6,
		  (t[1] - t[0]) / 1e6, op->nheads, (t[2] - t[1]) / 1e6,
		  (fs_now_ns() - t[2]) / 1e6, rc ? strerror(-rc) : "ok");
	reval_free(op, rc);
}

/*
 * fs_revalidate() and fs_revalidate_walk(): after is FS_WAIT_DONE, or
 * the cookie a walk goes on from.  Not forced, a caller joins a listing
 * of dir in progress; a first one is merged page by page.
 */
static void revalidate(struct fs *fs, uint64_t dir, bool force, uint64_t after,
		       fs_done_fn done, void *arg)
{
	struct fs_inode in;
	struct reval_op *op;
	struct db_txn *txn;
	int rc;

	rc = db_read_begin(fs->db, &txn);
	if (rc) {
		done(arg, rc);
		return;
	}
	rc = fs_inode_get(fs, txn, dir, &in);
	db_read_end(fs->db, txn);
	if (!rc && in.type != FS_DIR)
		rc = -ENOTDIR;
	if (rc || (!force && fs_listing_fresh(fs, &in))) {
		done(arg, rc);
		return;
	}
	/* Known down: no listing to wait for (see the top of the file). */
	if (store_down(fs->store)) {
		if (in.listed_at_ms)
			metrics_inc(MET_STALE_ANSWERS);
		done(arg, in.listed_at_ms ? 0 : -EAGAIN);
		return;
	}
	if (!force) {
		rc = fs_listing_start(fs, dir, !in.listed_at_ms, after, done,
				      arg);
		if (rc != 1) {
			if (rc)
				done(arg, rc == 2 ? 0 : rc);
			return; /* joined: done runs at its end */
		}
	}
	op = calloc(1, sizeof(*op));
	if (!op) {
		if (!force)
			fs_listing_end(fs, dir, -ENOMEM);
		else
			done(arg, -ENOMEM);
		return;
	}
	op->fs = fs;
	op->dir = dir;
	op->force = force;
	op->registered = !force;
	op->progressive = !force && !in.listed_at_ms;
	op->done = done;
	op->arg = arg;
	fs_defer(fs, reval_job, op);
}

void fs_revalidate(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
		   bool force, fs_done_fn done, void *arg)
{
	(void)ctx;
	revalidate(fs, dir, force, FS_WAIT_DONE, done, arg);
}

/* See fs.h. */
void fs_revalidate_walk(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
			uint64_t cookie, fs_done_fn done, void *arg)
{
	(void)ctx;
	revalidate(fs, dir, false,
		   cookie < FS_COOKIE_FIRST ? FS_COOKIE_FIRST - 1 : cookie,
		   done, arg);
}

/* A LOOKUP's wait for one name of a directory being listed. */
struct name_wait {
	struct fs *fs;
	uint64_t dir;
	fs_done_fn done;
	void *arg;
	char name[FS_NAME_MAX + 1];
};

static bool name_merged(struct fs *fs, uint64_t dir, const char *name)
{
	struct db_txn *txn;
	uint64_t ino;
	bool in;

	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return true;
	if (db_read_begin(fs->db, &txn))
		return false;
	in = fs_dirent_get(fs, txn, dir, name, &ino, NULL) == 0;
	db_read_end(fs->db, txn);
	return in;
}

/*
 * After each page of a first listing: the name is in (a page merged
 * holds no file whose name a later page could make a directory), or it
 * waits for the next page.  Any other listing, an error or the end:
 * done.  A page merged between the look and the join costs one page.
 */
static void name_wait_cb(void *p, int err)
{
	struct name_wait *w = p;

	if (!err && fs_listing_progressive(w->fs, w->dir, NULL) &&
	    !name_merged(w->fs, w->dir, w->name) &&
	    fs_listing_join(w->fs, w->dir, FS_WAIT_NEXT, name_wait_cb, w) == 0)
		return;
	w->done(w->arg, err);
	free(w);
}

/* See fs.h. */
void fs_revalidate_name(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
			const char *name, fs_done_fn done, void *arg)
{
	struct name_wait *w;

	/* Merged already by a listing this LOOKUP need not wait for. */
	if (fs_listing_progressive(fs, dir, NULL) &&
	    name_merged(fs, dir, name)) {
		done(arg, 0);
		return;
	}
	w = malloc(sizeof(*w));
	if (!w || strlen(name) > FS_NAME_MAX) {
		free(w);
		fs_revalidate(fs, ctx, dir, false, done, arg);
		return;
	}
	*w = (struct name_wait){ fs, dir, done, arg, "" };
	strcpy(w->name, name);
	revalidate(fs, dir, false, FS_WAIT_NEXT, name_wait_cb, w);
}

/* See fs.h. */
int fs_readdir_wait(struct fs *fs, uint64_t dir, fs_done_fn done, void *arg)
{
	return fs_listing_join(fs, dir, FS_WAIT_NEXT, done, arg);
}

/* See fs.h. */
int fs_revalidate_attr(struct fs *fs, const struct fs_ctx *ctx, uint64_t ino,
		       fs_done_fn done, void *arg)
{
	uint32_t ttl = fs->opts.attr_ttl_ms ? fs->opts.attr_ttl_ms
					    : fs->opts.dir_ttl_ms;
	struct fs_inode in, parent;
	struct db_txn *txn;
	bool stale = false;
	uint64_t since;
	int rc;

	rc = db_read_begin(fs->db, &txn);
	if (rc)
		return rc;
	rc = fs_inode_get(fs, txn, ino, &in);
	if (!rc && ino != FS_ROOT_INO && !(in.flags & FS_F_DIRTY) &&
	    (in.flags & FS_F_IN_STORE) &&
	    fs_inode_get(fs, txn, in.parent, &parent) == 0)
		stale = !ttl || parent.listed_at_ms + ttl <= fs_now_coarse_ms();
	db_read_end(fs->db, txn);
	if (rc || !stale)
		return rc;
	/*
	 * The parent's first listing is merging: what it imported is as
	 * fresh as can be, the rest waits for its end (a new listing of
	 * the whole directory per GETATTR would never end).
	 */
	if (fs_listing_progressive(fs, in.parent, &since)) {
		if (in.synced_ms >= since)
			return 0;
		rc = fs_listing_join(fs, in.parent, FS_WAIT_DONE, done, arg);
		if (rc == 0)
			return 1;
	}
	/* Forced: the attribute TTL may be shorter than the listing's. */
	fs_revalidate(fs, ctx, in.parent, true, done, arg);
	return 1;
}

/* See fs_int.h. */
void fs_done_nothing(void *arg, int err)
{
	(void)arg;
	(void)err;
}

/* See fs_int.h. */
void fs_store_changed(struct fs *fs, uint64_t ino)
{
	struct fs_inode in;
	struct db_txn *txn;
	int rc = db_read_begin(fs->db, &txn);

	if (rc)
		return;
	rc = fs_inode_get(fs, txn, ino, &in);
	db_read_end(fs->db, txn);
	if (!rc && ino != FS_ROOT_INO)
		fs_revalidate(fs, NULL, in.parent, true, fs_done_nothing, NULL);
}

/* See fs.h. */
void fs_store_key_changed(struct fs *fs, const char *key)
{
	struct relist_arg *a;
	char name[FS_NAME_MAX + 1];
	uint64_t dir = FS_ROOT_INO, ino;
	const char *p = key, *e;
	struct fs_inode in;
	struct db_txn *txn;

	if (db_read_begin(fs->db, &txn))
		return;
	/* Down the key's directories (a "d/" marker's is its parent). */
	while ((e = strchr(p, '/')) && e[1]) {
		size_t n = (size_t)(e - p);

		if (!n || n > FS_NAME_MAX)
			break;
		memcpy(name, p, n);
		name[n] = '\0';
		if (fs_dirent_get(fs, txn, dir, name, &ino, NULL) ||
		    fs_inode_get(fs, txn, ino, &in) || in.type != FS_DIR)
			break;
		dir = ino;
		p = e + 1;
	}
	db_read_end(fs->db, txn);
	switch (relist_take(fs, dir)) {
	case 0:
		return; /* one is queued: it lists after this change */
	case 1:
		a = malloc(sizeof(*a));
		if (a) {
			*a = (struct relist_arg){ fs, dir };
			fs_revalidate(fs, NULL, dir, true, relist_done, a);
			return;
		}
		relist_release(fs, dir);
		break;
	}
	fs_revalidate(fs, NULL, dir, true, fs_done_nothing, NULL);
}
