/*
 * nfsd/errmap.c - the one table from negative errno to nfsstat3.
 *
 * Every room below nfsd/ reports errors as negative errno; only here do
 * they become NFS status codes.  The numbers are RFC 1813 section 2.6
 * (nfsstat3); they are spelled out here rather than taken from the
 * generated nfsd/nfs3_prot.h so that this table stands on its own.
 */
#include <errno.h>

#include "nfsd.h"

/* nfsstat3, RFC 1813 section 2.6. */
enum {
	NFS3_OK = 0,
	NFS3ERR_PERM = 1,
	NFS3ERR_NOENT = 2,
	NFS3ERR_IO = 5,
	NFS3ERR_NXIO = 6,
	NFS3ERR_ACCES = 13,
	NFS3ERR_EXIST = 17,
	NFS3ERR_XDEV = 18,
	NFS3ERR_NODEV = 19,
	NFS3ERR_NOTDIR = 20,
	NFS3ERR_ISDIR = 21,
	NFS3ERR_INVAL = 22,
	NFS3ERR_FBIG = 27,
	NFS3ERR_NOSPC = 28,
	NFS3ERR_ROFS = 30,
	NFS3ERR_MLINK = 31,
	NFS3ERR_NAMETOOLONG = 63,
	NFS3ERR_NOTEMPTY = 66,
	NFS3ERR_DQUOT = 69,
	NFS3ERR_STALE = 70,
	NFS3ERR_REMOTE = 71,
	NFS3ERR_BADHANDLE = 10001,
	NFS3ERR_NOT_SYNC = 10002,
	NFS3ERR_NOTSUPP = 10004,
	NFS3ERR_TOOSMALL = 10005,
	NFS3ERR_SERVERFAULT = 10006,
	NFS3ERR_BADTYPE = 10007,
	NFS3ERR_JUKEBOX = 10008
};

/*
 * Map a negative errno (0 for success) to an nfsstat3 value.  Anything
 * not in the table is NFS3ERR_IO: the one error every client handles.
 */
int nfsd_errno_to_stat(int err)
{
	switch (-err) {
	case 0:
		return NFS3_OK;
	case EPERM:
		return NFS3ERR_PERM;
	case ENOENT:
		return NFS3ERR_NOENT;
	case EIO:
		return NFS3ERR_IO;
	case ENXIO:
		return NFS3ERR_NXIO;
	case EACCES:
		return NFS3ERR_ACCES;
	case EEXIST:
		return NFS3ERR_EXIST;
	case EXDEV:
		return NFS3ERR_XDEV;
	case ENODEV:
		return NFS3ERR_NODEV;
	case ENOTDIR:
		return NFS3ERR_NOTDIR;
	case EISDIR:
		return NFS3ERR_ISDIR;
	case EINVAL:
		return NFS3ERR_INVAL;
	case EFBIG:
		return NFS3ERR_FBIG;
	case ENOSPC:
		return NFS3ERR_NOSPC;
	case EROFS:
		return NFS3ERR_ROFS;
	case EMLINK:
		return NFS3ERR_MLINK;
	case ENAMETOOLONG:
		return NFS3ERR_NAMETOOLONG;
	case ENOTEMPTY:
		return NFS3ERR_NOTEMPTY;
	case EDQUOT:
		return NFS3ERR_DQUOT;
	case ESTALE: /* inode gone or wrong generation (fs/, handle checks) */
		return NFS3ERR_STALE;
	case EREMOTE:
		return NFS3ERR_REMOTE;
	case EBADF: /* handle_decode(): wrong length, version or MAC */
		return NFS3ERR_BADHANDLE;
	case ECANCELED: /* fs_setattr(): the ctime guard did not match (3.3.2) */
		return NFS3ERR_NOT_SYNC;
	case ENOTSUP: /* what the store cannot represent */
#if EOPNOTSUPP != ENOTSUP
	case EOPNOTSUPP:
#endif
		return NFS3ERR_NOTSUPP;
	case ENOBUFS: /* READDIR(PLUS): one entry does not fit in count */
		return NFS3ERR_TOOSMALL;
	case EFAULT: /* Linux has no ESERVERFAULT: a server-side bug */
		return NFS3ERR_SERVERFAULT;
	case EPROTOTYPE: /* Linux has no EBADTYPE: e.g. MKNOD of a bad ftype3 */
		return NFS3ERR_BADTYPE;
	/*
	 * Transient: the store is slow or unreachable, or memory or cache room
	 * is short.  JUKEBOX makes the client retry later instead of failing
	 * the application (RFC 1813 section 2.6; DESIGN.md "Failure").
	 */
	case EAGAIN:
	case ETIMEDOUT:
	case ECONNREFUSED:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case ECONNRESET:
	case ENOMEM:
		return NFS3ERR_JUKEBOX;
	default:
		return NFS3ERR_IO;
	}
}
