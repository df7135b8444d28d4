/* nfsconn.c: URL parsing, MOUNT, connect, the event loop and the blocking
 * setup calls of nfsconn.h. */
#include "nfsconn.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nfsc/libnfs-raw-mount.h>

static int parse_port(const char *v, int *out)
{
	char *end;
	long p = strtol(v, &end, 10);
	if (*v == '\0' || *end != '\0' || p < 0 || p > 65535)
		return -1;
	*out = (int)p;
	return 0;
}

/* Takes the query keys libnfs URLs use for NFSv3; anything else is refused
 * rather than silently ignored, so a typo cannot change what is measured. */
static int parse_query(char *q, struct nfs_target *t, char *err, size_t errlen)
{
	for (char *kv = strtok(q, "&"); kv; kv = strtok(NULL, "&")) {
		char *v = strchr(kv, '=');
		if (!v) {
			snprintf(err, errlen, "URL option without value: %s",
				 kv);
			return -1;
		}
		*v++ = '\0';
		if (strcmp(kv, "nfsport") == 0) {
			if (parse_port(v, &t->nfsport) < 0)
				goto bad;
		} else if (strcmp(kv, "mountport") == 0) {
			if (parse_port(v, &t->mountport) < 0)
				goto bad;
		} else if (strcmp(kv, "version") == 0) {
			if (strcmp(v, "3") != 0) {
				snprintf(err, errlen,
					 "only NFS version 3 is supported");
				return -1;
			}
		} else {
			snprintf(err, errlen, "unknown URL option: %s", kv);
			return -1;
		}
		continue;
bad:
		snprintf(err, errlen, "bad port in URL: %s=%s", kv, v);
		return -1;
	}
	return 0;
}

int target_parse(const char *url, struct nfs_target *t, char *err,
		 size_t errlen)
{
	memset(t, 0, sizeof(*t));
	if (strncmp(url, "nfs://", 6) != 0) {
		snprintf(err, errlen, "URL must start with nfs://: %s", url);
		return -1;
	}
	char buf[2048];
	if (snprintf(buf, sizeof(buf), "%s", url + 6) >= (int)sizeof(buf)) {
		snprintf(err, errlen, "URL too long");
		return -1;
	}
	char *q = strchr(buf, '?');
	if (q)
		*q++ = '\0';
	char *slash = strchr(buf, '/');
	if (!slash || slash == buf) {
		snprintf(err, errlen, "URL needs nfs://HOST/EXPORT: %s", url);
		return -1;
	}
	size_t hlen = (size_t)(slash - buf);
	if (hlen >= sizeof(t->host)) {
		snprintf(err, errlen, "host name too long");
		return -1;
	}
	memcpy(t->host, buf, hlen);
	snprintf(t->path, sizeof(t->path), "%s", slash);
	return q ? parse_query(q, t, err, errlen) : 0;
}

void conn_fail(struct conn *c, const char *proc, const char *fmt, ...)
{
	if (c->failed)
		return;
	c->failed = 1;
	int n = snprintf(c->err, sizeof(c->err), "%s: ", proc);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->err + n, sizeof(c->err) - (size_t)n, fmt, ap);
	va_end(ap);
}

int conn_check(struct conn *c, const char *proc, int rpc_status, void *data)
{
	if (rpc_status == RPC_STATUS_SUCCESS) {
		nfsstat3 st = *(nfsstat3 *)data;
		if (st == NFS3_OK)
			return 0;
		conn_fail(c, proc, "%s (%d)", nfsstat3_to_str(st), (int)st);
		return -1;
	}
	if (rpc_status == RPC_STATUS_ERROR)
		conn_fail(c, proc, "RPC error: %s",
			  data ? (const char *)data : "?");
	else if (rpc_status == RPC_STATUS_TIMEOUT)
		conn_fail(c, proc, "RPC timeout");
	else
		conn_fail(c, proc, "RPC cancelled");
	return -1;
}

/* One poll + service round on rpc, which may be c's NFS context or the
 * short-lived MOUNT one.  On a broken socket every call in flight is failed
 * here, while its waiter's state is still alive, instead of later inside
 * rpc_destroy_context(). */
