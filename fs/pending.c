/*
 * fs/pending.c - the queue of store work that must happen in namespace
 * order: deletes of keys whose inode went away (or moved), and copies of
 * renamed objects.  Records are committed in the same transaction as the
 * namespace change that needs them, so a crash resumes them; the syncer
 * runs them in seq order and drops each once the store confirmed it.
 */
#include <errno.h>
#include <string.h>

#include "db/db.h"
#include "fs/fs_int.h"

struct pend_hdr {
	uint32_t op;
	uint16_t src_len, dst_len;
	uint64_t ino;
};

int fs_pending_add(struct fs *fs, struct db_txn *txn, uint32_t op, uint64_t ino,
		   const char *src, const char *dst)
{
	unsigned char buf[sizeof(struct pend_hdr) + 2 * STORE_KEY_MAX];
	struct pend_hdr h = { .op = op, .ino = ino };
	size_t sl = strlen(src), dl = dst ? strlen(dst) : 0;
	struct db_cursor *cur;
	struct db_val k, v;
	uint64_t seq = 1;
	int rc;

	if (sl > STORE_KEY_MAX || dl > STORE_KEY_MAX)
		return -ENAMETOOLONG;
	if (sl == 0)
		return 0; /* the root has no object */
	h.src_len = (uint16_t)sl;
	h.dst_len = (uint16_t)dl;
	memset(buf, 0, sizeof(h));
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), src, sl);
	if (dl)
		memcpy(buf + sizeof(h) + sl, dst, dl);
	/* Order only matters among live records: the next seq is last + 1. */
	rc = db_cursor_open(txn, fs->dbi_pending, &cur);
	if (rc)
		return rc;
	rc = db_cursor_get(cur, &k, &v, DB_LAST);
	if (rc == 0 && k.size == sizeof(seq)) {
		memcpy(&seq, k.data, sizeof(seq));
		seq++;
	}
	db_cursor_close(cur);
	if (rc && rc != -ENOENT)
		return rc;
	k = (struct db_val){ sizeof(seq), &seq };
	v = (struct db_val){ sizeof(h) + sl + dl, buf };
	return db_put(txn, fs->dbi_pending, &k, &v, DB_APPEND);
}

int fs_pending_decode(const struct db_val *k, const struct db_val *v,
		      struct fs_pending *out)
{
	struct pend_hdr h;

	if (k->size != sizeof(out->seq) || v->size < sizeof(h))
		return -EIO;
	memcpy(&out->seq, k->data, sizeof(out->seq));
	memcpy(&h, v->data, sizeof(h));
	if (h.src_len > STORE_KEY_MAX || h.dst_len > STORE_KEY_MAX ||
	    v->size != sizeof(h) + h.src_len + h.dst_len)
		return -EIO;
	out->op = h.op;
	out->ino = h.ino;
	memcpy(out->src, (char *)v->data + sizeof(h), h.src_len);
	out->src[h.src_len] = '\0';
	memcpy(out->dst, (char *)v->data + sizeof(h) + h.src_len, h.dst_len);
	out->dst[h.dst_len] = '\0';
	return 0;
}
