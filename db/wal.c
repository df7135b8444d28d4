/*
 * db/wal.c - the local engine's log: a commit durable with one flush.
 *
 * LMDB makes a commit durable with two flushes in order (its pages, then
 * its meta page), one commit at a time.  Here LMDB runs unflushed
 * (MDB_NOSYNC) and each top-level commit is made durable by one record
 * of its puts and deletes (logged as they are made: db_wal_put, ...),
 * appended to STATE/db/wal and flushed once.  The log's blocks are
 * written once when it is made, so a record's fdatasync changes no
 * metadata of the file system: one flush of the disk.
 *
 * Why LMDB stays whole: a checkpoint (every WAL_CKPT_COMMITS commits,
 * after WAL_CKPT_MS, when LMDB's file grew by WAL_CKPT_GROW pages, or
 * when the log is full) flushes LMDB
 * (mdb_env_sync), saves a copy of its meta page and the checkpoint's
 * txnid in STATE/db/wal.ckpt (two slots, checksummed, flushed), starts
 * a new epoch of the log at its start, and then moves a read
 * transaction it holds to that snapshot.  LMDB never reuses a page a
 * reader may still see, so no commit after the checkpoint writes over a
 * page of the checkpoint's tree: what a crash tears is a page of a
 * later commit, or a meta page.
 *
 * A start after a crash: before LMDB opens, if a meta page on disk is
 * newer than the last checkpoint, both meta pages become the
 * checkpoint's copy (db_wal_prepare): LMDB opens the checkpoint's
 * snapshot, whole.  Then the records of the checkpoint's epoch are
 * applied in order (sequence numbers consecutive, checksums right: a
 * torn last record ends the log, and its commit had not answered), and
 * a checkpoint makes that the new start.  A crash during a checkpoint
 * finds the previous slot and the previous epoch's records, which stay
 * until the new slot is flushed.  A clean close checkpoints.
 *
 * The one thing taken from LMDB's file format: where a meta page keeps
 * its txnid (META_TXNID_AT, LMDB 0.9).  A checkpoint that does not find
 * the txnid it expects there gives the log up (LMDB flushes again).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/mono.h"
#include "metrics/metrics.h"
#include "wal_int.h"

#define WAL_FILE "wal"
#define WAL_CKPT_FILE "wal.ckpt"
#define WAL_SIZE (32ull << 20)    /* the log's bytes, written once, at most */
#define WAL_SIZE_MIN (1ull << 20) /* ... at least (a 64th of its disk) */
#define WAL_CKPT_COMMITS 256      /* commits between checkpoints, at most */
#define WAL_CKPT_MS 2000          /* time between them, at most (at a commit) */
/* LMDB's file grown by this many pages since the checkpoint: the pages
 * freed meanwhile wait for the next one (the checkpoint's snapshot is
 * held), so an interval's churn is what the file may grow by. */
#define WAL_CKPT_GROW 512
#define WAL_MAGIC 0x4c41574du  /* "MWAL" */
#define CKPT_MAGIC 0x54504b43u /* "CKPT" */
#define CKPT_SLOT 16384        /* a slot: header and one meta page */
#define META_TXNID_AT 144      /* mm_txnid in an LMDB 0.9 meta page */

enum { OP_PUT = 1, OP_DEL = 2, OP_DROP = 3 };

struct wal_hdr {
	uint32_t magic, crc; /* crc of what follows it, the payload too */
	uint64_t epoch, lsn;
	uint32_t len, pad; /* payload bytes */
};

struct ckpt_hdr {
	uint32_t magic, crc; /* crc of what follows it, the page too */
	uint64_t epoch, txnid;
	uint32_t psize, pad;
};

