/*
 * admin/cmds.c - the ctl commands, on the fs/ and cache APIs.
 *
 * Every command acts as root (uid 0): the socket is already restricted
 * to root and the gateway's own user, and the namespace is the
 * gateway's to manage.  Paths are walked name by name with fs_lookup(),
 * so a command can only ever name inodes of the namespace.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin_int.h"
#include "common/log.h"
#include "common/waiter.h"
#include "fs/fs.h"
#include "metrics/metrics.h"
#include "nfsd/nfsd.h"
#include "s3/store.h"

#define WARM_THREADS 4
#define WARM_PROGRESS_MS 250

static const struct fs_ctx root_ctx = { .loop = -1 };

static uint64_t mono_ms(void)
{
	return metrics_now_ns() / 1000000u;
}

static void fmt_bytes(uint64_t n, char *buf, size_t cap)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%" PRIu64 " B", n);
	else
		snprintf(buf, cap, "%.1f %s", v, units[u]);
}

static int revalidate(struct fs *fs, uint64_t dir, bool force)
{
	struct waiter w;

	/* fs_revalidate() may finish inline or on a worker. */
	waiter_init(&w);
	fs_revalidate(fs, &root_ctx, dir, force, waiter_done, &w);
	return waiter_wait(&w);
}

/*
 * PATH (under the export, or relative to its root) -> inode.  A name
 * that is not found is looked for again after a forced listing of its
 * directory, so that objects added behind the gateway's back are found
 * (what `refresh` is for).  *parent gets the directory holding it (the
 * root for the root).  0 or -errno.
 */
static int resolve(struct admin *a, const char *path, uint64_t *ino,
		   uint64_t *parent, struct fs_attr *attr)
{
	const char *exp = a->ctx.export_path;
	size_t elen = strlen(exp);
	char buf[FS_PATH_MAX + 1], *save = NULL, *name;
	uint64_t cur = FS_ROOT_INO;
	int rc;

	if (path[0] == '/') {
		if (strncmp(path, exp, elen) ||
		    (path[elen] != '/' && path[elen] != '\0'))
			return -EXDEV;
		path += elen;
	}
	if (strlen(path) > FS_PATH_MAX)
		return -ENAMETOOLONG;
	strcpy(buf, path);
	*parent = FS_ROOT_INO;
	rc = fs_getattr(a->ctx.fs, FS_ROOT_INO, attr);
	for (name = strtok_r(buf, "/", &save); !rc && name;
	     name = strtok_r(NULL, "/", &save)) {
		if (!strcmp(name, "."))
			continue;
		if (!strcmp(name, ".."))
			return -EINVAL;
		if (attr->type != FS_DIR)
			return -ENOTDIR;
		rc = revalidate(a->ctx.fs, cur, false);
		if (!rc)
			rc = fs_lookup(a->ctx.fs, &root_ctx, cur, name, ino,
				       attr);
		if (rc == -ENOENT && !(rc = revalidate(a->ctx.fs, cur, true)))
			rc = fs_lookup(a->ctx.fs, &root_ctx, cur, name, ino,
				       attr);
		if (!rc) {
			*parent = cur;
			cur = *ino;
		}
	}
	*ino = cur;
	return rc;
}

/* Answer err for a path that did not resolve. */
static void send_path_err(struct admin *a, int fd, const char *path, int rc)
{
	if (rc == -EXDEV)
		admin_send(fd, "err %s: not under the export %s", path,
			   a->ctx.export_path);
	else
		admin_send(fd, "err %s: %s", path, strerror(-rc));
}

/* The regular files of a subtree, for warm and evict. */
struct file_item {
	uint64_t ino, size;
};

