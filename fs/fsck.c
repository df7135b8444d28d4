/*
 * fs/fsck.c - the namespace against the store, for operators after an
 * incident and for the fault campaign's checker (`mapfs-gw fsck`).
 *
 * Three passes: one read snapshot of the records (every record's object
 * keys, which of them must be in the store now and which are in flux: a
 * file with changes not uploaded, a key a queued move or delete touches;
 * the records among themselves: names, link counts, parents), one
 * listing of every key of the store, and then every difference looked at
 * again on fresh state (the record read again, a HEAD or a one-key
 * listing), because a gateway in service changes both sides while the
 * listing runs: what a change in flight explains is not a finding.
 *
 * What --repair does is what the gateway itself would do, never a
 * deletion: an object missing goes up again from the cache (conflict.c's
 * re-upload, as for an object deleted behind our back) if the cache
 * holds all of it; a marker or a name's object is written again (the
 * record marked dirty); a link count or a directory's parent is set from
 * the names; an object another writer replaced is taken in by a listing.
 * Objects no name has, names without records and records without names
 * are left, and said: which side is right is the operator's call.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache/cache.h"
#include "common/log.h"
#include "db/db.h"
#include "fs_int.h"

#define FSCK_PAGE 1000
#define FSCK_PROGRESS_EVERY 4096
/* In a cluster a directory's marker is written by the node that made
 * it, whose dirty flag the others do not see: one younger than this
 * past the upload delay is taken as on its way. */
#define FSCK_CLUSTER_GRACE_MS 30000
/* S3's Last-Modified is to the second: an object written within this of
 * a listing's start may have come after it. */
#define FSCK_CLOCK_GRACE_MS 2000

/* One record of the snapshot (sorted by ino: the table's order). */
struct rec {
	uint64_t ino, parent;
	uint32_t type, nlink, names, subdirs;
};

/* Flags of a key of the snapshot. */
enum {
	K_WANT = 1u << 0,    /* must be in the store now */
	K_FLUX = 1u << 1,    /* may be there or not: work under way */
	K_DIR = 1u << 2,     /* a directory's key ("a/b/", "" the root) */
	K_SEEN = 1u << 3,    /* the listing had it */
	K_CONTENT = 1u << 4, /* dirs: some key below it is in the store */
	K_LINK = 1u << 5,    /* a name past a file's first */
};

struct kent {
	char *key; /* NULL: a free slot */
	uint64_t ino, size;
	uint32_t flags;
	char *etag; /* files: the record's (NULL: none) */
};

struct kmap {
	struct kent *v;
	size_t cap, n;
};

/* A difference to look at again. */
struct suspect {
	enum fs_fsck_kind kind;
	char *key;
	uint64_t ino, size;
	char etag[STORE_ETAG_MAX]; /* SIZE: the listing's */
};

struct ck {
	struct fs *fs;
	const struct fs_fsck_opts *o;
	struct fs_fsck_stat *st;
	struct rec *recs;
	size_t nrecs, recs_cap;
	struct kmap keys;
	struct suspect *sus;
	size_t nsus, sus_cap;
	int stop; /* -ECANCELED once progress() said so */
};

static const char *const kind_names[] = {
	[FS_FSCK_MISSING] = "missing object",
	[FS_FSCK_SIZE] = "size differs",
	[FS_FSCK_UNNAMED] = "unnamed object",
	[FS_FSCK_EMPTY_DIR] = "directory not in the store",
	[FS_FSCK_NLINK] = "link count",
	[FS_FSCK_PARENT] = "parent",
	[FS_FSCK_DANGLING] = "name without record",
	[FS_FSCK_ORPHAN] = "record without name",
	[FS_FSCK_FAILING] = "store work failing",
	[FS_FSCK_UNREADABLE] = "unreadable record",
};

/* --- the key map: open addressing, FNV-1a --- */

static uint64_t khash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static struct kent *kmap_find(struct kmap *m, const char *key)
{
	if (!m->cap)
		return NULL;
	for (size_t i = khash(key) & (m->cap - 1);;
	     i = (i + 1) & (m->cap - 1)) {
		if (!m->v[i].key)
			return NULL;
		if (!strcmp(m->v[i].key, key))
			return &m->v[i];
	}
}

static int kmap_grow(struct kmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 1024;
	struct kent *v = calloc(cap, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t j = 0; j < m->cap; j++) {
		size_t i;

		if (!m->v[j].key)
			continue;
		for (i = khash(m->v[j].key) & (cap - 1); v[i].key;
		     i = (i + 1) & (cap - 1))
			;
		v[i] = m->v[j];
	}
	free(m->v);
	m->v = v;
	m->cap = cap;
	return 0;
}

/* key's entry, made (flags 0) if there is none.  NULL: no memory. */
static struct kent *kmap_get(struct kmap *m, const char *key)
{
	struct kent *e = kmap_find(m, key);
	size_t i;

