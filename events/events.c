/* events/events.c - see events.h. */
#include "events.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <time.h>

#include "common/log.h"
#include "parse.h"
#include "fs/fs.h"
#include "metrics/httpd.h"
#include "metrics/metrics.h"
#include "s3/store.h"

#define SECRET_MIN 16
#define SECRET_HEADER "X-Mapfs-Secret"
#define CONFIRM_TIMEOUT_S 10

struct events {
	struct metrics_httpd *httpd;
	struct fs *fs;
	struct store *st;
	char *secret;
	pthread_mutex_t lock; /* the rate window */
	time_t window;
	unsigned in_window;
};

/* One request's body as it arrives. */
struct ev_req {
	char *body;
	size_t len;
	bool too_big;
};

/* Equal, in a time that does not depend on where they differ. */
static bool secret_eq(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char d = la != lb;

	for (size_t i = 0; i < la; i++)
		d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
	return d == 0;
}

static enum MHD_Result answer(struct MHD_Connection *conn, unsigned status,
			      const char *text)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(
		strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
	ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* The peer's address (for log_host) and its text. */
static void peer_of(struct MHD_Connection *conn, struct sockaddr_storage *ss,
		    char name[LOG_ADDR_MAX])
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;

	memset(ss, 0, sizeof(*ss));
	if (sa && sa->sa_family == AF_INET6)
		memcpy(ss, sa, sizeof(struct sockaddr_in6));
	else if (sa && sa->sa_family == AF_INET)
		memcpy(ss, sa, sizeof(struct sockaddr_in));
	log_addr(ss, name);
}

/* Take n more records in this second's window?  (EVENTS_RATE) */
static bool rate_ok(struct events *ev, size_t n)
{
	time_t now = time(NULL);
	bool ok;

	pthread_mutex_lock(&ev->lock);
	if (now != ev->window) {
		ev->window = now;
		ev->in_window = 0;
	}
	ok = ev->in_window + n <= EVENTS_RATE;
	if (ok)
		ev->in_window += (unsigned)n;
	pthread_mutex_unlock(&ev->lock);
	return ok;
}

/* The answer's body is not needed. */
static size_t discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

/*
 * An SNS subscription asks to be confirmed by a GET of its SubscribeURL.
 * Only an https URL of Amazon SNS is fetched (the body is untrusted: no
 * request to anywhere else); any other is logged for the operator.
 */
static void sns_confirm(const char *url)
{
	static const char pfx[] = "https://sns.";
	const char *host = url + sizeof(pfx) - 1, *end;
	CURL *c;
	CURLcode rc;
	long status = 0;

	end = strncmp(url, pfx, sizeof(pfx) - 1) ? NULL : strchr(host, '/');
	if (!end || (size_t)(end - host) < 15 ||
	    strncmp(end - 14, ".amazonaws.com", 14) ||
	    memchr(host, '@', (size_t)(end - host)) ||
	    memchr(host, ':', (size_t)(end - host))) {
		log_warn("events: an SNS subscription asks to be confirmed at "
			 "%s, which is not Amazon SNS: not fetched",
			 url);
		return;
	}
	c = curl_easy_init();
	if (!c)
		return;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
	curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)CONFIRM_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	if (rc == CURLE_OK && status == 200)
		log_info("events: confirmed the SNS subscription");
	else
		log_warn("events: confirming the SNS subscription failed (%s, "
			 "HTTP %ld): confirm it by hand at %s",
			 curl_easy_strerror(rc), status, url);
}

/* One object an event names: its directory is listed again. */
static bool take(struct events *ev, const struct ev_rec *r)
{
	char raw[STORE_KEY_MAX + 1], dec[STORE_KEY_MAX + 1];
	bool ours = false;

	log_debug("events: %s %s/%s", r->removed ? "removed" : "created",
		  r->bucket, r->key);
	/* Amazon S3 sends keys URL-encoded, radosgw as they are: both
	 * readings are tried (a listing too many costs little). */
	if (!store_event_key(ev->st, r->bucket, r->key, raw, sizeof(raw))) {
		fs_store_key_changed(ev->fs, raw);
		ours = true;
	}
	if (!ev_key_decode(r->key, dec, sizeof(dec)) && strcmp(dec, r->key) &&
	    !store_event_key(ev->st, r->bucket, dec, raw, sizeof(raw))) {
		fs_store_key_changed(ev->fs, raw);
		ours = true;
	}
	return ours;
}

static enum MHD_Result finish(struct events *ev, struct MHD_Connection *conn,
			      struct ev_req *rq)
{
	struct sockaddr_storage ss;
	char peer[LOG_ADDR_MAX];
	struct ev_batch b;
	size_t taken = 0;