struct db_wal {
	int fd, ckfd;
	uint64_t size;             /* the log file's bytes */
	uint64_t epoch, lsn, head; /* the last record's number, the next's
				      offset */
	unsigned since;            /* commits since the checkpoint */
	uint64_t ckpt_ns;          /* when it was made */
	uint64_t ckpt_pgno;        /* LMDB's last page then */
	bool unflushed;            /* a lazy commit's record not flushed */
	MDB_txn *pin;              /* the checkpoint's snapshot, held */
	struct {
		char name[DB_TABLE_NAME_MAX];
		unsigned flags;
	} t[DB_TABLES_MAX + 8];
};

/* ---- helpers ------------------------------------------------------------ */

static uint32_t crc_tab[256];

/* CRC-32C, table made on first use (before any thread logs). */
static void crc_init(void)
{
	if (crc_tab[1])
		return;
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_tab[i] = c;
	}
}

static uint32_t crc(uint32_t c, const void *p, size_t n)
{
	const uint8_t *b = p;

	c = ~c;
	while (n--)
		c = crc_tab[(c ^ *b++) & 0xff] ^ (c >> 8);
	return ~c;
}

static int path_of(const char *dir, const char *name, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
				  (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ENODATA;
		done += (size_t)n;
	}
	return 0;
}

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done,
				   (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return 0;
}

static int dir_fsync(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return -errno;
	rc = fsync(fd) ? -errno : 0;
	close(fd);
	return rc;
}

/* ---- the checkpoint file --------------------------------------------- */

/* The newest whole slot: 0 with *h and *page (h->psize bytes, the
 * caller's to free), or -ENOENT if there is none. */
static int ckpt_read(int fd, struct ckpt_hdr *h, uint8_t **page)
{
	uint8_t *slot = malloc(CKPT_SLOT);
	bool found = false;

	*page = NULL;
	if (!slot)
		return -ENOMEM;
	for (uint64_t i = 0; i < 2; i++) {
		struct ckpt_hdr c;

		if (pread_all(fd, slot, CKPT_SLOT, i * CKPT_SLOT))
			continue;
		memcpy(&c, slot, sizeof(c));
		if (c.magic != CKPT_MAGIC || !c.psize ||
		    c.psize > CKPT_SLOT - sizeof(c) ||
		    crc(0, slot + 8, sizeof(c) - 8 + c.psize) != c.crc ||
		    (found && c.epoch <= h->epoch))
			continue;
		free(*page);
		if (!(*page = malloc(c.psize))) {
			free(slot);
			return -ENOMEM;
		}
		memcpy(*page, slot + sizeof(c), c.psize);
		*h = c;
		found = true;
	}
	free(slot);
	return found ? 0 : -ENOENT;
}

static uint64_t meta_txnid(const uint8_t *page)
{
	uint64_t t;

	memcpy(&t, page + META_TXNID_AT, sizeof(t));
	return t;
}

int db_wal_prepare(const char *dir)
{
	char p[4096];
	struct ckpt_hdr h;
	uint8_t *page = NULL, *cur = NULL;
	uint64_t newest = 0;
	int ck, fd = -1, rc;

	crc_init();
	if ((rc = path_of(dir, WAL_CKPT_FILE, p, sizeof(p))))
		return rc;
	ck = open(p, O_RDONLY | O_CLOEXEC);
	if (ck < 0)
		return errno == ENOENT ? 0 : -errno;
	rc = ckpt_read(ck, &h, &page);
	close(ck);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	if ((rc = path_of(dir, "data.mdb", p, sizeof(p))))
		goto out;
	fd = open(p, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		rc = errno == ENOENT ? 0 : -errno;
		goto out;
	}
	if (!(cur = malloc(h.psize))) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint64_t i = 0; i < 2; i++) {
		if ((rc = pread_all(fd, cur, h.psize, i * h.psize)))
			goto out;
		if (meta_txnid(cur) > newest)
			newest = meta_txnid(cur);
	}
	if (newest <= h.txnid)
		goto out; /* nothing after the checkpoint reached the disk */
	log_info("state %s: not closed cleanly: back to the last checkpoint "
		 "(txn %" PRIu64 "), then the log",
		 dir, h.txnid);
	for (uint64_t i = 0; i < 2; i++) {
		memcpy(page, &i, sizeof(i)); /* the page's own number */
		if ((rc = pwrite_all(fd, page, h.psize, i * h.psize)))
			goto out;
	}
	if (fdatasync(fd))
		rc = -errno;
