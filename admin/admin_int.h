/*
 * admin/admin_int.h - what the files of admin/ share; not for other rooms.
 */
#ifndef MAPFS_ADMIN_INT_H
#define MAPFS_ADMIN_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/un.h>

#include "admin.h"

#define ADMIN_CLIENTS_MAX 8 /* commands running at once */

struct admin {
	struct admin_ctx ctx;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int lfd;
	int wake[2]; /* a byte on wake[1] stops the acceptor */
	pthread_t acceptor;
	pthread_mutex_t lock;
	pthread_cond_t idle; /* nclients reached 0 */
	int nclients;
	atomic_bool stopping; /* long commands check it between files */
};

/* Run the command in line (NUL-terminated, no newline); answers on fd. */
void admin_cmd_run(struct admin *a, int fd, char *line);

/* ready.c: `ctl ready`, for health checks.  Answers on fd. */
void admin_cmd_ready(struct admin *a, int fd);

/* resources.c: what the process holds, from /proc and the database. */
void admin_resources_get(const struct admin_ctx *ctx,
			 struct admin_resources *r);

/* live.c: `stats`, one snapshot of the counters ctl stats shows as rates. */
void admin_cmd_stats(struct admin *a, int fd);

/* fsck.c: `fsck [repair]`, fs_fsck's findings and figures.  Answers on
 * fd. */
void admin_cmd_fsck(struct admin *a, int fd, bool repair);

#endif
