/*
 * fs/sync_item.c - one file's trip to the store, for a pass of the
 * syncer's (syncer.c): its upload, or the conflict settled when the store
 * holds another version (conflict.c); the copies of its other names (hard
 * links); then its record (clean again, the new ETag).
 *
 * Data goes up from the cache file: files up to store_put_max() with one
 * PUT (past STORE_PUT_MAX_DEFAULT only if all of it is local), larger
 * ones as a multipart upload whose parts run in parallel.  A
 * part whose bytes all equal the old object's (no dirty chunk, nothing
 * cut) is copied from it in the store (UploadPartCopy) instead of being
 * fetched and sent again; a backend without part-copy gets the bytes.
 * Chunks an upload needs that are not local are fetched first, part by
 * part, so memory holds at most one chunk per fetch worker, never the
 * file; from before that fetch until the bytes are sent the file's
 * chunks are pinned against eviction (a punched chunk would go up as
 * zeros over the only other copy of its bytes).
 *
 * A write racing an upload is never lost: the upload's commit leaves the
 * file dirty unless its size, write count (wseq) and mtime are still what
 * the snapshot saw (cs_equal).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "common/log.h"
#include "db/db.h"
#include "metrics/metrics.h"
#include "fs_int.h"
#include "sync_int.h"

/*
 * The id of the version of it an upload sends: this node, this
 * namespace, the inode (together the writer, see own_earlier), and
 * what changes with every change of it and outlives a restart (the cache
 * file's size and mtime, to the ns, while its data is dirty; the record's
 * ctime).  Every try of one version has the same id, also after a crash
 * between an upload and its commit, so one whose answer was lost is
 * known as ours by the next (store_cond.wid), not taken for another
 * writer's (which made a spurious conflict copy of our own version, and
 * left the older one at the name: found by test_e2e_cache's kill -9 loop
 * under ThreadSanitizer's timing).  Not the write count: a restart
 * resets it.
 */
static void wid_of(struct fs *fs, const struct sync_item *it,
		   char wid[STORE_WID_MAX])
{
	uint64_t h = 14695981039346656037ull;
	uint64_t v[4] = { (uint64_t)it->in.ctime, 0, 0, 0 };

	if ((it->in.flags & FS_F_DIRTY_DATA) && it->have_cs) {
		v[1] = it->cs.size;
		v[2] = (uint64_t)it->cs.mtime.tv_sec;
		v[3] = (uint64_t)it->cs.mtime.tv_nsec;
	}
	for (size_t i = 0; i < sizeof(v); i++)
		h = (h ^ ((const unsigned char *)v)[i]) * 1099511628211ull;
	snprintf(wid, STORE_WID_MAX,
		 "%08" PRIx32 "-%016" PRIx64 "-%" PRIx64 "-%016" PRIx64,
		 db_node_id(fs->db), fs->nsid, it->in.ino, h);
}

/* See fs_int.h: wid_of's text is NODE-NSID-INO-HASH. */
bool fs_wid_names(const struct fs *fs, const char *wid, uint64_t ino)
{
	char mid[64];
	const char *dash = strchr(wid, '-');

	snprintf(mid, sizeof(mid), "-%016" PRIx64 "-%" PRIx64 "-", fs->nsid,
		 ino);
	return dash && !strncmp(dash, mid, strlen(mid));
}

/*
 * What the upload of it is based on: the version the record last saw, or
 * none (a new key).  Directory markers hold nothing to lose: always.  A
 * record from before ETags were kept cannot say: always.
 */
static void cond_of(struct fs *fs, const struct sync_item *it,
		    struct store_cond *c)
{
	memset(c, 0, sizeof(*c));
	if (it->in.type == FS_DIR)
		c->kind = STORE_IF_ANY;
	else if (!(it->in.flags & FS_F_IN_STORE))
		c->kind = STORE_IF_NONE;
	else if (it->in.etag[0])
		c->kind = STORE_IF_MATCH;
	memcpy(c->etag, it->in.etag, sizeof(c->etag));
	wid_of(fs, it, c->wid);
}

