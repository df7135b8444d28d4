/*
 * mountd/mountd.c - the MOUNT v3 program (RFC 1813 Appendix I).
 *
 * MNT turns an export's path (or a directory below it) into a file
 * handle minted with the same key and that export's id, so the handle
 * works with every NFS procedure, and only through that export.  The mount list kept for DUMP is
 * bookkeeping only: nothing is refused for lack of an entry, and a mount
 * never fails because the list could not grow.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "fs/fs.h"
#include "mountd/mount3_prot.h"
#include "nfsd/nfsd.h"

/*
 * Bound on mount list entries.  The host name comes from the client's
 * AUTH_SYS credential, so without a bound a client could grow the list
 * (and DUMP replies) without end by inventing names.
 */
#define MOUNTD_LIST_MAX 4096

/*
 * Decoder of MNT and UMNT arguments.  rpcgen's string decoder stops at an
 * embedded NUL, so "/mapfs/a\0b" would act as "/mapfs/a"; this one reads
 * the bytes with their length and refuses a NUL among them (the call gets
 * GARBAGE_ARGS).  Encoding and freeing are the generated codec's.
 */
static bool_t mountd_dirpath_xdr(XDR *x, mnt3_dirpath *p)
{
	u_int len;
	char *s;

	if (x->x_op != XDR_DECODE)
		return xdr_mnt3_dirpath(x, p);
	if (!xdr_u_int(x, &len) || len > MNTPATHLEN)
		return FALSE;
	s = malloc(len + 1);
	if (!s)
		return FALSE;
	if (!xdr_opaque(x, s, len) || memchr(s, '\0', len)) {
		free(s);
		return FALSE;
	}
	s[len] = '\0';
	*p = s;
	return TRUE;
}

/*
 * The caller as DUMP names it: its AUTH_SYS machine name, else its
 * address.  buf has room for MNTNAMLEN + 1 bytes.
 */
static void mountd_host(const struct rpc_call *call, char *buf, size_t cap)
{
	const struct rpc_cred *c = rpc_call_cred(call);
	const struct sockaddr_storage *ss = rpc_call_peer(call);
	const void *addr = NULL;

	if (c->flavor == AUTH_SYS && c->machine[0]) {
		snprintf(buf, cap, "%s", c->machine);
		return;
	}
	if (ss->ss_family == AF_INET)
		addr = &((const struct sockaddr_in *)ss)->sin_addr;
	else if (ss->ss_family == AF_INET6)
		addr = &((const struct sockaddr_in6 *)ss)->sin6_addr;
	if (!addr || !inet_ntop(ss->ss_family, addr, buf, (socklen_t)cap))
		snprintf(buf, cap, "unknown");
}

/*
 * For the mount log: the caller's address and port, then its machine
 * name with anything unprintable replaced (the name is the client's
 * word, and must not forge log lines).
 */
static void mountd_who(const struct rpc_call *call, const char *host, char *buf,
		       size_t cap)
{
	const struct sockaddr_storage *ss = rpc_call_peer(call);
	char addr[INET6_ADDRSTRLEN] = "?", name[MNTNAMLEN + 1];
	unsigned port = 0;
	size_t i;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;

		inet_ntop(AF_INET, &a->sin_addr, addr, sizeof(addr));
		port = ntohs(a->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)ss;

		inet_ntop(AF_INET6, &a->sin6_addr, addr, sizeof(addr));
		port = ntohs(a->sin6_port);
	}
	for (i = 0; host[i] && i < MNTNAMLEN; i++)
		name[i] = host[i] > 0x20 && host[i] < 0x7f ? host[i] : '?';
	name[i] = '\0';
	snprintf(buf, cap, "%s port %u (%s)", addr, port, name);
}

/* Record host's mount of path, once per pair, if the list has room. */
static void mountd_list_add(struct nfsd *n, const char *host, const char *path)
{
	struct nfsd_mount *m;
	size_t count = 0;

	pthread_mutex_lock(&n->mounts_lock);
	for (m = n->mounts; m; m = m->next, count++)
		if (!strcmp(m->host, host) && !strcmp(m->path, path))
			goto out_unlock;
	if (count >= MOUNTD_LIST_MAX)
		goto out_unlock;
	m = calloc(1, sizeof(*m));
	if (!m)
		goto out_unlock;
	m->host = strdup(host);
	m->path = strdup(path);
	if (!m->host || !m->path) {
		free(m->host);
		free(m->path);
		free(m);
		goto out_unlock;
	}
	m->next = n->mounts;
	n->mounts = m;
out_unlock:
	pthread_mutex_unlock(&n->mounts_lock);
}

