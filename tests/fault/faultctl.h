/*
 * tests/fault/faultctl.h - start and steer tests/fault/faultproxy from a
 * test: the proxy runs as a child of the test ($MAPFS_FAULTPROXY, set by
 * ctest), forwards 127.0.0.1:port to the target port, and takes commands
 * (faultproxy.c lists them) on its control connection.
 */
#ifndef MAPFS_FAULTCTL_H
#define MAPFS_FAULTCTL_H

#include <stddef.h>
#include <sys/types.h>

struct fault_proxy {
	pid_t pid; /* 0 when not running */
	int port;  /* where the gateway connects */
	int ctl_port;
	int ctl_fd;        /* the control connection, or -1 */
	char endpoint[64]; /* "http://127.0.0.1:PORT" */
};

/*
 * Start a proxy to 127.0.0.1:target_port in mode (e.g. "pass",
 * "reset 0.02") with random seed seed, and connect its control port.
 * 0, or -1 (the reason printed).
 */
int fault_proxy_start(struct fault_proxy *fp, int target_port, const char *mode,
		      unsigned long long seed);

/* fault_proxy_start for traffic that is not HTTP (PostgreSQL's): every
 * read forwarded as it comes (faultproxy --raw). */
int fault_proxy_start_raw(struct fault_proxy *fp, int target_port,
			  const char *mode, unsigned long long seed);

/*
 * Send one command line (printf-style, no newline) and put the answer,
 * without its newline, into reply (cap bytes; reply may be NULL).
 * 0 if the answer is "ok ...", else -1 (the command and answer printed).
 */
int fault_proxy_cmd(struct fault_proxy *fp, char *reply, size_t cap,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* "mode WORDS": 0 or -1. */
int fault_proxy_mode(struct fault_proxy *fp, const char *words);

/* The proxy's count of injected faults so far, or -1. */
long fault_proxy_injected(struct fault_proxy *fp);

/* SIGTERM, reap (SIGKILL after 5 s).  0 if it exited cleanly, else -1. */
int fault_proxy_stop(struct fault_proxy *fp);

#endif
