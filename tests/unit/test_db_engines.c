/*
 * The db/ conformance suite: what a caller of db.h may count on, run
 * against the local engine alone (LMDB) and against the replica over
 * PostgreSQL (a one-node cluster, then two nodes on one database): a
 * change is whole or absent, a failing change leaves nothing, a burst of
 * changes commits in groups with each one's own answer, what was
 * answered survives a reopen, and read-modify-write changes of one
 * record lose no update.  With two nodes: a change made on one shows on
 * the other, whole, and concurrent increments from both sum exactly.
 *
 * PostgreSQL comes from tests/pg/pg.sh (MAPFS_PG_SH); without it the
 * cluster half says SKIPPED and the test exits 77 (if the rest passed).
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "db/db.h"
#include "tests/lib/testlib.h"

static char root[] = "/tmp/mapfs-test-dbe-XXXXXX";
static char pg_dir[256], pg_db_url[256];
static int pg_seq;

/* The engine under test: "" alone, else the database's URI. */
static const char *cluster_url;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- PostgreSQL, from tests/pg/pg.sh --------------------------------- */

/* Run pg.sh with args; its first line of output matching prefix (or the
 * first line) into out.  0 or -1. */
static int pg_sh(const char *args, const char *prefix, char *out, size_t cap)
{
	char cmd[1024], line[512];
	FILE *p;
	int found = -1;

	snprintf(cmd, sizeof(cmd),
		 "MAPFS_PG_WATCH_PID=%d bash %s %s 2>/dev/null", (int)getpid(),
		 MAPFS_PG_SH, args);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		line[strcspn(line, "\n")] = '\0';
		if (found &&
		    (!prefix || !strncmp(line, prefix, strlen(prefix)))) {
			const char *v = line + (prefix ? strlen(prefix) : 0);
			size_t len = strlen(v);

			if (len >= cap)
				len = cap - 1;
			memcpy(out, v, len);
			out[len] = '\0';
			found = 0;
		}
	}
	return pclose(p) == 0 ? found : -1;
}

static int pg_start(void)
{
	char args[300];

	if (pg_sh("start", "MAPFS_PG_DIR=", pg_dir, sizeof(pg_dir)))
		return -1;
	snprintf(args, sizeof(args), "createdb %s conformance", pg_dir);
	return pg_sh(args, NULL, pg_db_url, sizeof(pg_db_url));
}

static void pg_stop(void)
{
	char args[300], out[64];

	if (!pg_dir[0])
		return;
	snprintf(args, sizeof(args), "stop %s", pg_dir);
	pg_sh(args, NULL, out, sizeof(out));
}

/* ---- an engine's node ---------------------------------------------------- */

struct node {
	struct db *db;
	db_table t;
	char dir[300];
	char name[16];
};

/* Open node i's state (fresh unless again) on the engine under test. */
static int node_open(struct node *n, int i, bool again)
{
	struct db_cluster_opts o = { .url = cluster_url,
				     .node = n->name,
				     .store_url =
					     "file:///nonexistent/conformance",
				     .addr = "127.0.0.1:2049",
				     .lease_ms = 3000 };
	int rc;

	if (!again) {
		snprintf(n->dir, sizeof(n->dir), "%s/n%d.%d", root, i,
			 ++pg_seq);
		snprintf(n->name, sizeof(n->name), "n%d", i);
		if (mkdir(n->dir, 0700))
			return -errno;
	}
	if ((rc = db_open(n->dir, 64 << 20, 16, &n->db)))
		return rc;
	if ((cluster_url && (rc = db_cluster(n->db, &o))) ||
	    (rc = db_table_open(n->db, "t", DB_INTKEY | DB_SHARED, &n->t)) ||
	    (rc = db_start(n->db))) {
		db_close(n->db);
		n->db = NULL;
	}
	return rc;
}

static void node_close(struct node *n)
{
	if (!n->db)
		return;
	db_stop(n->db);
	db_close(n->db);
	n->db = NULL;
}

/* ---- changes ------------------------------------------------------------- */

struct kv {
	db_table t;
	uint64_t key, val, key2;
	int fail; /* returned after the puts */
};

