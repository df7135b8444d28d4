/*
 * rpc/loop.c - the bottom of rpc/: which loop the running thread is, and
 * how another thread hands a finished call to a loop (its completion
 * list and eventfd).  Every file that keeps state per loop (buffer pools,
 * the DRC, the dispatcher) asks here, never the server above it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "rpc_int.h"

static _Thread_local struct rpc_loop *cur_loop;

/* See rpc_int.h. */
struct rpc_loop *rpc_loop_current(void)
{
	return cur_loop;
}

/* See rpc_int.h. */
void rpc_loop_enter(struct rpc_loop *loop)
{
	cur_loop = loop;
}

/* See rpc_int.h. */
/* ---- loops ------------------------------------------------------------ */

void rpc_loop_post(struct rpc_loop *loop, struct rpc_call *call)
{
	static const uint64_t one = 1;

	bool was_empty;

	call->next = NULL;
	pthread_mutex_lock(&loop->cq_lock);
	was_empty = !loop->cq_head;
	*loop->cq_tail = call;
	loop->cq_tail = &call->next;
	/* Wake only on empty -> non-empty; the write is under the lock so
	 * rpc_server_free() never closes the eventfd under a writer. */
	if (was_empty && write(loop->wakefd, &one, sizeof(one)) < 0)
		log_warn("rpc: wake loop %d: %s", loop->idx, strerror(errno));
	pthread_mutex_unlock(&loop->cq_lock);
}
