/*
 * fs/fs.h - the namespace of mapfs-gw: a POSIX-like inode API.
 *
 * fs/ owns names, inodes, directory entries and attributes (in LMDB, via
 * db/), the mapping between paths and store keys (DESIGN.md: /a/b.txt <->
 * key "a/b.txt"), revalidation of listings against the store, and the
 * syncer that turns namespace and data changes into store objects
 * (write-back).  It speaks inode numbers, struct fs_attr and negative
 * errno; it knows nothing of XDR or sockets.
 *
 * Inode numbers are assigned once per key and never reused, so handles
 * stay valid across restarts.  The root directory is FS_ROOT_INO.
 *
 * Threading: synchronous calls may be made from any thread (they read
 * LMDB with a per-thread read transaction).  Asynchronous calls take a
 * struct fs_ctx whose loop field says which event loop the caller runs on
 * (or -1 from a worker thread); their done callback runs exactly once,
 * either inline or later on another thread (the db writer, or the loop).
 * Out-parameters are owned by the caller and must stay valid until done.
 *
 * Errors (negative errno): ENOENT, EEXIST, ENOTDIR, EISDIR, ENOTEMPTY,
 * EINVAL, EACCES, EPERM, EROFS, ENAMETOOLONG, ENOSPC, EFBIG, EXDEV,
 * ESTALE (inode gone), ENOTSUP, EAGAIN (store unreachable: retry),
 * ECANCELED (SETATTR guard mismatch), EIO.
 */
#ifndef MAPFS_FS_H
#define MAPFS_FS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct db;
struct cache;
struct store;
struct fs;

#define FS_ROOT_INO 1
#define FS_NAME_MAX 255
/* The most names a file may have (LINK): each is an object of its own,
 * and every upload of the file copies the first to each of the others. */
#define FS_LINK_MAX 255
#define FS_PATH_MAX 1024
#define FS_MAX_GIDS 16
#define FS_KEY_TEXT_MAX 1025 /* a store key and its NUL (STORE_KEY_MAX + 1) */

/* Types, numbered as NFSv3's ftype3. */
enum fs_type {
	FS_REG = 1,
	FS_DIR = 2,
	FS_BLK = 3,
	FS_CHR = 4,
	FS_LNK = 5,
	FS_SOCK = 6,
	FS_FIFO = 7
};

struct fs_attr {
	uint64_t ino;
	uint32_t gen;  /* generation: changes if an inode number is reused */
	uint32_t type; /* enum fs_type */
	uint32_t mode; /* permission bits, 07777 */
	uint32_t nlink;
	uint32_t uid, gid;
	uint64_t size;
	uint64_t used; /* bytes of storage used */
	uint32_t rdev_major, rdev_minor;
	struct timespec atime, mtime, ctime;
	/* Directories: listed from the store within --dir-ttl, so
	 * fs_revalidate() (not forced) would finish at once, with 0. */
	bool listed;
};

/* Which fields of struct fs_sattr to set. */
enum {
	FS_SET_MODE = 1u << 0,
	FS_SET_UID = 1u << 1,
	FS_SET_GID = 1u << 2,
	FS_SET_SIZE = 1u << 3,
	FS_SET_ATIME = 1u << 4,     /* to sattr.atime */
	FS_SET_ATIME_NOW = 1u << 5, /* to the server's time */
	FS_SET_MTIME = 1u << 6,
	FS_SET_MTIME_NOW = 1u << 7
};

struct fs_sattr {
	uint32_t mask;
	uint32_t mode, uid, gid;
	uint64_t size;
	struct timespec atime, mtime;
};

/*
 * Weak cache consistency for one object (RFC 1813 2.6): the attributes
 * before the change (size, mtime, ctime) and the full attributes after.
 * Filled on success and on failure wherever the object could be read.
 */
struct fs_wcc {
	bool before_ok;
	uint64_t before_size;
	struct timespec before_mtime, before_ctime;
	bool after_ok;
	struct fs_attr after;
};

