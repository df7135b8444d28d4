/* Unit tests for db/: group commit, isolation of failing changes, reads. */
#include <CUnit/Basic.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "db/db.h"
#include "metrics/metrics.h"
#include "tests/lib/testlib.h"

static char dir[] = "/tmp/mapfs-test-db-XXXXXX";

struct kv {
	db_table dbi;
	unsigned key, val;
	int fail;
};

static int put_apply(struct db_txn *txn, void *p)
{
	struct kv *kv = p;
	struct db_val k = { sizeof(kv->key), &kv->key };
	struct db_val v = { sizeof(kv->val), &kv->val };
	int rc = db_put(txn, kv->dbi, &k, &v, 0);

	return rc ? rc : kv->fail;
}

static int get(struct db *db, db_table dbi, unsigned key, unsigned *val)
{
	struct db_txn *txn;
	struct db_val k = { sizeof(key), &key }, v;
	int rc = db_read_begin(db, &txn);

	if (rc)
		return rc;
	rc = db_get(txn, dbi, &k, &v);
	if (!rc)
		memcpy(val, v.data, sizeof(*val));
	db_read_end(db, txn);
	return rc;
}

static void test_write_read_reopen(void)
{
	struct db *db;
	db_table dbi;
	unsigned v = 0;

	CU_ASSERT_FATAL(db_open(dir, 64 << 20, 8, &db) == 0);
	CU_ASSERT_FATAL(db_table_open(db, "t", DB_INTKEY, &dbi) == 0);
	struct kv ok = { dbi, 1, 11, 0 }, bad = { dbi, 2, 22, -EEXIST };
	CU_ASSERT(db_write(db, put_apply, &ok) == 0);
	/* A failing change returns its error and leaves nothing behind. */
	CU_ASSERT(db_write(db, put_apply, &bad) == -EEXIST);
	CU_ASSERT(get(db, dbi, 1, &v) == 0 && v == 11);
	CU_ASSERT(get(db, dbi, 2, &v) == -ENOENT);
	db_close(db);

	CU_ASSERT_FATAL(db_open(dir, 64 << 20, 8, &db) == 0);
	CU_ASSERT_FATAL(db_table_open(db, "t", DB_INTKEY, &dbi) == 0);
	CU_ASSERT(get(db, dbi, 1, &v) == 0 && v == 11);
	db_close(db);
}

struct burst {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int left, errors;
};

