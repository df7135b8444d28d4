/*
 * Unit tests for mountd/mountd.c: the MOUNT program served by the real
 * transport on loopback, called by libtirpc's client, over a small fake
 * namespace (this file defines the three fs/ calls MNT makes, so the
 * linker takes them instead of fs/'s).  Revalidation of some directories
 * completes later on another thread, as fs/ may do.
 */
#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs/fs.h"
#include "mountd/mount3_prot.h"
#include "nfsd/nfsd.h"

/*
 * The fake tree:  /           1 dir
 *                 /a          2 dir (revalidates asynchronously)
 *                 /a/b        3 dir
 *                 /f          4 regular file
 *                 /err        5 dir (revalidation fails: store down)
 *                 /deep       6 dir whose entry "d" is itself
 */
static const struct {
	uint64_t parent;
	const char *name;
	uint64_t ino;
} entries[] = {
	{ 1, "a", 2 },   { 2, "b", 3 },    { 1, "f", 4 },
	{ 1, "err", 5 }, { 1, "deep", 6 }, { 6, "d", 6 },
};

static int fake_fs; /* its address is the struct fs * */
static atomic_int revalidated[8];

int fs_getattr(struct fs *fs, uint64_t ino, struct fs_attr *out)
{
	CU_ASSERT(fs == (struct fs *)&fake_fs);
	if (ino < 1 || ino > 6)
		return -ESTALE;
	memset(out, 0, sizeof(*out));
	out->ino = ino;
	out->gen = (uint32_t)(ino * 11);
	out->type = ino == 4 ? FS_REG : FS_DIR;
	return 0;
}

/* nfsd.c's write verifier asks; no WRITE runs here. */
uint64_t fs_write_epoch(struct fs *fs)
{
	(void)fs;
	return 0;
}

int fs_lookup(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
	      const char *name, uint64_t *ino, struct fs_attr *attr)
{
	/* The caller's AUTH_SYS identity reaches the namespace. */
	CU_ASSERT(ctx->uid == 1000 && ctx->gid == 100);
	for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
		if (entries[i].parent == dir &&
		    !strcmp(entries[i].name, name)) {
			*ino = entries[i].ino;
			return fs_getattr(fs, *ino, attr);
		}
	return -ENOENT;
}

struct later {
	fs_done_fn done;
	void *arg;
};

static void *later_run(void *p)
{
	struct later l = *(struct later *)p;

	free(p);
	usleep(2000);
	l.done(l.arg, 0);
	return NULL;
}

void fs_revalidate(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
		   bool force, fs_done_fn done, void *arg)
{
	struct later *l;
	pthread_t t;

	(void)ctx;
	CU_ASSERT(fs == (struct fs *)&fake_fs);
	CU_ASSERT(!force);
	atomic_fetch_add(&revalidated[dir], 1);
	if (dir == 5) {
		done(arg, -EAGAIN);
		return;
	}
	if (dir != 2) {
		done(arg, 0);
		return;
	}
	l = malloc(sizeof(*l));
	CU_ASSERT_FATAL(l != NULL);
	l->done = done;
	l->arg = arg;
	CU_ASSERT_FATAL(pthread_create(&t, NULL, later_run, l) == 0);
	pthread_detach(t);
}

/* xdr_void() takes no arguments in libtirpc: a cast to xdrproc_t warns. */
static bool_t xdr_nothing(XDR *x, void *p)
{
	(void)x;
	(void)p;
	return TRUE;
}

static struct nfsd n;
static uint32_t export_id; /* of the one export, /mapfs */
static struct rpc_program progs[1];
static struct rpc_server *srv;
static struct sockaddr_in addr;
static const struct timeval tmo = { 10, 0 };

/* A client speaking AUTH_SYS as machine (or AUTH_NONE if NULL). */
static CLIENT *client(const char *machine)
{
	struct sockaddr_in sin = addr;
	int sock = RPC_ANYSOCK;
	CLIENT *cl = clnttcp_create(&sin, MOUNT_PROGRAM, MOUNT_V3, &sock, 0, 0);

	CU_ASSERT_FATAL(cl != NULL);
	if (machine) {
		gid_t gids[2] = { 100, 200 };

		auth_destroy(cl->cl_auth);
		cl->cl_auth =
			authunix_create((char *)machine, 1000, 100, 2, gids);
		CU_ASSERT_FATAL(cl->cl_auth != NULL);
	}
	return cl;
}

static void client_free(CLIENT *cl)
{
	auth_destroy(cl->cl_auth);
	clnt_destroy(cl);
}