/*
 * The size of it's data as the upload sends it: the cache file's while
 * its data is dirty here, else the record's.
 */
uint64_t sync_item_size(const struct sync_item *it)
{
	return (it->in.flags & FS_F_DIRTY_DATA) && it->have_cs ? it->cs.size
							       : it->in.size;
}

/*
 * The store operation for one dirty inode, if the store still holds the
 * version it is based on (else -ESTALE, or -ENOENT if that is gone).
 * -ENODATA: not possible now.
 */
static int upload(struct fs *fs, struct sync_item *it, struct store_info *out)
{
	struct store_cond c;
	struct store_meta m;
	uint64_t size;
	int fd, rc;

	sync_meta_of(fs, it, &m);
	cond_of(fs, it, &c);
	fs_early_wid(fs, it->in.ino, c.wid);
	memcpy(m.wid, c.wid, sizeof(m.wid));
	switch (it->in.type) {
	case FS_DIR:
	case FS_FIFO:
	case FS_SOCK:
	case FS_CHR:
	case FS_BLK:
		return store_put_if(fs->store, it->key, "", 0, &m, &c, out);
	case FS_LNK:
		return store_put_if(fs->store, it->key, it->in.target,
				    strlen(it->in.target), &m, &c, out);
	case FS_REG:
		break;
	default:
		return -EIO;
	}
	/* Only the attributes changed: the store rewrites them itself. */
	if (!(it->in.flags & FS_F_DIRTY_DATA) && (it->in.flags & FS_F_IN_STORE))
		return store_copy_if(fs->store, it->key, it->key, &m, &c, out);
	rc = cache_open_fd(fs->cache, it->in.ino, &fd);
	if (rc)
		return rc;
	size = sync_item_size(it);
	/* Most of it may be up already (early.c). */
	rc = fs_early_finish(fs, it, fd, size, &m, &c, out);
	if (rc != 1)
		goto out_close;
	/*
	 * One PUT up to the store's cut, but past the default one only for
	 * data that is all here: a rewrite of a big object that is mostly
	 * in the store goes as parts the store copies itself, instead of
	 * coming into the cache whole first.
	 */
	if (size > store_put_max(fs->store) ||
	    (size > STORE_PUT_MAX_DEFAULT &&
	     !cache_range_local(fs->cache, it->in.ino, 0, size))) {
		rc = sync_put_multipart(fs, it, fd, size, &m, &c, out);
	} else {
		struct cache_pin *pin;

		rc = sync_fetch_pinned(fs, it, 0, size, &pin);
		if (!rc) {
			rc = store_put_fd_if(fs->store, it->key, fd, size, &m,
					     &c, out);
			cache_unpin(pin);
		}
	}
out_close:
	/* Its commit journals the cached chunks clean: their bytes must be
	 * on this disk first (data written without a COMMIT may still be
	 * in the page cache only). */
	if (!rc)
		rc = cache_fd_durable(fs->cache, it->in.ino, fd);
	cache_close_fd(fs->cache, it->in.ino, fd);
	return rc;
}

/* Does some inode live at store key key now (so it will rewrite it)? */
static bool key_occupied(struct fs *fs, struct db_txn *txn, const char *key)
{
	char name[FS_NAME_MAX + 1];
	uint64_t ino = FS_ROOT_INO;
	struct fs_inode in;
	const char *p = key;
	size_t len = strlen(key);
	bool want_dir = len && key[len - 1] == '/';

	if (want_dir)
		len--;
	while (p < key + len) {
		const char *e = memchr(p, '/', (size_t)(key + len - p));
		size_t n = e ? (size_t)(e - p) : (size_t)(key + len - p);

		if (n == 0 || n > FS_NAME_MAX)
			return false;
		memcpy(name, p, n);
		name[n] = '\0';
		if (fs_dirent_get(fs, txn, ino, name, &ino, NULL))
			return false;
		p += n + (e != NULL);
	}
	return fs_inode_get(fs, txn, ino, &in) == 0 &&
	       (in.type == FS_DIR) == want_dir;
}