out:
	if (fd >= 0)
		close(fd);
	free(cur);
	free(page);
	return rc;
}

/* ---- what a transaction changed --------------------------------------- */

static void buf_add(struct wal_buf *b, const void *p, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		uint8_t *np;

		while (cap < b->len + n)
			cap *= 2;
		if (!(np = realloc(b->p, cap))) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

/* One change: kind, the table's name's length, its LMDB flags, the
 * key's and the value's lengths, the name, the key, the value. */
static void log_op(struct db_txn *t, uint8_t kind, unsigned dbi,
		   const struct db_val *k, const struct db_val *v)
{
	struct db_wal *w = t->db->wal;
	uint32_t n[3];
	uint8_t nl;

	if (!w)
		return;
	if (!t->wb && !(t->wb = calloc(1, sizeof(*t->wb)))) {
		/* Not kept: its commit then checkpoints (db_wal_commit
		 * finds no record for a txn that changed something). */
		t->lost = true;
		return;
	}
	t->wb->nops++;
	if (dbi >= sizeof(w->t) / sizeof(w->t[0]) || !w->t[dbi].name[0]) {
		t->wb->oom = 1; /* a table the log cannot name */
		return;
	}
	nl = (uint8_t)strlen(w->t[dbi].name);
	n[0] = w->t[dbi].flags;
	n[1] = k ? (uint32_t)k->size : 0;
	n[2] = v ? (uint32_t)v->size : 0;
	buf_add(t->wb, &kind, 1);
	buf_add(t->wb, &nl, 1);
	buf_add(t->wb, n, sizeof(n));
	buf_add(t->wb, w->t[dbi].name, nl);
	if (k)
		buf_add(t->wb, k->data, k->size);
	if (v)
		buf_add(t->wb, v->data, v->size);
}

void db_wal_put(struct db_txn *t, unsigned dbi, const struct db_val *k,
		const struct db_val *v)
{
	log_op(t, OP_PUT, dbi, k, v);
}

void db_wal_del(struct db_txn *t, unsigned dbi, const struct db_val *k)
{
	log_op(t, OP_DEL, dbi, k, NULL);
}

void db_wal_drop(struct db_txn *t, unsigned dbi)
{
	log_op(t, OP_DROP, dbi, NULL, NULL);
}

void db_wal_merge(struct db_txn *parent, struct db_txn *child)
{
	struct wal_buf *c = child->wb;

	child->wb = NULL;
	parent->lost |= child->lost;
	if (!c)
		return;
	if (!parent->wb) {
		parent->wb = c;
		return;
	}
	if (c->oom)
		parent->wb->oom = 1;
	buf_add(parent->wb, c->p, c->len);
	parent->wb->nops += c->nops;
	free(c->p);
	free(c);
}

void db_wal_discard(struct db_txn *t)
{
	if (t->wb)
		free(t->wb->p);
	free(t->wb);
	t->wb = NULL;
	t->lost = false;
}

void db_wal_table(struct db *db, unsigned dbi, const char *name, unsigned flags)
{
	struct db_wal *w = db->wal;

	if (!w || !name || dbi >= sizeof(w->t) / sizeof(w->t[0]))
		return;
	snprintf(w->t[dbi].name, sizeof(w->t[dbi].name), "%s", name);
	w->t[dbi].flags = flags;
}

/* ---- checkpoints and commits ------------------------------------------ */

static int checkpoint(struct db *db)
{
	struct db_wal *w = db->wal;
	struct ckpt_hdr h = { .magic = CKPT_MAGIC, .epoch = w->epoch + 1 };
	uint8_t *slot = NULL;
	MDB_envinfo info;
	MDB_stat st;
	MDB_txn *pin;
	int fd, rc;

	if ((rc = db_err(mdb_env_sync(db->env, 1))) ||
	    (rc = db_err(mdb_env_info(db->env, &info))) ||
	    (rc = db_err(mdb_env_stat(db->env, &st))) ||
	    (rc = db_err(mdb_env_get_fd(db->env, &fd))))
		return rc;
	metrics_add(MET_FLUSH_DB, 2);
	h.psize = st.ms_psize;
	h.txnid = info.me_last_txnid;
	if (h.psize > CKPT_SLOT - sizeof(h))
		return -EPROTO;
	if (!(slot = calloc(1, CKPT_SLOT)))
		return -ENOMEM;
	/* The meta page of the last commit: one of the first two. */
	for (uint64_t i = 0; i < 2; i++) {
		if ((rc = pread_all(fd, slot + sizeof(h), h.psize,
				    i * h.psize)))
			goto out;
		if (meta_txnid(slot + sizeof(h)) == h.txnid)
			break;
	}
	if (meta_txnid(slot + sizeof(h)) != h.txnid) {
		log_error("state %s: no meta page of txn %" PRIu64
			  " where LMDB 0.9 keeps it",
			  db->dir, h.txnid);
		rc = -EPROTO;
		goto out;
	}
	memcpy(slot, &h, sizeof(h));
	h.crc = crc(0, slot + 8, sizeof(h) - 8 + h.psize);
	memcpy(slot, &h, sizeof(h));
	if ((rc = pwrite_all(w->ckfd, slot, CKPT_SLOT,
			     (h.epoch % 2) * CKPT_SLOT)))
		goto out;
	if (fdatasync(w->ckfd)) {
		rc = -errno;
		goto out;
	}
	/* The new start is durable: the log begins again, and the
	 * snapshot whose pages must stay is this one. */
	w->epoch = h.epoch;
	w->lsn = 0;
	w->head = 0;
	w->since = 0;
	w->unflushed = false; /* LMDB synced: every commit is durable */
	w->ckpt_ns = mono_ns();
	w->ckpt_pgno = info.me_last_pgno;
	if ((rc = db_err(mdb_txn_begin(db->env, NULL, MDB_RDONLY, &pin))))
		goto out;
	if (w->pin)
		mdb_txn_abort(w->pin);
	w->pin = pin;
out:
	free(slot);
	return rc;
}

static void wal_free(struct db_wal *w)
{
	if (w->pin)
		mdb_txn_abort(w->pin);
	if (w->fd >= 0)
		close(w->fd);
	if (w->ckfd >= 0)
		close(w->ckfd);
	free(w);
}

/*
 * A checkpoint instead of a record (the commit is in LMDB already: the
 * checkpoint makes it durable with everything before it).  One that
 * fails gives the log up: LMDB flushes its commits from then on.
 */
static int ckpt_or_off(struct db *db)
{
	struct db_wal *w = db->wal;
	int rc = checkpoint(db);

	if (!rc)
		return 0;
	log_error("state %s: a checkpoint failed (%s): the log is given up, "
		  "LMDB flushes every commit from now (slower; a restart "
		  "tries the log again)",
		  db->dir, strerror(-rc));
	db->wal_failures++;
	db->wal_failed = true;
	metrics_inc(MET_DB_LOG_FAILURES);
	mdb_env_set_flags(db->env, MDB_NOSYNC, 0);
	rc = db_err(mdb_env_sync(db->env, 1));
	db->wal = NULL;
	wal_free(w);
	return rc;
}

bool db_wal_unflushed(struct db *db)
{
	bool u;

	pthread_mutex_lock(&db->wal_lock);
	u = db->wal && db->wal->unflushed;
	pthread_mutex_unlock(&db->wal_lock);
	return u;
}

int db_wal_flush(struct db *db)
{
	struct db_wal *w;
	int rc = 0;

	pthread_mutex_lock(&db->wal_lock);
	w = db->wal;
	if (w && w->unflushed) {
		if (fdatasync(w->fd)) {
			rc = -errno;
			log_error("state %s: flushing the log: %s", db->dir,
				  strerror(-rc));
			rc = ckpt_or_off(db);
		} else {
			w->unflushed = false;
		}
		metrics_inc(MET_FLUSH_DB);
	}
	pthread_mutex_unlock(&db->wal_lock);
	return rc;
}

void db_wal_usage(struct db *db, struct db_usage *u)
{
	struct db_wal *w = db->wal;

	u->log_on = w != NULL;
	u->log_failed = db->wal_failed;
	u->log_failures = db->wal_failures;
	u->log_ckpt_age_ms = w ? (mono_ns() - w->ckpt_ns) / 1000000u : 0;
}

int db_wal_commit(struct db *db, struct db_txn *t)
{
	struct db_wal *w = db->wal;
	struct wal_buf *b = t->wb;
	struct wal_hdr h = { .magic = WAL_MAGIC };
	MDB_envinfo info = { 0 };
	uint8_t *rec;
	uint64_t len;
	bool lost = t->lost;
	int rc;

	if (!w)
		return 0;
	if (!lost && (!b || !b->nops)) {
		db_wal_discard(t);
		/* Nothing of its own to log; but a durable commit promises
		 * everything before it (an empty one is how a caller waits
		 * for the lazy records it queued, cache/ring.c): those not
		 * flushed yet are flushed now. */
		if (t->lazy || !w->unflushed)
			return 0;
		metrics_inc(MET_FLUSH_DB);
		if (fdatasync(w->fd)) {
			log_error("state %s: flushing the log: %s", db->dir,
				  strerror(errno));
			return ckpt_or_off(db);
		}
		w->unflushed = false;
		return 0;
	}
	len = b ? (sizeof(h) + b->len + 7) & ~7ull : 0;
	mdb_env_info(db->env, &info);
	/* What the log cannot take a checkpoint makes durable: a change
	 * not kept, a record past a quarter of the log (a record never
	 * spans the log's end). */
	if (lost || b->oom || len > w->size / 4 || w->head + len > w->size ||
	    w->since >= WAL_CKPT_COMMITS ||
	    info.me_last_pgno > w->ckpt_pgno + WAL_CKPT_GROW ||
	    mono_ns() - w->ckpt_ns > WAL_CKPT_MS * 1000000ull ||
	    !(rec = malloc(len))) {
		db_wal_discard(t);
		return ckpt_or_off(db);
	}
	h.epoch = w->epoch;
	h.lsn = w->lsn + 1;
	h.len = (uint32_t)b->len;
	h.crc = crc(crc(0, (uint8_t *)&h + 8, sizeof(h) - 8), b->p, b->len);
	memcpy(rec, &h, sizeof(h));
	memcpy(rec + sizeof(h), b->p, b->len);
	memset(rec + sizeof(h) + b->len, 0, len - sizeof(h) - b->len);
	db_wal_discard(t);
	rc = pwrite_all(w->fd, rec, len, w->head);
	free(rec);
	/* A lazy commit's record waits for db_wal_flush (or the next
	 * durable commit's flush, which covers every record before it). */
	if (!rc && !t->lazy) {
		if (fdatasync(w->fd))
			rc = -errno;
		metrics_inc(MET_FLUSH_DB);
	}
	if (!rc)
		w->unflushed = t->lazy;
	if (rc) {
		/* The commit is in LMDB, and later ones build on it: a
		 * checkpoint makes it durable, or the log is given up. */
		log_error("state %s: writing the log: %s", db->dir,
			  strerror(-rc));
		return ckpt_or_off(db);
	}
	w->lsn++;
	w->head += len;
	w->since++;
	return 0;
}

/* ---- replay ------------------------------------------------------------- */

static int replay_rec(struct db *db, MDB_txn *txn, const uint8_t *p, size_t len)
{
	size_t at = 0;

	while (at < len) {
		char name[DB_TABLE_NAME_MAX];
		uint32_t n[3];
		uint8_t kind, nl;
		MDB_val k, v;
		MDB_dbi dbi;
		int rc;

		if (at + 2 + sizeof(n) > len)
			return -EIO;
		kind = p[at];
		nl = p[at + 1];
		memcpy(n, p + at + 2, sizeof(n));
		at += 2 + sizeof(n);
		if (!nl || nl >= sizeof(name) ||
		    (uint64_t)at + nl + n[1] + n[2] > len)
			return -EIO;
		memcpy(name, p + at, nl);
		name[nl] = '\0';
		at += nl;
		k = (MDB_val){ n[1], (void *)(p + at) };
		at += n[1];
		v = (MDB_val){ n[2], (void *)(p + at) };
		at += n[2];
		rc = mdb_dbi_open(txn, name,
				  (n[0] & MDB_INTEGERKEY) | MDB_CREATE, &dbi);
		if (!rc && kind == OP_PUT)
			rc = mdb_put(txn, dbi, &k, &v, 0);
		else if (!rc && kind == OP_DEL)
			rc = mdb_del(txn, dbi, &k, NULL);
		else if (!rc && kind == OP_DROP)
			rc = mdb_drop(txn, dbi, 0);
		else if (!rc)
			rc = MDB_CORRUPTED;
		if (rc == MDB_NOTFOUND)
			rc = 0;
		if (rc) {
			log_error("state %s: replaying the log into %s: %s",
				  db->dir, name, mdb_strerror(rc));
			return db_err(rc);
		}
	}
	return 0;
}

/* Apply the records of the checkpoint's epoch, in order, until one is
 * not the next or not whole.  *n: how many. */
static int replay(struct db *db, uint64_t *n)
{
	struct db_wal *w = db->wal;
	uint64_t at = 0;
	MDB_txn *txn = NULL;
	uint8_t *p = NULL;
	int rc = 0;

	*n = 0;
	while (!rc && at + sizeof(struct wal_hdr) <= w->size) {
		struct wal_hdr h;
		uint8_t *np;

		if (pread_all(w->fd, &h, sizeof(h), at) ||
		    h.magic != WAL_MAGIC || h.epoch != w->epoch ||
		    h.lsn != *n + 1 || h.len > w->size - at - sizeof(h))
			break;
		if (!(np = realloc(p, h.len ? h.len : 1))) {
			rc = -ENOMEM;
			break;
		}
		p = np;
		if (pread_all(w->fd, p, h.len, at + sizeof(h)) ||
		    crc(crc(0, (uint8_t *)&h + 8, sizeof(h) - 8), p, h.len) !=
			    h.crc)
			break;
		if (!txn &&
		    (rc = db_err(mdb_txn_begin(db->env, NULL, 0, &txn))))
			break;
		rc = replay_rec(db, txn, p, h.len);
		(*n)++;
		at += (sizeof(h) + h.len + 7) & ~7ull;
	}
	free(p);
	if (txn && !rc)
		rc = db_err(mdb_txn_commit(txn));
	else if (txn)
		mdb_txn_abort(txn);
	return rc;
}

/*
 * The log file, its bytes written once (zeros): a record's flush then
 * changes no metadata of the file system (blocks only allocated ahead
 * would change their extents' state at first use).  A new one is a
 * 64th of its disk, WAL_SIZE_MIN to WAL_SIZE; one that exists keeps its
 * size.  *size: its bytes.
 */
static int log_file(const char *dir, int *out, uint64_t *size)
{
	static const uint8_t zero[1 << 16];
	char p[4096];
	struct stat sb = { 0 };
	struct statvfs vfs;
	uint64_t want = WAL_SIZE;
	int fd, rc;

	if ((rc = path_of(dir, WAL_FILE, p, sizeof(p))))
		return rc;
	fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0)
		rc = -errno;
	if ((uint64_t)sb.st_size >= WAL_SIZE_MIN)
		want = (uint64_t)sb.st_size & ~(sizeof(zero) - 1);
	else if (!fstatvfs(fd, &vfs) &&
		 (uint64_t)vfs.f_blocks * vfs.f_frsize / 64 < want)
		want = (uint64_t)vfs.f_blocks * vfs.f_frsize / 64;
	if (want < WAL_SIZE_MIN)
		want = WAL_SIZE_MIN;
	for (uint64_t at = (uint64_t)sb.st_size & ~(sizeof(zero) - 1);
	     !rc && at < want; at += sizeof(zero))
		rc = pwrite_all(fd, zero, sizeof(zero), at);
	if (!rc && (uint64_t)sb.st_size < want && fsync(fd))
		rc = -errno;
	if (rc) {
		close(fd);
		unlink(p); /* no half log: the next start tries again */
		return rc;
	}
	*out = fd;
	*size = want;
	return 0;
}