static int rpc_poll(struct conn *c, struct rpc_context *rpc, int timeout_ms)
{
	struct pollfd p = {
		.fd = rpc_get_fd(rpc),
		.events = (short)rpc_which_events(rpc),
	};
	int n = poll(&p, 1, timeout_ms);
	if (n < 0) {
		if (errno == EINTR)
			return 0;
		conn_fail(c, "poll", "%s", strerror(errno));
		return -1;
	}
	if (rpc_service(rpc, n > 0 ? p.revents : 0) < 0) {
		conn_fail(c, "socket", "%s", rpc_get_error(rpc));
		rpc_disconnect(rpc, "mapfs-bench: connection failed");
		return -1;
	}
	return 0;
}

int conn_poll(struct conn *c, int timeout_ms)
{
	return rpc_poll(c, c->rpc, timeout_ms);
}

/* A blocking call's state: the callback fills it, the waiter polls. */
struct sync_call {
	struct conn *c;
	const char *proc;
	int done;
	int ok;
	int tolerated;   /* an nfsstat3 that counts as success, or -1 */
	struct bfh *out; /* where a returned handle goes, or NULL */
	uint32_t rtmax;
	uint32_t wtmax;
};

static int sync_wait(struct conn *c, struct rpc_context *rpc,
		     struct sync_call *s)
{
	while (!s->done)
		if (rpc_poll(c, rpc, 1000) < 0 && !s->done)
			return -1;
	return s->ok ? 0 : -1;
}

static int copy_fh(struct sync_call *s, const nfs_fh3 *fh)
{
	if (fh->data.data_len > sizeof(s->out->data)) {
		conn_fail(s->c, s->proc, "file handle of %u bytes",
			  fh->data.data_len);
		return -1;
	}
	s->out->len = fh->data.data_len;
	memcpy(s->out->data, fh->data.data_val, fh->data.data_len);
	return 0;
}

static void connect_cb(struct rpc_context *rpc, int status, void *data,
		       void *priv)
{
	struct sync_call *s = priv;
	(void)rpc;
	s->done = 1;
	if (status == RPC_STATUS_SUCCESS)
		s->ok = 1;
	else
		conn_fail(s->c, s->proc, "%s",
			  data ? (const char *)data : "cancelled");
}

static void mnt_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct sync_call *s = priv;
	(void)rpc;
	s->done = 1;
	if (status != RPC_STATUS_SUCCESS) {
		conn_fail(s->c, "MNT", "RPC error: %s",
			  data ? (const char *)data : "cancelled");
		return;
	}
	mountres3 *r = data;
	if (r->fhs_status != MNT3_OK) {
		conn_fail(s->c, "MNT", "%s (%d)",
			  mountstat3_to_str(r->fhs_status), (int)r->fhs_status);
		return;
	}
	nfs_fh3 fh = {
		.data = { r->mountres3_u.mountinfo.fhandle.fhandle3_len,
			  r->mountres3_u.mountinfo.fhandle.fhandle3_val }
	};
	s->ok = copy_fh(s, &fh) == 0;
}

static void fsinfo_cb(struct rpc_context *rpc, int status, void *data,
		      void *priv)
{
	struct sync_call *s = priv;
	(void)rpc;
	s->done = 1;
	if (conn_check(s->c, "FSINFO", status, data) < 0)
		return;
	FSINFO3resok *ok = &((FSINFO3res *)data)->FSINFO3res_u.resok;
	s->rtmax = ok->rtmax;
	s->wtmax = ok->wtmax;
	s->ok = 1;
}

/* Connects rpc to program/version on host, at port or via the portmapper. */
static int connect_sync(struct conn *c, struct rpc_context *rpc,
			const char *host, int port, int prog, int vers,
			const char *what)
{
	struct sync_call s = { .c = c, .proc = what };
	int r = port ? rpc_connect_port_async(rpc, host, port, prog, vers,
					      connect_cb, &s)
		     : rpc_connect_program_async(rpc, host, prog, vers,
						 connect_cb, &s);
	if (r < 0) {
		conn_fail(c, what, "%s", rpc_get_error(rpc));
		return -1;
	}
	return sync_wait(c, rpc, &s);
}

