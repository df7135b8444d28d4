/*
 * db/writer.c - the one thread that changes the tables: changes queued by
 * any thread are applied in groups, each change in a nested transaction
 * of its own (so one failing change does not undo the others).
 *
 * Alone, a group is one LMDB transaction, committed with one fsync: a
 * burst of creates from many cores costs one disk flush, not one each.
 * In a cluster the group goes through writer_cluster.c (the changes of
 * shared records committed in PostgreSQL first, several commits in
 * flight).
 *
 * So the order a change's reply promises holds: a change's done() runs
 * once it is durable here (and, for shared records, in the cluster), and
 * every change that could see it is run after it.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/mono.h"
#include "wal_int.h"
#include "writer_priv.h"

/* Most changes one group takes, so a flood cannot starve done(). */
#define DB_GROUP_MAX 4096
/* How long the next group waits for the changes answers call out: in a
 * cluster (a commit is a round trip of PostgreSQL), and alone (an LMDB
 * commit, two flushes of the local disk). */
#define DB_LINGER_US 1000
#define DB_LINGER_ALONE_US 150
/* The lazy window by default (db_set_lazy_window). */
#define DB_LAZY_MS_DEFAULT 50

/* ---- a group, alone -------------------------------------------------------- */

static void run_alone(struct db_writer *w, struct db_op *ops)
{
	struct db_txn txn;
	int rc = db_txn_begin(w->db, NULL, NULL, &txn);
	bool lazy = true;

	/* One change that waits for its durability makes the group wait
	 * (and flushes the lazy records before it too). */
	for (struct db_op *op = ops; op; op = op->next)
		lazy &= op->lazy;
	txn.lazy = lazy;

	for (struct db_op *op = ops; !rc && op; op = op->next) {
		struct db_txn child;

		op->err = db_txn_begin(w->db, &txn, NULL, &child);
		if (op->err)
			continue;
		op->err = op->apply ? op->apply(&child, op->arg) : 0;
		if (op->err)
			db_txn_abort(&child);
		else
			op->err = db_txn_commit(&child);
	}
	if (!rc)
		rc = db_txn_commit(&txn); /* syncs: the group is durable */
	else
		db_txn_abort(&txn);
	metrics_inc(MET_DB_COMMITS);
	size_t n = 0;

	for (struct db_op *op = ops; op; op = op->next)
		n += !op->background;
	expect_from_now(w, n);
	ops_done(ops, rc);
	/* Lazy records written and not flushed: flushed within the window
	 * of the first; a durable commit since flushed them all. */
	bool unflushed = db_wal_unflushed(w->db);

	pthread_mutex_lock(&w->lock);
	if (!unflushed)
		w->lazy_due_ns = 0;
	else if (!w->lazy_due_ns)
		w->lazy_due_ns = mono_ns() + (uint64_t)w->lazy_ms * 1000000u;
	pthread_mutex_unlock(&w->lock);
}

/* The lazy window is over (w->lock held): flush the log's records. */
static void lazy_flush(struct db_writer *w)
{
	if (!w->lazy_due_ns || mono_ns() < w->lazy_due_ns)
		return;
	w->lazy_due_ns = 0;
	pthread_mutex_unlock(&w->lock);
	db_wal_flush(w->db);
	pthread_mutex_lock(&w->lock);
}

/* Work for a group (w->lock held): a change that is not background, or
 * background ones whose window is over (or the writer stops). */
static bool have_work(struct db_writer *w)
{
	if (w->nqueued > w->nbg)
		return true;
	return w->nbg && (w->stopping || mono_ns() >= w->bg_due_ns);
}

/* Wait for work (w->lock held), or for the lazy window's end, or the
 * background changes'. */
static void writer_wait(struct db_writer *w)
{
	struct timespec until;
	uint64_t due = w->lazy_due_ns;

	if (w->nbg && (!due || w->bg_due_ns < due))
		due = w->bg_due_ns;
	if (!due) {
		pthread_cond_wait(&w->wake, &w->lock);
		return;
	}
	until = mono_ts(due);
	if (pthread_cond_timedwait(&w->wake, &w->lock, &until) == ETIMEDOUT)
		lazy_flush(w);
}

/* ---- the thread --------------------------------------------------------- */

