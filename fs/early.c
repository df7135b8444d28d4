/*
 * fs/early.c - a big file goes up while it is still being written.
 *
 * An upload that starts only once a file is closed and quiet makes a
 * write of N bytes cost the time to write them plus the time to send
 * them.  Here a regular file that is dirty but not due yet (still being
 * written, or quiet for less than upload_delay), larger than the store's
 * one-PUT cut (store_put_max: 64 MiB on S3, 1 GiB on an S3 endpoint on
 * this machine, --multipart-threshold) and than EARLY_MIN, on a store
 * that takes requests in parallel (S3), gets a multipart upload at once.
 * Each syncer pass sends its parts of MPU_PART_MIN bytes that lie wholly
 * EARLY_LAG bytes or more below the end of the furthest write landed
 * (cache_written_end: a sequential writer has moved on from them, and
 * the client's WRITEs in flight land behind it; the size is no guide,
 * since a client may set it before it writes), all local already
 * (nothing is fetched for them): MPU_THREADS at a time, each part taken
 * as soon as the file has grown past it, until the file stops growing
 * for EARLY_IDLE_MS, or for up to EARLY_STEP_MS or EARLY_STEP_PARTS
 * parts a pass (other work waits for the pass).  When the file is due,
 * its upload (fs_early_finish) sends only the parts not up yet and
 * completes: the object is in the store moments after the last WRITE,
 * not a whole upload later.
 *
 * A part sent early may be written again.  The cache keeps per file the
 * lowest offset a write landed at or a truncate changed since the syncer
 * last asked (cache_written_low, updated once the bytes are in the cache
 * file).  It is asked right before each part is read (under the parts'
 * lock, sync_parts.take) and before the completion: every part from that
 * offset on that was read before is stale (state PART_NONE again, or
 * PART_STALE while it is still on its way) and is sent again.  So a
 * write that landed before a part was read costs nothing, however close
 * behind the part it fell (a first version asked once a pass, and took
 * the writer's own progress during the pass for rewrites: half the parts
 * went twice).  A write still in flight at the completion changes the
 * file's write count, so the upload's commit leaves the file dirty
 * (syncer.c, cs_equal) and it goes up once more.
 *
 * CreateMultipartUpload fixes the object's metadata before the file's
 * last mtime is known: when the final metadata differs, the completed
 * object gets it by a server-side copy onto itself, conditional on the
 * ETag just made.  The object's write id (store_meta.wid) is the early
 * upload's own until then; a completion or copy whose answer was lost
 * leaves that id behind (a "doubt": an entry without upload) for the
 * next upload of the file (fs_early_wid), which then knows the object as
 * its own instead of another writer's, until a commit (fs_early_forget).
 *
 * A file whose parts keep being written again after they went up
 * (EARLY_REWRITES_MAX times: not a sequential writer) is declined: its
 * upload is aborted and it goes up once quiet, as without this file.
 * A file renamed meanwhile (another key), removed or cleaned (not in a
 * whole snapshot: fs_early_sweep), linked (nlink > 1: other names get
 * copies, syncer.c), too big for the store's part count, or dropped from
 * the cache loses its early upload (aborted) and goes up the usual way.
 * A crash leaves the upload journaled (db "mpu", sync_mpu_begin): it is
 * aborted at the next start, and the file, still dirty, goes up whole.
 *
 * All of it runs under sync_lock (one pass at a time); early_lock guards
 * only the list, since the small uploads of a pass run on several
 * threads (syncer.c, fs_each_parallel) and each may ask for its inode.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "common/log.h"
#include "db/db.h"
#include "fs_int.h"
#include "sync_int.h"
#include "metrics/metrics.h"

#define EARLY_PART MPU_PART_MIN
#define EARLY_LAG (8ull << 20)
#define EARLY_MIN (EARLY_PART + EARLY_LAG)
#define EARLY_STEP_PARTS 64 /* at most a pass sends of one file */
#define EARLY_STEP_MS 2000  /* no new part is taken after this */
#define EARLY_IDLE_MS \
	100                  /* a pass stops waiting for a file that
				  has not grown for this long */
#define EARLY_MAX 8          /* files going up early at once */
#define EARLY_FINISH_TRIES 3 /* rounds of stale parts at the end */
#define EARLY_REWRITES_MAX \
	2 /* rewrites of parts up before a file is
				  left to the usual upload */

