/*
 * End-to-end tests of exports and permissions (issue 6): a gateway with
 * an exports file, driven from 127.0.0.1, 127.0.0.2 and 127.0.0.3, from
 * privileged and unprivileged ports, as root and as uid 1000.
 *
 * The table (EXPORTS_V1): 127.0.0.1 is trusted everywhere but /sq; .2
 * may use /mapfs as a squashed root from any port; .3 nothing.
 */
#include "harness.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXPORTS_V1                                                     \
	"/mapfs 127.0.0.1(rw,no_root_squash) 127.0.0.2(rw,insecure)\n" \
	"/mapfs/ro 127.0.0.1(ro,no_root_squash)\n"                     \
	"/mapfs/sub 127.0.0.1(rw,no_root_squash)\n"                    \
	"/mapfs/sq 127.0.0.1(rw,all_squash,anonuid=1234,anongid=4321)\n"

/* V1 with /mapfs/ro made rw (the SIGHUP test). */
#define EXPORTS_V2                                                     \
	"/mapfs 127.0.0.1(rw,no_root_squash) 127.0.0.2(rw,insecure)\n" \
	"/mapfs/ro 127.0.0.1(rw,no_root_squash)\n"                     \
	"/mapfs/sub 127.0.0.1(rw,no_root_squash)\n"                    \
	"/mapfs/sq 127.0.0.1(rw,all_squash,anonuid=1234,anongid=4321)\n"

static struct e2e_gw gw;
static char dir[64], exports_path[128];
static const char *args[3];
static struct e2e_rpc *nfs1; /* 127.0.0.1, privileged port, root */
static nfs_fh3 root1, ro_dir, ro_file, sub_dir, sub_child, sq_dir, secret,
	locked, open_dir;

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f) ? -1 : 0;
}

/* MNT path from a connection of src:src_port: the status, *fh on OK. */
static int mnt_from(const char *src, int src_port, const char *path,
		    struct e2e_rpc *keep, nfs_fh3 *fh)
{
	struct e2e_rpc *m = e2e_rpc_open_from(src, src_port, gw.mount_port,
					      MOUNT_PROGRAM, MOUNT_V3);
	mountres3 res;
	int st;

	E2E_REQUIRE(m != NULL, "mount connection from %s", src);
	E2E_RPC(m, e2e_mnt3_mnt(m, path, &res));
	st = res.fhs_status;
	if (st == MNT3_OK && fh && keep) {
		nfs_fh3 h;

		h.data.data_len =
			res.mountres3_u.mountinfo.fhandle.fhandle3_len;
		h.data.data_val =
			res.mountres3_u.mountinfo.fhandle.fhandle3_val;
		*fh = e2e_fh_dup(keep, &h);
	}
	e2e_rpc_close(m);
	return st;
}

static nfs_fh3 lookup(struct e2e_rpc *r, const nfs_fh3 *d, const char *name)
{
	LOOKUP3res res;

	E2E_RPC(r, e2e_nfs3_lookup(r, d, name, &res));
	E2E_REQUIRE(res.status == NFS3_OK, "LOOKUP %s: %s", name,
		    e2e_nfsstat(res.status));
	return e2e_fh_dup(r, &res.LOOKUP3res_u.resok.object);
}

static nfs_fh3 make_dir(struct e2e_rpc *r, const nfs_fh3 *d, const char *name,
			uint32_t mode)
{
	MKDIR3args a = { .where = { .dir = *d, .name = (char *)name },
			 .attributes = e2e_sattr_mode(mode) };
	MKDIR3res res;

	E2E_RPC(r, e2e_nfs3_mkdir(r, &a, &res));
	E2E_REQUIRE(res.status == NFS3_OK &&
			    res.MKDIR3res_u.resok.obj.handle_follows,
		    "MKDIR %s: %s", name, e2e_nfsstat(res.status));
	return e2e_fh_dup(r, &res.MKDIR3res_u.resok.obj.post_op_fh3_u.handle);
}

/* CREATE name in d: the status; on OK the handle and owner. */
static int create(struct e2e_rpc *r, const nfs_fh3 *d, const char *name,
		  uint32_t mode, nfs_fh3 *fh, uint32_t *uid, uint32_t *gid)
{
	CREATE3args a = { .where = { .dir = *d, .name = (char *)name } };
	CREATE3res res;

	a.how.mode = GUARDED;
	a.how.createhow3_u.obj_attributes = e2e_sattr_mode(mode);
	E2E_RPC(r, e2e_nfs3_create(r, &a, &res));
	if (res.status != NFS3_OK) {
		/* wcc of the directory on failure too (RFC 1813 3.3.8). */
		E2E_CHECK(res.CREATE3res_u.resfail.dir_wcc.after
				  .attributes_follow,
			  "CREATE %s failed without dir_wcc", name);
		return res.status;
	}
	if (fh) {
		E2E_REQUIRE(res.CREATE3res_u.resok.obj.handle_follows,
			    "CREATE %s: no handle", name);
		*fh = e2e_fh_dup(
			r, &res.CREATE3res_u.resok.obj.post_op_fh3_u.handle);
	}
	if (uid || gid) {
		post_op_attr *pa = &res.CREATE3res_u.resok.obj_attributes;

		E2E_REQUIRE(pa->attributes_follow, "CREATE %s: no attrs", name);
		if (uid)
			*uid = pa->post_op_attr_u.attributes.uid;
		if (gid)
			*gid = pa->post_op_attr_u.attributes.gid;
	}
	return NFS3_OK;
}

