/*
 * fs/links.c - the names of an inode past its first (hard links).
 *
 * In the store every name is an object of its own with the same bytes
 * (other S3 clients see ordinary files); in the namespace the names share
 * one inode.  The inode record keeps its first name (parent, name: the
 * key its data is read from and uploaded to); each further name is a
 * record of the "links" table, keyed ino (u64 BE) || parent (u64 BE) ||
 * name, holding whether that name's object is in the store, its ETag and
 * when it got there.  nlink is 1 + the number of link records.
 *
 * The syncer makes a name's object by copying the first name's object in
 * the store (CopyObject, no bytes through the gateway) after every upload
 * of the inode, and for a LINK alone (FS_F_DIRTY_LINKS) just the names
 * that have none yet.  Removing the first name promotes another one: the
 * inode's data then comes from that name's object.
 *
 * While a file has several names, each object carries the file's link id
 * (x-amz-meta-mapfs-link: this namespace's id and the inode number), so a
 * namespace rebuilt from the bucket (a new state directory) joins the
 * names again: a listing that imports an object with a link id it met
 * before, of the same size, makes it another name of that file
 * (fs_linkid_join; the "linkids" table remembers the ids it met).
 *
 * Directories have no links.  Everything here runs in a change's txn on
 * the db writer, except the reads, which take any txn.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "db/db.h"
#include "fs_int.h"

struct link_val {
	uint32_t flags;
	uint32_t etag_len;
	uint64_t synced_ms;
};

#define LINK_DBKEY_MAX (16 + FS_NAME_MAX)

static struct db_val link_dbkey(unsigned char *buf, uint64_t ino,
				uint64_t parent, const char *name)
{
	size_t n = strlen(name);

	fs_put_be64(buf, ino);
	fs_put_be64(buf + 8, parent);
	memcpy(buf + 16, name, n);
	return (struct db_val){ 16 + n, buf };
}

static int link_decode(const struct db_val *k, const struct db_val *v,
		       struct fs_link *out)
{
	struct link_val lv;
	size_t n = k->size - 16;

	if (k->size <= 16 || n > FS_NAME_MAX || v->size < sizeof(lv))
		return -EIO;
	memcpy(&lv, v->data, sizeof(lv));
	if (lv.etag_len >= STORE_ETAG_MAX ||
	    v->size != sizeof(lv) + lv.etag_len)
		return -EIO;
	out->ino = fs_get_be64(k->data);
	out->parent = fs_get_be64((const unsigned char *)k->data + 8);
	memcpy(out->name, (const char *)k->data + 16, n);
	out->name[n] = '\0';
	out->flags = lv.flags;
	out->synced_ms = lv.synced_ms;
	memcpy(out->etag, (const char *)v->data + sizeof(lv), lv.etag_len);
	out->etag[lv.etag_len] = '\0';
	return 0;
}

int fs_link_get(struct fs *fs, struct db_txn *txn, uint64_t ino,
		uint64_t parent, const char *name, struct fs_link *out)
{
	unsigned char kb[LINK_DBKEY_MAX];
	struct db_val k = link_dbkey(kb, ino, parent, name), v;
	int rc = db_get(txn, fs->dbi_links, &k, &v);

	return rc ? rc : link_decode(&k, &v, out);
}

int fs_link_put(struct fs *fs, struct db_txn *txn, const struct fs_link *l)
{
	unsigned char kb[LINK_DBKEY_MAX];
	unsigned char vb[sizeof(struct link_val) + STORE_ETAG_MAX];
	struct link_val lv = { .flags = l->flags,
			       .etag_len = (uint32_t)strlen(l->etag),
			       .synced_ms = l->synced_ms };
	struct db_val k = link_dbkey(kb, l->ino, l->parent, l->name);

	if (lv.etag_len >= STORE_ETAG_MAX)
		return -EINVAL;
	memcpy(vb, &lv, sizeof(lv));
	memcpy(vb + sizeof(lv), l->etag, lv.etag_len);
	return db_put(txn, fs->dbi_links, &k,
		      &(struct db_val){ sizeof(lv) + lv.etag_len, vb }, 0);
}

int fs_link_del(struct fs *fs, struct db_txn *txn, uint64_t ino,
		uint64_t parent, const char *name)
{
	unsigned char kb[LINK_DBKEY_MAX];
	struct db_val k = link_dbkey(kb, ino, parent, name);

	return db_del(txn, fs->dbi_links, &k);
}

int fs_link_each(struct fs *fs, struct db_txn *txn, uint64_t ino,
		 int (*fn)(void *arg, const struct fs_link *l), void *arg)
{
	unsigned char kb[8];
	struct db_cursor *cur;
	struct db_val k, v;
	struct fs_link l;
	int rc = db_cursor_open(txn, fs->dbi_links, &cur);

	if (rc)
		return rc;
	fs_put_be64(kb, ino);
	k = (struct db_val){ sizeof(kb), kb };
	for (int op = DB_SET_RANGE;; op = DB_NEXT) {
		rc = db_cursor_get(cur, &k, &v, op);
		if (rc == -ENOENT ||
		    (!rc && (k.size < 8 || memcmp(k.data, kb, 8)))) {
			rc = 0;
			break;
		}
		if (rc || (rc = link_decode(&k, &v, &l)) || (rc = fn(arg, &l)))
			break;
	}
	db_cursor_close(cur);
	return rc;
}

static int link_first_fn(void *arg, const struct fs_link *l)
{
	*(struct fs_link *)arg = *l;
	return 1;
}

int fs_link_first(struct fs *fs, struct db_txn *txn, uint64_t ino,
		  struct fs_link *out)
{
	int rc = fs_link_each(fs, txn, ino, link_first_fn, out);

	return rc == 1 ? 0 : rc ? rc : -ENOENT;
}

bool fs_name_is_first(const struct fs_inode *in, uint64_t dir, const char *name)
{
	return in->parent == dir && !strcmp(in->name, name);
}

int fs_name_key(struct fs *fs, struct db_txn *txn, uint64_t dir,
		const char *name, bool is_dir, char *buf, size_t cap)
{
	int rc = fs_key_build(fs, txn, dir, buf, cap);
	size_t len, nl = strlen(name);

	if (rc)
		return rc;
	len = strlen(buf);
	if (len + (len != 0) + nl + is_dir + 1 > cap ||
	    len + (len != 0) + nl + is_dir > fs->key_max)
		return -ENAMETOOLONG;
	if (len)
		buf[len++] = '/';
	memcpy(buf + len, name, nl);
	len += nl;
	if (is_dir)
		buf[len++] = '/';
	buf[len] = '\0';
	return 0;
}

/*
 * Make link l the inode's first name: its object is where the inode's
 * data now comes from (its ETag pins reads).  One not in the store yet
 * is on its way: the COPY into it queued by LINK runs before the DEL of
 * the old first name, and records its ETag (syncer.c), or the inode is
 * dirty and its upload goes there.
 */