struct fs_early {
	struct fs_early *next;
	uint64_t ino;
	char key[STORE_KEY_MAX + 2];
	char *upload_id; /* NULL: a doubt only (see above), or declined */
	int rewrites;    /* rechecks that found parts up written again */
	bool declined;   /* not sequential: the usual upload, once quiet */
	struct store_meta meta; /* the object's at CreateMultipartUpload */
	int cap;                /* parts etags and st hold */
	char (*etags)[STORE_ETAG_MAX];
	uint8_t *st; /* each part's state (enum below) */
};

enum {
	PART_NONE,  /* not in the upload (or stale) */
	PART_GOING, /* being read and sent */
	PART_STALE, /* being sent, but written again since it was read */
	PART_UP,    /* in the upload, with its bytes as they are now */
};

static struct fs_early *early_find(struct fs *fs, uint64_t ino)
{
	struct fs_early *e;

	pthread_mutex_lock(&fs->early_lock);
	for (e = fs->early; e && e->ino != ino; e = e->next)
		;
	pthread_mutex_unlock(&fs->early_lock);
	return e;
}

static int early_count(struct fs *fs)
{
	int n = 0;

	pthread_mutex_lock(&fs->early_lock);
	for (struct fs_early *e = fs->early; e; e = e->next)
		n++;
	pthread_mutex_unlock(&fs->early_lock);
	return n;
}

static void early_unlink(struct fs *fs, struct fs_early *e)
{
	pthread_mutex_lock(&fs->early_lock);
	for (struct fs_early **p = &fs->early; *p; p = &(*p)->next)
		if (*p == e) {
			*p = e->next;
			break;
		}
	pthread_mutex_unlock(&fs->early_lock);
}

static void early_free(struct fs_early *e)
{
	free(e->upload_id);
	free(e->etags);
	free(e->st);
	free(e);
}

/* Forget e, aborting its upload (if any). */
static void early_drop(struct fs *fs, struct fs_early *e)
{
	early_unlink(fs, e);
	if (e->upload_id)
		sync_mpu_end(fs, e->key, e->upload_id, false);
	early_free(e);
}

/* Room for the ETags and states of parts [0, n). */
static int early_reserve(struct fs_early *e, int n)
{
	char(*t)[STORE_ETAG_MAX];
	uint8_t *st;

	if (n <= e->cap)
		return 0;
	if (n < 2 * e->cap)
		n = 2 * e->cap < MPU_PARTS_MAX ? 2 * e->cap : MPU_PARTS_MAX;
	t = realloc(e->etags, (size_t)n * sizeof(*t));
	if (!t)
		return -ENOMEM;
	e->etags = t;
	st = realloc(e->st, (size_t)n);
	if (!st)
		return -ENOMEM;
	memset(st + e->cap, PART_NONE, (size_t)(n - e->cap));
	e->st = st;
	e->cap = n;
	return 0;
}

/* Parts up (the rest are sent by the next step or the completion). */
static int early_up(const struct fs_early *e, int n)
{
	int up = 0;

	for (int i = 0; i < n && i < e->cap; i++)
		up += e->st[i] == PART_UP;
	return up;
}

/* The first part not up. */
static int early_first(const struct fs_early *e)
{
	int i = 0;

	while (i < e->cap && e->st[i] == PART_UP)
		i++;
	return i;
}

/* One pass's parts of a file (the sync_parts hooks' arg). */
struct early_grow {
	struct fs *fs;
	struct fs_early *e;
	int cap;                /* parts the ETags hold */
	uint64_t deadline;      /* ms */
	uint64_t size, grew_ms; /* how far it is written, and when that grew */
	int sent;               /* parts that went up */
	bool gone;              /* the file left the cache */
};

/*
 * Parts written again since the last look are stale: up ones go again,
 * ones on their way will.  0, or -ENODATA when the file left the cache.
 * Under the parts' lock while they are sent.
 */
static int early_recheck(struct fs *fs, struct fs_early *e)
{
	uint64_t low;
	int rc = cache_written_low(fs->cache, e->ino, &low), n = 0;

	if (rc)
		return rc;
	for (uint64_t i = low / EARLY_PART; i < (uint64_t)e->cap; i++) {
		if (e->st[i] == PART_UP) {
			e->st[i] = PART_NONE;
			n++;
		} else if (e->st[i] == PART_GOING) {
			e->st[i] = PART_STALE;
			n++;
		}
	}
	if (n) {
		metrics_add(MET_EARLY_STALE, (uint64_t)n);
		log_debug("fs: %s written again at %" PRIu64 ": %d parts go "
			  "up again",
			  e->key, low, n);
		e->rewrites++;
	}
	return 0;
}

