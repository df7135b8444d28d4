/* items.c: the benchmark items of items.h on the raw libnfs async API.
 *
 * Every item is a stream of operations kept Q deep: each of the worker's Q
 * slots holds one operation (an RPC, or for small files a CREATE -> WRITE ->
 * COMMIT chain), and a slot's completion callback issues its next operation
 * at once, so the connection never runs dry while the event loop turns.
 * Rate items issue until --duration has passed and then drain; the others
 * stop when the file or the file list is done.
 */
#include "items.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pattern.h"

struct slot {
	struct worker *w;
	uint64_t t0; /* when the operation (or the file) started */
	uint64_t off;
	uint32_t len;
	uint32_t file; /* small-file index */
	struct bfh fh; /* small file being worked on */
	char *buf;     /* write payload, pattern-filled once */
};

/* Pattern tags: the worker, what kind of file, which small file. */
enum { TAG_BIG = 1, TAG_SMALL = 2, TAG_IO = 3 };
#define TAG(w, kind, n) \
	(((uint64_t)((w)->id + 1) << 40) | ((uint64_t)(kind) << 32) | (n))

#define MIB (1024u * 1024u)
#define ACCESS_ALL 0x3f /* READ LOOKUP MODIFY EXTEND DELETE EXECUTE */

static void worker_abort(struct worker *w)
{
	atomic_store_explicit(w->abort, 1, memory_order_relaxed);
}

/* Whether a slot that just finished should issue another operation. */
static int more(struct worker *w)
{
	if (w->conn.failed) {
		worker_abort(w);
		return 0;
	}
	if (atomic_load_explicit(w->abort, memory_order_relaxed))
		return 0;
	return !w->job.deadline_ns || w->now < w->job.deadline_ns;
}

static void slot_retire(struct slot *s)
{
	s->w->inflight--;
}

/* The end of one operation of s: issue the next one, or retire the slot. */
static void slot_next(struct slot *s)
{
	if (!more(s->w) || s->w->job.issue(s) <= 0)
		slot_retire(s);
}

static void op_done(struct slot *s, uint32_t bytes)
{
	struct worker *w = s->w;
	w->now = bench_now_ns();
	hist_record(&w->res.hist, w->now - s->t0);
	w->res.ops++;
	w->res.bytes += bytes;
	atomic_store_explicit(&w->progress, w->res.bytes, memory_order_relaxed);
}

static void file_done(struct slot *s)
{
	struct worker *w = s->w;
	w->now = bench_now_ns();
	hist_record(&w->res.hist, w->now - s->t0);
	w->res.files++;
	atomic_store_explicit(&w->progress, w->res.files, memory_order_relaxed);
}

/* Runs the job in w->job with every slot busy until it is done or failed. */
static int pump(struct worker *w)
{
	w->inflight = 0;
	w->now = bench_now_ns();
	for (int i = 0; i < w->cfg->depth && more(w); i++) {
		int r = w->job.issue(&w->slots[i]);
		if (r <= 0)
			break;
		w->inflight++;
	}
	/* A broken socket fails every call in flight inside conn_poll(), so
	 * inflight reaches 0 either way. */
	while (w->inflight > 0)
		conn_poll(&w->conn, 1000);
	if (w->conn.failed) {
		worker_abort(w);
		return -1;
	}
	return 0;
}

static int queue_failed(struct worker *w, const char *proc)
{
	conn_fail(&w->conn, proc, "cannot queue: %s",
		  rpc_get_error(w->conn.rpc));
	return -1;
}

static uint64_t rng_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* ---- file I/O: big files and the 4k / 1m items ---- */

static void io_write_cb(struct rpc_context *rpc, int status, void *data,
			void *priv)
{
	struct slot *s = priv;
	struct worker *w = s->w;
	(void)rpc;
	if (conn_check(&w->conn, "WRITE", status, data) < 0)
		goto out_retire;
	WRITE3resok *ok = &((WRITE3res *)data)->WRITE3res_u.resok;
	if (ok->count != s->len) {
		conn_fail(&w->conn, "WRITE",
			  "short write: %u of %u bytes at offset %" PRIu64,
			  ok->count, s->len, s->off);
		goto out_retire;
	}
	op_done(s, s->len);
	slot_next(s);
	return;
out_retire:
	slot_retire(s);
}

