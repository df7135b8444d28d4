/* report.h: results as the juicefs-bench style table, or as JSON. */
#ifndef MAPFS_BENCH_REPORT_H
#define MAPFS_BENCH_REPORT_H

#include <stdio.h>

#include "items.h"

/* One finished item: its results merged over all threads. */
struct report_row {
	const struct item *item;
	struct item_result res;
	double seconds; /* first thread's start to last thread's end */
};

/* The table, printed a row at a time as items finish. */
void report_table_begin(FILE *f);
void report_table_row(FILE *f, const struct bench_cfg *cfg,
		      const struct report_row *r);
void report_table_end(FILE *f);

/* The whole run as one JSON object (python3 -m json.tool parses it). */
void report_json(FILE *f, const struct bench_cfg *cfg, const char *url,
		 const struct conn *server, const struct report_row *rows,
		 int n);

#endif
