/*
 * common/log.h - leveled logging to stderr (journald picks it up) or to
 * syslog.
 *
 * The bottom room: every other room may log; it depends on nothing.  One
 * write(2) per line, so lines from many threads never interleave.  Never
 * pass secrets (keys, signatures, credentials) to these functions.
 *
 * Lines are escaped after formatting: control bytes become \xNN and a
 * backslash \\, so strings a client sent (names, paths) may be passed
 * as they are.  Lines a remote host can cause at will go through
 * log_host(), which is rate-limited per host.
 */
#ifndef MAPFS_LOG_H
#define MAPFS_LOG_H

#include <stdbool.h>

struct sockaddr_storage;

enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

enum log_target { LOG_TARGET_STDERR = 0, LOG_TARGET_SYSLOG };

/*
 * Where lines go from now on (default stderr).  Syslog lines go to the
 * daemon facility as "mapfs-gw[PID]" with the level as priority and no
 * timestamp of our own (syslog adds one).
 */
void log_set_target(enum log_target t);

/* Parse "stderr", "syslog".  Returns 0 or -EINVAL. */
int log_parse_target(const char *s, enum log_target *out);

/* Set the most verbose level printed (default LOG_LVL_INFO). */
void log_set_level(enum log_level lvl);

/* Parse "error", "warn", "info", "debug".  Returns 0 or -EINVAL. */
int log_parse_level(const char *s, enum log_level *out);

/* True if messages of lvl are printed (to skip costly formatting). */
int log_enabled(enum log_level lvl);

void log_msg(enum log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Text of peer's address ("10.0.0.5", "fd00::1") in buf; returns buf. */
#define LOG_ADDR_MAX 64
const char *log_addr(const struct sockaddr_storage *peer,
		     char buf[LOG_ADDR_MAX]);

/*
 * log_msg() for a line a remote host caused (a refused call, a bad
 * request): at most 5 lines per host and 50 over all hosts every 10 s;
 * the next line a host gets out after some were dropped says how many
 * (and mapfs_log_lines_dropped_total counts them).
 */
void log_host(enum log_level lvl, const struct sockaddr_storage *peer,
	      const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...)                                       \
	do {                                                 \
		if (log_enabled(LOG_LVL_DEBUG))              \
			log_msg(LOG_LVL_DEBUG, __VA_ARGS__); \
	} while (0)

#endif