/* Forget host's mount of path, or all of host's mounts if path is NULL. */
static void mountd_list_remove(struct nfsd *n, const char *host,
			       const char *path)
{
	struct nfsd_mount **pp, *m;

	pthread_mutex_lock(&n->mounts_lock);
	for (pp = &n->mounts; (m = *pp);) {
		if (strcmp(m->host, host) || (path && strcmp(m->path, path))) {
			pp = &m->next;
			continue;
		}
		*pp = m->next;
		free(m->host);
		free(m->path);
		free(m);
	}
	pthread_mutex_unlock(&n->mounts_lock);
}

/*
 * mountstat3 for an fs/ error.  Its values are a subset of nfsstat3's,
 * so the one errno table (nfsd/errmap.c) decides and the codes MOUNT
 * lacks fall back to the nearest it has.
 */
static mountstat3 mountd_stat(int err)
{
	int s = nfsd_errno_to_stat(err);

	switch (s) {
	case MNT3_OK:
	case MNT3ERR_PERM:
	case MNT3ERR_NOENT:
	case MNT3ERR_IO:
	case MNT3ERR_ACCES:
	case MNT3ERR_NOTDIR:
	case MNT3ERR_INVAL:
	case MNT3ERR_NAMETOOLONG:
	case MNT3ERR_NOTSUPP:
	case MNT3ERR_SERVERFAULT:
		return (mountstat3)s;
	}
	/* A directory removed while the path was being walked. */
	return err == -ESTALE ? MNT3ERR_NOENT : MNT3ERR_IO;
}

/* fs_revalidate() completion, against the caller still being inside it. */
enum { WALK_IDLE, WALK_CALLING, WALK_DONE };

/*
 * One MNT call walking its path down from the namespace's root: first
 * to the export's root as the server (that walk is the administrator's
 * choice, as rpc.mountd resolves an export as root), then below it as
 * the caller, squashed as the export's rule says.
 */
struct mnt_walk {
	struct rpc_call *call;
	struct nfsd *n;
	mountres3 *res;
	struct fs_ctx ctx;
	atomic_int phase;
	int err;            /* of the last fs_revalidate() */
	uint64_t ino;       /* the directory reached so far */
	const char *next;   /* components still to look up, inside path */
	unsigned as_server; /* of them, how many lead to the export root */
	uint32_t export_id;
	char host[MNTNAMLEN + 1];
	char path[MNTPATHLEN + 1]; /* canonical, as DUMP lists it */
};

/* Answer MNT: the handle of w->ino (generation gen), or err's status. */
static void mnt_finish(struct mnt_walk *w, int err, uint32_t gen)
{
	struct rpc_call *call = w->call;
	mountres3 *res = w->res;
	mountres3_ok *ok = &res->mountres3_u.mountinfo;
	char who[INET6_ADDRSTRLEN + MNTNAMLEN + 32];

	res->fhs_status = mountd_stat(err);
	if (!err) {
		ok->fhandle.fhandle3_val = malloc(HANDLE_LEN);
		ok->auth_flavors.auth_flavors_val = malloc(sizeof(int));
		if (!ok->fhandle.fhandle3_val ||
		    !ok->auth_flavors.auth_flavors_val) {
			/* xdr_free of a failed result frees no body. */
			free(ok->fhandle.fhandle3_val);
			free(ok->auth_flavors.auth_flavors_val);
			ok->fhandle.fhandle3_val = NULL;
			ok->auth_flavors.auth_flavors_val = NULL;
			res->fhs_status = MNT3ERR_SERVERFAULT;
		} else {
			handle_encode(&w->n->key, w->export_id, w->ino, gen,
				      (uint8_t *)ok->fhandle.fhandle3_val);
			ok->fhandle.fhandle3_len = HANDLE_LEN;
			/*
			 * Only AUTH_SYS: NFS refuses AUTH_NONE outside NULL,
			 * so offering it would send a client into errors.
			 */
			ok->auth_flavors.auth_flavors_val[0] = AUTH_SYS;
			ok->auth_flavors.auth_flavors_len = 1;
			mountd_list_add(w->n, w->host, w->path);
		}
	}
	mountd_who(call, w->host, who, sizeof(who));
	if (res->fhs_status == MNT3_OK)
		log_info("mount %s by %s", w->path, who);
	else
		log_info("mount %s by %s failed: status %d", w->path, who,
			 (int)res->fhs_status);
	free(w);
	rpc_call_done(call);
}

