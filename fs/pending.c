/*
 * fs/pending.c - the queue of store work that must happen in namespace
 * order: deletes of keys whose inode went away (or moved), and copies of
 * renamed objects.  Records are committed in the same transaction as the
 * namespace change that needs them, so a crash resumes them; the syncer
 * runs them in seq order and drops each once the store confirmed it.
 *
 * In a cluster the records are shared, so that a node's queued work
 * outlives it: each node numbers its own in a range of its own (its id in
 * the top bits), runs those, and runs a dead node's (or, after a
 * migration, the ones of the gateway alone, node 0) before its own, in
 * their order.  The others' records also tell a node that an object is
 * still on its way to a key (a COPY into it) or away from one.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"
#include "fs_int.h"

struct pend_hdr {
	uint32_t op;
	uint16_t src_len, dst_len;
	uint64_t ino;
};

/* Record seq, encoded; flags for db_put. */
static int pending_put(struct fs *fs, struct db_txn *txn, uint64_t seq,
		       uint32_t op, uint64_t ino, const char *src,
		       const char *dst, unsigned flags)
{
	unsigned char buf[sizeof(struct pend_hdr) + 2 * STORE_KEY_MAX];
	struct pend_hdr h = { .op = op, .ino = ino };
	size_t sl = strlen(src), dl = dst ? strlen(dst) : 0;
	struct db_val k, v;

	if (sl > STORE_KEY_MAX || dl > STORE_KEY_MAX)
		return -ENAMETOOLONG;
	h.src_len = (uint16_t)sl;
	h.dst_len = (uint16_t)dl;
	memset(buf, 0, sizeof(h));
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), src, sl);
	if (dl)
		memcpy(buf + sizeof(h) + sl, dst, dl);
	k = (struct db_val){ sizeof(seq), &seq };
	v = (struct db_val){ sizeof(h) + sl + dl, buf };
	return db_put(txn, fs->dbi_pending, &k, &v, flags);
}

/* See fs_int.h. */
int fs_pending_set(struct fs *fs, struct db_txn *txn, uint64_t seq, uint32_t op,
		   uint64_t ino, const char *src, const char *dst)
{
	return pending_put(fs, txn, seq, op, ino, src, dst, 0);
}

/* Stamp seq with the time, unless a stamp of the last second covers it
 * (records queued later than a stamp are at least as young). */
static void pend_stamp(struct fs *fs, uint64_t seq)
{
	uint64_t now = fs_now_ms();
	struct fs_pend_stamp *last;

	pthread_mutex_lock(&fs->pend_meter_lock);
	last = fs->npend_stamps ? &fs->pend_stamps[fs->npend_stamps - 1] : NULL;
	if (last && (now - last->ms < 1000 || seq <= last->seq))
		goto out;
	if (fs->npend_stamps == fs->pend_stamps_cap) {
		size_t cap = fs->pend_stamps_cap ? fs->pend_stamps_cap * 2 : 64;
		struct fs_pend_stamp *n =
			realloc(fs->pend_stamps, cap * sizeof(*n));

		if (!n)
			goto out; /* the age reads older: never younger */
		fs->pend_stamps = n;
		fs->pend_stamps_cap = cap;
	}
	fs->pend_stamps[fs->npend_stamps++] =
		(struct fs_pend_stamp){ .seq = seq, .ms = now };
out:
	pthread_mutex_unlock(&fs->pend_meter_lock);
}

int fs_pending_add(struct fs *fs, struct db_txn *txn, uint32_t op, uint64_t ino,
		   const char *src, const char *dst)
{
	int rc;

	if (strlen(src) > STORE_KEY_MAX || (dst && strlen(dst) > STORE_KEY_MAX))
		return -ENAMETOOLONG;
	if (!*src)
		return 0; /* the root has no object */
	/* Order only matters among live records (a group run again just
	 * leaves a gap).  The db writer's, like every apply.  Alone, every
	 * new record is the last one of the table. */
	rc = pending_put(fs, txn, fs->pend_next, op, ino, src, dst,
			 db_clustered(fs->db) ? 0 : DB_APPEND);
	if (!rc)
		pend_stamp(fs, fs->pend_next);
	fs->pend_next++;
	return rc;
}

void fs_pending_ran(struct fs *fs, uint64_t n)
{
	uint64_t now = fs_now_ms(), done;
	unsigned last;

	done = atomic_fetch_add(&fs->pend_done, n) + n;
	pthread_mutex_lock(&fs->pend_meter_lock);
	last = (fs->pend_run_next + 31) % 32;
	if (now - fs->pend_runs[last].ms >= 2000) {
		fs->pend_runs[fs->pend_run_next].ms = now;
		fs->pend_runs[fs->pend_run_next].done = done;
		fs->pend_run_next = (fs->pend_run_next + 1) % 32;
	}
	pthread_mutex_unlock(&fs->pend_meter_lock);
}

