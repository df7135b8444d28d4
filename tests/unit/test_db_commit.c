/* Unit tests for db/: group commit, isolation of failing changes, reads. */
#include <CUnit/Basic.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(void)
{
	if (!mkdtemp(dir))
		return 2;
	CU_initialize_registry();
	CU_pSuite s = CU_add_suite("db", NULL, NULL);
	CU_add_test(s, "write, read, reopen", test_write_read_reopen);
	CU_add_test(s, "group commit burst", test_group_commit_burst);
	CU_add_test(s, "nested reads", test_nested_reads);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	if (test_rmtree(dir) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	return failed ? 1 : 0;
}
