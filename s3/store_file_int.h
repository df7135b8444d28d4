/*
 * s3/store_file_int.h - what the file backend's files share: the backend's
 * struct, keys as paths (store_file_path.c), etags and metadata
 * (store_file_meta.c), staged writes (store_file_stage.c), and the calls
 * one request kind makes of another. Private to the file backend.
 */
#ifndef MAPFS_STORE_FILE_INT_H
#define MAPFS_STORE_FILE_INT_H

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "store_int.h"

#define RESERVED_PREFIX STORE_RESERVED_PREFIX
#define STAGE_DIR RESERVED_PREFIX "tmp"
#define MPU_DIR RESERVED_PREFIX "mpu"
#define MPU_PARTS_MAX 10000 /* S3's part number limit */
#define TMP_NAME_MAX 24

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

static inline struct store_file *sf_of(struct store *st)
{
	return (struct store_file *)st;
}

/* A validated key split into NUL-separated components. */
struct keypath {
	char buf[STORE_KEY_MAX + 1];
	const char *leaf; /* last component, inside buf */
	bool marker;      /* the key ended in '/' */
};

/* store_file_path.c */
/*
 * Validate key and split it.  -EINVAL for anything that could name a path
 * outside ROOT or a reserved name; -ENAMETOOLONG for a component no
 * directory can hold.
 */
int file_key_parse(const char *key, struct keypath *kp);

/*
 * Open directory name in dirfd, never through a symlink.  With mode != 0
 * a missing directory is created (and its entry made durable, since an
 * object is about to be put below it).  A non-directory in the way is
 * ENOENT for a reader and ENOTDIR for a writer.  The caller closes *out.
 */
int file_dir_step(int dirfd, const char *name, mode_t mode, int *out);

/* Open the directory that holds kp's leaf; with create, mkdir -p it. */
int file_kp_parent(const struct store_file *sf, const struct keypath *kp,
		   bool create, int *out);

/*
 * Open dirfd's directory for readdir.  A dup() would share the directory
 * offset with every other user of the fd (the root fd: all threads), so a
 * new open file description is made each time.  Closed with closedir().
 */
int file_dir_scan(int dirfd, DIR **out);

/* Open the directory behind marker kp (created with parents if create). */
int file_marker_open(const struct store_file *sf, const struct keypath *kp,
		     bool create, int *out, struct stat *sb);

/*
 * Open object kp for reading.  Only a regular file is an object: it is
 * checked before the open (so a FIFO or device is never opened) and again
 * on the fd (in case it was swapped in between).
 */
int file_obj_open(const struct store_file *sf, const struct keypath *kp,
		  int *out, struct stat *sb);

/* mkdir -p of an absolute path (the admin's ROOT: symlinks allowed there). */
int file_path_mkdirs(const char *path);

/* store_file_meta.c */
/* ts in nanoseconds. */
int64_t file_ts_ns(const struct timespec *ts);

/*
 * An object's etag changes whenever its bytes can have changed: a PUT
 * makes a new inode, an in-place write moves mtime and ctime (and ctime
 * cannot be set back by hand).  A marker has no bytes: S3's empty etag.
 */
void file_etag_fill(const struct stat *sb, bool marker,
		    char etag[STORE_ETAG_MAX]);

/* out (size, etag, time; no metadata) of the object sb describes. */
void file_info_fill(const struct stat *sb, bool marker, struct store_info *out);

/* Set xattr name to val, or remove it when val is NULL. */
int file_xattr_store(int fd, const char *name, const char *val);

/* Replace fd's metadata with m (NULL: none), so stale fields never linger. */
int file_meta_write(int fd, const struct store_meta *m);

/* fd's metadata; malformed fields read as absent, never as an error. */
int file_meta_read(int fd, struct store_meta *m);

/* store_file_stage.c */
/* All len bytes of buf to fd (short writes and EINTR resumed). */
int file_write_all(int fd, const void *buf, size_t len);

/*
 * Copy bytes [in_off, in_off+len) of in to out at out_off, in the kernel
 * where it can (reflinks on XFS/btrfs).  Explicit offsets leave both fds'
 * positions alone, so a caller's shared fd is safe.  A source shorter than
 * len is -EIO: the object would silently be truncated otherwise.
 */
int file_copy_bytes(int in, uint64_t in_off, int out, uint64_t out_off,
		    uint64_t len);