/* Take up to DB_GROUP_MAX queued changes (w->lock held). */
static struct db_op *take_group(struct db_writer *w)
{
	struct db_op *group = w->head, **end = &w->head;

	for (int n = 0; *end && n < DB_GROUP_MAX; n++) {
		w->nbg -= (*end)->background;
		end = &(*end)->next;
		w->nqueued--;
	}
	if (!w->nbg)
		w->bg_due_ns = 0;
	w->head = *end;
	*end = NULL;
	if (!w->head)
		w->tail = &w->head;
	return group;
}

/*
 * Right after answers went out, the next group waits a moment (w->lock
 * held) for the changes their clients send next, as many as were
 * answered.  In a cluster (up to DB_LINGER_US) a commit costs PostgreSQL
 * several times what one more change in it does, and without the wait
 * the changes that waited for a commit in flight go alone and the ones a
 * moment behind them wait for those, halves ever after.  Alone (up to
 * DB_LINGER_ALONE_US, about a client's round trip here) a commit is two
 * flushes of the disk: a small file's CREATE, its WRITE's journal records
 * and its COMMIT's wait share them (measured with one client: LMDB
 * commits per small file 1.86 -> 1.02, per REMOVE 2 -> 1;
 * bench/RESULTS.md).  A writer
 * with nothing else to do loses nothing by it.
 */
static void linger(struct db_writer *w)
{
	struct timespec until;
	size_t expect = w->expect;

	w->expect = 0;
	if (w->arrivals - w->linger_base >= expect || w->stopping || w->detach)
		return;
	until = mono_ts(mono_ns() +
			(w->rep ? DB_LINGER_US : DB_LINGER_ALONE_US) * 1000ull);
	w->linger_for = expect;
	while (w->arrivals - w->linger_base < expect && !w->answered &&
	       !w->stopping) {
		if (pthread_cond_timedwait(&w->wake, &w->lock, &until) ==
		    ETIMEDOUT) {
			metrics_inc(MET_DB_LINGER_EXPIRED);
			break;
		}
	}
	w->linger_for = 0;
}