	if (e)
		return e;
	if ((m->n + 1) * 2 > m->cap && kmap_grow(m))
		return NULL;
	for (i = khash(key) & (m->cap - 1); m->v[i].key;
	     i = (i + 1) & (m->cap - 1))
		;
	if (!(m->v[i].key = strdup(key)))
		return NULL;
	m->n++;
	return &m->v[i];
}

static void kmap_free(struct kmap *m)
{
	for (size_t i = 0; i < m->cap; i++) {
		free(m->v[i].key);
		free(m->v[i].etag);
	}
	free(m->v);
}

/* --- findings --- */

static void report(struct ck *ck, enum fs_fsck_kind kind, const char *key,
		   uint64_t ino, bool repaired, const char *action,
		   const char *fmt, ...) __attribute__((format(printf, 7, 8)));

static void report(struct ck *ck, enum fs_fsck_kind kind, const char *key,
		   uint64_t ino, bool repaired, const char *action,
		   const char *fmt, ...)
{
	struct fs_fsck_item it = { .kind = kind,
				   .what = kind_names[kind],
				   .key = key,
				   .ino = ino,
				   .repaired = repaired };
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(it.detail, sizeof(it.detail), fmt, ap);
	va_end(ap);
	snprintf(it.action, sizeof(it.action), "%s", action);
	ck->st->found++;
	if (repaired)
		ck->st->repaired++;
	log_warn("fsck: %s %s: %s; %s", it.what, key, it.detail,
		 repaired ? it.action : "left");
	if (ck->o->report)
		ck->o->report(ck->o->ctx, &it);
}

static int progress(struct ck *ck, const char *phase, uint64_t done,
		    uint64_t total)
{
	if (!ck->stop && atomic_load(&ck->fs->closing))
		ck->stop = -ECANCELED;
	if (!ck->stop && ck->o->progress &&
	    ck->o->progress(ck->o->ctx, phase, done, total))
		ck->stop = -ECANCELED;
	return ck->stop;
}

