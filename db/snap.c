/*
 * db/snap.c - PostgreSQL snapshots as a log position (snap_int.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snap_int.h"

int db_snap_parse(struct db_snap *s, const char *text)
{
	unsigned long long xmin, xmax, seq = 0;
	const char *p, *slash = strchr(text, '/');
	char *end;
	size_t n = 0, cap = 0;
	uint64_t *xip = NULL;
	int consumed = 0;

	if (slash) {
		seq = strtoull(text, &end, 10);
		if (end != slash)
			return -EINVAL;
		text = slash + 1;
	}
	if (sscanf(text, "%llu:%llu:%n", &xmin, &xmax, &consumed) != 2 ||
	    !consumed || xmin > xmax)
		return -EINVAL;
	for (p = text + consumed; *p;) {
		unsigned long long x = strtoull(p, &end, 10);

		if (end == p || x < xmin || x >= xmax ||
		    (n && x <= xip[n - 1])) {
			free(xip);
			return -EINVAL;
		}
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 8;
			uint64_t *q = realloc(xip, nc * sizeof(*q));

			if (!q) {
				free(xip);
				return -ENOMEM;
			}
			xip = q;
			cap = nc;
		}
		xip[n++] = x;
		p = *end == ',' ? end + 1 : end;
		if (*end && *end != ',') {
			free(xip);
			return -EINVAL;
		}
	}
	free(s->xip);
	*s = (struct db_snap){
		.xmin = xmin, .xmax = xmax, .xip = xip, .nxip = n, .seq = seq
	};
	return 0;
}

int db_snap_format(const struct db_snap *s, char *buf, size_t cap)
{
	size_t len;
	int n = s->seq ? snprintf(buf, cap,
				  "%" PRIu64 "/%" PRIu64 ":%" PRIu64 ":",
				  s->seq, s->xmin, s->xmax)
		       : snprintf(buf, cap, "%" PRIu64 ":%" PRIu64 ":", s->xmin,
				  s->xmax);

	if (n < 0 || (size_t)n >= cap)
		return -ENAMETOOLONG;
	len = (size_t)n;
	for (size_t i = 0; i < s->nxip; i++) {
		n = snprintf(buf + len, cap - len, "%s%" PRIu64, i ? "," : "",
			     s->xip[i]);
		if (n < 0 || (size_t)n >= cap - len)
			return -ENAMETOOLONG;
		len += (size_t)n;
	}
	return 0;
}

int db_snap_copy(struct db_snap *dst, const struct db_snap *src)
{
	uint64_t *xip = NULL;

	if (src->nxip) {
		xip = malloc(src->nxip * sizeof(*xip));
		if (!xip)
			return -ENOMEM;
		memcpy(xip, src->xip, src->nxip * sizeof(*xip));
	}
	free(dst->xip);
	*dst = *src;
	dst->xip = xip;
	return 0;
}

void db_snap_free(struct db_snap *s)
{
	free(s->xip);
	memset(s, 0, sizeof(*s));
}

static bool xip_has(const struct db_snap *s, uint64_t x)
{
	size_t lo = 0, hi = s->nxip;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s->xip[mid] == x)
			return true;
		if (s->xip[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/*
 * a was taken after s exactly when it knows of later transactions (a
 * larger xmax), or of the same ones with fewer still in progress: a
 * transaction in progress at a that began before s was in progress at s
 * too, so at equal xmax a's xip is a subset of s's.
 */
bool db_snap_covers(const struct db_snap *a, const struct db_snap *s)
{
	if (!s->xmax)
		return true;
	if (a->xmax != s->xmax)
		return a->xmax > s->xmax;
	for (size_t i = 0; i < a->nxip; i++)
		if (!xip_has(s, a->xip[i]))
			return false;
	return true;
}
