/*
 * nfsd/proc_readdir.c - READDIR and READDIRPLUS (RFC 1813 3.3.16, 3.3.17).
 *
 * Sizes: READDIR's count bounds the whole encoded reply; READDIRPLUS's
 * maxcount bounds the whole reply and its dircount the fileid, name and
 * cookie of the entries.  Each entry's XDR size is computed exactly and
 * the listing stops before the first entry that would not fit; if not
 * even one fits the answer is NFS3ERR_TOOSMALL.  We count the status word
 * too, so a reply is never larger than the client's buffer, whichever way
 * the client reads "size of the resok structure".
 *
 * Cookie verifiers: we return fs's directory verifier but do not insist
 * that a client's matches.  fs cookies are stable (an entry keeps its
 * cookie for its life), so an old cookie still names a place in the
 * directory and a client resuming there after a change simply sees the
 * directory as it is now, exactly as if the change had come a moment
 * later.  Refusing with NFS3ERR_BAD_COOKIE would only force clients to
 * restart listings of busy directories from the top.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nfs3_internal.h"

/* Entries collected from fs_readdir, and what is left of the budget. */
struct dir_builder {
	const struct nfsd *n;
	bool plus;
	uint64_t dir;
	const struct fs_attr *dir_attr;
	bool export_root;
	uint32_t export_id;       /* for READDIRPLUS's handles */
	size_t used, maxcount;    /* whole reply */
	size_t dirused, dircount; /* READDIRPLUS: fileid + name + cookie */
	unsigned nentries;
	int err;
	entry3 *list, **tail;
	entryplus3 *plist, **ptail;
};

static void readdir_fail(struct nfs3_readdir_call *st, nfsstat3 status,
			 const struct fs_attr *dir_attr)
{
	post_op_attr *attrs;

	if (st->plus) {
		st->res.plus.status = status;
		attrs = &st->res.plus.READDIRPLUS3res_u.resfail.dir_attributes;
	} else {
		st->res.readdir.status = status;
		attrs = &st->res.readdir.READDIR3res_u.resfail.dir_attributes;
	}
	nfs3_post_op_attr(st->n, dir_attr, attrs);
	rpc_call_done(st->call);
}

/* A copy of name as filename3 (opaque: no NUL travels). */
static bool dir_name(const char *name, size_t len, filename3 *out)
{
	out->filename3_val = malloc(len ? len : 1);
	if (!out->filename3_val)
		return false;
	memcpy(out->filename3_val, name, len);
	out->filename3_len = (u_int)len;
	return true;
}

static int dir_emit_plain(struct dir_builder *b, uint64_t ino, const char *name,
			  size_t len, uint64_t cookie)
{
	size_t size = nfs3_xdr_entry3_size(len);
	entry3 *e;

	if (b->used + size > b->maxcount)
		return 1;
	e = calloc(1, sizeof(*e));
	if (!e || !dir_name(name, len, &e->name)) {
		free(e);
		b->err = -ENOMEM;
		return 1;
	}
	e->fileid = ino;
	e->cookie = cookie;
	*b->tail = e;
	b->tail = &e->nextentry;
	b->used += size;
	return 0;
}

static int dir_emit_plus(struct dir_builder *b, uint64_t ino, const char *name,
			 size_t len, uint64_t cookie,
			 const struct fs_attr *attr)
{
	/* Sized as if the handle will be there: an upper bound. */
	size_t size = nfs3_xdr_entryplus3_size(len, attr != NULL, attr != NULL);
	size_t info = nfs3_xdr_dirinfo_size(len);
	entryplus3 *e;

	if (b->used + size > b->maxcount || b->dirused + info > b->dircount)
		return 1;
	e = calloc(1, sizeof(*e));
	if (!e || !dir_name(name, len, &e->name)) {
		free(e);
		b->err = -ENOMEM;
		return 1;
	}
	e->fileid = ino;
	e->cookie = cookie;
	nfs3_post_op_attr(b->n, attr, &e->name_attributes);
	nfs3_post_op_fh(b->n, b->export_id, attr, &e->name_handle);
	*b->ptail = e;
	b->ptail = &e->nextentry;
	b->used += size;
	b->dirused += info;
	return 0;
}

/* fs_dirent_fn: take the entry if it fits, else stop before it. */
static int dir_emit(void *arg, uint64_t ino, const char *name, uint64_t cookie,
		    const struct fs_attr *attr)
{
	struct dir_builder *b = arg;
	size_t len = strlen(name);
	int stop;

	/* ".." of the export root is the root: nothing above it leaks. */
	if (b->export_root && strcmp(name, "..") == 0) {
		ino = b->dir;
		attr = b->plus ? b->dir_attr : NULL;
	}
	if (b->plus)
		stop = dir_emit_plus(b, ino, name, len, cookie, attr);
	else
		stop = dir_emit_plain(b, ino, name, len, cookie);
	if (!stop)
		b->nentries++;
	return stop;
}

/* The verifier as 8 opaque bytes, big-endian like everything on the wire. */
static void dir_verf(uint64_t verf, cookieverf3 out)
{
	int i;

	for (i = 7; i >= 0; i--) {
		out[i] = (char)(verf & 0xff);
		verf >>= 8;
	}
}

