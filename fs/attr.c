/*
 * fs/attr.c - attributes: the record, overlaid for dirty regular files by
 * their cache file (the authority for size and mtime while dirty), and the
 * read-only calls built on them (GETATTR, ACCESS, READLINK, FSSTAT).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "db/db.h"
#include "fs_int.h"

/* 8 EiB, as EFS reports: the store has no meaningful capacity. */
#define FS_STATFS_BYTES (8ull << 60)
#define FS_STATFS_FILES (1ull << 40)

static bool overlaid(struct fs *fs, const struct fs_inode *in,
		     struct cache_stat *cs)
{
	return in->type == FS_REG && (in->flags & FS_F_DIRTY_DATA) &&
	       cache_stat(fs->cache, in->ino, cs) == 0;
}

int64_t fs_inode_ctime(struct fs *fs, const struct fs_inode *in)
{
	struct cache_stat cs;
	int64_t c = in->ctime;

	if (overlaid(fs, in, &cs) && fs_ts_to_ns(&cs.ctime) > c)
		c = fs_ts_to_ns(&cs.ctime);
	return c;
}

void fs_attr_fill(struct fs *fs, const struct fs_inode *in, struct fs_attr *out)
{
	struct cache_stat cs;

	memset(out, 0, sizeof(*out));
	out->ino = in->ino;
	out->gen = in->gen;
	out->type = in->type;
	out->mode = in->mode & 07777;
	out->nlink = in->nlink;
	out->uid = in->uid;
	out->gid = in->gid;
	out->size = in->type == FS_LNK ? strlen(in->target) : in->size;
	fs_rdev_get(in, &out->rdev_major, &out->rdev_minor);
	out->used = out->size;
	out->atime = fs_ns_to_ts(in->atime);
	out->mtime = fs_ns_to_ts(in->mtime);
	out->ctime = fs_ns_to_ts(in->ctime);
	out->listed = fs_listing_fresh(fs, in);
	if (overlaid(fs, in, &cs)) {
		out->size = cs.size;
		out->used = cs.blocks_bytes;
		out->mtime = cs.mtime;
		if (fs_ts_to_ns(&cs.ctime) > in->ctime)
			out->ctime = cs.ctime;
	}
}

void fs_wcc_before(struct fs *fs, const struct fs_inode *in, struct fs_wcc *wcc)
{
	struct fs_attr a;

	if (!wcc)
		return;
	fs_attr_fill(fs, in, &a);
	wcc->before_ok = true;
	wcc->before_size = a.size;
	wcc->before_mtime = a.mtime;
	wcc->before_ctime = a.ctime;
}

void fs_wcc_after(struct fs *fs, const struct fs_inode *in, struct fs_wcc *wcc)
{
	if (!wcc)
		return;
	fs_attr_fill(fs, in, &wcc->after);
	wcc->after_ok = true;
}

void fs_wcc_after_txn(struct fs *fs, struct db_txn *txn, uint64_t ino,
		      struct fs_wcc *wcc)
{
	struct fs_inode in;

	if (wcc && fs_inode_get(fs, txn, ino, &in) == 0)
		fs_wcc_after(fs, &in, wcc);
}

/* GETATTR; -ESTALE for an inode that does not exist. */
int fs_getattr(struct fs *fs, uint64_t ino, struct fs_attr *out)
{
	struct fs_inode in;
	struct db_txn *txn;
	int rc = db_read_begin(fs->db, &txn);

	if (rc)
		return rc;
	rc = fs_inode_get(fs, txn, ino, &in);
	db_read_end(fs->db, txn);
	if (rc)
		return rc;
	fs_attr_fill(fs, &in, out);
	return 0;
}

/* ACCESS (RFC 1813 3.3.4): each asked bit is granted or not, truthfully. */
int fs_access(struct fs *fs, const struct fs_ctx *ctx, uint64_t ino,
	      uint32_t want, uint32_t *granted, struct fs_attr *attr)
{
	struct fs_inode in;
	struct db_txn *txn;
	uint32_t g = 0;
	int rc = db_read_begin(fs->db, &txn);

	if (rc)
		return rc;
	rc = fs_inode_get(fs, txn, ino, &in);
	db_read_end(fs->db, txn);
	if (rc)
		return rc;
	bool dir = in.type == FS_DIR, ro = fs->opts.read_only;

	if ((want & FS_ACCESS_READ) && !fs_perm(ctx, &in, R_OK))
		g |= FS_ACCESS_READ;
	if ((want & FS_ACCESS_LOOKUP) && dir && !fs_perm(ctx, &in, X_OK))
		g |= FS_ACCESS_LOOKUP;
	if (!ro && !fs_perm(ctx, &in, W_OK)) {
		g |= want & (FS_ACCESS_MODIFY | FS_ACCESS_EXTEND);
		if (dir)
			g |= want & FS_ACCESS_DELETE;
	}
	if ((want & FS_ACCESS_EXECUTE) && !dir && !fs_perm(ctx, &in, X_OK))
		g |= FS_ACCESS_EXECUTE;
	*granted = g;
	if (attr)
		fs_attr_fill(fs, &in, attr);
	return 0;
}

/* READLINK: the target of a symlink; -EINVAL for anything else. */
int fs_readlink(struct fs *fs, const struct fs_ctx *ctx, uint64_t ino,
		char *buf, size_t cap, size_t *len, struct fs_attr *attr)
{
	struct fs_inode in;
	struct db_txn *txn;
	int rc = db_read_begin(fs->db, &txn);

	(void)ctx; /* a symlink's mode is 0777: reading it needs no right */
	if (rc)
		return rc;
	rc = fs_inode_get(fs, txn, ino, &in);
	db_read_end(fs->db, txn);
	if (rc)
		return rc;
	if (attr)
		fs_attr_fill(fs, &in, attr);
	if (in.type != FS_LNK)
		return -EINVAL;
	size_t n = strlen(in.target);

	if (n + 1 > cap)
		return -ENAMETOOLONG;
	memcpy(buf, in.target, n + 1);
	*len = n;
	return 0;
}

/* FSSTAT: the store's capacity where it has one, else EFS-like constants. */
int fs_statfs(struct fs *fs, struct fs_statfs *out)
{
	uint64_t total, avail;
	struct db_txn *txn;
	uint64_t ninodes;
	int rc;

	if (store_statfs(fs->store, &total, &avail) == 0) {
		out->total_bytes = total;
		out->free_bytes = out->avail_bytes = avail;
	} else {
		out->total_bytes = FS_STATFS_BYTES;
		out->free_bytes = out->avail_bytes = FS_STATFS_BYTES;
	}
	rc = db_read_begin(fs->db, &txn);
	if (rc)
		return rc;
	rc = db_count(txn, fs->dbi_inodes, &ninodes);
	db_read_end(fs->db, txn);
	if (rc)
		return rc;
	out->total_files = FS_STATFS_FILES + ninodes;
	out->free_files = out->avail_files = FS_STATFS_FILES;
	return 0;
}
