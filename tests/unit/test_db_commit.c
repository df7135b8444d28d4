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
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	if (test_rmtree(dir) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return failed ? 1 : 0;
}
