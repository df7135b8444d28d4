/*
 * common/mono.h - the monotonic clock, and condition variables that wait
 * by it: a step of the wall clock neither stretches nor cuts a wait (a
 * linger, a lazy window, an async export's window).
 */
#ifndef MAPFS_COMMON_MONO_H
#define MAPFS_COMMON_MONO_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Now, in ns of CLOCK_MONOTONIC. */
static inline uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A deadline in ns of CLOCK_MONOTONIC as pthread_cond_timedwait takes it
 * (for a condition variable made by mono_cond_init). */
static inline struct timespec mono_ts(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };

	return ts;
}

/* A condition variable whose timed waits count CLOCK_MONOTONIC. */
static inline void mono_cond_init(pthread_cond_t *c)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
}

#endif