static void io_read_cb(struct rpc_context *rpc, int status, void *data,
		       void *priv)
{
	struct slot *s = priv;
	struct worker *w = s->w;
	(void)rpc;
	if (conn_check(&w->conn, "READ", status, data) < 0)
		goto out_retire;
	READ3resok *ok = &((READ3res *)data)->READ3res_u.resok;
	if (ok->count != s->len || ok->data.data_len != s->len) {
		conn_fail(&w->conn, "READ",
			  "short read: %u of %u bytes at offset %" PRIu64,
			  ok->data.data_len, s->len, s->off);
		goto out_retire;
	}
	uint64_t bad;
	if (w->job.verify && pattern_check(ok->data.data_val, w->job.tag,
					   s->off, s->len, &bad) < 0) {
		conn_fail(&w->conn, "READ",
			  "data mismatch at offset %" PRIu64
			  " (file tag %#" PRIx64 ")",
			  bad, w->job.tag);
		goto out_retire;
	}
	op_done(s, s->len);
	slot_next(s);
	return;
out_retire:
	slot_retire(s);
}

static int io_issue(struct slot *s)
{
	struct worker *w = s->w;
	struct job *j = &w->job;
	uint64_t off;
	uint32_t len = j->io;
	if (j->random) {
		off = rng_next(&j->rng) % (j->size / j->io) * j->io;
	} else {
		if (j->next >= j->size) {
			if (!j->deadline_ns)
				return 0;
			j->next = 0; /* a rate item wraps around the file */
		}
		off = j->next;
		if (len > j->size - off)
			len = (uint32_t)(j->size - off);
		j->next += len;
	}
	s->off = off;
	s->len = len;
	s->t0 = w->now;
	if (j->write) {
		pattern_stamp(s->buf, j->tag, off, len);
		WRITE3args a = { .file = bfh_arg(&j->fh),
				 .offset = off,
				 .count = len,
				 .stable = UNSTABLE,
				 .data = { len, s->buf } };
		if (rpc_nfs3_write_async(w->conn.rpc, io_write_cb, &a, s) < 0)
			return queue_failed(w, "WRITE");
	} else {
		READ3args a = { .file = bfh_arg(&j->fh),
				.offset = off,
				.count = len };
		if (rpc_nfs3_read_async(w->conn.rpc, io_read_cb, &a, s) < 0)
			return queue_failed(w, "READ");
	}
	return 1;
}

static uint32_t io_size(struct worker *w, uint64_t want, int write)
{
	uint32_t max = write ? w->conn.wtmax : w->conn.rtmax;
	if (max > w->buf_size)
		max = w->buf_size;
	uint32_t n = want < max ? (uint32_t)want : max;
	/* Whole pages keep every offset page-aligned, as pattern_stamp() needs;
	 * a server limit below a page is not worth a special case. */
	n -= n % PATTERN_PAGE;
	return n ? n : PATTERN_PAGE;
}

/* Streams READs or WRITEs over fh; one pass when duration is 0, else until
 * it is over.  Writes end with a COMMIT, inside the timed part: a write is
 * not done until it is stable. */
static int io_run(struct worker *w, const struct bfh *fh, uint64_t tag,
		  uint64_t size, uint64_t want_io, int write, int random,
		  double duration)
{
	struct job *j = &w->job;
	memset(j, 0, sizeof(*j));
	j->issue = io_issue;
	j->fh = *fh;
	j->tag = tag;
	j->size = size;
	j->io = io_size(w, want_io, write);
	j->write = write;
	j->random = random;
	j->verify = w->cfg->verify && !write;
	j->rng = 0x2545f4914f6cdd1dull * (uint64_t)(w->id + 1);
	w->res.start_ns = bench_now_ns();
	if (duration > 0)
		j->deadline_ns = w->res.start_ns + (uint64_t)(duration * 1e9);
	int r = pump(w);
	if (r == 0 && write)
		r = conn_commit(&w->conn, fh);
	w->res.end_ns = bench_now_ns();
	if (r < 0)
		worker_abort(w);
	return r;
}

/* ---- small files: CREATE -> WRITE... -> COMMIT, LOOKUP -> READ..., LOOKUP -> GETATTR ---- */

enum small_kind { SMALL_WRITE, SMALL_READ, SMALL_STAT, SMALL_CREATE };

/* The small files' names: s.N, or s.N.r once the rename item ran (the
 * names --renamed runs find). */
static void small_name(const struct worker *w, char *buf, size_t len,
		       uint32_t file)
{
	snprintf(buf, len, w->cfg->renamed ? "s.%u.r" : "s.%u", file);
}

/* The empty files of the create and readdir items. */
static void create_name(char *buf, size_t len, uint32_t file)
{
	snprintf(buf, len, "c.%u", file);
}

