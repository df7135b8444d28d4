/*
 * rpc/hosts.c - open connections per client host, so that one host
 * cannot take every connection slot of the server.
 *
 * Accepts and closes are not the hot path (a client keeps its
 * connection), so one mutex over a chained hash is enough.  A host's
 * record goes with its last connection.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics.h"
#include "rpc_int.h"

#define HOSTS_BUCKETS 1024

struct host {
	struct host *next;
	uint8_t addr[16];
	uint32_t conns;
};

struct rpc_hosts {
	pthread_mutex_t mu;
	struct host *buckets[HOSTS_BUCKETS];
};

int rpc_hosts_new(struct rpc_hosts **out)
{
	struct rpc_hosts *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	pthread_mutex_init(&h->mu, NULL);
	*out = h;
	return 0;
}

void rpc_hosts_free(struct rpc_hosts *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < HOSTS_BUCKETS; i++)
		while (h->buckets[i]) {
			struct host *x = h->buckets[i];

			h->buckets[i] = x->next;
			free(x);
		}
	pthread_mutex_destroy(&h->mu);
	free(h);
}

/* A host's address as 16 bytes (IPv4 as IPv4-mapped) and its bucket. */
static struct host **host_find(struct rpc_hosts *h,
			       const struct sockaddr_storage *peer,
			       uint8_t key[16])
{
	struct host **pp;
	uint32_t x = 2166136261u;

	memset(key, 0, 16);
	if (peer->ss_family == AF_INET6) {
		memcpy(key, &((const struct sockaddr_in6 *)peer)->sin6_addr,
		       16);
	} else if (peer->ss_family == AF_INET) {
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &((const struct sockaddr_in *)peer)->sin_addr,
		       4);
	}
	for (int i = 0; i < 16; i++)
		x = (x ^ key[i]) * 16777619u;
	for (pp = &h->buckets[x % HOSTS_BUCKETS]; *pp; pp = &(*pp)->next)
		if (!memcmp((*pp)->addr, key, 16))
			break;
	return pp;
}

bool rpc_hosts_take(struct rpc_hosts *h, const struct sockaddr_storage *peer,
		    uint32_t limit)
{
	uint8_t key[16];
	struct host **pp, *x;
	bool ok = false;

	pthread_mutex_lock(&h->mu);
	pp = host_find(h, peer, key);
	x = *pp;
	if (!x && (x = calloc(1, sizeof(*x)))) {
		memcpy(x->addr, key, 16);
		*pp = x;
	}
	if (x && (!limit || x->conns < limit)) {
		x->conns++;
		ok = true;
	}
	if (x && !x->conns) {
		*pp = x->next;
		free(x);
	}
	pthread_mutex_unlock(&h->mu);
	return ok;
}

void rpc_hosts_put(struct rpc_hosts *h, const struct sockaddr_storage *peer)
{
	uint8_t key[16];
	struct host **pp, *x;

	pthread_mutex_lock(&h->mu);
	pp = host_find(h, peer, key);
	if ((x = *pp) && !--x->conns) {
		*pp = x->next;
		free(x);
	}
	pthread_mutex_unlock(&h->mu);
}

/* See rpc.h. */
void rpc_server_collect(void *arg, struct metrics_buf *b)
{
	struct rpc_server *srv = arg;
	struct rpc_hosts *h = srv->hosts;
	const char *help = "Open client TCP connections, by client host";

	pthread_mutex_lock(&h->mu);
	for (size_t i = 0; i < HOSTS_BUCKETS; i++)
		for (struct host *x = h->buckets[i]; x; x = x->next) {
			static const uint8_t v4[12] = {
				[10] = 0xff, [11] = 0xff
			};
			char a[INET6_ADDRSTRLEN], lab[INET6_ADDRSTRLEN + 8];

			if (!memcmp(x->addr, v4, 12))
				inet_ntop(AF_INET, x->addr + 12, a, sizeof(a));
			else
				inet_ntop(AF_INET6, x->addr, a, sizeof(a));
			snprintf(lab, sizeof(lab), "host=\"%s\"", a);
			metrics_buf_gauge(b, "mapfs_client_connections", help,
					  lab, (double)x->conns);
			help = NULL;
		}
	pthread_mutex_unlock(&h->mu);
}
