/*
 * s3/store_file.c - the local-directory backend ("file:///abs/path").
 *
 * Key "a/b.txt" is the file ROOT/a/b.txt; key "a/b/" (a directory marker)
 * is the directory ROOT/a/b.  The backend answers like S3 does, not like
 * POSIX: listings are byte-wise sorted over whole keys with common
 * prefixes and opaque continuation tokens, a PUT replaces an object
 * atomically, parents appear and stay as prefixes.  Because a directory is
 * a marker here, every directory under ROOT is the key "dir/".
 *
 * No key reaches outside ROOT: keys with "", "//", "." or ".." components
 * or a leading '/' are refused, and paths are walked one component at a
 * time with O_NOFOLLOW from the root fd, so a symlink inside ROOT is never
 * followed (it is simply not an object).
 *
 * Metadata lives in user.mapfs.* xattrs as decimal text.  ROOT/.mapfs-tmp
 * stages PUTs and copies (written, fsync'd, then renamed into place) and
 * ROOT/.mapfs-mpu holds multipart uploads; names starting ".mapfs-" at the
 * root are reserved, never listed and never valid keys.
 *
 * The struct holds only fds opened at store_open, never written after, so
 * every call is thread-safe.
 */
#include "s3/store_int.h"
#include "common/log.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define FILE_SCHEME "file://"
#define RESERVED_PREFIX STORE_RESERVED_PREFIX
#define STAGE_DIR RESERVED_PREFIX "tmp"
#define MPU_DIR RESERVED_PREFIX "mpu"
#define LIST_MAX 1000      /* S3 never returns more per page */
#define MPU_PARTS_MAX 10000 /* S3's part number limit */
#define STAGE_STALE_S 3600 /* staged files older than this are crash debris */
#define UPLOAD_ID_BYTES 16
#define TMP_NAME_MAX 24
#define COPY_BUF (1u << 20)
/* S3's etag of a zero-byte object: what a "dir/" marker has there. */
#define MARKER_ETAG "d41d8cd98f00b204e9800998ecf8427e"

#define XA_MODE "user.mapfs.mode"
#define XA_UID "user.mapfs.uid"
#define XA_GID "user.mapfs.gid"
#define XA_MTIME "user.mapfs.mtime"
#define XA_SYMLINK "user.mapfs.symlink"
#define XA_RDEV "user.mapfs.rdev"
#define XA_MPU_KEY "user.mapfs.mpu-key"
#define XA_PROBE "user.mapfs.probe"
#define XA_WID "user.mapfs.wid"
#define XA_LINK "user.mapfs.link"
/* On a directory made by a "dir/" PUT: an explicit marker, kept when
 * emptied.  Directories made only as parents are prefixes and go with
 * their last key, as on S3. */
#define XA_MARKER "user.mapfs.marker"

struct store_file {
	struct store base;
	int root_fd;
	int stage_fd; /* ROOT/.mapfs-tmp */
	int mpu_fd;   /* ROOT/.mapfs-mpu */
	/* An If-Match check and its rename, one at a time in this process
	 * (another process writing ROOT has the window of a HEAD). */
	pthread_mutex_t cond_lock;
};

static struct store_file *sf_of(struct store *st)
{
	return (struct store_file *)st;
}

/* ---- keys and paths ---------------------------------------------------- */

/* A validated key split into NUL-separated components. */
struct keypath {
	char buf[STORE_KEY_MAX + 1];
	const char *leaf; /* last component, inside buf */
	bool marker;      /* the key ended in '/' */
};

/*
 * Validate key and split it.  -EINVAL for anything that could name a path
 * outside ROOT or a reserved name; -ENAMETOOLONG for a component no
 * directory can hold.
 */