/* The log's files gone, durably (an environment no longer logged). */
static int log_remove(const char *dir)
{
	char p[4096];
	int rc;

	if ((rc = path_of(dir, WAL_CKPT_FILE, p, sizeof(p))))
		return rc;
	if (unlink(p) && errno != ENOENT)
		return -errno;
	if ((rc = path_of(dir, WAL_FILE, p, sizeof(p))))
		return rc;
	if (unlink(p) && errno != ENOENT)
		return -errno;
	return dir_fsync(dir);
}

int db_wal_open(struct db *db, bool logging)
{
	char p[4096];
	struct db_wal *w;
	struct ckpt_hdr h;
	uint8_t *page = NULL;
	uint64_t n = 0;
	int rc;

	crc_init();
	if ((rc = path_of(db->dir, WAL_CKPT_FILE, p, sizeof(p))))
		return rc;
	if (!logging) {
		/* Only what a logged run left: replayed, then no log. */
		if (access(p, F_OK))
			return errno == ENOENT ? 0 : -errno;
		if ((rc = db_wal_open(db, true)))
			return rc;
		db_wal_close(db);
		return log_remove(db->dir);
	}
	if (!(w = calloc(1, sizeof(*w))))
		return -ENOMEM;
	w->fd = -1;
	w->ckfd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (w->ckfd < 0) {
		rc = -errno;
		wal_free(w);
		return rc;
	}
	if ((rc = log_file(db->dir, &w->fd, &w->size))) {
		/* No room for it (a small state disk): LMDB flushes. What a
		 * log left here was replayed by the open before this one, or
		 * needed its file, which is not there either. */
		log_warn("state %s: no log (%s): every commit flushed by "
			 "LMDB, two flushes",
			 db->dir, strerror(-rc));
		wal_free(w);
		mdb_env_set_flags(db->env, MDB_NOSYNC, 0);
		if ((rc = db_err(mdb_env_sync(db->env, 1))))
			return rc;
		return log_remove(db->dir);
	}
	rc = ckpt_read(w->ckfd, &h, &page);
	free(page);
	db->wal = w;
	if (!rc) {
		w->epoch = h.epoch;
		rc = replay(db, &n);
		if (!rc && n)
			log_info("state %s: %" PRIu64 " commits after the last "
				 "checkpoint replayed from the log",
				 db->dir, n);
	} else if (rc == -ENOENT) {
		rc = 0; /* a new log: the checkpoint below is its start */
	}
	if (!rc)
		rc = checkpoint(db);
	if (rc) {
		db->wal = NULL;
		wal_free(w);
	}
	return rc;
}

void db_wal_close(struct db *db)
{
	struct db_wal *w = db->wal;
	int rc;

	if (!w)
		return;
	/* A clean close replays nothing at the next start. */
	if ((rc = checkpoint(db)))
		log_warn("state %s: the last checkpoint: %s (the log replays "
			 "at the next start)",
			 db->dir, strerror(-rc));
	db->wal = NULL;
	wal_free(w);
}
