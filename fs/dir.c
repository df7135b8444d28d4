/*
 * fs/dir.c - directory entries, cookies, LOOKUP and READDIR.
 *
 * Every entry has a cookie handed out once from its directory's counter,
 * indexed both by name (dirents) and by cookie (dircookies).  READDIR
 * walks the cookie index from any cookie, so a cookie means the same
 * place whatever is added or removed meanwhile (RFC 1813 3.3.16).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "db/db.h"
#include "metrics/metrics.h"
#include "fs_int.h"

struct dirent_val {
	uint64_t ino, cookie;
};

static struct db_val dirent_key(unsigned char *buf, uint64_t dir,
				const char *name)
{
	size_t n = strlen(name);

	fs_put_be64(buf, dir);
	memcpy(buf + 8, name, n);
	return (struct db_val){ 8 + n, buf };
}

static struct db_val cookie_key(unsigned char *buf, uint64_t dir,
				uint64_t cookie)
{
	fs_put_be64(buf, dir);
	fs_put_be64(buf + 8, cookie);
	return (struct db_val){ 16, buf };
}

/*
 * Names are key components: not empty, no '/', at most FS_NAME_MAX bytes
 * (NULs never arrive: the name is a C string).  for_change also refuses
 * "." and ".." (CREATE, REMOVE, RENAME...; RFC 1813 3.3.8).
 */
int fs_dir_change_begin(struct fs *fs, struct db_txn *txn,
			const struct fs_ctx *ctx, uint64_t ino,
			struct fs_wcc *wcc, struct fs_inode *out)
{
	int rc = fs_inode_get(fs, txn, ino, out);

	if (rc)
		return rc;
	fs_wcc_before(fs, out, wcc);
	fs_wcc_after(fs, out, wcc);
	if (out->type != FS_DIR)
		return -ENOTDIR;
	return fs_perm(ctx, out, W_OK | X_OK);
}

int fs_name_check(const char *name, bool for_change)
{
	size_t n = strlen(name);

	if (n == 0 || strchr(name, '/'))
		return -EINVAL;
	if (n > FS_NAME_MAX)
		return -ENAMETOOLONG;
	if (for_change && (!strcmp(name, ".") || !strcmp(name, "..")))
		return -EINVAL;
	return 0;
}

int fs_name_creatable(uint64_t dir, const char *name)
{
	int rc = fs_name_check(name, true);

	/* The root's names are store keys: the store's own are not ours. */
	if (!rc && dir == FS_ROOT_INO && store_key_reserved(name))
		rc = -EINVAL;
	return rc;
}

int fs_dirent_decode(const struct db_val *k, const struct db_val *v,
		     uint64_t *dir, char name[FS_NAME_MAX + 1], uint64_t *ino)
{
	struct dirent_val dv;

	if (k->size <= 8 || k->size > 8 + FS_NAME_MAX || v->size != sizeof(dv))
		return -EIO;
	*dir = fs_get_be64(k->data);
	memcpy(name, (const char *)k->data + 8, k->size - 8);
	name[k->size - 8] = '\0';
	memcpy(&dv, v->data, sizeof(dv));
	*ino = dv.ino;
	return 0;
}

int fs_dirent_get(struct fs *fs, struct db_txn *txn, uint64_t dir,
		  const char *name, uint64_t *ino, uint64_t *cookie)
{
	unsigned char kb[8 + FS_NAME_MAX];
	struct db_val k = dirent_key(kb, dir, name), v;
	struct dirent_val dv;
	int rc = db_get(txn, fs->dbi_dirents, &k, &v);

	if (rc)
		return rc;
	if (v.size != sizeof(dv))
		return -EIO;
	memcpy(&dv, v.data, sizeof(dv));
	*ino = dv.ino;
	if (cookie)
		*cookie = dv.cookie;
	return 0;
}

void fs_dir_touch(struct fs_inode *dir, int64_t now)
{
	dir->mtime = dir->ctime = now;
	dir->dir_ver++;
}

