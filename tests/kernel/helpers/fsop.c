/*
 * fsop - one file-system call, as a given user, in the guest; prints
 * "0" or the errno's name (EPERM, ENAMETOOLONG, ...), so a guest script
 * can check the exact answer the kernel client gives.
 *
 *   fsop [-u UID] [-g GID] OP ARGS...
 *     write PATH            open O_WRONLY, write one byte, close
 *     truncate PATH LEN
 *     chown PATH UID GID    (lchown: the link itself)
 *     lchown PATH UID GID
 *     rename FROM TO
 *     mkdir PATH MODE       (octal)
 *     create PATH MODE      open O_CREAT|O_EXCL
 *     mkfifo PATH MODE
 *     mknod-chr PATH MAJOR MINOR
 *     mksock PATH           bind a unix socket there
 *     symlink TARGET PATH
 *     link FROM TO
 *     mode PATH             prints lstat's mode & 07777 in octal
 *
 * -u/-g switch the real and effective ids (groups dropped) before the
 * call; the guest runs as root.  Built -static by kernel-test.sh.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

static const char *err_name(int e)
{
	static const struct {
		int e;
		const char *n;
	} t[] = {
		{ EPERM, "EPERM" },         { ENOENT, "ENOENT" },
		{ EACCES, "EACCES" },       { EEXIST, "EEXIST" },
		{ EXDEV, "EXDEV" },         { ENOTDIR, "ENOTDIR" },
		{ EISDIR, "EISDIR" },       { EINVAL, "EINVAL" },
		{ EROFS, "EROFS" },         { ENAMETOOLONG, "ENAMETOOLONG" },
		{ ENOTEMPTY, "ENOTEMPTY" }, { EIO, "EIO" },
		{ ESTALE, "ESTALE" },       { ENOSPC, "ENOSPC" },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].e == e)
			return t[i].n;
	return "EOTHER";
}

static int usage(void)
{
	fprintf(stderr, "usage: fsop [-u UID] [-g GID] OP ARGS...\n");
	return 2;
}

static int do_mksock(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0), rc;

	if (fd < 0)
		return -1;
	if (strlen(path) >= sizeof(a.sun_path)) {
		close(fd);
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(a.sun_path, path);
	rc = bind(fd, (struct sockaddr *)&a, sizeof(a));
	close(fd);
	return rc;
}

static int do_write(const char *path)
{
	int fd = open(path, O_WRONLY), rc;

	if (fd < 0)
		return -1;
	rc = write(fd, "x", 1) == 1 ? 0 : -1;
	if (close(fd) && !rc)
		rc = -1;
	return rc;
}

static int run(int argc, char **argv)
{
	const char *op = argv[0];
	struct stat sb;

#define NEED(n)                         \
	do {                            \
		if (argc != (n) + 1)    \
			return usage(); \
	} while (0)
	if (!strcmp(op, "write")) {
		NEED(1);
		return do_write(argv[1]);
	}
	if (!strcmp(op, "truncate")) {
		NEED(2);
		return truncate(argv[1], atoll(argv[2]));
	}
	if (!strcmp(op, "chown") || !strcmp(op, "lchown")) {
		NEED(3);
		return (op[0] == 'l' ? lchown : chown)(
			argv[1], (uid_t)atol(argv[2]), (gid_t)atol(argv[3]));
	}
	if (!strcmp(op, "rename")) {
		NEED(2);
		return rename(argv[1], argv[2]);
	}
	if (!strcmp(op, "mkdir")) {
		NEED(2);
		return mkdir(argv[1], (mode_t)strtol(argv[2], NULL, 8));
	}
	if (!strcmp(op, "create")) {
		NEED(2);
		int fd = open(argv[1], O_CREAT | O_EXCL | O_WRONLY,
			      (mode_t)strtol(argv[2], NULL, 8));

		return fd < 0 ? -1 : close(fd);
	}
	if (!strcmp(op, "mkfifo")) {
		NEED(2);
		return mkfifo(argv[1], (mode_t)strtol(argv[2], NULL, 8));
	}
	if (!strcmp(op, "mknod-chr")) {
		NEED(3);
		return mknod(argv[1], S_IFCHR | 0644,
			     makedev(atoi(argv[2]), atoi(argv[3])));
	}
	if (!strcmp(op, "mksock")) {
		NEED(1);
		return do_mksock(argv[1]);
	}
	if (!strcmp(op, "symlink")) {
		NEED(2);
		return symlink(argv[1], argv[2]);
	}
	if (!strcmp(op, "link")) {
		NEED(2);
		return link(argv[1], argv[2]);
	}
	if (!strcmp(op, "mode")) {
		NEED(1);
		if (lstat(argv[1], &sb))
			return -1;
		printf("%o\n", (unsigned)(sb.st_mode & 07777));
		return 1; /* printed already */
	}
#undef NEED
	return usage();
}

int main(int argc, char **argv)
{
	long uid = -1, gid = -1;
	int c, rc;

	while ((c = getopt(argc, argv, "+u:g:")) != -1) {
		if (c == 'u')
			uid = atol(optarg);
		else if (c == 'g')
			gid = atol(optarg);
		else
			return usage();
	}
	if (optind >= argc)
		return usage();
	if (gid >= 0 && (setgroups(0, NULL) || setregid(gid, gid))) {
		perror("fsop: setregid");
		return 2;
	}
	if (uid >= 0 && setreuid(uid, uid)) {
		perror("fsop: setreuid");
		return 2;
	}
	errno = 0;
	rc = run(argc - optind, argv + optind);
	if (rc == 2)
		return 2;
	if (rc == 1)
		return 0;
	printf("%s\n", rc == 0 ? "0" : err_name(errno));
	return 0;
}
