/*
 * daemon/ctl.h - `mapfs-gw ctl`, the control socket's client.
 */
#ifndef MAPFS_CTL_H
#define MAPFS_CTL_H

/*
 * The client: argv is "ctl [--socket PATH | --state DIR | --config FILE]
 * CMD [PATH]" (argv[0] is "ctl"), or the short forms "refresh PATH" and
 * "flush [PATH]".  Prints the answer; a warm shows a progress bar when
 * stderr is a terminal.  Returns the exit status: 0 ok, 1 the command
 * failed, 2 usage or cannot connect.
 */
int ctl_main(int argc, char **argv);

#include <stdio.h>

/*
 * Connect to the control socket at path and send the command line cmd:
 * 0 and *in (the answer, the caller's to fclose), or 2 with the reason
 * printed on stderr.
 */
int ctl_send(const char *path, const char *cmd, FILE **in);

/*
 * Send cmd and read its answer to the end: fn(ctx, line) for each line
 * before the last ("> ..." and "progress ..."), fn(ctx, NULL) before an
 * error is printed.  0 ok, 1 the gateway's error (printed), 2 no answer.
 */
typedef void (*ctl_line_fn)(void *ctx, const char *line);
int ctl_ask(const char *path, const char *cmd, ctl_line_fn fn, void *ctx);

/*
 * ctl_stats.c: `ctl stats [--interval S] [--count N]`, a live view of
 * the gateway at path: a line of rates each interval (argv holds the
 * options after "stats").  The exit status, as ctl_main's.
 */
int ctl_stats(const char *path, int argc, char **argv);

#endif