int fs_dirent_add(struct fs *fs, struct db_txn *txn, struct fs_inode *dir,
		  const char *name, uint64_t ino)
{
	unsigned char kb[8 + FS_NAME_MAX], cb[16], vb[8 + FS_NAME_MAX];
	struct dirent_val dv = { ino, dir->next_cookie };
	struct db_val k = dirent_key(kb, dir->ino, name),
		      v = { sizeof(dv), &dv };
	size_t n = strlen(name);
	int rc;

	rc = db_put(txn, fs->dbi_dirents, &k, &v, DB_NOOVERWRITE);
	if (rc)
		return rc;
	memcpy(vb, &ino, 8);
	memcpy(vb + 8, name, n);
	k = cookie_key(cb, dir->ino, dv.cookie);
	v = (struct db_val){ 8 + n, vb };
	rc = db_put(txn, fs->dbi_cookies, &k, &v, DB_NOOVERWRITE);
	if (rc)
		return rc;
	dir->next_cookie++;
	fs_dir_touch(dir, fs_now_ns());
	if (store_down(fs->store))
		metrics_inc(MET_OUTAGE_NAMES);
	return 0;
}

int fs_dirent_remove(struct fs *fs, struct db_txn *txn, struct fs_inode *dir,
		     const char *name)
{
	unsigned char kb[8 + FS_NAME_MAX], cb[16];
	uint64_t ino, cookie;
	int rc = fs_dirent_get(fs, txn, dir->ino, name, &ino, &cookie);

	if (rc)
		return rc;
	struct db_val k = dirent_key(kb, dir->ino, name);

	rc = db_del(txn, fs->dbi_dirents, &k);
	if (rc)
		return rc;
	k = cookie_key(cb, dir->ino, cookie);
	rc = db_del(txn, fs->dbi_cookies, &k);
	if (rc)
		return rc;
	fs_dir_touch(dir, fs_now_ns());
	return 0;
}

int fs_dir_empty(struct fs *fs, struct db_txn *txn, uint64_t dir)
{
	unsigned char kb[16];
	struct db_val k = cookie_key(kb, dir, 0), v;
	struct db_cursor *cur;
	int rc = db_cursor_open(txn, fs->dbi_cookies, &cur);

	if (rc)
		return rc;
	rc = db_cursor_get(cur, &k, &v, DB_SET_RANGE);
	if (rc == -ENOENT)
		rc = 0;
	else if (!rc)
		rc = (k.size == 16 && fs_get_be64(k.data) == dir) ? -ENOTEMPTY
								  : 0;
	db_cursor_close(cur);
	return rc;
}

int fs_dir_next(struct fs *fs, struct db_txn *txn, uint64_t dir,
		uint64_t *cookie, uint64_t *ino, char name[FS_NAME_MAX + 1])
{
	unsigned char kb[16];
	struct db_val k = cookie_key(kb, dir, *cookie + 1), v;
	struct db_cursor *cur;
	int rc = db_cursor_open(txn, fs->dbi_cookies, &cur);

	if (rc)
		return rc;
	rc = db_cursor_get(cur, &k, &v, DB_SET_RANGE);
	if (rc == -ENOENT ||
	    (!rc && (k.size != 16 || fs_get_be64(k.data) != dir)))
		rc = -ENOENT;
	else if (rc)
		; /* the cursor's error */
	else if (v.size < 9 || v.size > 8 + FS_NAME_MAX)
		rc = -EIO;
	else {
		memcpy(ino, v.data, 8);
		memcpy(name, (char *)v.data + 8, v.size - 8);
		name[v.size - 8] = '\0';
		*cookie = fs_get_be64((unsigned char *)k.data + 8);
	}
	db_cursor_close(cur);
	return rc;
}

/* LOOKUP: needs search permission on dir (RFC 1813 3.3.3). */
int fs_lookup(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
	      const char *name, uint64_t *ino, struct fs_attr *attr)
{
	return fs_lookup_at(fs, ctx, dir, name, ino, attr, NULL, NULL);
}

int fs_lookup_at(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
		 const char *name, uint64_t *ino, struct fs_attr *attr,
		 struct fs_attr *dir_attr, bool *dir_ok)
{
	struct fs_inode d, child;
	uint64_t found;
	struct db_txn *txn;
	int rc = fs_name_check(name, false);

