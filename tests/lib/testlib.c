/*
 * tests/lib/testlib.c - see testlib.h.
 */
#include "testlib.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
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

static int rm_first_err;

static int rm_one(const char *path, const struct stat *sb, int flag,
		  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	if (remove(path) != 0 && errno != ENOENT && !rm_first_err)
		rm_first_err = -errno;
	return 0;
}

int test_rmtree(const char *path)
{
	rm_first_err = 0;
	if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0 &&
	    errno != ENOENT && !rm_first_err)
		rm_first_err = -errno;
	return rm_first_err;
}