struct file_list {
	struct file_item *v;
	size_t n, cap;
	uint64_t bytes;
	uint64_t *dirs; /* directories still to list */
	size_t ndirs, dcap;
	int err;
};

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap ? *cap : 64;
	void *q;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	q = realloc(*p, c * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

static int list_entry(void *arg, uint64_t ino, const char *name,
		      uint64_t cookie, const struct fs_attr *attr)
{
	struct file_list *l = arg;

	(void)cookie;
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return 0;
	if (attr->type == FS_DIR) {
		if ((l->err = grow((void **)&l->dirs, &l->dcap, l->ndirs + 1,
				   sizeof(*l->dirs))))
			return 1;
		l->dirs[l->ndirs++] = ino;
	} else if (attr->type == FS_REG) {
		if ((l->err = grow((void **)&l->v, &l->cap, l->n + 1,
				   sizeof(*l->v))))
			return 1;
		l->v[l->n++] = (struct file_item){ ino, attr->size };
		l->bytes += attr->size;
	}
	return 0;
}

/* Every regular file at or below ino (itself, if it is one). */
static int list_tree(struct admin *a, uint64_t ino, const struct fs_attr *attr,
		     struct file_list *l)
{
	memset(l, 0, sizeof(*l));
	if (attr->type == FS_REG)
		return list_entry(l, ino, "", 0, attr) ? l->err : 0;
	if (attr->type != FS_DIR)
		return 0;
	if ((l->err = grow((void **)&l->dirs, &l->dcap, 1, sizeof(*l->dirs))))
		return l->err;
	l->dirs[l->ndirs++] = ino;
	while (l->ndirs && !atomic_load(&a->stopping)) {
		uint64_t dir = l->dirs[--l->ndirs], cookie = 0, verf;
		struct fs_attr da;
		bool eof = false;
		int rc = revalidate(a->ctx.fs, dir, false);

		if (!rc)
			rc = fs_readdir(a->ctx.fs, &root_ctx, dir, cookie, true,
					list_entry, l, &verf, &eof, &da);
		if (l->err)
			return l->err;
		if (rc == -ESTALE || rc == -ENOENT)
			continue; /* removed while we walked */
		if (rc)
			return rc;
	}
	return atomic_load(&a->stopping) ? -ECANCELED : 0;
}

static void list_free(struct file_list *l)
{
	free(l->v);
	free(l->dirs);
}

/* ctl status's line of the async exports (exports(5) `async`). */
static void status_async(struct admin *a, int fd)
{
	char *rules = nfsd_async_rules(a->ctx.nfsd), *line, *save = NULL;

	if (!rules || !*rules) {
		admin_send(fd, "> async_exports: none (every change is on "
			       "disk before its reply)");
		free(rules);
		return;
	}
	for (line = strtok_r(rules, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		admin_send(fd,
			   "> async_exports: %s (answered before on disk; a "
			   "crash of the machine loses the last window)",
			   line);
	free(rules);
}

/* ctl status's lines of what the process holds (resources.c). */
static void status_resources(int fd, const struct admin_resources *r)
{
	char h[32], m[32];

	if (r->fds >= 0)
		admin_send(fd, "> open_fds: %d of %" PRIu64, r->fds,
			   r->fds_max);
	if (r->threads)
		admin_send(fd, "> threads: %u", r->threads);
	fmt_bytes(r->rss_bytes, h, sizeof(h));
	if (r->rss_bytes)
		admin_send(fd, "> resident_memory: %s", h);
	if (!r->have_db)
		return;
	fmt_bytes(r->db.map_used_bytes, h, sizeof(h));
	fmt_bytes(r->db.map_bytes, m, sizeof(m));
	admin_send(fd, "> db_map: %s used of %s", h, m);
	admin_send(fd, "> db_readers: %u of %u", r->db.readers,
		   r->db.readers_max);
	if (r->db.log_on)
		admin_send(fd,
			   "> db_log: on (last checkpoint %.1f s ago, %" PRIu64
			   " failed)",
			   (double)r->db.log_ckpt_age_ms / 1e3,
			   r->db.log_failures);
	else
		admin_send(
			fd, "> db_log: %s",
			r->db.log_failed
				? "given up after an error (see the log): "
				  "LMDB flushes every commit until a restart"
				: "off (a cluster node whose disk is a copy, "
				  "or no room for the log)");
}

static void cmd_status(struct admin *a, int fd)
{
	struct store_page page = { 0 };
	struct admin_stats st;
	uint64_t up, t0;
	char h[32];
	int rc;

	admin_stats_get(&a->ctx, &st);
	up = st.uptime_s;
	admin_send(fd,
		   "> uptime_seconds: %" PRIu64 " (%" PRIu64 "d %02" PRIu64
		   ":%02" PRIu64 ":%02" PRIu64 ")",
		   up, up / 86400, up / 3600 % 24, up / 60 % 60, up % 60);
	admin_send(fd, "> export: %s", a->ctx.export_path);
	status_async(a, fd);
	admin_send(fd, "> store_url: %s", a->ctx.store_url);
	admin_send(fd, "> clients: %" PRIu64, st.mounts);
	admin_send(fd, "> connections: %" PRIu64,
		   metrics_get(MET_CONN_ACCEPTED) -
			   metrics_get(MET_CONN_CLOSED));
	if (st.cache_err) {
		admin_send(fd, "> cache: %s: %s", a->ctx.cache_dir,
			   strerror(-st.cache_err));
	} else {
		fmt_bytes(st.cache_bytes, h, sizeof(h));
		admin_send(fd, "> cache_files: %" PRIu64, st.cache_files);
		admin_send(fd, "> cache_bytes: %" PRIu64 " (%s)",
			   st.cache_bytes, h);
	}
	status_resources(fd, &st.res);
	admin_send(fd, "> cache_hits: %" PRIu64, metrics_get(MET_CACHE_HITS));
	admin_send(fd, "> cache_misses: %" PRIu64,
		   metrics_get(MET_CACHE_MISSES));
	if (st.dirty_err) {
		admin_send(fd, "> dirty: %s", strerror(-st.dirty_err));
	} else {
		fmt_bytes(st.dirty_bytes, h, sizeof(h));
		admin_send(fd, "> dirty_files: %" PRIu64, st.dirty_files);
		admin_send(fd, "> dirty_bytes: %" PRIu64 " (%s)",
			   st.dirty_bytes, h);
		if (st.pending_ops && st.pending_rate >= 0.1)
			admin_send(fd,
				   "> pending_store_ops: %" PRIu64
				   " (oldest %.0f s, %.0f/s, done in ~%.0f s)",
				   st.pending_ops, st.pending_age_s,
				   st.pending_rate,
				   (double)st.pending_ops / st.pending_rate);
		else if (st.pending_ops)
			admin_send(
				fd,
				"> pending_store_ops: %" PRIu64
				" (oldest %.0f s, none ran in the last minute)",
				st.pending_ops, st.pending_age_s);
		else
			admin_send(fd, "> pending_store_ops: 0");
		admin_send(fd, "> upload_lag_seconds: %.0f", st.upload_lag_s);
		admin_send(fd, "> uploads_failing: %" PRIu64, st.failing);
		if (st.failing)
			admin_send(fd, "> upload_failing_longest: %s: %s",
				   st.failing_key, strerror(-st.failing_err));
	}
	/* A one-key listing: reachable, credentials good, bucket there.
	 * Not while it is known down: that would wait for its retries. */
	t0 = mono_ms();
	rc = store_down(a->ctx.store)
		     ? -EAGAIN
		     : store_list(a->ctx.store, "", '/', NULL, 1, &page);
	if (rc)
		admin_send(fd, "> store: error: %s (%" PRIu64 " ms)",
			   strerror(-rc), mono_ms() - t0);
	else
		admin_send(fd, "> store: ok (%" PRIu64 " ms)", mono_ms() - t0);
	store_page_free(&page);
	admin_send(fd, "> store_state: %s",
		   store_down(a->ctx.store)
			   ? "down (answering from the cache; changes wait "
			     "for the store)"
			   : "up");
	admin_send(fd, "> stale_answers: %" PRIu64,
		   metrics_get(MET_STALE_ANSWERS));
	{
		struct fs_outage_stat o;

		fs_outage_stat(a->ctx.fs, &o);
		if (o.down_ms)
			admin_send(fd,
				   "> last_outage: %" PRIu64 " s away, %" PRIu64
				   " names made meanwhile, %" PRIu64
				   " conflicts met %s",
				   o.down_ms / 1000, o.names, o.conflicts,
				   o.replaying ? "so far (going up)"
					       : "going up (all up)");
	}
	uint64_t aside = metrics_get(MET_CONFLICTS_ASIDE),
		 again = metrics_get(MET_CONFLICTS_REUPLOADED),
		 lost = metrics_get(MET_CONFLICTS_LOST);
	admin_send(fd,
		   "> conflicts: %" PRIu64 " (%" PRIu64 " kept aside, %" PRIu64
		   " uploaded again, %" PRIu64 " lost)",
		   aside + again + lost, aside, again, lost);
	admin_send(fd, "ok");
}

/* A flush on a thread of its own, so that its command can report. */
struct flush_run {
	struct fs *fs;
	atomic_bool cancel;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int rc;
	char why[FS_KEY_TEXT_MAX + 200];
};

static void *flush_main(void *p)
{
	struct flush_run *r = p;
	int rc = fs_flush_wait(r->fs, 0, &r->cancel, r->why, sizeof(r->why));

	pthread_mutex_lock(&r->lock);
	r->rc = rc;
	r->done = true;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* Bytes sent to the store so far: PUTs and multipart parts. */
static uint64_t uploaded(void)
{
	return metrics_get(MET_STORE_BYTES_PUT) +
	       metrics_get(MET_STORE_BYTES_MPU);
}

/*
 * While r runs: a "progress" line each FLUSH_PROGRESS_MS (or ten times
 * what counting the backlog took, with millions of files dirty): files
 * gone up of those there were, bytes sent to the store of those left.
 * A client gone, or the gateway stopping, cancels the flush.
 */
#define FLUSH_PROGRESS_MS 1000
static void flush_report(struct admin *a, int fd, struct flush_run *r,
			 uint64_t t0)
{
	uint64_t put0 = uploaded(), most = 0, every = FLUSH_PROGRESS_MS;
	struct fs_dirty_stat ds;

	if (!fs_dirty_stat(a->ctx.fs, &ds))
		most = ds.files + ds.pending;
	pthread_mutex_lock(&r->lock);
	while (!r->done) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (time_t)(every / 1000);
		ts.tv_nsec += (long)(every % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&r->cond, &r->lock, &ts);
		if (r->done)
			break;
		pthread_mutex_unlock(&r->lock);
		uint64_t c0 = mono_ms();
		int rc = fs_dirty_stat(a->ctx.fs, &ds);
		uint64_t cost = mono_ms() - c0, left = ds.files + ds.pending;
		uint64_t sent = uploaded() - put0;

		every = cost * 10 > FLUSH_PROGRESS_MS ? cost * 10
						      : FLUSH_PROGRESS_MS;
		if (left > most)
			most = left; /* new work came in */
		if (!rc && admin_send(fd,
				      "progress %" PRIu64 " %" PRIu64
				      " %" PRIu64 " %" PRIu64 " 0 %" PRIu64,
				      most - left, most, sent, sent + ds.bytes,
				      mono_ms() - t0))
			atomic_store(&r->cancel, true); /* nobody waits */
		if (atomic_load(&a->stopping))
			atomic_store(&r->cancel, true);
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
}

static void cmd_flush(struct admin *a, int fd, const char *path)
{
	struct flush_run r = { .fs = a->ctx.fs };
	struct fs_attr attr;
	uint64_t ino, parent, t0 = mono_ms();
	pthread_t tid;
	int rc;

	/* The syncer keeps the store's order of operations (a delete never
	 * overtakes an upload), so one path cannot jump the queue: a flush
	 * of PATH waits for everything, which includes PATH. */
	if (path && (rc = resolve(a, path, &ino, &parent, &attr))) {
		send_path_err(a, fd, path, rc);
		return;
	}
	atomic_init(&r.cancel, false);
	pthread_mutex_init(&r.lock, NULL);
	pthread_cond_init(&r.cond, NULL);
	if (pthread_create(&tid, NULL, flush_main, &r)) {
		flush_main(&r); /* no thread: no progress either */
	} else {
		flush_report(a, fd, &r, t0);
		pthread_join(tid, NULL);
	}
	pthread_cond_destroy(&r.cond);
	pthread_mutex_destroy(&r.lock);
	if (r.rc) {
		log_warn("ctl: flush gave up: %s", r.why);
		admin_send(fd, "err flush: %s", r.why);
		return;
	}
	log_info("ctl: flushed%s%s", path ? " for " : "", path ? path : "");
	admin_send(fd,
		   "> flushed: every change is in the store (%" PRIu64 " ms)",
		   mono_ms() - t0);
	admin_send(fd, "ok");
}

static void cmd_refresh(struct admin *a, int fd, const char *path)
{
	struct fs_attr attr;
	uint64_t ino, parent;
	int rc = resolve(a, path, &ino, &parent, &attr);

	if (rc) {
		send_path_err(a, fd, path, rc);
		return;
	}
	/* A file is an entry of its directory's listing. */
	rc = revalidate(a->ctx.fs, attr.type == FS_DIR ? ino : parent, true);
	if (rc) {
		admin_send(fd, "err refresh %s: %s", path, strerror(-rc));
		return;
	}
	log_info("ctl: refreshed %s", path);
	admin_send(fd, "> refreshed %s from the store", path);
	admin_send(fd, "ok");
}

struct warm {
	struct admin *a;
	const struct file_list *l;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t next, done, failed, running;
	uint64_t done_bytes, fetched_bytes, fetched_files;
	int first_err;
	bool abort; /* the client went away */
};

static void *warm_main(void *p)
{
	struct warm *w = p;

	pthread_mutex_lock(&w->lock);
	while (w->next < w->l->n && !w->abort &&
	       !atomic_load(&w->a->stopping)) {
		const struct file_item *it = &w->l->v[w->next++];
		bool fetched;
		int rc;

		pthread_mutex_unlock(&w->lock);
		rc = fs_warm(w->a->ctx.fs, it->ino, &fetched);
		pthread_mutex_lock(&w->lock);
		w->done++;
		w->done_bytes += it->size;
		if (rc == -ESTALE || rc == -ENOENT)
			continue; /* removed meanwhile: nothing to warm */
		if (rc) {
			w->failed++;
			if (!w->first_err)
				w->first_err = rc;
		} else if (fetched) {
			w->fetched_files++;
			w->fetched_bytes += it->size;
		}
	}
	if (--w->running == 0)
		pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static int warm_progress(int fd, const struct warm *w, uint64_t t0)
{
	return admin_send(fd,
			  "progress %zu %zu %" PRIu64 " %" PRIu64 " %" PRIu64
			  " %" PRIu64,
			  w->done, w->l->n, w->done_bytes, w->l->bytes,
			  w->fetched_bytes, mono_ms() - t0);
}

static void cmd_warm(struct admin *a, int fd, const char *path)
{
	struct warm w = { .a = a };
	pthread_t tids[WARM_THREADS];
	bool started[WARM_THREADS];
	struct file_list l;
	struct fs_attr attr;
	uint64_t ino, parent, t0 = mono_ms();
	char h[32];
	int rc = resolve(a, path, &ino, &parent, &attr);

	if (rc) {
		send_path_err(a, fd, path, rc);
		return;
	}
	rc = list_tree(a, ino, &attr, &l);
	if (rc) {
		list_free(&l);
		admin_send(fd, "err listing %s: %s", path, strerror(-rc));
		return;
	}
	w.l = &l;
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
	pthread_mutex_lock(&w.lock);
	for (int i = 0; i < WARM_THREADS; i++) {
		started[i] = pthread_create(&tids[i], NULL, warm_main, &w) == 0;
		w.running += started[i];
	}
	if (!w.running)
		w.first_err = -EAGAIN;
	while (w.running) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += WARM_PROGRESS_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&w.cond, &w.lock, &ts);
		if (!w.abort && warm_progress(fd, &w, t0))
			w.abort = true; /* stop fetching for nobody */
	}
	pthread_mutex_unlock(&w.lock);
	for (int i = 0; i < WARM_THREADS; i++)
		if (started[i])
			pthread_join(tids[i], NULL);
	warm_progress(fd, &w, t0);
	fmt_bytes(w.fetched_bytes, h, sizeof(h));
	log_info("ctl: warm %s: %zu files, %" PRIu64
		 " fetched (%s), %zu failed",
		 path, l.n, w.fetched_files, h, w.failed);
	admin_send(fd,
		   "> warmed %s: %zu files, %" PRIu64
		   " fetched (%s) in %.1f s, %zu failed",
		   path, w.done, w.fetched_files, h,
		   (double)(mono_ms() - t0) / 1000, w.failed);
	if (w.first_err)
		admin_send(fd, "err %zu files could not be fetched: %s",
			   w.failed, strerror(-w.first_err));
	else if (w.done < l.n)
		admin_send(fd, "err stopped after %zu of %zu files", w.done,
			   l.n);
	else
		admin_send(fd, "ok");
	pthread_cond_destroy(&w.cond);
	pthread_mutex_destroy(&w.lock);
	list_free(&l);
}

static void cmd_evict(struct admin *a, int fd, const char *path)
{
	struct file_list l;
	struct fs_attr attr;
	uint64_t ino, parent, freed = 0, dropped = 0, busy = 0;
	char h[32];
	int rc = resolve(a, path, &ino, &parent, &attr), first = 0;

	if (rc) {
		send_path_err(a, fd, path, rc);
		return;
	}
	rc = list_tree(a, ino, &attr, &l);
	for (size_t i = 0; !rc && i < l.n && !atomic_load(&a->stopping); i++) {
		uint64_t n;
		int err = fs_evict(a->ctx.fs, l.v[i].ino, &n);

		if (err == -EBUSY)
			busy++;
		else if (err && err != -ESTALE && !first)
			first = err;
		else if (!err && n) {
			dropped++;
			freed += n;
		}
	}
	list_free(&l);
	if (rc) {
		admin_send(fd, "err listing %s: %s", path, strerror(-rc));
		return;
	}
	fmt_bytes(freed, h, sizeof(h));
	log_info("ctl: evict %s: %" PRIu64 " files dropped (%s), %" PRIu64
		 " with changes kept",
		 path, dropped, h, busy);
	admin_send(fd,
		   "> evicted %s: %" PRIu64 " files dropped (%s); %" PRIu64
		   " not yet in the store kept",
		   path, dropped, h, busy);
	if (first)
		admin_send(fd, "err %s", strerror(-first));
	else
		admin_send(fd, "ok");
}

static void cmd_clients(struct admin *a, int fd)
{
	struct nfsd *n = a->ctx.nfsd;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f) {
		admin_send(fd, "err out of memory");
		return;
	}
	/* Copied out: MNT takes this lock on the event loops, and a slow
	 * ctl reader must never hold them up. */
	pthread_mutex_lock(&n->mounts_lock);
	for (struct nfsd_mount *m = n->mounts; m; m = m->next)
		fprintf(f, "%s %s\n", m->host, m->path);
	pthread_mutex_unlock(&n->mounts_lock);
	if (fclose(f)) {
		free(text);
		admin_send(fd, "err out of memory");
		return;
	}
	for (char *line = text, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
		*nl = '\0';
		if (admin_send(fd, "> %s", line))
			break;
	}
	free(text);
	admin_send(fd, "ok");
}

void admin_cmd_run(struct admin *a, int fd, char *line)
{
	char *arg = strchr(line, ' ');

	if (arg)
		*arg++ = '\0';
	if (arg && !*arg)
		arg = NULL;
	if (!strcmp(line, "status") && !arg)
		cmd_status(a, fd);
	else if (!strcmp(line, "flush"))
		cmd_flush(a, fd, arg);
	else if (!strcmp(line, "refresh") && arg)
		cmd_refresh(a, fd, arg);
	else if (!strcmp(line, "warm") && arg)
		cmd_warm(a, fd, arg);
	else if (!strcmp(line, "evict") && arg)
		cmd_evict(a, fd, arg);
	else if (!strcmp(line, "clients") && !arg)
		cmd_clients(a, fd);
	else if (!strcmp(line, "ready") && !arg)
		admin_cmd_ready(a, fd);
	else if (!strcmp(line, "stats") && !arg)
		admin_cmd_stats(a, fd);
	else if (!strcmp(line, "fsck") && (!arg || !strcmp(arg, "repair")))
		admin_cmd_fsck(a, fd, arg != NULL);
	else
		admin_send(fd,
			   "err unknown command or wrong arguments: '%.64s'",
			   line);
}