/* The files of the visibility item. */
static void seen_name(char *buf, size_t len, uint32_t file)
{
	snprintf(buf, len, "v.%u", file);
}

static void small_step(struct slot *s);

static void small_write_cb(struct rpc_context *rpc, int status, void *data,
			   void *priv)
{
	struct slot *s = priv;
	struct worker *w = s->w;
	(void)rpc;
	if (conn_check(&w->conn, "WRITE", status, data) < 0) {
		slot_retire(s);
		return;
	}
	WRITE3resok *ok = &((WRITE3res *)data)->WRITE3res_u.resok;
	if (ok->count != s->len) {
		conn_fail(&w->conn, "WRITE", "short write: %u of %u bytes",
			  ok->count, s->len);
		slot_retire(s);
		return;
	}
	w->res.ops++;
	w->res.bytes += s->len;
	s->off += s->len;
	small_step(s);
}

static void small_read_cb(struct rpc_context *rpc, int status, void *data,
			  void *priv)
{
	struct slot *s = priv;
	struct worker *w = s->w;
	(void)rpc;
	if (conn_check(&w->conn, "READ", status, data) < 0) {
		slot_retire(s);
		return;
	}
	READ3resok *ok = &((READ3res *)data)->READ3res_u.resok;
	uint64_t bad;
	if (ok->data.data_len != s->len) {
		conn_fail(&w->conn, "READ",
			  "short read: %u of %u bytes of s.%u",
			  ok->data.data_len, s->len, s->file);
	} else if (w->job.verify &&
		   pattern_check(ok->data.data_val, TAG(w, TAG_SMALL, s->file),
				 s->off, s->len, &bad) < 0) {
		conn_fail(&w->conn, "READ",
			  "data mismatch in s.%u at offset %" PRIu64, s->file,
			  bad);
	}
	if (w->conn.failed) {
		slot_retire(s);
		return;
	}
	w->res.ops++;
	w->res.bytes += s->len;
	s->off += s->len;
	small_step(s);
}

static void small_commit_cb(struct rpc_context *rpc, int status, void *data,
			    void *priv)
{
	struct slot *s = priv;
	(void)rpc;
	if (conn_check(&s->w->conn, "COMMIT", status, data) < 0) {
		slot_retire(s);
		return;
	}
	s->w->res.ops++;
	file_done(s);
	slot_next(s);
}

static void small_getattr_cb(struct rpc_context *rpc, int status, void *data,
			     void *priv)
{
	struct slot *s = priv;
	struct worker *w = s->w;
	(void)rpc;
	if (conn_check(&w->conn, "GETATTR", status, data) < 0) {
		slot_retire(s);
		return;
	}
	uint64_t size =
		((GETATTR3res *)data)->GETATTR3res_u.resok.obj_attributes.size;
	if (w->job.verify && size != w->cfg->small_file_size) {
		conn_fail(&w->conn, "GETATTR",
			  "s.%u has size %" PRIu64 ", wrote %" PRIu64, s->file,
			  size, w->cfg->small_file_size);
		slot_retire(s);
		return;
	}
	w->res.ops++;
	file_done(s);
	slot_next(s);
}

/* Issues the next RPC of s's file: more data, or the COMMIT / GETATTR that
 * ends it. */
static void small_step(struct slot *s)
{
	struct worker *w = s->w;
	uint64_t size = w->cfg->small_file_size;
	nfs_fh3 fh = bfh_arg(&s->fh);
	int r;
	if (w->job.proc == SMALL_STAT) {
		GETATTR3args a = { .object = fh };
		r = rpc_nfs3_getattr_async(w->conn.rpc, small_getattr_cb, &a,
					   s);
	} else if (s->off < size) {
		s->len = size - s->off < w->job.io ? (uint32_t)(size - s->off)
						   : w->job.io;
		if (w->job.proc == SMALL_WRITE) {
			pattern_stamp(s->buf, TAG(w, TAG_SMALL, s->file),
				      s->off, s->len);
			WRITE3args a = { .file = fh,
					 .offset = s->off,
					 .count = s->len,
					 .stable = UNSTABLE,
					 .data = { s->len, s->buf } };
			r = rpc_nfs3_write_async(w->conn.rpc, small_write_cb,
						 &a, s);
		} else {
			READ3args a = { .file = fh,
					.offset = s->off,
					.count = s->len };
			r = rpc_nfs3_read_async(w->conn.rpc, small_read_cb, &a,
						s);
		}
	} else if (w->job.proc == SMALL_WRITE) {
		COMMIT3args a = { .file = fh };
		r = rpc_nfs3_commit_async(w->conn.rpc, small_commit_cb, &a, s);
	} else {
		file_done(s);
		slot_next(s);
		return;
	}
	if (r < 0) {
		queue_failed(w, "small file");
		slot_retire(s);
	}
}

