/*
 * rpc/outbuf.c - reply buffers and the per-loop pools they come from.
 *
 * Every reply is one rpc_outbuf.  Most are made and freed on the loop
 * that owns the connection, so each loop keeps two free lists: small
 * buffers (metadata replies, 4 KiB READs) and big ones (a READ of rtmax
 * bytes copied into its reply).  A big malloc'ed buffer that glibc hands back to the
 * kernel on free costs page faults on every reuse, 2 MiB of zeroing per
 * 1 MiB READ; pooled, it stays mapped.  Buffers made on other threads
 * (db writer, workers) are plain malloc and go back with free().
 */
#include <stdlib.h>

#include "rpc_int.h"

/* data[] capacities of the two pooled sizes; other sizes are malloc'ed. */
#define OB_SMALL (16384 - sizeof(struct rpc_outbuf))
#define OB_BIG ((size_t)(1u << 20) + (16u << 10))
/* Buffers each free list keeps at most. */
#define OB_KEEP_SMALL 256
#define OB_KEEP_BIG 8

static int ob_class(size_t cap)
{
	return cap == OB_SMALL ? 0 : cap == OB_BIG ? 1 : -1;
}

struct rpc_outbuf *rpc_outbuf_new(size_t bytes)
{
	struct rpc_loop *loop = rpc_loop_current();
	size_t cap = bytes <= OB_SMALL ? OB_SMALL
		     : bytes <= OB_BIG ? OB_BIG
				       : bytes;
	int k = ob_class(cap);
	struct rpc_outbuf *ob = NULL;

	if (loop && k >= 0 && (ob = loop->ob_free[k])) {
		loop->ob_free[k] = ob->next;
		loop->ob_nfree[k]--;
	} else {
		ob = malloc(sizeof(*ob) + cap);
		if (!ob)
			return NULL;
	}
	ob->next = NULL;
	ob->home = loop;
	ob->cap = cap;
	ob->len = ob->off = 0;
	ob->pipe = NULL;
	ob->pipe_len = 0;
	ob->tail_len = ob->tail_off = 0;
	return ob;
}

void rpc_outbuf_free(struct rpc_outbuf *ob)
{
	struct rpc_loop *loop = rpc_loop_current();
	int k = ob_class(ob->cap);
	unsigned keep = k == 0 ? OB_KEEP_SMALL : OB_KEEP_BIG;

	/* Spliced replies are freed on their loop; elsewhere the pipe is
	 * only closed. */
	if (ob->pipe && loop)
		rpc_pipe_put(loop, ob->pipe, ob->pipe_len == 0);
	else if (ob->pipe)
		rpc_pipe_close(ob->pipe);
	ob->pipe = NULL;
	if (k < 0 || !loop || ob->home != loop || loop->ob_nfree[k] >= keep) {
		free(ob);
		return;
	}
	ob->next = loop->ob_free[k];
	loop->ob_free[k] = ob;
	loop->ob_nfree[k]++;
}

void rpc_outbuf_pool_free(struct rpc_loop *loop)
{
	for (int k = 0; k < 2; k++) {
		struct rpc_outbuf *ob;

		while ((ob = loop->ob_free[k])) {
			loop->ob_free[k] = ob->next;
			free(ob);
		}
		loop->ob_nfree[k] = 0;
	}
}
