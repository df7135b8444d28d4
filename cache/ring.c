/*
 * cache/ring.c - per-loop io_uring rings and completion lists, and the
 * read/write/sync operations on local data.
 *
 * A loop's ring is used only by that loop's thread (submit and reap), so
 * it needs no lock.  Other threads (fetch workers) hand results to a loop
 * through its completion list, a mutex-protected FIFO, and wake it with
 * the eventfd the ring also signals: one fd per loop for main to watch.
 *
 * Before any I/O the chunk state is consulted (chunks.c): a read must find
 * every chunk readable, and pins the entry against eviction until it
 * completes; a write marks its chunks present and dirty.  A synced write
 * or a sync also waits for those journal records to be durable.
 *
 * SQEs are queued by the operations a loop's handlers start and submitted
 * together at the end of the loop's iteration (cache_loop_flush).
 *
 * An operation is a struct cache_req that goes through rounds: one round
 * is a data SQE (read or write), optionally linked to an fdatasync and an
 * fsync of the shard directory.  A short transfer ends the round early
 * (the kernel cancels what is linked after it) and the next round goes on
 * from where it stopped, until done, EOF or an error.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cache_int.h"
#include "chunks_int.h"
#include "pin_int.h"
#include "ring_int.h"
#include "common/log.h"
#include "metrics/metrics.h"
#include "db/db.h"

/* O_DIRECT may take [at, at+len) at mem (NULL: no memory to check). */
static bool dio_aligned(uint64_t at, size_t len, const void *mem)
{
	return !((at | len | (uintptr_t)mem) & (CACHE_DIO_ALIGN - 1));
}

/* What a CQE completes, kept in the low bits of user_data. */
enum { TAG_DATA = 0, TAG_FSYNC = 1, TAG_DIRSYNC = 2, TAG_MASK = 3 };

/* Largest transfer of one SQE (len is 32 bits in an SQE). */
#define ROUND_MAX (1u << 30)

enum req_op { REQ_READ, REQ_WRITE, REQ_SYNC };

struct cache_req {
	struct cache_req *next; /* backlog */
	struct cache *c;
	struct cache_loop *l;
	enum req_op op;
	enum req_op rel; /* what req_start took, for req_release */
	struct cache_ent *e;
	struct cache_fd *f;
	void *buf;
	int pipe_fd; /* REQ_READ: splice into this pipe instead of buf */
	bool direct; /* O_DIRECT through f->dfd while aligned (opts.direct) */
	int dbuf;    /* REQ_WRITE: the registered buffer buf was copied to */
	size_t len, done_bytes;
	uint64_t off;
	bool sync; /* REQ_WRITE: datasync after the data */
	cache_done_fn done;
	void *arg;
	/* The current round. */
	unsigned pending; /* CQEs still to come */
	unsigned asked;   /* bytes the data SQE asked for */
	bool dir;         /* the round fsyncs the directory too */
	uint64_t dir_snap;
	bool retry; /* short or interrupted transfer: another round */
	bool eof;
	int err, sync_res, dir_res;
};

static unsigned round_sqes(const struct cache_req *r)
{
	switch (r->op) {
	case REQ_READ:
		return 1;
	case REQ_WRITE:
		return 1 + (r->sync ? 1 + r->dir : 0);
	default:
		return 1 + r->dir;
	}
}