static int mount_root(struct conn *c, const struct nfs_target *t)
{
	struct rpc_context *m = rpc_init_context();
	if (!m) {
		conn_fail(c, "MNT", "rpc_init_context failed");
		return -1;
	}
	int r = connect_sync(c, m, t->host, t->mountport, MOUNT_PROGRAM,
			     MOUNT_V3, "connect mountd");
	if (r == 0) {
		struct sync_call s = { .c = c, .proc = "MNT", .out = &c->root };
		if (rpc_mount3_mnt_async(m, mnt_cb, (char *)t->path, &s) < 0) {
			conn_fail(c, "MNT", "%s", rpc_get_error(m));
			r = -1;
		} else {
			r = sync_wait(c, m, &s);
		}
	}
	rpc_destroy_context(m);
	return r;
}

int conn_open(struct conn *c, const struct nfs_target *t)
{
	memset(c, 0, sizeof(*c));
	if (mount_root(c, t) < 0)
		return -1;
	c->rpc = rpc_init_context();
	if (!c->rpc) {
		conn_fail(c, "connect nfsd", "rpc_init_context failed");
		return -1;
	}
	if (connect_sync(c, c->rpc, t->host, t->nfsport, NFS_PROGRAM, NFS_V3,
			 "connect nfsd") < 0)
		return -1;
	struct sync_call s = { .c = c, .proc = "FSINFO" };
	FSINFO3args a = { .fsroot = bfh_arg(&c->root) };
	if (rpc_nfs3_fsinfo_async(c->rpc, fsinfo_cb, &a, &s) < 0) {
		conn_fail(c, "FSINFO", "%s", rpc_get_error(c->rpc));
		return -1;
	}
	if (sync_wait(c, c->rpc, &s) < 0)
		return -1;
	c->rtmax = s.rtmax;
	c->wtmax = s.wtmax;
	return 0;
}

void conn_close(struct conn *c)
{
	if (c->rpc)
		rpc_destroy_context(c->rpc);
	c->rpc = NULL;
}

/* Completes a blocking call: copies fh (the handle the reply carries, when
 * s->out wants one) on NFS3_OK; s->tolerated is a status that also counts as
 * done (EXIST for MKDIR, NOENT for REMOVE). */
static void finish(struct sync_call *s, int status, void *data,
		   const nfs_fh3 *fh)
{
	s->done = 1;
	if (status == RPC_STATUS_SUCCESS && s->tolerated >= 0 &&
	    *(nfsstat3 *)data == (nfsstat3)s->tolerated) {
		s->ok = 1;
		return;
	}
	if (conn_check(s->c, s->proc, status, data) < 0)
		return;
	s->ok = (!s->out || copy_fh(s, fh) == 0);
}

static const nfs_fh3 *post_op_fh(struct sync_call *s, const post_op_fh3 *p)
{
	if (!p->handle_follows) {
		conn_fail(s->c, s->proc, "server returned no file handle");
		return NULL;
	}
	return &p->post_op_fh3_u.handle;
}

static void create_cb(struct rpc_context *rpc, int status, void *data,
		      void *priv)
{
	struct sync_call *s = priv;
	CREATE3res *r = data;
	(void)rpc;
	if (status == RPC_STATUS_SUCCESS && r->status == NFS3_OK) {
		const nfs_fh3 *fh = post_op_fh(s, &r->CREATE3res_u.resok.obj);
		if (!fh) {
			s->done = 1;
			return;
		}
		finish(s, status, data, fh);
		return;
	}
	finish(s, status, data, NULL);
}

static void mkdir_cb(struct rpc_context *rpc, int status, void *data,
		     void *priv)
{
	struct sync_call *s = priv;
	MKDIR3res *r = data;
	(void)rpc;
	if (status == RPC_STATUS_SUCCESS && r->status == NFS3_OK) {
		const nfs_fh3 *fh = post_op_fh(s, &r->MKDIR3res_u.resok.obj);
		if (!fh) {
			s->done = 1;
			return;
		}
		finish(s, status, data, fh);
		return;
	}
	finish(s, status, data, NULL);
}