/* A name of a file past its first whose object an upload made. */
struct link_copy {
	uint64_t parent;
	char name[FS_NAME_MAX + 1];
	char key[STORE_KEY_MAX + 2];
	char etag[STORE_ETAG_MAX];
};

/* The links copied (uc->links) are in the store: say so in their records. */
static int links_commit(struct db_txn *txn, struct upload_commit *uc)
{
	struct fs *fs = uc->fs;
	int rc;

	for (size_t i = 0; i < uc->nlinks; i++) {
		const struct link_copy *lc = &uc->links[i];
		struct fs_link l;

		rc = fs_link_get(fs, txn, uc->it->in.ino, lc->parent, lc->name,
				 &l);
		if (rc == -ENOENT)
			continue; /* removed or renamed meanwhile */
		if (rc)
			return rc;
		l.flags |= FS_LINK_IN_STORE;
		l.synced_ms = fs_now_ms();
		memcpy(l.etag, lc->etag, sizeof(l.etag));
		if ((rc = fs_link_put(fs, txn, &l)) ||
		    (rc = fs_keys_put(fs, txn, lc->key, l.ino)))
			return rc;
	}
	return 0;
}

/*
 * The data and mtime are as the snapshot saw them.  Not the ctime: chunks
 * fetched for the upload itself move it.  wseq counts every write and
 * truncate; SETATTR of the mtime shows in mtime.
 */
static bool cs_equal(const struct cache_stat *a, const struct cache_stat *b)
{
	return a->size == b->size && a->wseq == b->wseq &&
	       a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec;
}

static int upload_commit_apply(struct db_txn *txn, void *arg)
{
	struct upload_commit *uc = arg;
	struct fs *fs = uc->fs;
	struct sync_item *it = uc->it;
	char key[STORE_KEY_MAX + 2];
	struct cache_stat cs;
	struct fs_inode in;
	int rc = fs_inode_get(fs, txn, it->in.ino, &in);
	bool gone = rc == -ESTALE;

	if (rc && !gone)
		return rc;
	if (!gone && it->in.ino != FS_ROOT_INO &&
	    (rc = fs_obj_key(fs, txn, &in, key, sizeof(key))))
		return rc;
	if (gone && it->in.ino == FS_ROOT_INO)
		return -EIO;
	if (it->in.ino != FS_ROOT_INO && (gone || strcmp(key, it->key))) {
		/* Gone or moved since the snapshot: the object is stale.  Its
		 * key stays known as ours until the DEL ran (as a removed
		 * file's does, unlink.c): no listing takes it for new. */
		if (key_occupied(fs, txn, it->key))
			return 0;
		if ((rc = fs_keys_put(fs, txn, it->key, it->in.ino)))
			return rc;
		return fs_pending_add(fs, txn, FS_PEND_DEL, it->in.ino, it->key,
				      NULL);
	}
	if (it->in.ino != FS_ROOT_INO) {
		in.flags |= FS_F_IN_STORE;
		in.flags &= ~(uint32_t)FS_F_MADE_AWAY;
		if (in.type == FS_DIR)
			in.flags |= FS_F_MARKER;
		in.synced_ms = fs_now_ms();
		snprintf(in.etag, sizeof(in.etag), "%s", uc->info->etag);
		if ((rc = fs_keys_put(fs, txn, it->key, in.ino)))
			return rc;
	}
	if ((rc = links_commit(txn, uc)))
		return rc;
	/* A LINK since the snapshot moved the ctime: its name may lack
	 * its object yet. */
	if (in.ctime == it->in.ctime)
		in.flags &= ~(it->in.flags &
			      (uint32_t)(FS_F_DIRTY_META | FS_F_DIRTY_LINKS));
	if ((it->in.flags & FS_F_DIRTY_DATA) && it->have_cs &&
	    cache_stat(fs->cache, in.ino, &cs) == 0 && cs_equal(&cs, &it->cs) &&
	    !(rc = cache_clean(fs->cache, txn, in.ino, cs.wseq, cs.size))) {
		/* Clean again: the record is the authority from now on. */
		in.flags &= ~(uint32_t)FS_F_DIRTY_DATA;
		in.size = cs.size;
		in.mtime = fs_ts_to_ns(&cs.mtime);
		if (fs_ts_to_ns(&cs.ctime) > in.ctime)
			in.ctime = fs_ts_to_ns(&cs.ctime);
	} else if (rc && rc != -EBUSY) {
		return rc;
	}
	fs_owner_release(fs, &in);
	if ((rc = fs_inode_put(fs, txn, &in)))
		return rc;
	return fs_work_sync(fs, txn, &in);
}

