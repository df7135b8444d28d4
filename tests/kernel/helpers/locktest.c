/*
 * locktest FILE - fcntl(2) byte-range locks between two processes on an
 * NFS file, with the locking through NLM (not nolock).
 *
 * The parent takes a write lock; the child must see it (F_GETLK), be
 * refused (F_SETLK), get a lock next to it, then wait for it (F_SETLKW)
 * and get it once the parent lets go.  The wait must end well within
 * the Linux client's 30 s re-poll interval, which shows the gateway's
 * GRANTED callback reached the client's lockd.  Prints PASS/FAIL lines;
 * exits 0 only if every check passed.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int fails;

static void check(int ok, const char *what)
{
	printf("%s fcntl-%s\n", ok ? "PASS" : "FAIL", what);
	fflush(stdout);
	if (!ok)
		fails++;
}

static int lk(int fd, int cmd, short type, off_t start, off_t len)
{
	struct flock fl = { .l_type = type,
			    .l_whence = SEEK_SET,
			    .l_start = start,
			    .l_len = len };

	return fcntl(fd, cmd, &fl) ? -errno : 0;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* The child's side; returns its number of failures. */
static int child(const char *path, int go_r, int done_w)
{
	struct flock fl = { .l_type = F_WRLCK,
			    .l_whence = SEEK_SET,
			    .l_start = 10,
			    .l_len = 1 };
	int fd = open(path, O_RDWR);
	char c;
	long t0, waited;

	if (fd < 0 || read(go_r, &c, 1) != 1)
		return 1;
	check(fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type == F_WRLCK &&
		      fl.l_start == 0 && fl.l_len == 100,
	      "getlk-sees-holder");
	check(lk(fd, F_SETLK, F_WRLCK, 50, 10) == -EAGAIN ||
		      lk(fd, F_SETLK, F_WRLCK, 50, 10) == -EACCES,
	      "setlk-conflict-refused");
	check(lk(fd, F_SETLK, F_RDLCK, 99, 1) < 0, "readlock-conflict-refused");
	check(lk(fd, F_SETLK, F_WRLCK, 100, 10) == 0, "setlk-adjacent-granted");
	/* Tell the parent to unlock the middle, then release in 2 s. */
	if (write(done_w, "1", 1) != 1 || read(go_r, &c, 1) != 1)
		return 1;
	check(lk(fd, F_SETLK, F_WRLCK, 40, 20) == 0, "split-hole-granted");
	check(lk(fd, F_SETLK, F_WRLCK, 39, 1) < 0, "split-ends-still-held");
	if (write(done_w, "2", 1) != 1)
		return 1;
	t0 = now_ms();
	check(lk(fd, F_SETLKW, F_WRLCK, 0, 40) == 0, "setlkw-granted");
	waited = now_ms() - t0;
	printf("INFO fcntl blocking lock waited %ld ms\n", waited);
	check(waited >= 1000, "setlkw-really-waited");
	check(waited < 20000, "setlkw-woken-by-callback");
	lk(fd, F_SETLK, F_UNLCK, 0, 0);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	int go[2], done[2], fd, st;
	pid_t pid;
	char c;

	if (argc != 2 || pipe(go) || pipe(done))
		return 2;
	fd = open(argv[1], O_RDWR | O_CREAT, 0644);
	if (fd < 0) {
		perror(argv[1]);
		return 2;
	}
	check(lk(fd, F_SETLK, F_WRLCK, 0, 100) == 0, "setlk-granted");
	pid = fork();
	if (pid == 0)
		_exit(child(argv[1], go[0], done[1]) + fails ? 1 : 0);
	if (write(go[1], "g", 1) != 1 || read(done[0], &c, 1) != 1)
		return 2;
	check(lk(fd, F_SETLK, F_UNLCK, 40, 20) == 0, "unlock-middle");
	if (write(go[1], "g", 1) != 1 || read(done[0], &c, 1) != 1)
		return 2;
	sleep(2);
	check(lk(fd, F_SETLK, F_UNLCK, 0, 0) == 0, "unlock-all");
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		fails++;
	close(fd);
	printf("locktest: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