static void lookup_cb(struct rpc_context *rpc, int status, void *data,
		      void *priv)
{
	LOOKUP3res *r = data;
	(void)rpc;
	finish(priv, status, data,
	       status == RPC_STATUS_SUCCESS && r->status == NFS3_OK
		       ? &r->LOOKUP3res_u.resok.object
		       : NULL);
}

static void plain_cb(struct rpc_context *rpc, int status, void *data,
		     void *priv)
{
	(void)rpc;
	finish(priv, status, data, NULL);
}

int conn_lookup(struct conn *c, const struct bfh *dir, const char *name,
		struct bfh *out)
{
	struct sync_call s = {
		.c = c, .proc = "LOOKUP", .tolerated = -1, .out = out
	};
	LOOKUP3args a = { .what = { .dir = bfh_arg(dir),
				    .name = (char *)name } };
	if (rpc_nfs3_lookup_async(c->rpc, lookup_cb, &a, &s) < 0) {
		conn_fail(c, "LOOKUP", "%s", rpc_get_error(c->rpc));
		return -1;
	}
	return sync_wait(c, c->rpc, &s);
}

int conn_lookup_try(struct conn *c, const struct bfh *dir, const char *name,
		    struct bfh *out)
{
	struct sync_call s = {
		.c = c, .proc = "LOOKUP", .tolerated = NFS3ERR_NOENT, .out = out
	};
	LOOKUP3args a = { .what = { .dir = bfh_arg(dir),
				    .name = (char *)name } };
	out->len = 0;
	if (rpc_nfs3_lookup_async(c->rpc, lookup_cb, &a, &s) < 0) {
		conn_fail(c, "LOOKUP", "%s", rpc_get_error(c->rpc));
		return -1;
	}
	if (sync_wait(c, c->rpc, &s) < 0)
		return -1;
	return out->len ? 0 : 1;
}

struct rdp_call {
	struct sync_call s;
	uint64_t n;
	cookie3 cookie;
	cookieverf3 verf;
	int eof;
};

static void rdp_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct rdp_call *r = priv;
	READDIRPLUS3res *res = data;
	(void)rpc;
	if (status == RPC_STATUS_SUCCESS && res->status == NFS3_OK) {
		READDIRPLUS3resok *ok = &res->READDIRPLUS3res_u.resok;
		for (entryplus3 *e = ok->reply.entries; e; e = e->nextentry) {
			r->n++;
			r->cookie = e->cookie;
		}
		memcpy(r->verf, ok->cookieverf, sizeof(r->verf));
		r->eof = ok->reply.eof;
	}
	finish(&r->s, status, data, NULL);
}

int conn_readdirplus_all(struct conn *c, const struct bfh *dir,
			 uint32_t maxcount, uint64_t *n)
{
	struct rdp_call r = {
		.s = { .c = c, .proc = "READDIRPLUS", .tolerated = -1 }
	};
	while (!r.eof) {
		READDIRPLUS3args a = { .dir = bfh_arg(dir),
				       .cookie = r.cookie,
				       .dircount = maxcount / 4,
				       .maxcount = maxcount };
		memcpy(a.cookieverf, r.verf, sizeof(a.cookieverf));
		r.s.done = r.s.ok = 0;
		if (rpc_nfs3_readdirplus_async(c->rpc, rdp_cb, &a, &r) < 0) {
			conn_fail(c, "READDIRPLUS", "%s",
				  rpc_get_error(c->rpc));
			return -1;
		}
		if (sync_wait(c, c->rpc, &r.s) < 0)
			return -1;
	}
	*n = r.n;
	return 0;
}

