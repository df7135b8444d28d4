/* pattern.c: the per-page stamped pattern of pattern.h. */
#include "pattern.h"

#include <pthread.h>
#include <string.h>

static char filler[PATTERN_PAGE];
static pthread_once_t filler_once = PTHREAD_ONCE_INIT;

/* A fixed xorshift stream: the same bytes in every run and on every client,
 * so a file written by one run can be checked by another (--keep). */
static void filler_init(void)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < sizeof(filler); i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(filler + i, &x, 8);
	}
}

/* The full page at page offset poff of file tag. */
static void page_make(char *page, uint64_t tag, uint64_t poff)
{
	memcpy(page, filler, PATTERN_PAGE);
	memcpy(page, &tag, 8);
	memcpy(page + 8, &poff, 8);
}

void pattern_fill(char *buf, uint64_t tag, uint64_t off, size_t len)
{
	pthread_once(&filler_once, filler_init);
	while (len) {
		uint64_t poff = off - off % PATTERN_PAGE;
		size_t in = (size_t)(off - poff);
		size_t n = PATTERN_PAGE - in < len ? PATTERN_PAGE - in : len;
		if (in == 0 && n == PATTERN_PAGE) {
			page_make(buf, tag, poff);
		} else {
			char page[PATTERN_PAGE];
			page_make(page, tag, poff);
			memcpy(buf, page + in, n);
		}
		buf += n;
		off += n;
		len -= n;
	}
}

void pattern_stamp(char *buf, uint64_t tag, uint64_t off, size_t len)
{
	uint64_t stamp[2] = { tag, off };
	for (size_t p = 0; p < len; p += PATTERN_PAGE) {
		size_t n = len - p < sizeof(stamp) ? len - p : sizeof(stamp);
		stamp[1] = off + p;
		memcpy(buf + p, stamp, n);
	}
}

int pattern_check(const char *buf, uint64_t tag, uint64_t off, size_t len,
		  uint64_t *bad)
{
	pthread_once(&filler_once, filler_init);
	char page[PATTERN_PAGE];
	while (len) {
		uint64_t poff = off - off % PATTERN_PAGE;
		size_t in = (size_t)(off - poff);
		size_t n = PATTERN_PAGE - in < len ? PATTERN_PAGE - in : len;
		/* A whole page is compared in place, without building it. */
		uint64_t stamp[2] = { tag, poff };
		if (in == 0 && n == PATTERN_PAGE &&
		    memcmp(buf, stamp, sizeof(stamp)) == 0 &&
		    memcmp(buf + sizeof(stamp), filler + sizeof(stamp),
			   PATTERN_PAGE - sizeof(stamp)) == 0) {
			buf += n;
			off += n;
			len -= n;
			continue;
		}
		page_make(page, tag, poff);
		if (memcmp(buf, page + in, n) != 0) {
			size_t i = 0;
			while (buf[i] == page[in + i])
				i++;
			*bad = off + i;
			return -1;
		}
		buf += n;
		off += n;
		len -= n;
	}
	return 0;
}
