/*
 * admin/proto.c - the control socket's protocol, one line each way: what
 * the server and every command send back.  Below the server (server.c)
 * and the commands (cmds.c, ready.c), which both answer through it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "admin_int.h"

/* See admin.h. */
int admin_send(int fd, const char *fmt, ...)
{
	char line[ADMIN_LINE_MAX + 64];
	va_list ap;
	size_t off = 0;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	while (off < (size_t)n) {
		ssize_t w = send(fd, line + off, (size_t)n - off, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		off += (size_t)w;
	}
	return 0;
}
