/*
 * rpc/drc.c - the duplicate-request cache.
 *
 * RPC over TCP is at-most-once only as far as a connection lives: after a
 * reconnect a client resends every call it has no reply for, with the same
 * xid (RFC 5531 section 8.1 leaves duplicate detection to the server).
 * Run twice, a REMOVE or RENAME answers NFS3ERR_NOENT the second time and
 * an exclusive CREATE answers EXIST.  The cache remembers the reply of
 * every non-idempotent call and sends it again instead.
 *
 * The key is what identifies a retransmission, not a connection: the
 * client's IP address without its port (a reconnect comes from another
 * port and, through SO_REUSEPORT, usually lands on another loop), xid,
 * prog, vers, proc and a hash of the argument bytes (the first 256 and the
 * length, as knfsd: a client that reuses an xid for a different call gets
 * that call executed).
 *
 * Shared by all loops, so it is a fixed set of shards, each a hash table
 * with its own mutex and LRU list; only non-idempotent calls come here, so
 * READ and GETATTR never take these locks.  An entry is in progress from
 * the call's dispatch until it is finished, then done with its reply; only
 * done entries are on the LRU and can be evicted, so the pointer a call
 * holds to its in-progress entry stays valid.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_int.h"

#define RPC_DRC_SHARDS 64
/* Argument bytes that go into a key's hash (with the total length). */
#define RPC_DRC_HASH_BYTES 256

struct rpc_drc_entry {
	struct rpc_drc_entry *hnext;               /* bucket chain */
	struct rpc_drc_entry *lru_prev, *lru_next; /* done entries only */
	struct rpc_drc_key key;
	uint64_t khash;
	bool done;
	size_t len; /* reply bytes, record mark included */
	uint8_t *reply;
};

struct rpc_drc_shard {
	_Alignas(64) pthread_mutex_t lock;
	struct rpc_drc_entry **buckets;
	size_t mask;
	struct rpc_drc_entry *lru_head, *lru_tail; /* head: newest */
	size_t nentries, nbytes;
};

struct rpc_drc {
	size_t shard_entries, shard_bytes; /* per-shard bounds */
	struct rpc_drc_shard shards[RPC_DRC_SHARDS];
};

/* 64-bit finalizer (MurmurHash3 fmix64): every input bit moves every
 * output bit, so shard and bucket can both come from one hash. */
static uint64_t mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

uint64_t rpc_drc_hash_args(const void *data, size_t len)
{
	const uint8_t *p = data;
	size_t n = len < RPC_DRC_HASH_BYTES ? len : RPC_DRC_HASH_BYTES;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ len, w;
	size_t i;

	/* The first bytes and the length, as knfsd does (RC_CSUMLEN): a
	 * WRITE's handle, offset and count and the start of its data.  A
	 * whole MiB hashed on the loop cost more than the WRITE itself,
	 * and a collision only matters within one client's xid. */
	for (i = 0; i + 8 <= n; i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ mix64(w)) * 0x9fb21c651e98df25ull;
	}
	w = 0;
	memcpy(&w, p + i, n - i);
	return mix64(h ^ mix64(w ^ (uint64_t)len << 56));
}

void rpc_drc_key_init(struct rpc_drc_key *k,
		      const struct sockaddr_storage *peer, uint32_t xid,
		      uint32_t prog, uint32_t vers, uint32_t proc,
		      uint64_t arghash)
{
	memset(k, 0, sizeof(*k));
	/* IPv4 as ::ffff:a.b.c.d, the form a dual-stack socket reports, so
	 * the same client has one key whichever listener it came in on. */
	if (peer->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)peer;

		k->addr[10] = k->addr[11] = 0xff;
		memcpy(k->addr + 12, &s->sin_addr, 4);
	} else if (peer->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s =
			(const struct sockaddr_in6 *)peer;

		memcpy(k->addr, &s->sin6_addr, 16);
	}
	k->xid = xid;
	k->prog = prog;
	k->vers = vers;
	k->proc = proc;
	k->arghash = arghash;
}