	peer_of(conn, &ss, peer);
	if (rq->too_big) {
		log_host(LOG_LVL_WARN, &ss,
			 "events: %s sent a body over %u "
			 "bytes: refused",
			 peer, EVENTS_BODY_MAX);
		metrics_inc(MET_EVENTS_REFUSED);
		return answer(conn, MHD_HTTP_CONTENT_TOO_LARGE, "too large\n");
	}
	if (ev_parse(rq->body ? rq->body : "", rq->len, &b)) {
		log_host(LOG_LVL_WARN, &ss,
			 "events: %s sent %zu bytes that "
			 "are no S3 event notification: refused",
			 peer, rq->len);
		metrics_inc(MET_EVENTS_REFUSED);
		return answer(conn, MHD_HTTP_BAD_REQUEST, "not an S3 event\n");
	}
	if (!rate_ok(ev, b.n)) {
		ev_batch_free(&b);
		metrics_inc(MET_EVENTS_REFUSED);
		return answer(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
			      "slow down\n");
	}
	if (b.confirm_url)
		sns_confirm(b.confirm_url);
	for (size_t i = 0; i < b.n; i++)
		taken += take(ev, &b.recs[i]);
	metrics_add(MET_EVENTS_TAKEN, taken);
	metrics_add(MET_EVENTS_IGNORED, b.n - taken + b.skipped);
	log_debug("events: %zu records from %s, %zu of this store's objects",
		  b.n + b.skipped, peer, taken);
	ev_batch_free(&b);
	return answer(conn, MHD_HTTP_OK, "ok\n");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_len, void **state)
{
	struct events *ev = cls;
	struct ev_req *rq = *state;
	struct sockaddr_storage ss;
	char peer[LOG_ADDR_MAX];
	const char *hdr;

	(void)version;
	if (!rq) {
		/* The headers: check before taking any of the body. */
		if (strcmp(method, MHD_HTTP_METHOD_POST))
			return answer(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
				      "only POST\n");
		hdr = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						  SECRET_HEADER);
		if (!(url[0] == '/' && secret_eq(url + 1, ev->secret)) &&
		    !(hdr && secret_eq(hdr, ev->secret))) {
			peer_of(conn, &ss, peer);
			log_host(LOG_LVL_WARN, &ss,
				 "events: %s posted without "
				 "the secret: refused",
				 peer);
			metrics_inc(MET_EVENTS_REFUSED);
			return answer(conn, MHD_HTTP_FORBIDDEN, "forbidden\n");
		}
		rq = calloc(1, sizeof(*rq));
		if (!rq)
			return MHD_NO;
		*state = rq;
		return MHD_YES;
	}
	if (*upload_len) {
		size_t n = *upload_len;

		if (!rq->too_big && rq->len + n <= EVENTS_BODY_MAX) {
			char *nb = realloc(rq->body, rq->len + n);

			if (!nb)
				return MHD_NO;
			memcpy(nb + rq->len, upload, n);
			rq->body = nb;
			rq->len += n;
		} else {
			rq->too_big = true;
			free(rq->body);
			rq->body = NULL;
		}
		*upload_len = 0;
		return MHD_YES;
	}
	return finish(ev, conn, rq);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **state,
			 enum MHD_RequestTerminationCode why)
{
	struct ev_req *rq = *state;

	(void)cls;
	(void)conn;
	(void)why;
	if (rq) {
		free(rq->body);
		free(rq);
	}
	*state = NULL;
}

int events_start(const char *addr, const char *secret, struct fs *fs,
		 struct store *st, struct events **out, char *bound, size_t cap)
{
	struct events *ev;
	int rc;

	if (!secret || strlen(secret) < SECRET_MIN || strchr(secret, '/'))
		return -EINVAL;
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	ev->fs = fs;
	ev->st = st;
	ev->secret = strdup(secret);
	pthread_mutex_init(&ev->lock, NULL);
	rc = ev->secret
		     ? metrics_httpd_serve(addr, on_request, ev, on_completed,
					   &ev->httpd, bound, cap)
		     : -ENOMEM;
	if (rc) {
		events_stop(ev);
		return rc;
	}
	*out = ev;
	return 0;
}

void events_stop(struct events *ev)
{
	if (!ev)
		return;
	metrics_httpd_stop(ev->httpd);
	pthread_mutex_destroy(&ev->lock);
	if (ev->secret)
		memset(ev->secret, 0, strlen(ev->secret));
	free(ev->secret);
	free(ev);
}