/* The handle a CREATE or LOOKUP returned becomes the slot's file. */
static int small_take_fh(struct slot *s, const char *proc, const nfs_fh3 *fh)
{
	if (!fh) {
		conn_fail(&s->w->conn, proc,
			  "server returned no file handle for s.%u", s->file);
		return -1;
	}
	if (fh->data.data_len > sizeof(s->fh.data)) {
		conn_fail(&s->w->conn, proc, "file handle of %u bytes",
			  fh->data.data_len);
		return -1;
	}
	s->fh.len = fh->data.data_len;
	memcpy(s->fh.data, fh->data.data_val, fh->data.data_len);
	return 0;
}

static void small_create_cb(struct rpc_context *rpc, int status, void *data,
			    void *priv)
{
	struct slot *s = priv;
	(void)rpc;
	if (conn_check(&s->w->conn, "CREATE", status, data) < 0) {
		slot_retire(s);
		return;
	}
	post_op_fh3 *obj = &((CREATE3res *)data)->CREATE3res_u.resok.obj;
	if (small_take_fh(s, "CREATE",
			  obj->handle_follows ? &obj->post_op_fh3_u.handle
					      : NULL) < 0) {
		slot_retire(s);
		return;
	}
	s->w->res.ops++;
	if (s->w->job.proc == SMALL_CREATE) {
		file_done(s);
		slot_next(s);
		return;
	}
	small_step(s);
}

static void small_lookup_cb(struct rpc_context *rpc, int status, void *data,
			    void *priv)
{
	struct slot *s = priv;
	(void)rpc;
	if (conn_check(&s->w->conn, "LOOKUP", status, data) < 0 ||
	    small_take_fh(s, "LOOKUP",
			  &((LOOKUP3res *)data)->LOOKUP3res_u.resok.object) <
		    0) {
		slot_retire(s);
		return;
	}
	s->w->res.ops++;
	small_step(s);
}

/* Starts the slot on the next small file: CREATE it, or LOOKUP its name. */
static int small_issue(struct slot *s)
{
	struct worker *w = s->w;
	struct job *j = &w->job;
	if (j->next >= j->total)
		return 0;
	s->file = (uint32_t)j->next++;
	s->off = 0;
	s->t0 = w->now;
	char name[32];
	if (j->proc == SMALL_CREATE)
		create_name(name, sizeof(name), s->file);
	else
		small_name(w, name, sizeof(name), s->file);
	diropargs3 where = { .dir = bfh_arg(&w->dir), .name = name };
	if (j->proc == SMALL_CREATE) {
		CREATE3args a = { .where = where };
		sattr3 *sa = &a.how.createhow3_u.obj_attributes;
		a.how.mode = UNCHECKED;
		sa->mode.set_it = 1;
		sa->mode.set_mode3_u.mode = 0644;
		if (rpc_nfs3_create_async(w->conn.rpc, small_create_cb, &a, s) <
		    0)
			return queue_failed(w, "CREATE");
	} else if (j->proc == SMALL_WRITE) {
		CREATE3args a = { .where = where };
		sattr3 *sa = &a.how.createhow3_u.obj_attributes;
		a.how.mode = UNCHECKED;
		sa->mode.set_it = 1;
		sa->mode.set_mode3_u.mode = 0644;
		sa->size.set_it =
			1; /* UNCHECKED on a leftover file truncates it */
		sa->size.set_size3_u.size = 0;
		if (rpc_nfs3_create_async(w->conn.rpc, small_create_cb, &a, s) <
		    0)
			return queue_failed(w, "CREATE");
	} else {
		LOOKUP3args a = { .what = where };
		if (rpc_nfs3_lookup_async(w->conn.rpc, small_lookup_cb, &a, s) <
		    0)
			return queue_failed(w, "LOOKUP");
	}
	return 1;
}

