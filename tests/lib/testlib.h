/*
 * tests/lib/testlib.h - what every test program may use (unit and e2e
 * alike): the clock, a sleep, waiting for a condition instead of
 * sleeping for a guess, and removing a test's temp tree.  Linked into every unit test and the e2e
 * harness (tests/CMakeLists.txt).
 */
#ifndef MAPFS_TESTLIB_H
#define MAPFS_TESTLIB_H

#include <stdbool.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds. */
int64_t test_now_ms(void);

/* Sleep ms milliseconds (restarted when a signal cuts it short). */
void test_sleep_ms(int ms);

/*
 * Poll cond(arg) every step_ms until it is true or timeout_ms passed;
 * true if it became true (it is asked once more at the deadline).
 */
bool test_wait_until(bool (*cond)(void *arg), void *arg, int timeout_ms,
		     int step_ms);

/*
 * Remove path and everything below it (no shell, no symlink followed):
 * 0, or -errno of the first failure (what could go went).  A missing path
 * is 0.
 */
int test_rmtree(const char *path);

#endif