static int write_at(struct e2e_rpc *r, const nfs_fh3 *fh, const char *data)
{
	WRITE3res res;

	E2E_RPC(r, e2e_nfs3_write(r, fh, 0, data, (uint32_t)strlen(data),
				  FILE_SYNC, &res));
	if (res.status != NFS3_OK)
		E2E_CHECK(res.WRITE3res_u.resfail.file_wcc.after
				  .attributes_follow,
			  "WRITE failed without file_wcc");
	return res.status;
}

static int getattr(struct e2e_rpc *r, const nfs_fh3 *fh, fattr3 *out)
{
	GETATTR3res res;

	E2E_RPC(r, e2e_nfs3_getattr(r, fh, &res));
	if (res.status == NFS3_OK && out)
		*out = res.GETATTR3res_u.resok.obj_attributes;
	return res.status;
}

static int setattr(struct e2e_rpc *r, const nfs_fh3 *fh, sattr3 s)
{
	SETATTR3args a = { .object = *fh, .new_attributes = s };
	SETATTR3res res;

	E2E_RPC(r, e2e_nfs3_setattr(r, &a, &res));
	return res.status;
}

static sattr3 sattr_uid(uint32_t uid)
{
	sattr3 s = e2e_sattr_none();

	s.uid.set_it = TRUE;
	s.uid.set_uid3_u.uid = uid;
	return s;
}

/*
 * The tree, made by trusted root on 127.0.0.1:
 *   /ro (0755) with file "file" = "hello";  /sub (0755) with "child";
 *   /sq (0777);  /secret (0600, "top secret");  /locked (0755);
 *   /open (0777).
 */
