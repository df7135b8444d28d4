/* report.c: the table and JSON of report.h. */
#include "report.h"

#include <inttypes.h>

#define ROW_RULE                                                               \
	"+------------------+------------------+-----------------+-----------" \
	"+-----------+-----------+\n"

/* VALUE: what juicefs bench prints (MiB/s, files/s) plus ops/s. */
static double row_value(const struct report_row *r, const char **unit)
{
	double s = r->seconds > 0 ? r->seconds : 0;
	switch (r->item->value) {
	case VALUE_MIBS:
		*unit = "MiB/s";
		return s ? (double)r->res.bytes / (1024.0 * 1024.0) / s : 0;
	case VALUE_FILES:
		*unit = "files/s";
		return s ? (double)r->res.files / s : 0;
	default:
		*unit = "ops/s";
		return s ? (double)r->res.ops / s : 0;
	}
}

/* COST as juicefs bench defines it: the time one thread spends per file
 * (total time x threads / files), or for the RPC items the mean latency. */
static double row_cost(const struct bench_cfg *cfg, const struct report_row *r,
		       const char **unit)
{
	switch (r->item->cost) {
	case COST_S_PER_FILE:
		*unit = "s/file";
		return r->seconds;
	case COST_MS_PER_FILE:
		*unit = "ms/file";
		return r->res.files ? r->seconds * 1e3 * cfg->threads /
					      (double)r->res.files
				    : 0;
	default:
		*unit = "ms/op";
		return hist_mean(&r->res.hist) / 1e6;
	}
}

static void fmt_latency(char *buf, size_t len, uint64_t ns)
{
	if (ns < 1000000)
		snprintf(buf, len, "%.1f us", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, len, "%.2f ms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", (double)ns / 1e9);
}

void report_table_begin(FILE *f)
{
	fputs(ROW_RULE, f);
	fprintf(f, "| %16s | %16s | %15s | %9s | %9s | %9s |\n", "ITEM",
		"VALUE", "COST", "P50", "P99", "P99.9");
	fputs(ROW_RULE, f);
	fflush(f);
}

void report_table_row(FILE *f, const struct bench_cfg *cfg,
		      const struct report_row *r)
{
	const char *vu, *cu;
	double v = row_value(r, &vu);
	double c = row_cost(cfg, r, &cu);
	char value[32], cost[32], p50[16], p99[16], p999[16];
	snprintf(value, sizeof(value), "%.2f %s", v, vu);
	snprintf(cost, sizeof(cost), "%.3f %s", c, cu);
	fmt_latency(p50, sizeof(p50), hist_quantile(&r->res.hist, 0.50));
	fmt_latency(p99, sizeof(p99), hist_quantile(&r->res.hist, 0.99));
	fmt_latency(p999, sizeof(p999), hist_quantile(&r->res.hist, 0.999));
	fprintf(f, "| %16s | %16s | %15s | %9s | %9s | %9s |\n", r->item->label,
		value, cost, p50, p99, p999);
	fflush(f);
}

void report_table_end(FILE *f)
{
	fputs(ROW_RULE, f);
	fflush(f);
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void json_row(FILE *f, const struct bench_cfg *cfg,
		     const struct report_row *r)
{
	const char *vu, *cu;
	double v = row_value(r, &vu);
	double c = row_cost(cfg, r, &cu);
	const struct hist *h = &r->res.hist;
	fprintf(f, "    {\"name\": ");
	json_str(f, r->item->name);
	fprintf(f, ", \"label\": ");
	json_str(f, r->item->label);
	fprintf(f,
		", \"value\": %.3f, \"unit\": \"%s\", \"cost\": %.6f, "
		"\"cost_unit\": \"%s\",\n",
		v, vu, c, cu);
	fprintf(f,
		"     \"seconds\": %.6f, \"ops\": %" PRIu64
		", \"bytes\": %" PRIu64 ", \"files\": %" PRIu64 ",\n",
		r->seconds, r->res.ops, r->res.bytes, r->res.files);
	fprintf(f, "     \"latency_of\": ");
	json_str(f, r->item->latency_of);
	fprintf(f,
		", \"latency_us\": {\"samples\": %" PRIu64
		", \"mean\": %.3f, \"p50\": %.3f,"
		" \"p99\": %.3f, \"p999\": %.3f, \"max\": %.3f}}",
		h->count, hist_mean(h) / 1e3,
		(double)hist_quantile(h, 0.50) / 1e3,
		(double)hist_quantile(h, 0.99) / 1e3,
		(double)hist_quantile(h, 0.999) / 1e3, (double)h->max_ns / 1e3);
}

void report_json(FILE *f, const struct bench_cfg *cfg, const char *url,
		 const struct conn *server, const struct report_row *rows,
		 int n)
{
	fprintf(f, "{\n  \"tool\": \"mapfs-bench\",\n  \"url\": ");
	json_str(f, url);
	fprintf(f,
		",\n  \"threads\": %d, \"depth\": %d, \"block_size\": %" PRIu64
		", \"big_file_size\": %" PRIu64
		", \"small_file_size\": %" PRIu64
		", \"small_file_count\": %" PRIu64
		", \"io_file_size\": %" PRIu64
		", \"duration\": %.3f, \"verify\": %s,\n",
		cfg->threads, cfg->depth, cfg->block_size, cfg->big_file_size,
		cfg->small_file_size, cfg->small_file_count, cfg->io_file_size,
		cfg->duration, cfg->verify ? "true" : "false");
	fprintf(f, "  \"server\": {\"rtmax\": %u, \"wtmax\": %u},\n",
		server->rtmax, server->wtmax);
	fprintf(f, "  \"items\": [\n");
	for (int i = 0; i < n; i++) {
		json_row(f, cfg, &rows[i]);
		fputs(i + 1 < n ? ",\n" : "\n", f);
	}
	fprintf(f, "  ]\n}\n");
	fflush(f);
}