static int small_run(struct worker *w, enum small_kind kind)
{
	struct job *j = &w->job;
	memset(j, 0, sizeof(*j));
	j->issue = small_issue;
	j->proc = kind;
	j->total = w->cfg->small_file_count;
	j->io = io_size(w, w->cfg->block_size, kind == SMALL_WRITE);
	j->verify = w->cfg->verify;
	if (kind == SMALL_WRITE)
		w->tried_small = 1;
	if (kind == SMALL_CREATE)
		w->tried_created = 1;
	w->res.start_ns = bench_now_ns();
	int r = pump(w);
	w->res.end_ns = bench_now_ns();
	if (r == 0 && kind == SMALL_WRITE)
		w->have_small = 1;
	if (r == 0 && kind == SMALL_CREATE)
		w->have_created = 1;
	return r;
}

/* ---- metadata and NULL: one RPC per operation ---- */

enum meta_proc { META_NULL, META_GETATTR, META_LOOKUP, META_ACCESS };
static const char *const meta_names[] = { "NULL", "GETATTR", "LOOKUP",
					  "ACCESS" };

static void meta_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct slot *s = priv;
	struct worker *w = s->w;
	const char *proc = meta_names[w->job.proc];
	(void)rpc;
	/* NULL's reply carries no nfsstat3 to look at. */
	if ((w->job.proc != META_NULL || status != RPC_STATUS_SUCCESS) &&
	    conn_check(&w->conn, proc, status, data) < 0) {
		slot_retire(s);
		return;
	}
	op_done(s, 0);
	slot_next(s);
}

static int meta_issue(struct slot *s)
{
	struct worker *w = s->w;
	struct rpc_context *rpc = w->conn.rpc;
	int r;
	s->t0 = w->now;
	switch (w->job.proc) {
	case META_NULL:
		r = rpc_nfs3_null_async(rpc, meta_cb, s);
		break;
	case META_GETATTR: {
		GETATTR3args a = { .object = bfh_arg(&w->meta) };
		r = rpc_nfs3_getattr_async(rpc, meta_cb, &a, s);
		break;
	}
	case META_LOOKUP: {
		LOOKUP3args a = { .what = { .dir = bfh_arg(&w->dir),
					    .name = "meta" } };
		r = rpc_nfs3_lookup_async(rpc, meta_cb, &a, s);
		break;
	}
	default: {
		ACCESS3args a = { .object = bfh_arg(&w->meta),
				  .access = ACCESS_ALL };
		r = rpc_nfs3_access_async(rpc, meta_cb, &a, s);
		break;
	}
	}
	return r < 0 ? queue_failed(w, meta_names[w->job.proc]) : 1;
}

static int meta_run(struct worker *w, enum meta_proc proc)
{
	struct job *j = &w->job;
	memset(j, 0, sizeof(*j));
	j->issue = meta_issue;
	j->proc = proc;
	w->res.start_ns = bench_now_ns();
	j->deadline_ns = w->res.start_ns + (uint64_t)(w->cfg->duration * 1e9);
	int r = pump(w);
	w->res.end_ns = bench_now_ns();
	return r;
}

/* ---- the items ---- */

static int prep_none(struct worker *w)
{
	(void)w;
	return 0;
}

static int prep_write_big(struct worker *w)
{
	w->have_big = 0;
	return conn_create(&w->conn, &w->dir, "big", &w->big);
}

static int run_write_big(struct worker *w)
{
	int r = io_run(w, &w->big, TAG(w, TAG_BIG, 0), w->cfg->big_file_size,
		       w->cfg->block_size, 1, 0, 0);
	w->have_big = r == 0;
	return r;
}

/* read-big reads what write-big wrote; run alone, it writes the file first,
 * or with --reuse reads the one an earlier --keep run left, so that a read
 * can be timed against a server whose cache has never seen the data. */
static int prep_read_big(struct worker *w)
{
	if (w->have_big)
		return 0;
	if (w->cfg->reuse)
		return conn_lookup(&w->conn, &w->dir, "big", &w->big);
	return prep_write_big(w) < 0 ? -1 : run_write_big(w);
}

static int run_read_big(struct worker *w)
{
	return io_run(w, &w->big, TAG(w, TAG_BIG, 0), w->cfg->big_file_size,
		      w->cfg->block_size, 0, 0, 0);
}

static int run_write_small(struct worker *w)
{
	return small_run(w, SMALL_WRITE);
}

/* The small files: written first, or with --reuse the ones an earlier
 * --keep run left (same -p and --small-file-count). */
static int prep_small(struct worker *w)
{
	if (w->have_small)
		return 0;
	if (w->cfg->reuse) {
		w->have_small = w->tried_small = 1;
		return 0;
	}
	return small_run(w, SMALL_WRITE);
}