/*
 * The version it's upload is based on, as the record says now: a COPY
 * of this pass (a rename) gave it a new one after the snapshot.  -EAGAIN
 * if it moved or went meanwhile (the next pass sees it as it is).
 */
static int item_base_refresh(struct fs *fs, struct sync_item *it)
{
	char key[STORE_KEY_MAX + 2];
	struct fs_inode in;
	struct db_txn *txn;
	int rc = db_read_begin(fs->db, &txn);

	if (rc)
		return rc;
	rc = fs_inode_get(fs, txn, it->in.ino, &in);
	if (!rc)
		rc = fs_obj_key(fs, txn, &in, key, sizeof(key));
	db_read_end(fs->db, txn);
	if (rc || strcmp(key, it->key))
		return -EAGAIN;
	memcpy(it->in.etag, in.etag, sizeof(it->in.etag));
	it->in.flags = (it->in.flags & ~(uint32_t)FS_F_IN_STORE) |
		       (in.flags & FS_F_IN_STORE);
	return 0;
}

/* The links of a file as the record says now, each with its key. */
struct links_read {
	struct fs *fs;
	struct db_txn *txn;
	struct fs_link *v;
	char (*keys)[STORE_KEY_MAX + 2];
	size_t n, cap;
};

static int links_read_fn(void *arg, const struct fs_link *l)
{
	struct links_read *lr = arg;

	if (lr->n == lr->cap) {
		size_t cap = lr->cap ? lr->cap * 2 : 4;
		struct fs_link *v = realloc(lr->v, cap * sizeof(*v));
		char(*k)[STORE_KEY_MAX + 2];

		if (!v)
			return -ENOMEM;
		lr->v = v;
		if (!(k = realloc(lr->keys, cap * sizeof(*k))))
			return -ENOMEM;
		lr->keys = k;
		lr->cap = cap;
	}
	lr->v[lr->n] = *l;
	if (fs_name_key(lr->fs, lr->txn, l->parent, l->name, false,
			lr->keys[lr->n], sizeof(lr->keys[0])))
		return 0; /* its directory went meanwhile: not this name */
	lr->n++;
	return 0;
}

/* Another writer's object is at link l's key: that name is theirs now,
 * a file of its own (the listing brings it in); the others keep ours. */
struct link_split {
	struct fs *fs;
	const struct fs_link *l;
};

static int link_split_apply(struct db_txn *txn, void *arg)
{
	struct link_split *ls = arg;
	struct fs *fs = ls->fs;
	struct fs_inode in, dir;
	struct fs_link now;
	int rc = fs_link_get(fs, txn, ls->l->ino, ls->l->parent, ls->l->name,
			     &now);

	if (rc == -ENOENT)
		return 0;
	if (rc || (rc = fs_inode_get(fs, txn, ls->l->ino, &in)) ||
	    (rc = fs_inode_get(fs, txn, ls->l->parent, &dir)) ||
	    (rc = fs_name_drop(fs, txn, &dir, &in, now.name, false)))
		return rc;
	return fs_inode_put(fs, txn, &dir);
}