/*
 * w->ino has been revalidated: look the next component up in it.
 * Returns true if that finished the call (an error, or the last one).
 */
/* Whom the next lookup or revalidation acts as; see struct mnt_walk. */
static const struct fs_ctx *mnt_ctx(const struct mnt_walk *w,
				    struct fs_ctx *server)
{
	if (!w->as_server)
		return &w->ctx;
	*server = (struct fs_ctx){ .loop = w->ctx.loop };
	return server;
}

static bool mnt_step(struct mnt_walk *w)
{
	char name[FS_NAME_MAX + 1];
	size_t len = strcspn(w->next, "/"); /* <= FS_NAME_MAX: canonical */
	struct fs_ctx server;
	struct fs_attr a;
	uint64_t ino;
	int rc = w->err;

	memcpy(name, w->next, len);
	name[len] = '\0';
	w->next += len;
	if (*w->next == '/')
		w->next++;
	if (!rc)
		rc = fs_lookup(w->n->fs, mnt_ctx(w, &server), w->ino, name,
			       &ino, &a);
	if (w->as_server)
		w->as_server--;
	if (!rc && a.type != FS_DIR)
		rc = -ENOTDIR;
	if (!rc)
		w->ino = ino;
	if (rc || !*w->next) {
		mnt_finish(w, rc, rc ? 0 : a.gen);
		return true;
	}
	return false;
}

static void mnt_revalidated(void *arg, int err);

/*
 * Revalidate and descend, one directory at a time, until the call is
 * finished.  A revalidation that completes inline continues this loop
 * (no recursion however long the path); one that completes later
 * continues from mnt_revalidated() on the completing thread.
 */
static void mnt_walk(struct mnt_walk *w)
{
	struct fs_ctx server;

	do {
		atomic_store(&w->phase, WALK_CALLING);
		fs_revalidate(w->n->fs, mnt_ctx(w, &server), w->ino, false,
			      mnt_revalidated, w);
		if (atomic_exchange(&w->phase, WALK_IDLE) != WALK_DONE)
			return;
	} while (!mnt_step(w));
}

static void mnt_revalidated(void *arg, int err)
{
	struct mnt_walk *w = arg;

	w->err = err;
	if (atomic_exchange(&w->phase, WALK_DONE) == WALK_CALLING)
		return; /* inline: mnt_walk() goes on */
	/* Later, on some other thread: no longer on the call's loop. */
	w->ctx.loop = -1;
	if (!mnt_step(w))
		mnt_walk(w);
}

static void mountd_null(struct rpc_call *call, void *args, void *res)
{
	(void)args;
	(void)res;
	rpc_call_done(call);
}

/* The number of components of a canonical relative path ("" has none). */
static unsigned mountd_depth(const char *p)
{
	unsigned n = *p ? 1 : 0;

	for (; *p; p++)
		n += *p == '/';
	return n;
}

/*
 * The export for w->path and the caller's rights there, with the table
 * pinned; fills w's walk.  0, or -ENOENT (not exported: the client
 * learns nothing about what is not exported), or -EACCES (no rule
 * admits the client, or the rule is secure and the port is not: as
 * rpc.mountd answers both).
 */
static int mnt_export(struct mnt_walk *w, struct rpc_call *call)
{
	const struct sockaddr_storage *peer = rpc_call_peer(call);
	const struct exports_rule *r;
	struct exports_entry *e;
	struct exports *t;
	int loop = rpc_call_loop(call), rc;

	t = exports_pin(&w->n->exports, loop);
	rc = t ? exports_mount_find(t, w->path, peer, &e, &r) : -ENOENT;
	if (!rc && !exports_port_ok(r, peer)) {
		log_warn("MNT %s from %s refused: source port is not below "
			 "1024 and the export is secure",
			 w->path, w->host);
		rc = -EACCES;
	} else if (rc == -EACCES) {
		log_warn("MNT %s from %s refused: no export rule admits it",
			 w->path, w->host);
	}
	if (!rc) {
		w->export_id = e->id;
		w->next = exports_path_below(w->path, t->base);
		w->as_server = mountd_depth(e->below);
		exports_squash(r, rpc_call_cred(call), &w->ctx);
	}
	exports_unpin(&w->n->exports, loop);
	return rc;
}

