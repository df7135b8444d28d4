/*
 * metrics/httpd.c - GET /metrics with libmicrohttpd, and the same
 * listening and limits for the gateway's other endpoint (events/).
 *
 * The listening socket is made here, not by libmicrohttpd, so that a
 * failure to bind has its real errno and port 0 can be read back with
 * getsockname().  One internal polling thread is plenty for a scraper
 * every few seconds; a connection limit and timeout keep a stuck or
 * hostile client from holding it.
 */
#include "httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics.h"

#define HTTPD_CONN_LIMIT 16
#define HTTPD_TIMEOUT_S 10
#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct metrics_httpd {
	struct MHD_Daemon *d;
	int fd;
};

int metrics_httpd_addr(const char *s, struct sockaddr_storage *ss,
		       socklen_t *len)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon, *port;
	size_t hlen;
	char *end;
	long p;

	if (!s)
		return -EINVAL;
	colon = strrchr(s, ':');
	if (!colon || colon == s)
		return -EINVAL;
	port = colon + 1;
	errno = 0;
	p = strtol(port, &end, 10);
	if (!*port || *end || errno || p < 0 || p > 65535)
		return -EINVAL;
	hlen = (size_t)(colon - s);
	if (s[0] == '[') { /* [v6]:port */
		if (hlen < 3 || s[hlen - 1] != ']')
			return -EINVAL;
		s++;
		hlen -= 2;
	}
	if (hlen >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, hlen);
	host[hlen] = '\0';
	if (getaddrinfo(host, port, &hints, &res))
		return -EINVAL;
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static void addr_name(const struct sockaddr_storage *ss, char *buf, size_t cap)
{
	char host[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)ss;

		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		snprintf(buf, cap, "[%s]:%u", host, ntohs(a->sin6_port));
	} else {
		const struct sockaddr_in *a = (const void *)ss;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		snprintf(buf, cap, "%s:%u", host, ntohs(a->sin_port));
	}
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status,
			     const char *type, char *body, size_t len,
			     enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r =
		MHD_create_response_from_buffer(len, body, mode);
	enum MHD_Result ret;

	if (!r) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_len, void **state)
{
	static char not_found[] = "not found: try /metrics\n";
	static char bad_method[] = "only GET\n";
	struct metrics_buf b = { 0 };

	(void)cls;
	(void)version;
	(void)upload;
	(void)upload_len;
	(void)state;
	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
			     bad_method, sizeof(bad_method) - 1,
			     MHD_RESPMEM_PERSISTENT);
	if (strcmp(url, "/metrics"))
		return reply(conn, MHD_HTTP_NOT_FOUND, "text/plain", not_found,
			     sizeof(not_found) - 1, MHD_RESPMEM_PERSISTENT);
	if (metrics_render(&b))
		return MHD_NO; /* no memory: libmicrohttpd closes the connection */
	return reply(conn, MHD_HTTP_OK, PROM_CONTENT_TYPE, b.p, b.len,
		     MHD_RESPMEM_MUST_FREE);
}

int metrics_httpd_serve(const char *addr, MHD_AccessHandlerCallback handler,
			void *cls, MHD_RequestCompletedCallback completed,
			struct metrics_httpd **out, char *bound, size_t cap)
{
	struct sockaddr_storage ss;
	struct metrics_httpd *h;
	socklen_t len;
	int one = 1, rc;

	rc = metrics_httpd_addr(addr, &ss, &len);
	if (rc)
		return rc;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (h->fd < 0) {
		rc = -errno;
		goto out_free;
	}
	setsockopt(h->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(h->fd, (struct sockaddr *)&ss, len) || listen(h->fd, 64)) {
		rc = -errno;
		goto out_close;
	}
	len = sizeof(ss);
	if (getsockname(h->fd, (struct sockaddr *)&ss, &len)) {
		rc = -errno;
		goto out_close;
	}
	h->d = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
			(ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
		0, NULL, NULL, handler, cls, MHD_OPTION_LISTEN_SOCKET, h->fd,
		MHD_OPTION_NOTIFY_COMPLETED, completed, cls,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTPD_CONN_LIMIT,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTPD_TIMEOUT_S,
		MHD_OPTION_END);
	if (!h->d) {
		rc = -EIO;
		goto out_close;
	}
	addr_name(&ss, bound, cap);
	*out = h;
	return 0;
out_close:
	close(h->fd);
out_free:
	free(h);
	return rc;
}

int metrics_httpd_start(const char *addr, struct metrics_httpd **out,
			char *bound, size_t cap)
{
	return metrics_httpd_serve(addr, on_request, NULL, NULL, out, bound,
				   cap);
}

void metrics_httpd_stop(struct metrics_httpd *h)
{
	if (!h)
		return;
	/* Quiesce first: it hands the listening socket back, so that it is
	 * closed exactly once, here, whatever libmicrohttpd's version does. */
	MHD_quiesce_daemon(h->d);
	MHD_stop_daemon(h->d);
	close(h->fd);
	free(h);
}
