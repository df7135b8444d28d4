/* items.h: the benchmark items and the per-thread worker that runs them.
 *
 * A worker owns one connection, its directory under the work dir, Q slots
 * (one outstanding operation each) and its result.  An item runs in two
 * halves on every worker: prepare (untimed: create what it needs, such as the
 * file a read item reads) and run (timed).  main.c puts a barrier between the
 * halves so all workers start the timed part together.
 */
#ifndef MAPFS_BENCH_ITEMS_H
#define MAPFS_BENCH_ITEMS_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "hist.h"
#include "nfsconn.h"

struct bench_cfg {
	int threads;
	int depth;           /* outstanding operations per connection */
	uint64_t block_size; /* big and small file I/O size */
	uint64_t big_file_size;
	uint64_t small_file_size;
	uint64_t small_file_count; /* per thread */
	uint64_t io_file_size;     /* the file of the 4k and 1m items */
	double duration;           /* seconds, for rate items */
	int verify;
	int reuse;   /* read-big and the small items use a --keep run's files */
	int renamed; /* the small items act on s.N.r, the rename item's names */
};

/* What the item's VALUE counts, and what its COST is, as juicefs bench
 * prints them. */
enum item_value { VALUE_MIBS, VALUE_FILES, VALUE_OPS };
enum item_cost {
	COST_S_PER_FILE,  /* elapsed time per file per thread (big files) */
	COST_MS_PER_FILE, /* the same, in ms (small files) */
	COST_MS_PER_OP,   /* mean latency of one RPC */
};
/* How the progress bar measures an item: bytes, files or time. */
enum item_progress { PROGRESS_BYTES, PROGRESS_FILES, PROGRESS_TIME };

struct item_result {
	uint64_t ops;      /* RPCs completed in the timed part */
	uint64_t bytes;    /* payload bytes read or written */
	uint64_t files;    /* files completed (small-file items) */
	uint64_t start_ns; /* the timed part, CLOCK_MONOTONIC */
	uint64_t end_ns;
	struct hist hist; /* per-op (or per-file) latency */
};

struct worker;

struct item {
	const char *name;  /* as given to --items and printed in --json */
	const char *label; /* the table's ITEM column */
	enum item_value value;
	enum item_cost cost;
	enum item_progress progress;
	const char *latency_of; /* what one histogram sample covers */
	int (*prepare)(struct worker *w);
	int (*run)(struct worker *w);
};

extern const struct item bench_items[];
extern const int bench_item_count;

struct slot;

/* The parameters of the operation stream being run; items.c's only. */
struct job {
	int (*issue)(struct slot *s);
	struct bfh fh;
	uint64_t tag;  /* pattern tag of the file */
	uint64_t size; /* file size */
	uint32_t io;   /* bytes per READ / WRITE */
	int write;
	int random;
	int verify;
	int proc;             /* NFS procedure of the metadata items */
	uint64_t deadline_ns; /* rate items stop issuing then; 0: one pass */
	uint64_t next;        /* next offset, or next small file */
	uint64_t total;       /* small files to do */
	uint64_t rng;
};

struct worker {
	int id;
	const struct bench_cfg *cfg;
	atomic_int *abort; /* shared; the first worker that fails sets it */
	struct conn conn;
	struct bfh top;  /* the work dir */
	struct bfh dir;  /* this worker's directory in it */
	struct bfh meta; /* an empty file for getattr / lookup / access */
	struct bfh big;
	struct bfh io;
	int have_big, have_small, have_io, tried_small;
	int have_created, tried_created, tried_seen, tried_renamed;
	/* A second connection, to the next gateway of a cluster run (or the
	 * same server): where the visibility item looks for what it made. */
	struct conn peer;
	int have_peer;
	struct slot *slots;
	char *bufs;
	uint32_t buf_size;
	int inflight;
	uint64_t now; /* the last clock reading, ns */
	struct job job;
	struct item_result res;
	atomic_uint_fast64_t progress; /* bytes or files done, for the bar */
};

static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Makes w's directory and files and its slots; w->conn is open and w->top
 * set.  Returns 0, or -1 with w->conn.err set. */
int worker_setup(struct worker *w);

/* Removes what w created (files and its directory). */
int worker_cleanup(struct worker *w);

/* Frees the slots and buffers of w. */
void worker_free(struct worker *w);

#endif