/* The directory is fresh enough: list it into the reply. */
static void readdir_revalidated(void *arg, int err)
{
	struct nfs3_readdir_call *st = arg;
	struct dir_builder b = {
		.n = st->n,
		.plus = st->plus,
		.dir = st->dir,
		.dir_attr = &st->dir_attr,
		.export_root = st->dir == st->exp.root,
		.export_id = st->exp.id,
		.used = nfs3_xdr_readdir_base_size(),
		.maxcount = st->maxcount,
		.dircount = st->dircount,
	};
	struct fs_attr dir_attr;
	uint64_t verf = 0;
	bool eof = false;
	nfsstat3 status;

	b.tail = &b.list;
	b.ptail = &b.plist;
	if (err == 0)
		err = fs_readdir(st->n->fs, &st->ctx, st->dir, st->cookie,
				 st->plus, dir_emit, &b, &verf, &eof,
				 &dir_attr);
	if (err == 0)
		err = b.err;
	/* Nothing yet past the cookie of a directory still being listed:
	 * wait for its next page, or read once more if it just ended.  st
	 * is the waiter's once registered: not touched after. */
	if (err == 0 && b.nentries == 0 && !eof) {
		bool again = !st->reread;
		int w;

		st->reread = false;
		w = fs_readdir_wait(st->n->fs, st->dir, readdir_revalidated,
				    st);
		if (w == 0)
			return;
		if (w == -ENOENT && again) {
			st->reread = true;
			readdir_revalidated(st, 0);
			return;
		}
	}
	status = nfs3_status(err);
	if (status == NFS3_OK && b.nentries == 0 && !eof)
		status = NFS3ERR_TOOSMALL;
	if (status != NFS3_OK) {
		/* Nothing collected has reached the result yet: free it. */
		dirlist3 list = { .entries = b.list };
		dirlistplus3 plist = { .entries = b.plist };

		xdr_free((xdrproc_t)xdr_dirlist3, (char *)&list);
		xdr_free((xdrproc_t)xdr_dirlistplus3, (char *)&plist);
		readdir_fail(st, status,
			     fs_getattr(st->n->fs, st->dir, &dir_attr) == 0
				     ? &dir_attr
				     : NULL);
		return;
	}
	if (st->plus) {
		READDIRPLUS3resok *ok = &st->res.plus.READDIRPLUS3res_u.resok;

		st->res.plus.status = NFS3_OK;
		nfs3_post_op_attr(st->n, &dir_attr, &ok->dir_attributes);
		dir_verf(verf, ok->cookieverf);
		ok->reply.entries = b.plist;
		ok->reply.eof = eof;
	} else {
		READDIR3resok *ok = &st->res.readdir.READDIR3res_u.resok;

		st->res.readdir.status = NFS3_OK;
		nfs3_post_op_attr(st->n, &dir_attr, &ok->dir_attributes);
		dir_verf(verf, ok->cookieverf);
		ok->reply.entries = b.list;
		ok->reply.eof = eof;
	}
	rpc_call_done(st->call);
}

/* What READDIR and READDIRPLUS share once their counts are known. */
static void readdir_begin(struct nfs3_readdir_call *st, struct rpc_call *call,
			  const nfs_fh3 *dir, uint64_t cookie)
{
	nfsstat3 status;

	st->cookie = cookie;
	status = nfs3_fh_verify(call, dir, &st->exp, &st->ctx, &st->dir,
				&st->dir_attr);
	if (status != NFS3_OK) {
		readdir_fail(st, status, NULL);
		return;
	}
	if (st->dir_attr.type != FS_DIR)
		status = NFS3ERR_NOTDIR;
	else if (st->maxcount < nfs3_xdr_readdir_base_size())
		status = NFS3ERR_TOOSMALL;
	if (status != NFS3_OK) {
		readdir_fail(st, status, &st->dir_attr);
		return;
	}
	st->reread = false;
	fs_revalidate_walk(st->n->fs, &st->ctx, st->dir, cookie,
			   readdir_revalidated, st);
}

/* READDIR: names, fileids and cookies within count bytes. */
void nfs3_proc_readdir(struct rpc_call *call, void *argp, void *resp)
{
	struct nfs3_readdir_call *st = resp;
	READDIR3args *args = argp;

	st->call = call;
	st->n = rpc_call_ctx(call);
	st->plus = false;
	st->maxcount = args->count < NFS3_DIR_MAX ? args->count : NFS3_DIR_MAX;
	st->dircount = st->maxcount;
	readdir_begin(st, call, &args->dir, args->cookie);
}

/* READDIRPLUS: READDIR with each entry's attributes and handle. */
void nfs3_proc_readdirplus(struct rpc_call *call, void *argp, void *resp)
{
	struct nfs3_readdir_call *st = resp;
	READDIRPLUS3args *args = argp;

	st->call = call;
	st->n = rpc_call_ctx(call);
	st->plus = true;
	st->maxcount =
		args->maxcount < st->n->rtmax ? args->maxcount : st->n->rtmax;
	st->dircount =
		args->dircount < NFS3_DIR_MAX ? args->dircount : NFS3_DIR_MAX;
	readdir_begin(st, call, &args->dir, args->cookie);
}