static int suite_init(void)
{
	snprintf(dir, sizeof(dir), "/tmp/mapfs-e2e-exp-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(exports_path, sizeof(exports_path), "%s/exports", dir);
	if (write_file(exports_path, EXPORTS_V1))
		return -1;
	args[0] = "--exports";
	args[1] = exports_path;
	if (e2e_gw_start_args(&gw, 2, args))
		return -1;
	nfs1 = e2e_rpc_open(gw.nfs_port, NFS_PROGRAM, NFS_V3);
	if (!nfs1 || e2e_root_fh(nfs1, &gw, &root1))
		return -1;
	return 0;
}

static int suite_fini(void)
{
	e2e_rpc_close(nfs1);
	e2e_gw_cleanup(&gw);
	unlink(exports_path);
	rmdir(dir);
	return 0;
}

static void test_setup_tree(void)
{
	nfs_fh3 f;

	ro_dir = make_dir(nfs1, &root1, "ro", 0755);
	E2E_REQUIRE(create(nfs1, &ro_dir, "file", 0644, &f, NULL, NULL) ==
			    NFS3_OK,
		    "CREATE ro/file");
	E2E_REQUIRE(write_at(nfs1, &f, "hello") == NFS3_OK, "WRITE ro/file");
	sub_dir = make_dir(nfs1, &root1, "sub", 0755);
	sub_child = make_dir(nfs1, &sub_dir, "child", 0755);
	sq_dir = make_dir(nfs1, &root1, "sq", 0777);
	E2E_REQUIRE(create(nfs1, &root1, "secret", 0600, &secret, NULL, NULL) ==
			    NFS3_OK,
		    "CREATE secret");
	E2E_REQUIRE(write_at(nfs1, &secret, "top secret") == NFS3_OK,
		    "WRITE secret");
	locked = make_dir(nfs1, &root1, "locked", 0755);
	open_dir = make_dir(nfs1, &root1, "open", 0777);
}

static void test_export_list(void)
{
	struct e2e_rpc *m =
		e2e_rpc_open(gw.mount_port, MOUNT_PROGRAM, MOUNT_V3);
	const char *want[] = { "/mapfs:127.0.0.1,127.0.0.2",
			       "/mapfs/ro:127.0.0.1", "/mapfs/sub:127.0.0.1",
			       "/mapfs/sq:127.0.0.1" };
	exports list;
	int i = 0;

	E2E_REQUIRE(m != NULL, "mount connection");
	E2E_RPC(m, e2e_mnt3_export(m, &list));
	for (exportnode *e = list; e; e = e->ex_next, i++) {
		char line[256];

		snprintf(line, sizeof(line), "%s:", e->ex_dir);
		for (groupnode *g = e->ex_groups; g; g = g->gr_next)
			snprintf(line + strlen(line),
				 sizeof(line) - strlen(line), "%s%s",
				 g == e->ex_groups ? "" : ",", g->gr_name);
		E2E_CHECK(i < 4 && !strcmp(line, want[i]),
			  "EXPORT entry %d: got '%s', want '%s'", i, line,
			  i < 4 ? want[i] : "(none)");
	}
	E2E_CHECK(i == 4, "EXPORT: %d entries, want 4", i);
	e2e_rpc_close(m);
}

/* 127.0.0.3 is in no rule: MNT is ACCES, NFS with a good handle too. */
static void test_disallowed_client(void)
{
	struct e2e_rpc *r;

	E2E_STATUS("MNT /mapfs from 127.0.0.3",
		   mnt_from("127.0.0.3", -1, "/mapfs", NULL, NULL),
		   MNT3ERR_ACCES);
	E2E_STATUS("MNT /mapfs/ro from 127.0.0.3",
		   mnt_from("127.0.0.3", -1, "/mapfs/ro", NULL, NULL),
		   MNT3ERR_ACCES);
	/* What is not exported at all is NOENT to everyone. */
	E2E_STATUS("MNT /etc from 127.0.0.1",
		   mnt_from("127.0.0.1", -1, "/etc", NULL, NULL),
		   MNT3ERR_NOENT);
	r = e2e_rpc_open_from("127.0.0.3", -1, gw.nfs_port, NFS_PROGRAM,
			      NFS_V3);
	E2E_REQUIRE(r != NULL, "NFS connection from 127.0.0.3");
	E2E_STATUS("GETATTR from 127.0.0.3", getattr(r, &root1, NULL),
		   NFS3ERR_ACCES);
	E2E_STATUS("READ secret from 127.0.0.3", getattr(r, &secret, NULL),
		   NFS3ERR_ACCES);
	e2e_rpc_close(r);
	/* The same handle from the allowed address works. */
	E2E_STATUS("GETATTR from 127.0.0.1", getattr(nfs1, &root1, NULL),
		   NFS3_OK);
}

/* secure (the default): an unprivileged source port is refused. */
static void test_insecure_port(void)
{
	struct e2e_rpc *r;

	E2E_STATUS("MNT /mapfs from 127.0.0.1, port >= 1024",
		   mnt_from("127.0.0.1", 0, "/mapfs", NULL, NULL),
		   MNT3ERR_ACCES);
	r = e2e_rpc_open_from("127.0.0.1", 0, gw.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(r != NULL, "NFS connection from an unprivileged port");
	/* knfsd's answer to an insecure port is NFS3ERR_PERM. */
	E2E_STATUS("GETATTR from port >= 1024", getattr(r, &root1, NULL),
		   NFS3ERR_PERM);
	e2e_rpc_close(r);
	/* 127.0.0.2's rule is insecure. */
	r = e2e_rpc_open_from("127.0.0.2", 0, gw.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(r != NULL, "NFS connection from 127.0.0.2");
	E2E_STATUS("GETATTR from 127.0.0.2 (insecure rule)",
		   getattr(r, &root1, NULL), NFS3_OK);
	e2e_rpc_close(r);
}

static void test_root_squash(void)
{
	struct e2e_rpc *r = e2e_rpc_open_from("127.0.0.2", 0, gw.nfs_port,
					      NFS_PROGRAM, NFS_V3);
	nfs_fh3 root2, sq2, f;
	uint32_t uid = 0, gid = 0;

	E2E_REQUIRE(r != NULL, "NFS connection from 127.0.0.2");
	E2E_REQUIRE(mnt_from("127.0.0.2", 0, "/mapfs", r, &root2) == MNT3_OK,
		    "MNT /mapfs from 127.0.0.2");
	sq2 = lookup(r, &root2, "sq");
	/* root (uid 0, gid 0) from .2 acts as 65534 (root_squash). */
	E2E_STATUS("CREATE as squashed root",
		   create(r, &sq2, "by-squashed-root", 0644, &f, &uid, &gid),
		   NFS3_OK);
	E2E_CHECK(uid == 65534 && gid == 65534,
		  "squashed root's file is %u:%u, want 65534:65534", uid, gid);
	/* Only an unsquashed root may chown. */
	E2E_STATUS("chown by squashed root", setattr(r, &f, sattr_uid(0)),
		   NFS3ERR_PERM);
	E2E_STATUS("CREATE in 0755 root dir as squashed root",
		   create(r, &locked, "nope", 0644, NULL, NULL, NULL),
		   NFS3ERR_ACCES);
	E2E_STATUS("GETATTR as squashed root", getattr(r, &secret, NULL),
		   NFS3_OK);
	e2e_rpc_close(r);

	/* all_squash on /mapfs/sq: root and uid 1000 become 1234:4321. */
	r = e2e_rpc_open(gw.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(r != NULL, "NFS connection");
	E2E_REQUIRE(mnt_from("127.0.0.1", -1, "/mapfs/sq", r, &sq2) == MNT3_OK,
		    "MNT /mapfs/sq");
	E2E_STATUS("CREATE as root under all_squash",
		   create(r, &sq2, "by-root", 0644, NULL, &uid, &gid), NFS3_OK);
	E2E_CHECK(uid == 1234 && gid == 4321, "got %u:%u, want 1234:4321", uid,
		  gid);
	rpc_set_uid(e2e_rpc_ctx(r), 1000);
	rpc_set_gid(e2e_rpc_ctx(r), 1000);
	E2E_STATUS("CREATE as 1000 under all_squash",
		   create(r, &sq2, "by-1000", 0644, NULL, &uid, &gid), NFS3_OK);
	E2E_CHECK(uid == 1234 && gid == 4321, "got %u:%u, want 1234:4321", uid,
		  gid);
	e2e_rpc_close(r);
}

static void test_ro_export(void)
{
	nfs_fh3 ro, f;
	READ3res rd;
	ACCESS3res ac;
	RENAME3res rn;
	REMOVE3res rm;
	MKDIR3args ma;
	MKDIR3res mr;

	E2E_REQUIRE(mnt_from("127.0.0.1", -1, "/mapfs/ro", nfs1, &ro) ==
			    MNT3_OK,
		    "MNT /mapfs/ro");
	f = lookup(nfs1, &ro, "file");
	ro_file = f;
	E2E_STATUS("CREATE on ro",
		   create(nfs1, &ro, "new", 0644, NULL, NULL, NULL),
		   NFS3ERR_ROFS);
	ma = (MKDIR3args){ .where = { .dir = ro, .name = "d" },
			   .attributes = e2e_sattr_mode(0755) };
	E2E_RPC(nfs1, e2e_nfs3_mkdir(nfs1, &ma, &mr));
	E2E_STATUS("MKDIR on ro", mr.status, NFS3ERR_ROFS);
	E2E_STATUS("WRITE on ro", write_at(nfs1, &f, "x"), NFS3ERR_ROFS);
	E2E_STATUS("SETATTR on ro", setattr(nfs1, &f, e2e_sattr_mode(0600)),
		   NFS3ERR_ROFS);
	E2E_RPC(nfs1, e2e_nfs3_remove(nfs1, &ro, "file", &rm));
	E2E_STATUS("REMOVE on ro", rm.status, NFS3ERR_ROFS);
	E2E_CHECK(rm.REMOVE3res_u.resfail.dir_wcc.after.attributes_follow,
		  "REMOVE ROFS without dir_wcc");
	E2E_RPC(nfs1, e2e_nfs3_rename(nfs1, &ro, "file", &ro, "file2", &rn));
	E2E_STATUS("RENAME on ro", rn.status, NFS3ERR_ROFS);
	/* Reading is fine; ACCESS tells the truth about writing. */
	E2E_RPC(nfs1, e2e_nfs3_read(nfs1, &f, 0, 100, &rd));
	E2E_STATUS("READ on ro", rd.status, NFS3_OK);
	E2E_CHECK(
		rd.status == NFS3_OK &&
			rd.READ3res_u.resok.data.data_len == 5 &&
			!memcmp(rd.READ3res_u.resok.data.data_val, "hello", 5),
		"READ on ro: wrong data");
	E2E_RPC(nfs1,
		e2e_nfs3_access(nfs1, &f,
				ACCESS3_READ | ACCESS3_MODIFY | ACCESS3_EXTEND,
				&ac));
	E2E_STATUS("ACCESS on ro", ac.status, NFS3_OK);
	E2E_CHECK(ac.ACCESS3res_u.resok.access == ACCESS3_READ,
		  "ACCESS on ro: granted 0x%x, want READ only",
		  ac.ACCESS3res_u.resok.access);
	/* The same file through the rw parent export is writable. */
	f = lookup(nfs1, &ro_dir, "file");
	E2E_STATUS("WRITE of the same file through /mapfs",
		   write_at(nfs1, &f, "hello"), NFS3_OK);
}

static void test_subdir_dotdot(void)
{
	nfs_fh3 sub, up, child, upup;
	READDIRPLUS3args a = { .dircount = 4096, .maxcount = 32768 };
	READDIRPLUS3res res;
	fattr3 sa;
	int seen = 0;

	E2E_REQUIRE(mnt_from("127.0.0.1", -1, "/mapfs/sub", nfs1, &sub) ==
			    MNT3_OK,
		    "MNT /mapfs/sub");
	E2E_CHECK(!e2e_fh_equal(&sub, &sub_dir),
		  "the subdirectory export's handle is the parent export's");
	up = lookup(nfs1, &sub, "..");
	E2E_CHECK(e2e_fh_equal(&up, &sub),
		  "LOOKUP .. at the export root left it");
	child = lookup(nfs1, &sub, "child");
	upup = lookup(nfs1, &child, "..");
	E2E_CHECK(e2e_fh_equal(&upup, &sub), "child/.. is not the export root");
	up = lookup(nfs1, &upup, "..");
	E2E_CHECK(e2e_fh_equal(&up, &sub), "child/../.. left the export");
	E2E_REQUIRE(getattr(nfs1, &sub, &sa) == NFS3_OK, "GETATTR sub");
	a.dir = sub;
	E2E_RPC(nfs1, e2e_nfs3_readdirplus(nfs1, &a, &res));
	E2E_STATUS("READDIRPLUS sub", res.status, NFS3_OK);
	for (entryplus3 *e = res.READDIRPLUS3res_u.resok.reply.entries; e;
	     e = e->nextentry) {
		if (strcmp(e->name, ".."))
			continue;
		seen = 1;
		E2E_CHECK(
			e->fileid == sa.fileid,
			"READDIRPLUS: .. is fileid %llu, want the root's %llu",
			(unsigned long long)e->fileid,
			(unsigned long long)sa.fileid);
		E2E_CHECK(!e->name_handle.handle_follows ||
				  e2e_fh_equal(
					  &e->name_handle.post_op_fh3_u.handle,
					  &sub),
			  "READDIRPLUS: the handle of .. is not the root's");
	}
	E2E_CHECK(seen, "READDIRPLUS listed no '..'");
	/* Through the parent export, ".." of /sub is /mapfs. */
	up = lookup(nfs1, &sub_dir, "..");
	E2E_CHECK(e2e_fh_equal(&up, &root1), "/mapfs/sub/.. via /mapfs");
}

static void test_cross_export_handle(void)
{
	struct e2e_rpc *r = e2e_rpc_open_from("127.0.0.2", 0, gw.nfs_port,
					      NFS_PROGRAM, NFS_V3);
	nfs_fh3 sub, via_parent;
	RENAME3res rn;

	E2E_REQUIRE(r != NULL, "NFS connection from 127.0.0.2");
	E2E_REQUIRE(mnt_from("127.0.0.1", -1, "/mapfs/sub", nfs1, &sub) ==
			    MNT3_OK,
		    "MNT /mapfs/sub");
	/* .2 may use /mapfs, not /mapfs/sub: the handle says which. */
	E2E_STATUS("GETATTR of /sub's handle from 127.0.0.2",
		   getattr(r, &sub, NULL), NFS3ERR_ACCES);
	E2E_STATUS("GETATTR of the same dir via /mapfs from 127.0.0.2",
		   getattr(r, &sub_dir, NULL), NFS3_OK);
	/* MNT /mapfs/sub from .2 goes through /mapfs: another handle. */
	E2E_REQUIRE(mnt_from("127.0.0.2", 0, "/mapfs/sub", r, &via_parent) ==
			    MNT3_OK,
		    "MNT /mapfs/sub from 127.0.0.2");
	E2E_CHECK(e2e_fh_equal(&via_parent, &sub_dir) &&
			  !e2e_fh_equal(&via_parent, &sub),
		  "MNT from .2 did not mint /mapfs's handle");
	e2e_rpc_close(r);
	/* Moving a directory out of a subdirectory export: XDEV. */
	E2E_RPC(nfs1,
		e2e_nfs3_rename(nfs1, &sub, "child", &root1, "moved", &rn));
	E2E_STATUS("RENAME across exports", rn.status, NFS3ERR_XDEV);
}

/* uid 1000 through the no_root_squash export: mode bits decide. */
static void test_mode_bits(void)
{
	struct e2e_rpc *r = e2e_rpc_open(gw.nfs_port, NFS_PROGRAM, NFS_V3);
	nfs_fh3 mine;
	uint32_t uid = 0;
	READ3res rd;
	ACCESS3res ac;
	REMOVE3res rm;

	E2E_REQUIRE(r != NULL, "NFS connection");
	rpc_set_uid(e2e_rpc_ctx(r), 1000);
	rpc_set_gid(e2e_rpc_ctx(r), 1000);
	E2E_RPC(r, e2e_nfs3_read(r, &secret, 0, 100, &rd));
	E2E_STATUS("READ of root's 0600 file as 1000", rd.status,
		   NFS3ERR_ACCES);
	E2E_STATUS("WRITE of root's 0600 file as 1000",
		   write_at(r, &secret, "x"), NFS3ERR_ACCES);
	E2E_RPC(r, e2e_nfs3_access(r, &secret, ACCESS3_READ | ACCESS3_MODIFY,
				   &ac));
	E2E_CHECK(ac.status == NFS3_OK && ac.ACCESS3res_u.resok.access == 0,
		  "ACCESS of 0600 root file as 1000: %s, granted 0x%x",
		  e2e_nfsstat(ac.status), ac.ACCESS3res_u.resok.access);
	E2E_STATUS("CREATE in root's 0755 dir as 1000",
		   create(r, &locked, "x", 0644, NULL, NULL, NULL),
		   NFS3ERR_ACCES);
	E2E_RPC(r, e2e_nfs3_remove(r, &root1, "secret", &rm));
	E2E_STATUS("REMOVE from root's dir as 1000", rm.status, NFS3ERR_ACCES);
	E2E_STATUS("chmod of root's file as 1000",
		   setattr(r, &secret, e2e_sattr_mode(0666)), NFS3ERR_PERM);
	/* In a 0777 dir 1000 makes its own file, may chmod, not chown. */
	E2E_STATUS("CREATE in 0777 dir as 1000",
		   create(r, &open_dir, "mine", 0644, &mine, &uid, NULL),
		   NFS3_OK);
	E2E_CHECK(uid == 1000, "1000's file is owned by %u", uid);
	E2E_STATUS("owner chmod", setattr(r, &mine, e2e_sattr_mode(0600)),
		   NFS3_OK);
	E2E_STATUS("owner chown to 0", setattr(r, &mine, sattr_uid(0)),
		   NFS3ERR_PERM);
	/* An unsquashed root may chown (mine lives in r's memory: r last). */
	E2E_STATUS("root chown", setattr(nfs1, &mine, sattr_uid(2000)),
		   NFS3_OK);
	e2e_rpc_close(r);
}

/* The mode bits (07777) GETATTR shows of fh, or 0xffffffff. */
static uint32_t mode_of(const nfs_fh3 *fh)
{
	fattr3 a;

	return getattr(nfs1, fh, &a) == NFS3_OK ? a.mode & 07777 : 0xffffffffu;
}

static int rename_as(struct e2e_rpc *r, const nfs_fh3 *fd, const char *from,
		     const nfs_fh3 *td, const char *to)
{
	RENAME3res res;

	E2E_RPC(r, e2e_nfs3_rename(r, fd, from, td, to, &res));
	return res.status;
}

static struct e2e_rpc *open_as(uint32_t uid)
{
	struct e2e_rpc *r = e2e_rpc_open(gw.nfs_port, NFS_PROGRAM, NFS_V3);

	E2E_REQUIRE(r != NULL, "NFS connection");
	rpc_set_uid(e2e_rpc_ctx(r), uid);
	rpc_set_gid(e2e_rpc_ctx(r), uid);
	return r;
}

/*
 * Who may change what on a mount many users share (issue 33), on the
 * engine this run has (LMDB, or PostgreSQL in e2e-pg): a user's WRITE
 * takes set-id away (WRITE's wcc shows it at once); a non-owner may not
 * even chown to the present owner; a sticky directory keeps others'
 * names from being renamed away or over; a directory moved to another
 * parent needs write permission on it.
 */
static void test_who_may_change(void)
{
	struct e2e_rpc *u = open_as(1000), *o = open_as(1001);
	nfs_fh3 f, box, pub;
	WRITE3res wr;

	E2E_REQUIRE(create(nfs1, &open_dir, "suid", 04777, &f, NULL, NULL) ==
			    NFS3_OK,
		    "CREATE suid");
	E2E_STATUS("chmod 04777", setattr(nfs1, &f, e2e_sattr_mode(04777)),
		   NFS3_OK);
	E2E_RPC(u, e2e_nfs3_write(u, &f, 0, "x", 1, UNSTABLE, &wr));
	E2E_STATUS("WRITE of a set-uid file by 1000", wr.status, NFS3_OK);
	E2E_CHECK(
		wr.status == NFS3_OK &&
			wr.WRITE3res_u.resok.file_wcc.after.attributes_follow &&
			(wr.WRITE3res_u.resok.file_wcc.after.post_op_attr_u
				 .attributes.mode &
			 07777) == 0777,
		"WRITE's wcc after does not show set-uid gone");
	E2E_CHECK(mode_of(&f) == 0777, "mode %o after a user's write, want 777",
		  mode_of(&f));
	/* Non-owner chown to what is there: EPERM, as on Linux. */
	E2E_STATUS("chown to the present owner by a non-owner",
		   setattr(o, &f, sattr_uid(0)), NFS3ERR_PERM);
	E2E_STATUS("chmod 06755 by root",
		   setattr(nfs1, &f, e2e_sattr_mode(06755)), NFS3_OK);
	E2E_STATUS("chown by root", setattr(nfs1, &f, sattr_uid(1000)),
		   NFS3_OK);
	E2E_CHECK(mode_of(&f) == 0755, "mode %o after chown, want 755",
		  mode_of(&f));
	/* A sticky drop box. */
	box = make_dir(nfs1, &open_dir, "box", 0777);
	E2E_STATUS("chmod 1777", setattr(nfs1, &box, e2e_sattr_mode(01777)),
		   NFS3_OK);
	pub = make_dir(nfs1, &open_dir, "pub", 0777);
	E2E_STATUS("CREATE theirs",
		   create(o, &box, "theirs", 0644, NULL, NULL, NULL), NFS3_OK);
	E2E_STATUS("CREATE mine",
		   create(u, &box, "mine", 0644, NULL, NULL, NULL), NFS3_OK);
	E2E_STATUS("RENAME another's file out of a sticky dir",
		   rename_as(u, &box, "theirs", &pub, "took"), NFS3ERR_PERM);
	E2E_STATUS("RENAME over another's file in a sticky dir",
		   rename_as(u, &box, "mine", &box, "theirs"), NFS3ERR_PERM);
	E2E_STATUS("RENAME of one's own file",
		   rename_as(o, &box, "theirs", &pub, "moved"), NFS3_OK);
	/* root's directory in 1000's sticky box: in place yes, away no. */
	E2E_STATUS("chown box to 1000", setattr(nfs1, &box, sattr_uid(1000)),
		   NFS3_OK);
	make_dir(nfs1, &box, "rootdir", 0755);
	E2E_STATUS("RENAME of root's dir to another parent",
		   rename_as(u, &box, "rootdir", &pub, "rootdir"),
		   NFS3ERR_ACCES);
	E2E_STATUS("RENAME of root's dir in place",
		   rename_as(u, &box, "rootdir", &box, "inplace"), NFS3_OK);
	e2e_rpc_close(o);
	e2e_rpc_close(u);
}

/* Wait up to 10 s for needle in the gateway's log. */
static int log_has(const char *needle)
{
	uint64_t end = e2e_now_ms() + 10000;
	char buf[65536];

	while (e2e_now_ms() < end) {
		FILE *f = fopen(gw.log, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		if (f)
			fclose(f);
		buf[n] = '\0';
		if (strstr(buf, needle))
			return 1;
		usleep(50000);
	}
	return 0;
}

static void test_sighup_reload(void)
{
	nfs_fh3 ro;
	uint64_t end;
	int st;

	E2E_REQUIRE(mnt_from("127.0.0.1", -1, "/mapfs/ro", nfs1, &ro) ==
			    MNT3_OK,
		    "MNT /mapfs/ro");
	E2E_STATUS("CREATE on ro before reload",
		   create(nfs1, &ro, "after-hup", 0644, NULL, NULL, NULL),
		   NFS3ERR_ROFS);
	E2E_REQUIRE(write_file(exports_path, EXPORTS_V2) == 0, "rewrite");
	E2E_REQUIRE(kill(gw.pid, SIGHUP) == 0, "SIGHUP");
	/* The same connection and handle, now rw. */
	end = e2e_now_ms() + 10000;
	do {
		st = create(nfs1, &ro, "after-hup", 0644, NULL, NULL, NULL);
		if (st != NFS3ERR_ROFS)
			break;
		usleep(20000);
	} while (e2e_now_ms() < end);
	E2E_STATUS("CREATE after reload to rw", st, NFS3_OK);
	E2E_STATUS("WRITE after reload to rw", write_at(nfs1, &ro_file, "hey"),
		   NFS3_OK);

	/* A broken file keeps the table that works. */
	E2E_REQUIRE(write_file(exports_path, EXPORTS_V2 "/mapfs/x *(nope)\n") ==
			    0,
		    "rewrite");
	E2E_REQUIRE(kill(gw.pid, SIGHUP) == 0, "SIGHUP");
	E2E_CHECK(log_has("exports:5: unknown option 'nope'"),
		  "the reload error is not in the log");
	E2E_CHECK(log_has("SIGHUP: keeping the exports as they were"),
		  "no 'keeping' in the log");
	E2E_CHECK(e2e_gw_alive(&gw), "the gateway died of a bad reload");
	E2E_STATUS("CREATE after a bad reload",
		   create(nfs1, &ro, "after-bad-hup", 0644, NULL, NULL, NULL),
		   NFS3_OK);
}

/* A bad file at start: exit 2, and the message names file and line. */
/*
 * Start the gateway on exports file path (NULL: no --exports) expecting
 * it to exit: its status, its stderr in err[cap].
 */
static int gw_exit_status(const char *path, char *err, size_t cap)
{
	char state[160], errf[160];
	const char *bin = getenv("MAPFS_GW");
	FILE *f;
	pid_t pid;
	int st;

	E2E_REQUIRE(bin != NULL, "MAPFS_GW");
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(errf, sizeof(errf), "%s/err", dir);
	pid = fork();
	E2E_REQUIRE(pid >= 0, "fork");
	if (pid == 0) {
		if (!freopen(errf, "w", stderr) ||
		    !freopen("/dev/null", "w", stdout))
			_exit(99);
		execl(bin, bin, "--exports", path, "--state", state,
		      "--foreground", "--no-rpcbind", "--nfs-port", "0",
		      "--mount-port", "0", "--bind", "127.0.0.1", (char *)NULL);
		_exit(98);
	}
	E2E_REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
	err[0] = '\0';
	f = fopen(errf, "r");
	if (f) {
		size_t n = fread(err, 1, cap - 1, f);

		err[n] = '\0';
		fclose(f);
	}
	unlink(errf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_bad_file_exit2(void)
{
	char bad[160], line[512];
	int st;

	snprintf(bad, sizeof(bad), "%s/bad", dir);
	E2E_REQUIRE(write_file(bad, "/mapfs *(rw)\n/mapfs/a 10.0.0.0/40\n") ==
			    0,
		    "write bad");
	st = gw_exit_status(bad, line, sizeof(line));
	E2E_CHECK(st == 2, "exit status %d, want 2", st);
	E2E_CHECK(strstr(line, bad) && strstr(line, ":2: prefix /40 too long"),
		  "stderr '%s' does not name %s:2", line, bad);
	unlink(bad);
}

/*
 * A named exports file that does not exist (a typo) stops the gateway
 * with the reason (before: it exported everything to everyone, rw and
 * no_root_squash).
 */
static void test_missing_file_exit2(void)
{
	char missing[160], line[512];
	int st;

	snprintf(missing, sizeof(missing), "%s/exprots", dir);
	st = gw_exit_status(missing, line, sizeof(line));
	E2E_CHECK(st == 2, "exit status %d, want 2", st);
	E2E_CHECK(strstr(line, missing) && strstr(line, "No such file"),
		  "stderr '%s' does not name %s", line, missing);
}

/*
 * No --exports at all: this host (127.0.0.1) only, said at start; any
 * other address is refused, MNT and NFS alike.
 */
static void test_no_file_localhost(void)
{
	struct e2e_gw lo;
	struct e2e_rpc *m, *r;
	mountres3 res;
	nfs_fh3 root;

	E2E_REQUIRE(e2e_gw_start(&lo, 1) == 0, "gateway without --exports");
	E2E_CHECK(e2e_gw_log_count(&lo, "is exported to this host only") == 1,
		  "the start does not say it serves this host only");
	m = e2e_rpc_open_from("127.0.0.2", -1, lo.mount_port, MOUNT_PROGRAM,
			      MOUNT_V3);
	E2E_REQUIRE(m != NULL, "mount connection from 127.0.0.2");
	E2E_RPC(m, e2e_mnt3_mnt(m, "/mapfs", &res));
	E2E_STATUS("MNT from 127.0.0.2", (int)res.fhs_status, MNT3ERR_ACCES);
	e2e_rpc_close(m);
	m = e2e_rpc_open(lo.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(m && e2e_root_fh(m, &lo, &root) == 0, "MNT from 127.0.0.1");
	r = e2e_rpc_open_from("127.0.0.2", -1, lo.nfs_port, NFS_PROGRAM,
			      NFS_V3);
	E2E_REQUIRE(r != NULL, "NFS connection from 127.0.0.2");
	E2E_STATUS("GETATTR from 127.0.0.2", getattr(r, &root, NULL),
		   NFS3ERR_ACCES);
	E2E_STATUS("GETATTR from 127.0.0.1", getattr(m, &root, NULL), NFS3_OK);
	e2e_rpc_close(r);
	e2e_rpc_close(m);
	E2E_CHECK(e2e_gw_stop(&lo) == 0, "stop");
	e2e_gw_cleanup(&lo);
}

/*
 * An async export (knfsd's `async`, issue 47): the start says so, ctl
 * status and the metrics' gauge list it, and a kill -9 of the gateway
 * right after its answers loses nothing (the kernel holds what is not on
 * disk yet; the window is 10 s here, so nothing was flushed): files
 * written FILE_SYNC and COMMITted, removed, renamed, all as answered.
 */
static void test_async_kill9(void)
{
	static const char *const a_args[] = { "--exports", NULL,
					      "--async-window", "10000", NULL };
	const char *argv[5];
	char path[160], data[64], name[32], to[32];
	struct e2e_gw ag;
	struct e2e_rpc *r;
	nfs_fh3 root, f;
	int i;

	snprintf(path, sizeof(path), "%s/exports.async", dir);
	E2E_REQUIRE(write_file(path, "/mapfs 127.0.0.1(rw,no_root_squash,"
				     "async)\n") == 0,
		    "exports file");
	memcpy(argv, a_args, sizeof(argv));
	argv[1] = path;
	E2E_REQUIRE(e2e_gw_start_args(&ag, 2, argv) == 0, "async gateway");
	E2E_CHECK(e2e_gw_log_count(&ag, "is async: changes, COMMITs") == 1,
		  "the start does not warn of the async export");
	r = e2e_rpc_open(ag.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(r && e2e_root_fh(r, &ag, &root) == 0, "MNT");
	for (i = 0; i < 40; i++) {
		CREATE3args ca = { .where = { .dir = root, .name = name } };
		CREATE3res cr;
		WRITE3res w;
		COMMIT3res c;

		snprintf(name, sizeof(name), "a%d", i);
		snprintf(data, sizeof(data), "async file %d", i);
		ca.how.mode = GUARDED;
		ca.how.createhow3_u.g_obj_attributes = e2e_sattr_mode(0644);
		E2E_RPC(r, e2e_nfs3_create(r, &ca, &cr));
		E2E_REQUIRE(cr.status == NFS3_OK, "CREATE %s", name);
		f = lookup(r, &root, name);
		E2E_RPC(r,
			e2e_nfs3_write(r, &f, 0, data, (uint32_t)strlen(data),
				       i % 2 ? FILE_SYNC : UNSTABLE, &w));
		E2E_REQUIRE(w.status == NFS3_OK, "WRITE %s", name);
		E2E_CHECK(i % 2 == 0 ||
				  w.WRITE3res_u.resok.committed == FILE_SYNC,
			  "a stable WRITE answered %d",
			  (int)w.WRITE3res_u.resok.committed);
		E2E_RPC(r, e2e_nfs3_commit(r, &f, 0, 0, &c));
		E2E_REQUIRE(c.status == NFS3_OK, "COMMIT %s", name);
	}
	for (i = 0; i < 10; i++) {
		REMOVE3res rm;
		RENAME3res rn;

		snprintf(name, sizeof(name), "a%d", i);
		E2E_RPC(r, e2e_nfs3_remove(r, &root, name, &rm));
		E2E_REQUIRE(rm.status == NFS3_OK, "REMOVE %s", name);
		snprintf(name, sizeof(name), "a%d", 10 + i);
		snprintf(to, sizeof(to), "b%d", 10 + i);
		E2E_RPC(r, e2e_nfs3_rename(r, &root, name, &root, to, &rn));
		E2E_REQUIRE(rn.status == NFS3_OK, "RENAME %s", name);
	}
	{
		char out[4096];

		E2E_CHECK(
			e2e_ctl(&ag, "status", out, sizeof(out)) == 0 &&
				strstr(out, "async_exports: /mapfs 127.0.0.1"),
			"ctl status does not list the async export");
	}
	e2e_rpc_close(r);
	E2E_REQUIRE(e2e_gw_kill9(&ag) == 0, "kill -9");
	E2E_REQUIRE(e2e_gw_restart(&ag) == 0, "start again");
	r = e2e_rpc_open(ag.nfs_port, NFS_PROGRAM, NFS_V3);
	E2E_REQUIRE(r && e2e_root_fh(r, &ag, &root) == 0, "MNT again");
	for (i = 0; i < 40; i++) {
		LOOKUP3res lr;
		READ3res rd;
		bool gone = i < 10, moved = i >= 10 && i < 20;

		snprintf(name, sizeof(name), moved ? "b%d" : "a%d", i);
		E2E_RPC(r, e2e_nfs3_lookup(r, &root, name, &lr));
		if (gone) {
			E2E_CHECK(lr.status == NFS3ERR_NOENT,
				  "%s back after the kill: %s", name,
				  e2e_nfsstat(lr.status));
			continue;
		}
		E2E_CHECK(lr.status == NFS3_OK, "%s lost in the kill: %s", name,
			  e2e_nfsstat(lr.status));
		if (lr.status != NFS3_OK)
			continue;
		f = e2e_fh_dup(r, &lr.LOOKUP3res_u.resok.object);
		snprintf(data, sizeof(data), "async file %d", i);
		E2E_RPC(r, e2e_nfs3_read(r, &f, 0, 64, &rd));
		E2E_CHECK(rd.status == NFS3_OK &&
				  rd.READ3res_u.resok.data.data_len ==
					  strlen(data) &&
				  !memcmp(rd.READ3res_u.resok.data.data_val,
					  data, strlen(data)),
			  "%s read back wrong after the kill", name);
	}
	e2e_rpc_close(r);
	E2E_CHECK(e2e_gw_stop(&ag) == 0, "stop");
	e2e_gw_cleanup(&ag);
	unlink(path);
}

int main(void)
{
	CU_initialize_registry();
	CU_pSuite s = CU_add_suite("exports", suite_init, suite_fini);
	CU_add_test(s, "the tree", test_setup_tree);
	CU_add_test(s, "EXPORT lists the table", test_export_list);
	CU_add_test(s, "async: answered at once, nothing lost in a kill -9",
		    test_async_kill9);
	CU_add_test(s, "a client no rule admits", test_disallowed_client);
	CU_add_test(s, "secure: unprivileged ports", test_insecure_port);
	CU_add_test(s, "root_squash and all_squash", test_root_squash);
	CU_add_test(s, "a ro export refuses writes", test_ro_export);
	CU_add_test(s, "'..' stays in a subdirectory export",
		    test_subdir_dotdot);
	CU_add_test(s, "a handle of one export through another",
		    test_cross_export_handle);
	CU_add_test(s, "mode bits for uid 1000", test_mode_bits);
	CU_add_test(s, "who may change what", test_who_may_change);
	CU_add_test(s, "SIGHUP: ro -> rw on a live connection",
		    test_sighup_reload);
	CU_add_test(s, "a bad exports file: exit 2", test_bad_file_exit2);
	CU_add_test(s, "a missing exports file: exit 2",
		    test_missing_file_exit2);
	CU_add_test(s, "no exports file: this host only",
		    test_no_file_localhost);
	return e2e_run_cunit();
}