/*
 * Make the objects of the file's other names (hard links, links.c): a
 * copy in the store of the first name's object, just uploaded (all of
 * them), or, uploaded false, only the names that have none yet.  Each
 * copy is conditional on the version that name's record last saw, so
 * another writer's object there is never overwritten: that name splits
 * off instead.  The copies made are listed in uc for the commit.
 */
static int links_copy(struct fs *fs, struct sync_item *it, bool uploaded,
		      struct upload_commit *uc)
{
	struct links_read lr = { .fs = fs };
	struct store_meta m;
	struct store_cond c;
	int rc = db_read_begin(fs->db, &lr.txn);

	if (rc)
		return rc;
	rc = fs_link_each(fs, lr.txn, it->in.ino, links_read_fn, &lr);
	db_read_end(fs->db, lr.txn);
	if (!rc && lr.n && !(uc->links = calloc(lr.n, sizeof(*uc->links))))
		rc = -ENOMEM;
	sync_meta_of(fs, it, &m);
	cond_of(fs, it, &c);
	fs_early_wid(fs, it->in.ino, c.wid);
	memcpy(m.wid, c.wid, sizeof(m.wid));
	for (size_t i = 0; !rc && i < lr.n; i++) {
		const struct fs_link *l = &lr.v[i];
		struct link_copy *lc = &uc->links[uc->nlinks];
		struct store_info info;

		if (!uploaded && (l->flags & FS_LINK_IN_STORE))
			continue;
		c.kind = !(l->flags & FS_LINK_IN_STORE) ? STORE_IF_NONE
			 : l->etag[0]                   ? STORE_IF_MATCH
							: STORE_IF_ANY;
		memcpy(c.etag, l->etag, sizeof(c.etag));
		rc = store_copy_if(fs->store, it->key, lr.keys[i], &m, &c,
				   &info);
		if (rc == -ESTALE ||
		    (rc == -ENOENT && c.kind == STORE_IF_MATCH)) {
			log_warn(
				"fs: %s, another name of %s, was %s by someone "
				"else: it is a file of its own now; the other "
				"names keep ours",
				lr.keys[i], it->key,
				rc == -ESTALE ? "written" : "deleted");
			rc = db_write(fs->db, link_split_apply,
				      &(struct link_split){ fs, l });
			if (!rc)
				fs_revalidate(fs, NULL, l->parent, true,
					      fs_done_nothing, NULL);
			continue;
		}
		if (rc)
			break;
		lc->parent = l->parent;
		strcpy(lc->name, l->name);
		strcpy(lc->key, lr.keys[i]);
		memcpy(lc->etag, info.etag, sizeof(lc->etag));
		uc->nlinks++;
	}
	free(lr.v);
	free(lr.keys);
	return rc;
}

/* The first name of a file with several is another writer's now. */
struct first_split {
	struct fs *fs;
	const struct sync_item *it;
};

static int first_split_apply(struct db_txn *txn, void *arg)
{
	const struct first_split *fsa = arg;
	struct fs *fs = fsa->fs;
	char key[STORE_KEY_MAX + 2], name[FS_NAME_MAX + 1];
	struct fs_inode in, dir;
	int rc = fs_inode_get(fs, txn, fsa->it->in.ino, &in);

	if (rc)
		return rc == -ESTALE ? 0 : rc;
	/* Moved or unlinked meanwhile: the next pass sees it as it is. */
	if ((rc = fs_obj_key(fs, txn, &in, key, sizeof(key))) ||
	    strcmp(key, fsa->it->key) || in.nlink < 2)
		return rc;
	/* (A copy: fs_name_drop gives in the next name.) */
	memcpy(name, in.name, sizeof(name));
	if ((rc = fs_inode_get(fs, txn, in.parent, &dir)) ||
	    (rc = fs_name_drop(fs, txn, &dir, &in, name, false)))
		return rc;
	return fs_inode_put(fs, txn, &dir);
}

/*
 * The upload of a file with several names met another writer's version
 * (or their delete) at its first name: as for another name (links_copy),
 * that name splits off, theirs, and the file goes on under its others,
 * the next pass uploading it to the one that takes the first's place
 * (its object holds the file's older bytes, so even chunks never cached
 * here are not lost).  0, or the error that leaves it for later.
 */
