/*
 * tests/fuzz/fuzz_nfs_args.c - the argument decoder of every NFSv3 and
 * MOUNT v3 procedure, and nfsd's checks of what it decoded.
 *
 * Input: one byte picking the procedure (NFS 0..21, then MOUNT 0..5,
 * modulo their count), then the XDR arguments.  They are decoded with
 * the procedure's own decode from the dispatch tables, into zeroed
 * memory of its args_size, as rpc/dispatch.c does; a failed decode is
 * xdr_free'd too, as there.  What decoded goes through the checks the
 * handler makes before it reaches fs/ (handles, names, paths, sattr3),
 * is encoded again (it must take the bytes it came from) and freed.
 * No server, no fs/.
 */
#include <string.h>

#include "mountd/mount3_prot.h"
#include "nfsd/nfs3_internal.h"
#include "tests/fuzz/fuzz.h"

/* Largest decoded argument struct of both programs. */
#define ARGS_MAX 512

static void check_fh(const nfs_fh3 *fh)
{
	uint32_t export_id, gen;
	uint64_t ino;

	FUZZ_CHECK(fh->data.data_len <= NFS3_FHSIZE);
	if (handle_decode(&fuzz_key, fh->data.data_val, fh->data.data_len,
			  &export_id, &ino, &gen) == 0)
		FUZZ_CHECK(fh->data.data_len == HANDLE_LEN);
}

static void check_name(const filename3 *in, enum nfs3_name_use use)
{
	char out[FS_NAME_MAX + 1];
	nfsstat3 st = nfs3_name(in, use, out);

	if (st != NFS3_OK)
		return;
	/* What reaches fs/ is exactly the wire name: one whole component. */
	FUZZ_CHECK(strlen(out) == in->filename3_len);
	FUZZ_CHECK(!strchr(out, '/'));
	if (use != NFS3_NAME_LOOKUP)
		FUZZ_CHECK(strcmp(out, ".") && strcmp(out, ".."));
}

static void check_dirop(const diropargs3 *d, enum nfs3_name_use use)
{
	check_fh(&d->dir);
	check_name(&d->name, use);
}

static void check_sattr(const sattr3 *in)
{
	struct fs_sattr out;

	if (nfs3_sattr(in, &out) != NFS3_OK)
		return;
	FUZZ_CHECK(!(out.mask & FS_SET_ATIME) ||
		   out.atime.tv_nsec < 1000000000);
	FUZZ_CHECK(!(out.mask & FS_SET_MTIME) ||
		   out.mtime.tv_nsec < 1000000000);
	FUZZ_CHECK((out.mode & ~07777u) == 0);
}

static void check_path(const nfspath3 *in)
{
	char out[FS_PATH_MAX + 1];

	if (nfs3_path(in, out) == NFS3_OK)
		FUZZ_CHECK(strlen(out) == in->nfspath3_len);
}

