/*
 * fs/inode.c - inode records in LMDB and their encoding, the inode
 * counter, and the work index of dirty inodes.
 *
 * A record is a fixed header of native-endian integers followed by the
 * etag, the name and the symlink target, each with a length, and the
 * owner (4 bytes; records written before owners existed end without it
 * and read as owner 0).  The format version lives in meta.  In a cluster the records are shared (every
 * node is of one byte order): all but two fields, which are the node's
 * own: the DIRTY flags (what this node must still upload) and
 * listed_at_ms (when this node last listed the directory).
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "db/db.h"
#include "fs_int.h"

struct fs_irec {
	uint32_t gen, type, mode, uid, gid, nlink, flags;
	uint16_t etag_len, name_len, target_len;
	uint64_t size;
	int64_t atime, mtime, ctime;
	uint64_t parent, next_cookie, dir_ver, listed_at_ms, synced_ms;
	uint8_t verf[8];
};

#define FS_IREC_MAX                                                            \
	(sizeof(struct fs_irec) + STORE_ETAG_MAX + FS_NAME_MAX + FS_PATH_MAX + \
	 sizeof(uint32_t))

uint32_t fs_type_ifmt(uint32_t type)
{
	switch (type) {
	case FS_REG:
		return S_IFREG;
	case FS_DIR:
		return S_IFDIR;
	case FS_BLK:
		return S_IFBLK;
	case FS_CHR:
		return S_IFCHR;
	case FS_LNK:
		return S_IFLNK;
	case FS_SOCK:
		return S_IFSOCK;
	case FS_FIFO:
		return S_IFIFO;
	}
	return 0;
}

uint32_t fs_special_type(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFIFO:
		return FS_FIFO;
	case S_IFSOCK:
		return FS_SOCK;
	case S_IFCHR:
		return FS_CHR;
	case S_IFBLK:
		return FS_BLK;
	}
	return 0;
}

void fs_rdev_set(struct fs_inode *in, uint32_t major, uint32_t minor)
{
	memcpy(in->verf, &major, 4);
	memcpy(in->verf + 4, &minor, 4);
}

void fs_rdev_get(const struct fs_inode *in, uint32_t *major, uint32_t *minor)
{
	bool dev = in->type == FS_CHR || in->type == FS_BLK;

	*major = *minor = 0;
	if (dev) {
		memcpy(major, in->verf, 4);
		memcpy(minor, in->verf + 4, 4);
	}
}

uint64_t fs_rdev_dev(const struct fs_inode *in)
{
	uint32_t major, minor;

	fs_rdev_get(in, &major, &minor);
	return makedev(major, minor);
}

void fs_rdev_from_dev(struct fs_inode *in, uint64_t dev)
{
	fs_rdev_set(in, major(dev), minor(dev));
}

int fs_inode_decode(uint64_t ino, const struct db_val *v, struct fs_inode *out)
{
	struct fs_irec r;

	if (v->size < sizeof(r))
		return -EIO;
	memcpy(&r, v->data, sizeof(r));
	size_t base = sizeof(r) + r.etag_len + r.name_len + r.target_len;

	if (r.etag_len >= STORE_ETAG_MAX || r.name_len > FS_NAME_MAX ||
	    r.target_len > FS_PATH_MAX ||
	    (v->size != base && v->size != base + sizeof(out->owner)))
		return -EIO;
	out->owner = 0;
	if (v->size > base)
		memcpy(&out->owner, (const char *)v->data + base,
		       sizeof(out->owner));
	const char *p = (const char *)v->data + sizeof(r);

	out->ino = ino;
	out->gen = r.gen;
	out->type = r.type;
	out->mode = r.mode;
	out->uid = r.uid;
	out->gid = r.gid;
	out->nlink = r.nlink;
	out->flags = r.flags;
	out->size = r.size;
	out->atime = r.atime;
	out->mtime = r.mtime;
	out->ctime = r.ctime;
	out->parent = r.parent;
	out->next_cookie = r.next_cookie;
	out->dir_ver = r.dir_ver;
	out->listed_at_ms = r.listed_at_ms;
	out->synced_ms = r.synced_ms;
	memcpy(out->verf, r.verf, sizeof(out->verf));
	memcpy(out->etag, p, r.etag_len);
	out->etag[r.etag_len] = '\0';
	p += r.etag_len;
	memcpy(out->name, p, r.name_len);
	out->name[r.name_len] = '\0';
	p += r.name_len;
	memcpy(out->target, p, r.target_len);
	out->target[r.target_len] = '\0';
	return 0;
}

int fs_inode_get(struct fs *fs, struct db_txn *txn, uint64_t ino,
		 struct fs_inode *out)
{
	struct db_val k = { sizeof(ino), &ino }, v;
	int rc = db_get(txn, fs->dbi_inodes, &k, &v);

	if (rc == -ENOENT)
		return -ESTALE;
	return rc ? rc : fs_inode_decode(ino, &v, out);
}

int fs_inode_put(struct fs *fs, struct db_txn *txn, const struct fs_inode *in)
{
	unsigned char buf[FS_IREC_MAX];
	size_t el = strlen(in->etag), nl = strlen(in->name),
	       tl = strlen(in->target);
	struct fs_irec r;

	if (el >= STORE_ETAG_MAX || nl > FS_NAME_MAX || tl > FS_PATH_MAX)
		return -EINVAL;
	memset(&r, 0, sizeof(r)); /* no stray padding bytes on disk */
	r.gen = in->gen;
	r.type = in->type;
	r.mode = in->mode;
	r.uid = in->uid;
	r.gid = in->gid;
	r.nlink = in->nlink;
	r.flags = in->flags;
	r.etag_len = (uint16_t)el;
	r.name_len = (uint16_t)nl;
	r.target_len = (uint16_t)tl;
	r.size = in->size;
	r.atime = in->atime;
	r.mtime = in->mtime;
	r.ctime = in->ctime;
	r.parent = in->parent;
	r.next_cookie = in->next_cookie;
	r.dir_ver = in->dir_ver;
	r.listed_at_ms = in->listed_at_ms;
	r.synced_ms = in->synced_ms;
	memcpy(r.verf, in->verf, sizeof(r.verf));
	memcpy(buf, &r, sizeof(r));
	memcpy(buf + sizeof(r), in->etag, el);
	memcpy(buf + sizeof(r) + el, in->name, nl);
	memcpy(buf + sizeof(r) + el + nl, in->target, tl);
	memcpy(buf + sizeof(r) + el + nl + tl, &in->owner, sizeof(in->owner));

	uint64_t ino = in->ino;
	struct db_val k = { sizeof(ino), &ino };
	struct db_val v = { sizeof(r) + el + nl + tl + sizeof(in->owner), buf };

	return db_put(txn, fs->dbi_inodes, &k, &v, 0);
}