/*
 * A file whose parts up keep being written again is not written
 * sequentially (a database, an image): sending them early would send it
 * over and over.  Its upload is aborted, and it goes up once quiet
 * (until then the entry stays, declined).  True if so.
 */
static bool early_decline(struct fs *fs, struct fs_early *e)
{
	if (e->rewrites < EARLY_REWRITES_MAX)
		return false;
	log_debug("fs: %s is written out of order: it goes up once quiet",
		  e->key);
	sync_mpu_end(fs, e->key, e->upload_id, false);
	free(e->upload_id);
	e->upload_id = NULL;
	e->declined = true;
	memset(e->st, PART_NONE, (size_t)e->cap);
	return true;
}

/* sync_parts.take: part i, unless it is up; the writes before now first. */
static bool early_take(void *arg, int i)
{
	struct early_grow *g = arg;
	struct fs_early *e = g->e;

	if (early_recheck(g->fs, e)) {
		g->gone = true;
		return true; /* read, to fail and end the pass */
	}
	if (e->st[i] == PART_UP)
		return false;
	e->st[i] = PART_GOING;
	return true;
}

/* sync_parts.done: part i is up, unless it was written again. */
static void early_done(void *arg, int i, int rc)
{
	struct early_grow *g = arg;
	struct fs_early *e = g->e;

	if (!rc && e->st[i] == PART_GOING) {
		e->st[i] = PART_UP;
		g->sent++;
	} else {
		e->st[i] = PART_NONE;
	}
}

/* A new early upload of it, or NULL (none possible now). */
static struct fs_early *early_start(struct fs *fs, const struct sync_item *it)
{
	struct fs_early *e;
	uint64_t low;

	if (early_count(fs) >= EARLY_MAX)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->ino = it->in.ino;
	snprintf(e->key, sizeof(e->key), "%s", it->key);
	sync_meta_of(fs, it, &e->meta);
	snprintf(e->meta.wid, sizeof(e->meta.wid),
		 "%08" PRIx32 "-%016" PRIx64 "-%" PRIx64 "-e%015" PRIx64,
		 db_node_id(fs->db), fs->nsid, it->in.ino,
		 (uint64_t)fs_now_ns() & 0xfffffffffffffffu);
	/* What was written before now is read by the parts from now on. */
	if (cache_written_low(fs->cache, e->ino, &low) ||
	    early_reserve(e, EARLY_STEP_PARTS) ||
	    sync_mpu_begin(fs, e->key, &e->meta, &e->upload_id)) {
		early_free(e);
		return NULL;
	}
	pthread_mutex_lock(&fs->early_lock);
	e->next = fs->early;
	fs->early = e;
	pthread_mutex_unlock(&fs->early_lock);
	log_debug("fs: %s goes up while it is written", e->key);
	return e;
}

/* Parts [0, n) of a file of size bytes are complete (behind the end). */
static int early_ready(uint64_t size)
{
	if (size < EARLY_MIN)
		return 0;
	return (size - EARLY_LAG) / EARLY_PART < MPU_PARTS_MAX
		       ? (int)((size - EARLY_LAG) / EARLY_PART)
		       : MPU_PARTS_MAX;
}

/*
 * The parts complete and local now, up to the step's end (-1: the time
 * or the parts are used up, or the file stopped growing, so the pass
 * goes on; n: none yet).
 */
static int early_more(void *arg, int n)
{
	struct early_grow *g = arg;
	uint64_t now = fs_now_ms(), end;
	int ready;

	if (now >= g->deadline || n >= g->cap ||
	    cache_written_end(g->fs->cache, g->e->ino, &end))
		return -1;
	if (end != g->size) {
		g->size = end;
		g->grew_ms = now;
	} else if (now - g->grew_ms >= EARLY_IDLE_MS) {
		return -1;
	}
	ready = early_ready(end);
	if (ready > g->cap)
		ready = g->cap;
	if (ready <= n ||
	    !cache_range_local(g->fs->cache, g->e->ino,
			       (uint64_t)n * EARLY_PART,
			       (uint64_t)(ready - n) * EARLY_PART))
		return n;
	return ready;
}

/* See sync_int.h. */
uint64_t fs_early_cut(struct fs *fs)
{
	uint64_t cut = store_put_max(fs->store);

	if (fs->opts.no_early_upload || store_put_parallel(fs->store) < 2)
		return 0;
	return cut < EARLY_MIN ? EARLY_MIN : cut;
}