	if (dir_ok)
		*dir_ok = false;
	if (rc)
		return rc == -EINVAL ? -ENOENT : rc;
	rc = db_read_begin(fs->db, &txn);
	if (rc)
		return rc;
	rc = fs_inode_get(fs, txn, dir, &d);
	if (rc)
		goto out_end;
	if (dir_attr) {
		fs_attr_fill(fs, &d, dir_attr);
		*dir_ok = true;
	}
	rc = -ENOTDIR;
	if (d.type != FS_DIR)
		goto out_end;
	rc = fs_perm(ctx, &d, X_OK);
	if (rc)
		goto out_end;
	if (!strcmp(name, "."))
		found = d.ino;
	else if (!strcmp(name, ".."))
		found = d.ino == FS_ROOT_INO ? FS_ROOT_INO : d.parent;
	else if ((rc = fs_dirent_get(fs, txn, dir, name, &found, NULL))) {
		/* Not in a listing past its TTL that the store cannot renew:
		 * answered from the last listing (another writer may have
		 * made it meanwhile; what we make of that name goes up
		 * conditionally, and a collision gets the conflict rule),
		 * so that a client's create goes on.  A directory never
		 * listed knows nothing to answer with: it waits. */
		if (rc == -ENOENT && !fs_listing_fresh(fs, &d) &&
		    store_down(fs->store)) {
			if (d.listed_at_ms)
				metrics_inc(MET_STALE_ANSWERS);
			else
				rc = -EAGAIN;
		}
		goto out_end;
	}
	rc = fs_inode_get(fs, txn, found, &child);
	if (rc == -ESTALE)
		rc = -EIO; /* an entry without its inode: corrupt */
	if (rc)
		goto out_end;
	*ino = found;
	if (attr)
		fs_attr_fill(fs, &child, attr);
out_end:
	db_read_end(fs->db, txn);
	return rc;
}

static int emit_one(struct fs *fs, struct db_txn *txn, uint64_t ino,
		    const char *name, uint64_t cookie, bool want_attrs,
		    fs_dirent_fn emit, void *arg)
{
	struct fs_inode in;
	struct fs_attr a;

	if (!want_attrs)
		return emit(arg, ino, name, cookie, NULL);
	if (fs_inode_get(fs, txn, ino, &in))
		return emit(arg, ino, name, cookie, NULL);
	fs_attr_fill(fs, &in, &a);
	return emit(arg, ino, name, cookie, &a);
}

/* READDIR / READDIRPLUS body (RFC 1813 3.3.16, 3.3.17). */
int fs_readdir(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
	       uint64_t cookie, bool want_attrs, fs_dirent_fn emit, void *arg,
	       uint64_t *verf, bool *eof, struct fs_attr *dir_attr)
{
	struct fs_inode d;
	unsigned char kb[16];
	struct db_cursor *cur;
	struct db_val k, v;
	struct db_txn *txn;
	/* Asked before the snapshot: a listing over by then is all in it. */
	bool merging = fs_listing_progressive(fs, dir, NULL);
	int rc = db_read_begin(fs->db, &txn);

	if (rc)
		return rc;
	*eof = false;
	rc = fs_inode_get(fs, txn, dir, &d);
	if (rc)
		goto out_end;
	if (dir_attr)
		fs_attr_fill(fs, &d, dir_attr);
	*verf = d.dir_ver;
	rc = -ENOTDIR;
	if (d.type != FS_DIR)
		goto out_end;
	rc = fs_perm(ctx, &d, R_OK);
	if (rc)
		goto out_end;
	if (cookie < 1 &&
	    emit_one(fs, txn, d.ino, ".", 1, want_attrs, emit, arg))
		goto out_end;
	if (cookie < 2 &&
	    emit_one(fs, txn, d.ino == FS_ROOT_INO ? d.ino : d.parent, "..", 2,
		     want_attrs, emit, arg))
		goto out_end;
	rc = db_cursor_open(txn, fs->dbi_cookies, &cur);
	if (rc)
		goto out_end;
	k = cookie_key(kb, dir, cookie < 2 ? FS_COOKIE_FIRST : cookie + 1);
	for (int op = DB_SET_RANGE;; op = DB_NEXT) {
		char name[FS_NAME_MAX + 1];
		uint64_t ino;

		rc = db_cursor_get(cur, &k, &v, op);
		if (rc == -ENOENT ||
		    (!rc && (k.size != 16 || fs_get_be64(k.data) != dir))) {
			rc = 0;
			*eof = !merging;
			break;
		}
		if (rc)
			break;
		if (v.size < 9 || v.size > 8 + FS_NAME_MAX) {
			rc = -EIO;
			break;
		}
		memcpy(&ino, v.data, 8);
		memcpy(name, (char *)v.data + 8, v.size - 8);
		name[v.size - 8] = '\0';
		if (emit_one(fs, txn, ino, name,
			     fs_get_be64((unsigned char *)k.data + 8),
			     want_attrs, emit, arg))
			break;
	}
	db_cursor_close(cur);
out_end:
	db_read_end(fs->db, txn);
	return rc;
}