static int put_apply(struct db_txn *txn, void *p)
{
	struct kv *kv = p;
	struct db_val k = { sizeof(kv->key), &kv->key },
		      v = { sizeof(kv->val), &kv->val },
		      k2 = { sizeof(kv->key2), &kv->key2 };
	int rc = db_put(txn, kv->t, &k, &v, 0);

	if (!rc && kv->key2)
		rc = db_put(txn, kv->t, &k2, &v, 0);
	return rc ? rc : kv->fail;
}

static int del_apply(struct db_txn *txn, void *p)
{
	struct kv *kv = p;
	struct db_val k = { sizeof(kv->key), &kv->key };

	return db_del(txn, kv->t, &k);
}

/* Read key in one snapshot, with key2 (if not 0) in the same one. */
static int get2(struct node *n, uint64_t key, uint64_t *val, uint64_t key2,
		uint64_t *val2)
{
	struct db_txn *txn;
	struct db_val k = { sizeof(key), &key }, k2 = { sizeof(key2), &key2 },
		      v;
	int rc = db_read_begin(n->db, &txn), rc2 = 0;

	if (rc)
		return rc;
	rc = db_get(txn, n->t, &k, &v);
	if (!rc)
		memcpy(val, v.data, sizeof(*val));
	if (key2) {
		rc2 = db_get(txn, n->t, &k2, &v);
		if (!rc2)
			memcpy(val2, v.data, sizeof(*val2));
		else
			*val2 = 0;
		if (rc == -ENOENT)
			*val = 0;
		if (rc == -ENOENT && rc2 == -ENOENT)
			rc = 0;
		else if (rc != rc2)
			rc = rc ? rc : rc2;
	}
	db_read_end(n->db, txn);
	return rc;
}

static int get(struct node *n, uint64_t key, uint64_t *val)
{
	return get2(n, key, val, 0, NULL);
}

/* Wait (up to 10 s) until key reads want (0: absent) on n. */
static bool wait_val(struct node *n, uint64_t key, uint64_t want)
{
	uint64_t t0 = now_ms(), v = 0;
	int rc;

	do {
		rc = get(n, key, &v);
		if ((want && !rc && v == want) || (!want && rc == -ENOENT))
			return true;
		usleep(10 * 1000);
	} while (now_ms() - t0 < 10000);
	return false;
}

/* Completions of submitted changes. */
struct tally {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int left, ok, failed, other;
};

struct sub {
	struct kv kv;
	struct tally *t;
	int expect; /* the error this change must get (0: none) */
};