static void burst_done(void *p, int err)
{
	struct burst *b = p;

	pthread_mutex_lock(&b->lock);
	if (err)
		b->errors++;
	if (--b->left == 0)
		pthread_cond_signal(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

struct burst_op {
	struct kv kv;
	struct burst *b;
};

static int burst_apply(struct db_txn *txn, void *p)
{
	return put_apply(txn, &((struct burst_op *)p)->kv);
}

static void burst_op_done(void *p, int err)
{
	burst_done(((struct burst_op *)p)->b, err);
}

static void test_group_commit_burst(void)
{
	enum { N = 5000 };
	struct db *db;
	db_table dbi;
	struct burst b = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
			   N, 0 };
	struct burst_op *ops = calloc(N, sizeof(*ops));

	CU_ASSERT_FATAL(db_open(dir, 64 << 20, 8, &db) == 0);
	CU_ASSERT_FATAL(db_table_open(db, "burst", DB_INTKEY, &dbi) == 0);
	for (unsigned i = 0; i < N; i++) {
		ops[i] = (struct burst_op){
			{ dbi, i, i * 3, i % 7 == 0 ? -EIO : 0 }, &b
		};
		db_submit(db, burst_apply, burst_op_done, &ops[i]);
	}
	pthread_mutex_lock(&b.lock);
	while (b.left)
		pthread_cond_wait(&b.cond, &b.lock);
	pthread_mutex_unlock(&b.lock);
	CU_ASSERT(b.errors == (N + 6) / 7);
	for (unsigned i = 0; i < N; i += 97) {
		unsigned v = 0;
		int rc = get(db, dbi, i, &v);

		CU_ASSERT(i % 7 == 0 ? rc == -ENOENT : rc == 0 && v == i * 3);
	}
	db_close(db);
	free(ops);
}

static void test_nested_reads(void)
{
	struct db *db;
	db_table dbi;
	struct db_txn *a, *b;

	CU_ASSERT_FATAL(db_open(dir, 64 << 20, 8, &db) == 0);
	CU_ASSERT_FATAL(db_table_open(db, "t", DB_INTKEY, &dbi) == 0);
	CU_ASSERT_FATAL(db_read_begin(db, &a) == 0);
	CU_ASSERT_FATAL(db_read_begin(db, &b) == 0);
	CU_ASSERT(a == b); /* one snapshot for nested helpers */
	db_read_end(db, b);
	db_read_end(db, a);
	CU_ASSERT(db_read_begin(db, &a) == 0);
	db_read_end(db, a);
	db_close(db);
}

/* ---- commits not flushed (DB_OPEN_UNFLUSHED) ---- */

static char udir[300], unote[320];

/* The note's text ("" if there is none). */
static void note_read(char *out, size_t cap)
{
	FILE *f = fopen(unote, "r");

	out[0] = '\0';
	if (f) {
		if (!fgets(out, (int)cap, f))
			out[0] = '\0';
		fclose(f);
	}
	out[strcspn(out, "\n")] = '\0';
}

static int boot_now(char *out, size_t cap)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	if (!f || !fgets(out, (int)cap, f)) {
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
	return 0;
}

/* In a child process: open udir with flags, write key = val, and die
 * without closing (a crash of the process).  The child's exit status. */
static int crash_after_write(unsigned flags, unsigned key, unsigned val)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		struct db *db;
		db_table dbi;

		if (db_open_flags(udir, 64 << 20, 8, flags, &db) ||
		    db_table_open(db, "t", DB_INTKEY, &dbi))
			_exit(1);
		struct kv kv = { dbi, key, val, 0 };
		_exit(db_write(db, put_apply, &kv) ? 1 : 0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Open udir with flags and read key: its value, or -errno. */
static long reopen_get(unsigned flags, unsigned key, bool *dropped)
{
	struct db *db;
	db_table dbi;
	unsigned v = 0;
	long rc;

	if ((rc = db_open_flags(udir, 64 << 20, 8, flags, &db)))
		return rc;
	*dropped = db_dropped(db);
	rc = db_table_open(db, "t", DB_INTKEY, &dbi);
	if (!rc)
		rc = get(db, dbi, key, &v);
	db_close(db);
	return rc ? rc : (long)v;
}

/*
 * An environment opened unflushed notes the machine's boot before its
 * first commit and removes the note at a clean close.  A process that
 * dies leaves it: the next open of the same boot keeps every commit (the
 * kernel had them); the note of another boot (a crash of the machine)
 * means the files may be torn: the open starts empty, even from files
 * LMDB could not read.  A flushed open of the same boot flushes what the
 * dead process left and removes the note.
 */
static void test_unflushed(void)
{
	char boot[64], note[64];
	bool dropped = true;
	int fd;

	if (boot_now(boot, sizeof(boot))) {
		CU_PASS("no boot id here: unflushed opens are flushed");
		return;
	}
	snprintf(udir, sizeof(udir), "%s/unflushed", dir);
	snprintf(unote, sizeof(unote), "%s/unflushed", udir);
	CU_ASSERT_FATAL(crash_after_write(DB_OPEN_UNFLUSHED, 1, 11) == 0);
	note_read(note, sizeof(note));
	CU_ASSERT_STRING_EQUAL(note, boot);
	CU_ASSERT(reopen_get(DB_OPEN_UNFLUSHED, 1, &dropped) == 11);
	CU_ASSERT(!dropped);
	note_read(note, sizeof(note));
	CU_ASSERT_STRING_EQUAL(note, ""); /* the clean close removed it */

	/* Another boot, and the files torn: both meta pages zeroed. */
	CU_ASSERT_FATAL(crash_after_write(DB_OPEN_UNFLUSHED, 2, 22) == 0);
	fd = open(unote, O_WRONLY | O_TRUNC);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(write(fd, "another-boot\n", 13) == 13);
	close(fd);
	char data[sizeof(udir) + 16], zeros[8192] = { 0 };

	snprintf(data, sizeof(data), "%s/data.mdb", udir);
	fd = open(data, O_WRONLY);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(pwrite(fd, zeros, sizeof(zeros), 0) == sizeof(zeros));
	close(fd);
	CU_ASSERT(reopen_get(DB_OPEN_UNFLUSHED, 1, &dropped) == -ENOENT);
	CU_ASSERT(dropped);

	/* A flushed open after an unflushed process died, same boot. */
	CU_ASSERT_FATAL(crash_after_write(DB_OPEN_UNFLUSHED, 3, 33) == 0);
	note_read(note, sizeof(note));
	CU_ASSERT_STRING_EQUAL(note, boot);
	CU_ASSERT(reopen_get(0, 3, &dropped) == 33);
	CU_ASSERT(!dropped);
	note_read(note, sizeof(note));
	CU_ASSERT_STRING_EQUAL(note, "");
	/* Flushed, nothing is noted, and a note of another boot is not
	 * needed to keep it. */
	CU_ASSERT(crash_after_write(0, 4, 44) == 0);
	note_read(note, sizeof(note));
	CU_ASSERT_STRING_EQUAL(note, "");
	CU_ASSERT(reopen_get(0, 4, &dropped) == 44 && !dropped);
}

/* In a child process: open udir (flushed: the log), write keys
 * 1..n = key * 10, each its own commit, and die without closing. */
static int crash_after_writes(unsigned n)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		struct db *db;
		db_table dbi;

		if (db_open(udir, 64 << 20, 8, &db) ||
		    db_table_open(db, "t", DB_INTKEY, &dbi))
			_exit(1);
		for (unsigned k = 1; k <= n; k++) {
			struct kv kv = { dbi, k, k * 10, 0 };

			if (db_write(db, put_apply, &kv))
				_exit(1);
		}
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* How many of keys 1..n hold key * 10 after an open of udir; -1 if a
 * key holds something else or the open fails. */
static int keys_back(unsigned n)
{
	struct db *db;
	db_table dbi;
	int found = 0;

	if (db_open(udir, 64 << 20, 8, &db))
		return -1;
	if (db_table_open(db, "t", DB_INTKEY, &dbi)) {
		db_close(db);
		return -1;
	}
	for (unsigned k = 1; k <= n; k++) {
		unsigned v = 0;
		int rc = get(db, dbi, k, &v);

		if (!rc && v == k * 10)
			found++;
		else if (rc != -ENOENT)
			found = -1000;
	}
	db_close(db);
	return found < 0 ? -1 : found;
}

/*
 * The log (db/wal.c): LMDB runs unflushed and a commit is durable once
 * its record is.  A process that dies leaves LMDB's newer pages and
 * meta pages to the kernel; the next open goes back to the checkpoint
 * and replays the records.  Torn: a newest meta page that points at
 * nothing is never used; a torn last record ends the log there.
 */
static void test_log(void)
{
	char data[sizeof(udir) + 16], wal[sizeof(udir) + 16];
	uint8_t page[4096];
	uint64_t t0, t1, big = 1u << 30, root = 0xfffffff0u;
	struct {
		uint32_t magic, crc;
		uint64_t epoch, lsn;
		uint32_t len, pad;
	} h;
	int fd;

	snprintf(udir, sizeof(udir), "%s/log", dir);
	snprintf(data, sizeof(data), "%s/data.mdb", udir);
	snprintf(wal, sizeof(wal), "%s/wal", udir);
	CU_ASSERT_FATAL(crash_after_writes(50) == 0);
	CU_ASSERT_EQUAL(keys_back(50), 50);

	/* The newest meta page made to point at nothing: as if its
	 * commit's pages never reached the disk. */
	CU_ASSERT_FATAL(crash_after_writes(60) == 0);
	fd = open(data, O_RDWR);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(pread(fd, page, 4096, 0) == 4096);
	memcpy(&t0, page + 144, 8);
	CU_ASSERT(pread(fd, page, 4096, 4096) == 4096);
	memcpy(&t1, page + 144, 8);
	off_t at = t1 > t0 ? 4096 : 0;

	CU_ASSERT(pread(fd, page, 4096, at) == 4096);
	memcpy(page + 128, &root, 8); /* the main table's root */
	memcpy(page + 144, &big, 8);  /* and newest of all */
	CU_ASSERT(pwrite(fd, page, 4096, at) == 4096);
	close(fd);
	CU_ASSERT_EQUAL(keys_back(60), 60);

	/* Two records after the checkpoint, the second torn. */
	CU_ASSERT_FATAL(crash_after_writes(0) == 0); /* opens, dies */
	CU_ASSERT_EQUAL(keys_back(60), 60);
	{
		struct db *db;
		db_table dbi;
		struct kv a = { 0, 100, 1000, 0 }, b = { 0, 101, 1010, 0 };

		pid_t pid = fork();
		int st;

		if (pid == 0) {
			if (db_open(udir, 64 << 20, 8, &db) ||
			    db_table_open(db, "t", DB_INTKEY, &dbi))
				_exit(1);
			a.dbi = b.dbi = dbi;
			_exit(db_write(db, put_apply, &a) ||
					      db_write(db, put_apply, &b)
				      ? 1
				      : 0);
		}
		CU_ASSERT_FATAL(pid > 0 && waitpid(pid, &st, 0) == pid &&
				WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	fd = open(wal, O_RDWR);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT(pread(fd, &h, sizeof(h), 0) == sizeof(h));
	CU_ASSERT(h.lsn == 1);
	off_t second = (off_t)((sizeof(h) + h.len + 7) & ~7ull);

	CU_ASSERT(pread(fd, &h, sizeof(h), second) == sizeof(h));
	CU_ASSERT(h.lsn == 2 && h.len > 0);
	uint8_t x;

	CU_ASSERT(pread(fd, &x, 1, second + (off_t)sizeof(h) + h.len - 1) == 1);
	x ^= 0xff;
	CU_ASSERT(pwrite(fd, &x, 1, second + (off_t)sizeof(h) + h.len - 1) ==
		  1);
	close(fd);
	{
		struct db *db;
		db_table dbi;
		unsigned v = 0;

		CU_ASSERT_FATAL(db_open(udir, 64 << 20, 8, &db) == 0);
		CU_ASSERT_FATAL(db_table_open(db, "t", DB_INTKEY, &dbi) == 0);
		CU_ASSERT(get(db, dbi, 100, &v) == 0 && v == 1000);
		CU_ASSERT(get(db, dbi, 101, &v) == -ENOENT);
		CU_ASSERT(get(db, dbi, 60, &v) == 0 && v == 600);
		db_close(db);
	}
}

/*
 * Threads come and go (each pass of parallel uploads starts its own);
 * each one's read snapshot held an LMDB reader slot until db_close, so
 * after 1,024 of them every read failed (MDB_READERS_FULL: uploads
 * stopped after ~16,000 files, and the log's checkpoint failed).  A
 * thread's exit gives its slot back: 3,000 threads that each read, and
 * the slots in use come back to where they were.
 */
struct reads {
	struct db *db;
	db_table dbi;
	int errors;
};

static void *read_once(void *p)
{
	struct reads *r = p;
	unsigned v = 0;

	if (get(r->db, r->dbi, 1, &v) != 0 || v != 11)
		__atomic_add_fetch(&r->errors, 1, __ATOMIC_RELAXED);
	return NULL;
}

static void test_reader_slots(void)
{
	struct reads r = { 0 };
	struct db_usage u0, u1;
	struct kv kv = { 0, 1, 11, 0 };
	unsigned v = 0;

	snprintf(udir, sizeof(udir), "%s/readers", dir);
	CU_ASSERT_FATAL(db_open(udir, 64 << 20, 8, &r.db) == 0);
	CU_ASSERT_FATAL(db_table_open(r.db, "t", DB_INTKEY, &r.dbi) == 0);
	kv.dbi = r.dbi;
	CU_ASSERT_FATAL(db_write(r.db, put_apply, &kv) == 0);
	CU_ASSERT(get(r.db, r.dbi, 1, &v) == 0 && v == 11);
	db_usage(r.db, &u0);
	CU_ASSERT(u0.readers_max >= 126);
	CU_ASSERT(u0.map_bytes == 64 << 20);
	CU_ASSERT(u0.map_used_bytes > 0 && u0.map_used_bytes < u0.map_bytes);
	CU_ASSERT(u0.log_on && !u0.log_failed && u0.log_failures == 0);
	for (int i = 0; i < 3000; i += 8) {
		pthread_t t[8];

		for (int j = 0; j < 8; j++)
			CU_ASSERT_FATAL(pthread_create(&t[j], NULL, read_once,
						       &r) == 0);
		for (int j = 0; j < 8; j++)
			pthread_join(t[j], NULL);
	}
	CU_ASSERT_EQUAL(r.errors, 0);
	db_usage(r.db, &u1);
	CU_ASSERT_EQUAL(u1.readers, u0.readers);
	/* Reads and commits (and the log's checkpoints) still work. */
	for (unsigned k = 2; k < 600; k++) {
		struct kv w = { r.dbi, k, k * 10, 0 };

		CU_ASSERT_FATAL(db_write(r.db, put_apply, &w) == 0);
	}
	CU_ASSERT(get(r.db, r.dbi, 599, &v) == 0 && v == 5990);
	db_usage(r.db, &u1);
	CU_ASSERT(u1.log_on && u1.log_failures == 0);
	CU_ASSERT(u1.log_ckpt_age_ms < 60000);
	db_close(r.db);
}

/* A lazy change (db_submit_lazy), waited for. */
struct lazy_wait {
	pthread_mutex_t m;
	pthread_cond_t c;
	bool done;
	int err;
	struct kv *kv;
};

static int lazy_apply(struct db_txn *txn, void *p)
{
	return put_apply(txn, ((struct lazy_wait *)p)->kv);
}

static void lazy_done(void *p, int err)
{
	struct lazy_wait *w = p;

	pthread_mutex_lock(&w->m);
	w->err = err;
	w->done = true;
	pthread_cond_signal(&w->c);
	pthread_mutex_unlock(&w->m);
}

static int write_lazy(struct db *db, struct kv *kv)
{
	struct lazy_wait w = { .m = PTHREAD_MUTEX_INITIALIZER,
			       .c = PTHREAD_COND_INITIALIZER,
			       .kv = kv };

	db_submit_lazy(db, lazy_apply, lazy_done, &w);
	pthread_mutex_lock(&w.m);
	while (!w.done)
		pthread_cond_wait(&w.c, &w.m);
	pthread_mutex_unlock(&w.m);
	return w.err;
}

/*
 * Lazy commits (an async export's, issue 47): answered once in LMDB and
 * the log, unflushed; the writer flushes the log within the window, and
 * a durable commit flushes the lazy records before it.  A process that
 * dies right after loses none of them (the kernel has them): the next
 * open replays them.
 */
static void test_lazy(void)
{
	struct db *db;
	db_table dbi;
	uint64_t f0, f1, f2;
	unsigned v = 0;

	snprintf(udir, sizeof(udir), "%s/lazy", dir);
	CU_ASSERT_FATAL(db_open(udir, 64 << 20, 8, &db) == 0);
	CU_ASSERT_FATAL(db_table_open(db, "t", DB_INTKEY, &dbi) == 0);
	db_set_lazy_window(db, 100);
	f0 = metrics_get(MET_FLUSH_DB);
	for (unsigned k = 1; k <= 40; k++) {
		struct kv kv = { dbi, k, k * 10, 0 };

		CU_ASSERT_FATAL(write_lazy(db, &kv) == 0);
	}
	f1 = metrics_get(MET_FLUSH_DB);
	CU_ASSERT(f1 - f0 <= 4); /* 40 durable commits: 40 flushes */
	CU_ASSERT(get(db, dbi, 40, &v) == 0 && v == 400);
	usleep(300000); /* the window is over: the log was flushed */
	f2 = metrics_get(MET_FLUSH_DB);
	CU_ASSERT(f2 > f1);
	/* Lazy, then durable: the durable one's flush covers both. */
	{
		struct kv a = { dbi, 41, 410, 0 }, b = { dbi, 42, 420, 0 };

		CU_ASSERT(write_lazy(db, &a) == 0);
		CU_ASSERT(db_write(db, put_apply, &b) == 0);
	}
	db_close(db);
	/* Lazy, then a durable commit of nothing (how a COMMIT waits for
	 * the chunk journal's lazy records): it flushes them.  Before, it
	 * returned at once, nothing to log, the records unflushed.  (Just
	 * opened: no checkpoint comes between to flush them instead.) */
	CU_ASSERT_FATAL(db_open(udir, 64 << 20, 8, &db) == 0);
	CU_ASSERT_FATAL(db_table_open(db, "t", DB_INTKEY, &dbi) == 0);
	{
		struct kv a = { dbi, 43, 430, 0 };

		db_set_lazy_window(db, 10000);
		CU_ASSERT(write_lazy(db, &a) == 0);
		f1 = metrics_get(MET_FLUSH_DB);
		CU_ASSERT(db_write(db, NULL, NULL) == 0);
		f2 = metrics_get(MET_FLUSH_DB);
		CU_ASSERT(f2 == f1 + 1);
		CU_ASSERT(db_write(db, NULL, NULL) == 0); /* nothing left */
		CU_ASSERT(metrics_get(MET_FLUSH_DB) == f2);
	}
	db_close(db);

	/* A process that dies right after its lazy commits. */
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		if (db_open(udir, 64 << 20, 8, &db) ||
		    db_table_open(db, "t", DB_INTKEY, &dbi))
			_exit(1);
		db_set_lazy_window(db, 10000);
		for (unsigned k = 100; k < 130; k++) {
			struct kv kv = { dbi, k, k * 10, 0 };

			if (write_lazy(db, &kv))
				_exit(1);
		}
		_exit(0);
	}
	CU_ASSERT_FATAL(pid > 0 && waitpid(pid, &st, 0) == pid &&
			WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CU_ASSERT_FATAL(db_open(udir, 64 << 20, 8, &db) == 0);
	CU_ASSERT_FATAL(db_table_open(db, "t", DB_INTKEY, &dbi) == 0);
	CU_ASSERT(get(db, dbi, 42, &v) == 0 && v == 420);
	CU_ASSERT(get(db, dbi, 129, &v) == 0 && v == 1290);
	db_close(db);
}

static void free_done(void *p, int err)
{
	(void)err;
	free(p);
}

/* A chain of changes: each one's done() (the writer's thread) queues the
 * next, as a client answered at once sends its next call. */
struct chain {
	struct db *db;
	struct kv kv;
	unsigned left;
	struct lazy_wait *end;
};

static int chain_apply(struct db_txn *txn, void *p)
{
	return put_apply(txn, &((struct chain *)p)->kv);
}

static void chain_done(void *p, int err)
{
	struct chain *c = p;

	if (err || !--c->left) {
		lazy_done(c->end, err);
		return;
	}
	c->kv.key++;
	db_submit(c->db, chain_apply, chain_done, c);
}

static void flag_done(void *p, int err)
{
	lazy_done(p, err);
}

static bool done_within(struct lazy_wait *w, unsigned ms)
{
	bool d;

	for (unsigned i = 0; i < ms / 10; i++) {
		pthread_mutex_lock(&w->m);
		d = w->done;
		pthread_mutex_unlock(&w->m);
		if (d)
			return true;
		usleep(10000);
	}
	return false;
}

/*
 * The writer's linger (issue 47): after answers it waits a moment for as
 * many changes as it answered, counted from the answers on.  It counted
 * the changes queued before them too: a client whose next call came
 * while the writer was still at work cost a wait for a change nobody
 * would send (150 us, 1 ms in a cluster) before every commit: a REMOVE
 * one at a time took 350 us of the gateway instead of 110.  Background
 * changes (db_submit_background: the cache journal's records nobody
 * waits for) make no commit of their own while other changes come: they
 * go with the next group, or alone at the window's end.
 */
static void test_linger(void)
{
	struct db *db;
	db_table dbi;
	unsigned v = 0;

	snprintf(udir, sizeof(udir), "%s/linger", dir);
	CU_ASSERT_FATAL(db_open(udir, 64 << 20, 8, &db) == 0);
	CU_ASSERT_FATAL(db_table_open(db, "t", DB_INTKEY, &dbi) == 0);

	/* Changes queued at once by done(): no linger waits for more. */
	struct lazy_wait end = { .m = PTHREAD_MUTEX_INITIALIZER,
				 .c = PTHREAD_COND_INITIALIZER };
	struct chain c = {
		.db = db, .kv = { dbi, 1, 7, 0 }, .left = 300, .end = &end
	};
	uint64_t l0 = metrics_get(MET_DB_LINGER_EXPIRED);

	db_submit(db, chain_apply, chain_done, &c);
	CU_ASSERT_FATAL(done_within(&end, 60000));
	CU_ASSERT_EQUAL(end.err, 0);
	CU_ASSERT(get(db, dbi, 300, &v) == 0 && v == 7);
	CU_ASSERT(metrics_get(MET_DB_LINGER_EXPIRED) - l0 <= 1);

	/* A background change waits for the next group... */
	db_set_lazy_window(db, 10000);
	struct lazy_wait bg = { .m = PTHREAD_MUTEX_INITIALIZER,
				.c = PTHREAD_COND_INITIALIZER };
	struct kv b = { dbi, 1000, 1, 0 }, d = { dbi, 1001, 2, 0 };
	uint64_t c0 = metrics_get(MET_DB_COMMITS);

	bg.kv = &b;
	db_submit_background(db, lazy_apply, flag_done, &bg);
	CU_ASSERT(!done_within(&bg, 300));
	CU_ASSERT(get(db, dbi, 1000, &v) == -ENOENT);
	CU_ASSERT(db_write(db, put_apply, &d) == 0);
	CU_ASSERT(done_within(&bg, 1000) && bg.err == 0);
	CU_ASSERT(get(db, dbi, 1000, &v) == 0 && v == 1);
	CU_ASSERT_EQUAL(metrics_get(MET_DB_COMMITS) - c0, 1);

	/* ... or the end of the window. */
	db_set_lazy_window(db, 30);
	struct lazy_wait bg2 = { .m = PTHREAD_MUTEX_INITIALIZER,
				 .c = PTHREAD_COND_INITIALIZER };
	struct kv b2 = { dbi, 1002, 3, 0 };

	bg2.kv = &b2;
	db_submit_background(db, lazy_apply, flag_done, &bg2);
	CU_ASSERT(done_within(&bg2, 10000) && bg2.err == 0);
	CU_ASSERT(get(db, dbi, 1002, &v) == 0 && v == 3);

	/* A client's change, a background record after its answer (a
	 * REMOVE's cache journal record), the client's next change: one
	 * commit each, not two. */
	c0 = metrics_get(MET_DB_COMMITS);
	for (unsigned k = 2000; k < 2100; k++) {
		struct kv kv = { dbi, k, k, 0 };
		struct kv *rec = malloc(sizeof(*rec));

		CU_ASSERT_FATAL(rec != NULL);
		*rec = (struct kv){ dbi, k + 10000, k, 0 };
		CU_ASSERT(write_lazy(db, &kv) == 0);
		db_submit_background(db, put_apply, free_done, rec);
	}
	CU_ASSERT(metrics_get(MET_DB_COMMITS) - c0 <= 101);
	db_close(db); /* the last background record goes at the close */
	CU_ASSERT_FATAL(db_open(udir, 64 << 20, 8, &db) == 0);
	CU_ASSERT_FATAL(db_table_open(db, "t", DB_INTKEY, &dbi) == 0);
	CU_ASSERT(get(db, dbi, 12099, &v) == 0 && v == 2099);
	db_close(db);
}

int main(void)
{
	if (!mkdtemp(dir))
		return 2;
	CU_initialize_registry();
	CU_pSuite s = CU_add_suite("db", NULL, NULL);
	CU_add_test(s, "write, read, reopen", test_write_read_reopen);
	CU_add_test(s, "group commit burst", test_group_commit_burst);
	CU_add_test(s, "nested reads", test_nested_reads);
	CU_add_test(s,
		    "unflushed: a dead process keeps it, another boot drops it",
		    test_unflushed);
	CU_add_test(s,
		    "the log: a dead process's commits replayed, torn "
		    "ones not",
		    test_log);
	CU_add_test(s, "threads that exit give their read slots back",
		    test_reader_slots);
	CU_add_test(s,
		    "lazy commits: answered unflushed, flushed in the window",
		    test_lazy);
	CU_add_test(s,
		    "the linger counts arrivals after the answers; background "
		    "changes ride with the next group",
		    test_linger);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	if (test_rmtree(dir) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return failed ? 1 : 0;
}