/* MNT path; on MNT3_OK checks and unpacks the handle. */
static mountstat3 mnt(CLIENT *cl, const char *path, uint64_t *ino,
		      uint32_t *gen)
{
	mountres3 res;
	mnt3_dirpath p = (char *)path;
	mountstat3 st;

	memset(&res, 0, sizeof(res));
	CU_ASSERT_FATAL(clnt_call(cl, MOUNTPROC3_MNT,
				  (xdrproc_t)xdr_mnt3_dirpath, (char *)&p,
				  (xdrproc_t)xdr_mountres3, (char *)&res,
				  tmo) == RPC_SUCCESS);
	st = res.fhs_status;
	if (st == MNT3_OK) {
		mountres3_ok *ok = &res.mountres3_u.mountinfo;
		uint32_t exp = 0;

		CU_ASSERT(ok->fhandle.fhandle3_len == HANDLE_LEN);
		CU_ASSERT(handle_decode(&n.key, ok->fhandle.fhandle3_val,
					ok->fhandle.fhandle3_len, &exp, ino,
					gen) == 0);
		CU_ASSERT(exp == export_id);
		/* AUTH_SYS only: NFS does not take AUTH_NONE. */
		CU_ASSERT(ok->auth_flavors.auth_flavors_len == 1);
		CU_ASSERT(ok->auth_flavors.auth_flavors_len >= 1 &&
			  ok->auth_flavors.auth_flavors_val[0] == AUTH_SYS);
	}
	xdr_free((xdrproc_t)xdr_mountres3, (char *)&res);
	return st;
}

static void call_void(CLIENT *cl, u_long proc, const char *path)
{
	mnt3_dirpath p = (char *)path;

	CU_ASSERT(clnt_call(cl, proc,
			    path ? (xdrproc_t)xdr_mnt3_dirpath
				 : (xdrproc_t)xdr_nothing,
			    path ? (char *)&p : NULL, (xdrproc_t)xdr_nothing,
			    NULL, tmo) == RPC_SUCCESS);
}

static int line_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* DUMP as "host:dir" lines sorted into out; returns the entry count. */
static int dump(CLIENT *cl, char *out, size_t cap)
{
	mountlist list = NULL, m;
	char *lines[16];
	int count = 0;

	CU_ASSERT_FATAL(clnt_call(cl, MOUNTPROC3_DUMP, (xdrproc_t)xdr_nothing,
				  NULL, (xdrproc_t)xdr_mountlist, (char *)&list,
				  tmo) == RPC_SUCCESS);
	for (m = list; m && count < 16; m = m->ml_next) {
		if (asprintf(&lines[count], "%s:%s", m->ml_hostname,
			     m->ml_directory) < 0)
			break;
		count++;
	}
	qsort(lines, (size_t)count, sizeof(lines[0]), line_cmp);
	out[0] = '\0';
	for (int i = 0; i < count; i++) {
		snprintf(out + strlen(out), cap - strlen(out), "%s%s",
			 i ? " " : "", lines[i]);
		free(lines[i]);
	}
	xdr_free((xdrproc_t)xdr_mountlist, (char *)&list);
	return count;
}

static int suite_init(void)
{
	struct rpc_config cfg = { .nloops = 2,
				  .max_record = 1 << 20,
				  .max_inflight = 16 };
	struct sockaddr_in any = { .sin_family = AF_INET };
	struct sockaddr_storage bound;
	struct exports *t;
	char err[256];

	for (int i = 0; i < 16; i++)
		n.key.k[i] = (uint8_t)(i * 13);
	n.fs = (struct fs *)&fake_fs;
	n.nloops = cfg.nloops;
	if (nfsd_init(&n))
		return -1;
	/* A trailing slash is the same base; this host, as without a file. */
	if (exports_localhost("/mapfs/", &t) ||
	    exports_set_ids(t, &n.key, err, sizeof(err)))
		return -1;
	export_id = t->entries[0].id;
	nfsd_exports_set(&n, t);
	progs[0] = mountd_program(&n);
	any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (rpc_server_new(&cfg, &srv) ||
	    rpc_server_listen(srv, (struct sockaddr *)&any, sizeof(any), progs,
			      1, &bound) ||
	    rpc_server_start(srv))
		return -1;
	memcpy(&addr, &bound, sizeof(addr));
	return 0;
}

static int suite_fini(void)
{
	rpc_server_stop(srv, 1000);
	rpc_server_free(srv);
	nfsd_fini(&n);
	return 0;
}

static void test_null_and_auth(void)
{
	CLIENT *none = client(NULL);
	mountres3 res;
	mnt3_dirpath p = "/mapfs";

	CU_ASSERT(clnt_call(none, MOUNTPROC3_NULL, (xdrproc_t)xdr_nothing, NULL,
			    (xdrproc_t)xdr_nothing, NULL, tmo) == RPC_SUCCESS);
	/* MNT wants AUTH_SYS. */
	memset(&res, 0, sizeof(res));
	CU_ASSERT(clnt_call(none, MOUNTPROC3_MNT, (xdrproc_t)xdr_mnt3_dirpath,
			    (char *)&p, (xdrproc_t)xdr_mountres3, (char *)&res,
			    tmo) == RPC_AUTHERROR);
	client_free(none);
}

