/*
 * daemon/ctl.c - `mapfs-gw ctl`: send one command to the control socket
 * and print the answer (a progress bar for warm on a terminal).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "admin/admin.h"
#include "config.h"
#include "ctl.h"

#define CTL_DEFAULT_STATE "/var/lib/mapfs-gw"
#define BAR_WIDTH 24

static void ctl_usage(FILE *f)
{
	fprintf(f,
		"usage: mapfs-gw ctl [--socket PATH | --state DIR | --config "
		"FILE] COMMAND\n"
		"       mapfs-gw refresh [options] PATH\n"
		"       mapfs-gw flush [options] [PATH]\n"
		"       mapfs-gw fsck [options] [--repair]\n\n"
		"commands:\n"
		"  status         uptime, clients, cache, dirty data, store "
		"health\n"
		"  flush [PATH]   upload every change now and wait (PATH's "
		"included)\n"
		"  refresh PATH   list PATH's directory from the store again, "
		"so that\n"
		"                 changes made behind the gateway show at "
		"once\n"
		"  warm PATH      fetch every file below PATH into the cache\n"
		"  evict PATH     drop the cached data of PATH's files that "
		"are in the store\n"
		"  clients        the mounted clients (host and path)\n"
		"  stats [--interval S] [--count N]\n"
		"                 a live view: calls/s and latency by kind, "
		"cache hits,\n"
		"                 store MiB/s, dirty data, uploads, a line "
		"each interval\n"
		"  fsck [--repair]\n"
		"                 compare the namespace with the store: "
		"objects missing\n"
		"                 or unnamed, link counts, parents, store work "
		"failing;\n"
		"                 --repair fixes what is safe (never deletes); "
		"exit 0\n"
		"                 clean, 1 found, 2 could not run\n"
		"  ready          exit 0 if the gateway answers NFS and, in a\n"
		"                 cluster, holds its lease (for health "
		"checks)\n\n"
		"PATH is as clients see it (/mapfs/dir) or relative to the "
		"export root.\n"
		"The socket is STATE/ctl.sock (default state %s); only root "
		"or\n"
		"the gateway's own user may use it.\n",
		CTL_DEFAULT_STATE);
}

/* STATE/ctl.sock from --socket, --state or the config file's state. */
static int sock_path(const char *sock, const char *state, const char *conf,
		     char *buf, size_t cap)
{
	struct config cfg = { 0 };
	int n;

	if (sock) {
		n = snprintf(buf, cap, "%s", sock);
		return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
	}
	if (!state && conf) {
		char *args[] = { "mapfs-gw", "--config", (char *)conf, NULL };
		int rc = config_load(&cfg, 3, args, stdout, stderr);

		if (rc) {
			config_free(&cfg);
			return -EINVAL;
		}
		state = cfg.state;
	}
	n = snprintf(buf, cap, "%s/ctl.sock",
		     state ? state : CTL_DEFAULT_STATE);
	config_free(&cfg);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static void fmt_size(uint64_t n, char *buf, size_t cap)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

/* One "progress ..." line as a bar on stderr: files, bytes, rates, ETA. */
static void show_progress(const char *line, bool tty)
{
	uint64_t fd_, ft, bd, bt, fetched, ms;
	char b1[32], b2[32], r[32], bar[BAR_WIDTH + 1], eta[32];
	double rate, frate, frac;
	int fill;

	if (!tty || sscanf(line,
			   "progress %" SCNu64 " %" SCNu64 " %" SCNu64
			   " %" SCNu64 " %" SCNu64 " %" SCNu64,
			   &fd_, &ft, &bd, &bt, &fetched, &ms) != 6)
		return;
	frac = bt ? (double)bd / (double)bt
		  : (ft ? (double)fd_ / (double)ft : 1);
	fill = (int)(frac * BAR_WIDTH + 0.5);
	for (int i = 0; i < BAR_WIDTH; i++)
		bar[i] = i < fill ? '#' : '-';
	bar[BAR_WIDTH] = '\0';
	rate = ms ? (double)bd * 1000.0 / (double)ms : 0;
	frate = ms ? (double)fd_ * 1000.0 / (double)ms : 0;
	fmt_size(bd, b1, sizeof(b1));
	fmt_size(bt, b2, sizeof(b2));
	fmt_size((uint64_t)rate, r, sizeof(r));
	if ((rate > 0 && bt > bd) || (!bt && frate > 0 && ft > fd_)) {
		uint64_t s = (uint64_t)(bt ? (double)(bt - bd) / rate
					   : (double)(ft - fd_) / frate);

		snprintf(eta, sizeof(eta), "%" PRIu64 ":%02" PRIu64, s / 60,
			 s % 60);
	} else {
		bool all = bt ? bd >= bt : fd_ >= ft;

		snprintf(eta, sizeof(eta), "%s", all ? "0:00" : "--:--");
	}
	fprintf(stderr,
		"\r[%s] %" PRIu64 "/%" PRIu64
		" files (%.0f/s)  %s/%s  %s/s  ETA %s\033[K",
		bar, fd_, ft, frate, b1, b2, r, eta);
	fflush(stderr);
}

/* See ctl.h. */
int ctl_send(const char *path, const char *cmd, FILE **in)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	*in = NULL;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		fprintf(stderr, "mapfs-gw ctl: socket path too long: %s\n",
			path);
		return 2;
	}
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun))) {
		fprintf(stderr,
			"mapfs-gw ctl: cannot connect to %s: %s (is the "
			"gateway running?)\n",
			path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 2;
	}
	if (admin_send(fd, "%s", cmd)) {
		fprintf(stderr, "mapfs-gw ctl: send: %s\n", strerror(errno));
		close(fd);
		return 2;
	}
	*in = fdopen(fd, "r");
	if (!*in) {
		close(fd);
		return 2;
	}
	return 0;
}