/* Who is asking, and from which loop. */
struct fs_ctx {
	int loop;   /* event loop index, or -1 on a worker thread */
	bool async; /* an async export's call: its changes and stable data
		       are made durable within the window, after the reply */
	uint32_t uid, gid;
	uint32_t ngids;
	uint32_t gids[FS_MAX_GIDS];
};

/* ACCESS bits, as NFSv3's ACCESS3_*. */
enum {
	FS_ACCESS_READ = 0x01,
	FS_ACCESS_LOOKUP = 0x02,
	FS_ACCESS_MODIFY = 0x04,
	FS_ACCESS_EXTEND = 0x08,
	FS_ACCESS_DELETE = 0x10,
	FS_ACCESS_EXECUTE = 0x20
};

enum fs_stable { FS_UNSTABLE = 0, FS_DATA_SYNC = 1, FS_FILE_SYNC = 2 };

enum fs_create_how {
	FS_CREATE_UNCHECKED = 0,
	FS_CREATE_GUARDED = 1,
	FS_CREATE_EXCLUSIVE = 2
};

struct fs_statfs {
	uint64_t total_bytes, free_bytes, avail_bytes;
	uint64_t total_files, free_files, avail_files;
};

struct fs_opts {
	uint32_t dir_ttl_ms;  /* listing revalidation against the store */
	uint32_t attr_ttl_ms; /* how long a clean object's attributes are
				   trusted before its directory is listed
				   again (0: as long as dir_ttl_ms) */
	uint32_t
		upload_delay_ms; /* quiet time before a dirty file is uploaded */
	uint32_t default_uid, default_gid; /* for objects without metadata */
	uint64_t max_dirty; /* dirty cache bytes past which WRITE and
				   CREATE answer -EAGAIN (0: no limit) */
	bool strict_commit; /* COMMIT, stable WRITE wait for the store */
	bool read_only;
	bool no_early_upload;     /* big files go up only once quiet, not
				   while written (early.c) */
	bool listing_attrs;       /* objects new to the namespace: the listing's
			       size and mtime, no HEAD (revalidate.c) */
	uint32_t async_window_ms; /* async exports: what they answered is
				     durable this much later (0: 50 ms) */
};

typedef void (*fs_done_fn)(void *arg, int err);

/*
 * Open the namespace in db (its named databases are created here) over
 * cache and store (none owned).  Creates the root on first use.  Starts
 * the syncer thread.  Returns 0 or -errno.
 */
int fs_open(const struct fs_opts *opts, struct db *db, struct cache *cache,
	    struct store *store, struct fs **out);

/*
 * `mapfs-gw meta migrate`: copy the namespace of a gateway alone (db, the
 * gateway stopped) into the empty cluster database of o (see db.h
 * db_migrate), with the handle key (klen bytes) its clients' handles were
 * made with.  0, -ENOTEMPTY, or -errno.
 */
struct db_cluster_opts;
typedef void (*db_progress_fn)(void *ctx, uint64_t done, uint64_t total);
int fs_migrate(struct db *db, const struct db_cluster_opts *o, const void *key,
	       size_t klen, db_progress_fn progress, void *ctx);

/* Stop the syncer (after one last pass if flush) and free. */
void fs_close(struct fs *fs, bool flush);

/*
 * Upload every change now and wait (ctl flush, SIGTERM, tests).  It waits
 * as long as work moves; once nothing has gone up for patience_ms (0:
 * FS_FLUSH_PATIENCE_MS) or the only work left keeps failing for good, it
 * gives up with -errno and, in why (cap bytes; may be NULL), the reason an
 * operator can act on: the store does not answer, the key that fails
 * and its error, files that never hold still.  *cancel (may be NULL)
 * set stops it with -ECANCELED.  0: nothing is left.
 */
#define FS_FLUSH_PATIENCE_MS 30000
int fs_flush_wait(struct fs *fs, uint32_t patience_ms,
		  const atomic_bool *cancel, char *why, size_t cap);

/* fs_flush_wait() that gives up after 2 s without progress (tests). */
int fs_flush(struct fs *fs);

/*
 * A counter that moves each time this node dropped changes it had not
 * made stable in the store (in a cluster: a file another node took over
 * while this one was cut off).  nfsd folds it into the write verifier.
 */