static int suspect(struct ck *ck, enum fs_fsck_kind kind, const char *key,
		   uint64_t ino, uint64_t size, const char *etag)
{
	struct suspect *s;

	if (ck->nsus == ck->sus_cap) {
		size_t cap = ck->sus_cap ? ck->sus_cap * 2 : 64;

		s = realloc(ck->sus, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		ck->sus = s;
		ck->sus_cap = cap;
	}
	s = &ck->sus[ck->nsus];
	memset(s, 0, sizeof(*s));
	if (!(s->key = strdup(key)))
		return -ENOMEM;
	s->kind = kind;
	s->ino = ino;
	s->size = size;
	if (etag)
		snprintf(s->etag, sizeof(s->etag), "%s", etag);
	ck->nsus++;
	return 0;
}

static struct rec *rec_find(struct ck *ck, uint64_t ino)
{
	size_t lo = 0, hi = ck->nrecs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ck->recs[mid].ino == ino)
			return &ck->recs[mid];
		if (ck->recs[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static void fmt_time_ms(uint64_t ms, char *buf, size_t cap)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!ms) {
		snprintf(buf, cap, "never");
		return;
	}
	gmtime_r(&t, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* --- pass 1: the records --- */

/* A file's (or a symlink's, a special file's) object size. */
static uint64_t obj_size(const struct fs_inode *in)
{
	if (in->type == FS_REG)
		return in->size;
	if (in->type == FS_LNK)
		return strlen(in->target);
	return 0;
}

static int put_key(struct ck *ck, const char *key, uint64_t ino, uint32_t flags,
		   uint64_t size, const char *etag)
{
	struct kent *e = kmap_get(&ck->keys, key);

	if (!e)
		return -ENOMEM;
	/* Two records with one key: the second is in flux (a rename's
	 * target and source in one snapshot cannot be, so keep both
	 * views' union and let the recheck decide). */
	e->flags |= flags;
	if (flags & (K_WANT | K_DIR)) {
		e->ino = ino;
		e->size = size;
		if (etag && etag[0] && !e->etag && !(e->etag = strdup(etag)))
			return -ENOMEM;
	}
	return 0;
}

struct link_walk {
	struct ck *ck;
	struct db_txn *txn;
	uint64_t ino, size;
	bool busy;
	int rc;
};

static int link_key(void *arg, const struct fs_link *l)
{
	struct link_walk *w = arg;
	char key[STORE_KEY_MAX + 2];

	if (fs_name_key(w->ck->fs, w->txn, l->parent, l->name, false, key,
			sizeof(key)))
		return 0; /* its directory is gone: the names pass says so */
	w->rc = put_key(
		w->ck, key, w->ino,
		K_LINK | (w->busy ? K_FLUX
				  : (l->flags & FS_LINK_IN_STORE ? K_WANT : 0)),
		w->size, NULL);
	return w->rc;
}

static int snap_record(struct ck *ck, struct db_txn *txn,
		       const struct fs_inode *in)
{
	struct fs *fs = ck->fs;
	char key[STORE_KEY_MAX + 2];
	uint32_t flags;
	bool busy = (in->flags & FS_F_DIRTY) || in->owner;
	int rc;

	if (in->ino == FS_ROOT_INO)
		return put_key(ck, "", in->ino, K_DIR, 0, NULL);
	if (fs_obj_key(fs, txn, in, key, sizeof(key)))
		return 0; /* no path to the root: the names pass says so */
	if (in->type == FS_DIR) {
		flags = K_DIR;
		if (in->flags & FS_F_DIRTY)
			flags |= K_FLUX;
		else if (in->flags & FS_F_MARKER)
			flags |= K_WANT;
		return put_key(ck, key, in->ino, flags, 0, NULL);
	}
	if (busy)
		ck->st->pending_uploads++;
	rc = put_key(ck, key, in->ino, busy ? K_FLUX : K_WANT, obj_size(in),
		     in->etag);
	if (rc || in->nlink < 2)
		return rc;
	struct link_walk w = { ck, txn, in->ino, obj_size(in), busy, 0 };

	rc = fs_link_each(fs, txn, in->ino, link_key, &w);
	return w.rc ? w.rc : rc;
}

static int snap_records(struct ck *ck, struct db_txn *txn)
{
	struct fs *fs = ck->fs;
	struct db_cursor *cur;
	struct db_val k, v;
	int rc = db_cursor_open(txn, fs->dbi_inodes, &cur), mrc, op;

	if (rc)
		return rc;
	for (op = DB_FIRST; !(mrc = db_cursor_get(cur, &k, &v, op));
	     op = DB_NEXT) {
		struct fs_inode in;
		uint64_t ino;
		char what[32];

		if (k.size != sizeof(ino)) {
			rc = -EIO;
			break;
		}
		memcpy(&ino, k.data, sizeof(ino));
		snprintf(what, sizeof(what), "inode %" PRIu64, ino);
		if (fs_inode_decode(ino, &v, &in)) {
			report(ck, FS_FSCK_UNREADABLE, what, ino, false, "left",
			       "%zu bytes that do not decode as a record",
			       v.size);
			continue;
		}
		if (ck->nrecs == ck->recs_cap) {
			size_t cap = ck->recs_cap ? ck->recs_cap * 2 : 1024;
			struct rec *r = realloc(ck->recs, cap * sizeof(*r));

			if (!r) {
				rc = -ENOMEM;
				break;
			}
			ck->recs = r;
			ck->recs_cap = cap;
		}
		ck->recs[ck->nrecs++] = (struct rec){ .ino = ino,
						      .parent = in.parent,
						      .type = in.type,
						      .nlink = in.nlink };
		if ((rc = snap_record(ck, txn, &in)))
			break;
		if (ck->nrecs % FSCK_PROGRESS_EVERY == 0 &&
		    (rc = progress(ck, "records", ck->nrecs, 0)))
			break;
	}
	db_cursor_close(cur);
	ck->st->records = ck->nrecs;
	if (rc)
		return rc;
	return mrc == -ENOENT ? 0 : mrc;
}

/* "dir path/name" of a name in dir, for a report. */
static void name_path(struct ck *ck, struct db_txn *txn, uint64_t dir,
		      const char *name, char *buf, size_t cap)
{
	char dk[STORE_KEY_MAX + 1];

	if (fs_key_build(ck->fs, txn, dir, dk, sizeof(dk)))
		snprintf(dk, sizeof(dk), "(inode %" PRIu64 ")", dir);
	snprintf(buf, cap, "%s%s%s", dk, dk[0] ? "/" : "", name);
}

static int snap_names(struct ck *ck, struct db_txn *txn)
{
	struct fs *fs = ck->fs;
	struct db_cursor *cur;
	struct db_val k, v;
	int rc = db_cursor_open(txn, fs->dbi_dirents, &cur), mrc, op;

	if (rc)
		return rc;
	for (op = DB_FIRST; !(mrc = db_cursor_get(cur, &k, &v, op));
	     op = DB_NEXT) {
		char name[FS_NAME_MAX + 1], path[STORE_KEY_MAX + FS_NAME_MAX];
		struct rec *child, *dir;
		uint64_t parent, ino;

		if ((rc = fs_dirent_decode(&k, &v, &parent, name, &ino)))
			break;
		ck->st->names++;
		child = rec_find(ck, ino);
		if (!child) {
			name_path(ck, txn, parent, name, path, sizeof(path));
			report(ck, FS_FSCK_DANGLING, path, ino, false, "left",
			       "names inode %" PRIu64 ", which has no record",
			       ino);
			continue;
		}
		child->names++;
		if (child->type != FS_DIR)
			continue;
		if ((dir = rec_find(ck, parent)))
			dir->subdirs++;
		if (child->parent != parent) {
			name_path(ck, txn, parent, name, path, sizeof(path));
			/* (the parent in the size field) */
			if ((rc = suspect(ck, FS_FSCK_PARENT, path, ino, parent,
					  NULL)))
				break;
		}
	}
	db_cursor_close(cur);
	if (rc)
		return rc;
	if (mrc != -ENOENT)
		return mrc;
	for (size_t i = 0; i < ck->nrecs; i++) {
		struct rec *r = &ck->recs[i];
		uint32_t want = r->type == FS_DIR ? 2 + r->subdirs : r->names;
		char what[32];

		snprintf(what, sizeof(what), "inode %" PRIu64, r->ino);
		if (r->ino != FS_ROOT_INO && !r->names) {
			report(ck, FS_FSCK_ORPHAN, what, r->ino, false, "left",
			       "a %s no directory names (its record names "
			       "parent %" PRIu64 ")",
			       r->type == FS_DIR ? "directory" : "file",
			       r->parent);
			continue;
		}
		if (r->nlink != want &&
		    (rc = suspect(ck, FS_FSCK_NLINK, what, r->ino, want, NULL)))
			return rc;
	}
	return 0;
}

/* Every key a queued move or delete touches is in flux. */
static int pending_flux(void *arg, const struct fs_pending *p)
{
	struct ck *ck = arg;
	int rc = put_key(ck, p->src, p->ino, K_FLUX, 0, NULL);

	if (!rc && p->op == FS_PEND_COPY)
		rc = put_key(ck, p->dst, p->ino, K_FLUX, 0, NULL);
	ck->st->pending_moves += !rc;
	return rc;
}

/* --- pass 2: the store --- */

/* Every directory above key has something in the store. */
static void mark_content(struct ck *ck, const char *key)
{
	char buf[STORE_KEY_MAX + 1];
	size_t len = strlen(key);

	if (len > STORE_KEY_MAX)
		return;
	memcpy(buf, key, len + 1);
	while (len > 1) {
		struct kent *e;

		/* Up to the '/' before the last name (a marker's own '/'
		 * is its end, not its parent's). */
		len--;
		while (len && buf[len - 1] != '/')
			len--;
		if (!len)
			break;
		buf[len] = '\0';
		e = kmap_find(&ck->keys, buf);
		if (e && (e->flags & K_DIR)) {
			if (e->flags & K_CONTENT)
				break; /* and so is everything above it */
			e->flags |= K_CONTENT;
		}
		len--; /* before the '/' */
	}
}

static int list_store(struct ck *ck)
{
	struct fs *fs = ck->fs;
	char *token = NULL;
	int rc;

	do {
		struct store_page page = { 0 };

		rc = store_list(fs->store, "", '\0', token, FSCK_PAGE, &page);
		free(token);
		token = NULL;
		if (rc)
			break;
		for (size_t i = 0; !rc && i < page.nentries; i++) {
			const struct store_entry *se = &page.entries[i];
			struct kent *e;

			if (store_key_reserved(se->key))
				continue;
			ck->st->objects++;
			mark_content(ck, se->key);
			e = kmap_find(&ck->keys, se->key);
			if (!e) {
				rc = suspect(ck, FS_FSCK_UNNAMED, se->key, 0,
					     se->size, se->etag);
				continue;
			}
			e->flags |= K_SEEN;
			if ((e->flags & (K_WANT | K_FLUX | K_DIR)) == K_WANT &&
			    se->size != e->size)
				rc = suspect(ck, FS_FSCK_SIZE, se->key, e->ino,
					     se->size, se->etag);
		}
		if (!rc && page.next_token &&
		    !(token = strdup(page.next_token)))
			rc = -ENOMEM;
		store_page_free(&page);
		if (!rc)
			rc = progress(ck, "store", ck->st->objects, 0);
	} while (!rc && token);
	free(token);
	return rc;
}

/* Keys the snapshot wanted that the listing did not have. */
static int find_missing(struct ck *ck)
{
	for (size_t i = 0; i < ck->keys.cap; i++) {
		struct kent *e = &ck->keys.v[i];
		int rc = 0;

		if (!e->key || (e->flags & (K_FLUX | K_SEEN)))
			continue;
		if (e->flags & K_WANT)
			rc = suspect(ck, FS_FSCK_MISSING, e->key, e->ino,
				     e->size, NULL);
		else if ((e->flags & K_DIR) && !(e->flags & K_CONTENT) &&
			 e->ino != FS_ROOT_INO)
			rc = suspect(ck, FS_FSCK_EMPTY_DIR, e->key, e->ino, 0,
				     NULL);
		if (rc)
			return rc;
	}
	return 0;
}

/* --- pass 3: each difference again, on fresh state --- */

struct touch {
	const char *key;
	size_t len;
	bool prefix; /* a directory: any key below it too */
};

static int touch_fn(void *arg, const struct fs_pending *p)
{
	struct touch *t = arg;

	if (t->prefix)
		return !strncmp(p->src, t->key, t->len) ||
		       (p->op == FS_PEND_COPY &&
			!strncmp(p->dst, t->key, t->len));
	return !strcmp(p->src, t->key) ||
	       (p->op == FS_PEND_COPY && !strcmp(p->dst, t->key));
}

/* Whether any node's queued move or delete touches key (or, prefix,
 * any key below it); an error counts as yes (not a finding). */
static bool pending_touches(struct fs *fs, struct db_txn *txn, const char *key,
			    bool prefix)
{
	struct touch t = { key, strlen(key), prefix };

	return fs_pending_each_any(fs, txn, touch_fn, &t) != 0;
}

/* The state of a suspect's record now, read in one fresh snapshot. */
struct fresh {
	struct fs_inode in;
	struct fs_link link;
	bool is_link;
};

enum { FRESH_GONE = 1 }; /* explained: not a finding */

/*
 * s's record as it is now, if s->key is still its clean object (first
 * name or, is_link, another name) and no queued store work touches it:
 * 0.  FRESH_GONE when anything of that changed; -errno.
 */
static int fresh_object(struct ck *ck, const struct suspect *s, struct fresh *f)
{
	struct fs *fs = ck->fs;
	char key[STORE_KEY_MAX + 2];
	struct db_txn *txn;
	int rc = db_read_begin(fs->db, &txn);

	if (rc)
		return rc;
	memset(f, 0, sizeof(*f));
	rc = fs_inode_get(fs, txn, s->ino, &f->in);
	if (rc == -ESTALE) {
		rc = FRESH_GONE;
		goto out;
	}
	if (rc || (rc = fs_obj_key(fs, txn, &f->in, key, sizeof(key))))
		goto out;
	if (strcmp(key, s->key)) {
		if (fs_link_of_key(fs, txn, &f->in, s->key, &f->link)) {
			rc = FRESH_GONE; /* moved */
			goto out;
		}
		f->is_link = true;
		if (!(f->link.flags & FS_LINK_IN_STORE)) {
			rc = FRESH_GONE;
			goto out;
		}
	}
	if ((f->in.flags & FS_F_DIRTY) || f->in.owner ||
	    pending_touches(fs, txn, s->key, f->in.type == FS_DIR))
		rc = FRESH_GONE;
	else if (f->in.type == FS_DIR && s->kind == FS_FSCK_MISSING &&
		 !(f->in.flags & FS_F_MARKER))
		rc = FRESH_GONE;
	else if (f->in.type == FS_DIR && s->kind == FS_FSCK_EMPTY_DIR &&
		 (f->in.flags & FS_F_MARKER))
		rc = FRESH_GONE;
	else if (f->in.type == FS_DIR && s->kind == FS_FSCK_EMPTY_DIR &&
		 db_clustered(fs->db) &&
		 (uint64_t)(fs_now_ns() - f->in.ctime) / 1000000u <
			 fs->opts.upload_delay_ms + FSCK_CLUSTER_GRACE_MS)
		rc = FRESH_GONE;
out:
	db_read_end(fs->db, txn);
	return rc;
}

struct mark_op {
	struct fs *fs;
	uint64_t ino;
	const char *key;
	bool link;
	struct fs_link l;
	uint32_t nlink;   /* NLINK */
	uint64_t parent;  /* PARENT */
	const char *name; /* PARENT */
	bool applied;
};

/* A directory's marker, or a file's other name, to write again. */
static int remark_apply(struct db_txn *txn, void *arg)
{
	struct mark_op *m = arg;
	struct fs *fs = m->fs;
	struct fs_inode in;
	uint64_t owner;
	int rc = fs_inode_get(fs, txn, m->ino, &in);

	m->applied = false;
	if (rc)
		return rc == -ESTALE ? 0 : rc;
	if (!fs_keys_get(fs, txn, m->key, &owner) && owner == in.ino &&
	    (rc = fs_keys_del(fs, txn, m->key)))
		return rc;
	if (m->link) {
		struct fs_link l;

		if (fs_link_get(fs, txn, in.ino, m->l.parent, m->l.name, &l))
			return 0;
		l.flags &= ~(uint32_t)FS_LINK_IN_STORE;
		if ((rc = fs_link_put(fs, txn, &l)) ||
		    (rc = fs_owner_claim(fs, &in)) ||
		    (rc = fs_inode_mark(fs, txn, &in, FS_F_DIRTY_LINKS)))
			return rc;
	} else {
		if (in.type != FS_DIR)
			return 0;
		in.flags &= ~(uint32_t)FS_F_MARKER;
		if ((rc = fs_inode_mark(fs, txn, &in, FS_F_DIRTY_META)))
			return rc;
	}
	if ((rc = fs_inode_put(fs, txn, &in)))
		return rc;
	m->applied = true;
	return 0;
}

static void recheck_missing(struct ck *ck, const struct suspect *s)
{
	struct fs *fs = ck->fs;
	struct store_info info;
	struct fresh f;
	char when[32], action[256] = "left";
	bool repaired = false;
	int rc = fresh_object(ck, s, &f);

	if (rc)
		return; /* explained, or cannot tell now */
	rc = store_head(fs->store, s->key, &info);
	if (rc != -ENOENT) {
		if (rc)
			log_warn("fsck: HEAD %s: %s (not checked)", s->key,
				 strerror(-rc));
		return;
	}
	fmt_time_ms(f.is_link ? f.link.synced_ms : f.in.synced_ms, when,
		    sizeof(when));
	if (ck->o->repair && (f.is_link || f.in.type == FS_DIR)) {
		struct mark_op m = { .fs = fs,
				     .ino = f.in.ino,
				     .key = s->key,
				     .link = f.is_link,
				     .l = f.link };

		rc = db_write(fs->db, remark_apply, &m);
		if (!rc && m.applied) {
			repaired = true;
			snprintf(action, sizeof(action),
				 "its %s is written again",
				 f.is_link ? "name's object" : "marker");
			fs_sync_nudge(fs);
		} else if (rc) {
			snprintf(action, sizeof(action), "left: %s",
				 strerror(-rc));
		}
	} else if (ck->o->repair) {
		bool whole =
			f.in.type != FS_REG ||
			cache_range_local(fs->cache, f.in.ino, 0, f.in.size);

		if (!whole) {
			snprintf(action, sizeof(action),
				 "left: the data is in neither the store nor "
				 "the cache; put the object back, or remove "
				 "the name");
		} else {
			pthread_mutex_lock(&fs->sync_lock);
			rc = fs_conflict(fs, &f.in, s->key, f.in.size, -ENOENT);
			pthread_mutex_unlock(&fs->sync_lock);
			if (!rc) {
				repaired = true;
				snprintf(action, sizeof(action),
					 "uploaded again from the cache");
				fs_sync_nudge(fs);
			} else {
				snprintf(action, sizeof(action), "left: %s",
					 strerror(-rc));
			}
		}
	}
	report(ck, FS_FSCK_MISSING, s->key, s->ino, repaired, action,
	       "%s of inode %" PRIu64 " (%" PRIu64
	       " bytes), last in the store %s",
	       f.in.type == FS_DIR ? "the marker"
	       : f.is_link         ? "the object of a further name"
				   : "the object",
	       s->ino, f.in.type == FS_DIR ? 0 : obj_size(&f.in), when);
}

static void recheck_size(struct ck *ck, const struct suspect *s)
{
	struct fs *fs = ck->fs;
	struct store_info info;
	struct fresh f;
	char action[256] = "left: the same version with two sizes: read the "
			   "file through a client and compare";
	bool repaired = false, theirs;
	int rc = fresh_object(ck, s, &f);

	if (rc || f.in.type == FS_DIR)
		return;
	if (store_head(fs->store, s->key, &info) ||
	    info.size == obj_size(&f.in))
		return;
	theirs = strcmp(info.etag, f.is_link ? f.link.etag : f.in.etag) != 0;
	if (theirs)
		snprintf(action, sizeof(action), "%s: another writer's version",
			 ck->o->repair ? "listed again" : "left");
	if (theirs && ck->o->repair) {
		fs_store_changed(fs, f.in.ino);
		repaired = true;
	}
	report(ck, FS_FSCK_SIZE, s->key, s->ino, repaired, action,
	       "the record has %" PRIu64 " bytes (ETag %s), the store %" PRIu64
	       " (ETag %s)",
	       obj_size(&f.in), f.is_link ? f.link.etag : f.in.etag, info.size,
	       info.etag);
}

static void recheck_empty_dir(struct ck *ck, const struct suspect *s)
{
	struct fs *fs = ck->fs;
	struct store_page page = { 0 };
	struct fresh f;
	char action[256] = "left";
	bool repaired = false;
	size_t n;
	int rc = fresh_object(ck, s, &f);

	if (rc || f.in.type != FS_DIR)
		return;
	if (store_list(fs->store, s->key, '/', NULL, 2, &page))
		return;
	n = page.nentries + page.nprefixes;
	store_page_free(&page);
	if (n)
		return;
	if (ck->o->repair) {
		struct mark_op m = { .fs = fs, .ino = f.in.ino, .key = s->key };

		rc = db_write(fs->db, remark_apply, &m);
		repaired = !rc && m.applied;
		snprintf(action, sizeof(action), "%s",
			 repaired ? "its marker is written"
			 : rc     ? strerror(-rc)
				  : "left");
		if (repaired)
			fs_sync_nudge(fs);
	}
	report(ck, FS_FSCK_EMPTY_DIR, s->key, s->ino, repaired, action,
	       "directory inode %" PRIu64 " has no marker and nothing "
	       "below it in the store: a gateway started on the bucket "
	       "would not see it",
	       s->ino);
}

/*
 * Where key's name would be: its directory's inode (0: a directory
 * above it is not in the namespace) and the name.  -ENAMETOOLONG or
 * -EINVAL for a key no name stands for.
 */
static int key_place(struct fs *fs, struct db_txn *txn, const char *key,
		     uint64_t *dir, char name[FS_NAME_MAX + 1])
{
	char buf[STORE_KEY_MAX + 1], *p, *slash;
	size_t len = strlen(key);
	uint64_t cur = FS_ROOT_INO;

	if (len > STORE_KEY_MAX)
		return -ENAMETOOLONG;
	memcpy(buf, key, len + 1);
	if (len && buf[len - 1] == '/')
		buf[--len] = '\0'; /* a marker: the directory's name */
	for (p = buf; (slash = strchr(p, '/')); p = slash + 1) {
		uint64_t ino;

		*slash = '\0';
		if (!*p)
			return -EINVAL;
		if (fs_dirent_get(fs, txn, cur, p, &ino, NULL)) {
			*dir = 0;
			return 0;
		}
		cur = ino;
	}
	if (!*p)
		return -EINVAL;
	if (strlen(p) > FS_NAME_MAX)
		return -ENAMETOOLONG;
	strcpy(name, p);
	*dir = cur;
	return 0;
}

static void recheck_unnamed(struct ck *ck, const struct suspect *s)
{
	struct fs *fs = ck->fs;
	char name[FS_NAME_MAX + 1], listed[32], written[32];
	struct store_info info;
	struct fs_inode dir;
	struct db_txn *txn;
	uint64_t ino, dino = 0;
	int rc = db_read_begin(fs->db, &txn), what = 0;

	if (rc)
		return;
	/* what: 0 a finding, 1 explained, 2 not listed, 3 skipped. */
	if (!fs_keys_get(fs, txn, s->key, &ino) ||
	    pending_touches(fs, txn, s->key, false))
		what = 1;
	else if (key_place(fs, txn, s->key, &dino, name))
		what = 3;
	else if (!dino || fs_inode_get(fs, txn, dino, &dir) ||
		 dir.type != FS_DIR || !dir.listed_at_ms)
		what = 2;
	else if (!fs_dirent_get(fs, txn, dino, name, &ino, NULL))
		what = 1; /* named: a directory known without its marker */
	else if (fs_name_creatable(dino, name))
		what = 3;
	db_read_end(fs->db, txn);
	if (what == 2)
		ck->st->not_listed++;
	else if (what == 3)
		ck->st->skipped++;
	if (what)
		return;
	if (store_head(fs->store, s->key, &info))
		return; /* gone meanwhile (or cannot tell) */
	if (info.last_modified_ns / 1000000 + FSCK_CLOCK_GRACE_MS >=
	    (int64_t)dir.listed_at_ms) {
		ck->st->newer++;
		return;
	}
	fmt_time_ms((uint64_t)info.last_modified_ns / 1000000, written,
		    sizeof(written));
	fmt_time_ms(dir.listed_at_ms, listed, sizeof(listed));
	report(ck, FS_FSCK_UNNAMED, s->key, 0, false,
	       "left: fsck never deletes an object; remove it with an S3 "
	       "tool, or show it in the export with `mapfs-gw refresh`",
	       "%" PRIu64 " bytes written %s; its directory (inode %" PRIu64
	       ") was listed %s and has no such name",
	       info.size, written, dino, listed);
}

static int nlink_apply(struct db_txn *txn, void *arg)
{
	struct mark_op *m = arg;
	struct fs_inode in;
	int rc = fs_inode_get(m->fs, txn, m->ino, &in);

	m->applied = false;
	if (rc)
		return rc == -ESTALE ? 0 : rc;
	in.nlink = m->nlink;
	in.ctime = fs_now_ns();
	if ((rc = fs_inode_put(m->fs, txn, &in)))
		return rc;
	m->applied = true;
	return 0;
}

static int count_link(void *arg, const struct fs_link *l)
{
	(void)l;
	(*(uint32_t *)arg)++;
	return 0;
}

/* The names of ino now: 2 + subdirectories, or the file's names. */
static int count_names(struct fs *fs, struct db_txn *txn,
		       const struct fs_inode *in, uint32_t *n)
{
	uint64_t cookie = 0, child;
	char name[FS_NAME_MAX + 1];
	struct fs_inode c;
	int rc;

	if (in->type != FS_DIR) {
		*n = 1;
		rc = fs_link_each(fs, txn, in->ino, count_link, n);
		return rc;
	}
	*n = 2;
	while (!(rc = fs_dir_next(fs, txn, in->ino, &cookie, &child, name)))
		if (!fs_inode_get(fs, txn, child, &c) && c.type == FS_DIR)
			(*n)++;
	return rc == -ENOENT ? 0 : rc;
}

static void recheck_nlink(struct ck *ck, const struct suspect *s)
{
	struct fs *fs = ck->fs;
	struct fs_inode in;
	struct db_txn *txn;
	char action[256] = "left";
	bool repaired = false;
	uint32_t want = (uint32_t)s->size;
	int rc = db_read_begin(fs->db, &txn);

	if (rc)
		return;
	rc = fs_inode_get(fs, txn, s->ino, &in);
	/* The count again on fresh state: a directory's subdirectories, a
	 * file's first name and its links (the snapshot's pass counted its
	 * entries: no index by inode). */
	if (!rc)
		rc = count_names(fs, txn, &in, &want);
	db_read_end(fs->db, txn);
	if (rc || in.nlink == want)
		return;
	if (ck->o->repair) {
		struct mark_op m = { .fs = fs, .ino = s->ino, .nlink = want };

		rc = db_write(fs->db, nlink_apply, &m);
		repaired = !rc && m.applied;
		snprintf(action, sizeof(action), "%s",
			 repaired ? "set to the names' count"
			 : rc     ? strerror(-rc)
				  : "left");
	}
	report(ck, FS_FSCK_NLINK, s->key, s->ino, repaired, action,
	       "a %s with %" PRIu32 " links in its record and %" PRIu32
	       " by its names",
	       in.type == FS_DIR ? "directory" : "file", in.nlink, want);
}

static int parent_apply(struct db_txn *txn, void *arg)
{
	struct mark_op *m = arg;
	struct fs_inode in;
	uint64_t named;
	int rc = fs_inode_get(m->fs, txn, m->ino, &in);

	m->applied = false;
	if (rc)
		return rc == -ESTALE ? 0 : rc;
	if (in.type != FS_DIR || in.parent == m->parent ||
	    fs_dirent_get(m->fs, txn, m->parent, in.name, &named, NULL) ||
	    named != in.ino)
		return 0;
	in.parent = m->parent;
	if ((rc = fs_inode_put(m->fs, txn, &in)))
		return rc;
	m->applied = true;
	return 0;
}

static void recheck_parent(struct ck *ck, const struct suspect *s)
{
	struct fs *fs = ck->fs;
	struct fs_inode in;
	struct db_txn *txn;
	char action[256] = "left";
	bool repaired = false;
	uint64_t named = 0, parent = s->size;
	int rc = db_read_begin(fs->db, &txn);

	if (rc)
		return;
	rc = fs_inode_get(fs, txn, s->ino, &in);
	if (!rc && in.parent != parent)
		rc = fs_dirent_get(fs, txn, parent, in.name, &named, NULL);
	db_read_end(fs->db, txn);
	if (rc || in.parent == parent || named != in.ino)
		return;
	if (ck->o->repair) {
		struct mark_op m = { .fs = fs,
				     .ino = s->ino,
				     .parent = parent };

		rc = db_write(fs->db, parent_apply, &m);
		repaired = !rc && m.applied;
		snprintf(action, sizeof(action), "%s",
			 repaired ? "set to the directory that names it"
			 : rc     ? strerror(-rc)
				  : "left");
	}
	report(ck, FS_FSCK_PARENT, s->key, s->ino, repaired, action,
	       "directory inode %" PRIu64 " is named in inode %" PRIu64
	       " but its record says its parent is %" PRIu64,
	       s->ino, parent, in.parent);
}

static int recheck(struct ck *ck)
{
	for (size_t i = 0; i < ck->nsus; i++) {
		const struct suspect *s = &ck->sus[i];

		switch (s->kind) {
		case FS_FSCK_MISSING:
			recheck_missing(ck, s);
			break;
		case FS_FSCK_SIZE:
			recheck_size(ck, s);
			break;
		case FS_FSCK_EMPTY_DIR:
			recheck_empty_dir(ck, s);
			break;
		case FS_FSCK_UNNAMED:
			recheck_unnamed(ck, s);
			break;
		case FS_FSCK_NLINK:
			recheck_nlink(ck, s);
			break;
		case FS_FSCK_PARENT:
			recheck_parent(ck, s);
			break;
		default:
			break;
		}
		if ((i + 1) % 64 == 0 &&
		    progress(ck, "recheck", i + 1, ck->nsus))
			return ck->stop;
	}
	return 0;
}

/* A key failures.c holds as failing for good. */
static void report_failing(void *arg, const char *what, const char *key,
			   int err, uint64_t count)
{
	report(arg, FS_FSCK_FAILING, key, 0, false,
	       "left: the gateway tries again; `mapfs-gw ctl status` and the "
	       "log say more",
	       "%s failed %" PRIu64 " times: %s", what, count, strerror(-err));
}

int fs_fsck(struct fs *fs, const struct fs_fsck_opts *o,
	    struct fs_fsck_stat *out)
{
	struct ck ck = { .fs = fs, .o = o, .st = out };
	struct db_txn *txn;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = db_read_begin(fs->db, &txn);
	if (rc)
		return rc;
	if (!(rc = snap_records(&ck, txn)) && !(rc = snap_names(&ck, txn)) &&
	    !(rc = fs_pending_each_any(fs, txn, pending_flux, &ck)))
		rc = db_count(txn, fs->dbi_mpu, &out->multipart);
	db_read_end(fs->db, txn);
	if (!rc)
		rc = list_store(&ck);
	if (!rc)
		rc = find_missing(&ck);
	if (!rc)
		rc = recheck(&ck);
	if (!rc)
		rc = fs_fail_each(fs, report_failing, &ck);
	for (size_t i = 0; i < ck.nsus; i++)
		free(ck.sus[i].key);
	free(ck.sus);
	free(ck.recs);
	kmap_free(&ck.keys);
	return rc;
}
