/*
 * fs/sync_mpu.c - big files go up as multipart uploads: the parts on
 * MPU_THREADS threads (an unchanged part copied in the store rather than
 * sent again), each upload's id journaled before it is created and
 * dropped after it is completed or aborted, so that one a crash left
 * behind is aborted at the next start (sync_mpu_recover).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "common/log.h"
#include "db/db.h"
#include "fs_int.h"
#include "sync_int.h"

/* Parts: one per thread while that keeps them within these bounds. */
#define MPU_PART_MAX (64ull << 20)
#define MPU_MORE_WAIT_MS 10 /* a thread with no part yet looks again */

struct mpu_rec {
	struct fs *fs;
	const char *id, *key;
};

/* The upload's id in, its key's intent out. */
static int mpu_rec_put_apply(struct db_txn *txn, void *arg)
{
	struct mpu_rec *r = arg;
	struct db_val k = { strlen(r->id), (void *)r->id };
	struct db_val v = { strlen(r->key), (void *)r->key };
	int rc = db_put(txn, r->fs->dbi_mpu, &k, &v, 0);

	if (!rc)
		rc = db_del(txn, r->fs->dbi_mpu_intent, &v);
	return rc == -ENOENT ? 0 : rc;
}

static int mpu_intent_put_apply(struct db_txn *txn, void *arg)
{
	struct mpu_rec *r = arg;
	struct db_val k = { strlen(r->key), (void *)r->key }, v = { 0, "" };

	return db_put(txn, r->fs->dbi_mpu_intent, &k, &v, 0);
}

static int mpu_intent_del_apply(struct db_txn *txn, void *arg)
{
	struct mpu_rec *r = arg;
	struct db_val k = { strlen(r->key), (void *)r->key };
	int rc = db_del(txn, r->fs->dbi_mpu_intent, &k);

	return rc == -ENOENT ? 0 : rc;
}

/* Is there a record of key (not NUL-terminated: klen bytes) in dbi? */
static bool rec_exists(struct fs *fs, db_table dbi, const char *key,
		       size_t klen)
{
	struct db_val k = { klen, (void *)key }, v;
	struct db_txn *txn;
	bool found;

	if (db_read_begin(fs->db, &txn))
		return true; /* cannot tell: keep what might be ours */
	found = db_get(txn, dbi, &k, &v) == 0;
	db_read_end(fs->db, txn);
	return found;
}

/*
 * If key has an intent, abort the uploads of key the store has that are
 * not journaled by id (those are another path's: mpu_recover aborts
 * them), then drop the intent.  A store that cannot list uploads
 * (s3rver) cannot show them: the intent is dropped.  0, or the error
 * that keeps the intent for later.
 */
static int mpu_intent_settle(struct fs *fs, const char *key)
{
	struct store_upload *v;
	size_t n;
	int rc;

	if (!rec_exists(fs, fs->dbi_mpu_intent, key, strlen(key)))
		return 0;
	rc = store_mpu_list(fs->store, key, &v, &n); /* none on error */
	if (rc == -ENOTSUP) {
		log_info("fs: %s: the store cannot list multipart uploads; one "
			 "a crash hid from us is not aborted",
			 key);
		rc = 0;
	}
	if (rc)
		return rc;
	for (size_t i = 0; !rc && i < n; i++) {
		if (strcmp(v[i].key, key) ||
		    rec_exists(fs, fs->dbi_mpu, v[i].upload_id,
			       strlen(v[i].upload_id)))
			continue;
		rc = store_mpu_abort(fs->store, key, v[i].upload_id);
		if (rc == -ENOENT)
			rc = 0;
		if (!rc)
			log_info("fs: aborted an upload of %s we never learnt "
				 "the id of",
				 key);
	}
	store_uploads_free(v, n);
	if (!rc)
		rc = db_write(fs->db, mpu_intent_del_apply,
			      &(struct mpu_rec){ fs, NULL, key });
	return rc;
}

/* Settle every intent a crash left (syncer start); stops at an error. */
static void mpu_intents_recover(struct fs *fs)
{
	char key[STORE_KEY_MAX + 2];

	for (;;) {
		struct db_cursor *cur;
		struct db_txn *txn;
		struct db_val k, v;
		int rc, mrc = -ENOENT;

		if (db_read_begin(fs->db, &txn))
			return;
		if (!db_cursor_open(txn, fs->dbi_mpu_intent, &cur)) {
			mrc = db_cursor_get(cur, &k, &v, DB_FIRST);
			if (!mrc && k.size >= sizeof(key))
				mrc = -EIO;
			if (!mrc) {
				memcpy(key, k.data, k.size);
				key[k.size] = '\0';
			}
			db_cursor_close(cur);
		}
		db_read_end(fs->db, txn);
		if (mrc)
			return;
		rc = mpu_intent_settle(fs, key);
		if (rc) {
			log_warn("fs: uploads of %s we may not know of: %s "
				 "(kept)",
				 key, strerror(-rc));
			return;
		}
	}
}