static int run_read_small(struct worker *w)
{
	return small_run(w, SMALL_READ);
}

static int run_stat(struct worker *w)
{
	return small_run(w, SMALL_STAT);
}

/* The 4k and 1m items share one file, written in full and then read once,
 * so that reads are served from the server's cache, not from a hole. */
static int prep_io(struct worker *w)
{
	if (w->have_io)
		return 0;
	if (conn_create(&w->conn, &w->dir, "io", &w->io) < 0)
		return -1;
	uint64_t tag = TAG(w, TAG_IO, 0);
	if (io_run(w, &w->io, tag, w->cfg->io_file_size, MIB, 1, 0, 0) < 0 ||
	    io_run(w, &w->io, tag, w->cfg->io_file_size, MIB, 0, 0, 0) < 0)
		return -1;
	w->have_io = 1;
	return 0;
}

static int io_item(struct worker *w, uint32_t io, int write, int random)
{
	return io_run(w, &w->io, TAG(w, TAG_IO, 0), w->cfg->io_file_size, io,
		      write, random, w->cfg->duration);
}

static int run_rand_read_4k(struct worker *w)
{
	return io_item(w, 4096, 0, 1);
}
static int run_rand_write_4k(struct worker *w)
{
	return io_item(w, 4096, 1, 1);
}
static int run_seq_read_1m(struct worker *w)
{
	return io_item(w, MIB, 0, 0);
}
static int run_seq_write_1m(struct worker *w)
{
	return io_item(w, MIB, 1, 0);
}
static int run_rand_read_1m(struct worker *w)
{
	return io_item(w, MIB, 0, 1);
}
static int run_rand_write_1m(struct worker *w)
{
	return io_item(w, MIB, 1, 1);
}
static int run_create(struct worker *w)
{
	return small_run(w, SMALL_CREATE);
}

/*
 * The remove item is rm -rf of a tree of small files from one client:
 * --small-file-count files of --small-file-size (written untimed), then
 * removed one at a time, each REMOVE waiting for the one before.
 */
static int run_remove(struct worker *w)
{
	char name[32];
	w->res.start_ns = bench_now_ns();
	for (uint64_t i = 0; i < w->cfg->small_file_count; i++) {
		uint64_t t0 = bench_now_ns();
		small_name(w, name, sizeof(name), (uint32_t)i);
		if (conn_remove(&w->conn, &w->dir, name, 0) < 0)
			return -1;
		hist_record(&w->res.hist, bench_now_ns() - t0);
		w->res.files++;
		w->res.ops++;
		atomic_fetch_add(&w->progress, 1);
	}
	w->res.end_ns = bench_now_ns();
	/* Gone: neither a later item nor the cleanup looks for them. */
	w->have_small = 0;
	w->tried_small = 0;
	return 0;
}

/*
 * The rename item renames each small file (s.N -> s.N.r; with --renamed
 * s.N.r -> s.N.r.r) in its directory, one at a time: what a user's mv of many files does, and
 * each one a copy and a delete in the store.
 */
static int run_rename(struct worker *w)
{
	char from[32], to[40];
	w->res.start_ns = bench_now_ns();
	w->tried_renamed = 1;
	for (uint64_t i = 0; i < w->cfg->small_file_count; i++) {
		uint64_t t0 = bench_now_ns();
		small_name(w, from, sizeof(from), (uint32_t)i);
		snprintf(to, sizeof(to), "%s.r", from);
		if (conn_rename(&w->conn, &w->dir, from, to) < 0)
			return -1;
		hist_record(&w->res.hist, bench_now_ns() - t0);
		w->res.files++;
		w->res.ops++;
		atomic_fetch_add(&w->progress, 1);
	}
	w->res.end_ns = bench_now_ns();
	/* Under other names now: the cleanup removes those. */
	w->have_small = 0;
	w->tried_small = 0;
	return 0;
}

/* The readdir item lists a directory of --small-file-count empty files. */
static int prep_readdir(struct worker *w)
{
	return w->have_created ? 0 : small_run(w, SMALL_CREATE);
}

static int run_readdir(struct worker *w)
{
	uint64_t n = 0, t0 = bench_now_ns();
	w->res.start_ns = t0;
	int r = conn_readdirplus_all(&w->conn, &w->dir, 65536, &n);
	w->res.end_ns = bench_now_ns();
	hist_record(&w->res.hist, w->res.end_ns - t0);
	w->res.files = n;
	w->res.ops++;
	atomic_store(&w->progress, n);
	return r;
}

