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

#endif