static void test_mnt_root(void)
{
	CLIENT *cl = client("client-a");
	uint64_t ino = 0;
	uint32_t gen = 0;

	CU_ASSERT(mnt(cl, "/mapfs", &ino, &gen) == MNT3_OK);
	CU_ASSERT(ino == FS_ROOT_INO && gen == 11);
	ino = gen = 0;
	CU_ASSERT(mnt(cl, "/mapfs/", &ino, &gen) == MNT3_OK);
	CU_ASSERT(ino == FS_ROOT_INO && gen == 11);
	ino = gen = 0;
	CU_ASSERT(mnt(cl, "//mapfs/./", &ino, &gen) == MNT3_OK);
	CU_ASSERT(ino == FS_ROOT_INO && gen == 11);
	client_free(cl);
}

static void test_mnt_below(void)
{
	CLIENT *cl = client("client-a");
	uint64_t ino = 0;
	uint32_t gen = 0;
	int root0 = atomic_load(&revalidated[1]);
	int a0 = atomic_load(&revalidated[2]);

	/* Through /a, whose revalidation completes on another thread. */
	CU_ASSERT(mnt(cl, "/mapfs/a/b", &ino, &gen) == MNT3_OK);
	CU_ASSERT(ino == 3 && gen == 33);
	CU_ASSERT(atomic_load(&revalidated[1]) == root0 + 1);
	CU_ASSERT(atomic_load(&revalidated[2]) == a0 + 1);
	ino = 0;
	CU_ASSERT(mnt(cl, "/mapfs//a/./b/../b/", &ino, &gen) == MNT3_OK);
	CU_ASSERT(ino == 3);
	ino = 0;
	CU_ASSERT(mnt(cl, "/mapfs/a", &ino, &gen) == MNT3_OK);
	CU_ASSERT(ino == 2 && gen == 22);
	client_free(cl);
}

static void test_mnt_deep(void)
{
	CLIENT *cl = client("client-a");
	char path[MNTPATHLEN + 1] = "/mapfs/deep";
	uint64_t ino = 0;
	uint32_t gen = 0;
	int before = atomic_load(&revalidated[6]);

	/* 500 lookups, every revalidation inline. */
	while (strlen(path) + 2 <= MNTPATHLEN && strlen(path) < 11 + 2 * 500)
		strcat(path, "/d");
	CU_ASSERT(mnt(cl, path, &ino, &gen) == MNT3_OK);
	CU_ASSERT(ino == 6 && gen == 66);
	CU_ASSERT(atomic_load(&revalidated[6]) - before == 500);
	client_free(cl);
}

static void test_mnt_errors(void)
{
	CLIENT *cl = client("client-e");
	char longname[8 + FS_NAME_MAX + 2];
	uint64_t ino;
	uint32_t gen;

	CU_ASSERT(mnt(cl, "/mapfs/nope", &ino, &gen) == MNT3ERR_NOENT);
	CU_ASSERT(mnt(cl, "/mapfs/a/nope/b", &ino, &gen) == MNT3ERR_NOENT);
	CU_ASSERT(mnt(cl, "/mapfs/f", &ino, &gen) == MNT3ERR_NOTDIR);
	CU_ASSERT(mnt(cl, "/mapfs/f/x", &ino, &gen) == MNT3ERR_NOTDIR);
	/* Outside the export, however it is spelled. */
	CU_ASSERT(mnt(cl, "/other", &ino, &gen) == MNT3ERR_NOENT);
	CU_ASSERT(mnt(cl, "/mapfsx", &ino, &gen) == MNT3ERR_NOENT);
	CU_ASSERT(mnt(cl, "/mapfs/..", &ino, &gen) == MNT3ERR_NOENT);
	CU_ASSERT(mnt(cl, "/mapfs/a/../../etc", &ino, &gen) == MNT3ERR_NOENT);
	CU_ASSERT(mnt(cl, "/", &ino, &gen) == MNT3ERR_NOENT);
	CU_ASSERT(mnt(cl, "mapfs", &ino, &gen) == MNT3ERR_NOENT);
	CU_ASSERT(mnt(cl, "", &ino, &gen) == MNT3ERR_NOENT);
	/* A component longer than a name may be. */
	snprintf(longname, sizeof(longname), "/mapfs/%0*d", FS_NAME_MAX + 1, 0);
	CU_ASSERT(mnt(cl, longname, &ino, &gen) == MNT3ERR_NAMETOOLONG);
	/* The store is down while revalidating /err: MOUNT has no JUKEBOX. */
	CU_ASSERT(mnt(cl, "/mapfs/err/x", &ino, &gen) == MNT3ERR_IO);
	client_free(cl);
}