/* See ctl.h. */
int ctl_ask(const char *path, const char *cmd, ctl_line_fn fn, void *ctx)
{
	char *line = NULL;
	size_t cap = 0;
	int rc = 2;
	FILE *in;

	if (ctl_send(path, cmd, &in))
		return 2;
	while (getline(&line, &cap, in) > 0) {
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line, "ok")) {
			rc = 0;
			break;
		}
		if (!strncmp(line, "err ", 4)) {
			fn(ctx, NULL);
			fprintf(stderr, "mapfs-gw ctl: %s\n", line + 4);
			rc = 1;
			break;
		}
		fn(ctx, line);
	}
	if (rc == 2)
		fprintf(stderr,
			"mapfs-gw ctl: the gateway closed the connection\n");
	free(line);
	fclose(in);
	return rc;
}

struct printer {
	bool tty, bar;
	uint64_t found; /* fsck's "result" line */
};

/* A line of the answer on the terminal (NULL: an error follows). */
static void print_line(void *ctx, const char *line)
{
	struct printer *p = ctx;

	if (line && !strncmp(line, "progress ", 9)) {
		show_progress(line, p->tty);
		p->bar = p->tty;
		return;
	}
	if (line && !strncmp(line, "step ", 5)) {
		char phase[32];
		uint64_t done, total;

		if (p->tty && sscanf(line + 5, "%31s %" SCNu64 " %" SCNu64,
				     phase, &done, &total) == 3) {
			if (total)
				fprintf(stderr,
					"\r%s: %" PRIu64 " of %" PRIu64 "   ",
					phase, done, total);
			else
				fprintf(stderr, "\r%s: %" PRIu64 "   ", phase,
					done);
			fflush(stderr);
			p->bar = true;
		}
		return;
	}
	if (line && !strncmp(line, "result ", 7)) {
		sscanf(line + 7, "%" SCNu64, &p->found);
		return;
	}
	if (p->bar) {
		fputc('\n', stderr);
		p->bar = false;
	}
	if (line && !strncmp(line, "> ", 2))
		puts(line + 2);
}

/* Send cmd, print the answer.  0 ok, 1 err, 2 no answer; for fsck 0
 * clean, 1 found, 2 could not run. */
static int run(const char *path, const char *cmd)
{
	struct printer p = { isatty(STDERR_FILENO), false, 0 };
	int rc = ctl_ask(path, cmd, print_line, &p);

	if (p.bar)
		fputc('\n', stderr);
	if (!strncmp(cmd, "fsck", 4) && (cmd[4] == ' ' || !cmd[4]))
		return rc ? 2 : p.found ? 1 : 0;
	return rc;
}

int ctl_main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "state", required_argument, NULL, 'd' },
		{ "config", required_argument, NULL, 'c' },
		{ "repair", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *sock = NULL, *state = NULL, *conf = NULL, *cmd, *arg;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
	char line[ADMIN_LINE_MAX];
	bool short_form = strcmp(argv[0], "ctl") != 0, repair = false;
	int c, n;

	optind = 1;
	opterr = 1;
	while ((c = getopt_long(argc, argv, "+", lopts, NULL)) != -1) {
		switch (c) {
		case 's':
			sock = optarg;
			break;
		case 'd':
			state = optarg;
			break;
		case 'c':
			conf = optarg;
			break;
		case 'r':
			repair = true;
			break;
		case 'h':
			ctl_usage(stdout);
			return 0;
		default:
			ctl_usage(stderr);
			return 2;
		}
	}
	cmd = short_form ? argv[0] : (optind < argc ? argv[optind++] : NULL);
	if (cmd && !strcmp(cmd, "stats")) {
		if (sock_path(sock, state, conf, path, sizeof(path))) {
			fprintf(stderr,
				"mapfs-gw ctl: no usable socket path\n");
			return 2;
		}
		return ctl_stats(path, argc - optind + 1, argv + optind - 1);
	}
	arg = optind < argc ? argv[optind++] : NULL;
	/* fsck's one option, after the command too: ctl fsck --repair */
	if (cmd && !strcmp(cmd, "fsck") && arg && !strcmp(arg, "--repair")) {
		repair = true;
		arg = NULL;
	}
	if (repair && cmd && !strcmp(cmd, "fsck") && !arg)
		arg = "repair";
	else if (repair) {
		ctl_usage(stderr);
		return 2;
	}
	if (!cmd || optind < argc) {
		ctl_usage(stderr);
		return 2;
	}
	if (sock_path(sock, state, conf, path, sizeof(path))) {
		fprintf(stderr, "mapfs-gw ctl: no usable socket path\n");
		return 2;
	}
	/* One line on the wire: a path with a newline cannot be sent. */
	if (arg && strchr(arg, '\n')) {
		fprintf(stderr, "mapfs-gw ctl: a path with a newline\n");
		return 2;
	}
	n = snprintf(line, sizeof(line), "%s%s%s", cmd, arg ? " " : "",
		     arg ? arg : "");
	if (n < 0 || (size_t)n >= sizeof(line)) {
		fprintf(stderr, "mapfs-gw ctl: path too long\n");
		return 2;
	}
	return run(path, line);
}
