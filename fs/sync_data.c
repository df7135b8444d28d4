/*
 * fs/sync_data.c - what an upload sends, for the three files that send
 * one (sync_item.c a whole file, sync_mpu.c its parts, early.c the parts
 * of a file still being written): the object's metadata, and a range of
 * the cache file made local and pinned until it is read.  Below all
 * three, so that none of them calls another back for it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "common/log.h"
#include "fs_int.h"
#include "sync_int.h"

/* cache_fetch with loop -1 completes inline: keep its result. */
static void sync_res_done(void *arg, long res)
{
	*(long *)arg = res;
}

/* See sync_int.h. */
void sync_meta_of(const struct fs *fs, const struct sync_item *it,
		  struct store_meta *m)
{
	int64_t mtime = it->in.mtime;

	if (it->in.type == FS_REG && (it->in.flags & FS_F_DIRTY_DATA) &&
	    it->have_cs)
		mtime = fs_ts_to_ns(&it->cs.mtime);
	*m = (struct store_meta){ .has_mode = true,
				  .has_uid = true,
				  .has_gid = true,
				  .has_mtime = true,
				  .mode = it->in.mode,
				  .uid = it->in.uid,
				  .gid = it->in.gid,
				  .mtime_ns = mtime,
				  .symlink = it->in.type == FS_LNK };
	/* FIFOs, sockets and devices say what they are, as s3fs does. */
	if (fs_special_type(fs_type_ifmt(it->in.type))) {
		m->mode |= fs_type_ifmt(it->in.type);
		m->has_rdev = it->in.type == FS_CHR || it->in.type == FS_BLK;
		m->rdev = m->has_rdev ? fs_rdev_dev(&it->in) : 0;
	}
	/* Every name of a file with several says which file (links.c). */
	if (it->in.type != FS_DIR && it->in.nlink > 1)
		fs_link_id(fs, it->in.ino, m->link);
}

/* See sync_int.h. */
int sync_fetch_pinned(struct fs *fs, const struct sync_item *it, uint64_t off,
		      uint64_t len, struct cache_pin **pin)
{
	long res = 0;
	int rc = cache_pin(fs->cache, it->in.ino, it->in.size, pin);

	if (rc)
		return rc;
	cache_fetch(fs->cache, -1, it->in.ino,
		    &(struct cache_obj){ .key = it->key,
					 .size = it->in.size,
					 .etag = fs_obj_etag(&it->in) },
		    off, len, false, sync_res_done, &res);
	if (res) {
		cache_unpin(*pin);
		*pin = NULL;
	}
	return (int)res;
}
