/*
 * rpc/splice.c - the pipes of zero-copy replies.
 *
 * A READ served by splice moves the file's page-cache pages into a pipe
 * (by reference, io_uring's splice on the cache side) and from the pipe
 * into the socket (by reference again: TCP sends the pages themselves).
 * No byte of the payload is copied in user space or into a user buffer;
 * on loopback the only copy left is the client's receive.
 *
 * Each loop keeps its own pool of pipes (no lock), sized once to the
 * largest payload.  A pipe goes back to the pool only when it is known to
 * be empty; one that may still hold bytes (a reply cut short by a closed
 * connection, an I/O error half-way) is checked and closed if not empty,
 * so no stale byte can ever precede another reply's payload.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/log.h"
#include "rpc_int.h"

/* What each pipe is sized to: Linux's default pipe-max-size. */
#define RPC_PIPE_SIZE (1u << 20)
/* Pipes per loop at most, pooled or in use. */
#define RPC_PIPES_MAX 32

static struct rpc_pipe *pipe_new(struct rpc_loop *loop)
{
	struct rpc_pipe *p = malloc(sizeof(*p));
	int fds[2], sz;

	if (!p)
		return NULL;
	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC)) {
		free(p);
		return NULL;
	}
	sz = fcntl(fds[1], F_SETPIPE_SZ, RPC_PIPE_SIZE);
	if (sz < (int)RPC_PIPE_SIZE) {
		/* Over pipe-max-size or the user's pipe-user-pages: replies
		 * are copied instead, and we stop asking. */
		log_info("rpc: pipes of %u bytes refused (%s): READ replies "
			 "are copied",
			 RPC_PIPE_SIZE,
			 sz < 0 ? "no permission or limit reached" : "smaller");
		loop->pipes_refused = true;
		close(fds[0]);
		close(fds[1]);
		free(p);
		return NULL;
	}
	p->next = NULL;
	p->rfd = fds[0];
	p->wfd = fds[1];
	p->cap = (size_t)sz;
	loop->npipes++;
	return p;
}

struct rpc_pipe *rpc_pipe_get(struct rpc_loop *loop, size_t cap)
{
	struct rpc_pipe *p = loop->pipes;

	if (cap > RPC_PIPE_SIZE)
		return NULL;
	if (p) {
		loop->pipes = p->next;
		p->next = NULL;
		return p;
	}
	if (loop->pipes_refused || loop->npipes >= RPC_PIPES_MAX)
		return NULL;
	return pipe_new(loop);
}

void rpc_pipe_close(struct rpc_pipe *p)
{
	close(p->rfd);
	close(p->wfd);
	free(p);
}

void rpc_pipe_put(struct rpc_loop *loop, struct rpc_pipe *p, bool empty)
{
	int left = 0;

	if (!empty && (ioctl(p->rfd, FIONREAD, &left) || left)) {
		loop->npipes--;
		rpc_pipe_close(p);
		return;
	}
	p->next = loop->pipes;
	loop->pipes = p;
}

void rpc_pipe_pool_free(struct rpc_loop *loop)
{
	struct rpc_pipe *p;

	while ((p = loop->pipes)) {
		loop->pipes = p->next;
		loop->npipes--;
		rpc_pipe_close(p);
	}
}

ssize_t rpc_pipe_send(int fd, struct rpc_pipe *p, size_t len, bool more)
{
	unsigned flags =
		SPLICE_F_MOVE | SPLICE_F_NONBLOCK | (more ? SPLICE_F_MORE : 0);
	ssize_t n;

	do {
		n = splice(p->rfd, NULL, fd, NULL, len, flags);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	/* The pipe said it held len bytes: an empty pipe is a bug. */
	return n ? n : -EIO;
}