/* The round's fdatasync (and directory fsync), linked after prev if any. */
static void prep_fsyncs(struct cache_req *r, struct io_uring_sqe *prev)
{
	struct io_uring_sqe *sqe;

	if (prev)
		prev->flags |= IOSQE_IO_LINK;
	sqe = io_uring_get_sqe(&r->l->ring);
	if (r->c->unflushed) {
		/* As cache_fd_durable: nothing to flush, the round ends. */
		io_uring_prep_nop(sqe);
		io_uring_sqe_set_data64(sqe, (uintptr_t)r | TAG_FSYNC);
		return;
	}
	io_uring_prep_fsync(sqe, r->f->fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data64(sqe, (uintptr_t)r | TAG_FSYNC);
	metrics_inc(MET_FLUSH_FILE);
	if (r->dir) {
		metrics_inc(MET_FLUSH_DIR);
		sqe->flags |= IOSQE_IO_LINK;
		sqe = io_uring_get_sqe(&r->l->ring);
		io_uring_prep_fsync(sqe, cache_dirfd(r->c, r->f->ino), 0);
		io_uring_sqe_set_data64(sqe, (uintptr_t)r | TAG_DIRSYNC);
	}
}

/*
 * Queue the next round of r on its ring, or return false if the ring has
 * no room: the CQ must hold every CQE we wait for, so the kernel never
 * has to keep completions in its overflow list.
 */
static bool round_submit(struct cache_req *r)
{
	struct cache_loop *l = r->l;
	struct io_uring_sqe *sqe;
	unsigned n;

	if (r->op != REQ_READ && (r->op == REQ_SYNC || r->sync)) {
		r->dir = !r->c->unflushed &&
			 cache_dir_needs_sync(r->c, r->f->ino);
		r->dir_snap = cache_dir_snapshot(r->c, r->f->ino);
	}
	n = round_sqes(r);
	if (l->inflight + n > l->cq_cap || io_uring_sq_space_left(&l->ring) < n)
		return false;
	r->pending = n;
	r->retry = false;
	r->sync_res = r->dir_res = 0;
	r->asked = 0;
	if (r->op != REQ_SYNC) {
		size_t left = r->len - r->done_bytes;
		uint64_t at = r->off + r->done_bytes;
		char *p = r->buf ? (char *)r->buf + r->done_bytes : NULL;
		/* A short transfer may leave the rest unaligned: buffered. */
		bool dio =
			r->direct && dio_aligned(at, left, r->buf ? p : NULL);
		int fd = dio ? r->f->dfd : r->f->fd;

		r->asked = left > ROUND_MAX ? ROUND_MAX : (unsigned)left;
		sqe = io_uring_get_sqe(&l->ring);
		if (r->op == REQ_READ && r->pipe_fd >= 0)
			io_uring_prep_splice(sqe, fd, (int64_t)at, r->pipe_fd,
					     -1, r->asked, 0);
		else if (r->op == REQ_READ)
			io_uring_prep_read(sqe, fd, p, r->asked, at);
		else if (dio && r->dbuf >= 0)
			io_uring_prep_write_fixed(sqe, fd, p, r->asked, at,
						  r->dbuf);
		else
			io_uring_prep_write(sqe, fd, p, r->asked, at);
		io_uring_sqe_set_data64(sqe, (uintptr_t)r | TAG_DATA);
		if (r->op == REQ_WRITE && r->sync)
			prep_fsyncs(r, sqe);
	} else {
		prep_fsyncs(r, NULL);
	}
	l->inflight += n;
	/* Submitted in one batch by cache_loop_flush() (or loop_reap()). */
	return true;
}

static void req_submit(struct cache_req *r)
{
	struct cache_loop *l = r->l;

	/* Keep order: nothing overtakes what already waits for room. */
	if (!l->backlog_head && round_submit(r))
		return;
	r->next = NULL;
	if (l->backlog_tail)
		l->backlog_tail->next = r;
	else
		l->backlog_head = r;
	l->backlog_tail = r;
}

/* Let go of what req_start() took for op (a write's: [off, off + len)
 * the bytes it wrote; off UINT64_MAX: none). */
static void req_release(enum req_op op, struct cache_ent *e, struct cache_fd *f,
			uint64_t off, uint64_t len)
{
	if (f)
		cache_fd_put(f);
	if (op == REQ_READ)
		cache_read_unpin(e);
	else if (op == REQ_WRITE)
		cache_write_unmark(e, off, off == UINT64_MAX ? 0 : off + len);
	else
		cache_ent_put(e);
}

/*
 * Requests are recycled per loop (made and finished on the loop's own
 * thread): a cache hit allocates nothing.
 */
static struct cache_req *req_alloc(struct cache_loop *l)
{
	struct cache_req *r = l->free_reqs;

	if (!r)
		return calloc(1, sizeof(*r));
	l->free_reqs = r->next;
	l->nfree_reqs--;
	memset(r, 0, sizeof(*r));
	return r;
}

static void req_free(struct cache_req *r)
{
	struct cache_loop *l = r->l;

	if (l->nfree_reqs >= CACHE_REQS_KEEP) {
		free(r);
		return;
	}
	r->next = l->free_reqs;
	l->free_reqs = r;
	l->nfree_reqs++;
}

/* Give r's registered buffer back to its loop. */
static void req_put_dbuf(struct cache_req *r)
{
	if (r->dbuf >= 0)
		r->l->dfree[r->l->ndfree++] = (unsigned)r->dbuf;
	r->dbuf = -1;
}

static void req_finish(struct cache_req *r, long result)
{
	cache_done_fn done = r->done;
	void *arg = r->arg;
	bool synced = r->op == REQ_SYNC || (r->op == REQ_WRITE && r->sync);
	struct cache_compl *n;

	req_put_dbuf(r);
	if (synced && result >= 0 && (n = malloc(sizeof(*n)))) {
		struct cache_entshard *s = cache_ent_shard(r->c, r->e->ino);
		bool waiting;

		*n = (struct cache_compl){ .done = done,
					   .arg = arg,
					   .result = result,
					   .loop = (int)(r->l - r->c->loops) };
		pthread_mutex_lock(&s->lock);
		waiting = cache_journal_wait_locked(r->c, r->e, n);
		pthread_mutex_unlock(&s->lock);
		if (waiting) {
			req_release(r->rel, r->e, r->f,
				    r->len ? r->off : UINT64_MAX, r->len);
			req_free(r);
			return;
		}
		result = n->result;
		free(n);
	} else if (synced && result >= 0) {
		result = -ENOMEM;
	}
	req_release(r->rel, r->e, r->f, r->len ? r->off : UINT64_MAX, r->len);
	req_free(r);
	done(arg, result);
}

static void round_end(struct cache_req *r)
{
	if (r->err) {
		req_finish(r, r->err);
		return;
	}
	if (r->op == REQ_READ && !r->eof && r->done_bytes < r->len) {
		req_submit(r);
		return;
	}
	if (r->op == REQ_WRITE && (r->retry || r->done_bytes < r->len)) {
		req_submit(r);
		return;
	}
	if (r->op == REQ_READ) {
		req_finish(r, (long)r->done_bytes);
		return;
	}
	/*
	 * The whole write is in, so this round's syncs ran after all of it
	 * (after a short write they were cancelled and are redone above).
	 */
	if (r->sync_res < 0 || r->dir_res < 0) {
		req_finish(r, r->sync_res < 0 ? r->sync_res : r->dir_res);
		return;
	}
	if (r->dir)
		cache_dir_synced(r->c, r->f->ino, r->dir_snap);
	req_finish(r, r->op == REQ_WRITE ? (long)r->len : 0);
}

static void req_cqe(struct cache_req *r, unsigned tag, int res)
{
	switch (tag) {
	case TAG_DATA:
		if (res == -EINTR || res == -EAGAIN)
			r->retry = true;
		else if (res < 0)
			r->err = res;
		else if (res == 0 && r->op == REQ_READ)
			r->eof = true;
		else if (res == 0)
			r->err = -EIO; /* a write that moves nothing */
		else {
			r->done_bytes += (size_t)res;
			if ((unsigned)res < r->asked)
				r->retry = true;
		}
		break;
	case TAG_FSYNC:
		r->sync_res = res;
		break;
	default:
		r->dir_res = res;
		break;
	}
	if (--r->pending)
		return;
	round_end(r);
}

/* Reap every CQE, then feed the backlog with the room that freed up. */
static void loop_reap(struct cache_loop *l)
{
	struct io_uring_cqe *cqe;

	while (io_uring_peek_cqe(&l->ring, &cqe) == 0) {
		uint64_t ud = io_uring_cqe_get_data64(cqe);
		int res = cqe->res;

		io_uring_cqe_seen(&l->ring, cqe);
		l->inflight--;
		req_cqe((struct cache_req *)(uintptr_t)(ud &
							~(uint64_t)TAG_MASK),
			(unsigned)(ud & TAG_MASK), res);
	}
	while (l->backlog_head && round_submit(l->backlog_head)) {
		l->backlog_head = l->backlog_head->next;
		if (!l->backlog_head)
			l->backlog_tail = NULL;
	}
	if (io_uring_sq_ready(&l->ring) && io_uring_submit(&l->ring) < 0)
		cache_loop_wake(l);
}

int cache_loop_fd(struct cache *c, int loop)
{
	if (loop < 0 || loop >= c->nloops)
		return -EINVAL;
	return c->loops[loop].efd;
}

void cache_loop_flush(void *cache, int loop)
{
	struct cache *c = cache;
	struct cache_loop *l = &c->loops[loop];

	if (io_uring_sq_ready(&l->ring) && io_uring_submit(&l->ring) < 0)
		cache_loop_wake(l); /* the SQEs stay queued: poll retries */
	if (io_uring_cq_ready(&l->ring))
		loop_reap(l);
}

/*
 * Read the eventfd first: anything that completes after that writes it
 * again, so no wake-up is lost between reaping and returning.
 */
void cache_loop_poll(void *cache, int loop)
{
	struct cache *c = cache;
	struct cache_loop *l = &c->loops[loop];
	uint64_t v;

	(void)!read(l->efd, &v, sizeof(v));
	loop_reap(l);
	cache_compl_drain(l);
}

static void loop_fini(struct cache_loop *l)
{
	struct cache_req *r;

	io_uring_queue_exit(&l->ring);
	free(l->dbuf);
	while ((r = l->free_reqs)) {
		l->free_reqs = r->next;
		free(r);
	}
	close(l->efd);
	pthread_mutex_destroy(&l->compl_lock);
}

/*
 * opts.direct: write buffers registered with the ring (the kernel maps
 * them once, not per write).  Without them (RLIMIT_MEMLOCK, memory) the
 * writes whose data is not aligned in memory are simply buffered.
 */
static void loop_dbufs_init(struct cache *c, struct cache_loop *l)
{
	struct iovec iov[CACHE_DIO_BUFS];
	int rc;

	l->ndfree = 0;
	if (!c->direct || posix_memalign(&l->dbuf, CACHE_DIO_ALIGN,
					 CACHE_DIO_BUFS * CACHE_DIO_BUF)) {
		l->dbuf = NULL;
		return;
	}
	for (unsigned i = 0; i < CACHE_DIO_BUFS; i++) {
		iov[i].iov_base = (char *)l->dbuf + i * CACHE_DIO_BUF;
		iov[i].iov_len = CACHE_DIO_BUF;
	}
	rc = io_uring_register_buffers(&l->ring, iov, CACHE_DIO_BUFS);
	if (rc) {
		log_warn("cache: registering O_DIRECT write buffers: %s; "
			 "unaligned writes stay buffered",
			 strerror(-rc));
		free(l->dbuf);
		l->dbuf = NULL;
		return;
	}
	for (unsigned i = 0; i < CACHE_DIO_BUFS; i++)
		l->dfree[l->ndfree++] = i;
}

static int loop_init(struct cache *c, struct cache_loop *l)
{
	int rc;

	l->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (l->efd < 0)
		return -errno;
	rc = io_uring_queue_init(c->ring_depth, &l->ring, 0);
	if (rc)
		goto out_efd;
	rc = io_uring_register_eventfd(&l->ring, l->efd);
	if (rc)
		goto out_ring;
	l->cq_cap = l->ring.cq.ring_entries;
	pthread_mutex_init(&l->compl_lock, NULL);
	loop_dbufs_init(c, l);
	return 0;

out_ring:
	io_uring_queue_exit(&l->ring);
out_efd:
	close(l->efd);
	return rc;
}

int cache_loops_init(struct cache *c)
{
	int i, rc;

	if (c->nloops == 0)
		return 0;
	c->loops = calloc((size_t)c->nloops, sizeof(*c->loops));
	if (!c->loops)
		return -ENOMEM;
	for (i = 0; i < c->nloops; i++) {
		rc = loop_init(c, &c->loops[i]);
		if (rc)
			goto out_loops;
	}
	return 0;

out_loops:
	while (i-- > 0)
		loop_fini(&c->loops[i]);
	free(c->loops);
	c->loops = NULL;
	return rc;
}

/*
 * The loops are stopped by now: finish what is still in a ring, and
 * deliver what is still listed, on the closing thread.
 */
void cache_loops_destroy(struct cache *c)
{
	for (int i = 0; i < c->nloops; i++) {
		struct cache_loop *l = &c->loops[i];
		struct io_uring_cqe *cqe;

		loop_reap(l);
		while (l->inflight) {
			if (io_uring_wait_cqe(&l->ring, &cqe) < 0)
				break;
			loop_reap(l);
		}
		cache_compl_drain(l);
		loop_fini(l);
	}
	free(c->loops);
}

/* The journal records of e queued so far are durable (blocking). */
static int journal_sync_blocking(struct cache *c, struct cache_ent *e)
{
	struct cache_entshard *s = cache_ent_shard(c, e->ino);
	uint64_t sub;
	bool need;
	int rc;

	pthread_mutex_lock(&s->lock);
	sub = e->j_sub;
	need = atomic_load(&e->j_dur) < sub;
	pthread_mutex_unlock(&s->lock);
	/* db/ applies in order: an empty change durable means all before. */
	if (!need)
		return 0;
	rc = db_write(c->db, NULL, NULL);
	if (rc)
		return rc;
	uint_fast64_t cur = atomic_load(&e->j_dur);

	while (cur < sub && !atomic_compare_exchange_weak(&e->j_dur, &cur, sub))
		;
	return 0;
}

/* Synchronous versions for loop < 0: same results, done inline. */
static long read_blocking(struct cache_fd *f, uint64_t off, size_t len,
			  void *buf, int pipe_fd)
{
	size_t done = 0;

	while (done < len) {
		loff_t at = (loff_t)(off + done);
		ssize_t n = pipe_fd >= 0 ? splice(f->fd, &at, pipe_fd, NULL,
						  len - done, 0)
					 : pread(f->fd, (char *)buf + done,
						 len - done, at);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (long)done;
}

static long write_blocking(struct cache *c, struct cache_ent *e,
			   struct cache_fd *f, uint64_t off, const void *buf,
			   size_t len, bool sync)
{
	size_t done = 0;
	int rc;

	while (done < len) {
		ssize_t n = pwrite(f->fd, (const char *)buf + done, len - done,
				   (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	if (sync && ((rc = cache_sync_blocking(c, f)) ||
		     (rc = journal_sync_blocking(c, e))))
		return rc;
	return (long)len;
}

/* ino's entry, referenced: -ENODATA if not local. */
static int ent_lookup(struct cache *c, uint64_t ino, struct cache_ent **out)
{
	struct cache_entshard *s = cache_ent_shard(c, ino);
	struct cache_ent *e;

	pthread_mutex_lock(&s->lock);
	e = cache_ent_find_locked(s, ino);
	if (e)
		cache_ent_get(e);
	pthread_mutex_unlock(&s->lock);
	*out = e;
	return e ? 0 : -ENODATA;
}

/*
 * Common start of cache_read/write/sync: the chunk state for op (see
 * req_release), the fd reference, and for a loop the request.  Returns
 * the request, or NULL when done was already called (an error) or for
 * the synchronous case, which the caller then runs itself: *sync_f and
 * *sync_e are set.
 */
static struct cache_req *req_start(struct cache *c, int loop, uint64_t ino,
				   enum req_op op, uint64_t off, size_t len,
				   cache_done_fn done, void *arg,
				   struct cache_ent **sync_e,
				   struct cache_fd **sync_f)
{
	struct cache_ent *e;
	struct cache_fd *f = NULL;
	struct cache_req *r;
	int rc;

	*sync_f = NULL;
	*sync_e = NULL;
	if (loop >= c->nloops) {
		done(arg, -EINVAL);
		return NULL;
	}
	if (op == REQ_READ)
		rc = cache_read_pin(c, ino, off, len, &e);
	else if (op == REQ_WRITE)
		rc = cache_write_mark(c, ino, off, len, &e);
	else
		rc = ent_lookup(c, ino, &e);
	if (rc) {
		cache_complete(c, loop, done, arg, rc);
		return NULL;
	}
	rc = cache_fd_get(c, ino, &f);
	if (rc) {
		req_release(op, e, NULL, UINT64_MAX, 0); /* nothing written */
		cache_complete(c, loop, done, arg, rc);
		return NULL;
	}
	if (loop < 0) {
		*sync_f = f;
		*sync_e = e;
		return NULL;
	}
	r = req_alloc(&c->loops[loop]);
	if (!r) {
		req_release(op, e, f, UINT64_MAX, 0); /* nothing written */
		cache_complete(c, loop, done, arg, -ENOMEM);
		return NULL;
	}
	r->c = c;
	r->l = &c->loops[loop];
	r->pipe_fd = -1;
	r->dbuf = -1;
	r->op = r->rel = op;
	r->e = e;
	r->f = f;
	r->done = done;
	r->arg = arg;
	return r;
}

/* Whether f is opened for O_DIRECT too (opts.direct). */
static bool f_direct(const struct cache_fd *f)
{
	return f->dfd >= 0;
}

/*
 * A direct write whose data is not aligned in memory: copy it into one
 * of the loop's registered buffers, or (none free, too big) stay
 * buffered.
 */
static void dio_bounce(struct cache_req *r)
{
	struct cache_loop *l = r->l;

	if (!l->ndfree || r->len > CACHE_DIO_BUF) {
		r->direct = false;
		return;
	}
	r->dbuf = (int)l->dfree[--l->ndfree];
	memcpy((char *)l->dbuf + (size_t)r->dbuf * CACHE_DIO_BUF, r->buf,
	       r->len);
	r->buf = (char *)l->dbuf + (size_t)r->dbuf * CACHE_DIO_BUF;
}

/* cache_read() and cache_splice(): into buf, or into pipe_fd if >= 0. */
static void read_to(struct cache *c, int loop, uint64_t ino, uint64_t off,
		    size_t len, void *buf, int pipe_fd, cache_done_fn done,
		    void *arg)
{
	struct cache_fd *f;
	struct cache_ent *e;
	struct cache_req *r =
		req_start(c, loop, ino, REQ_READ, off, len, done, arg, &e, &f);
	long res;

	/* metrics: no fd and no request means not local (or no memory). */
	metrics_inc(f || r ? MET_CACHE_HITS : MET_CACHE_MISSES);
	if (f) {
		res = read_blocking(f, off, len, buf, pipe_fd);
		req_release(REQ_READ, e, f, UINT64_MAX, 0);
		done(arg, res);
		return;
	}
	if (!r)
		return;
	r->buf = buf;
	r->pipe_fd = pipe_fd;
	r->len = len;
	r->off = off;
	r->direct = f_direct(r->f) && dio_aligned(off, len, buf);
	req_submit(r);
}

void cache_read(struct cache *c, int loop, uint64_t ino, uint64_t off,
		size_t len, void *buf, cache_done_fn done, void *arg)
{
	read_to(c, loop, ino, off, len, buf, -1, done, arg);
}

void cache_splice(struct cache *c, int loop, uint64_t ino, uint64_t off,
		  size_t len, int pipe_fd, cache_done_fn done, void *arg)
{
	read_to(c, loop, ino, off, len, NULL, pipe_fd, done, arg);
}

void cache_write(struct cache *c, int loop, uint64_t ino, uint64_t off,
		 const void *buf, size_t len, bool sync, cache_done_fn done,
		 void *arg)
{
	struct cache_fd *f;
	struct cache_ent *e;
	struct cache_req *r =
		req_start(c, loop, ino, REQ_WRITE, off, len, done, arg, &e, &f);
	long res;

	if (f) {
		res = write_blocking(c, e, f, off, buf, len, sync);
		req_release(REQ_WRITE, e, f, len ? off : UINT64_MAX, len);
		done(arg, res);
		return;
	}
	if (!r)
		return;
	/* Nothing to write: only the sync, if any, is left to do. */
	if (!len && !sync) {
		req_release(REQ_WRITE, r->e, r->f, UINT64_MAX, 0);
		req_free(r);
		cache_complete(c, loop, done, arg, 0);
		return;
	}
	if (!len)
		r->op = REQ_SYNC;
	/* The ring only reads from buf; the request type is shared. */
	r->buf = (void *)buf;
	r->len = len;
	r->off = off;
	r->sync = sync;
	if (len && f_direct(r->f) && dio_aligned(off, len, NULL)) {
		r->direct = true;
		if (!dio_aligned(0, 0, buf))
			dio_bounce(r);
	}
	req_submit(r);
}

void cache_sync(struct cache *c, int loop, uint64_t ino, cache_done_fn done,
		void *arg)
{
	struct cache_fd *f;
	struct cache_ent *e;
	struct cache_req *r =
		req_start(c, loop, ino, REQ_SYNC, 0, 0, done, arg, &e, &f);
	long res;

	if (f) {
		res = cache_sync_blocking(c, f);
		if (!res)
			res = journal_sync_blocking(c, e);
		req_release(REQ_SYNC, e, f, UINT64_MAX, 0);
		done(arg, res);
		return;
	}
	if (!r)
		return;
	req_submit(r);
}
