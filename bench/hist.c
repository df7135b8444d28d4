/* hist.c: the log-bucket histogram of hist.h. */
#include "hist.h"

#include <string.h>

/* Values below HIST_SUB get one bucket each; above, the bucket is picked by
 * the position of the top bit and the HIST_SUB_BITS bits below it. */
static unsigned hist_index(uint64_t v)
{
	if (v < HIST_SUB)
		return (unsigned)v;
	unsigned msb = 63u - (unsigned)__builtin_clzll(v);
	unsigned shift = msb - HIST_SUB_BITS;
	unsigned sub = (unsigned)(v >> shift) - HIST_SUB;
	return HIST_SUB + shift * HIST_SUB + sub;
}

/* Largest value that lands in bucket i. */
static uint64_t hist_upper(unsigned i)
{
	if (i < HIST_SUB)
		return i;
	unsigned shift = (i - HIST_SUB) / HIST_SUB;
	uint64_t sub = (i - HIST_SUB) % HIST_SUB;
	uint64_t low = (HIST_SUB + sub) << shift;
	return low + ((uint64_t)1 << shift) - 1;
}

void hist_reset(struct hist *h)
{
	memset(h, 0, sizeof(*h));
}

void hist_record(struct hist *h, uint64_t ns)
{
	h->bucket[hist_index(ns)]++;
	h->count++;
	h->sum_ns += ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		dst->bucket[i] += src->bucket[i];
	dst->count += src->count;
	dst->sum_ns += src->sum_ns;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
}

uint64_t hist_quantile(const struct hist *h, double q)
{
	if (h->count == 0)
		return 0;
	/* The rank of the q-th observation, 1-based, rounded up so that p99.9
	 * of 1000 samples is the 999th, not the 998th. */
	double r = q * (double)h->count;
	uint64_t rank = (uint64_t)r;
	if ((double)rank < r)
		rank++;
	if (rank == 0)
		rank = 1;
	uint64_t seen = 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= rank) {
			uint64_t v = hist_upper(i);
			return v < h->max_ns ? v : h->max_ns;
		}
	}
	return h->max_ns;
}

double hist_mean(const struct hist *h)
{
	return h->count ? (double)h->sum_ns / (double)h->count : 0.0;
}
