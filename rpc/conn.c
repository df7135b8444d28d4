/*
 * rpc/conn.c - what a call does to its connection, on the loop's thread:
 * queue its reply for the loop to send, let the connection read again,
 * drop its reference.  Below the dispatcher (dispatch.c), which calls
 * these, and the server (server.c), which owns the connections.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "rpc_int.h"

/* See rpc_int.h. */
void rpc_conn_unref(struct rpc_conn *c)
{
	if (--c->refs == 0)
		free(c);
}

/* See rpc_int.h. */
void rpc_conn_queue(struct rpc_conn *c, struct rpc_outbuf *ob)
{
	if (c->closed) {
		rpc_outbuf_free(ob);
		return;
	}
	if (!c->out_head) {
		c->loop->nout++;
		c->last_tx_ms = c->loop->now_ms;
	}
	ob->next = NULL;
	*c->out_tail = ob;
	c->out_tail = &ob->next;
	c->out_bytes += rpc_outbuf_left(ob);
	c->out_new++;
	/* Written at the end of the loop iteration (or by conn_consume),
	 * batched into one sendmsg; a blocked conn waits for EPOLLOUT
	 * instead. */
	if (!c->out_armed && !c->on_flush) {
		c->on_flush = true;
		c->refs++;
		c->flush_next = c->loop->flush_head;
		c->loop->flush_head = c;
	}
}

/* See rpc_int.h. */
void rpc_conn_kick(struct rpc_conn *c)
{
	if (c->closed || c->on_resume || c->in_armed || !rpc_conn_can_read(c))
		return;
	c->on_resume = true;
	c->refs++;
	c->resume_next = c->loop->resume_head;
	c->loop->resume_head = c;
}
