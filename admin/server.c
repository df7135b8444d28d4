/*
 * admin/server.c - the control socket: accept, check the peer, read one
 * command line, run it on a thread of its own (a warm may take hours
 * and must not hold up a status).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admin_int.h"
#include "common/log.h"

#define ADMIN_READ_TIMEOUT_MS 5000

struct admin_conn {
	struct admin *a;
	int fd;
};

/* Only root and the gateway's own user may steer it. */
static bool peer_allowed(int fd, uid_t *uid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		return false;
	*uid = cr.uid;
	return cr.uid == 0 || cr.uid == geteuid();
}

/* One line, at most ADMIN_LINE_MAX bytes, within a timeout.  0 or -errno. */
static int read_line(int fd, char *buf, size_t cap)
{
	size_t len = 0;

	while (len < cap - 1) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, ADMIN_READ_TIMEOUT_MS) <= 0)
			return -ETIMEDOUT;
		r = recv(fd, buf + len, cap - 1 - len, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -ECONNRESET;
		len += (size_t)r;
		char *nl = memchr(buf, '\n', len);

		if (nl) {
			*nl = '\0';
			return 0;
		}
	}
	return -EMSGSIZE;
}

static void *conn_main(void *p)
{
	struct admin_conn *c = p;
	struct admin *a = c->a;
	char line[ADMIN_LINE_MAX];
	uid_t uid = (uid_t)-1;
	int rc;

	if (!peer_allowed(c->fd, &uid)) {
		log_warn("ctl: refused a command from uid %d (only root or uid "
			 "%d)",
			 (int)uid, (int)geteuid());
		admin_send(c->fd, "err permission denied");
	} else if ((rc = read_line(c->fd, line, sizeof(line)))) {
		admin_send(c->fd, "err %s", strerror(-rc));
	} else {
		admin_cmd_run(a, c->fd, line);
	}
	close(c->fd);
	free(c);
	pthread_mutex_lock(&a->lock);
	if (--a->nclients == 0)
		pthread_cond_broadcast(&a->idle);
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

/* Hand fd to a command thread, or refuse it when too many run. */
static void conn_start(struct admin *a, int fd)
{
	struct admin_conn *c;
	pthread_attr_t attr;
	pthread_t t;

	pthread_mutex_lock(&a->lock);
	if (a->nclients >= ADMIN_CLIENTS_MAX) {
		pthread_mutex_unlock(&a->lock);
		admin_send(fd, "err busy: %d commands running",
			   ADMIN_CLIENTS_MAX);
		close(fd);
		return;
	}
	a->nclients++;
	pthread_mutex_unlock(&a->lock);
	c = malloc(sizeof(*c));
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (c) {
		*c = (struct admin_conn){ a, fd };
		if (pthread_create(&t, &attr, conn_main, c) == 0) {
			pthread_attr_destroy(&attr);
			return;
		}
	}
	pthread_attr_destroy(&attr);
	free(c);
	admin_send(fd, "err out of memory");
	close(fd);
	pthread_mutex_lock(&a->lock);
	if (--a->nclients == 0)
		pthread_cond_broadcast(&a->idle);
	pthread_mutex_unlock(&a->lock);
}

static void *acceptor_main(void *p)
{
	struct admin *a = p;
	struct pollfd pf[2] = { { .fd = a->lfd, .events = POLLIN },
				{ .fd = a->wake[0], .events = POLLIN } };

	for (;;) {
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_error("ctl: poll: %s", strerror(errno));
			return NULL;
		}
		if (pf[1].revents)
			return NULL;
		int fd = accept4(a->lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno != EINTR && errno != EAGAIN &&
			    errno != ECONNABORTED)
				log_warn("ctl: accept: %s", strerror(errno));
			continue;
		}
		conn_start(a, fd);
	}
}

/* Bind to path, replacing a socket no gateway answers on any more. */
static int sock_bind(struct admin *a)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	memcpy(sun.sun_path, a->path, sizeof(a->path));
	for (int attempt = 0; attempt < 2; attempt++) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
			break;
		int err = errno;

		if (err == EADDRINUSE && attempt == 0 &&
		    connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 &&
		    errno == ECONNREFUSED) {
			close(fd);
			unlink(a->path); /* left by a gateway that died */
			continue;
		}
		close(fd);
		return -err;
	}
	/* The 0700 state directory covers the moment before this chmod. */
	if (chmod(a->path, 0600) || listen(fd, 16)) {
		int err = -errno;

		close(fd);
		unlink(a->path);
		return err;
	}
	return fd;
}

int admin_start(const char *sock_path, const struct admin_ctx *ctx,
		struct admin **out)
{
	struct admin *a;
	int rc;

	if (strlen(sock_path) >= sizeof(a->path))
		return -ENAMETOOLONG;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->ctx = *ctx;
	strcpy(a->path, sock_path);
	a->wake[0] = a->wake[1] = -1;
	if (pipe2(a->wake, O_CLOEXEC)) {
		rc = -errno;
		goto out_free;
	}
	a->lfd = sock_bind(a);
	if (a->lfd < 0) {
		rc = a->lfd;
		goto out_pipe;
	}
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->idle, NULL);
	rc = -pthread_create(&a->acceptor, NULL, acceptor_main, a);
	if (rc)
		goto out_sock;
	*out = a;
	return 0;
out_sock:
	pthread_cond_destroy(&a->idle);
	pthread_mutex_destroy(&a->lock);
	close(a->lfd);
	unlink(a->path);
out_pipe:
	close(a->wake[0]);
	close(a->wake[1]);
out_free:
	free(a);
	return rc;
}

void admin_stop(struct admin *a)
{
	if (!a)
		return;
	atomic_store(&a->stopping, true);
	if (write(a->wake[1], "x", 1) != 1)
		log_warn("ctl: cannot wake the acceptor: %s", strerror(errno));
	pthread_join(a->acceptor, NULL);
	close(a->lfd);
	unlink(a->path);
	pthread_mutex_lock(&a->lock);
	while (a->nclients)
		pthread_cond_wait(&a->idle, &a->lock);
	pthread_mutex_unlock(&a->lock);
	pthread_cond_destroy(&a->idle);
	pthread_mutex_destroy(&a->lock);
	close(a->wake[0]);
	close(a->wake[1]);
	free(a);
}