static int first_split(struct fs *fs, struct sync_item *it, int why)
{
	int rc;

	log_warn("fs: %s, one of several names of one file, was %s by "
		 "someone else: it is theirs now; the file goes on under its "
		 "other names",
		 it->key, why == -ESTALE ? "written" : "deleted");
	rc = db_write(fs->db, first_split_apply,
		      &(struct first_split){ fs, it });
	if (!rc)
		fs_revalidate(fs, NULL, it->in.parent, true, fs_done_nothing,
			      NULL);
	return rc;
}

/*
 * An upload refused because the key holds another version: if that one
 * carries this file's own writer id (namespace, node, inode: the text of
 * wid_of before its last '-'), it is an earlier upload of this file
 * whose commit a crash kept from the record, and the file was written
 * again since (found by test_e2e_cache's kill -9 loop under
 * ThreadSanitizer: the newer version went aside as a conflict, the name
 * showing the older one).  Not another writer's: the record's base
 * becomes that version, so the next try replaces it.  True if so.
 */
static bool own_earlier(struct fs *fs, struct sync_item *it)
{
	char wid[STORE_WID_MAX];
	struct store_info si;
	const char *dash;

	wid_of(fs, it, wid);
	dash = strrchr(wid, '-');
	if (!dash || store_head(fs->store, it->key, &si) ||
	    strncmp(si.meta.wid, wid, (size_t)(dash - wid) + 1))
		return false;
	log_info("fs: %s holds an earlier upload of this file whose commit "
		 "was lost: replaced",
		 it->key);
	snprintf(it->in.etag, sizeof(it->in.etag), "%s", si.etag);
	it->in.flags |= FS_F_IN_STORE;
	return true;
}

/*
 * A name made while the store was away (FS_F_MADE_AWAY), before its
 * first upload: did another writer make it the other kind meanwhile?
 * For a directory ("d/"), an object "d"; for anything else ("f"), keys
 * under "f/".  -EEXIST if so, 0 if not, or the store's error.
 */
static int other_kind(struct fs *fs, const struct sync_item *it)
{
	char k[STORE_KEY_MAX + 2];
	size_t n = strlen(it->key);
	struct store_page page = { 0 };
	struct store_info info;
	int rc;

	if (!n || n > STORE_KEY_MAX - 1)
		return 0;
	memcpy(k, it->key, n + 1);
	if (it->in.type == FS_DIR) {
		if (k[n - 1] == '/')
			k[n - 1] = '\0';
		rc = store_head(fs->store, k, &info);
		return rc == -ENOENT ? 0 : rc ? rc : -EEXIST;
	}
	k[n] = '/';
	k[n + 1] = '\0';
	rc = store_list(fs->store, k, '/', NULL, 1, &page);
	if (!rc && (page.nentries || page.nprefixes))
		rc = -EEXIST;
	store_page_free(&page);
	return rc;
}

/*
 * Is it a name made while the store was away whose directory, made then
 * too, has not had its own check (other_kind) yet?  Such a name waits for
 * it: uploaded first (a pass uploads in parallel), it would give the
 * directory objects in the store, and a directory whose name another
 * writer made a file meanwhile could then no longer go aside.
 */
static bool parent_unchecked(struct fs *fs, const struct sync_item *it)
{
	struct fs_inode dir;
	struct db_txn *txn;
	bool wait = false;

	if (!(it->in.flags & FS_F_MADE_AWAY) || it->in.ino == FS_ROOT_INO ||
	    db_read_begin(fs->db, &txn))
		return false;
	if (!fs_inode_get(fs, txn, it->in.parent, &dir))
		wait = (dir.flags & FS_F_MADE_AWAY) &&
		       !(dir.flags & FS_F_IN_STORE);
	db_read_end(fs->db, txn);
	return wait;
}