/*
 * How long until another gateway (the peer connection) sees a CREATE:
 * from the CREATE's reply to the first LOOKUP there that finds it, one
 * file at a time (at most 1,000).
 */
static int run_visibility(struct worker *w)
{
	uint64_t n = w->cfg->small_file_count < 1000 ? w->cfg->small_file_count
						     : 1000;
	struct bfh fh;
	char name[32];
	w->tried_seen = 1;
	w->res.start_ns = bench_now_ns();
	for (uint64_t i = 0; i < n; i++) {
		seen_name(name, sizeof(name), (uint32_t)i);
		if (conn_create(&w->conn, &w->dir, name, &fh) < 0)
			return -1;
		uint64_t t0 = bench_now_ns();
		int r;
		while ((r = conn_lookup_try(&w->peer, &w->dir, name, &fh)) == 1)
			usleep(100);
		if (r < 0) {
			conn_fail(&w->conn, "LOOKUP", "on the peer: %s",
				  w->peer.err);
			return -1;
		}
		hist_record(&w->res.hist, bench_now_ns() - t0);
		w->res.files++;
		w->res.ops += 2;
		atomic_fetch_add(&w->progress, 1);
	}
	w->res.end_ns = bench_now_ns();
	return 0;
}

static int run_getattr(struct worker *w)
{
	return meta_run(w, META_GETATTR);
}
static int run_lookup(struct worker *w)
{
	return meta_run(w, META_LOOKUP);
}
static int run_access(struct worker *w)
{
	return meta_run(w, META_ACCESS);
}
static int run_null(struct worker *w)
{
	return meta_run(w, META_NULL);
}

const struct item bench_items[] = {
	{ "write-big", "Write big file", VALUE_MIBS, COST_S_PER_FILE,
	  PROGRESS_BYTES, "WRITE", prep_write_big, run_write_big },
	{ "read-big", "Read big file", VALUE_MIBS, COST_S_PER_FILE,
	  PROGRESS_BYTES, "READ", prep_read_big, run_read_big },
	{ "write-small", "Write small file", VALUE_FILES, COST_MS_PER_FILE,
	  PROGRESS_FILES, "file (CREATE+WRITE+COMMIT)", prep_none,
	  run_write_small },
	{ "read-small", "Read small file", VALUE_FILES, COST_MS_PER_FILE,
	  PROGRESS_FILES, "file (LOOKUP+READ)", prep_small, run_read_small },
	{ "stat", "Stat file", VALUE_FILES, COST_MS_PER_FILE, PROGRESS_FILES,
	  "file (LOOKUP+GETATTR)", prep_small, run_stat },
	{ "rand-read-4k", "Random read 4K", VALUE_OPS, COST_MS_PER_OP,
	  PROGRESS_TIME, "READ", prep_io, run_rand_read_4k },
	{ "rand-write-4k", "Random write 4K", VALUE_OPS, COST_MS_PER_OP,
	  PROGRESS_TIME, "WRITE", prep_io, run_rand_write_4k },
	{ "seq-read-1m", "Seq read 1M", VALUE_MIBS, COST_MS_PER_OP,
	  PROGRESS_TIME, "READ", prep_io, run_seq_read_1m },
	{ "seq-write-1m", "Seq write 1M", VALUE_MIBS, COST_MS_PER_OP,
	  PROGRESS_TIME, "WRITE", prep_io, run_seq_write_1m },
	{ "rand-read-1m", "Random read 1M", VALUE_MIBS, COST_MS_PER_OP,
	  PROGRESS_TIME, "READ", prep_io, run_rand_read_1m },
	{ "rand-write-1m", "Random write 1M", VALUE_MIBS, COST_MS_PER_OP,
	  PROGRESS_TIME, "WRITE", prep_io, run_rand_write_1m },
	{ "create", "Create file", VALUE_FILES, COST_MS_PER_FILE,
	  PROGRESS_FILES, "file (CREATE)", prep_none, run_create },
	{ "remove", "Remove small file", VALUE_FILES, COST_MS_PER_FILE,
	  PROGRESS_FILES, "file (REMOVE, one at a time)", prep_small,
	  run_remove },
	{ "rename", "Rename small file", VALUE_FILES, COST_MS_PER_FILE,
	  PROGRESS_FILES, "file (RENAME, one at a time)", prep_small,
	  run_rename },
	{ "readdir", "Readdir", VALUE_FILES, COST_MS_PER_FILE, PROGRESS_FILES,
	  "the whole directory (READDIRPLUS, 64 KiB pages)", prep_readdir,
	  run_readdir },
	{ "visibility", "Seen elsewhere", VALUE_FILES, COST_MS_PER_FILE,
	  PROGRESS_FILES,
	  "CREATE reply to the peer's first LOOKUP that finds it", prep_none,
	  run_visibility },
	{ "getattr", "GETATTR", VALUE_OPS, COST_MS_PER_OP, PROGRESS_TIME,
	  "GETATTR", prep_none, run_getattr },
	{ "lookup", "LOOKUP", VALUE_OPS, COST_MS_PER_OP, PROGRESS_TIME,
	  "LOOKUP", prep_none, run_lookup },
	{ "access", "ACCESS", VALUE_OPS, COST_MS_PER_OP, PROGRESS_TIME,
	  "ACCESS", prep_none, run_access },
	{ "null", "NULL", VALUE_OPS, COST_MS_PER_OP, PROGRESS_TIME, "NULL",
	  prep_none, run_null },
};
const int bench_item_count =
	(int)(sizeof(bench_items) / sizeof(bench_items[0]));