static uint64_t key_hash(const struct rpc_drc_key *k)
{
	uint64_t a, b;

	memcpy(&a, k->addr, 8);
	memcpy(&b, k->addr + 8, 8);
	return mix64(mix64(a ^ mix64(b)) ^ ((uint64_t)k->xid << 32 | k->proc) ^
		     mix64((uint64_t)k->prog << 32 | k->vers) ^ k->arghash);
}

static bool key_equal(const struct rpc_drc_key *a, const struct rpc_drc_key *b)
{
	return a->xid == b->xid && a->proc == b->proc && a->prog == b->prog &&
	       a->vers == b->vers && a->arghash == b->arghash &&
	       !memcmp(a->addr, b->addr, sizeof(a->addr));
}

static size_t pow2_at_least(size_t n)
{
	size_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

int rpc_drc_new(size_t max_entries, size_t max_bytes, struct rpc_drc **out)
{
	struct rpc_drc *d;
	size_t nb;
	int i;

	/* Each shard must hold at least one entry with a small reply. */
	if (!max_entries ||
	    max_bytes / RPC_DRC_SHARDS < 2 * sizeof(struct rpc_drc_entry))
		return -EINVAL;
	d = aligned_alloc(64, (sizeof(*d) + 63) & ~(size_t)63);
	if (!d)
		return -ENOMEM;
	memset(d, 0, sizeof(*d));
	d->shard_entries = (max_entries + RPC_DRC_SHARDS - 1) / RPC_DRC_SHARDS;
	d->shard_bytes = (max_bytes + RPC_DRC_SHARDS - 1) / RPC_DRC_SHARDS;
	/* One bucket per entry: chains stay about one long. */
	nb = pow2_at_least(d->shard_entries);
	for (i = 0; i < RPC_DRC_SHARDS; i++) {
		struct rpc_drc_shard *s = &d->shards[i];

		s->buckets = calloc(nb, sizeof(*s->buckets));
		if (!s->buckets || pthread_mutex_init(&s->lock, NULL)) {
			free(s->buckets);
			while (i-- > 0) {
				pthread_mutex_destroy(&d->shards[i].lock);
				free(d->shards[i].buckets);
			}
			free(d);
			return -ENOMEM;
		}
		s->mask = nb - 1;
	}
	*out = d;
	return 0;
}

static size_t entry_bytes(const struct rpc_drc_entry *e)
{
	return sizeof(*e) + e->len;
}

static void lru_unlink(struct rpc_drc_shard *s, struct rpc_drc_entry *e)
{
	if (e->lru_prev)
		e->lru_prev->lru_next = e->lru_next;
	else
		s->lru_head = e->lru_next;
	if (e->lru_next)
		e->lru_next->lru_prev = e->lru_prev;
	else
		s->lru_tail = e->lru_prev;
	e->lru_prev = e->lru_next = NULL;
}

static void lru_push(struct rpc_drc_shard *s, struct rpc_drc_entry *e)
{
	e->lru_prev = NULL;
	e->lru_next = s->lru_head;
	if (s->lru_head)
		s->lru_head->lru_prev = e;
	else
		s->lru_tail = e;
	s->lru_head = e;
}

/* Take e out of its bucket and the shard's accounting, and free it. */
static void entry_remove(struct rpc_drc_shard *s, struct rpc_drc_entry *e)
{
	struct rpc_drc_entry **pp = &s->buckets[e->khash & s->mask];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	if (e->done)
		lru_unlink(s, e);
	s->nentries--;
	s->nbytes -= entry_bytes(e);
	free(e->reply);
	free(e);
}

/* Evict the oldest done entries until the shard has room for `entries`
 * more entries and `bytes` more bytes, or nothing done is left. */
static void shard_make_room(struct rpc_drc *d, struct rpc_drc_shard *s,
			    size_t entries, size_t bytes)
{
	while ((s->nentries + entries > d->shard_entries ||
		s->nbytes + bytes > d->shard_bytes) &&
	       s->lru_tail)
		entry_remove(s, s->lru_tail);
}

static struct rpc_drc_shard *shard_of(struct rpc_drc *d, uint64_t khash)
{
	/* Top bits pick the shard, low bits the bucket. */
	return &d->shards[khash >> 58];
}

int rpc_drc_begin(struct rpc_drc *d, const struct rpc_drc_key *k,
		  struct rpc_drc_entry **ent, struct rpc_outbuf **replay)
{
	uint64_t h = key_hash(k);
	struct rpc_drc_shard *s = shard_of(d, h);
	struct rpc_drc_entry *e;
	int rc;

	_Static_assert(RPC_DRC_SHARDS == 64, "shard_of() takes 6 bits");
	*ent = NULL;
	*replay = NULL;
	pthread_mutex_lock(&s->lock);
	for (e = s->buckets[h & s->mask]; e; e = e->hnext)
		if (e->khash == h && key_equal(&e->key, k))
			break;
	if (e && !e->done) {
		rc = RPC_DRC_BUSY;
		goto out_unlock;
	}
	if (e) {
		struct rpc_outbuf *ob = rpc_outbuf_new(e->len);

		if (!ob) {
			rc = -ENOMEM;
			goto out_unlock;
		}
		ob->len = e->len;
		/* Same key, same xid: the cached bytes are the reply. */
		memcpy(ob->data, e->reply, e->len);
		lru_unlink(s, e);
		lru_push(s, e);
		*replay = ob;
		rc = RPC_DRC_HIT;
		goto out_unlock;
	}
	rc = RPC_DRC_MISS;
	shard_make_room(d, s, 1, sizeof(*e));
	/* Full of calls still running: this one runs uncached, as it
	 * would without a cache, rather than grow past the bound. */
	if (s->nentries + 1 > d->shard_entries ||
	    s->nbytes + sizeof(*e) > d->shard_bytes)
		goto out_unlock;
	e = calloc(1, sizeof(*e));
	if (!e)
		goto out_unlock;
	e->key = *k;
	e->khash = h;
	e->hnext = s->buckets[h & s->mask];
	s->buckets[h & s->mask] = e;
	s->nentries++;
	s->nbytes += entry_bytes(e);
	*ent = e;
out_unlock:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void rpc_drc_finish(struct rpc_drc *d, struct rpc_drc_entry *e,
		    const struct rpc_outbuf *ob)
{
	struct rpc_drc_shard *s = shard_of(d, e->khash);
	uint8_t *copy = NULL;

	/* The reply is data[off, len): nothing of it is sent yet. */
	size_t len = ob ? ob->len - ob->off : 0;

	if (ob && len <= d->shard_bytes - sizeof(*e)) {
		copy = malloc(len);
		if (copy)
			memcpy(copy, ob->data + ob->off, len);
	}
	pthread_mutex_lock(&s->lock);
	if (!copy) {
		/* Nothing to replay (dropped, or too big to keep): a
		 * retransmission is executed again. */
		entry_remove(s, e);
		goto out_unlock;
	}
	shard_make_room(d, s, 0, len);
	e->reply = copy;
	e->len = len;
	e->done = true;
	s->nbytes += e->len;
	lru_push(s, e);
	/* Over the byte bound only if the running entries fill it; then
	 * this one goes too. */
	if (s->nbytes > d->shard_bytes)
		entry_remove(s, e);
out_unlock:
	pthread_mutex_unlock(&s->lock);
}

void rpc_drc_stats(struct rpc_drc *d, size_t *entries, size_t *bytes)
{
	*entries = *bytes = 0;
	for (int i = 0; i < RPC_DRC_SHARDS; i++) {
		struct rpc_drc_shard *s = &d->shards[i];

		pthread_mutex_lock(&s->lock);
		*entries += s->nentries;
		*bytes += s->nbytes;
		pthread_mutex_unlock(&s->lock);
	}
}

void rpc_drc_free(struct rpc_drc *d)
{
	if (!d)
		return;
	for (int i = 0; i < RPC_DRC_SHARDS; i++) {
		struct rpc_drc_shard *s = &d->shards[i];

		for (size_t b = 0; b <= s->mask; b++) {
			struct rpc_drc_entry *e, *next;

			for (e = s->buckets[b]; e; e = next) {
				next = e->hnext;
				free(e->reply);
				free(e);
			}
		}
		free(s->buckets);
		pthread_mutex_destroy(&s->lock);
	}
	free(d);
}