/* See sync_int.h. */
void fs_early_step(struct fs *fs, const struct sync_item *it)
{
	struct fs_early *e;
	struct early_grow g = { .fs = fs };
	struct sync_parts p = { .size = UINT64_MAX,
				.part = EARLY_PART,
				.more = early_more,
				.take = early_take,
				.done = early_done,
				.arg = &g };
	int ready, first, rc;

	if (fs->opts.no_early_upload || store_put_parallel(fs->store) < 2 ||
	    it->in.type != FS_REG || !(it->in.flags & FS_F_DIRTY_DATA) ||
	    !it->have_cs || it->in.nlink > 1 ||
	    (it->in.owner && it->in.owner != db_node_id(fs->db)) ||
	    !db_lease_held(fs->db) || store_down(fs->store) ||
	    fs_fail_wait(fs, it->key))
		return;
	ready = early_ready(it->cs.size);
	e = early_find(fs, it->in.ino);
	if (e && !e->upload_id)
		return; /* a doubt (the next upload settles it), or declined */
	if (e && (strcmp(e->key, it->key) || ready >= MPU_PARTS_MAX)) {
		early_drop(fs, e); /* renamed, or too big for parts */
		return;
	}
	/* Only a file that goes up as parts anyway: below the store's cut
	 * one PUT costs less (on a store on this machine, 1 GiB: there
	 * parts in parallel only share its CPUs, measured in RESULTS.md). */
	if (!e && ready > 0 && ready < MPU_PARTS_MAX &&
	    it->cs.size > store_put_max(fs->store))
		e = early_start(fs, it);
	if (!e)
		return;
	if (early_recheck(fs, e)) {
		early_drop(fs, e);
		return;
	}
	if (early_decline(fs, e))
		return;
	first = early_first(e);
	g.e = e;
	g.cap = first + EARLY_STEP_PARTS < MPU_PARTS_MAX
			? first + EARLY_STEP_PARTS
			: MPU_PARTS_MAX;
	g.deadline = fs_now_ms() + EARLY_STEP_MS;
	g.grew_ms = fs_now_ms();
	if (early_reserve(e, g.cap))
		return;
	p.upload_id = e->upload_id;
	p.etags = e->etags;
	p.first = first;
	p.nparts = early_more(&g, first);
	if (p.nparts <= first || cache_open_fd(fs->cache, e->ino, &p.fd))
		return;
	rc = sync_mpu_parts(fs, it, &p);
	cache_close_fd(fs->cache, e->ino, p.fd);
	metrics_add(MET_EARLY_PARTS, (uint64_t)g.sent);
	if (g.gone) {
		early_drop(fs, e); /* left the cache */
		return;
	}
	if (rc == -ENOENT) {
		/* The upload is gone (aborted by someone else). */
		log_info("fs: the early upload of %s vanished; it goes up "
			 "whole",
			 e->key);
		early_unlink(fs, e);
		early_free(e);
		return;
	}
	if (rc) /* the parts not up go with a later pass */
		log_debug("fs: early parts of %s: %s", e->key, strerror(-rc));
}

/* The metadata two versions of a file carry, the write id aside. */
static bool meta_same(const struct store_meta *a, const struct store_meta *b)
{
	return a->has_mode == b->has_mode && a->mode == b->mode &&
	       a->has_uid == b->has_uid && a->uid == b->uid &&
	       a->has_gid == b->has_gid && a->gid == b->gid &&
	       a->has_mtime == b->has_mtime && a->mtime_ns == b->mtime_ns &&
	       a->has_rdev == b->has_rdev && a->rdev == b->rdev &&
	       a->symlink == b->symlink && !strcmp(a->link, b->link);
}

/* The upload ended unknown (answer lost): keep only e's write id. */
static void early_doubt(struct fs *fs, struct fs_early *e, bool completed)
{
	if (e->upload_id) {
		sync_mpu_end(fs, e->key, e->upload_id, completed);
		free(e->upload_id);
		e->upload_id = NULL;
	}
	memset(e->st, PART_NONE, (size_t)e->cap);
}