static int key_parse(const char *key, struct keypath *kp)
{
	size_t len;
	char *c, *end;

	if (!key)
		return -EINVAL;
	len = strnlen(key, STORE_KEY_MAX + 1);
	if (len == 0 || len > STORE_KEY_MAX || key[0] == '/')
		return -EINVAL;
	memcpy(kp->buf, key, len + 1);
	kp->marker = kp->buf[len - 1] == '/';
	if (kp->marker)
		kp->buf[--len] = '\0';
	if (store_key_reserved(kp->buf))
		return -EINVAL;
	c = kp->buf;
	end = kp->buf + len;
	for (;;) {
		char *slash = memchr(c, '/', (size_t)(end - c));
		size_t n = (size_t)((slash ? slash : end) - c);

		if (n == 0)
			return -EINVAL;
		if ((n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.'))
			return -EINVAL;
		if (n > NAME_MAX)
			return -ENAMETOOLONG;
		if (!slash) {
			kp->leaf = c;
			return 0;
		}
		*slash = '\0';
		c = slash + 1;
	}
}

/*
 * Open directory name in dirfd, never through a symlink.  With mode != 0
 * a missing directory is created (and its entry made durable, since an
 * object is about to be put below it).  A non-directory in the way is
 * ENOENT for a reader and ENOTDIR for a writer.  The caller closes *out.
 */
static int dir_step(int dirfd, const char *name, mode_t mode, int *out)
{
	const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	int fd = openat(dirfd, name, flags);

	if (fd < 0 && errno == ENOENT && mode) {
		if (mkdirat(dirfd, name, mode) == 0) {
			if (fsync(dirfd))
				return -errno;
		} else if (errno != EEXIST) {
			return -errno;
		}
		fd = openat(dirfd, name, flags);
	}
	if (fd < 0) {
		if (errno == ELOOP || errno == ENOTDIR)
			return mode ? -ENOTDIR : -ENOENT;
		return -errno;
	}
	*out = fd;
	return 0;
}

/* Open the directory that holds kp's leaf; with create, mkdir -p it. */
static int kp_parent(const struct store_file *sf, const struct keypath *kp,
		     bool create, int *out)
{
	const char *c;
	int cur, next, err;

	cur = fcntl(sf->root_fd, F_DUPFD_CLOEXEC, 0);
	if (cur < 0)
		return -errno;
	for (c = kp->buf; c != kp->leaf; c += strlen(c) + 1) {
		err = dir_step(cur, c, create ? 0755 : 0, &next);
		close(cur);
		if (err)
			return err;
		cur = next;
	}
	*out = cur;
	return 0;
}

/*
 * Open dirfd's directory for readdir.  A dup() would share the directory
 * offset with every other user of the fd (the root fd: all threads), so a
 * new open file description is made each time.  Closed with closedir().
 */
static int dir_scan(int dirfd, DIR **out)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	*out = fdopendir(fd);
	if (!*out) {
		int err = -errno;

		close(fd);
		return err;
	}
	return 0;
}

/* Open the directory behind marker kp (created with parents if create). */
static int marker_open(const struct store_file *sf, const struct keypath *kp,
		       bool create, int *out, struct stat *sb)
{
	int dfd, err;

	err = kp_parent(sf, kp, create, &dfd);
	if (err)
		return err;
	err = dir_step(dfd, kp->leaf, create ? 0755 : 0, out);
	close(dfd);
	if (err)
		return err;
	if (fstat(*out, sb)) {
		err = -errno;
		close(*out);
	}
	return err;
}

/*
 * Open object kp for reading.  Only a regular file is an object: it is
 * checked before the open (so a FIFO or device is never opened) and again
 * on the fd (in case it was swapped in between).
 */
static int obj_open(const struct store_file *sf, const struct keypath *kp,
		    int *out, struct stat *sb)
{
	int dfd, fd, err;

	err = kp_parent(sf, kp, false, &dfd);
	if (err)
		return err;
	if (fstatat(dfd, kp->leaf, sb, AT_SYMLINK_NOFOLLOW)) {
		err = -errno;
		goto out_close_dir;
	}
	if (!S_ISREG(sb->st_mode)) {
		err = -ENOENT;
		goto out_close_dir;
	}
	fd = openat(dfd, kp->leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
				   O_CLOEXEC);
	if (fd < 0) {
		err = errno == ELOOP ? -ENOENT : -errno;
		goto out_close_dir;
	}
	if (fstat(fd, sb))
		err = -errno;
	else if (!S_ISREG(sb->st_mode))
		err = -ENOENT;
	if (err)
		close(fd);
	else
		*out = fd;
out_close_dir:
	close(dfd);
	return err;
}

/* ---- metadata, etags ---------------------------------------------------- */

static int64_t ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/*
 * An object's etag changes whenever its bytes can have changed: a PUT
 * makes a new inode, an in-place write moves mtime and ctime (and ctime
 * cannot be set back by hand).  A marker has no bytes: S3's empty etag.
 */
static void etag_fill(const struct stat *sb, bool marker,
		      char etag[STORE_ETAG_MAX])
{
	if (marker) {
		snprintf(etag, STORE_ETAG_MAX, "%s", MARKER_ETAG);
		return;
	}
	snprintf(etag, STORE_ETAG_MAX,
		 "%" PRIx64 "-%" PRIx64 "-%" PRIx64 "-%" PRIx64,
		 (uint64_t)sb->st_ino, (uint64_t)sb->st_size,
		 (uint64_t)ts_ns(&sb->st_mtim), (uint64_t)ts_ns(&sb->st_ctim));
}

static void info_fill(const struct stat *sb, bool marker,
		      struct store_info *out)
{
	memset(out, 0, sizeof(*out));
	out->size = marker ? 0 : (uint64_t)sb->st_size;
	etag_fill(sb, marker, out->etag);
	out->last_modified_ns = ts_ns(&sb->st_mtim);
}

/* Set xattr name to val, or remove it when val is NULL. */
static int xattr_store(int fd, const char *name, const char *val)
{
	if (val)
		return fsetxattr(fd, name, val, strlen(val), 0) ? -errno : 0;
	if (fremovexattr(fd, name) && errno != ENODATA)
		return -errno;
	return 0;
}

/* Replace fd's metadata with m (NULL: none), so stale fields never linger. */
static int meta_write(int fd, const struct store_meta *m)
{
	static const struct store_meta none;
	char mode[16], uid[16], gid[16], mtime[24], rdev[24];
	int err;

	if (!m)
		m = &none;
	snprintf(mode, sizeof(mode), "%" PRIu32, m->mode);
	snprintf(uid, sizeof(uid), "%" PRIu32, m->uid);
	snprintf(gid, sizeof(gid), "%" PRIu32, m->gid);
	snprintf(mtime, sizeof(mtime), "%" PRId64, m->mtime_ns);
	snprintf(rdev, sizeof(rdev), "%" PRId64, (int64_t)m->rdev);
	err = xattr_store(fd, XA_MODE, m->has_mode ? mode : NULL);
	if (!err)
		err = xattr_store(fd, XA_UID, m->has_uid ? uid : NULL);
	if (!err)
		err = xattr_store(fd, XA_GID, m->has_gid ? gid : NULL);
	if (!err)
		err = xattr_store(fd, XA_MTIME, m->has_mtime ? mtime : NULL);
	if (!err)
		err = xattr_store(fd, XA_SYMLINK, m->symlink ? "1" : NULL);
	if (!err)
		err = xattr_store(fd, XA_RDEV,
				  m->has_rdev && m->rdev <= INT64_MAX ? rdev
								      : NULL);
	if (!err)
		err = xattr_store(fd, XA_WID, m->wid[0] ? m->wid : NULL);
	if (!err)
		err = xattr_store(fd, XA_LINK, m->link[0] ? m->link : NULL);
	return err;
}

/* Read xattr name as a decimal; 1 if present and well formed, 0 if not. */
static int xattr_num(int fd, const char *name, bool is_signed, int64_t lo,
		     int64_t hi, int64_t *out)
{
	char buf[32], *end;
	ssize_t n;

	n = fgetxattr(fd, name, buf, sizeof(buf) - 1);
	if (n < 0) {
		/* Absent, or too long to be ours: a file written by hand. */
		if (errno == ENODATA || errno == ERANGE || errno == ENOTSUP)
			return 0;
		return -errno;
	}
	buf[n] = '\0';
	if (n == 0 || (!is_signed && buf[0] == '-'))
		return 0;
	errno = 0;
	*out = strtoll(buf, &end, 10);
	if (errno || *end || *out < lo || *out > hi)
		return 0;
	return 1;
}

/* fd's metadata; malformed fields read as absent, never as an error. */
static int meta_read(int fd, struct store_meta *m)
{
	int64_t v;
	int r;

	memset(m, 0, sizeof(*m));
	r = xattr_num(fd, XA_MODE, false, 0, UINT32_MAX, &v);
	if (r < 0)
		return r;
	m->has_mode = r;
	m->mode = r ? (uint32_t)v : 0;
	r = xattr_num(fd, XA_UID, false, 0, UINT32_MAX, &v);
	if (r < 0)
		return r;
	m->has_uid = r;
	m->uid = r ? (uint32_t)v : 0;
	r = xattr_num(fd, XA_GID, false, 0, UINT32_MAX, &v);
	if (r < 0)
		return r;
	m->has_gid = r;
	m->gid = r ? (uint32_t)v : 0;
	r = xattr_num(fd, XA_MTIME, true, INT64_MIN, INT64_MAX, &v);
	if (r < 0)
		return r;
	m->has_mtime = r;
	m->mtime_ns = r ? v : 0;
	r = xattr_num(fd, XA_SYMLINK, false, 1, 1, &v);
	if (r < 0)
		return r;
	m->symlink = r;
	r = xattr_num(fd, XA_RDEV, false, 0, INT64_MAX, &v);
	if (r < 0)
		return r;
	m->has_rdev = r;
	m->rdev = r ? (uint64_t)v : 0;
	r = (int)fgetxattr(fd, XA_WID, m->wid, sizeof(m->wid) - 1);
	m->wid[r > 0 ? r : 0] = '\0';
	r = (int)fgetxattr(fd, XA_LINK, m->link, sizeof(m->link) - 1);
	m->link[r > 0 ? r : 0] = '\0';
	return 0;
}

/* ---- bytes -------------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len) {
		n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* pread/pwrite copy, for when the kernel cannot copy_file_range. */
static int copy_slow(int in, uint64_t in_off, int out, uint64_t out_off,
		     uint64_t len)
{
	char *buf = malloc(COPY_BUF);
	ssize_t n, w;
	int err = 0;

	if (!buf)
		return -ENOMEM;
	while (len) {
		n = pread(in, buf, len < COPY_BUF ? len : COPY_BUF,
			  (off_t)in_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -EIO;
			break;
		}
		for (w = 0; w < n;) {
			ssize_t k = pwrite(out, buf + w, (size_t)(n - w),
					   (off_t)(out_off + (uint64_t)w));
			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0) {
				err = -errno;
				goto out_free;
			}
			w += k;
		}
		in_off += (uint64_t)n;
		out_off += (uint64_t)n;
		len -= (uint64_t)n;
	}
out_free:
	free(buf);
	return err;
}

