/*
 * common/log.c - leveled logging: to stderr with one write(2) per line,
 * or to syslog(3), which is thread-safe and writes a line per call.
 */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* Process-wide by nature (like stderr itself); set once at start-up. */
static int log_level = LOG_LVL_INFO;

static int log_target = LOG_TARGET_STDERR;

static const char *const log_names[] = { "error", "warn", "info", "debug" };
static const int log_prios[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };

void log_set_target(enum log_target t)
{
	if (t == LOG_TARGET_SYSLOG)
		openlog("mapfs-gw", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	__atomic_store_n(&log_target, (int)t, __ATOMIC_RELAXED);
}

int log_parse_target(const char *s, enum log_target *out)
{
	if (strcmp(s, "stderr") == 0)
		*out = LOG_TARGET_STDERR;
	else if (strcmp(s, "syslog") == 0)
		*out = LOG_TARGET_SYSLOG;
	else
		return -EINVAL;
	return 0;
}

void log_set_level(enum log_level lvl)
{
	__atomic_store_n(&log_level, (int)lvl, __ATOMIC_RELAXED);
}

int log_parse_level(const char *s, enum log_level *out)
{
	for (int i = 0; i <= LOG_LVL_DEBUG; i++) {
		if (strcmp(s, log_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

int log_enabled(enum log_level lvl)
{
	return (int)lvl <= __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n, m;

	if (!log_enabled(lvl))
		return;
	if (__atomic_load_n(&log_target, __ATOMIC_RELAXED) == LOG_TARGET_SYSLOG) {
		va_start(ap, fmt);
		vsnprintf(line, sizeof(line), fmt, ap);
		va_end(ap);
		syslog(log_prios[lvl], "%s", line);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line),
		     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ mapfs-gw %s: ",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, log_names[lvl]);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	n = m < 0 ? n : (n + m < (int)sizeof(line) - 1 ? n + m : (int)sizeof(line) - 2);
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0) {
		/* Nowhere left to report a failing stderr. */
	}
}