int fs_inode_del(struct fs *fs, struct db_txn *txn, uint64_t ino)
{
	struct db_val k = { sizeof(ino), &ino };
	int rc;

	rc = db_del(txn, fs->dbi_work, &k);
	if (rc && rc != -ENOENT)
		return rc;
	return db_del(txn, fs->dbi_inodes, &k);
}

/* See struct db_share_ops: the record without the node's own fields. */
static int irec_project(const struct db_val *local, void *out, size_t cap,
			size_t *len)
{
	struct fs_irec r;

	if (local->size < sizeof(r) || local->size > cap)
		return -EIO;
	memcpy(&r, local->data, sizeof(r));
	r.flags &= ~(uint32_t)FS_F_DIRTY;
	r.listed_at_ms = 0;
	memcpy(out, &r, sizeof(r));
	memcpy((char *)out + sizeof(r), (const char *)local->data + sizeof(r),
	       local->size - sizeof(r));
	*len = local->size;
	return 0;
}

/* Another node's record, with this node's own fields kept. */
static int irec_merge(const struct db_val *shared, const struct db_val *local,
		      void *out, size_t cap, size_t *len)
{
	struct fs_irec r, l;

	if (shared->size < sizeof(r) || shared->size > cap)
		return -EIO;
	memcpy(&r, shared->data, sizeof(r));
	if (local && local->size >= sizeof(l)) {
		memcpy(&l, local->data, sizeof(l));
		r.flags |= l.flags & FS_F_DIRTY;
		r.listed_at_ms = l.listed_at_ms;
	}
	memcpy(out, &r, sizeof(r));
	memcpy((char *)out + sizeof(r), (const char *)shared->data + sizeof(r),
	       shared->size - sizeof(r));
	*len = shared->size;
	return 0;
}

const struct db_share_ops fs_inode_share = {
	.project = irec_project,
	.merge = irec_merge,
	.max = FS_IREC_MAX,
};

int fs_meta_get_u64(struct fs *fs, struct db_txn *txn, const char *name,
		    uint64_t *out)
{
	struct db_val k = { strlen(name), (void *)name }, v;
	int rc = db_get(txn, fs->dbi_meta, &k, &v);

	if (rc)
		return rc;
	if (v.size != sizeof(*out))
		return -EIO;
	memcpy(out, v.data, sizeof(*out));
	return 0;
}

int fs_meta_put_u64(struct fs *fs, struct db_txn *txn, const char *name,
		    uint64_t val)
{
	struct db_val k = { strlen(name), (void *)name },
		      v = { sizeof(val), &val };

	return db_put(txn, fs->dbi_meta, &k, &v, 0);
}

int fs_meta_next_ino(struct fs *fs, uint64_t *next)
{
	struct db_txn *txn;
	int rc = db_read_begin(fs->db, &txn);

	if (rc)
		return rc;
	rc = fs_meta_get_u64(fs, txn, "next_ino", next);
	db_read_end(fs->db, txn);
	return rc == -ENOENT ? 0 : rc;
}

