/*
 * fs/revalidate.c - a directory's entries against a store listing.
 *
 * The listing (every page of prefix "dir/" with delimiter '/') runs on a
 * worker thread, never on the caller's loop; one transaction then merges
 * it: unknown objects and prefixes become inodes, clean entries whose
 * object vanished are removed, clean files whose object changed get its
 * size and etag (and lose their cache file).  Entries with local changes,
 * not yet in the store, mid-rename, or stored after the listing began are
 * kept: the listing cannot know them yet.
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

/* HEADs of new files at once (as many as uploads of small files). */
#define REVAL_HEADS_PARALLEL FS_PARALLEL_MAX
/* Pages a first listing fetches ahead of its merge. */
#define REVAL_PAGES_AHEAD 4

struct reval_item {
	char *name;
	bool is_dir;
	bool seen;    /* an entry of this name exists (set by the merge) */
	size_t order; /* position in the listing, for a stable sort */
	uint64_t size;
	char etag[STORE_ETAG_MAX];
	int64_t last_modified_ns;
	/* What its HEAD said (NULL: no HEAD, or it failed); a pointer, so
	 * that a listing of 100,000 names keeps 100,000 small items. */
	struct store_info *info;
	char *target; /* symlinks */
};

struct reval_op {
	struct fs *fs;
	uint64_t dir;
	bool force;
	bool listed;      /* listed before: a store error is answered stale */
	bool registered;  /* in listing.c: fs_listing_end at the end */
	bool progressive; /* merged page by page (a first listing) */
	bool missed;      /* a page's merge lost to a busy cluster */
	size_t page_from, page_to; /* the page being merged: these items */
	uint64_t next_cookie;      /* dir's, after the page's merge */
	uint64_t old_cookies;      /* dir's next cookie before the first page:
			       * only entries below it can have vanished */
	char prefix[STORE_KEY_MAX + 2];
	uint64_t list_start_ms;
	bool marker_seen;
	struct reval_item *items;
	size_t nitems, cap;
	size_t *heads; /* items to HEAD (reval_head_new) */
	size_t nheads;
	uint64_t *drop; /* inodes whose cache file goes after the commit */
	size_t ndrop, dropcap;
	fs_done_fn done;
	void *arg;
};

/*
 * A listed key no file name can stand for: skipped, never truncated or
 * decoded into another name that could shadow a real one; one line and a
 * count each time a listing meets it.
 */
static void item_skip(const char *key, const char *why)
{
	metrics_inc(MET_KEYS_SKIPPED);
	log_warn("fs: object key \"%s\" skipped: %s", key, why);
}

static int item_add(struct reval_op *op, const char *key, bool is_dir,
		    const struct store_entry *e)
{
	size_t pl = strlen(op->prefix), kl = strlen(key);

	if (kl < pl || memcmp(key, op->prefix, pl))
		return 0;
	if (kl == pl) {
		op->marker_seen = true; /* the "dir/" marker of dir itself */
		return 0;
	}
	size_t nl = kl - pl - is_dir;

	if (nl == 0) {
		item_skip(key, "an empty name (\"//\")");
		return 0;
	}
	if (nl > FS_NAME_MAX || kl > STORE_KEY_MAX) {
		item_skip(key, "a name or key too long");
		return 0;
	}
	if (op->nitems == op->cap) {
		size_t cap = op->cap ? op->cap * 2 : 64;
		struct reval_item *n = realloc(op->items, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		op->items = n;
		op->cap = cap;
	}
	struct reval_item *it = &op->items[op->nitems];

	memset(it, 0, sizeof(*it));
	it->name = strndup(key + pl, nl);
	if (!it->name)
		return -ENOMEM;
	if (fs_name_creatable(op->dir, it->name)) {
		item_skip(key, store_key_reserved(it->name)
				       ? "the store's own"
				       : "\".\" or \"..\"");
		free(it->name);
		return 0;
	}
	it->is_dir = is_dir;
	it->order = op->nitems;
	if (e) {
		it->size = e->size;
		memcpy(it->etag, e->etag, sizeof(it->etag));
		it->etag[STORE_ETAG_MAX - 1] = '\0';
		it->last_modified_ns = e->last_modified_ns;
	}
	op->nitems++;
	return 0;
}

/* A page's names into op->items. */
static int page_items(struct reval_op *op, const struct store_page *page)
{
	int rc = 0;

	/* Prefixes first: where a file and a prefix share a name, the
	 * directory wins (it has more below it). */
	for (size_t i = 0; !rc && i < page->nprefixes; i++)
		rc = item_add(op, page->prefixes[i], true, NULL);
	for (size_t i = 0; !rc && i < page->nentries; i++)
		rc = item_add(op, page->entries[i].key, false,
			      &page->entries[i]);
	return rc;
}

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
		rc = page_items(op, &page);
		if (!rc && page.next_token &&
		    !(token = strdup(page.next_token)))
			rc = -ENOMEM;
		store_page_free(&page);
	} while (!rc && token);
	return rc;
}