uint64_t fs_write_epoch(struct fs *fs);

/* Attributes of ino.  -ESTALE if the inode does not exist. */
int fs_getattr(struct fs *fs, uint64_t ino, struct fs_attr *out);

/*
 * Refresh dir's entries from a store listing if the last one is older
 * than the TTL (or always, if force).  done(arg, 0 or -errno); a dir that
 * is fresh completes inline.
 */
void fs_revalidate(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
		   bool force, fs_done_fn done, void *arg);

/*
 * fs_revalidate() (not forced) for a walk of dir from cookie: done as
 * soon as entries past cookie are in, where dir's first listing merges
 * page by page, else when dir is fresh.  fs_readdir() holds back its eof
 * until that listing ends.
 */
void fs_revalidate_walk(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
			uint64_t cookie, fs_done_fn done, void *arg);

/*
 * fs_revalidate() (not forced) for a LOOKUP of name in dir: where dir's
 * first listing merges page by page, done as soon as name is in (or at
 * the end, when it is not), else when dir is fresh.  name is copied.
 */
void fs_revalidate_name(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
			const char *name, fs_done_fn done, void *arg);

/*
 * fs_readdir() found nothing past its cookie and no eof: dir's first
 * listing is still merging.  0: done(arg, 0 or -errno) runs once its next
 * page is in or it ended; -ENOENT: it ended already (read again).
 */
int fs_readdir_wait(struct fs *fs, uint64_t dir, fs_done_fn done, void *arg);

/*
 * The object at store key key was created, replaced or removed by
 * someone else (an event notification): the deepest directory of its
 * path the namespace knows is listed again now, in the background,
 * which takes the change in (attributes, the entry, cached data dropped).
 * Cheap to call twice or out of order: the listing says what is there.
 */
void fs_store_key_changed(struct fs *fs, const char *key);

/*
 * Refresh ino's attributes from the store if they are older than the
 * attribute TTL: the parent directory is listed again (one listing
 * refreshes every entry in it).  Local data (dirty, or not yet in the
 * store) is the authority and is never refreshed.  Returns 0 when the
 * attributes are fresh (done is not called: the hot path stays inline),
 * 1 when a refresh was started (done(arg, 0 or -errno) runs once, later
 * or already), or -errno.
 */
int fs_revalidate_attr(struct fs *fs, const struct fs_ctx *ctx, uint64_t ino,
		       fs_done_fn done, void *arg);

/*
 * Look name up in dir ("." and ".." included; ".." of the root is the
 * root).  Call fs_revalidate() first to see out-of-band changes.
 */
int fs_lookup(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
	      const char *name, uint64_t *ino, struct fs_attr *attr);

/*
 * fs_lookup(), and dir's attributes from the same snapshot into
 * *dir_attr (*dir_ok says whether dir could be read: it may be set on an
 * error too, e.g. -ENOENT), so LOOKUP reads the directory once.
 */
int fs_lookup_at(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
		 const char *name, uint64_t *ino, struct fs_attr *attr,
		 struct fs_attr *dir_attr, bool *dir_ok);

/* ACCESS: *granted is the subset of want the caller has. */
int fs_access(struct fs *fs, const struct fs_ctx *ctx, uint64_t ino,
	      uint32_t want, uint32_t *granted, struct fs_attr *attr);

/* Symlink target into buf (NUL-terminated); *len excludes the NUL. */
int fs_readlink(struct fs *fs, const struct fs_ctx *ctx, uint64_t ino,
		char *buf, size_t cap, size_t *len, struct fs_attr *attr);

/*
 * One directory entry for fs_readdir(); attr is NULL unless attributes
 * were asked for.  Return non-zero to stop before this entry (it is then
 * not consumed: the listing is not at its end).
 */
typedef int (*fs_dirent_fn)(void *arg, uint64_t ino, const char *name,
			    uint64_t cookie, const struct fs_attr *attr);

