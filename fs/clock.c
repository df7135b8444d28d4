/*
 * fs/clock.c - the namespace's clock: times of records (CLOCK_REALTIME,
 * as NFS times are) and their conversions.  At the bottom of fs/'s
 * layers: every file may ask it the time.
 */
#include <time.h>

#include "fs_int.h"

int64_t fs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return fs_ts_to_ns(&ts);
}

uint64_t fs_now_ms(void)
{
	return (uint64_t)fs_now_ns() / 1000000u;
}

uint64_t fs_now_coarse_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	return (uint64_t)fs_ts_to_ns(&ts) / 1000000u;
}

struct timespec fs_ns_to_ts(int64_t ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000,
			       .tv_nsec = ns % 1000000000 };

	if (ts.tv_nsec < 0) {
		ts.tv_sec--;
		ts.tv_nsec += 1000000000;
	}
	return ts;
}

int64_t fs_ts_to_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}
