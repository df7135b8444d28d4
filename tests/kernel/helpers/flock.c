/*
 * flock [-s|-x] [-n] FILE -c COMMAND - run COMMAND (with /bin/sh -c)
 * holding flock(2) on FILE, like util-linux flock(1), which the guest's
 * busybox lacks.  Exits 1 when -n is given and the lock is held
 * elsewhere, else with COMMAND's status.  On NFS, Linux turns flock()
 * into a whole-file NLM lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int op = LOCK_EX, opt, fd, st;
	pid_t pid;

	while ((opt = getopt(argc, argv, "+sxn")) != -1) {
		if (opt == 's')
			op = (op & LOCK_NB) | LOCK_SH;
		else if (opt == 'x')
			op = (op & LOCK_NB) | LOCK_EX;
		else if (opt == 'n')
			op |= LOCK_NB;
		else
			return 64;
	}
	if (argc - optind != 3 || strcmp(argv[optind + 1], "-c")) {
		fprintf(stderr, "usage: flock [-s|-x] [-n] FILE -c COMMAND\n");
		return 64;
	}
	fd = open(argv[optind], O_RDWR | O_CREAT, 0644);
	if (fd < 0) {
		perror(argv[optind]);
		return 66;
	}
	if (flock(fd, op)) {
		if (errno == EWOULDBLOCK)
			return 1;
		perror("flock");
		return 65;
	}
	pid = fork();
	if (pid == 0) {
		close(fd);
		execl("/bin/sh", "sh", "-c", argv[optind + 2], (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return 70;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