/*
 * List dir from just after cookie (0: from the start), in cookie order.
 * Cookies are stable: an entry keeps its cookie for its life, whatever
 * else is added or removed.  "." and ".." come first (cookies 1 and 2).
 * *verf changes whenever the directory changes.  *eof is true when every
 * entry after cookie was emitted and no first listing of dir is still
 * merging.  Call fs_revalidate() or fs_revalidate_walk() first.
 */
int fs_readdir(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
	       uint64_t cookie, bool want_attrs, fs_dirent_fn emit, void *arg,
	       uint64_t *verf, bool *eof, struct fs_attr *dir_attr);

/* Capacity and file counts. */
int fs_statfs(struct fs *fs, struct fs_statfs *out);

/*
 * SETATTR.  With guard_ctime, fails with -ECANCELED unless the current
 * ctime equals it (RFC 1813 3.3.2).  A size change truncates the data.
 */
void fs_setattr(struct fs *fs, const struct fs_ctx *ctx, uint64_t ino,
		const struct fs_sattr *sattr,
		const struct timespec *guard_ctime, struct fs_wcc *wcc,
		fs_done_fn done, void *arg);

/*
 * Room for one READ, WRITE or COMMIT in flight, kept by the caller (nfsd
 * has it in the call's state) so that data I/O allocates nothing.  It is
 * fs's from the call until done runs; its contents are private.
 */
struct fs_io {
	_Alignas(16) unsigned char room[176];
};

/* READ: *nread bytes into buf; *eof if the read reached the end. */
void fs_read(struct fs *fs, struct fs_io *io, const struct fs_ctx *ctx,
	     uint64_t ino, uint64_t off, size_t count, void *buf, size_t *nread,
	     bool *eof, struct fs_attr *attr, fs_done_fn done, void *arg);

/*
 * fs_read() into a pipe (the caller's write end, with room for the
 * range's pages) instead of a buffer: the cached pages are moved by
 * reference (cache_splice).  On an error some bytes may be in the pipe.
 */
void fs_read_splice(struct fs *fs, struct fs_io *io, const struct fs_ctx *ctx,
		    uint64_t ino, uint64_t off, size_t count, int pipe_fd,
		    size_t *nread, bool *eof, struct fs_attr *attr,
		    fs_done_fn done, void *arg);

/*
 * WRITE all len bytes at off.  *committed says how stable the data is on
 * return (>= stable asked for; with opts.strict_commit a stable WRITE
 * answers once the file is in the store).  -EAGAIN (retry) while the
 * cache holds opts.max_dirty of dirty data (CREATE too), or when a stable
 * write needs the store (strict_commit) and it is unreachable.  With the
 * store down, other writes land in the cache and wait for it.
 */
void fs_write(struct fs *fs, struct fs_io *io, const struct fs_ctx *ctx,
	      uint64_t ino, uint64_t off, const void *data, size_t len,
	      enum fs_stable stable, enum fs_stable *committed,
	      struct fs_wcc *wcc, fs_done_fn done, void *arg);

/*
 * COMMIT: everything written to ino so far is on stable storage (with
 * opts.strict_commit: in the store; -EAGAIN if the store cannot take it
 * now).
 */
void fs_commit(struct fs *fs, struct fs_io *io, const struct fs_ctx *ctx,
	       uint64_t ino, struct fs_wcc *wcc, fs_done_fn done, void *arg);

/*
 * CREATE a regular file.  EXCLUSIVE stores verf: a retry with the same
 * verifier succeeds with the same inode, another gets -EEXIST.  GUARDED
 * fails with -EEXIST if name exists; UNCHECKED opens it (applying sattr,
 * e.g. size 0).
 */
void fs_create(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
	       const char *name, enum fs_create_how how,
	       const struct fs_sattr *sattr, const uint8_t verf[8],
	       uint64_t *ino, struct fs_attr *attr, struct fs_wcc *dir_wcc,
	       fs_done_fn done, void *arg);

void fs_mkdir(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
	      const char *name, const struct fs_sattr *sattr, uint64_t *ino,
	      struct fs_attr *attr, struct fs_wcc *dir_wcc, fs_done_fn done,
	      void *arg);

void fs_symlink(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
		const char *name, const char *target,
		const struct fs_sattr *sattr, uint64_t *ino,
		struct fs_attr *attr, struct fs_wcc *dir_wcc, fs_done_fn done,
		void *arg);