/* MNT (Appendix I, MOUNTPROC3_MNT): an export or a directory below it. */
static void mountd_mnt(struct rpc_call *call, void *args, void *res)
{
	struct nfsd *n = rpc_call_ctx(call);
	const mnt3_dirpath *dirpath = args;
	struct mnt_walk *w;
	struct fs_attr a;
	int rc;

	w = calloc(1, sizeof(*w));
	if (!w) {
		((mountres3 *)res)->fhs_status = MNT3ERR_SERVERFAULT;
		rpc_call_done(call);
		return;
	}
	w->call = call;
	w->n = n;
	w->res = res;
	w->ino = FS_ROOT_INO;
	w->ctx.loop = rpc_call_loop(call);
	mountd_host(call, w->host, sizeof(w->host));
	rc = exports_path_canon(*dirpath, w->path, sizeof(w->path));
	if (!rc)
		rc = mnt_export(w, call);
	if (rc) {
		mnt_finish(w, rc, 0);
		return;
	}
	if (*w->next) {
		mnt_walk(w);
		return;
	}
	rc = fs_getattr(n->fs, FS_ROOT_INO, &a);
	mnt_finish(w, rc, rc ? 0 : a.gen);
}

/* DUMP: every recorded (host, directory) pair. */
static void mountd_dump(struct rpc_call *call, void *args, void *res)
{
	struct nfsd *n = rpc_call_ctx(call);
	mountlist *list = res, *tail = list;
	struct nfsd_mount *m;
	mountbody *b;

	(void)args;
	pthread_mutex_lock(&n->mounts_lock);
	for (m = n->mounts; m; m = m->next) {
		b = calloc(1, sizeof(*b));
		if (!b)
			goto out_nomem;
		*tail = b;
		tail = &b->ml_next;
		b->ml_hostname = strdup(m->host);
		b->ml_directory = strdup(m->path);
		if (!b->ml_hostname || !b->ml_directory)
			goto out_nomem;
	}
	pthread_mutex_unlock(&n->mounts_lock);
	rpc_call_done(call);
	return;
out_nomem:
	pthread_mutex_unlock(&n->mounts_lock);
	/* Frees the partial list and leaves *list NULL. */
	xdr_free((xdrproc_t)xdr_mountlist, (char *)list);
	rpc_call_fail(call, SYSTEM_ERR);
}

/* UMNT: forget the caller's mount of one directory. */
static void mountd_umnt(struct rpc_call *call, void *args, void *res)
{
	struct nfsd *n = rpc_call_ctx(call);
	char host[MNTNAMLEN + 1], path[MNTPATHLEN + 1];
	char who[INET6_ADDRSTRLEN + MNTNAMLEN + 32];

	(void)res;
	mountd_host(call, host, sizeof(host));
	/* A path MNT could not canonicalize was never recorded. */
	if (!exports_path_canon(*(mnt3_dirpath *)args, path, sizeof(path))) {
		mountd_list_remove(n, host, path);
		mountd_who(call, host, who, sizeof(who));
		log_info("unmount %s by %s", path, who);
	}
	rpc_call_done(call);
}

/* UMNTALL: forget every mount of the caller. */
static void mountd_umntall(struct rpc_call *call, void *args, void *res)
{
	struct nfsd *n = rpc_call_ctx(call);
	char host[MNTNAMLEN + 1];
	char who[INET6_ADDRSTRLEN + MNTNAMLEN + 32];

	(void)args;
	(void)res;
	mountd_host(call, host, sizeof(host));
	mountd_list_remove(n, host, NULL);
	mountd_who(call, host, who, sizeof(who));
	log_info("unmount of everything by %s", who);
	rpc_call_done(call);
}