/* ---- worker lifetime ---- */

int worker_setup(struct worker *w)
{
	char name[32];
	snprintf(name, sizeof(name), "t%d", w->id);
	if (conn_mkdir(&w->conn, &w->top, name, &w->dir) < 0 ||
	    conn_create(&w->conn, &w->dir, "meta", &w->meta) < 0)
		return -1;
	/* One payload buffer per slot, as big as the largest I/O the server
	 * takes, filled once with the pattern: a write only restamps it. */
	uint64_t want = w->cfg->block_size > MIB ? w->cfg->block_size : MIB;
	uint32_t max =
		w->conn.wtmax > w->conn.rtmax ? w->conn.wtmax : w->conn.rtmax;
	w->buf_size = want < max ? (uint32_t)want : max;
	w->buf_size -= w->buf_size % PATTERN_PAGE;
	if (w->buf_size == 0) {
		conn_fail(&w->conn, "FSINFO",
			  "server's rtmax/wtmax of %u is below 4 KiB", max);
		return -1;
	}
	w->slots = calloc((size_t)w->cfg->depth, sizeof(*w->slots));
	w->bufs = malloc((size_t)w->cfg->depth * w->buf_size);
	if (!w->slots || !w->bufs) {
		conn_fail(&w->conn, "setup", "out of memory for %d slots",
			  w->cfg->depth);
		return -1;
	}
	for (int i = 0; i < w->cfg->depth; i++) {
		w->slots[i].w = w;
		w->slots[i].buf = w->bufs + (size_t)i * w->buf_size;
		pattern_fill(w->slots[i].buf, 0, 0, w->buf_size);
	}
	return 0;
}

int worker_cleanup(struct worker *w)
{
	struct conn *c = &w->conn;
	char name[32];
	int r = 0;
	if (w->tried_small)
		for (uint64_t i = 0; i < w->cfg->small_file_count && r == 0;
		     i++) {
			small_name(w, name, sizeof(name), (uint32_t)i);
			r = conn_remove(c, &w->dir, name, 0);
		}
	if (w->tried_created)
		for (uint64_t i = 0; i < w->cfg->small_file_count && r == 0;
		     i++) {
			create_name(name, sizeof(name), (uint32_t)i);
			r = conn_remove(c, &w->dir, name, 0);
		}
	if (w->tried_renamed)
		for (uint64_t i = 0; i < w->cfg->small_file_count && r == 0;
		     i++) {
			small_name(w, name, sizeof(name), (uint32_t)i);
			strcat(name, ".r");
			r = conn_remove(c, &w->dir, name, 0);
		}
	if (w->tried_seen)
		for (uint64_t i = 0;
		     i < w->cfg->small_file_count && i < 1000 && r == 0; i++) {
			seen_name(name, sizeof(name), (uint32_t)i);
			r = conn_remove(c, &w->dir, name, 0);
		}
	if (r == 0)
		r = conn_remove(c, &w->dir, "big", 0);
	if (r == 0)
		r = conn_remove(c, &w->dir, "io", 0);
	if (r == 0)
		r = conn_remove(c, &w->dir, "meta", 0);
	snprintf(name, sizeof(name), "t%d", w->id);
	if (r == 0)
		r = conn_remove(c, &w->top, name, 1);
	return r;
}

void worker_free(struct worker *w)
{
	free(w->slots);
	free(w->bufs);
	w->slots = NULL;
	w->bufs = NULL;
}