static int mpu_rec_del_apply(struct db_txn *txn, void *arg)
{
	struct mpu_rec *r = arg;
	struct db_val k = { strlen(r->id), (void *)r->id };
	int rc = db_del(txn, r->fs->dbi_mpu, &k);

	return rc == -ENOENT ? 0 : rc;
}

/*
 * Abort the journaled multipart uploads a crash left behind.  One that
 * the store no longer knows (-ENOENT) was completed or aborted before the
 * crash and is just forgotten.
 */
static void mpu_ids_recover(struct fs *fs)
{
	char id[512], key[STORE_KEY_MAX + 2];
	struct db_cursor *cur;
	struct db_txn *txn;
	struct db_val k, v;

	for (;;) {
		int rc = db_read_begin(fs->db, &txn), mrc = -ENOENT;

		if (rc)
			return;
		if (!db_cursor_open(txn, fs->dbi_mpu, &cur)) {
			mrc = db_cursor_get(cur, &k, &v, DB_FIRST);
			if (!mrc &&
			    (k.size >= sizeof(id) || v.size >= sizeof(key)))
				mrc = -EIO;
			if (!mrc) {
				memcpy(id, k.data, k.size);
				id[k.size] = '\0';
				memcpy(key, v.data, v.size);
				key[v.size] = '\0';
			}
			db_cursor_close(cur);
		}
		db_read_end(fs->db, txn);
		if (mrc)
			return;
		rc = store_mpu_abort(fs->store, key, id);
		if (rc && rc != -ENOENT) {
			log_warn("fs: abort upload %s of %s: %s (kept)", id,
				 key, strerror(-rc));
			return;
		}
		log_info("fs: aborted the upload of %s a crash cut short", key);
		if (db_write(fs->db, mpu_rec_del_apply,
			     &(struct mpu_rec){ fs, id, key }))
			return;
	}
}

/* What a crash left of multipart uploads (syncer start). */
/* See sync_int.h. */
void sync_mpu_recover(struct fs *fs)
{
	mpu_ids_recover(fs);
	mpu_intents_recover(fs);
}

/* Parts of one multipart upload, shared out to MPU_THREADS threads. */
struct mpu {
	struct fs *fs;
	const struct sync_item *it;
	struct sync_parts *p;
	pthread_mutex_t lock;
	int next; /* next part to take */
	int err;  /* first error */
};

/* Part i (0-based): copied from the old object when unchanged, else sent. */
static int mpu_one(struct mpu *m, int i)
{
	const struct sync_parts *p = m->p;
	uint64_t off = (uint64_t)i * p->part;
	uint64_t len = p->size - off < p->part ? p->size - off : p->part;
	struct cache_pin *pin;
	int rc;

	if (p->copy_ok &&
	    cache_range_clean(m->fs->cache, m->it->in.ino, off, len)) {
		rc = store_mpu_part_copy(m->fs->store, m->it->key, p->upload_id,
					 i + 1, m->it->key, off, len,
					 p->etags[i]);
		if (rc != -ENOTSUP) {
			if (!rc) {
				pthread_mutex_lock(&m->lock);
				m->p->copied++;
				pthread_mutex_unlock(&m->lock);
			}
			return rc;
		}
	}
	rc = sync_fetch_pinned(m->fs, m->it, off, len, &pin);
	if (!rc) {
		rc = store_mpu_part(m->fs->store, m->it->key, p->upload_id,
				    i + 1, p->fd, off, len, p->etags[i]);
		cache_unpin(pin);
	}
	return rc;
}

static void *mpu_thread(void *arg)
{
	struct mpu *m = arg;
	struct sync_parts *p = m->p;

	for (;;) {
		int i = -1, n = 0, rc;

		pthread_mutex_lock(&m->lock);
		if (!m->err && m->next >= p->nparts && p->more) {
			n = p->more(p->arg, p->nparts);
			if (n > p->nparts)
				p->nparts = n;
		}
		while (!m->err && m->next < p->nparts && p->take &&
		       !p->take(p->arg, m->next))
			m->next++;
		if (!m->err && m->next < p->nparts)
			i = m->next++;
		pthread_mutex_unlock(&m->lock);
		if (i < 0 && n >= 0 && p->more && !m->err) {
			usleep(MPU_MORE_WAIT_MS * 1000); /* the file grows */
			continue;
		}
		if (i < 0)
			return NULL;
		rc = mpu_one(m, i);
		pthread_mutex_lock(&m->lock);
		if (p->done)
			p->done(p->arg, i, rc);
		if (rc && !m->err)
			m->err = rc;
		pthread_mutex_unlock(&m->lock);
	}
}

