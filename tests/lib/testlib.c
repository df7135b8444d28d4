/*
 * tests/lib/testlib.c - see testlib.h.
 */
#include "testlib.h"

#include <errno.h>
#include <time.h>

int64_t test_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void test_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

bool test_wait_until(bool (*cond)(void *arg), void *arg, int timeout_ms,
		     int step_ms)
{
	int64_t end = test_now_ms() + timeout_ms;

	while (!cond(arg)) {
		if (test_now_ms() >= end)
			return cond(arg);
		test_sleep_ms(step_ms);
	}
	return true;
}