/*
 * Copy bytes [in_off, in_off+len) of in to out at out_off, in the kernel
 * where it can (reflinks on XFS/btrfs).  Explicit offsets leave both fds'
 * positions alone, so a caller's shared fd is safe.  A source shorter than
 * len is -EIO: the object would silently be truncated otherwise.
 */
static int copy_bytes(int in, uint64_t in_off, int out, uint64_t out_off,
		      uint64_t len)
{
	while (len) {
		loff_t ip = (loff_t)in_off, op = (loff_t)out_off;
		size_t chunk = len < (1u << 30) ? (size_t)len : (1u << 30);
		ssize_t n = copy_file_range(in, &ip, out, &op, chunk, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EXDEV || errno == ENOSYS ||
			    errno == EOPNOTSUPP || errno == EINVAL)
				return copy_slow(in, in_off, out, out_off, len);
			return -errno;
		}
		if (n == 0)
			return -EIO;
		in_off += (uint64_t)n;
		out_off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

/* ---- staging: every object appears by rename, whole or not at all ----- */

static int rand_hex(char *out, size_t nbytes)
{
	unsigned char raw[32];
	size_t got = 0, i;
	ssize_t n;

	while (got < nbytes) {
		n = getrandom(raw + got, nbytes - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	for (i = 0; i < nbytes; i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

/*
 * Create a fresh temp file in dirfd.  Random names need no shared counter
 * and cannot collide with another thread or process.
 */
static int tmp_create(int dirfd, char name[TMP_NAME_MAX], int *out)
{
	int fd, err, tries;

	for (tries = 0; tries < 8; tries++) {
		memcpy(name, "t.", 2);
		err = rand_hex(name + 2, 8);
		if (err)
			return err;
		fd = openat(dirfd, name,
			    O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0644);
		if (fd >= 0) {
			*out = fd;
			return 0;
		}
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/*
 * Does kp's object (in its directory dfd) hold cond?  0, -ESTALE
 * (another version; for STORE_IF_NONE: any), -ENOENT (none: for
 * STORE_IF_MATCH).  An object carrying cond's write id is this write's
 * own (an earlier try): 0.
 */
static int cond_match(int dfd, const struct keypath *kp,
		      const struct store_cond *cond)
{
	char etag[STORE_ETAG_MAX];
	struct store_meta m;
	struct stat sb;
	int fd, err;

	fd = openat(dfd, kp->leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
				   O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return cond->kind == STORE_IF_NONE ? 0 : -ENOENT;
	if (fd < 0)
		return errno == ELOOP ? -ESTALE : -errno;
	err = fstat(fd, &sb) ? -errno : !S_ISREG(sb.st_mode) ? -ESTALE : 0;
	if (!err && cond->wid[0] && !meta_read(fd, &m) &&
	    !strcmp(m.wid, cond->wid)) {
		close(fd);
		return 0;
	}
	close(fd);
	if (err || cond->kind == STORE_IF_NONE)
		return err ? err : -ESTALE;
	etag_fill(&sb, false, etag);
	return strcmp(etag, cond->etag) ? -ESTALE : 0;
}

/*
 * Rename staged tmp into kp's place in dfd if cond (NULL: none) holds,
 * checked and renamed under cond_lock: one at a time in this process (a
 * writer outside it between the check and the rename is overwritten,
 * the window of a HEAD).
 */
static int cond_rename(struct store_file *sf, const char *tmp, int dfd,
		       const struct keypath *kp, const struct store_cond *cond)
{
	int err;

	if (!cond || cond->kind == STORE_IF_ANY)
		return renameat(sf->stage_fd, tmp, dfd, kp->leaf) ? -errno : 0;
	pthread_mutex_lock(&sf->cond_lock);
	err = cond_match(dfd, kp, cond);
	if (!err && renameat(sf->stage_fd, tmp, dfd, kp->leaf))
		err = -errno;
	pthread_mutex_unlock(&sf->cond_lock);
	return err;
}

/*
 * Move staged file tmp (open as fd) into kp's place if cond holds:
 * metadata, fsync, rename over any old object, fsync the directory.  The
 * info is taken after the rename, which moves ctime, so a HEAD later sees
 * the same etag.  On failure the caller unlinks tmp (harmless if it was
 * renamed already).
 */
static int stage_commit(struct store_file *sf, int fd, const char *tmp,
			const struct keypath *kp, const struct store_meta *meta,
			const struct store_cond *cond, struct store_info *out)
{
	struct stat sb;
	int dfd, err;

	err = meta_write(fd, meta);
	if (!err && fsync(fd))
		err = -errno;
	if (err)
		return err;
	err = kp_parent(sf, kp, true, &dfd);
	if (err)
		return err;
	err = cond_rename(sf, tmp, dfd, kp, cond);
	if (!err && fsync(dfd))
		err = -errno;
	close(dfd);
	if (err || !out)
		return err;
	if (fstat(fd, &sb))
		return -errno;
	info_fill(&sb, false, out);
	if (meta)
		out->meta = *meta;
	return 0;
}

/* Create (or refresh the metadata of) the directory behind marker kp. */
static int marker_put(struct store_file *sf, const struct keypath *kp,
		      const struct store_meta *meta, struct store_info *out)
{
	struct stat sb;
	int fd, err;

	err = marker_open(sf, kp, true, &fd, &sb);
	if (err)
		return err;
	err = meta_write(fd, meta);
	if (!err)
		err = xattr_store(fd, XA_MARKER, "1");
	if (!err && fsync(fd))
		err = -errno;
	if (!err && out) {
		if (fstat(fd, &sb))
			err = -errno;
		else
			info_fill(&sb, true, out);
		if (!err && meta)
			out->meta = *meta;
	}
	close(fd);
	return err;
}

/* Remove crash debris from staging; files still being written are young. */
static void stage_sweep(int stage_fd)
{
	time_t now = time(NULL);
	struct dirent *de;
	struct stat sb;
	DIR *d;

	if (dir_scan(stage_fd, &d))
		return;
	while ((de = readdir(d))) {
		if (fstatat(stage_fd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(sb.st_mode))
			continue;
		if (now - sb.st_mtim.tv_sec > STAGE_STALE_S)
			unlinkat(stage_fd, de->d_name, 0);
	}
	closedir(d);
}

/* ---- open, close -------------------------------------------------------- */

/* mkdir -p of an absolute path (the admin's ROOT: symlinks allowed there). */
static int path_mkdirs(const char *path)
{
	char buf[PATH_MAX];
	size_t len = strlen(path), i;
	struct stat sb;

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		/* An existing directory may answer EACCES or EROFS, not EEXIST. */
		if (mkdir(buf, 0755) && errno != EEXIST) {
			int err = -errno;

			if (stat(buf, &sb) || !S_ISDIR(sb.st_mode))
				return err;
		}
		if (i < len)
			buf[i] = '/';
	}
	return 0;
}

static void file_close(struct store *st)
{
	struct store_file *sf = sf_of(st);

	if (sf->mpu_fd >= 0)
		close(sf->mpu_fd);
	if (sf->stage_fd >= 0)
		close(sf->stage_fd);
	if (sf->root_fd >= 0)
		close(sf->root_fd);
	pthread_mutex_destroy(&sf->cond_lock);
	free(sf);
}

static int file_open(const struct store_opts *opts, struct store **out)
{
	const char *path = opts->url + strlen(FILE_SCHEME);
	struct store_file *sf;
	int err;

	if (strncmp(opts->url, FILE_SCHEME, strlen(FILE_SCHEME)) ||
	    path[0] != '/')
		return -EINVAL;
	sf = calloc(1, sizeof(*sf));
	if (!sf)
		return -ENOMEM;
	sf->root_fd = sf->stage_fd = sf->mpu_fd = -1;
	pthread_mutex_init(&sf->cond_lock, NULL);
	err = path_mkdirs(path);
	if (err)
		goto out_close;
	sf->root_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sf->root_fd < 0) {
		err = -errno;
		goto out_close;
	}
	err = dir_step(sf->root_fd, STAGE_DIR, 0700, &sf->stage_fd);
	if (!err)
		err = dir_step(sf->root_fd, MPU_DIR, 0700, &sf->mpu_fd);
	if (err)
		goto out_close;
	/* Metadata needs user xattrs; refuse now rather than lose it later. */
	if (fsetxattr(sf->stage_fd, XA_PROBE, "1", 1, 0)) {
		err = -errno;
		if (err == -ENOTSUP)
			log_error("store: %s: file system has no user xattrs "
				  "(needed for object metadata)", opts->url);
		goto out_close;
	}
	fremovexattr(sf->stage_fd, XA_PROBE);
	stage_sweep(sf->stage_fd);
	*out = &sf->base;
	return 0;
out_close:
	file_close(&sf->base);
	return err;
}

/* ---- objects ------------------------------------------------------------ */

static int file_head(struct store *st, const char *key, struct store_info *out)
{
	struct store_file *sf = sf_of(st);
	struct keypath kp;
	struct stat sb;
	int fd, err;

	err = key_parse(key, &kp);
	if (err)
		return err;
	if (kp.marker)
		err = marker_open(sf, &kp, false, &fd, &sb);
	else
		err = obj_open(sf, &kp, &fd, &sb);
	if (err)
		return err;
	info_fill(&sb, kp.marker, out);
	err = meta_read(fd, &out->meta);
	close(fd);
	return err;
}

/*
 * Open key's object for reading: 0 with *fd (and its stat), 1 for a
 * directory marker (no bytes: no fd), or -errno.
 */
static int read_open(struct store_file *sf, const char *key, int *fd,
		     struct stat *sb)
{
	struct keypath kp;
	int err = key_parse(key, &kp);

	if (err)
		return err;
	if (kp.marker) {
		err = marker_open(sf, &kp, false, fd, sb);
		if (!err)
			close(*fd);
		return err ? err : 1;
	}
	return obj_open(sf, &kp, fd, sb);
}

static int file_get(struct store *st, const char *key, uint64_t off,
		    size_t len, void *buf, size_t *got)
{
	struct store_file *sf = sf_of(st);
	struct stat sb;
	size_t done = 0;
	ssize_t n;
	int fd, err;

	*got = 0;
	err = read_open(sf, key, &fd, &sb);
	if (err)
		return err < 0 ? err : 0;
	if (off >= (uint64_t)sb.st_size)
		goto out_close;
	while (done < len) {
		n = pread(fd, (char *)buf + done, len - done,
			  (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*got = done;
out_close:
	close(fd);
	return err;
}

/* The bounce buffer of file_get_stream. */
#define STREAM_BUF (1u << 20)

/*
 * Stream [off, off+len) of one open version of the object: the fd pins
 * its inode, so a PUT meanwhile (a new inode) is not mixed in; with
 * if_match, another version than that is -ESTALE before any byte.
 */
static int file_get_stream(struct store *st, const char *key,
			   const char *if_match, uint64_t off, uint64_t len,
			   store_sink_fn sink, void *arg, uint64_t *got)
{
	struct store_file *sf = sf_of(st);
	char etag[STORE_ETAG_MAX];
	struct stat sb;
	char *buf = NULL;
	int fd, err;

	*got = 0;
	err = read_open(sf, key, &fd, &sb);
	if (err)
		return err < 0 ? err : 0;
	etag_fill(&sb, false, etag);
	if (if_match && strcmp(etag, if_match))
		err = -ESTALE;
	else if (off < (uint64_t)sb.st_size && len && !(buf = malloc(STREAM_BUF)))
		err = -ENOMEM;
	while (!err && buf && *got < len) {
		size_t want = len - *got < STREAM_BUF ? (size_t)(len - *got)
						      : STREAM_BUF;
		ssize_t n = pread(fd, buf, want, (off_t)(off + *got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			err = -errno;
		else if (n == 0)
			break; /* the end of the object */
		else if (!(err = sink(arg, buf, (size_t)n)))
			*got += (uint64_t)n;
	}
	free(buf);
	close(fd);
	return err;
}

static int file_put(struct store *st, const char *key, const void *buf,
		    size_t len, const struct store_meta *meta,
		    const struct store_cond *cond, struct store_info *out)
{
	struct store_file *sf = sf_of(st);
	char tmp[TMP_NAME_MAX];
	struct keypath kp;
	int fd, err;

	err = key_parse(key, &kp);
	if (err)
		return err;
	if (kp.marker)
		return len ? -EINVAL : marker_put(sf, &kp, meta, out);
	err = tmp_create(sf->stage_fd, tmp, &fd);
	if (err)
		return err;
	err = write_all(fd, buf, len);
	if (!err)
		err = stage_commit(sf, fd, tmp, &kp, meta, cond, out);
	if (err)
		unlinkat(sf->stage_fd, tmp, 0);
	close(fd);
	return err;
}

static int file_put_fd(struct store *st, const char *key, int src,
		       uint64_t len, const struct store_meta *meta,
		       const struct store_cond *cond, struct store_info *out)
{
	struct store_file *sf = sf_of(st);
	char tmp[TMP_NAME_MAX];
	struct keypath kp;
	int fd, err;

	err = key_parse(key, &kp);
	if (err)
		return err;
	if (kp.marker)
		return len ? -EINVAL : marker_put(sf, &kp, meta, out);
	err = tmp_create(sf->stage_fd, tmp, &fd);
	if (err)
		return err;
	err = copy_bytes(src, 0, fd, 0, len);
	if (!err)
		err = stage_commit(sf, fd, tmp, &kp, meta, cond, out);
	if (err)
		unlinkat(sf->stage_fd, tmp, 0);
	close(fd);
	return err;
}

/*
 * Copy src to dst.  The source fd pins one inode, and PUTs replace inodes,
 * so the copy is of one whole version even if src is overwritten meanwhile.
 * A marker copies to a marker only (a directory rename copies them).
 */
static int file_copy(struct store *st, const char *src, const char *dst,
		     const struct store_meta *meta, struct store_info *out)
{
	struct store_file *sf = sf_of(st);
	struct keypath skp, dkp;
	struct store_meta smeta;
	char tmp[TMP_NAME_MAX];
	struct stat sb;
	int sfd, fd, err;

	err = key_parse(src, &skp);
	if (!err)
		err = key_parse(dst, &dkp);
	if (err)
		return err;
	if (skp.marker != dkp.marker)
		return -EINVAL;
	if (skp.marker)
		err = marker_open(sf, &skp, false, &sfd, &sb);
	else
		err = obj_open(sf, &skp, &sfd, &sb);
	if (err)
		return err;
	if (!meta) {
		err = meta_read(sfd, &smeta);
		if (err)
			goto out_close_src;
		meta = &smeta;
	}
	if (skp.marker) {
		err = marker_put(sf, &dkp, meta, out);
		goto out_close_src;
	}
	err = tmp_create(sf->stage_fd, tmp, &fd);
	if (err)
		goto out_close_src;
	err = copy_bytes(sfd, 0, fd, 0, (uint64_t)sb.st_size);
	if (!err)
		err = stage_commit(sf, fd, tmp, &dkp, meta, NULL, out);
	if (err)
		unlinkat(sf->stage_fd, tmp, 0);
	close(fd);
out_close_src:
	close(sfd);
	return err;
}

/*
 * After key went: remove the directories above it that are only
 * prefixes (no XA_MARKER) and now empty, deepest first, as S3 forgets a
 * prefix with its last key.  Best effort: a directory that is not empty,
 * is a marker, or changed meanwhile simply stays.
 */
static void prune_prefixes(struct store_file *sf, const char *key)
{
	char path[STORE_KEY_MAX + 1];
	size_t len = strlen(key);
	char *slash;

	if (len >= sizeof(path))
		return;
	memcpy(path, key, len + 1);
	if (len && path[len - 1] == '/')
		path[len - 1] = '\0';
	while ((slash = strrchr(path, '/'))) {
		int fd;
		bool marker;

		*slash = '\0';
		fd = openat(sf->root_fd, path,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return;
		marker = fgetxattr(fd, XA_MARKER, NULL, 0) >= 0;
		close(fd);
		if (marker || unlinkat(sf->root_fd, path, AT_REMOVEDIR))
			return;
	}
}

/*
 * Delete a key; an absent key (or a symlink or directory where an object
 * would be) is success, as on S3.  A marker whose directory still has
 * children stays as a prefix, but loses its metadata like the S3 marker
 * object would.  Parents that were only prefixes go with their last key.
 */
static int file_del(struct store *st, const char *key)
{
	struct store_file *sf = sf_of(st);
	struct keypath kp;
	struct stat sb;
	int dfd, fd, err;

	err = key_parse(key, &kp);
	if (err)
		return err;
	err = kp_parent(sf, &kp, false, &dfd);
	if (err)
		return err == -ENOENT ? 0 : err;
	if (kp.marker) {
		if (unlinkat(dfd, kp.leaf, AT_REMOVEDIR) == 0) {
			err = fsync(dfd) ? -errno : 0;
		} else if (errno == ENOTEMPTY || errno == EEXIST) {
			err = dir_step(dfd, kp.leaf, 0, &fd);
			if (!err) {
				err = meta_write(fd, NULL);
				if (!err)
					err = xattr_store(fd, XA_MARKER, NULL);
				close(fd);
			} else if (err == -ENOENT) {
				err = 0; /* emptied and removed meanwhile */
			}
		} else if (errno != ENOENT && errno != ENOTDIR) {
			err = -errno;
		}
		goto out_close_dir;
	}
	if (fstatat(dfd, kp.leaf, &sb, AT_SYMLINK_NOFOLLOW)) {
		err = errno == ENOENT ? 0 : -errno;
		goto out_close_dir;
	}
	if (!S_ISREG(sb.st_mode))
		goto out_close_dir;
	if (unlinkat(dfd, kp.leaf, 0))
		err = errno == ENOENT ? 0 : -errno;
	else
		err = fsync(dfd) ? -errno : 0;
out_close_dir:
	close(dfd);
	if (!err)
		prune_prefixes(sf, key);
	return err;
}

static int file_del_many(struct store *st, const char *const *keys, size_t n)
{
	int first = 0, err;
	size_t i;

	/* Like DeleteObjects: every key is tried, the first error reported. */
	for (i = 0; i < n; i++) {
		err = file_del(st, keys[i]);
		if (err && !first)
			first = err;
	}
	return first;
}

static int file_statfs(struct store *st, uint64_t *total_bytes,
		       uint64_t *avail_bytes)
{
	struct statvfs vfs;

	if (fstatvfs(sf_of(st)->root_fd, &vfs))
		return -errno;
	*total_bytes = (uint64_t)vfs.f_blocks * vfs.f_frsize;
	*avail_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	return 0;
}

/* ---- multipart: ROOT/.mapfs-mpu/<id>/<partno>, key in an xattr --------- */

static bool upload_id_ok(const char *id)
{
	size_t i;

	if (!id || strlen(id) != 2 * UPLOAD_ID_BYTES)
		return false;
	for (i = 0; i < 2 * UPLOAD_ID_BYTES; i++)
		if (!((id[i] >= '0' && id[i] <= '9') ||
		      (id[i] >= 'a' && id[i] <= 'f')))
			return false;
	return true;
}

/*
 * Open upload id's directory.  An id that does not exist or belongs to
 * another key is ENOENT (S3's NoSuchUpload); a malformed one is EINVAL.
 */
static int upload_open(const struct store_file *sf, const char *key,
		       const char *id, int *out)
{
	char buf[STORE_KEY_MAX + 1];
	ssize_t n;
	int fd, err;

	if (!upload_id_ok(id))
		return -EINVAL;
	err = dir_step(sf->mpu_fd, id, 0, &fd);
	if (err)
		return err;
	n = fgetxattr(fd, XA_MPU_KEY, buf, sizeof(buf));
	if (n < 0) {
		err = errno == ENODATA ? -ENOENT : -errno;
		goto out_close;
	}
	if ((size_t)n != strlen(key) || memcmp(buf, key, (size_t)n)) {
		err = -ENOENT;
		goto out_close;
	}
	*out = fd;
	return 0;
out_close:
	close(fd);
	return err;
}

/* Remove upload id's directory and its parts (ufd is that directory). */
static int upload_remove(const struct store_file *sf, int ufd, const char *id)
{
	struct dirent *de;
	int err = 0;
	DIR *d;

	err = dir_scan(ufd, &d);
	if (err)
		return err;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (unlinkat(ufd, de->d_name, 0) && errno != ENOENT && !err)
			err = -errno;
	}
	closedir(d);
	if (!err && unlinkat(sf->mpu_fd, id, AT_REMOVEDIR))
		err = -errno;
	return err;
}

static int file_mpu_create(struct store *st, const char *key,
			   const struct store_meta *meta, char **upload_id)
{
	struct store_file *sf = sf_of(st);
	char id[2 * UPLOAD_ID_BYTES + 1];
	struct keypath kp;
	int fd, err;

	err = key_parse(key, &kp);
	if (err)
		return err;
	if (kp.marker)
		return -EINVAL;
	err = rand_hex(id, UPLOAD_ID_BYTES);
	if (err)
		return err;
	if (mkdirat(sf->mpu_fd, id, 0700))
		return -errno;
	err = dir_step(sf->mpu_fd, id, 0, &fd);
	if (err)
		goto out_rmdir;
	err = xattr_store(fd, XA_MPU_KEY, key);
	if (!err)
		err = meta_write(fd, meta);
	if (!err && (fsync(fd) || fsync(sf->mpu_fd)))
		err = -errno;
	close(fd);
	if (err)
		goto out_rmdir;
	*upload_id = strdup(id);
	if (!*upload_id) {
		err = -ENOMEM;
		goto out_rmdir;
	}
	return 0;
out_rmdir:
	unlinkat(sf->mpu_fd, id, AT_REMOVEDIR);
	return err;
}

/*
 * Store bytes [off, off+len) of in as part partno of the upload in ufd:
 * staged beside it and renamed, so a re-sent part replaces the old one
 * whole.  The etag is taken after the rename, as complete will see it.
 */
static int part_store(int ufd, int partno, int in, uint64_t off, uint64_t len,
		      char etag[STORE_ETAG_MAX])
{
	char tmp[TMP_NAME_MAX], name[16];
	struct stat sb;
	int fd, err;

	err = tmp_create(ufd, tmp, &fd);
	if (err)
		return err;
	snprintf(name, sizeof(name), "%d", partno);
	err = copy_bytes(in, off, fd, 0, len);
	if (!err && fsync(fd))
		err = -errno;
	if (err)
		goto out_unlink;
	if (renameat(ufd, tmp, ufd, name) || fsync(ufd) || fstat(fd, &sb)) {
		err = -errno;
		goto out_unlink;
	}
	etag_fill(&sb, false, etag);
	close(fd);
	return 0;
out_unlink:
	unlinkat(ufd, tmp, 0);
	close(fd);
	return err;
}

static int file_mpu_part(struct store *st, const char *key,
			 const char *upload_id, int partno, int fd,
			 uint64_t off, uint64_t len, char etag[STORE_ETAG_MAX])
{
	struct keypath kp;
	int ufd, err;

	if (partno < 1 || partno > MPU_PARTS_MAX)
		return -EINVAL;
	err = key_parse(key, &kp);
	if (err)
		return err;
	err = upload_open(sf_of(st), key, upload_id, &ufd);
	if (err)
		return err;
	err = part_store(ufd, partno, fd, off, len, etag);
	close(ufd);
	return err;
}

static int file_mpu_part_copy(struct store *st, const char *key,
			      const char *upload_id, int partno,
			      const char *src, uint64_t off, uint64_t len,
			      char etag[STORE_ETAG_MAX])
{
	struct store_file *sf = sf_of(st);
	struct keypath kp, skp;
	struct stat sb;
	int ufd, sfd, err;

	if (partno < 1 || partno > MPU_PARTS_MAX)
		return -EINVAL;
	err = key_parse(key, &kp);
	if (!err)
		err = key_parse(src, &skp);
	if (err)
		return err;
	if (skp.marker)
		return -EINVAL;
	err = upload_open(sf, key, upload_id, &ufd);
	if (err)
		return err;
	err = obj_open(sf, &skp, &sfd, &sb);
	if (err)
		goto out_close_upload;
	/* S3 answers InvalidRange for a range past the source's end. */
	if (off > (uint64_t)sb.st_size || len > (uint64_t)sb.st_size - off)
		err = -EINVAL;
	else
		err = part_store(ufd, partno, sfd, off, len, etag);
	close(sfd);
out_close_upload:
	close(ufd);
	return err;
}

/*
 * Concatenate parts 1..nparts (each must still have the etag its upload
 * returned, else EINVAL like S3's InvalidPart) into staging, give it the
 * metadata from create, rename it into place, then drop the upload.
 */
static int file_mpu_complete(struct store *st, const char *key,
			     const char *upload_id, int nparts,
			     char (*etags)[STORE_ETAG_MAX],
			     const struct store_cond *cond,
			     struct store_info *out)
{
	struct store_file *sf = sf_of(st);
	char tmp[TMP_NAME_MAX], name[16], etag[STORE_ETAG_MAX];
	struct store_meta meta;
	struct keypath kp;
	struct stat sb;
	uint64_t pos = 0;
	int ufd, fd, pfd, i, err;

	if (nparts < 1 || nparts > MPU_PARTS_MAX)
		return -EINVAL;
	err = key_parse(key, &kp);
	if (err)
		return err;
	err = upload_open(sf, key, upload_id, &ufd);
	if (err)
		return err;
	err = tmp_create(sf->stage_fd, tmp, &fd);
	if (err)
		goto out_close_upload;
	for (i = 1; i <= nparts && !err; i++) {
		snprintf(name, sizeof(name), "%d", i);
		pfd = openat(ufd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (pfd < 0) {
			err = errno == ENOENT ? -EINVAL : -errno;
			break;
		}
		if (fstat(pfd, &sb)) {
			err = -errno;
		} else {
			etag_fill(&sb, false, etag);
			if (strncmp(etag, etags[i - 1], STORE_ETAG_MAX))
				err = -EINVAL;
			else
				err = copy_bytes(pfd, 0, fd, pos,
						 (uint64_t)sb.st_size);
			pos += (uint64_t)sb.st_size;
		}
		close(pfd);
	}
	if (!err)
		err = meta_read(ufd, &meta);
	if (!err)
		err = stage_commit(sf, fd, tmp, &kp, &meta, cond, out);
	if (err)
		goto out_unlink;
	close(fd);
	/* The object is in place: a leftover upload dir is only clutter. */
	upload_remove(sf, ufd, upload_id);
	close(ufd);
	return 0;
out_unlink:
	unlinkat(sf->stage_fd, tmp, 0);
	close(fd);
out_close_upload:
	close(ufd);
	return err;
}

static int file_mpu_abort(struct store *st, const char *key,
			  const char *upload_id)
{
	struct store_file *sf = sf_of(st);
	struct keypath kp;
	int ufd, err;

	err = key_parse(key, &kp);
	if (err)
		return err;
	err = upload_open(sf, key, upload_id, &ufd);
	if (err)
		return err;
	err = upload_remove(sf, ufd, upload_id);
	close(ufd);
	return err;
}

/* Uploads are directories ROOT/.mapfs-mpu/<id> with the key in an xattr. */
static int file_mpu_list(struct store *st, const char *prefix,
			 struct store_upload **out, size_t *n)
{
	struct store_file *sf = sf_of(st);
	struct store_upload *v = NULL;
	char key[STORE_KEY_MAX + 1];
	struct dirent *de;
	size_t nv = 0, plen;
	DIR *d;
	int err;

	if (!prefix || (plen = strlen(prefix)) > STORE_KEY_MAX)
		return -EINVAL;
	err = dir_scan(sf->mpu_fd, &d);
	if (err)
		return err;
	while (!err && (de = readdir(d))) {
		ssize_t klen;
		int ufd;

		/* Not an upload (".", "..", a half-made one): skip it. */
		if (!upload_id_ok(de->d_name) ||
		    dir_step(sf->mpu_fd, de->d_name, 0, &ufd))
			continue;
		klen = fgetxattr(ufd, XA_MPU_KEY, key, sizeof(key) - 1);
		close(ufd);
		if (klen < 0 || (size_t)klen < plen)
			continue;
		key[klen] = '\0';
		if (!strncmp(key, prefix, plen))
			err = store_uploads_add(&v, &nv, key, de->d_name);
	}
	closedir(d);
	if (err) {
		store_uploads_free(v, nv);
		return err;
	}
	*out = v;
	*n = nv;
	return 0;
}

/* ---- listing ---------------------------------------------------------------
 *
 * The key set is every regular file ("d/f") and every directory ("d/")
 * under ROOT.  Sorting a directory's children by name, with a '/' after
 * each directory's name, and descending into a directory right after its
 * marker yields that set in S3's byte-wise order: all keys under "d/" form
 * one contiguous run that starts with "d/" itself.  A subtree whose keys
 * all roll up into one common prefix, or all sort before the token, is
 * never read.
 */

struct lister {
	const char *prefix;
	size_t plen;
	char delim;
	char tok_kind; /* 0 first page, 'K' after a key, 'P' after a prefix */
	const char *tok;
	size_t toklen;
	unsigned max;
	struct store_page *page;
	size_t ecap, pcap;
	char last_kind; /* 'K' or 'P': which array holds the last item */
	bool more;      /* found an item past max: the page is truncated */
	char key[STORE_KEY_MAX + 2]; /* the key being built */
};

struct child {
	char *name;
	bool dir;
};

#define LST_FULL 1

/*
 * True if key belongs after the token.  After a common prefix, every key
 * that rolled up into it was already returned with it.
 */
static bool lst_after(const struct lister *l, const char *key)
{
	if (!l->tok_kind)
		return true;
	if (strcmp(key, l->tok) <= 0)
		return false;
	return l->tok_kind == 'K' || strncmp(key, l->tok, l->toklen) != 0;
}

/* True if no key starting with pfx (of length n) can come after the token. */
static bool lst_tree_done(const struct lister *l, const char *pfx, size_t n)
{
	if (!l->tok_kind)
		return false;
	if (l->tok_kind == 'P' && n >= l->toklen &&
	    memcmp(pfx, l->tok, l->toklen) == 0)
		return true;
	/* pfx sorts before the token and is not a prefix of it. */
	return strncmp(pfx, l->tok, n) < 0;
}

/* Length of the common prefix key rolls up into, or 0 if it does not. */
static size_t lst_rollup(const struct lister *l, const char *key, size_t klen)
{
	const char *d;

	if (!l->delim)
		return 0;
	d = memchr(key + l->plen, l->delim, klen - l->plen);
	return d ? (size_t)(d - key) + 1 : 0;
}

static int lst_grow(void **arr, size_t *cap, size_t n, size_t size)
{
	size_t ncap;
	void *p;

	if (n < *cap)
		return 0;
	ncap = *cap ? 2 * *cap : 64;
	p = realloc(*arr, ncap * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

/*
 * Offer key to the page, as an entry (stat sb, a marker if marker) or
 * rolled up into a common prefix (sb unused, may be NULL).  Returns 0,
 * LST_FULL once max items are in and another one exists, or -errno.
 */
static int lst_offer(struct lister *l, const char *key, const struct stat *sb,
		     bool marker)
{
	struct store_page *pg = l->page;
	size_t klen = strlen(key), cp;
	char *s;
	int err;

	if (!lst_after(l, key))
		return 0;
	cp = lst_rollup(l, key, klen);
	if (cp && pg->nprefixes &&
	    strlen(pg->prefixes[pg->nprefixes - 1]) == cp &&
	    memcmp(pg->prefixes[pg->nprefixes - 1], key, cp) == 0)
		return 0;
	if (pg->nentries + pg->nprefixes >= l->max) {
		l->more = true;
		return LST_FULL;
	}
	s = cp ? strndup(key, cp) : strdup(key);
	if (!s)
		return -ENOMEM;
	if (cp) {
		err = lst_grow((void **)&pg->prefixes, &l->pcap, pg->nprefixes,
			       sizeof(*pg->prefixes));
		if (err)
			goto out_free;
		pg->prefixes[pg->nprefixes++] = s;
		l->last_kind = 'P';
		return 0;
	}
	err = lst_grow((void **)&pg->entries, &l->ecap, pg->nentries,
		       sizeof(*pg->entries));
	if (err)
		goto out_free;
	pg->entries[pg->nentries].key = s;
	pg->entries[pg->nentries].size = marker ? 0 : (uint64_t)sb->st_size;
	etag_fill(sb, marker, pg->entries[pg->nentries].etag);
	pg->entries[pg->nentries].last_modified_ns = ts_ns(&sb->st_mtim);
	pg->nentries++;
	l->last_kind = 'K';
	return 0;
out_free:
	free(s);
	return err;
}

static int child_cmp(const void *a, const void *b)
{
	const struct child *x = a, *y = b;
	const unsigned char *p = (const unsigned char *)x->name;
	const unsigned char *q = (const unsigned char *)y->name;
	int cp, cq;

	while (*p && *p == *q) {
		p++;
		q++;
	}
	/* A directory's name sorts as if followed by '/'. */
	cp = *p ? *p : (x->dir ? '/' : 0);
	cq = *q ? *q : (y->dir ? '/' : 0);
	return cp - cq;
}

static void children_free(struct child *kids, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(kids[i].name);
	free(kids);
}

/*
 * The children of dfd (whose key prefix, keylen bytes, is in l->key)
 * that are objects or directories, start with npfx, fit in a key and can
 * still come after the token; sorted in key order.
 */
static int lst_children(struct lister *l, int dfd, size_t keylen,
			const char *npfx, bool at_root, struct child **out,
			size_t *nout)
{
	size_t npl = strlen(npfx), n = 0, cap = 0, nl;
	struct child *kids = NULL;
	struct dirent *de;
	struct stat sb;
	bool dir;
	int err = 0;
	DIR *d;

	err = dir_scan(dfd, &d);
	if (err)
		return err;
	for (errno = 0; (de = readdir(d)); errno = 0) {
		const char *name = de->d_name;

		if (!strcmp(name, ".") || !strcmp(name, "..") ||
		    strncmp(name, npfx, npl) ||
		    (at_root && !strncmp(name, RESERVED_PREFIX,
					 strlen(RESERVED_PREFIX))))
			continue;
		if (de->d_type == DT_UNKNOWN) {
			if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW))
				continue;
			dir = S_ISDIR(sb.st_mode);
			if (!dir && !S_ISREG(sb.st_mode))
				continue;
		} else if (de->d_type == DT_DIR || de->d_type == DT_REG) {
			dir = de->d_type == DT_DIR;
		} else {
			continue; /* symlinks, devices, sockets: not objects */
		}
		nl = strlen(name);
		if (keylen + nl + dir > STORE_KEY_MAX)
			continue;
		memcpy(l->key + keylen, name, nl);
		l->key[keylen + nl] = '/';
		l->key[keylen + nl + dir] = '\0';
		if (dir ? lst_tree_done(l, l->key, keylen + nl + 1)
			: !lst_after(l, l->key))
			continue;
		err = lst_grow((void **)&kids, &cap, n, sizeof(*kids));
		if (err)
			break;
		kids[n].name = strdup(name);
		if (!kids[n].name) {
			err = -ENOMEM;
			break;
		}
		kids[n++].dir = dir;
	}
	if (!err && errno)
		err = -errno;
	closedir(d);
	if (err) {
		children_free(kids, n);
		return err;
	}
	if (n)
		qsort(kids, n, sizeof(*kids), child_cmp);
	*out = kids;
	*nout = n;
	return 0;
}

/* List dfd's subtree in key order; l->key holds its keylen-byte prefix. */
static int lst_dir(struct lister *l, int dfd, size_t keylen, const char *npfx,
		   bool at_root)
{
	struct child *kids = NULL;
	struct stat sb;
	size_t n = 0, i, nl;
	int cfd, err;

	err = lst_children(l, dfd, keylen, npfx, at_root, &kids, &n);
	if (err)
		return err;
	for (i = 0; i < n && !err; i++) {
		nl = strlen(kids[i].name);
		memcpy(l->key + keylen, kids[i].name, nl);
		if (!kids[i].dir) {
			l->key[keylen + nl] = '\0';
			/* Gone or replaced since readdir: not listed. */
			if (fstatat(dfd, kids[i].name, &sb,
				    AT_SYMLINK_NOFOLLOW) ||
			    !S_ISREG(sb.st_mode))
				continue;
			err = lst_offer(l, l->key, &sb, false);
			continue;
		}
		l->key[keylen + nl] = '/';
		l->key[keylen + nl + 1] = '\0';
		if (lst_rollup(l, l->key, keylen + nl + 1)) {
			err = lst_offer(l, l->key, NULL, true);
			continue;
		}
		err = dir_step(dfd, kids[i].name, 0, &cfd);
		if (err) {
			/* Removed or replaced since readdir: not listed. */
			if (err == -ENOENT)
				err = 0;
			continue;
		}
		if (fstat(cfd, &sb))
			err = -errno;
		else
			err = lst_offer(l, l->key, &sb, true);
		if (!err)
			err = lst_dir(l, cfd, keylen + nl + 1, "", false);
		close(cfd);
	}
	children_free(kids, n);
	return err;
}

static int file_list(struct store *st, const char *prefix, char delimiter,
		     const char *token, unsigned max_keys,
		     struct store_page *out)
{
	struct store_file *sf = sf_of(st);
	char dirkey[STORE_KEY_MAX + 1];
	struct keypath kp;
	struct lister *l;
	const char *slash, *npfx;
	const char *last;
	struct stat sb;
	size_t keylen;
	int dfd, err;

	memset(out, 0, sizeof(*out));
	if (!prefix)
		prefix = "";
	if (token && ((token[0] != 'K' && token[0] != 'P') ||
		      strnlen(token + 1, STORE_KEY_MAX + 1) > STORE_KEY_MAX))
		return -EINVAL;
	/* No key can be that long, or under an invalid directory: empty. */
	if (strnlen(prefix, STORE_KEY_MAX + 1) > STORE_KEY_MAX)
		return 0;
	slash = strrchr(prefix, '/');
	keylen = slash ? (size_t)(slash - prefix) + 1 : 0;
	npfx = prefix + keylen;
	if (slash) {
		memcpy(dirkey, prefix, keylen);
		dirkey[keylen] = '\0';
		if (key_parse(dirkey, &kp))
			return 0;
		err = marker_open(sf, &kp, false, &dfd, &sb);
		if (err)
			return err == -ENOENT ? 0 : err;
	} else {
		dfd = fcntl(sf->root_fd, F_DUPFD_CLOEXEC, 0);
		if (dfd < 0)
			return -errno;
	}

	l = calloc(1, sizeof(*l));
	if (!l) {
		err = -ENOMEM;
		goto out_close_dir;
	}
	l->prefix = prefix;
	l->plen = strlen(prefix);
	l->delim = delimiter;
	l->max = max_keys == 0 || max_keys > LIST_MAX ? LIST_MAX : max_keys;
	l->page = out;
	if (token) {
		l->tok_kind = token[0];
		l->tok = token + 1;
		l->toklen = strlen(l->tok);
	}
	memcpy(l->key, prefix, keylen);
	l->key[keylen] = '\0';
	err = 0;
	/* Prefix "d/" names the directory itself: its marker comes first. */
	if (slash && !*npfx)
		err = lst_offer(l, l->key, &sb, true);
	if (!err)
		err = lst_dir(l, dfd, keylen, npfx, !slash);
	if (err < 0)
		goto out_free_page;
	if (l->more) {
		last = l->last_kind == 'P' ? out->prefixes[out->nprefixes - 1]
					   : out->entries[out->nentries - 1].key;
		out->next_token = malloc(strlen(last) + 2);
		if (!out->next_token) {
			err = -ENOMEM;
			goto out_free_page;
		}
		out->next_token[0] = l->last_kind;
		strcpy(out->next_token + 1, last);
	}
	err = 0;
	goto out_free_lister;
out_free_page:
	store_page_free(out);
out_free_lister:
	free(l);
out_close_dir:
	close(dfd);
	return err;
}

/*
 * Any size in one PUT: the parts of a multipart upload are copied once
 * into the upload and again at completion, one disk and one page cache
 * for both passes, so parallel parts only double the work.  (fs/ still
 * sends parts for a big file that is not all in its cache.)
 */
static uint64_t file_put_max(struct store *st)
{
	(void)st;
	return UINT64_MAX;
}

/* Both conditions are checked with the rename that places an object. */
static int file_cond_native(struct store *st)
{
	(void)st;
	return STORE_COND_ALL;
}

const struct store_ops store_file_ops = {
	.scheme = "file",
	.open = file_open,
	.close = file_close,
	.head = file_head,
	.get = file_get,
	.get_stream = file_get_stream,
	.put = file_put,
	.put_fd = file_put_fd,
	.mpu_create = file_mpu_create,
	.mpu_part = file_mpu_part,
	.mpu_part_copy = file_mpu_part_copy,
	.mpu_complete = file_mpu_complete,
	.mpu_abort = file_mpu_abort,
	.mpu_list = file_mpu_list,
	.list = file_list,
	.copy = file_copy,
	.del = file_del,
	.del_many = file_del_many,
	.statfs = file_statfs,
	.put_max = file_put_max,
	.put_parallel = 1, /* each PUT an fsync of one disk */
	.cond_native = file_cond_native,
};