static void link_promote(struct fs_inode *in, const struct fs_link *l)
{
	in->parent = l->parent;
	strcpy(in->name, l->name);
	memcpy(in->etag, l->etag, sizeof(in->etag));
	if (l->flags & FS_LINK_IN_STORE)
		in->synced_ms = l->synced_ms;
}

int fs_name_drop(struct fs *fs, struct db_txn *txn, struct fs_inode *dir,
		 struct fs_inode *in, const char *name, bool queue_delete)
{
	char key[STORE_KEY_MAX + 2];
	bool in_store;
	struct fs_link l;
	int rc;

	if (in->type == FS_DIR || in->nlink < 2)
		return -EINVAL;
	if ((rc = fs_name_key(fs, txn, dir->ino, name, false, key,
			      sizeof(key))))
		return rc;
	if (fs_name_is_first(in, dir->ino, name)) {
		in_store = in->flags & FS_F_IN_STORE;
		if ((rc = fs_link_first(fs, txn, in->ino, &l)))
			return rc == -ENOENT ? -EIO : rc;
		link_promote(in, &l);
	} else {
		if ((rc = fs_link_get(fs, txn, in->ino, dir->ino, name, &l)))
			return rc == -ENOENT ? -EIO : rc;
		in_store = l.flags & FS_LINK_IN_STORE;
	}
	if ((rc = fs_link_del(fs, txn, in->ino, l.parent, l.name)) ||
	    (rc = fs_dirent_remove(fs, txn, dir, name)))
		return rc;
	if (!queue_delete)
		rc = fs_keys_del(fs, txn, key);
	else if (in_store)
		rc = fs_pending_add(fs, txn, FS_PEND_DEL, in->ino, key, NULL);
	if (rc)
		return rc;
	in->nlink--;
	in->ctime = fs_now_ns();
	return fs_inode_put(fs, txn, in);
}

