/*
 * common/log.h - leveled logging to stderr (journald picks it up) or to
 * syslog.
 *
 * The bottom room: every other room may log; it depends on nothing.  One
 * write(2) per line, so lines from many threads never interleave.  Never
 * pass secrets (keys, signatures, credentials) to these functions.
 */
#ifndef MAPFS_LOG_H
#define MAPFS_LOG_H

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

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...)                                                     \
	do {                                                               \
		if (log_enabled(LOG_LVL_DEBUG))                            \
			log_msg(LOG_LVL_DEBUG, __VA_ARGS__);               \
	} while (0)

#endif