/*
 * MKNOD a FIFO, socket or device (major, minor: devices only): a
 * zero-byte object with the type in its mode.  -EPERM for a device
 * unless ctx is root; -EEXIST if name exists.
 */
void fs_mknod(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
	      const char *name, enum fs_type type, const struct fs_sattr *sattr,
	      uint32_t major, uint32_t minor, uint64_t *ino,
	      struct fs_attr *attr, struct fs_wcc *dir_wcc, fs_done_fn done,
	      void *arg);

/* REMOVE a non-directory. */
void fs_remove(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
	       const char *name, struct fs_wcc *dir_wcc, fs_done_fn done,
	       void *arg);

/* RMDIR an empty directory. */
void fs_rmdir(struct fs *fs, const struct fs_ctx *ctx, uint64_t dir,
	      const char *name, struct fs_wcc *dir_wcc, fs_done_fn done,
	      void *arg);

/*
 * RENAME, POSIX rules: replaces a compatible target, -EINVAL when a
 * directory would move into its own subtree, no-op for the same entry.
 */
void fs_rename(struct fs *fs, const struct fs_ctx *ctx, uint64_t from_dir,
	       const char *from_name, uint64_t to_dir, const char *to_name,
	       struct fs_wcc *from_wcc, struct fs_wcc *to_wcc, fs_done_fn done,
	       void *arg);

/*
 * LINK (RFC 1813 3.3.15): dir/name becomes another name of ino, a file
 * (not a directory: -EPERM), up to FS_LINK_MAX names (-EMLINK).  Only
 * its owner or root, or a caller who may read and write a regular file
 * that is not setuid/setgid (-EPERM otherwise).  *attr is the file's
 * after it (nlink counted).
 */
void fs_link(struct fs *fs, const struct fs_ctx *ctx, uint64_t ino,
	     uint64_t dir, const char *name, struct fs_attr *attr,
	     struct fs_wcc *dir_wcc, fs_done_fn done, void *arg);

/* Store key of ino into buf ("" for the root).  For tests and the syncer. */
int fs_key_of(struct fs *fs, uint64_t ino, char *buf, size_t cap);

/*
 * Operations (admin/): make ino's data local if it is a clean regular
 * file in the store (a blocking cache_fetch; any thread but a loop's).
 * *fetched says whether it was downloaded now (false: already local, or
 * not a regular file).  0 or -errno from the store.
 */
int fs_warm(struct fs *fs, uint64_t ino, bool *fetched);

/*
 * Drop ino's local data if it is a clean regular file whose object is in
 * the store: decided and done in one db transaction, so no WRITE can make
 * it dirty in between.  *freed gets the bytes dropped (0 if it was not
 * local).  -EBUSY if dirty or not uploaded yet, -EISDIR/-EINVAL for
 * other types.  Blocks; any thread but a loop's.
 */
int fs_evict(struct fs *fs, uint64_t ino, uint64_t *freed);

/* Write-back backlog, for ctl status and the metrics. */
struct fs_dirty_stat {
	uint64_t files;          /* inodes with a change not yet in the store */
	uint64_t bytes;          /* data of those files held only locally */
	uint64_t pending;        /* queued store deletes and copies (renames) */
	uint64_t pending_age_ms; /* of the oldest (0: none, or not known) */
	double pending_rate;     /* run a second, over the last minute */
	int64_t oldest_ns; /* last change of the longest-waiting one; 0: none */
	/* Store work failing with an error retrying cannot fix: how many
	 * keys, and the one failing longest (its key and -errno). */
	uint64_t failing;
	char failing_key[FS_KEY_TEXT_MAX];
	int failing_err;
};

/* Walk the dirty inodes (O(dirty)).  0 or -errno. */
int fs_dirty_stat(struct fs *fs, struct fs_dirty_stat *out);

/* The last store outage the syncer saw end (all zero: none yet). */
struct fs_outage_stat {
	uint64_t down_ms; /* how long the store was away */
	uint64_t names;   /* names made meanwhile (CREATE, MKDIR, ...) */
	uint64_t
		conflicts; /* of them, met another writer's when they went up */
	bool replaying;    /* its changes are still going up */
	uint64_t replay_ms; /* how long they took to go up (once done) */
};

