/* tests/fault/faultctl.c - see faultctl.h. */
#include "faultctl.h"

#include <stdbool.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define READY_MS 10000
#define REPLY_MS 10000

static void say(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "  faultproxy: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Read one line from fd into line (cap bytes) within ms; 0 or -1. */
static int read_line(int fd, char *line, size_t cap, int ms)
{
	size_t fill = 0;

	while (fill + 1 < cap) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, ms) <= 0)
			return -1;
		n = read(fd, line + fill, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		if (line[fill] == '\n') {
			line[fill] = '\0';
			return 0;
		}
		fill++;
	}
	return -1;
}

static int proxy_start(struct fault_proxy *fp, int target_port,
		       const char *mode, unsigned long long seed, bool raw)
{
	const char *bin = getenv("MAPFS_FAULTPROXY");
	char port[16], seeds[32], line[128];
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int p[2];

	memset(fp, 0, sizeof(*fp));
	fp->ctl_fd = -1;
	if (!bin || !*bin) {
		say("MAPFS_FAULTPROXY is not set (ctest sets it)");
		return -1;
	}
	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	snprintf(port, sizeof(port), "%d", target_port);
	snprintf(seeds, sizeof(seeds), "%llu", seed);
	fflush(NULL);
	fp->pid = fork();
	if (fp->pid < 0) {
		fp->pid = 0;
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (fp->pid == 0) {
		if (dup2(p[1], 1) < 0)
			_exit(126);
		execl(bin, bin, "--target", port, "--mode", mode, "--seed",
		      seeds, raw ? "--raw" : (char *)NULL, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	if (read_line(p[0], line, sizeof(line), READY_MS) != 0 ||
	    sscanf(line, "faultproxy port=%d control=%d", &fp->port,
		   &fp->ctl_port) != 2) {
		say("%s: no ready line", bin);
		close(p[0]);
		fault_proxy_stop(fp);
		return -1;
	}
	close(p[0]);
	snprintf(fp->endpoint, sizeof(fp->endpoint), "http://127.0.0.1:%d",
		 fp->port);
	sa.sin_port = htons((uint16_t)fp->ctl_port);
	fp->ctl_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fp->ctl_fd < 0 ||
	    connect(fp->ctl_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		say("control port %d: %s", fp->ctl_port, strerror(errno));
		fault_proxy_stop(fp);
		return -1;
	}
	return 0;
}

int fault_proxy_start(struct fault_proxy *fp, int target_port, const char *mode,
		      unsigned long long seed)
{
	return proxy_start(fp, target_port, mode, seed, false);
}

int fault_proxy_start_raw(struct fault_proxy *fp, int target_port,
			  const char *mode, unsigned long long seed)
{
	return proxy_start(fp, target_port, mode, seed, true);
}

int fault_proxy_cmd(struct fault_proxy *fp, char *reply, size_t cap,
		    const char *fmt, ...)
{
	char cmd[256], ans[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(cmd, sizeof(cmd) - 1, fmt, ap);
	va_end(ap);
	if (fp->ctl_fd < 0 || n < 0 || (size_t)n >= sizeof(cmd) - 1)
		return -1;
	cmd[n++] = '\n';
	if (send(fp->ctl_fd, cmd, (size_t)n, MSG_NOSIGNAL) != n ||
	    read_line(fp->ctl_fd, ans, sizeof(ans), REPLY_MS) != 0) {
		say("'%.*s': no answer", n - 1, cmd);
		return -1;
	}
	if (reply)
		snprintf(reply, cap, "%s", ans);
	if (strncmp(ans, "ok", 2) != 0) {
		say("'%.*s': %s", n - 1, cmd, ans);
		return -1;
	}
	return 0;
}

int fault_proxy_mode(struct fault_proxy *fp, const char *words)
{
	return fault_proxy_cmd(fp, NULL, 0, "mode %s", words);
}

long fault_proxy_injected(struct fault_proxy *fp)
{
	char ans[256];
	const char *p;

	if (fault_proxy_cmd(fp, ans, sizeof(ans), "stats") != 0 ||
	    !(p = strstr(ans, "injected=")))
		return -1;
	return strtol(p + 9, NULL, 10);
}

int fault_proxy_stop(struct fault_proxy *fp)
{
	int st = 0;

	if (fp->ctl_fd >= 0)
		close(fp->ctl_fd);
	fp->ctl_fd = -1;
	if (fp->pid <= 0)
		return -1;
	kill(fp->pid, SIGTERM);
	for (int i = 0; i < 500; i++) {
		pid_t r = waitpid(fp->pid, &st, WNOHANG);

		if (r == fp->pid) {
			fp->pid = 0;
			return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
		}
		usleep(10000);
	}
	kill(fp->pid, SIGKILL);
	waitpid(fp->pid, NULL, 0);
	fp->pid = 0;
	return -1;
}
