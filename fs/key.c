/*
 * fs/key.c - inode -> store key, and the "keys" index (store key -> ino).
 *
 * The key of an inode is the names from the root down joined with '/'
 * ("a/b.txt"); the root's is "".  A directory's object is its marker
 * "a/b/".  LMDB keys are limited to 511 bytes, store keys to 1024: a long
 * store key is indexed by its first bytes plus a 64-bit hash of the whole.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "db/db.h"
#include "fs_int.h"

/* Depth bound: every level adds at least 2 bytes ("x/") to the key. */
#define FS_DEPTH_MAX (STORE_KEY_MAX / 2 + 1)

int fs_key_build(struct fs *fs, struct db_txn *txn, uint64_t ino, char *buf,
		 size_t cap)
{
	struct fs_inode in;
	size_t len = 0;
	int rc;

	if (cap == 0)
		return -ENAMETOOLONG;
	buf[0] = '\0';
	/* Walk up, prepending each name: the buffer fills from the end. */
	char tmp[STORE_KEY_MAX + 1];
	size_t pos = sizeof(tmp) - 1;

	tmp[pos] = '\0';
	for (int depth = 0; ino != FS_ROOT_INO; depth++) {
		if (depth > FS_DEPTH_MAX)
			return -EIO; /* a parent loop: corrupt database */
		rc = fs_inode_get(fs, txn, ino, &in);
		if (rc)
			return rc;
		size_t nl = strlen(in.name);
		bool sep = pos != sizeof(tmp) - 1;

		if (nl + sep > pos)
			return -ENAMETOOLONG;
		if (sep)
			tmp[--pos] = '/';
		pos -= nl;
		memcpy(tmp + pos, in.name, nl);
		ino = in.parent;
	}
	len = sizeof(tmp) - 1 - pos;
	if (len + 1 > cap)
		return -ENAMETOOLONG;
	memcpy(buf, tmp + pos, len + 1);
	return 0;
}

int fs_obj_key(struct fs *fs, struct db_txn *txn, const struct fs_inode *in,
	       char *buf, size_t cap)
{
	int rc = fs_key_build(fs, txn, in->ino, buf, cap);
	size_t len;

	if (rc || in->type != FS_DIR)
		return rc;
	len = strlen(buf);
	if (len + 2 > cap || len + 1 > fs->key_max)
		return -ENAMETOOLONG;
	buf[len] = '/';
	buf[len + 1] = '\0';
	return 0;
}

int fs_key_of(struct fs *fs, uint64_t ino, char *buf, size_t cap)
{
	struct db_txn *txn;
	int rc = db_read_begin(fs->db, &txn);

	if (rc)
		return rc;
	rc = fs_key_build(fs, txn, ino, buf, cap);
	db_read_end(fs->db, txn);
	return rc;
}

static uint64_t fnv1a64(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static struct db_val keys_dbkey(const char *key,
				char buf[FS_KEYS_DBKEY_MAX + 1])
{
	size_t n = strlen(key);

	if (n <= FS_KEYS_DBKEY_MAX)
		return (struct db_val){ n, (void *)key };
	/* A NUL cannot occur in a key, so this never equals a short key. */
	size_t head = FS_KEYS_DBKEY_MAX - 17;

	memcpy(buf, key, head);
	buf[head] = '\0';
	snprintf(buf + head + 1, 17, "%016llx",
		 (unsigned long long)fnv1a64(key, n));
	return (struct db_val){ FS_KEYS_DBKEY_MAX, buf };
}

int fs_keys_get(struct fs *fs, struct db_txn *txn, const char *key,
		uint64_t *ino)
{
	char buf[FS_KEYS_DBKEY_MAX + 1];
	struct db_val k = keys_dbkey(key, buf), v;
	int rc = db_get(txn, fs->dbi_keys, &k, &v);

	if (rc)
		return rc;
	if (v.size != sizeof(*ino))
		return -EIO;
	memcpy(ino, v.data, sizeof(*ino));
	return 0;
}

int fs_keys_put(struct fs *fs, struct db_txn *txn, const char *key,
		uint64_t ino)
{
	char buf[FS_KEYS_DBKEY_MAX + 1];
	struct db_val k = keys_dbkey(key, buf), v = { sizeof(ino), &ino };

	if (k.size == 0)
		return 0; /* the root has no object */
	return db_put(txn, fs->dbi_keys, &k, &v, 0);
}

int fs_keys_del(struct fs *fs, struct db_txn *txn, const char *key)
{
	char buf[FS_KEYS_DBKEY_MAX + 1];
	struct db_val k = keys_dbkey(key, buf);
	int rc;

	if (k.size == 0)
		return 0;
	rc = db_del(txn, fs->dbi_keys, &k);
	return rc == -ENOENT ? 0 : rc;
}