static void sub_done(void *p, int err)
{
	struct sub *s = p;
	struct tally *t = s->t;

	pthread_mutex_lock(&t->lock);
	if (!err)
		t->ok++;
	else if (err == s->expect)
		t->failed++;
	else
		t->other++;
	if (--t->left == 0)
		pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

static void tally_wait(struct tally *t)
{
	pthread_mutex_lock(&t->lock);
	while (t->left)
		pthread_cond_wait(&t->cond, &t->lock);
	pthread_mutex_unlock(&t->lock);
}

/* ---- the cases, on either engine ------------------------------------------ */

/* A change is whole: two records, or none when it fails after writing. */
static void test_whole_or_nothing(void)
{
	struct node n = { 0 };
	uint64_t a = 0, b = 0;

	CU_ASSERT_FATAL(node_open(&n, 1, false) == 0);
	struct kv ok = { n.t, 1, 11, 2, 0 }, bad = { n.t, 3, 33, 4, -EEXIST };

	CU_ASSERT(db_write(n.db, put_apply, &ok) == 0);
	CU_ASSERT(db_write(n.db, put_apply, &bad) == -EEXIST);
	CU_ASSERT(get2(&n, 1, &a, 2, &b) == 0 && a == 11 && b == 11);
	CU_ASSERT(get(&n, 3, &a) == -ENOENT && get(&n, 4, &b) == -ENOENT);
	/* What was answered is there after a reopen. */
	node_close(&n);
	CU_ASSERT_FATAL(node_open(&n, 1, true) == 0);
	CU_ASSERT(get2(&n, 1, &a, 2, &b) == 0 && a == 11 && b == 11);
	struct kv del = { n.t, 1, 0, 0, 0 };

	CU_ASSERT(db_write(n.db, del_apply, &del) == 0);
	CU_ASSERT(get(&n, 1, &a) == -ENOENT);
	node_close(&n);
}

/* Many changes at once: each gets its own answer; the failed ones left
 * nothing, the others are all there. */
static void test_burst(void)
{
	enum { N = 2000 };
	struct node n = { 0 };
	struct tally t = {
		PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, N, 0, 0, 0
	};
	struct sub *subs = calloc(N, sizeof(*subs));

	CU_ASSERT_FATAL(subs && node_open(&n, 1, false) == 0);
	for (unsigned i = 0; i < N; i++) {
		int fail = i % 7 == 0 ? -EIO : 0;

		/* Every tenth also writes one record all of them share. */
		subs[i] = (struct sub){ { n.t, 1000 + i, i * 3,
					  i % 10 == 0 ? 999 : 0, fail },
					&t,
					fail };
		db_submit(n.db, put_apply, sub_done, &subs[i]);
	}
	tally_wait(&t);
	CU_ASSERT(t.other == 0);
	CU_ASSERT(t.failed == (N + 6) / 7);
	CU_ASSERT(t.ok == N - (N + 6) / 7);
	for (unsigned i = 0; i < N; i += 13) {
		uint64_t v = 0;
		int rc = get(&n, 1000 + i, &v);

		CU_ASSERT(i % 7 == 0 ? rc == -ENOENT : rc == 0 && v == i * 3);
	}
	node_close(&n);
	free(subs);
}

/* Read-modify-write of one record: no update lost. */
struct incr {
	db_table t;
	uint64_t key;
	struct tally *tally;
};

static int incr_apply(struct db_txn *txn, void *p)
{
	struct incr *in = p;
	uint64_t val = 0;
	struct db_val k = { sizeof(in->key), &in->key }, v;
	int rc = db_get(txn, in->t, &k, &v);

	if (rc && rc != -ENOENT)
		return rc;
	if (!rc)
		memcpy(&val, v.data, sizeof(val));
	val++;
	v = (struct db_val){ sizeof(val), &val };
	return db_put(txn, in->t, &k, &v, 0);
}

static void incr_done(void *p, int err)
{
	struct incr *in = p;
	struct sub s = { .t = in->tally, .expect = -EAGAIN };

	sub_done(&s, err);
}

/* Submit n increments of key on each node at once; how many were
 * answered OK. */
static int increments(struct node *nodes, int nn, int n, uint64_t key)
{
	struct tally t = { PTHREAD_MUTEX_INITIALIZER,
			   PTHREAD_COND_INITIALIZER,
			   n * nn,
			   0,
			   0,
			   0 };
	struct incr *in = calloc((size_t)(n * nn), sizeof(*in));

	if (!in)
		return -1;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < nn; j++) {
			in[i * nn + j] = (struct incr){ nodes[j].t, key, &t };
			db_submit(nodes[j].db, incr_apply, incr_done,
				  &in[i * nn + j]);
		}
	tally_wait(&t);
	free(in);
	CU_ASSERT(t.other == 0);
	return t.ok;
}

static void test_increments(void)
{
	struct node n = { 0 };
	uint64_t v = 0;
	int ok;

	CU_ASSERT_FATAL(node_open(&n, 1, false) == 0);
	ok = increments(&n, 1, 500, 7);
	/* One node: its changes of one record never conflict. */
	CU_ASSERT(ok == 500);
	CU_ASSERT(get(&n, 7, &v) == 0 && v == (uint64_t)ok);
	node_close(&n);
}

/* ---- two nodes on one database -------------------------------------------- */