static void *writer_main(void *p)
{
	struct db_writer *w = p;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!have_work(w) && !w->answered && !w->poke && !w->again &&
		       !(w->detach && !w->ninflight) &&
		       !(w->stopping && !w->ninflight))
			writer_wait(w);
		/* Busy for longer than the window: its flush comes first. */
		lazy_flush(w);
		struct wbatch *answered = w->answered;
		bool poked = w->poke;

		w->answered = NULL;
		w->poke = false;
		w->again = false;
		if (w->detach && !w->ninflight && !answered) {
			pthread_mutex_unlock(&w->lock);
			if (w->rep)
				writer_cluster_detach(w);
			pthread_mutex_lock(&w->lock);
			w->rep = NULL;
			w->detach = false;
			pthread_cond_broadcast(&w->switched);
		}
		if (!w->rep && (answered || w->ready)) {
			/* cannot happen: answers come only while attached */
		}
		struct db_op *group;

		if (w->rep || answered) {
			/* One step: the answers, then the group on top of
			 * them, in one local transaction. */
			pthread_mutex_unlock(&w->lock);
			writer_cluster_step(w, answered, poked);
			pthread_mutex_lock(&w->lock);
			group = take_group(w);
			pthread_mutex_unlock(&w->lock);
			writer_cluster_run(w, group);
			pthread_mutex_lock(&w->lock);
			linger(w);
		} else {
			linger(w);
			group = take_group(w);
			if (group) {
				pthread_mutex_unlock(&w->lock);
				run_alone(w, group);
				pthread_mutex_lock(&w->lock);
			}
		}
		if (!w->head && w->stopping && !w->ninflight && !w->ready &&
		    !w->answered && !w->again)
			break;
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* The follower has something, or moved (a completion of the replica's). */
static void writer_poke(void *ctx)
{
	struct db_writer *w = ctx;

	pthread_mutex_lock(&w->lock);
	w->poke = true;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
}

int db_writer_start(struct db *db)
{
	struct db_writer *w = calloc(1, sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	w->db = db;
	w->tail = &w->head;
	w->lazy_ms = DB_LAZY_MS_DEFAULT;
	writer_cluster_init(w);
	pthread_mutex_init(&w->lock, NULL);
	mono_cond_init(&w->wake); /* linger and windows: monotonic */
	pthread_cond_init(&w->switched, NULL);
	rc = -pthread_create(&w->thread, NULL, writer_main, w);
	if (rc) {
		pthread_cond_destroy(&w->switched);
		pthread_cond_destroy(&w->wake);
		pthread_mutex_destroy(&w->lock);
		free(w);
		return rc;
	}
	pthread_setname_np(w->thread, "db-writer");
	db->w = w;
	return 0;
}

void db_writer_cluster(struct db *db, struct db_replica *rep)
{
	struct db_writer *w = db->w;

	pthread_mutex_lock(&w->lock);
	if (rep) {
		w->rep = rep;
		db_replica_set_wake(rep, writer_poke, w);
	} else if (w->rep) {
		w->detach = true;
		pthread_cond_signal(&w->wake);
		while (w->detach)
			pthread_cond_wait(&w->switched, &w->lock);
	}
	pthread_mutex_unlock(&w->lock);
}

void db_writer_stop(struct db *db)
{
	struct db_writer *w = db->w;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	writer_cluster_fini(w);
	pthread_cond_destroy(&w->switched);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	free(w);
	db->w = NULL;
}

/* ---- queueing ---------------------------------------------------------- */

static void submit(struct db *db, db_apply_fn apply, db_done_fn done, void *arg,
		   bool lazy, bool background)
{
	struct db_writer *w = db->w;
	struct db_op *op = calloc(1, sizeof(*op));

	if (!op) {
		if (done)
			done(arg, -ENOMEM);
		return;
	}
	op->apply = apply;
	op->done = done;
	op->arg = arg;
	op->lazy = lazy;
	op->background = background;
	pthread_mutex_lock(&w->lock);
	*w->tail = op;
	w->tail = &op->next;
	w->nqueued++;
	if (background) {
		/* The first one sets the writer's deadline. */
		if (!w->nbg++) {
			w->bg_due_ns =
				mono_ns() + (uint64_t)w->lazy_ms * 1000000u;
			pthread_cond_signal(&w->wake);
		}
	} else {
		w->arrivals++;
		/* A lingering writer wakes once, when what it waits for
		 * is in. */
		if (w->arrivals - w->linger_base >= w->linger_for)
			pthread_cond_signal(&w->wake);
	}
	pthread_mutex_unlock(&w->lock);
}

void db_submit(struct db *db, db_apply_fn apply, db_done_fn done, void *arg)
{
	submit(db, apply, done, arg, false, false);
}

void db_submit_lazy(struct db *db, db_apply_fn apply, db_done_fn done,
		    void *arg)
{
	submit(db, apply, done, arg, true, false);
}

void db_submit_background(struct db *db, db_apply_fn apply, db_done_fn done,
			  void *arg)
{
	submit(db, apply, done, arg, true, true);
}

void db_set_lazy_window(struct db *db, uint32_t ms)
{
	struct db_writer *w = db->w;

	pthread_mutex_lock(&w->lock);
	w->lazy_ms = ms < 1 ? 1 : ms > 10000 ? 10000 : ms;
	pthread_mutex_unlock(&w->lock);
}

struct db_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int err;
	db_apply_fn apply;
	void *arg;
};

static int db_wait_apply(struct db_txn *txn, void *p)
{
	struct db_wait *wt = p;

	return wt->apply ? wt->apply(txn, wt->arg) : 0;
}

static void db_wait_done(void *p, int err)
{
	struct db_wait *wt = p;

	pthread_mutex_lock(&wt->lock);
	wt->err = err;
	wt->done = true;
	pthread_cond_signal(&wt->cond);
	pthread_mutex_unlock(&wt->lock);
}

int db_write(struct db *db, db_apply_fn apply, void *arg)
{
	struct db_wait wt = { .apply = apply, .arg = arg };

	pthread_mutex_init(&wt.lock, NULL);
	pthread_cond_init(&wt.cond, NULL);
	db_submit(db, db_wait_apply, db_wait_done, &wt);
	pthread_mutex_lock(&wt.lock);
	while (!wt.done)
		pthread_cond_wait(&wt.cond, &wt.lock);
	pthread_mutex_unlock(&wt.lock);
	pthread_cond_destroy(&wt.cond);
	pthread_mutex_destroy(&wt.lock);
	return wt.err;
}
