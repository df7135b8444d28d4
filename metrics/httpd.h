/*
 * metrics/httpd.h - the Prometheus endpoint: GET /metrics over HTTP,
 * served by libmicrohttpd on a thread of its own.
 *
 * The endpoint has no authentication (as Prometheus exporters usually
 * do not): bind it to loopback or a private interface (docs/OPERATIONS.md).
 */
#ifndef MAPFS_METRICS_HTTPD_H
#define MAPFS_METRICS_HTTPD_H

#include <microhttpd.h>
#include <stddef.h>
#include <sys/socket.h>

struct metrics_httpd;

/*
 * Parse "ADDR:PORT" or "[ADDR6]:PORT" (numeric address; port 0 picks a
 * free one) into *ss.  0 or -EINVAL.
 */
int metrics_httpd_addr(const char *s, struct sockaddr_storage *ss,
		       socklen_t *len);

/*
 * Serve metrics_render() on addr (as metrics_httpd_addr takes it).  On
 * success *out runs until metrics_httpd_stop(), and bound (cap bytes)
 * names the address really bound, e.g. "127.0.0.1:9102".  0, -EINVAL
 * for a bad address, -EADDRINUSE or -EIO if it cannot listen.
 */
int metrics_httpd_start(const char *addr, struct metrics_httpd **out,
			char *bound, size_t cap);

/*
 * Serve handler(cls, ...) on addr the same way (one thread, at most 16
 * connections, 10 s idle timeout); completed (may be NULL) runs when a
 * request ends, to free what the handler kept in its *state.  Stopped
 * with metrics_httpd_stop().
 */
int metrics_httpd_serve(const char *addr, MHD_AccessHandlerCallback handler,
			void *cls, MHD_RequestCompletedCallback completed,
			struct metrics_httpd **out, char *bound, size_t cap);

/* Stop serving (waits for a scrape in progress) and free; NULL is a no-op. */
void metrics_httpd_stop(struct metrics_httpd *h);

#endif