/* See sync_int.h. */
int sync_mpu_parts(struct fs *fs, const struct sync_item *it,
		   struct sync_parts *p)
{
	struct mpu m = { .fs = fs, .it = it, .p = p, .next = p->first };
	pthread_t tids[MPU_THREADS];
	int nthreads = 0;

	p->copied = 0;
	pthread_mutex_init(&m.lock, NULL);
	while (nthreads < MPU_THREADS &&
	       (p->more || nthreads < p->nparts - p->first) &&
	       pthread_create(&tids[nthreads], NULL, mpu_thread, &m) == 0)
		nthreads++;
	/* Without threads this one does all the parts. */
	if (!nthreads)
		mpu_thread(&m);
	for (int i = 0; i < nthreads; i++)
		pthread_join(tids[i], NULL);
	pthread_mutex_destroy(&m.lock);
	return m.err;
}

/* See sync_int.h. */
int sync_mpu_begin(struct fs *fs, const char *key,
		   const struct store_meta *meta, char **upload_id)
{
	/* Uploads of an earlier try we never learnt the id of go first. */
	int rc = mpu_intent_settle(fs, key);

	if (!rc)
		rc = db_write(fs->db, mpu_intent_put_apply,
			      &(struct mpu_rec){ fs, NULL, key });
	if (!rc)
		rc = store_mpu_create(fs->store, key, meta, upload_id);
	if (rc)
		return rc; /* an intent left is settled before a retry */
	rc = db_write(fs->db, mpu_rec_put_apply,
		      &(struct mpu_rec){ fs, *upload_id, key });
	if (rc) {
		store_mpu_abort(fs->store, key, *upload_id);
		free(*upload_id);
		*upload_id = NULL;
	}
	return rc;
}

/* See sync_int.h. */
void sync_mpu_end(struct fs *fs, const char *key, const char *upload_id,
		  bool completed)
{
	/* Kept in the journal if the abort fails: tried again at start. */
	if (completed || store_mpu_abort(fs->store, key, upload_id) == 0)
		db_write(fs->db, mpu_rec_del_apply,
			 &(struct mpu_rec){ fs, upload_id, key });
}

/* See sync_int.h. */
int sync_put_multipart(struct fs *fs, const struct sync_item *it, int fd,
		       uint64_t size, const struct store_meta *meta,
		       const struct store_cond *cond, struct store_info *out)
{
	uint64_t part;
	int nparts, copied = 0, rc;
	char(*etags)[STORE_ETAG_MAX];
	char *upload_id;

	/*
	 * All threads busy with as few parts as that takes (a store pays
	 * per request), in whole MiB; small enough that an unchanged part
	 * is still worth copying in the store rather than sending.
	 */
	part = ((size + MPU_THREADS - 1) / MPU_THREADS + (1u << 20) - 1) &
	       ~((1ull << 20) - 1);
	if (part < MPU_PART_MIN)
		part = MPU_PART_MIN;
	if (part > MPU_PART_MAX)
		part = MPU_PART_MAX;
	while ((size + part - 1) / part > MPU_PARTS_MAX)
		part *= 2;
	nparts = (int)((size + part - 1) / part);
	etags = calloc((size_t)nparts, sizeof(*etags));
	if (!etags)
		return -ENOMEM;
	rc = sync_mpu_begin(fs, it->key, meta, &upload_id);
	if (rc)
		goto out_free;
	struct sync_parts p = { .upload_id = upload_id,
				.fd = fd,
				.size = size,
				.part = part,
				.nparts = nparts,
				.etags = etags,
				.copy_ok = it->in.flags & FS_F_IN_STORE };

	rc = sync_mpu_parts(fs, it, &p);
	copied = p.copied;
	if (!rc)
		rc = store_mpu_complete_if(fs->store, it->key, upload_id,
					   nparts, etags, cond, out);
	sync_mpu_end(fs, it->key, upload_id, !rc);
	if (!rc && copied)
		log_debug("fs: upload %s: %d of %d parts copied", it->key,
			  copied, nparts);
	free(upload_id);
out_free:
	free(etags);
	return rc;
}