struct key_find {
	struct fs *fs;
	struct db_txn *txn;
	const char *key;
	struct fs_link *out;
};

static int key_find_fn(void *arg, const struct fs_link *l)
{
	struct key_find *kf = arg;
	char k[STORE_KEY_MAX + 2];

	if (fs_name_key(kf->fs, kf->txn, l->parent, l->name, false, k,
			sizeof(k)) ||
	    strcmp(k, kf->key))
		return 0;
	*kf->out = *l;
	return 1;
}

int fs_link_of_key(struct fs *fs, struct db_txn *txn, const struct fs_inode *in,
		   const char *key, struct fs_link *out)
{
	struct key_find kf = { fs, txn, key, out };
	int rc;

	if (in->type == FS_DIR || in->nlink < 2)
		return -ENOENT;
	rc = fs_link_each(fs, txn, in->ino, key_find_fn, &kf);
	return rc == 1 ? 0 : rc ? rc : -ENOENT;
}

void fs_link_id(const struct fs *fs, uint64_t ino, char out[STORE_LINK_MAX])
{
	snprintf(out, STORE_LINK_MAX, "%016" PRIx64 "-%" PRIx64, fs->nsid, ino);
}

int fs_linkid_note(struct fs *fs, struct db_txn *txn, const char *link,
		   uint64_t ino)
{
	struct db_val k = { strlen(link), (void *)link },
		      v = { sizeof(ino), &ino };

	return k.size ? db_put(txn, fs->dbi_linkids, &k, &v, 0) : 0;
}

int fs_linkid_join(struct fs *fs, struct db_txn *txn, struct fs_inode *dir,
		   const char *name, const char *key, uint64_t size,
		   const char *etag, const char *link, uint64_t synced_ms,
		   uint64_t *ino)
{
	struct db_val k = { strlen(link), (void *)link }, v;
	struct fs_inode in;
	struct fs_link l;
	int rc;

	if (!k.size)
		return -ENOENT;
	if ((rc = db_get(txn, fs->dbi_linkids, &k, &v)))
		return rc;
	if (v.size != sizeof(*ino))
		return -ENOENT;
	memcpy(ino, v.data, sizeof(*ino));
	rc = fs_inode_get(fs, txn, *ino, &in);
	if (rc == -ESTALE)
		return -ENOENT;
	/* The same file only if it still is what that name held. */
	if (rc || in.type != FS_REG || (in.flags & FS_F_DIRTY) ||
	    in.size != size || in.nlink >= FS_LINK_MAX)
		return rc ? rc : -ENOENT;
	memset(&l, 0, sizeof(l));
	l.ino = in.ino;
	l.parent = dir->ino;
	snprintf(l.name, sizeof(l.name), "%s", name);
	l.flags = FS_LINK_IN_STORE;
	l.synced_ms = synced_ms;
	snprintf(l.etag, sizeof(l.etag), "%s", etag);
	in.nlink++;
	if ((rc = fs_dirent_add(fs, txn, dir, name, in.ino)) ||
	    (rc = fs_link_put(fs, txn, &l)) ||
	    (rc = fs_inode_put(fs, txn, &in)))
		return rc;
	return fs_keys_put(fs, txn, key, in.ino);
}