/*
 * The cache's dirty bytes now and the limit past which WRITE and CREATE
 * answer JUKEBOX (opts.max_dirty; 0: none), as the backpressure counts
 * them.  Cheap; any thread.
 */
void fs_dirty_room(struct fs *fs, uint64_t *dirty, uint64_t *limit);

/* Files whose upload is under way now (the syncer's and strict passes'). */
unsigned fs_uploads_in_flight(struct fs *fs);

/* A copy of the last outage's figures (for ctl status). */
void fs_outage_stat(struct fs *fs, struct fs_outage_stat *out);

/*
 * fs_fsck: the namespace against the store.  What it finds (each a
 * problem that stays after a second look: differences a change in
 * flight explains are not reported), by kind:
 */
enum fs_fsck_kind {
	FS_FSCK_MISSING,    /* a record's object (or marker) is not there */
	FS_FSCK_SIZE,       /* its object's size is not the record's */
	FS_FSCK_UNNAMED,    /* an object in a listed directory no name has */
	FS_FSCK_EMPTY_DIR,  /* a directory with nothing in the store */
	FS_FSCK_NLINK,      /* a link count that is not the names' count */
	FS_FSCK_PARENT,     /* a directory whose parent is not its name's */
	FS_FSCK_DANGLING,   /* a name whose record is gone */
	FS_FSCK_ORPHAN,     /* a record no name reaches */
	FS_FSCK_FAILING,    /* store work failing for good */
	FS_FSCK_UNREADABLE, /* a record that does not decode */
};

/* One finding, for fs_fsck's report (valid during the call only). */
struct fs_fsck_item {
	enum fs_fsck_kind kind;
	const char *what; /* its name: "missing object", ... */
	const char *key;  /* the store key or path it concerns */
	uint64_t ino;     /* 0: none */
	char detail[256];
	bool repaired;
	char action[256]; /* what --repair did, or why it left it */
};

struct fs_fsck_stat {
	uint64_t records, names, objects;
	uint64_t found, repaired;
	/* Work under way, not problems: files with changes not uploaded
	 * (here or, in a cluster, on their owner), queued store moves and
	 * deletes, multipart uploads begun. */
	uint64_t pending_uploads, pending_moves, multipart;
	/* Objects the namespace does not name yet, not problems: in a
	 * directory never listed here, written after its last listing
	 * (another writer's: the next listing shows them), or with a key
	 * no name can stand for (skipped by every listing). */
	uint64_t not_listed, newer, skipped;
};

struct fs_fsck_opts {
	bool repair; /* fix what is safe (fs_fsck says what that is) */
	/* One call per finding. */
	void (*report)(void *ctx, const struct fs_fsck_item *it);
	/* Now and then: phase ("records", "store", "recheck"), how far;
	 * non-zero stops the check (-ECANCELED). */
	int (*progress)(void *ctx, const char *phase, uint64_t done,
			uint64_t total);
	void *ctx;
};

/*
 * Compare the namespace (this gateway's LMDB; in a cluster its replica
 * of PostgreSQL's) with the store: one snapshot of the records, one
 * listing of every key, then each difference looked at again on fresh
 * state (a record, a HEAD) so that a change in flight is not a finding.
 * Also the records among themselves: link counts, parents, names without
 * records and records without names; and the keys whose store work fails
 * for good.  With repair: an object missing is uploaded again from the
 * cache when the cache holds all of it (else left: the data is gone); a
 * missing marker or name object is written again; a link count or a
 * directory's parent set from the names; an object another writer
 * replaced is taken in by a listing.  Objects are never deleted and
 * names never removed: those are left, said, for the operator.  Runs on
 * the calling thread (not a loop's), for as long as the store listing
 * takes.  0 (out filled, o->report called per finding) or -errno.
 */
int fs_fsck(struct fs *fs, const struct fs_fsck_opts *o,
	    struct fs_fsck_stat *out);

#endif