/* nbytes (at most 32) random bytes as hex digits and a NUL into out. */
int file_rand_hex(char *out, size_t nbytes);

/*
 * Create a fresh temp file in dirfd.  Random names need no shared counter
 * and cannot collide with another thread or process.
 */
int file_tmp_create(int dirfd, char name[TMP_NAME_MAX], int *out);

/*
 * Move staged file tmp (open as fd) into kp's place if cond holds:
 * metadata, fsync, rename over any old object, fsync the directory.  The
 * info is taken after the rename, which moves ctime, so a HEAD later sees
 * the same etag.  On failure the caller unlinks tmp (harmless if it was
 * renamed already).
 */
int file_stage_commit(struct store_file *sf, int fd, const char *tmp,
		      const struct keypath *kp, const struct store_meta *meta,
		      const struct store_cond *cond, struct store_info *out);

/* Create (or refresh the metadata of) the directory behind marker kp. */
int file_marker_put(struct store_file *sf, const struct keypath *kp,
		    const struct store_meta *meta, struct store_info *out);

/* Remove crash debris from staging; files still being written are young. */
void file_stage_sweep(int stage_fd);

/*
 * The backend's store_ops entries, by request kind; store.h says what
 * each promises.  Those here are the ones another kind calls.
 */

/* store_file_get.c */
int file_head(struct store *st, const char *key, struct store_info *out);

int file_get(struct store *st, const char *key, uint64_t off, size_t len,
	     void *buf, size_t *got);

/*
 * Stream [off, off+len) of one open version of the object: the fd pins
 * its inode, so a PUT meanwhile (a new inode) is not mixed in; with
 * if_match, another version than that is -ESTALE before any byte.
 */
int file_get_stream(struct store *st, const char *key, const char *if_match,
		    uint64_t off, uint64_t len, store_sink_fn sink, void *arg,
		    uint64_t *got);

/* store_file_put.c */
int file_put(struct store *st, const char *key, const void *buf, size_t len,
	     const struct store_meta *meta, const struct store_cond *cond,
	     struct store_info *out);

int file_put_fd(struct store *st, const char *key, int src, uint64_t len,
		const struct store_meta *meta, const struct store_cond *cond,
		struct store_info *out);

/* Whether id can be an upload id of ours (hex of the right length). */
bool file_upload_id_ok(const char *id);

int file_mpu_create(struct store *st, const char *key,
		    const struct store_meta *meta, char **upload_id);

int file_mpu_part(struct store *st, const char *key, const char *upload_id,
		  int partno, int fd, uint64_t off, uint64_t len,
		  char etag[STORE_ETAG_MAX]);

int file_mpu_part_copy(struct store *st, const char *key, const char *upload_id,
		       int partno, const char *src, uint64_t off, uint64_t len,
		       char etag[STORE_ETAG_MAX]);

/*
 * Concatenate parts 1..nparts (each must still have the etag its upload
 * returned, else EINVAL like S3's InvalidPart) into staging, give it the
 * metadata from create, rename it into place, then drop the upload.
 */
int file_mpu_complete(struct store *st, const char *key, const char *upload_id,
		      int nparts, char (*etags)[STORE_ETAG_MAX],
		      const struct store_cond *cond, struct store_info *out);

int file_mpu_abort(struct store *st, const char *key, const char *upload_id);

/* store_file_list.c */
/* Uploads are directories ROOT/.mapfs-mpu/<id> with the key in an xattr. */
int file_mpu_list(struct store *st, const char *prefix,
		  struct store_upload **out, size_t *n);

int file_list(struct store *st, const char *prefix, char delimiter,
	      const char *token, unsigned max_keys, struct store_page *out);

/* store_file_copy.c */
/*
 * Copy src to dst.  The source fd pins one inode, and PUTs replace inodes,
 * so the copy is of one whole version even if src is overwritten meanwhile.
 * A marker copies to a marker only (a directory rename copies them).
 */
int file_copy(struct store *st, const char *src, const char *dst,
	      const struct store_meta *meta, struct store_info *out);

/* store_file_delete.c */
/*
 * Delete a key; an absent key (or a symlink or directory where an object
 * would be) is success, as on S3.  A marker whose directory still has
 * children stays as a prefix, but loses its metadata like the S3 marker
 * object would.  Parents that were only prefixes go with their last key.
 */
int file_del(struct store *st, const char *key);

int file_del_many(struct store *st, const char *const *keys, size_t n);

#endif