/* One exportnode for e (its clients as written), at *tail. */
static bool mountd_export_node(const struct exports_entry *e,
			       exportnode ***tail)
{
	exportnode *node = calloc(1, sizeof(*node));
	mnt3_groups *gtail;

	if (!node)
		return false;
	**tail = node;
	*tail = &node->ex_next;
	node->ex_dir = strdup(e->path);
	if (!node->ex_dir)
		return false;
	gtail = &node->ex_groups;
	for (size_t i = 0; i < e->nrules; i++) {
		groupnode *g = calloc(1, sizeof(*g));

		if (!g)
			return false;
		*gtail = g;
		gtail = &g->gr_next;
		g->gr_name = strdup(e->rules[i].spec);
		if (!g->gr_name)
			return false;
	}
	return true;
}

/*
 * EXPORT: the table as it is, every export with its clients, as
 * showmount -e shows Linux's.  It tells a client nothing MNT would not.
 */
static void mountd_export(struct rpc_call *call, void *args, void *res)
{
	struct nfsd *n = rpc_call_ctx(call);
	mnt3_exports *list = res;
	exportnode **tail = list;
	int loop = rpc_call_loop(call);
	struct exports *t;
	bool ok = true;

	(void)args;
	t = exports_pin(&n->exports, loop);
	for (size_t i = 0; t && ok && i < t->n; i++)
		ok = mountd_export_node(&t->entries[i], &tail);
	exports_unpin(&n->exports, loop);
	if (ok) {
		rpc_call_done(call);
		return;
	}
	/* Frees the partial list and leaves *list NULL. */
	xdr_free((xdrproc_t)xdr_mnt3_exports, (char *)list);
	rpc_call_fail(call, SYSTEM_ERR);
}

/*
 * NULL, EXPORT and DUMP tell nothing that showmount(8) should not see and
 * are open to AUTH_NONE; MNT and UMNT* need AUTH_SYS.  All are idempotent:
 * a retransmitted MNT or UMNT finds the list as the first one left it.
 */
static const struct rpc_proc mountd_procs[] = {
	[MOUNTPROC3_NULL] = {
		.name = "NULL",
		.handler = mountd_null,
		.flags = RPC_PROC_IDEMPOTENT | RPC_PROC_AUTH_NONE_OK,
	},
	[MOUNTPROC3_MNT] = {
		.name = "MNT",
		.decode = (xdrproc_t)mountd_dirpath_xdr,
		.args_size = sizeof(mnt3_dirpath),
		.encode = (xdrproc_t)xdr_mountres3,
		.res_size = sizeof(mountres3),
		.handler = mountd_mnt,
		.flags = RPC_PROC_IDEMPOTENT,
	},
	[MOUNTPROC3_DUMP] = {
		.name = "DUMP",
		.encode = (xdrproc_t)xdr_mountlist,
		.res_size = sizeof(mountlist),
		.handler = mountd_dump,
		.flags = RPC_PROC_IDEMPOTENT | RPC_PROC_AUTH_NONE_OK,
	},
	[MOUNTPROC3_UMNT] = {
		.name = "UMNT",
		.decode = (xdrproc_t)mountd_dirpath_xdr,
		.args_size = sizeof(mnt3_dirpath),
		.handler = mountd_umnt,
		.flags = RPC_PROC_IDEMPOTENT,
	},
	[MOUNTPROC3_UMNTALL] = {
		.name = "UMNTALL",
		.handler = mountd_umntall,
		.flags = RPC_PROC_IDEMPOTENT,
	},
	[MOUNTPROC3_EXPORT] = {
		.name = "EXPORT",
		.encode = (xdrproc_t)xdr_mnt3_exports,
		.res_size = sizeof(mnt3_exports),
		.handler = mountd_export,
		.flags = RPC_PROC_IDEMPOTENT | RPC_PROC_AUTH_NONE_OK,
	},
};

/* The MOUNT v3 program (100005/3) with ctx = n. */
struct rpc_program mountd_program(struct nfsd *n)
{
	return (struct rpc_program){
		.name = "mount",
		.prog = MOUNT_PROGRAM,
		.vers = MOUNT_V3,
		.procs = mountd_procs,
		.nprocs = sizeof(mountd_procs) / sizeof(mountd_procs[0]),
		.ctx = n,
	};
}
