/*
 * common/log.c - leveled logging: to stderr with one write(2) per line,
 * or to syslog(3), which is thread-safe and writes a line per call.
 *
 * Every line is escaped after formatting, whatever its arguments: a
 * control byte (a newline in a client's machine name, an escape
 * sequence) becomes \xNN and a backslash \\, so a string a client chose
 * can never start a line of its own or repaint a terminal.
 */
#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "metrics/metrics.h"

#define LOG_LINE_MAX 1024 /* formatted message, before escaping */

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

/* src escaped into dst[cap] (NUL-terminated, truncated to fit). */
static size_t log_escape(const char *src, char *dst, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;

	for (const unsigned char *p = (const unsigned char *)src; *p; p++) {
		if (*p == '\\' || *p < 0x20 || *p == 0x7f) {
			if (n + 4 >= cap)
				break;
			dst[n++] = '\\';
			if (*p == '\\') {
				dst[n++] = '\\';
				continue;
			}
			dst[n++] = 'x';
			dst[n++] = hex[*p >> 4];
			dst[n++] = hex[*p & 15];
		} else {
			if (n + 1 >= cap)
				break;
			dst[n++] = (char)*p;
		}
	}
	dst[n] = '\0';
	return n;
}

static void log_vmsg(enum log_level lvl, const char *fmt, va_list ap)
{
	char raw[LOG_LINE_MAX], line[4 * LOG_LINE_MAX + 128];
	struct timespec ts;
	struct tm tm;
	int n;

	vsnprintf(raw, sizeof(raw), fmt, ap);
	if (__atomic_load_n(&log_target, __ATOMIC_RELAXED) ==
	    LOG_TARGET_SYSLOG) {
		log_escape(raw, line, sizeof(line));
		syslog(log_prios[lvl], "%s", line);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line),
		     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ mapfs-gw %s: ",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
		     log_names[lvl]);
	n += (int)log_escape(raw, line + n, sizeof(line) - (size_t)n - 1);
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* Nowhere left to report a failing stderr. */
	}
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	va_list ap;

	if (!log_enabled(lvl))
		return;
	va_start(ap, fmt);
	log_vmsg(lvl, fmt, ap);
	va_end(ap);
}

const char *log_addr(const struct sockaddr_storage *peer,
		     char buf[LOG_ADDR_MAX])
{
	const void *a = NULL;

	if (peer->ss_family == AF_INET)
		a = &((const struct sockaddr_in *)peer)->sin_addr;
	else if (peer->ss_family == AF_INET6)
		a = &((const struct sockaddr_in6 *)peer)->sin6_addr;
	if (!a || !inet_ntop(peer->ss_family, a, buf, LOG_ADDR_MAX))
		snprintf(buf, LOG_ADDR_MAX, "?");
	return buf;
}

/*
 * The per-host limiter: a small table of recent hosts (a host that
 * hashes onto another's slot takes it over, so a table this size is
 * only ever an approximation: hence also a cap over all hosts).
 */
#define HOST_SLOTS 256
#define HOST_WINDOW_S 10
#define HOST_BURST 5      /* lines per host per window */
#define HOST_ALL_BURST 50 /* lines per window over all hosts */

struct host_slot {
	uint8_t addr[16];
	int64_t window;
	unsigned lines;
	unsigned long dropped;
};

static struct {
	pthread_mutex_t mu;
	struct host_slot slots[HOST_SLOTS];
	int64_t window;
	unsigned lines;
} host_limit = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void host_key(const struct sockaddr_storage *peer, uint8_t key[16])
{
	memset(key, 0, 16);
	if (peer->ss_family == AF_INET)
		memcpy(key + 12, &((const struct sockaddr_in *)peer)->sin_addr,
		       4);
	else if (peer->ss_family == AF_INET6)
		memcpy(key, &((const struct sockaddr_in6 *)peer)->sin6_addr,
		       16);
}

/* Whether a line for peer may go out now; *dropped: lines dropped since
 * its last one went out (reset by this answer when true). */
static bool host_allow(const struct sockaddr_storage *peer,
		       unsigned long *dropped)
{
	struct timespec ts;
	struct host_slot *sl;
	uint8_t key[16];
	uint32_t h = 2166136261u;
	bool ok;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t win = ts.tv_sec / HOST_WINDOW_S;

	host_key(peer, key);
	for (int i = 0; i < 16; i++)
		h = (h ^ key[i]) * 16777619u;
	pthread_mutex_lock(&host_limit.mu);
	sl = &host_limit.slots[h % HOST_SLOTS];
	if (memcmp(sl->addr, key, 16)) {
		memset(sl, 0, sizeof(*sl));
		memcpy(sl->addr, key, 16);
	}
	if (sl->window != win) {
		sl->window = win;
		sl->lines = 0;
	}
	if (host_limit.window != win) {
		host_limit.window = win;
		host_limit.lines = 0;
	}
	ok = sl->lines < HOST_BURST && host_limit.lines < HOST_ALL_BURST;
	if (ok) {
		sl->lines++;
		host_limit.lines++;
		*dropped = sl->dropped;
		sl->dropped = 0;
	} else {
		sl->dropped++;
	}
	pthread_mutex_unlock(&host_limit.mu);
	if (!ok)
		metrics_inc(MET_LOG_DROPPED);
	return ok;
}

void log_host(enum log_level lvl, const struct sockaddr_storage *peer,
	      const char *fmt, ...)
{
	char msg[LOG_LINE_MAX];
	unsigned long dropped = 0;
	va_list ap;

	if (!log_enabled(lvl) || !host_allow(peer, &dropped))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (dropped)
		log_msg(lvl, "%s (and %lu more lines from this host dropped)",
			msg, dropped);
	else
		log_msg(lvl, "%s", msg);
}