/* HEAD new file op->items[op->heads[j]]: its owner, mode, mtime, and a
 * symlink's target.  Touches that item only (fs_each_parallel). */
static void head_one(void *p, size_t j)
{
	struct reval_op *op = p;
	struct fs *fs = op->fs;
	struct reval_item *it = &op->items[op->heads[j]];
	char key[STORE_KEY_MAX + FS_NAME_MAX + 2];
	struct store_info *info = malloc(sizeof(*info));
	size_t got;

	snprintf(key, sizeof(key), "%s%s", op->prefix, it->name);
	if (!info || store_head(fs->store, key, info)) {
		free(info);
		return; /* gone again, or unreadable: listing values */
	}
	it->info = info;
	if (!info->meta.symlink || info->size > FS_PATH_MAX)
		return;
	it->target = calloc(1, info->size + 1);
	if (!it->target ||
	    store_get(fs->store, key, 0, info->size, it->target, &got) ||
	    got == 0 || strlen(it->target) != got) {
		free(it->target);
		it->target = NULL;
	}
}

/*
 * HEAD the files nobody knows yet, many at once: a directory of objects
 * no gateway listed before (another writer's, or a new gateway's first
 * look) costs one HEAD per object, and one at a time that was most of
 * its listing's time.  With --listing-attrs none: the listing's size and
 * mtime are all such files get (reval_import).
 */
static int reval_head_new(struct reval_op *op, size_t from, size_t to)
{
	struct fs *fs = op->fs;
	char key[STORE_KEY_MAX + FS_NAME_MAX + 2];
	struct db_txn *txn;
	size_t n = 0;
	uint64_t ino;
	int rc;

	if (from == to || fs->opts.listing_attrs)
		return 0;
	free(op->heads);
	op->heads = malloc((to - from) * sizeof(*op->heads));
	if (!op->heads)
		return -ENOMEM;
	rc = db_read_begin(fs->db, &txn);
	if (rc)
		return rc;
	for (size_t i = from; i < to; i++) {
		struct reval_item *it = &op->items[i];

		if (it->is_dir ||
		    !fs_dirent_get(fs, txn, op->dir, it->name, &ino, NULL))
			continue;
		snprintf(key, sizeof(key), "%s%s", op->prefix, it->name);
		if (!fs_keys_get(fs, txn, key, &ino))
			continue;
		op->heads[n++] = i;
	}
	db_read_end(fs->db, txn);
	fs_each_parallel(n, REVAL_HEADS_PARALLEL, head_one, op);
	op->nheads += n;
	return 0;
}