/* See sync_int.h. */
int fs_early_finish(struct fs *fs, const struct sync_item *it, int fd,
		    uint64_t size, const struct store_meta *m,
		    const struct store_cond *c, struct store_info *out)
{
	struct fs_early *e = early_find(fs, it->in.ino);
	struct store_cond cc = *c;
	int nparts = (int)((size + EARLY_PART - 1) / EARLY_PART), rc = 0;
	uint64_t t0 = fs_now_ms(), t1, t2;
	int before;

	if (!e || !e->upload_id)
		return 1;
	if (strcmp(e->key, it->key) || size == 0 ||
	    size > (uint64_t)MPU_PARTS_MAX * EARLY_PART ||
	    early_reserve(e, nparts) || early_recheck(fs, e) ||
	    early_up(e, nparts) == 0) {
		early_drop(fs, e); /* nothing to build on: the usual way */
		return 1;
	}
	before = early_up(e, nparts);
	/* Parts written again while the last ones went up go again. */
	for (int i = 0;
	     i < EARLY_FINISH_TRIES && !rc && early_up(e, nparts) < nparts;
	     i++) {
		struct early_grow g = { .fs = fs, .e = e };
		struct sync_parts p = { .upload_id = e->upload_id,
					.fd = fd,
					.size = size,
					.part = EARLY_PART,
					.first = early_first(e),
					.nparts = nparts,
					.etags = e->etags,
					.take = early_take,
					.done = early_done,
					.arg = &g };

		rc = sync_mpu_parts(fs, it, &p);
		if (g.gone)
			rc = -ENODATA;
		if (!rc)
			rc = early_recheck(fs, e);
	}
	if (!rc && early_up(e, nparts) < nparts)
		rc = -EAGAIN; /* still being written: a later pass */
	if (rc == -ENOENT || rc == -ENODATA) {
		early_drop(fs, e);
		return rc == -ENOENT ? 1 : rc;
	}
	if (rc)
		return rc;
	t1 = fs_now_ms();
	/* The object carries the early upload's write id for now. */
	memcpy(cc.wid, e->meta.wid, sizeof(cc.wid));
	rc = store_mpu_complete_if(fs->store, e->key, e->upload_id, nparts,
				   e->etags, &cc, out);
	if (rc == -ESTALE || rc == -ENOENT) {
		early_drop(fs, e); /* another writer's: as any upload */
		return rc;
	}
	if (rc) {
		early_doubt(fs, e, false);
		return rc;
	}
	t2 = fs_now_ms();
	early_doubt(fs, e, true); /* completed: a doubt until the commit */
	if (!meta_same(&e->meta, m)) {
		struct store_cond fc = { .kind = STORE_IF_MATCH };

		memcpy(fc.etag, out->etag, sizeof(fc.etag));
		memcpy(fc.wid, m->wid, sizeof(fc.wid));
		rc = store_copy_if(fs->store, e->key, e->key, m, &fc, out);
		if (rc)
			log_debug("fs: metadata of %s after its early upload: "
				  "%s",
				  e->key, strerror(-rc));
		else /* the object carries the upload's own id now */
			memcpy(e->meta.wid, m->wid, sizeof(e->meta.wid));
	}
	log_debug("fs: %s: %d of %d parts were up early; the rest took %" PRIu64
		  " ms, the completion %" PRIu64 " ms, the metadata %" PRIu64
		  " ms",
		  e->key, before, nparts, t1 - t0, t2 - t1, fs_now_ms() - t2);
	return rc;
}

/* See sync_int.h. */
void fs_early_wid(struct fs *fs, uint64_t ino, char wid[STORE_WID_MAX])
{
	struct fs_early *e = early_find(fs, ino);

	if (e && !e->upload_id && !e->declined)
		memcpy(wid, e->meta.wid, STORE_WID_MAX);
}

/* See sync_int.h. */
void fs_early_forget(struct fs *fs, uint64_t ino)
{
	struct fs_early *e = early_find(fs, ino);

	if (e)
		early_drop(fs, e);
}

/* See sync_int.h. */
void fs_early_sweep(struct fs *fs, const struct sync_item *items, size_t n)
{
	struct fs_early *e = fs->early, *next;

	/* Only this thread adds or removes entries now (sync_lock). */
	for (; e; e = next) {
		size_t i = 0;

		next = e->next;
		while (i < n && items[i].in.ino != e->ino)
			i++;
		if (i == n)
			early_drop(fs, e);
	}
}

/* See sync_int.h. */
void fs_early_stop(struct fs *fs)
{
	bool down = store_down(fs->store);

	while (fs->early) {
		struct fs_early *e = fs->early;

		/* The store away: the next start aborts it (journaled). */
		if (down) {
			fs->early = e->next;
			early_free(e);
		} else {
			early_drop(fs, e);
		}
	}
}
