/*
 * fs/outage.c - what a store outage made, said when it ends: the names
 * made while the store was away (mapfs_outage_names_total, counted where
 * names are made: dir.c), the backlog replayed, and the conflicts with
 * other writers its changes met going up; `ctl status` shows the last
 * one (fs_outage_stat).  The syncer's passes call it (syncer.c).
 */
#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "common/log.h"
#include "metrics/metrics.h"
#include "sync_int.h"

/* See sync_int.h. */
uint64_t fs_conflicts_now(void)
{
	return metrics_get(MET_CONFLICTS_ASIDE) +
	       metrics_get(MET_CONFLICTS_REUPLOADED) +
	       metrics_get(MET_CONFLICTS_LOST);
}

/*
 * See sync_int.h.  An outage that ended since the last look (the
 * store's count of them moved, however short it was) is said once, with
 * what waited for the store.  conflicts0: the conflicts counter before
 * anything of it went up (at the start of the pass, for one that ended
 * during it).
 */
void fs_outage_check(struct fs *fs, uint64_t conflicts0)
{
	uint64_t down_ms, ended = store_outages_ended(fs->store, &down_ms);
	uint64_t names;
	struct fs_dirty_stat ds;

	if (ended == fs->outages_seen)
		return;
	/* (The counter only moves while the store is down.) */
	names = metrics_get(MET_OUTAGE_NAMES);
	pthread_mutex_lock(&fs->outage_lock);
	fs->outages_seen = ended;
	fs->outage = (struct fs_outage_stat){
		.down_ms = down_ms,
		.names = names - fs->outage_names0,
		.replaying = true,
	};
	fs->outage_names0 = names;
	fs->outage_conflicts0 = conflicts0;
	fs->outage_back_ms = fs_now_ms();
	pthread_mutex_unlock(&fs->outage_lock);
	if (fs_dirty_stat(fs, &ds))
		return;
	log_info("fs: the store is back: replaying %" PRIu64 " changed files "
		 "(%" PRIu64 " bytes) and %" PRIu64 " deletes and renames, in "
		 "order; %" PRIu64 " names were made meanwhile",
		 ds.files, ds.bytes, ds.pending, fs->outage.names);
}

/* A pass found nothing to do (under sync_lock): an outage's replay, if
 * one is under way, is done. */
void fs_outage_replayed(struct fs *fs)
{
	if (!fs->outage.replaying)
		return;
	pthread_mutex_lock(&fs->outage_lock);
	fs->outage.replaying = false;
	fs->outage.replay_ms = fs_now_ms() - fs->outage_back_ms;
	fs->outage.conflicts = fs_conflicts_now() - fs->outage_conflicts0;
	pthread_mutex_unlock(&fs->outage_lock);
	log_info("fs: the outage's changes are in the store (%" PRIu64
		 " ms): %" PRIu64 " names made while it was away, %" PRIu64
		 " of them or their files met another writer's version "
		 "(mapfs_conflicts_total; theirs kept at the name, ours "
		 "aside)",
		 fs->outage.replay_ms, fs->outage.names, fs->outage.conflicts);
}

/* See fs.h. */
void fs_outage_stat(struct fs *fs, struct fs_outage_stat *out)
{
	memset(out, 0, sizeof(*out));
	if (!fs->sync_started)
		return;
	pthread_mutex_lock(&fs->outage_lock);
	*out = fs->outage;
	if (out->replaying)
		out->conflicts = fs_conflicts_now() - fs->outage_conflicts0;
	pthread_mutex_unlock(&fs->outage_lock);
}
