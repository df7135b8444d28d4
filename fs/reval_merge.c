/*
 * fs/reval_merge.c - a store listing merged into a directory's entries
 * (revalidate.c lists and drives; this file is the merge): unknown
 * objects and prefixes become inodes (new files HEADed first, many at
 * once), clean entries whose object vanished are removed, clean files
 * whose object changed get its size and etag (and lose their cache
 * file).  Entries with local changes, not yet in the store, mid-rename,
 * or stored after the listing began are kept: the listing cannot know
 * them yet.  A first listing is merged page by page (reval_apply_page),
 * the last transaction only removing what vanished (reval_apply).
 */
#include <errno.h>
#include <inttypes.h>
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

/* HEADs of new files at once (as many as uploads of small files). */
#define REVAL_HEADS_PARALLEL FS_PARALLEL_MAX

/* How long an object this namespace stored for a file at another name is
 * taken as on its way out (our_late_object): an upload's commit and the
 * pass that deletes it take seconds; an S3 clock minutes off is allowed. */
#define REVAL_LATE_GRACE_MS (10 * 60 * 1000)

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
int reval_page_items(struct reval_op *op, const struct store_page *page)
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
int reval_head_new(struct reval_op *op, size_t from, size_t to)
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
struct reval_item *reval_item_find(const struct reval_op *op, const char *name)
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
void reval_items_sort(struct reval_op *op, size_t from)
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
		const struct reval_item *it = reval_item_find(op, name);
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

/*
 * Is the object at key, a name nobody here knows, one that this namespace
 * stored lately for some file (its write id names this namespace: it was
 * HEADed, reval_head_new)?  Then it is that file's object at a name the
 * file no longer has: an upload that was on the wire while the file was
 * removed or renamed, whose commit queues its DEL (sync_item.c).  A
 * listing between the two must not make it a new file (a removed file
 * came back: found by test_e2e_cluster, a listing on one gateway while
 * another's upload raced a REMOVE on a third).  Only for
 * REVAL_LATE_GRACE_MS after it was stored: an older one is anyone's (an
 * S3 copy of our object keeps our write id).
 */
static bool our_late_object(struct reval_op *op, const struct reval_item *it,
			    const char *key)
{
	const struct store_info *info = it->info;
	uint64_t nsid, ino, at_ms;

	if (!info ||
	    sscanf(info->meta.wid, "%*x-%" SCNx64 "-%" SCNx64 "-", &nsid,
		   &ino) != 2 ||
	    nsid != op->fs->nsid || info->last_modified_ns <= 0)
		return false;
	at_ms = (uint64_t)info->last_modified_ns / 1000000u;
	if (at_ms + REVAL_LATE_GRACE_MS < op->list_start_ms)
		return false;
	log_debug("fs: object \"%s\" of file %" PRIu64 " is not a new file: "
		  "stored for a name that file no longer has (its delete is "
		  "queued)",
		  key, ino);
	return true;
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
			if (!fs_keys_get(fs, txn, key, &owner) ||
			    our_late_object(op, it, key))
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
int reval_apply_page(struct db_txn *txn, void *p)
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
int reval_apply(struct db_txn *txn, void *p)
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

void reval_free(struct reval_op *op, int err)
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