static int pend_first(void *arg, const struct fs_pending *p)
{
	*(uint64_t *)arg = p->seq;
	return 1;
}

/* How many stamps are of records up to head (under pend_meter_lock). */
static size_t stamps_upto(struct fs *fs, uint64_t head)
{
	size_t lo = 0, hi = fs->npend_stamps;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (fs->pend_stamps[mid].seq <= head)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void fs_pending_meter(struct fs *fs, struct db_txn *txn, uint64_t *age_ms,
		      double *rate)
{
	uint64_t now = fs_now_ms(), head = 0, from_ms = now, from_done;
	uint64_t done = atomic_load(&fs->pend_done);
	size_t lo;
	int rc = fs_pending_each(fs, txn, pend_first, &head);

	*age_ms = 0;
	*rate = 0;
	pthread_mutex_lock(&fs->pend_meter_lock);
	from_done = done;
	/* The rate: since the oldest sample of the last minute or so. */
	for (unsigned i = 0; i < 32; i++) {
		const struct fs_pend_run *r = &fs->pend_runs[i];

		if (r->ms && now - r->ms <= 64000 && r->ms < from_ms) {
			from_ms = r->ms;
			from_done = r->done;
		}
	}
	if (now > from_ms)
		*rate = (double)(done - from_done) * 1000.0 /
			(double)(now - from_ms);
	if (rc != 1 || fs_pending_node(head) != db_node_id(fs->db))
		goto out;
	/* The last stamp at or before the head: it was queued after it. */
	lo = stamps_upto(fs, head);
	if (lo == 0)
		*age_ms = now - fs->pend_open_ms; /* from before this start */
	else
		*age_ms = now - fs->pend_stamps[lo - 1].ms;
out:
	pthread_mutex_unlock(&fs->pend_meter_lock);
}

void fs_pending_prune(struct fs *fs, uint64_t head)
{
	size_t lo;

	pthread_mutex_lock(&fs->pend_meter_lock);
	lo = stamps_upto(fs, head);
	/* Keep the last stamp at or before the head: its records' time. */
	if (lo > 1) {
		memmove(fs->pend_stamps, fs->pend_stamps + lo - 1,
			(fs->npend_stamps - lo + 1) * sizeof(*fs->pend_stamps));
		fs->npend_stamps -= lo - 1;
	}
	pthread_mutex_unlock(&fs->pend_meter_lock);
}

void fs_pending_meter_free(struct fs *fs)
{
	free(fs->pend_stamps);
	fs->pend_stamps = NULL;
	fs->npend_stamps = fs->pend_stamps_cap = 0;
	pthread_mutex_destroy(&fs->pend_meter_lock);
}

static uint64_t pend_base(uint32_t node)
{
	return (uint64_t)node << FS_PEND_NODE_SHIFT;
}

uint32_t fs_pending_node(uint64_t seq)
{
	return (uint32_t)(seq >> FS_PEND_NODE_SHIFT);
}

int fs_pending_init(struct fs *fs)
{
	uint64_t base = pend_base(db_node_id(fs->db)), seq, last = base;
	struct db_cursor *cur;
	struct db_txn *txn;
	struct db_val k, v;
	int rc = db_read_begin(fs->db, &txn), mrc;

	if (rc)
		return rc;
	rc = db_cursor_open(txn, fs->dbi_pending, &cur);
	if (rc) {
		db_read_end(fs->db, txn);
		return rc;
	}
	k = (struct db_val){ sizeof(base), &base };
	for (int op = DB_SET_RANGE; !(mrc = db_cursor_get(cur, &k, &v, op));
	     op = DB_NEXT) {
		if (k.size != sizeof(seq))
			continue;
		memcpy(&seq, k.data, sizeof(seq));
		if (fs_pending_node(seq) != db_node_id(fs->db))
			break;
		last = seq;
	}
	db_cursor_close(cur);
	db_read_end(fs->db, txn);
	if (mrc && mrc != -ENOENT)
		return mrc;
	fs->pend_next = last + 1;
	return 0;
}

bool fs_pending_adoptable(struct fs *fs, uint32_t node)
{
	return db_clustered(fs->db) && node != db_node_id(fs->db) &&
	       (!node || !db_node_up(fs->db, node));
}

/*
 * fn(arg, rec) for each record of nodes that want(fs, node) says yes to,
 * in seq order, until fn returns non-zero (that value) or the end (0).
 * The records of a node not wanted are skipped in one seek.
 */
static int pending_walk(struct fs *fs, struct db_txn *txn,
			bool (*want)(struct fs *, uint32_t),
			int (*fn)(void *, const struct fs_pending *), void *arg)
{
	struct db_cursor *cur;
	struct db_val k, v;
	uint64_t next;
	int rc = db_cursor_open(txn, fs->dbi_pending, &cur), mrc, op;

	if (rc)
		return rc;
	for (op = DB_FIRST; !(mrc = db_cursor_get(cur, &k, &v, op));) {
		struct fs_pending p;
		uint32_t node;

		op = DB_NEXT;
		if ((rc = fs_pending_decode(&k, &v, &p)))
			break;
		node = fs_pending_node(p.seq);
		if (!want(fs, node)) {
			if (node + 1 >= 1u << (64 - FS_PEND_NODE_SHIFT))
				break;
			next = pend_base(node + 1);
			k = (struct db_val){ sizeof(next), &next };
			op = DB_SET_RANGE;
			continue;
		}
		if ((rc = fn(arg, &p)))
			break;
	}
	db_cursor_close(cur);
	if (rc)
		return rc;
	return mrc == -ENOENT ? 0 : mrc;
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
	out->order = 0;
	out->op = h.op;
	out->ino = h.ino;
	memcpy(out->src, (char *)v->data + sizeof(h), h.src_len);
	out->src[h.src_len] = '\0';
	memcpy(out->dst, (char *)v->data + sizeof(h) + h.src_len, h.dst_len);
	out->dst[h.dst_len] = '\0';
	return 0;
}

static bool want_any(struct fs *fs, uint32_t node)
{
	(void)fs;
	(void)node;
	return true;
}

static bool want_mine(struct fs *fs, uint32_t node)
{
	return node == db_node_id(fs->db);
}

/* Another node's queue this node runs, or is to run: it holds the claim
 * to it, or the node is down and a claim is to come (db_queue_claimed). */
static bool want_others(struct fs *fs, uint32_t node)
{
	return node != db_node_id(fs->db) && (fs_pending_adoptable(fs, node) ||
					      db_queue_claimed(fs->db, node));
}

int fs_pending_each(struct fs *fs, struct db_txn *txn,
		    int (*fn)(void *arg, const struct fs_pending *p), void *arg)
{
	int rc = 0;

	if (db_clustered(fs->db))
		rc = pending_walk(fs, txn, want_others, fn, arg);
	return rc ? rc : pending_walk(fs, txn, want_mine, fn, arg);
}

static bool want_foreign(struct fs *fs, uint32_t node)
{
	return db_clustered(fs->db) && node != db_node_id(fs->db) &&
	       !want_others(fs, node);
}

int fs_pending_each_foreign(struct fs *fs, struct db_txn *txn,
			    int (*fn)(void *arg, const struct fs_pending *p),
			    void *arg)
{
	return pending_walk(fs, txn, want_foreign, fn, arg);
}

void fs_pending_order(struct fs *fs, struct db_txn *txn, struct fs_pending *p)
{
	struct db_val k = { sizeof(p->seq), &p->seq };

	p->order = db_commit_order(fs->db, txn, fs->dbi_pending, &k);
}

static int count_one(void *arg, const struct fs_pending *p)
{
	(void)p;
	(*(uint64_t *)arg)++;
	return 0;
}

int fs_pending_count(struct fs *fs, struct db_txn *txn, uint64_t *n)
{
	if (!db_clustered(fs->db))
		return db_count(txn, fs->dbi_pending, n); /* all are its own */
	*n = 0;
	return fs_pending_each(fs, txn, count_one, n);
}

struct find_ino {
	uint64_t ino;
	uint32_t node;
};

static int find_ino(void *arg, const struct fs_pending *p)
{
	struct find_ino *f = arg;

	if (p->ino != f->ino)
		return 0;
	f->node = fs_pending_node(p->seq);
	return 1;
}

bool fs_pending_of(struct fs *fs, struct db_txn *txn, uint64_t ino,
		   uint32_t *node)
{
	struct find_ino f = { .ino = ino };
	int rc = pending_walk(fs, txn, want_any, find_ino, &f);

	if (rc == 1 && node)
		*node = f.node;
	return rc != 0; /* an error counts as "maybe": wait */
}

int fs_pending_each_any(struct fs *fs, struct db_txn *txn,
			int (*fn)(void *arg, const struct fs_pending *p),
			void *arg)
{
	return pending_walk(fs, txn, want_any, fn, arg);
}

static int find_copy_into(void *arg, const struct fs_pending *p)
{
	return p->op == FS_PEND_COPY && !strcmp(p->dst, arg);
}

bool fs_pending_copy_into(struct fs *fs, struct db_txn *txn, const char *key)
{
	return pending_walk(fs, txn, want_any, find_copy_into, (void *)key) !=
	       0;
}

static int find_copy_from(void *arg, const struct fs_pending *p)
{
	return p->op == FS_PEND_COPY && !strcmp(p->src, arg);
}

bool fs_pending_copy_from(struct fs *fs, struct db_txn *txn, const char *key)
{
	return pending_walk(fs, txn, want_any, find_copy_from, (void *)key) !=
	       0;
}
