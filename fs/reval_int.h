/*
 * fs/reval_int.h - a directory's listing merged into the namespace
 * (reval_merge.c), for the listing's driver above it (revalidate.c):
 * what one listing holds, and the steps of its merge.  Private to fs/.
 */
#ifndef MAPFS_FS_REVAL_INT_H
#define MAPFS_FS_REVAL_INT_H

#include "fs_int.h"

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

/* A page's names into op->items. */
int reval_page_items(struct reval_op *op, const struct store_page *page);

/*
 * HEAD the files nobody knows yet, many at once: a directory of objects
 * no gateway listed before (another writer's, or a new gateway's first
 * look) costs one HEAD per object, and one at a time that was most of
 * its listing's time.  With --listing-attrs none: the listing's size and
 * mtime are all such files get (reval_import).
 */
int reval_head_new(struct reval_op *op, size_t from, size_t to);

/* The listed item of this name (items are sorted by name), or NULL. */
struct reval_item *reval_item_find(const struct reval_op *op, const char *name);

/*
 * Sort the items from from on by name; of duplicates (a file and a
 * prefix of one name) keep the prefix: the directory wins, it has more
 * below it.
 */
void reval_items_sort(struct reval_op *op, size_t from);

/* The whole listing (or, page by page already, what vanished). */
int reval_apply(struct db_txn *txn, void *p);

/*
 * One page of a first listing (op->items [page_from, page_to)).  The
 * directory's mtime stays: these entries were in the store all along,
 * and a client walking it must not see its directory change under it.
 */
int reval_apply_page(struct db_txn *txn, void *p);

/* End op: free it, and answer err to its caller (through listing.c for
 * a registered listing). */
void reval_free(struct reval_op *op, int err);

#endif