/* What each NFS handler checks before it calls fs/ (nfsd/proc_*.c). */
static void check_nfs(uint32_t proc, const void *a)
{
	switch (proc) {
	case NFSPROC3_GETATTR:
		check_fh(&((const GETATTR3args *)a)->object);
		break;
	case NFSPROC3_SETATTR:
		check_fh(&((const SETATTR3args *)a)->object);
		check_sattr(&((const SETATTR3args *)a)->new_attributes);
		break;
	case NFSPROC3_LOOKUP:
		check_dirop(&((const LOOKUP3args *)a)->what, NFS3_NAME_LOOKUP);
		break;
	case NFSPROC3_ACCESS:
		check_fh(&((const ACCESS3args *)a)->object);
		break;
	case NFSPROC3_READLINK:
		check_fh(&((const READLINK3args *)a)->symlink);
		break;
	case NFSPROC3_READ:
		check_fh(&((const READ3args *)a)->file);
		break;
	case NFSPROC3_WRITE:
		check_fh(&((const WRITE3args *)a)->file);
		break;
	case NFSPROC3_CREATE: {
		const CREATE3args *c = a;

		check_dirop(&c->where, NFS3_NAME_CREATE);
		if (c->how.mode != EXCLUSIVE)
			check_sattr(&c->how.createhow3_u.obj_attributes);
		break;
	}
	case NFSPROC3_MKDIR:
		check_dirop(&((const MKDIR3args *)a)->where, NFS3_NAME_CREATE);
		check_sattr(&((const MKDIR3args *)a)->attributes);
		break;
	case NFSPROC3_SYMLINK: {
		const SYMLINK3args *s = a;

		check_dirop(&s->where, NFS3_NAME_CREATE);
		check_path(&s->symlink.symlink_data);
		check_sattr(&s->symlink.symlink_attributes);
		break;
	}
	case NFSPROC3_MKNOD: {
		const MKNOD3args *m = a;

		check_dirop(&m->where, NFS3_NAME_CREATE);
		if (m->what.type == NF3CHR || m->what.type == NF3BLK)
			check_sattr(
				&m->what.mknoddata3_u.device.dev_attributes);
		else if (m->what.type == NF3SOCK || m->what.type == NF3FIFO)
			check_sattr(&m->what.mknoddata3_u.pipe_attributes);
		break;
	}
	case NFSPROC3_REMOVE:
		check_dirop(&((const REMOVE3args *)a)->object,
			    NFS3_NAME_CHANGE);
		break;
	case NFSPROC3_RMDIR:
		check_dirop(&((const RMDIR3args *)a)->object, NFS3_NAME_CHANGE);
		break;
	case NFSPROC3_RENAME:
		check_dirop(&((const RENAME3args *)a)->from, NFS3_NAME_CHANGE);
		check_dirop(&((const RENAME3args *)a)->to, NFS3_NAME_CHANGE);
		break;
	case NFSPROC3_LINK:
		check_fh(&((const LINK3args *)a)->file);
		check_dirop(&((const LINK3args *)a)->link, NFS3_NAME_CREATE);
		break;
	case NFSPROC3_READDIR:
		check_fh(&((const READDIR3args *)a)->dir);
		break;
	case NFSPROC3_READDIRPLUS:
		check_fh(&((const READDIRPLUS3args *)a)->dir);
		break;
	case NFSPROC3_FSSTAT:
		check_fh(&((const FSSTAT3args *)a)->fsroot);
		break;
	case NFSPROC3_FSINFO:
		check_fh(&((const FSINFO3args *)a)->fsroot);
		break;
	case NFSPROC3_PATHCONF:
		check_fh(&((const PATHCONF3args *)a)->object);
		break;
	case NFSPROC3_COMMIT:
		check_fh(&((const COMMIT3args *)a)->file);
		break;
	}
}

/* MNT and UMNT take a path: one C string, as long as the wire said. */
static void check_mount(uint32_t proc, const void *a, size_t wire_len)
{
	const mnt3_dirpath *p = a;

	if (proc != MOUNTPROC3_MNT && proc != MOUNTPROC3_UMNT)
		return;
	FUZZ_CHECK(*p);
	FUZZ_CHECK(strlen(*p) <= MNTPATHLEN);
	/* Length word, bytes, padding: no NUL ended the string early. */
	FUZZ_CHECK(4 + ((strlen(*p) + 3) & ~(size_t)3) == wire_len);
}

/* Encoding what was decoded must give as many bytes as it came from. */
static void check_reencode(const struct rpc_proc *proc, void *args, u_int used)
{
	static char buf[1024 * 1024 + 65536];
	XDR x;

	xdrmem_create(&x, buf, sizeof(buf), XDR_ENCODE);
	FUZZ_CHECK(proc->decode(&x, args));
	FUZZ_CHECK(xdr_getpos(&x) == used);
	xdr_destroy(&x);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct nfsd n;
	struct rpc_program progs[2] = { nfsd_program(&n), mountd_program(&n) };
	_Alignas(16) uint8_t args[ARGS_MAX];
	const struct rpc_program *prog;
	uint8_t *body;
	const struct rpc_proc *proc;
	uint32_t sel;
	u_int used;
	bool_t ok;
	XDR x;

	if (size < 1)
		return 0;
	sel = data[0] % (progs[0].nprocs + progs[1].nprocs);
	prog = &progs[sel < progs[0].nprocs ? 0 : 1];
	if (prog == &progs[1])
		sel -= progs[0].nprocs;
	proc = &prog->procs[sel];
	if (!proc->decode)
		return 0; /* xdr_void: nothing of the input is read */
	FUZZ_CHECK(proc->args_size <= sizeof(args));
	memset(args, 0, proc->args_size);

	/* Aligned, as a record's arguments are (the in-place decoders
	 * inline from the buffer, which xdrmem allows only when aligned). */
	body = malloc(size);
	FUZZ_CHECK(body != NULL);
	memcpy(body, data + 1, size - 1);
	xdrmem_create(&x, (char *)body, (u_int)(size - 1), XDR_DECODE);
	ok = proc->decode(&x, args);
	used = xdr_getpos(&x);
	xdr_destroy(&x);
	if (ok) {
		FUZZ_CHECK(used <= size - 1);
		if (prog == &progs[0])
			check_nfs(sel, args);
		else
			check_mount(sel, args, used);
		check_reencode(proc, args, used);
	}
	/* As dispatch does on success (call_release) and on failure. */
	xdr_free(proc->decode, (char *)args);
	free(body);
	return 0;
}