/*
 * Whether this node may write to the store now (its cluster lease held,
 * owner.c).  A change of the answer is logged once: uploads that wait
 * for the lease answer COMMIT with JUKEBOX and make a flush give up
 * with EAGAIN, and without a line in the log that was a mystery (a
 * campaign run saw one gateway refuse every upload for a minute).
 */
static bool lease_lets_write(struct fs *fs)
{
	static atomic_bool waiting;
	bool held = db_lease_held(fs->db);

	if (held == !atomic_load(&waiting))
		return held;
	if (atomic_exchange(&waiting, !held) == !held)
		return held;
	if (held)
		log_info("cluster: this node's lease holds again: uploads go "
			 "on");
	else
		log_warn("cluster: this node's lease may have run out (not "
			 "renewed in time): uploads wait until it is (COMMIT "
			 "answers JUKEBOX meanwhile)");
	return held;
}

/* See sync_int.h. */
int sync_item_store(struct fs *fs, struct sync_item *it,
		    struct upload_commit *uc)
{
	struct store_info *info = uc->info;
	/* Data or attributes to send; else only names to make (LINK). */
	bool uploading = (it->in.flags & (FS_F_DIRTY_DATA | FS_F_DIRTY_META)) ||
			 !(it->in.flags & FS_F_IN_STORE);
	int rc = 0;

	/* A node whose lease may have run out writes nothing (owner.c). */
	if (!lease_lets_write(fs))
		return -EAGAIN;
	if (it->in.ino != FS_ROOT_INO) /* the root has no object */
		rc = item_base_refresh(fs, it);
	if (!rc && parent_unchecked(fs, it))
		return 1; /* the next pass, once its directory is checked */
	if (!rc && (it->in.flags & FS_F_MADE_AWAY) &&
	    !(it->in.flags & FS_F_IN_STORE) &&
	    (rc = other_kind(fs, it)) == -EEXIST) {
		rc = fs_conflict_kind(fs, &it->in, it->key);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return 1; /* moved aside: the next pass uploads it */
		rc = 0;
	}
	if (!rc && it->in.ino != FS_ROOT_INO && uploading)
		rc = upload(fs, it, info);
	else if (!rc)
		snprintf(info->etag, sizeof(info->etag), "%s", it->in.etag);
	if (rc == -ESTALE && own_earlier(fs, it))
		rc = upload(fs, it, info);
	/* Someone else wrote (or deleted) the key meanwhile. */
	if (rc == -ESTALE ||
	    (rc == -ENOENT && (it->in.flags & FS_F_IN_STORE))) {
		rc = it->in.type != FS_DIR && it->in.nlink > 1
			     ? first_split(fs, it, rc)
			     : fs_conflict(fs, &it->in, it->key,
					   sync_item_size(it), rc);
		return rc ? rc : 1;
	}
	if (!rc && it->in.type != FS_DIR && it->in.ino != FS_ROOT_INO)
		rc = links_copy(fs, it, uploading, uc);
	if (rc) {
		free(uc->links);
		uc->links = NULL;
		return rc;
	}
	/* Up in full: an upload of its first parts is of no use now. */
	fs_early_forget(fs, it->in.ino);
	return 0;
}

/* See sync_int.h. */
int sync_item_commit(struct fs *fs, struct upload_commit *uc)
{
	int rc;

	log_debug("fs: uploaded %s (%" PRIu64 " bytes) in %" PRIu64 " ms",
		  uc->it->key, uc->info->size, fs_now_ms() - uc->t0);
	rc = db_write(fs->db, upload_commit_apply, uc);
	free(uc->links);
	uc->links = NULL;
	return rc;
}

/*
 * The uploads of one pass: items[0, n) run on up to FS_PARALLEL_MAX
 * threads at once (small files: many PUTs in flight fill the store,
 * where one at a time waits a round trip each; their commits share the
 * db writer's group commits), the rest one at a time after them.
 * Uploads of one snapshot are of distinct keys, so their order does not
 * matter; the pending records (deletes, copies) all ran before.
 */