int conn_mkdir(struct conn *c, const struct bfh *dir, const char *name,
	       struct bfh *out)
{
	/* LOOKUP first.  A server over a backing store may list a directory
	 * only on LOOKUP or READDIR (mapfs-gw does): a MKDIR in a directory not
	 * listed yet then makes a second, empty directory over one that exists
	 * in the store, and --reuse would find nothing in it. */
	struct sync_call l = {
		.c = c, .proc = "LOOKUP", .tolerated = NFS3ERR_NOENT, .out = out
	};
	out->len = 0;
	LOOKUP3args la = { .what = { .dir = bfh_arg(dir),
				     .name = (char *)name } };
	if (rpc_nfs3_lookup_async(c->rpc, lookup_cb, &la, &l) < 0) {
		conn_fail(c, "LOOKUP", "%s", rpc_get_error(c->rpc));
		return -1;
	}
	if (sync_wait(c, c->rpc, &l) < 0)
		return -1;
	if (out->len)
		return 0;
	struct sync_call s = {
		.c = c, .proc = "MKDIR", .tolerated = NFS3ERR_EXIST, .out = out
	};
	MKDIR3args a = { .where = { .dir = bfh_arg(dir),
				    .name = (char *)name } };
	a.attributes.mode.set_it = 1;
	a.attributes.mode.set_mode3_u.mode = 0755;
	if (rpc_nfs3_mkdir_async(c->rpc, mkdir_cb, &a, &s) < 0) {
		conn_fail(c, "MKDIR", "%s", rpc_get_error(c->rpc));
		return -1;
	}
	if (sync_wait(c, c->rpc, &s) < 0)
		return -1;
	/* EXIST carries no handle: a leftover of an earlier --keep run. */
	return out->len ? 0 : conn_lookup(c, dir, name, out);
}

int conn_create(struct conn *c, const struct bfh *dir, const char *name,
		struct bfh *out)
{
	struct sync_call s = {
		.c = c, .proc = "CREATE", .tolerated = -1, .out = out
	};
	CREATE3args a = { .where = { .dir = bfh_arg(dir),
				     .name = (char *)name } };
	sattr3 *sa = &a.how.createhow3_u.obj_attributes;
	a.how.mode = UNCHECKED;
	sa->mode.set_it = 1;
	sa->mode.set_mode3_u.mode = 0644;
	sa->size.set_it = 1;
	sa->size.set_size3_u.size = 0;
	if (rpc_nfs3_create_async(c->rpc, create_cb, &a, &s) < 0) {
		conn_fail(c, "CREATE", "%s", rpc_get_error(c->rpc));
		return -1;
	}
	return sync_wait(c, c->rpc, &s);
}

int conn_commit(struct conn *c, const struct bfh *fh)
{
	struct sync_call s = { .c = c, .proc = "COMMIT", .tolerated = -1 };
	COMMIT3args a = { .file = bfh_arg(fh) };
	if (rpc_nfs3_commit_async(c->rpc, plain_cb, &a, &s) < 0) {
		conn_fail(c, "COMMIT", "%s", rpc_get_error(c->rpc));
		return -1;
	}
	return sync_wait(c, c->rpc, &s);
}

int conn_remove(struct conn *c, const struct bfh *dir, const char *name,
		int rmdir)
{
	struct sync_call s = { .c = c,
			       .proc = rmdir ? "RMDIR" : "REMOVE",
			       .tolerated = NFS3ERR_NOENT };
	diropargs3 what = { .dir = bfh_arg(dir), .name = (char *)name };
	int r;
	if (rmdir) {
		RMDIR3args a = { .object = what };
		r = rpc_nfs3_rmdir_async(c->rpc, plain_cb, &a, &s);
	} else {
		REMOVE3args a = { .object = what };
		r = rpc_nfs3_remove_async(c->rpc, plain_cb, &a, &s);
	}
	if (r < 0) {
		conn_fail(c, s.proc, "%s", rpc_get_error(c->rpc));
		return -1;
	}
	return sync_wait(c, c->rpc, &s);
}

int conn_rename(struct conn *c, const struct bfh *dir, const char *from,
		const char *to)
{
	struct sync_call s = { .c = c, .proc = "RENAME", .tolerated = -1 };
	RENAME3args a = {
		.from = { .dir = bfh_arg(dir), .name = (char *)from },
		.to = { .dir = bfh_arg(dir), .name = (char *)to },
	};
	if (rpc_nfs3_rename_async(c->rpc, plain_cb, &a, &s) < 0) {
		conn_fail(c, "RENAME", "%s", rpc_get_error(c->rpc));
		return -1;
	}
	return sync_wait(c, c->rpc, &s);
}