static void test_dump_umnt(void)
{
	CLIENT *a = client("client-a"), *b = client("client-b");
	char list[1024];
	uint64_t ino;
	uint32_t gen;

	/* client-a mounted /mapfs, /mapfs/a/b, /mapfs/a, /mapfs/deep/d...:
	 * start from a known list. */
	call_void(a, MOUNTPROC3_UMNTALL, NULL);
	CU_ASSERT(dump(a, list, sizeof(list)) == 0);
	CU_ASSERT(mnt(a, "/mapfs", &ino, &gen) == MNT3_OK);
	CU_ASSERT(mnt(a, "/mapfs/", &ino, &gen) == MNT3_OK); /* same entry */
	CU_ASSERT(mnt(a, "/mapfs/a/b", &ino, &gen) == MNT3_OK);
	CU_ASSERT(mnt(b, "/mapfs", &ino, &gen) == MNT3_OK);
	CU_ASSERT(mnt(b, "/mapfs/nope", &ino, &gen) == MNT3ERR_NOENT);
	CU_ASSERT(dump(a, list, sizeof(list)) == 3);
	CU_ASSERT_STRING_EQUAL(list, "client-a:/mapfs client-a:/mapfs/a/b "
				     "client-b:/mapfs");

	/* UMNT names the path as MNT did, not byte for byte. */
	call_void(a, MOUNTPROC3_UMNT, "/mapfs/a/./b/");
	CU_ASSERT(dump(a, list, sizeof(list)) == 2);
	CU_ASSERT_STRING_EQUAL(list, "client-a:/mapfs client-b:/mapfs");
	/* Unmounting what was never mounted changes nothing. */
	call_void(a, MOUNTPROC3_UMNT, "/mapfs/a");
	call_void(a, MOUNTPROC3_UMNT, "relative");
	CU_ASSERT(dump(a, list, sizeof(list)) == 2);

	CU_ASSERT(mnt(a, "/mapfs/a", &ino, &gen) == MNT3_OK);
	call_void(a, MOUNTPROC3_UMNTALL, NULL);
	CU_ASSERT(dump(b, list, sizeof(list)) == 1);
	CU_ASSERT_STRING_EQUAL(list, "client-b:/mapfs");
	call_void(b, MOUNTPROC3_UMNTALL, NULL);
	CU_ASSERT(dump(b, list, sizeof(list)) == 0);
	client_free(a);
	client_free(b);
}

static void test_export(void)
{
	CLIENT *none = client(NULL);
	mnt3_exports ex = NULL;

	/* showmount -e works without credentials. */
	CU_ASSERT_FATAL(clnt_call(none, MOUNTPROC3_EXPORT,
				  (xdrproc_t)xdr_nothing, NULL,
				  (xdrproc_t)xdr_mnt3_exports, (char *)&ex,
				  tmo) == RPC_SUCCESS);
	CU_ASSERT_FATAL(ex != NULL);
	CU_ASSERT_STRING_EQUAL(ex->ex_dir, "/mapfs");
	/* The localhost table: its two clients, in line order. */
	CU_ASSERT_FATAL(ex->ex_groups != NULL);
	CU_ASSERT_STRING_EQUAL(ex->ex_groups->gr_name, "127.0.0.1");
	CU_ASSERT_FATAL(ex->ex_groups->gr_next != NULL);
	CU_ASSERT_STRING_EQUAL(ex->ex_groups->gr_next->gr_name, "::1");
	CU_ASSERT(ex->ex_groups->gr_next->gr_next == NULL);
	CU_ASSERT(ex->ex_next == NULL);
	xdr_free((xdrproc_t)xdr_mnt3_exports, (char *)&ex);
	client_free(none);
}

int main(void)
{
	CU_initialize_registry();
	CU_pSuite s = CU_add_suite("mountd", suite_init, suite_fini);
	CU_add_test(s, "NULL, and MNT needs AUTH_SYS", test_null_and_auth);
	CU_add_test(s, "MNT of the export", test_mnt_root);
	CU_add_test(s, "MNT below the export", test_mnt_below);
	CU_add_test(s, "MNT of a 500-component path", test_mnt_deep);
	CU_add_test(s, "MNT errors", test_mnt_errors);
	CU_add_test(s, "DUMP, UMNT, UMNTALL", test_dump_umnt);
	CU_add_test(s, "EXPORT", test_export);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed =
		CU_get_number_of_failures() + CU_get_number_of_suites_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