static void test_two_nodes_see(void)
{
	struct node a = { 0 }, b = { 0 };
	struct kv put = { 0, 50, 5, 51, 0 }, del = { 0, 50, 0, 0, 0 };

	CU_ASSERT_FATAL(node_open(&a, 1, false) == 0);
	CU_ASSERT_FATAL(node_open(&b, 2, false) == 0);
	put.t = a.t;
	CU_ASSERT(db_write(a.db, put_apply, &put) == 0);
	CU_ASSERT(wait_val(&b, 50, 5) && wait_val(&b, 51, 5));
	del.t = b.t;
	CU_ASSERT(db_write(b.db, del_apply, &del) == 0);
	CU_ASSERT(wait_val(&a, 50, 0));
	node_close(&b);
	node_close(&a);
}

struct watcher {
	struct node *n;
	_Atomic int stop;
	int torn;
	uint64_t last;
};

static void *watch_main(void *p)
{
	struct watcher *w = p;

	while (!w->stop) {
		uint64_t x = 0, y = 0;

		if (get2(w->n, 60, &x, 61, &y) == 0) {
			if (x != y)
				w->torn++;
			w->last = x;
		}
	}
	return NULL;
}

/* A change of two records shows on the other node whole, never half. */
static void test_two_nodes_whole(void)
{
	struct node a = { 0 }, b = { 0 };
	struct watcher w = { .n = &b };
	pthread_t th;

	CU_ASSERT_FATAL(node_open(&a, 1, false) == 0);
	CU_ASSERT_FATAL(node_open(&b, 2, false) == 0);
	pthread_create(&th, NULL, watch_main, &w);
	for (uint64_t v = 1; v <= 100; v++) {
		struct kv kv = { a.t, 60, v, 61, 0 };

		CU_ASSERT(db_write(a.db, put_apply, &kv) == 0);
	}
	CU_ASSERT(wait_val(&b, 60, 100));
	w.stop = 1;
	pthread_join(th, NULL);
	CU_ASSERT(w.torn == 0);
	node_close(&b);
	node_close(&a);
}

/* Increments of one record from both nodes at once: every one answered
 * OK is counted once; a conflict storm may answer -EAGAIN (JUKEBOX to a
 * client), never a lost or doubled update. */
static void test_two_nodes_increments(void)
{
	struct node n[2] = { { 0 } };
	uint64_t va = 0, vb = 0, t0;
	int ok;

	CU_ASSERT_FATAL(node_open(&n[0], 1, false) == 0);
	CU_ASSERT_FATAL(node_open(&n[1], 2, false) == 0);
	ok = increments(n, 2, 200, 8);
	CU_ASSERT(ok > 0);
	t0 = now_ms();
	do {
		get(&n[0], 8, &va);
		get(&n[1], 8, &vb);
		if (va == (uint64_t)ok && vb == (uint64_t)ok)
			break;
		usleep(10 * 1000);
	} while (now_ms() - t0 < 10000);
	CU_ASSERT(va == (uint64_t)ok);
	CU_ASSERT(vb == (uint64_t)ok);
	printf("[%d of 400 increments answered OK; %llu on one node, %llu on "
	       "the other] ",
	       ok, (unsigned long long)va, (unsigned long long)vb);
	node_close(&n[1]);
	node_close(&n[0]);
}

/* Claims of new records: a record created only if absent (-EEXIST
 * otherwise), the same keys from both nodes at once, one in order and
 * one in reverse.  Each key is created once, by the node it then names
 * on both; the other node's claim answers -EEXIST (or -EAGAIN in a
 * conflict storm), never OK as well. */
struct claim {
	db_table t;
	uint64_t key, node;
	int err;
	struct tally *tally;
};

static int claim_apply(struct db_txn *txn, void *p)
{
	struct claim *c = p;
	struct db_val k = { sizeof(c->key), &c->key },
		      v = { sizeof(c->node), &c->node }, old;
	int rc = db_get(txn, c->t, &k, &old);

	if (!rc)
		return -EEXIST;
	return rc == -ENOENT ? db_put(txn, c->t, &k, &v, 0) : rc;
}

static void claim_done(void *p, int err)
{
	struct claim *c = p;
	struct sub s = { .t = c->tally, .expect = err };

	c->err = err;
	sub_done(&s, err);
}

