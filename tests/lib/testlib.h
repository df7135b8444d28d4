/*
 * tests/lib/testlib.h - what every test program may use (unit and e2e
 * alike): the clock, a sleep, and waiting for a condition instead of
 * sleeping for a guess.  Linked into every unit test and the e2e
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

#endif
