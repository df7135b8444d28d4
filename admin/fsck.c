/*
 * admin/fsck.c - `fsck [repair]` on the control socket: fs_fsck's
 * findings, one "> " line each, "step PHASE DONE TOTAL" lines while it
 * runs (at most every FSCK_STEP_MS), a summary, and last
 * "result FOUND REPAIRED" before "ok", for `mapfs-gw fsck`'s exit status.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "admin_int.h"
#include "fs/fs.h"
#include "metrics/metrics.h"

#define FSCK_STEP_MS 250

struct fsck_run {
	struct admin *a;
	int fd;
	uint64_t last_ms;
	int lost; /* the client went away: stop */
};

/* key as one line: control bytes (a key may hold any) as \xNN. */
static void escape(const char *key, char *buf, size_t cap)
{
	size_t o = 0;

	for (; *key && o + 5 < cap; key++) {
		unsigned char c = (unsigned char)*key;

		if (c < 0x20 || c == 0x7f || c == '\\')
			o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
		else
			buf[o++] = (char)c;
	}
	buf[o] = '\0';
}

static void on_item(void *ctx, const struct fs_fsck_item *it)
{
	struct fsck_run *r = ctx;
	char key[ADMIN_LINE_MAX / 2];

	escape(it->key, key, sizeof(key));
	if (!r->lost && admin_send(r->fd, "> %s %s: %s; %s", it->what, key,
				   it->detail, it->action))
		r->lost = -ECANCELED;
}

static int on_step(void *ctx, const char *phase, uint64_t done, uint64_t total)
{
	struct fsck_run *r = ctx;
	uint64_t now = metrics_now_ns() / 1000000u;

	if (atomic_load(&r->a->stopping))
		return -ECANCELED;
	if (!r->lost && now - r->last_ms >= FSCK_STEP_MS) {
		r->last_ms = now;
		if (admin_send(r->fd, "step %s %" PRIu64 " %" PRIu64, phase,
			       done, total))
			r->lost = -ECANCELED;
	}
	return r->lost;
}

void admin_cmd_fsck(struct admin *a, int fd, bool repair)
{
	struct fsck_run r = { .a = a, .fd = fd };
	struct fs_fsck_opts o = { .repair = repair,
				  .report = on_item,
				  .progress = on_step,
				  .ctx = &r };
	struct fs_fsck_stat st;
	int rc = fs_fsck(a->ctx.fs, &o, &st);

	if (rc) {
		admin_send(fd, "err fsck: %s", strerror(-rc));
		return;
	}
	admin_send(fd,
		   "> fsck: %" PRIu64 " records, %" PRIu64 " names, %" PRIu64
		   " objects in the store",
		   st.records, st.names, st.objects);
	admin_send(fd,
		   "> under way: %" PRIu64 " files to upload, %" PRIu64
		   " store moves or deletes queued, %" PRIu64
		   " multipart uploads begun",
		   st.pending_uploads, st.pending_moves, st.multipart);
	if (st.not_listed || st.newer || st.skipped)
		admin_send(fd,
			   "> not in the namespace yet: %" PRIu64
			   " objects in directories not listed here, %" PRIu64
			   " written since their directory's listing, %" PRIu64
			   " with keys no name can stand for",
			   st.not_listed, st.newer, st.skipped);
	if (!st.found)
		admin_send(fd, "> fsck: clean");
	else
		admin_send(fd,
			   "> fsck: %" PRIu64 " found, %" PRIu64
			   " repaired, %" PRIu64 " left",
			   st.found, st.repaired, st.found - st.repaired);
	admin_send(fd, "result %" PRIu64 " %" PRIu64, st.found, st.repaired);
	admin_send(fd, "ok");
}
