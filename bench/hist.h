/* hist.h: fixed-size log-bucket latency histogram (HDR-style).
 *
 * Recording is a few shifts and one increment: no allocation, no lock, so a
 * worker can record every op on its hot path.  Each power of two is split into
 * HIST_SUB linear sub-buckets, so any reported value is within 1/HIST_SUB
 * (about 3%) of the true one, from 1 ns up to 2^64 ns.  Workers own their
 * histogram; the main thread merges them after a run.
 */
#ifndef MAPFS_BENCH_HIST_H
#define MAPFS_BENCH_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 5
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_BUCKETS (HIST_SUB + (64 - HIST_SUB_BITS) * HIST_SUB)

struct hist {
	uint64_t count;
	uint64_t sum_ns;
	uint64_t max_ns;
	uint64_t bucket[HIST_BUCKETS];
};

/* Empties h. */
void hist_reset(struct hist *h);

/* Counts one observation of ns nanoseconds. */
void hist_record(struct hist *h, uint64_t ns);

/* Adds every observation of src to dst. */
void hist_merge(struct hist *dst, const struct hist *src);

/* The value at quantile q (0 < q <= 1) in ns: the upper edge of the bucket
 * holding it, capped at the largest value seen; 0 when h is empty. */
uint64_t hist_quantile(const struct hist *h, double q);

/* Mean in ns; 0 when h is empty. */
double hist_mean(const struct hist *h);

#endif