int fs_meta_note_ino(struct fs *fs, struct db_txn *txn, uint64_t ino)
{
	uint64_t next = 0;
	int rc;

	/* In a cluster the numbers are the cluster's counter's: this one
	 * key would make every create wait for the one before it. */
	if (db_clustered(fs->db))
		return 0;
	rc = fs_meta_get_u64(fs, txn, "next_ino", &next);

	if (rc && rc != -ENOENT)
		return rc;
	if (next > ino)
		return 0;
	return fs_meta_put_u64(fs, txn, "next_ino", ino + 1);
}

/* Inode numbers one node takes from the cluster's counter at a time. */
#define FS_INO_BLOCK 4096

static void ino_fetch_job(struct fs *fs, void *arg)
{
	uint64_t first = 0;

	(void)arg;
	if (db_alloc_ids(fs->db, FS_INO_BLOCK, &first))
		first = 0; /* retried at the next allocation */
	pthread_mutex_lock(&fs->ino_lock);
	fs->ino_next_first = first;
	fs->ino_fetching = false;
	pthread_mutex_unlock(&fs->ino_lock);
}

uint64_t fs_ino_alloc(struct fs *fs)
{
	uint64_t ino = 0;
	bool fetch;

	if (!db_clustered(fs->db))
		return atomic_fetch_add(&fs->next_ino, 1);
	/* Numbers are handed out by many nodes: a block at a time, the
	 * next one fetched off the caller's thread (a loop must not wait
	 * for the database). */
	pthread_mutex_lock(&fs->ino_lock);
	if (fs->next_ino >= fs->ino_end && fs->ino_next_first) {
		fs->next_ino = fs->ino_next_first;
		fs->ino_end = fs->ino_next_first + FS_INO_BLOCK;
		fs->ino_next_first = 0;
	}
	if (fs->next_ino < fs->ino_end)
		ino = fs->next_ino++;
	fetch = !fs->ino_fetching && !fs->ino_next_first &&
		fs->ino_end - fs->next_ino < FS_INO_BLOCK / 2;
	if (fetch)
		fs->ino_fetching = true;
	pthread_mutex_unlock(&fs->ino_lock);
	if (fetch)
		fs_defer(fs, ino_fetch_job, NULL);
	return ino;
}

int fs_ino_blocks_start(struct fs *fs)
{
	uint64_t first;
	int rc = db_alloc_ids(fs->db, FS_INO_BLOCK, &first);

	if (rc)
		return rc;
	fs->next_ino = first;
	fs->ino_end = first + FS_INO_BLOCK;
	return 0;
}

/*
 * Check (or write, on a fresh database) the format version and load the
 * inode counter.  Runs in the start-up write transaction.
 */
int fs_meta_init(struct fs *fs, struct db_txn *txn)
{
	uint64_t version, next;
	int rc = fs_meta_get_u64(fs, txn, "version", &version);

	if (rc == -ENOENT) {
		rc = fs_meta_put_u64(fs, txn, "version", FS_FORMAT_VERSION);
		if (!rc)
			rc = fs_meta_put_u64(fs, txn, "next_ino",
					     FS_ROOT_INO + 1);
		if (rc)
			return rc;
	} else if (rc) {
		return rc;
	} else if (version != FS_FORMAT_VERSION) {
		return -EPROTO;
	}
	rc = fs_meta_get_u64(fs, txn, "next_ino", &next);
	if (rc)
		return rc;
	atomic_store(&fs->next_ino, next);
	return 0;
}

int fs_inode_mark(struct fs *fs, struct db_txn *txn, struct fs_inode *in,
		  uint32_t dirty)
{
	uint64_t ino = in->ino;
	struct db_val k = { sizeof(ino), &ino }, v = { 0, "" };

	in->flags |= dirty & FS_F_DIRTY;
	if (!(in->flags & FS_F_DIRTY))
		return 0;
	return db_put(txn, fs->dbi_work, &k, &v, 0);
}

int fs_work_sync(struct fs *fs, struct db_txn *txn, const struct fs_inode *in)
{
	uint64_t ino = in->ino;
	struct db_val k = { sizeof(ino), &ino };
	int rc;

	if (in->flags & FS_F_DIRTY)
		return 0;
	rc = db_del(txn, fs->dbi_work, &k);
	return rc == -ENOENT ? 0 : rc;
}

/* See fs.h: a fresh directory completes inline, else on a worker. */
bool fs_listing_fresh(struct fs *fs, const struct fs_inode *in)
{
	/* A TTL of 0 is always stale, however the coarse clock lags. */
	return in->type == FS_DIR && in->listed_at_ms && fs->opts.dir_ttl_ms &&
	       in->listed_at_ms + fs->opts.dir_ttl_ms > fs_now_coarse_ms();
}