static int reval_import(struct reval_op *op, struct db_txn *txn,
			struct fs_inode *dir, struct reval_item *it,
			const char *key)
{
	struct fs *fs = op->fs;
	struct fs_inode in;
	int rc;

	memset(&in, 0, sizeof(in));
	in.ino = fs_ino_alloc(fs);
	if (!in.ino)
		return -EAGAIN;
	in.gen = FS_GEN;
	in.parent = dir->ino;
	strcpy(in.name, it->name);
	in.uid = fs->opts.default_uid;
	in.gid = fs->opts.default_gid;
	in.flags = FS_F_IN_STORE;
	in.synced_ms = op->list_start_ms;
	in.nlink = 1;
	in.atime = in.mtime = in.ctime = fs_now_ns();
	if (it->is_dir) {
		in.type = FS_DIR;
		in.mode = 0755;
		in.nlink = 2;
		in.next_cookie = FS_COOKIE_FIRST;
		in.dir_ver = 1;
		dir->nlink++;
	} else {
		const struct store_meta *m = it->info ? &it->info->meta : NULL;
		uint64_t ino;

		/* Another name of a file met before (hard links, links.c). */
		if (m && !it->target &&
		    (rc = fs_linkid_join(fs, txn, dir, it->name, key, it->size,
					 it->etag, m->link, op->list_start_ms,
					 &ino)) != -ENOENT)
			return rc;
		in.type = it->target ? FS_LNK : FS_REG;
		in.mode = it->target ? 0777 : 0644;
		in.size = it->size;
		memcpy(in.etag, it->etag, sizeof(in.etag));
		in.mtime = it->last_modified_ns;
		if (m) {
			uint32_t special =
				m->has_mode && !it->target && !it->size
					? fs_special_type(m->mode)
					: 0;

			if (special) {
				in.type = special;
				if (m->has_rdev)
					fs_rdev_from_dev(&in, m->rdev);
			}
			if (m->has_mode)
				in.mode = m->mode & 07777;
			if (m->has_uid)
				in.uid = m->uid;
			if (m->has_gid)
				in.gid = m->gid;
			if (m->has_mtime)
				in.mtime = m->mtime_ns;
		}
		if (it->target)
			strcpy(in.target, it->target);
	}
	if ((rc = fs_dirent_add(fs, txn, dir, it->name, in.ino)) ||
	    (rc = fs_inode_put(fs, txn, &in)) ||
	    (rc = fs_keys_put(fs, txn, key, in.ino)) ||
	    (in.type == FS_REG && it->info &&
	     (rc = fs_linkid_note(fs, txn, it->info->meta.link, in.ino))))
		return rc;
	return fs_meta_note_ino(fs, txn, in.ino);
}