static void test_two_nodes_claims(void)
{
	enum { K = 300 };
	struct node n[2] = { { 0 } };
	struct claim *c = calloc(2 * K, sizeof(*c));
	struct tally t = { PTHREAD_MUTEX_INITIALIZER,
			   PTHREAD_COND_INITIALIZER,
			   2 * K,
			   0,
			   0,
			   0 };
	int made = 0, other = 0;

	CU_ASSERT_FATAL(c != NULL);
	CU_ASSERT_FATAL(node_open(&n[0], 1, false) == 0);
	CU_ASSERT_FATAL(node_open(&n[1], 2, false) == 0);
	for (int i = 0; i < K; i++) {
		struct claim *a = &c[i], *b = &c[K + (K - 1 - i)];

		*a = (struct claim){ n[0].t, 9000 + (uint64_t)i, 1, 0, &t };
		*b = (struct claim){ n[1].t, 9000 + (uint64_t)(K - 1 - i), 2, 0,
				     &t };
		db_submit(n[0].db, claim_apply, claim_done, a);
		db_submit(n[1].db, claim_apply, claim_done, b);
	}
	tally_wait(&t);
	for (int i = 0; i < K; i++) {
		struct claim *a = &c[i], *b = &c[K + i];
		uint64_t want = !a->err ? 1 : !b->err ? 2 : 0, va = 0, vb = 0;

		CU_ASSERT(a->err || b->err); /* never both */
		CU_ASSERT(!a->err || a->err == -EEXIST || a->err == -EAGAIN);
		CU_ASSERT(!b->err || b->err == -EEXIST || b->err == -EAGAIN);
		if (want) {
			made++;
			CU_ASSERT(wait_val(&n[0], a->key, want) &&
				  wait_val(&n[1], a->key, want));
			/* and it stays: no second make lands late */
			CU_ASSERT(get(&n[0], a->key, &va) == 0 && va == want);
			CU_ASSERT(get(&n[1], a->key, &vb) == 0 && vb == want);
		} else if (a->err == -EEXIST || b->err == -EEXIST) {
			other++; /* one saw a record nobody says it made */
		}
	}
	CU_ASSERT(other == 0);
	printf("[%d of %d keys made; %d claims answered EEXIST or EAGAIN] ",
	       made, K, t.failed);
	node_close(&n[1]);
	node_close(&n[0]);
	free(c);
}

/* ---- the suites ------------------------------------------------------------ */

static int alone_init(void)
{
	cluster_url = NULL;
	return 0;
}

static int pg_init(void)
{
	cluster_url = pg_db_url;
	return 0;
}

int main(void)
{
	bool have_pg;
	unsigned failed;

	if (!mkdtemp(root))
		return 2;
	have_pg = pg_start() == 0;
	CU_initialize_registry();
	CU_pSuite s = CU_add_suite("lmdb alone", alone_init, NULL);
	CU_add_test(s, "a change is whole or nothing; reopen",
		    test_whole_or_nothing);
	CU_add_test(s, "a burst: own answers, failures leave nothing",
		    test_burst);
	CU_add_test(s, "read-modify-write loses nothing", test_increments);
	if (have_pg) {
		s = CU_add_suite("the replica over PostgreSQL", pg_init, NULL);
		CU_add_test(s, "a change is whole or nothing; reopen",
			    test_whole_or_nothing);
		CU_add_test(s, "a burst: own answers, failures leave nothing",
			    test_burst);
		CU_add_test(s, "read-modify-write loses nothing",
			    test_increments);
		CU_add_test(s, "two nodes: a change shows on the other",
			    test_two_nodes_see);
		CU_add_test(s, "two nodes: never half a change",
			    test_two_nodes_whole);
		CU_add_test(s, "two nodes: concurrent increments sum exactly",
			    test_two_nodes_increments);
		CU_add_test(s, "two nodes: a new record is made once",
			    test_two_nodes_claims);
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	pg_stop();
	if (test_rmtree(root) != 0)
		fprintf(stderr, "could not remove %s\n", root);
	if (failed)
		return 1;
	if (!have_pg) {
		printf("SKIPPED: the replica over PostgreSQL (tests/pg/pg.sh "
		       "could not start one: apt-get install postgresql)\n");
		return 77;
	}
	return 0;
}