static int drop_add(struct reval_op *op, uint64_t ino)
{
	if (op->ndrop == op->dropcap) {
		size_t cap = op->dropcap ? op->dropcap * 2 : 16;
		uint64_t *n = realloc(op->drop, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		op->drop = n;
		op->dropcap = cap;
	}
	op->drop[op->ndrop++] = ino;
	return 0;
}

/*
 * Is the object at key, child's entry name in dir, the one the namespace
 * made, clean and older than the listing?  For another name of a file
 * (a hard link) its link record says: *l gets it (l->ino 0: the first).
 */
static bool store_confirmed(struct reval_op *op, struct db_txn *txn,
			    const struct fs_inode *child, uint64_t dir,
			    const char *name, const char *key,
			    struct fs_link *l)
{
	bool in_store = child->flags & FS_F_IN_STORE;
	uint64_t owner, synced = child->synced_ms;

	l->ino = 0;
	if (child->type != FS_DIR && !fs_name_is_first(child, dir, name)) {
		if (fs_link_get(op->fs, txn, child->ino, dir, name, l))
			return false;
		in_store = l->flags & FS_LINK_IN_STORE;
		synced = l->synced_ms;
	}
	return !(child->flags & FS_F_DIRTY) && in_store &&
	       synced < op->list_start_ms &&
	       !fs_keys_get(op->fs, txn, key, &owner) && owner == child->ino;
}

static int reval_import(struct reval_op *op, struct db_txn *txn,
			struct fs_inode *dir, struct reval_item *it,
			const char *key);

/* A known entry that is in the listing: pick up a changed object. */
static int reval_known(struct reval_op *op, struct db_txn *txn,
		       struct fs_inode *dir, struct reval_item *it,
		       uint64_t ino, const char *key)
{
	struct fs_inode in;
	struct fs_link l;
	int rc = fs_inode_get(op->fs, txn, ino, &in);

	if (rc || it->is_dir || in.type != FS_REG ||
	    !store_confirmed(op, txn, &in, dir->ino, it->name, key, &l))
		return rc;
	if (l.ino ? !strcmp(l.etag, it->etag)
		  : in.size == it->size && !strcmp(in.etag, it->etag))
		return 0;
	/* One name of several changed: it splits off, a file of its own;
	 * the others keep the file as it was. */
	if (in.nlink > 1) {
		rc = fs_name_drop(op->fs, txn, dir, &in, it->name, false);
		return rc ? rc : reval_import(op, txn, dir, it, key);
	}
	in.size = it->size;
	memcpy(in.etag, it->etag, sizeof(in.etag));
	in.mtime = it->last_modified_ns;
	in.ctime = fs_now_ns();
	rc = fs_inode_put(op->fs, txn, &in);
	return rc ? rc : drop_add(op, in.ino);
}

static int item_cmp(const void *a, const void *b)
{
	return strcmp(((const struct reval_item *)a)->name,
		      ((const struct reval_item *)b)->name);
}

static int item_order(const void *a, const void *b)
{
	const struct reval_item *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (!c)
		c = (int)y->is_dir - (int)x->is_dir;
	return c ? c : (x->order > y->order) - (x->order < y->order);
}

/* The listed item of this name (items are sorted by name), or NULL. */
static struct reval_item *item_find(const struct reval_op *op, const char *name)
{
	struct reval_item k = { .name = (char *)name };

	if (!op->nitems)
		return NULL; /* bsearch() must not see a NULL array */
	return bsearch(&k, op->items, op->nitems, sizeof(k), item_cmp);
}

/*
 * Sort the items from from on by name; of duplicates (a file and a
 * prefix of one name) keep the prefix: the directory wins, it has more
 * below it.
 */
static void items_sort(struct reval_op *op, size_t from)
{
	size_t out = from;

	if (from == op->nitems)
		return; /* qsort() must not see a NULL array */
	qsort(op->items + from, op->nitems - from, sizeof(*op->items),
	      item_order);
	for (size_t i = from; i < op->nitems; i++) {
		if (out > from &&
		    !strcmp(op->items[out - 1].name, op->items[i].name)) {
			free(op->items[i].name);
			free(op->items[i].info);
			free(op->items[i].target);
			continue;
		}
		op->items[out++] = op->items[i];
	}
	op->nitems = out;
}

/* Known entries that the listing lacks: deleted out of band. */
static int reval_vanished(struct reval_op *op, struct db_txn *txn,
			  struct fs_inode *dir)
{
	struct fs *fs = op->fs;
	char key[STORE_KEY_MAX + 2];
	uint64_t cookie = 2;
	int rc = 0;

	for (;;) {
		struct fs_inode child;
		uint64_t ino = 0;
		char name[FS_NAME_MAX + 1];

		rc = fs_dir_next(fs, txn, dir->ino, &cookie, &ino, name);
		if (rc == -ENOENT ||
		    (!rc && op->old_cookies && cookie >= op->old_cookies))
			return 0;
		if (rc)
			return rc;
		const struct reval_item *it = item_find(op, name);
		struct fs_link l;
		bool gone;

		if (it && it->seen)
			continue;
		if ((rc = fs_inode_get(fs, txn, ino, &child)) ||
		    (rc = fs_name_key(fs, txn, dir->ino, name,
				      child.type == FS_DIR, key, sizeof(key))))
			return rc;
		if (!store_confirmed(op, txn, &child, dir->ino, name, key, &l))
			continue;
		/* A directory goes only once nothing is known below it. */
		if (child.type == FS_DIR && fs_dir_empty(fs, txn, child.ino))
			continue;
		if ((rc = fs_unlink_name(fs, txn, dir, &child, name, false,
					 &gone)))
			return rc;
		if (gone && child.type == FS_REG &&
		    (rc = drop_add(op, child.ino)))
			return rc;
	}
}

/* Items [from, to) into dir: known ones checked, unknown ones imported. */
static int merge_items(struct reval_op *op, struct db_txn *txn,
		       struct fs_inode *dir, size_t from, size_t to)
{
	struct fs *fs = op->fs;
	char key[STORE_KEY_MAX + FS_NAME_MAX + 3];
	uint64_t ino, owner;
	int rc = 0;

	for (size_t i = from; !rc && i < to; i++) {
		struct reval_item *it = &op->items[i];

		snprintf(key, sizeof(key), "%s%s%s", op->prefix, it->name,
			 it->is_dir ? "/" : "");
		it->seen = false;
		rc = fs_dirent_get(fs, txn, dir->ino, it->name, &ino, NULL);
		if (rc == 0) {
			it->seen = true;
			rc = reval_known(op, txn, dir, it, ino, key);
		} else if (rc == -ENOENT) {
			rc = 0;
			/* Ours, on its way out (removed or renamed away). */
			if (!fs_keys_get(fs, txn, key, &owner))
				continue;
			rc = reval_import(op, txn, dir, it, key);
			it->seen = true;
		}
	}
	return rc;
}

/*
 * One page of a first listing (op->items [page_from, page_to)).  The
 * directory's mtime stays: these entries were in the store all along,
 * and a client walking it must not see its directory change under it.
 */
static int reval_apply_page(struct db_txn *txn, void *p)
{
	struct reval_op *op = p;
	struct fs_inode dir;
	int64_t mtime, ctime;
	int rc = fs_inode_get(op->fs, txn, op->dir, &dir);

	if (rc)
		return rc;
	op->ndrop = 0; /* a retried apply starts over */
	if (!op->old_cookies)
		op->old_cookies = dir.next_cookie;
	mtime = dir.mtime;
	ctime = dir.ctime;
	rc = merge_items(op, txn, &dir, op->page_from, op->page_to);
	if (rc)
		return rc;
	dir.mtime = mtime;
	dir.ctime = ctime;
	op->next_cookie = dir.next_cookie;
	return fs_inode_put(op->fs, txn, &dir);
}

/* The whole listing (or, page by page already, what vanished). */
static int reval_apply(struct db_txn *txn, void *p)
{
	struct reval_op *op = p;
	struct fs *fs = op->fs;
	struct fs_inode dir;
	int rc = fs_inode_get(fs, txn, op->dir, &dir);

	if (rc)
		return rc;
	op->ndrop = 0; /* a retried apply starts over */
	if (op->progressive && !op->missed)
		for (size_t i = 0; i < op->nitems; i++)
			op->items[i].seen = true;
	else
		rc = merge_items(op, txn, &dir, 0, op->nitems);
	if (rc)
		return rc;
	rc = reval_vanished(op, txn, &dir);
	if (rc)
		return rc;
	if (op->marker_seen)
		dir.flags |= FS_F_MARKER;
	dir.listed_at_ms = fs_now_ms();
	return fs_inode_put(fs, txn, &dir);
}

static void reval_free(struct reval_op *op, int err)
{
	for (size_t i = 0; i < op->nitems; i++) {
		free(op->items[i].name);
		free(op->items[i].info);
		free(op->items[i].target);
	}
	free(op->items);
	free(op->heads);
	free(op->drop);
	if (op->registered)
		fs_listing_end(op->fs, op->dir, err);
	else
		op->done(op->arg, err);
	free(op);
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

	items_sort(op, from);
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

			rc = page_items(op, &page);
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
		items_sort(op, 0);
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
