/*
 * tests/e2e/harness.c - see harness.h.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#ifndef E2E_S3_SCRIPTS_DIR
#define E2E_S3_SCRIPTS_DIR "tests/s3"
#endif

extern char **environ;

#define READY_TIMEOUT_MS 30000
#define STOP_TIMEOUT_MS 30000
#define CALL_TIMEOUT_MS 30000

static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "e2e: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}

uint64_t e2e_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int e2e_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof(a)) &&
	    !getsockname(fd, (struct sockaddr *)&a, &len))
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* ------------------------------------------------------------------ */
/* The gateway process                                                 */

int e2e_log_count(const char *path, const char *needle, bool at_start)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		const char *hit = strstr(line, needle);

		n += hit && (!at_start || hit == line);
	}
	fclose(f);
	return n;
}

int e2e_gw_log_count(const struct e2e_gw *gw, const char *needle)
{
	return e2e_log_count(gw->log, needle, false);
}

void e2e_gw_dump_log(const struct e2e_gw *gw)
{
	char buf[4096];
	size_t n;
	FILE *f = fopen(gw->log, "r");

	fprintf(stderr, "----- gateway log %s -----\n", gw->log);
	if (!f) {
		fprintf(stderr, "(cannot open: %s)\n", strerror(errno));
	} else {
		while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
			fwrite(buf, 1, n, stderr);
		fclose(f);
	}
	fprintf(stderr, "----- end of gateway log -----\n");
}

char *e2e_gw_log_read(const struct e2e_gw *gw)
{
	char *buf = NULL;
	size_t len = 0, n;
	FILE *out = open_memstream(&buf, &len);
	FILE *f = fopen(gw->log, "r");
	char chunk[4096];

	if (!out)
		abort();
	while (f && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		fwrite(chunk, 1, n, out);
	if (f)
		fclose(f);
	fclose(out);
	return buf;
}

/* Read whatever the child wrote to stdout after the ready line. */
static void drain_stdout(struct e2e_gw *gw)
{
	char buf[1024];
	ssize_t n;

	if (gw->out_fd < 0)
		return;
	while ((n = read(gw->out_fd, buf, sizeof(buf))) > 0) {
		if (gw->extra_stdout == 0)
			say("gateway wrote more than the ready line on "
			    "stdout:");
		gw->extra_stdout += (size_t)n;
		fwrite(buf, 1, (size_t)n, stderr);
	}
}

static void close_stdout(struct e2e_gw *gw)
{
	drain_stdout(gw);
	if (gw->out_fd >= 0)
		close(gw->out_fd);
	gw->out_fd = -1;
}

/* Parse the ready line; 0 or -1. */
static int parse_ready(struct e2e_gw *gw, const char *line)
{
	char exp[256];
	int nfs = -1, mnt = -1, end = 0;

	/* (" metrics=ADDR" follows when the gateway serves metrics.) */
	if (sscanf(line,
		   "mapfs-gw: ready nfs=127.0.0.1:%d mount=127.0.0.1:%d "
		   "export=%255s%n",
		   &nfs, &mnt, exp, &end) != 3 ||
	    (line[end] != '\0' && strncmp(line + end, " metrics=", 9))) {
		say("unexpected first stdout line: '%s' (want 'mapfs-gw: ready "
		    "nfs=127.0.0.1:PORT mount=127.0.0.1:PORT export=%s')",
		    line, E2E_EXPORT);
		return -1;
	}
	if (strcmp(exp, E2E_EXPORT) != 0) {
		say("ready line says export=%s, want %s", exp, E2E_EXPORT);
		return -1;
	}
	if (nfs <= 0 || nfs > 65535 || mnt <= 0 || mnt > 65535) {
		say("ready line has bad ports nfs=%d mount=%d", nfs, mnt);
		return -1;
	}
	gw->nfs_port = nfs;
	gw->mount_port = mnt;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Child processes: argv and environment made before fork               */

struct strv {
	char **v;
	size_t n, cap;
};

static void strv_add(struct strv *sv, const char *fmt, ...)
{
	va_list ap;
	char *str;

	if (sv->n + 2 > sv->cap) {
		sv->cap = sv->cap ? sv->cap * 2 : 32;
		sv->v = realloc(sv->v, sv->cap * sizeof(*sv->v));
		if (!sv->v)
			abort();
	}
	va_start(ap, fmt);
	if (vasprintf(&str, fmt, ap) < 0)
		abort();
	va_end(ap);
	sv->v[sv->n++] = str;
	sv->v[sv->n] = NULL;
}

/*
 * MAPFS_E2E_GW_ARGS: options (space-separated) every gateway of the run
 * gets, e.g. "--cache-direct" for the direct-I/O pass of the file store
 * tests (tests/CMakeLists.txt).
 */
static void add_env_args(struct strv *argv)
{
	const char *env = getenv("MAPFS_E2E_GW_ARGS");
	char *copy, *tok, *save = NULL;

	if (!env || !*env)
		return;
	copy = strdup(env);
	if (!copy)
		abort();
	for (tok = strtok_r(copy, " ", &save); tok;
	     tok = strtok_r(NULL, " ", &save))
		strv_add(argv, "%s", tok);
	free(copy);
}

static void strv_free(struct strv *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	memset(sv, 0, sizeof(*sv));
}

/* Proxy variables: curl honours them, and tests talk to 127.0.0.1 only. */
static int is_proxy_var(const char *e)
{
	const char *eq = strchr(e, '=');
	size_t n = eq ? (size_t)(eq - e) : strlen(e);

	return n >= 6 && strncasecmp(e + n - 6, "_proxy", 6) == 0;
}

/*
 * This process's environment less what must not leak into a child that
 * talks S3 (AWS_* and proxies), when s3 is set.
 */
static void env_base(struct strv *env, int s3)
{
	for (char **e = environ; *e; e++) {
		if (s3 && (strncmp(*e, "AWS_", 4) == 0 || is_proxy_var(*e)))
			continue;
		strv_add(env, "%s", *e);
	}
}

/*
 * Run argv (PATH searched) with env, stdin from /dev/null, stderr ours,
 * stdout into *out (malloc'd, NUL-terminated) unless out is NULL.
 * Returns the exit status, or -1 if it could not run.
 */
static int run_cmd(char *const *argv, char *const *env, char **out)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int p[2], st;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		int nullfd = open("/dev/null", O_RDONLY);

		if (nullfd < 0 || dup2(nullfd, 0) < 0 || dup2(p[1], 1) < 0)
			_exit(126);
		execvpe(argv[0], argv, env);
		dprintf(2, "e2e: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		ssize_t n;

		if (len + 4096 > cap) {
			cap = cap ? cap * 2 : 8192;
			buf = realloc(buf, cap);
			if (!buf)
				abort();
		}
		n = read(p[0], buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(p[0]);
	buf[len] = '\0';
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			free(buf);
			return -1;
		}
	if (out)
		*out = buf;
	else
		free(buf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ------------------------------------------------------------------ */
/* The object store backend                                            */

static enum e2e_backend backend = (enum e2e_backend) - 1;

enum e2e_backend e2e_backend(void)
{
	const char *b = getenv("MAPFS_E2E_STORE");

	if ((int)backend >= 0)
		return backend;
	if (!b || !*b || strcmp(b, "file") == 0)
		backend = E2E_BACKEND_FILE;
	else if (strcmp(b, "rgw") == 0)
		backend = E2E_BACKEND_RGW;
	else if (strcmp(b, "s3rver") == 0)
		backend = E2E_BACKEND_S3RVER;
	else if (strcmp(b, "s3") == 0)
		backend = E2E_BACKEND_S3;
	else {
		say("MAPFS_E2E_STORE=%s: want file, rgw, s3rver or s3", b);
		abort();
	}
	return backend;
}

const char *e2e_backend_name(void)
{
	static const char *const names[] = { "file", "rgw", "s3rver", "s3" };

	return names[e2e_backend()];
}

int e2e_backend_is_s3(void)
{
	return e2e_backend() != E2E_BACKEND_FILE;
}

/* ------------------------------------------------------------------ */
/* PostgreSQL                                                          */

static struct {
	int tried;
	char dir[E2E_PATH_MAX], url[256];
	unsigned ndb;
} pgsrv;

int e2e_meta_is_pg(void)
{
	const char *m = getenv("MAPFS_E2E_META");

	return m && !strcmp(m, "pg");
}

static const char *pg_script(void)
{
	static char path[E2E_PATH_MAX];
	const char *dir = getenv("MAPFS_S3_SCRIPTS");

	snprintf(path, sizeof(path), "%s/../pg/pg.sh",
		 dir && *dir ? dir : E2E_S3_SCRIPTS_DIR);
	return path;
}

/* "pg.sh CMD ARGS..." with the watcher's pid; stdout into *out. */
static int pg_script_argv(char **out, const char *cmd, const char *a1,
			  const char *a2)
{
	struct strv argv = { 0 }, env = { 0 };
	int rc;

	env_base(&env, 0);
	strv_add(&env, "MAPFS_PG_WATCH_PID=%d", (int)getpid());
	strv_add(&argv, "bash");
	strv_add(&argv, "%s", pg_script());
	strv_add(&argv, "%s", cmd);
	if (a1)
		strv_add(&argv, "%s", a1);
	if (a2)
		strv_add(&argv, "%s", a2);
	rc = run_cmd(argv.v, env.v, out);
	strv_free(&argv);
	strv_free(&env);
	return rc;
}

static int pg_script_run(const char *cmd, const char *arg, char **out)
{
	if (pgsrv.dir[0])
		return pg_script_argv(out, cmd, pgsrv.dir, arg);
	return pg_script_argv(out, cmd, arg, NULL);
}

static void pg_at_exit(void)
{
	const char *keep = getenv("E2E_KEEP");

	if (!pgsrv.dir[0])
		return;
	if (keep && !strcmp(keep, "1"))
		say("keeping PostgreSQL in %s (running)", pgsrv.dir);
	else if (pg_script_run("stop", NULL, NULL))
		say("%s stop %s failed", pg_script(), pgsrv.dir);
}

static int env_get(const char *text, const char *name, char *out, size_t cap);

static int pg_server(void)
{
	char *out = NULL;
	uint64_t t0 = e2e_now_ms();
	int rc;

	if (pgsrv.tried)
		return pgsrv.url[0] ? 0 : -1;
	pgsrv.tried = 1;
	rc = pg_script_run("start", NULL, &out);
	if (rc || !out ||
	    env_get(out, "MAPFS_PG_DIR", pgsrv.dir, sizeof(pgsrv.dir)) ||
	    env_get(out, "MAPFS_PG_URL", pgsrv.url, sizeof(pgsrv.url))) {
		say("could not start PostgreSQL: %s start exited %d (apt-get "
		    "install postgresql)",
		    pg_script(), rc);
		free(out);
		pgsrv.url[0] = '\0';
		return -1;
	}
	free(out);
	atexit(pg_at_exit);
	say("PostgreSQL at %s (dir %s) up in %llu ms", pgsrv.url, pgsrv.dir,
	    (unsigned long long)(e2e_now_ms() - t0));
	return 0;
}

int e2e_pg_createdb(char *url, size_t cap)
{
	char name[64], *out = NULL;
	int rc;

	if (pg_server())
		return -1;
	snprintf(name, sizeof(name), "e2e_%d_%u", (int)getpid(), ++pgsrv.ndb);
	rc = pg_script_run("createdb", name, &out);
	if (rc || !out) {
		say("createdb %s failed", name);
		free(out);
		return -1;
	}
	out[strcspn(out, "\n")] = '\0';
	snprintf(url, cap, "%s", out);
	free(out);
	return 0;
}

int e2e_pg_down(void)
{
	return pg_server() || pg_script_run("kill", NULL, NULL) ? -1 : 0;
}

int e2e_pg_up(void)
{
	return pg_server() || pg_script_run("start", NULL, NULL) ? -1 : 0;
}

static struct {
	char dir[64]; /* p/ and s/: the two servers */
	int swapped;  /* 0: p/ is the primary; 1: s/ is */
} pgpair;

/* The pair's current primary's directory (0) or its standby's (1). */
static void pgpair_dir(int standby, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", pgpair.dir,
		 (standby ^ pgpair.swapped) ? "s" : "p");
}

static void pgpair_at_exit(void)
{
	char p[96], sd[96], cmd[128];

	if (!pgpair.dir[0])
		return;
	snprintf(p, sizeof(p), "%s/p", pgpair.dir);
	snprintf(sd, sizeof(sd), "%s/s", pgpair.dir);
	pg_script_argv(NULL, "stop", sd, NULL);
	pg_script_argv(NULL, "stop", p, NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", pgpair.dir);
	if (system(cmd))
		say("could not remove %s", pgpair.dir);
	pgpair.dir[0] = '\0';
	pgpair.swapped = 0;
}

int e2e_pg_pair_start(char *url, size_t cap)
{
	char p[96], sd[96], *out = NULL;
	uint64_t t0 = e2e_now_ms();
	int rc;

	static int registered;

	if (pgpair.dir[0]) /* one pair at a time: the last one goes */
		pgpair_at_exit();
	snprintf(pgpair.dir, sizeof(pgpair.dir), "/tmp/mapfs-pgpair-XXXXXX");
	if (!mkdtemp(pgpair.dir) || chmod(pgpair.dir, 0755))
		return -1;
	if (!registered++)
		atexit(pgpair_at_exit);
	snprintf(p, sizeof(p), "%s/p", pgpair.dir);
	snprintf(sd, sizeof(sd), "%s/s", pgpair.dir);
	rc = pg_script_argv(NULL, "start", p, NULL);
	if (!rc)
		rc = pg_script_argv(&out, "standby", p, sd);
	if (rc || !out || env_get(out, "MAPFS_PG_PAIR_URL", url, cap)) {
		say("could not start a PostgreSQL primary and standby (%d)",
		    rc);
		free(out);
		return -1;
	}
	free(out);
	say("PostgreSQL primary and synchronous standby at %s, up in %llu ms",
	    url, (unsigned long long)(e2e_now_ms() - t0));
	return 0;
}

int e2e_pg_pair_failover(void)
{
	char p[96], sd[96];

	pgpair_dir(0, p, sizeof(p));
	pgpair_dir(1, sd, sizeof(sd));
	if (pg_script_argv(NULL, "kill", p, NULL) ||
	    pg_script_argv(NULL, "promote", sd, NULL))
		return -1;
	pgpair.swapped ^= 1;
	return 0;
}

int e2e_pg_pair_rejoin(void)
{
	char p[96], sd[96];

	pgpair_dir(0, p, sizeof(p));
	pgpair_dir(1, sd, sizeof(sd));
	return pg_script_argv(NULL, "standby", p, sd) ? -1 : 0;
}

static struct e2e_s3 s3srv;
static int s3srv_tried;
static char s3tmp[64]; /* request bodies and replies of e2e_s3_request */

static const char *s3_script(void)
{
	static char path[E2E_PATH_MAX];
	const char *dir = getenv("MAPFS_S3_SCRIPTS");

	snprintf(path, sizeof(path), "%s/%s.sh",
		 dir && *dir ? dir : E2E_S3_SCRIPTS_DIR, s3srv.kind);
	return path;
}

/* Run "SCRIPT CMD DIR" (or "SCRIPT start [DIR]"); stdout into *out. */
static int s3_script_run(const char *cmd, const char *dir, char **out)
{
	struct strv argv = { 0 }, env = { 0 };
	int rc;

	env_base(&env, 0);
	strv_add(&env, "MAPFS_S3_WATCH_PID=%d", (int)getpid());
	strv_add(&argv, "bash");
	strv_add(&argv, "%s", s3_script());
	strv_add(&argv, "%s", cmd);
	if (dir && *dir)
		strv_add(&argv, "%s", dir);
	rc = run_cmd(argv.v, env.v, out);
	strv_free(&argv);
	strv_free(&env);
	return rc;
}

static int rm_entry(const char *path, const struct stat *sb, int flag,
		    struct FTW *ftw);

/* The lines of tests/s3's stops.log about dir: who removed the server
 * from under this test. */
static void s3_stops_say(const char *dir)
{
	const char *ports = getenv("MAPFS_S3_PORTS");
	char path[E2E_PATH_MAX], line[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/stops.log",
		 ports && *ports ? ports : "/tmp/mapfs-s3-ports");
	if (!(f = fopen(path, "r")))
		return;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, dir))
			say("%s: %s", path, strtok(line, "\n"));
	fclose(f);
}

static void s3_at_exit(void)
{
	if (s3tmp[0])
		nftw(s3tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	const char *keep = getenv("E2E_KEEP");
	int k = keep && strcmp(keep, "1") == 0;

	if (!s3srv.ours || !s3srv.dir[0])
		return;
	if (k && s3srv.down) {
		say("keeping %s (stopped)", s3srv.dir);
	} else if (s3_script_run(k ? "halt" : "stop", s3srv.dir, NULL) != 0) {
		say("%s %s %s failed", s3_script(), k ? "halt" : "stop",
		    s3srv.dir);
		s3_stops_say(s3srv.dir);
	} else if (k) {
		say("keeping %s (stopped; `%s start %s` restarts it)",
		    s3srv.dir, s3_script(), s3srv.dir);
	}
	s3srv.dir[0] = '\0';
}

/* Copy the value of "NAME=value" lines of env text into out. */
static int env_get(const char *text, const char *name, char *out, size_t cap)
{
	size_t n = strlen(name);

	for (const char *l = text; l && *l;
	     l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) : strlen(l);

		if (len > n && strncmp(l, name, n) == 0 && l[n] == '=') {
			if (len - n - 1 >= cap)
				return -1;
			memcpy(out, l + n + 1, len - n - 1);
			out[len - n - 1] = '\0';
			return 0;
		}
	}
	return -1;
}

static int s3_parse_env(const char *text)
{
	if (env_get(text, "MAPFS_S3_ENDPOINT", s3srv.endpoint,
		    sizeof(s3srv.endpoint)) ||
	    env_get(text, "MAPFS_S3_BUCKET", s3srv.bucket,
		    sizeof(s3srv.bucket)) ||
	    env_get(text, "AWS_ACCESS_KEY_ID", s3srv.key_id,
		    sizeof(s3srv.key_id)) ||
	    env_get(text, "AWS_SECRET_ACCESS_KEY", s3srv.secret,
		    sizeof(s3srv.secret)))
		return -1;
	if (strncmp(s3srv.endpoint, "http://127.0.0.1:", 17) != 0) {
		say("S3 endpoint %s is not on 127.0.0.1; tests talk to "
		    "loopback only",
		    s3srv.endpoint);
		return -1;
	}
	return 0;
}

/* An outside server: the environment the scripts print. */
static int s3_from_env(void)
{
	static const char *const names[] = { "MAPFS_S3_ENDPOINT",
					     "MAPFS_S3_BUCKET",
					     "AWS_ACCESS_KEY_ID",
					     "AWS_SECRET_ACCESS_KEY" };
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int rc;

	if (!f)
		return -1;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *v = getenv(names[i]);

		if (!v || !*v) {
			say("MAPFS_E2E_STORE=s3 needs %s (the env that "
			    "tests/s3/rgw.sh start prints)",
			    names[i]);
			fclose(f);
			free(text);
			return -1;
		}
		fprintf(f, "%s=%s\n", names[i], v);
	}
	fclose(f);
	snprintf(s3srv.kind, sizeof(s3srv.kind), "s3");
	rc = s3_parse_env(text);
	free(text);
	return rc;
}

const struct e2e_s3 *e2e_s3_server(void)
{
	char *out = NULL;
	int rc;

	if (!e2e_backend_is_s3())
		return NULL;
	if (s3srv_tried)
		return s3srv.endpoint[0] ? &s3srv : NULL;
	s3srv_tried = 1;
	snprintf(s3tmp, sizeof(s3tmp), "/tmp/mapfs-e2e-s3c-XXXXXX");
	if (!mkdtemp(s3tmp)) {
		say("mkdtemp: %s", strerror(errno));
		s3tmp[0] = '\0';
		return NULL;
	}
	atexit(s3_at_exit);
	if (e2e_backend() == E2E_BACKEND_S3) {
		if (s3_from_env() != 0) {
			s3srv.endpoint[0] = '\0';
			return NULL;
		}
		return &s3srv;
	}
	snprintf(s3srv.kind, sizeof(s3srv.kind), "%s", e2e_backend_name());
	{
		uint64_t t0 = e2e_now_ms();

		rc = s3_script_run("start", NULL, &out);
		if (rc == 0 && out)
			env_get(out, "MAPFS_S3_DIR", s3srv.dir,
				sizeof(s3srv.dir));
		if (s3srv.dir[0])
			s3srv.ours = 1;
		if (rc != 0 || !out || s3_parse_env(out) != 0) {
			say("could not start the %s server: %s start exited "
			    "%d (is it installed? tests/s3/install-deps.sh)",
			    s3srv.kind, s3_script(), rc);
			free(out);
			s3srv.endpoint[0] = '\0';
			return NULL;
		}
		say("%s server at %s (bucket %s, dir %s) up in %llu ms",
		    s3srv.kind, s3srv.endpoint, s3srv.bucket, s3srv.dir,
		    (unsigned long long)(e2e_now_ms() - t0));
	}
	free(out);
	return &s3srv;
}

int e2e_s3_down(void)
{
	const char *how = e2e_backend() == E2E_BACKEND_RGW ? "halt" : "kill";

	if (!s3srv.ours || !s3srv.dir[0] || s3srv.down) {
		say("e2e_s3_down: no server of ours is up");
		return -1;
	}
	if (s3_script_run(how, s3srv.dir, NULL) != 0) {
		say("%s %s %s failed", s3_script(), how, s3srv.dir);
		return -1;
	}
	s3srv.down = 1;
	return 0;
}

int e2e_s3_up(void)
{
	char *out = NULL;
	int rc;

	if (!s3srv.ours || !s3srv.dir[0] || !s3srv.down) {
		say("e2e_s3_up: no server of ours is down");
		return -1;
	}
	rc = s3_script_run("start", s3srv.dir, &out);
	free(out);
	if (rc != 0) {
		say("%s start %s failed (%d)", s3_script(), s3srv.dir, rc);
		return -1;
	}
	s3srv.down = 0;
	return 0;
}

static void url_encode(const char *in, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		int plain = (*p >= 'A' && *p <= 'Z') ||
			    (*p >= 'a' && *p <= 'z') ||
			    (*p >= '0' && *p <= '9') || *p == '-' ||
			    *p == '_' || *p == '.' || *p == '~' || *p == '/';

		if (o + 4 >= cap)
			break;
		if (plain) {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	out[o] = '\0';
}

static char *slurp(const char *path, size_t *len)
{
	struct stat sb;
	char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0;

	*len = 0;
	if (fd < 0 || fstat(fd, &sb) != 0) {
		if (fd >= 0)
			close(fd);
		return calloc(1, 1);
	}
	buf = malloc((size_t)sb.st_size + 1);
	if (!buf)
		abort();
	while (got < (size_t)sb.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)sb.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	*len = got;
	return buf;
}

/* curl's arguments for a SigV4-signed request to the test server. */
static void curl_sigv4(struct strv *argv)
{
	strv_add(argv, "curl");
	strv_add(argv, "-sS");
	strv_add(argv, "--noproxy");
	strv_add(argv, "*");
	strv_add(argv, "--max-time");
	strv_add(argv, "60");
	strv_add(argv, "-H");
	strv_add(argv, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	strv_add(argv, "--aws-sigv4");
	strv_add(argv, "aws:amz:us-east-1:s3");
	strv_add(argv, "--user");
	strv_add(argv, "%s:%s", s3srv.key_id, s3srv.secret);
}

int e2e_s3_request(const char *method, const char *key, const char *query,
		   const void *body, size_t len, const char *const *headers,
		   struct e2e_s3_resp *resp)
{
	static unsigned seq;
	char enc[3 * 1024 + 1], hdrf[E2E_PATH_MAX], bodyf[E2E_PATH_MAX],
		inf[E2E_PATH_MAX];
	struct strv argv = { 0 }, env = { 0 };
	char *out = NULL;
	size_t hlen;
	int rc;

	memset(resp, 0, sizeof(*resp));
	if (!e2e_s3_server() || !s3tmp[0]) {
		say("e2e_s3_request: no S3 server");
		return -1;
	}
	seq++;
	snprintf(hdrf, sizeof(hdrf), "%s/h%u", s3tmp, seq);
	snprintf(bodyf, sizeof(bodyf), "%s/b%u", s3tmp, seq);
	snprintf(inf, sizeof(inf), "%s/i%u", s3tmp, seq);
	url_encode(key ? key : "", enc, sizeof(enc));
	env_base(&env, 1);
	curl_sigv4(&argv);
	strv_add(&argv, "-D");
	strv_add(&argv, "%s", hdrf);
	strv_add(&argv, "-o");
	strv_add(&argv, "%s", bodyf);
	strv_add(&argv, "-w");
	strv_add(&argv, "%%{http_code}");
	if (strcmp(method, "HEAD") == 0) {
		strv_add(&argv, "-I");
	} else {
		strv_add(&argv, "-X");
		strv_add(&argv, "%s", method);
	}
	if (body) {
		int fd = open(inf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			      0600);

		if (fd < 0 || (len && write(fd, body, len) != (ssize_t)len)) {
			say("e2e_s3_request: write %s: %s", inf,
			    strerror(errno));
			if (fd >= 0)
				close(fd);
			strv_free(&argv);
			strv_free(&env);
			return -1;
		}
		close(fd);
		strv_add(&argv, "-T");
		strv_add(&argv, "%s", inf);
	}
	for (const char *const *h = headers; h && *h; h++) {
		strv_add(&argv, "-H");
		strv_add(&argv, "%s", *h);
	}
	strv_add(&argv, "%s/%s%s%s%s%s", s3srv.endpoint, s3srv.bucket,
		 key ? "/" : "", enc, query ? "?" : "", query ? query : "");
	rc = run_cmd(argv.v, env.v, &out);
	strv_free(&argv);
	strv_free(&env);
	resp->code = out ? atoi(out) : 0;
	free(out);
	resp->headers = slurp(hdrf, &hlen);
	resp->body = slurp(bodyf, &resp->len);
	unlink(hdrf);
	unlink(bodyf);
	unlink(inf);
	if (rc != 0 || resp->code == 0) {
		say("curl %s %s: exit %d, HTTP %d", method, key ? key : "/", rc,
		    resp->code);
		return -1;
	}
	return 0;
}

int e2e_s3_put_many(const char *const *keys, int n, const char *body)
{
	char enc[3 * 1024 + 1], cfg[E2E_PATH_MAX], inf[E2E_PATH_MAX];
	struct strv argv = { 0 }, env = { 0 };
	char *out = NULL;
	int rc, ok = 0;
	FILE *f;

	if (!e2e_s3_server() || !s3tmp[0]) {
		say("e2e_s3_put_many: no S3 server");
		return -1;
	}
	snprintf(cfg, sizeof(cfg), "%s/many.cfg", s3tmp);
	snprintf(inf, sizeof(inf), "%s/many.body", s3tmp);
	f = fopen(inf, "w");
	if (!f || fputs(body, f) < 0 || fclose(f)) {
		say("e2e_s3_put_many: write %s: %s", inf, strerror(errno));
		return -1;
	}
	f = fopen(cfg, "w");
	if (!f)
		return -1;
	for (int i = 0; i < n; i++) {
		url_encode(keys[i], enc, sizeof(enc));
		fprintf(f,
			"url = \"%s/%s/%s\"\nupload-file = \"%s\"\n"
			"output = \"/dev/null\"\n",
			s3srv.endpoint, s3srv.bucket, enc, inf);
	}
	fclose(f);
	env_base(&env, 1);
	curl_sigv4(&argv);
	strv_add(&argv, "-w");
	strv_add(&argv, "%%{http_code}\\n");
	strv_add(&argv, "-K");
	strv_add(&argv, "%s", cfg);
	rc = run_cmd(argv.v, env.v, &out);
	strv_free(&argv);
	strv_free(&env);
	for (const char *l = out; l && *l;
	     l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "")
		ok += atoi(l) == 200;
	free(out);
	unlink(cfg);
	unlink(inf);
	if (rc != 0)
		say("curl -K (%d PUTs): exit %d, %d answered 200", n, rc, ok);
	return ok;
}

void e2e_s3_resp_free(struct e2e_s3_resp *resp)
{
	free(resp->headers);
	free(resp->body);
	memset(resp, 0, sizeof(*resp));
}

int e2e_s3_header(const struct e2e_s3_resp *resp, const char *name, char *out,
		  size_t cap)
{
	size_t n = strlen(name);
	const char *l = resp->headers;

	/* With redirects or 100-continue there are several blocks: last wins. */
	int found = -1;

	while (l && *l) {
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) : strlen(l);

		if (len > n && strncasecmp(l, name, n) == 0 && l[n] == ':') {
			const char *v = l + n + 1;
			size_t vlen = len - n - 1;

			while (vlen && (*v == ' ' || *v == '\t'))
				v++, vlen--;
			while (vlen &&
			       (v[vlen - 1] == '\r' || v[vlen - 1] == ' '))
				vlen--;
			if (vlen < cap) {
				memcpy(out, v, vlen);
				out[vlen] = '\0';
				found = 0;
			}
		}
		l = end ? end + 1 : NULL;
	}
	return found;
}

void e2e_s3_key(const struct e2e_gw *gw, const char *path, char *out,
		size_t cap)
{
	while (*path == '/')
		path++;
	snprintf(out, cap, "%s/%s", gw->s3_prefix, path);
}

/* ------------------------------------------------------------------ */
/* The gateway process (continued)                                     */

/* The gateway's argv and environment, made before fork. */
static void gw_cmdline(struct e2e_gw *gw, const char *bin, struct strv *argv,
		       struct strv *env)
{
	const char *lvl = getenv("E2E_LOG_LEVEL");
	const struct e2e_s3 *s3 = e2e_backend_is_s3() ? &s3srv : NULL;

	strv_add(argv, "%s", bin);
	strv_add(argv, "--store");
	if (s3)
		strv_add(argv, "%s", gw->store);
	else
		strv_add(argv, "file://%s", gw->store);
	if (s3) {
		strv_add(argv, "--s3-endpoint");
		strv_add(argv, "%s",
			 gw->opts.s3_endpoint ? gw->opts.s3_endpoint
					      : s3->endpoint);
		strv_add(argv, "--s3-region");
		strv_add(argv, "us-east-1");
	}
	strv_add(argv, "--state");
	strv_add(argv, "%s", gw->state);
	strv_add(argv, "--bind");
	strv_add(argv, "127.0.0.1");
	strv_add(argv, "--nfs-port");
	strv_add(argv, "0");
	strv_add(argv, "--mount-port");
	strv_add(argv, "0");
	strv_add(argv, "--export");
	strv_add(argv, "%s", E2E_EXPORT);
	strv_add(argv, "--threads");
	strv_add(argv, "%d", gw->threads);
	if (gw->meta[0]) {
		strv_add(argv, "--meta");
		strv_add(argv, "%s", gw->meta);
		strv_add(argv, "--node");
		if (gw->opts.node)
			strv_add(argv, "%s", gw->opts.node);
		else
			strv_add(argv, "%s", strrchr(gw->dir, '-') + 1);
	}
	strv_add(argv, "--no-rpcbind");
	strv_add(argv, "--foreground");
	if (gw->opts.dir_ttl) {
		strv_add(argv, "--dir-ttl");
		strv_add(argv, "%s", gw->opts.dir_ttl);
	}
	if (gw->opts.upload_delay) {
		strv_add(argv, "--upload-delay");
		strv_add(argv, "%s", gw->opts.upload_delay);
	}
	if (lvl && *lvl) {
		strv_add(argv, "--log-level");
		strv_add(argv, "%s", lvl);
	}
	for (int i = 0; gw->opts.extra_args && gw->opts.extra_args[i]; i++)
		strv_add(argv, "%s", gw->opts.extra_args[i]);
	add_env_args(argv);
	env_base(env, s3 != NULL);
	if (s3) {
		strv_add(env, "AWS_ACCESS_KEY_ID=%s",
			 gw->opts.s3_key_id ? gw->opts.s3_key_id : s3->key_id);
		strv_add(env, "AWS_SECRET_ACCESS_KEY=%s",
			 gw->opts.s3_secret ? gw->opts.s3_secret : s3->secret);
		strv_add(env, "AWS_REGION=us-east-1");
		/* Never instance metadata (169.254.169.254), no config files. */
		strv_add(env, "AWS_EC2_METADATA_DISABLED=true");
		strv_add(
			env,
			"AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:9");
		strv_add(env,
			 "AWS_SHARED_CREDENTIALS_FILE=%s/no-aws-credentials",
			 gw->dir);
		strv_add(env, "AWS_CONFIG_FILE=%s/no-aws-config", gw->dir);
		strv_add(env, "NO_PROXY=*");
		strv_add(env, "no_proxy=*");
	}
}

static void exec_child(struct e2e_gw *gw, int out_w, char *const *argv,
		       char *const *env)
{
	int logfd, nullfd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	logfd = open(gw->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	nullfd = open("/dev/null", O_RDONLY);
	if (logfd < 0 || nullfd < 0 || dup2(out_w, 1) < 0 ||
	    dup2(logfd, 2) < 0 || dup2(nullfd, 0) < 0)
		_exit(126);
	execve(argv[0], argv, env);
	dprintf(2, "e2e: exec %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

static int spawn(struct e2e_gw *gw)
{
	const char *bin = getenv("MAPFS_GW");
	struct strv argv = { 0 }, env = { 0 };
	char line[1024];
	size_t fill = 0;
	uint64_t deadline;
	int p[2];
	pid_t pid;

	if (!bin || !*bin) {
		say("MAPFS_GW is not set (ctest sets it to the mapfs-gw "
		    "binary)");
		return -1;
	}
	if (access(bin, X_OK) != 0) {
		say("MAPFS_GW=%s is not executable: %s", bin, strerror(errno));
		return -1;
	}
	if (pipe2(p, O_CLOEXEC) != 0) {
		say("pipe: %s", strerror(errno));
		return -1;
	}
	gw_cmdline(gw, bin, &argv, &env);
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		say("fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		strv_free(&argv);
		strv_free(&env);
		return -1;
	}
	if (pid == 0)
		exec_child(gw, p[1], argv.v, env.v);
	close(p[1]);
	strv_free(&argv);
	strv_free(&env);
	gw->exit_status = -1;
	gw->pid = pid;
	gw->out_fd = p[0];
	gw->starts++;
	gw->nfs_port = gw->mount_port = 0;

	deadline = e2e_now_ms() + READY_TIMEOUT_MS;
	for (;;) {
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		uint64_t now = e2e_now_ms();
		char *nl;
		ssize_t n;
		int rc;

		if (now >= deadline) {
			say("no ready line within %d ms (start #%d)",
			    READY_TIMEOUT_MS, gw->starts);
			goto fail;
		}
		rc = poll(&pfd, 1, (int)(deadline - now));
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0)
			continue;
		n = read(p[0], line + fill, sizeof(line) - 1 - fill);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int st = 0;

			waitpid(pid, &st, 0);
			gw->pid = 0;
			gw->exit_status = WIFEXITED(st) ? WEXITSTATUS(st)
							: 128 + WTERMSIG(st);
			say("gateway exited before the ready line (%s %d)",
			    WIFEXITED(st) ? "exit" : "signal",
			    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			e2e_gw_dump_log(gw);
			close_stdout(gw);
			return -1;
		}
		fill += (size_t)n;
		line[fill] = '\0';
		nl = strchr(line, '\n');
		if (nl) {
			*nl = '\0';
			if (parse_ready(gw, line) != 0)
				goto fail;
			if (nl[1] != '\0') {
				say("gateway wrote more than the ready line "
				    "on stdout: '%s'",
				    nl + 1);
				gw->extra_stdout += strlen(nl + 1);
			}
			break;
		}
		if (fill == sizeof(line) - 1) {
			say("first stdout line is over %zu bytes", fill);
			goto fail;
		}
	}
	fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
	return 0;
fail:
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	gw->pid = 0;
	e2e_gw_dump_log(gw);
	close_stdout(gw);
	return -1;
}

int e2e_gw_start_opts(struct e2e_gw *gw, const struct e2e_gw_opts *o)
{
	static unsigned seq;
	const struct e2e_s3 *s3 = NULL;

	memset(gw, 0, sizeof(*gw));
	gw->out_fd = -1;
	gw->exit_status = -1;
	if (o)
		gw->opts = *o;
	gw->threads = gw->opts.threads > 0 ? gw->opts.threads : 2;
	if (e2e_backend_is_s3()) {
		s3 = e2e_s3_server();
		if (!s3)
			return -1;
	}
	snprintf(gw->dir, sizeof(gw->dir), "/tmp/mapfs-e2e-XXXXXX");
	if (!mkdtemp(gw->dir)) {
		say("mkdtemp: %s", strerror(errno));
		gw->dir[0] = '\0';
		return -1;
	}
	if (gw->opts.state_dir)
		snprintf(gw->state, sizeof(gw->state), "%s",
			 gw->opts.state_dir);
	else
		snprintf(gw->state, sizeof(gw->state), "%s/state", gw->dir);
	snprintf(gw->log, sizeof(gw->log), "%s/gw.log", gw->dir);
	if (gw->opts.meta)
		snprintf(gw->meta, sizeof(gw->meta), "%s", gw->opts.meta);
	else if (e2e_meta_is_pg() &&
		 e2e_pg_createdb(gw->meta, sizeof(gw->meta)))
		return -1;
	if (s3 && gw->opts.store_of) {
		snprintf(gw->s3_prefix, sizeof(gw->s3_prefix), "%s",
			 gw->opts.store_of->s3_prefix);
		snprintf(gw->store, sizeof(gw->store), "%s",
			 gw->opts.store_of->store);
	} else if (gw->opts.store_of) {
		snprintf(gw->store, sizeof(gw->store), "%s",
			 gw->opts.store_of->store);
	} else if (s3) {
		/* A prefix of its own: gateways of a run never see each other. */
		if (gw->opts.s3_prefix)
			snprintf(gw->s3_prefix, sizeof(gw->s3_prefix), "%s",
				 gw->opts.s3_prefix);
		else
			snprintf(gw->s3_prefix, sizeof(gw->s3_prefix),
				 "e2e-%d-%u-%s", (int)getpid(), ++seq,
				 strrchr(gw->dir, '-') + 1);
		snprintf(gw->store, sizeof(gw->store), "s3://%s/%s", s3->bucket,
			 gw->s3_prefix);
	} else {
		snprintf(gw->store, sizeof(gw->store), "%s/store", gw->dir);
		if (mkdir(gw->store, 0755) != 0) {
			say("mkdir %s: %s", gw->store, strerror(errno));
			return -1;
		}
	}
	if (!gw->opts.state_dir && mkdir(gw->state, 0700) != 0) {
		say("mkdir %s: %s", gw->state, strerror(errno));
		return -1;
	}
	return spawn(gw);
}

int e2e_gw_start(struct e2e_gw *gw, int threads)
{
	struct e2e_gw_opts o = { .threads = threads };

	return e2e_gw_start_opts(gw, &o);
}

int e2e_gw_start_args(struct e2e_gw *gw, int threads, const char *const *args)
{
	struct e2e_gw_opts o = { .threads = threads, .extra_args = args };

	return e2e_gw_start_opts(gw, &o);
}

int e2e_gw_restart(struct e2e_gw *gw)
{
	if (gw->pid > 0) {
		say("restart: gateway pid %d is still running", (int)gw->pid);
		return -1;
	}
	return spawn(gw);
}

/* Wait for the child up to ms; returns the wait status or -1. */
static int wait_child(struct e2e_gw *gw, int ms)
{
	uint64_t deadline = e2e_now_ms() + (uint64_t)ms;
	int st;

	for (;;) {
		pid_t p = waitpid(gw->pid, &st, WNOHANG);

		if (p == gw->pid)
			return st;
		if (p < 0 && errno != EINTR)
			return -1;
		if (e2e_now_ms() >= deadline)
			return -1;
		drain_stdout(gw);
		usleep(20000);
	}
}

int e2e_gw_stop(struct e2e_gw *gw)
{
	int st, ret;

	if (gw->pid <= 0) {
		say("stop: the gateway is not running");
		return -1;
	}
	if (kill(gw->pid, SIGTERM) != 0) {
		say("kill SIGTERM: %s", strerror(errno));
		return -1;
	}
	st = wait_child(gw, STOP_TIMEOUT_MS);
	if (st == -1) {
		say("gateway did not exit within %d ms of SIGTERM; SIGKILL",
		    STOP_TIMEOUT_MS);
		kill(gw->pid, SIGKILL);
		waitpid(gw->pid, NULL, 0);
		ret = -1;
	} else if (WIFEXITED(st)) {
		ret = WEXITSTATUS(st);
	} else {
		ret = 128 + WTERMSIG(st);
	}
	gw->pid = 0;
	close_stdout(gw);
	if (ret != 0) {
		say("gateway stop: status %d, want exit 0", ret);
		e2e_gw_dump_log(gw);
	} else if (CU_get_number_of_failures()) {
		/* A check failed meanwhile: what the gateway said is the
		 * first thing to read (a store it found down, say). */
		e2e_gw_dump_log(gw);
	}
	return ret;
}

int e2e_gw_kill9(struct e2e_gw *gw)
{
	if (gw->pid <= 0) {
		say("kill9: the gateway is not running");
		return -1;
	}
	kill(gw->pid, SIGKILL);
	if (waitpid(gw->pid, NULL, 0) != gw->pid) {
		say("waitpid after SIGKILL: %s", strerror(errno));
		return -1;
	}
	gw->pid = 0;
	close_stdout(gw);
	return 0;
}

int e2e_gw_alive(struct e2e_gw *gw)
{
	int st;

	if (gw->pid <= 0)
		return 0;
	if (waitpid(gw->pid, &st, WNOHANG) == gw->pid) {
		say("gateway pid %d died (%s %d)", (int)gw->pid,
		    WIFEXITED(st) ? "exit" : "signal",
		    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		gw->pid = 0;
		e2e_gw_dump_log(gw);
		return 0;
	}
	return 1;
}

static int rm_entry(const char *path, const struct stat *sb, int flag,
		    struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void e2e_gw_cleanup(struct e2e_gw *gw)
{
	const char *keep = getenv("E2E_KEEP");

	if (gw->pid > 0) {
		kill(gw->pid, SIGKILL);
		waitpid(gw->pid, NULL, 0);
		gw->pid = 0;
	}
	close_stdout(gw);
	if (!gw->dir[0])
		return;
	if (keep && strcmp(keep, "1") == 0)
		say("keeping %s", gw->dir);
	else
		nftw(gw->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	gw->dir[0] = '\0';
}

/* ------------------------------------------------------------------ */
/* libnfs high-level client                                            */

struct nfs_context *e2e_nfs_mount(const struct e2e_gw *gw)
{
	char url[256];
	struct nfs_context *nfs = nfs_init_context();
	struct nfs_url *u;

	if (!nfs) {
		say("nfs_init_context failed");
		return NULL;
	}
	snprintf(url, sizeof(url),
		 "nfs://127.0.0.1%s?nfsport=%d&mountport=%d&autoreconnect=0",
		 E2E_EXPORT, gw->nfs_port, gw->mount_port);
	u = nfs_parse_url_dir(nfs, url);
	if (!u) {
		say("nfs_parse_url_dir(%s): %s", url, nfs_get_error(nfs));
		nfs_destroy_context(nfs);
		return NULL;
	}
	nfs_set_timeout(nfs, 60000);
	if (nfs_mount(nfs, u->server, u->path) != 0) {
		say("nfs_mount(%s): %s", url, nfs_get_error(nfs));
		nfs_destroy_url(u);
		nfs_destroy_context(nfs);
		return NULL;
	}
	nfs_destroy_url(u);
	return nfs;
}

/* ------------------------------------------------------------------ */
/* Raw RPC client                                                      */

struct arena_blk {
	struct arena_blk *next;
	max_align_t data[];
};

struct e2e_rpc {
	struct rpc_context *rpc;
	struct arena_blk *arena;
	char *readbuf; /* READ data, reused by the next READ */
	size_t readcap;
	int broken;
	char err[512];
};

/* Zeroed memory owned by r; aborts on OOM (a test box without memory). */
static void *ar_alloc(struct e2e_rpc *r, size_t n)
{
	struct arena_blk *b = calloc(1, sizeof(*b) + n + 1);

	if (!b) {
		say("out of memory");
		abort();
	}
	b->next = r->arena;
	r->arena = b;
	return b->data;
}

static void *ar_dup(struct e2e_rpc *r, const void *p, size_t n)
{
	void *d = ar_alloc(r, n);

	if (n)
		memcpy(d, p, n);
	return d;
}

static char *ar_str(struct e2e_rpc *r, const char *s)
{
	return s ? ar_dup(r, s, strlen(s) + 1) : NULL;
}

typedef void (*copy_fn)(struct e2e_rpc *r, void *dst, const void *src);

struct call {
	struct e2e_rpc *r;
	int done;
	int status;
	void *dst;
	copy_fn copy;
};

static void call_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct call *c = priv;

	(void)rpc;
	c->done = 1;
	c->status = status;
	if (status == RPC_STATUS_SUCCESS) {
		if (c->copy && c->dst)
			c->copy(c->r, c->dst, data);
	} else if (status == RPC_STATUS_ERROR) {
		snprintf(c->r->err, sizeof(c->r->err), "RPC error: %s",
			 data ? (const char *)data : "(no message)");
	} else if (status == RPC_STATUS_CANCEL) {
		snprintf(c->r->err, sizeof(c->r->err), "RPC cancelled");
	} else {
		snprintf(c->r->err, sizeof(c->r->err), "RPC status %d", status);
	}
}

/* Service the context until c is done; 0 if it succeeded, else -1. */
static int wait_call(struct e2e_rpc *r, struct call *c)
{
	uint64_t deadline = e2e_now_ms() + CALL_TIMEOUT_MS;

	while (!c->done) {
		struct pollfd pfd;
		int rc;

		if (e2e_now_ms() >= deadline) {
			/* Fires the pending callbacks while c is in scope. */
			rpc_disconnect(r->rpc, "e2e timeout");
			r->broken = 1;
			snprintf(r->err, sizeof(r->err),
				 "no reply within %d ms", CALL_TIMEOUT_MS);
			c->done = 1;
			return -1;
		}
		pfd.fd = rpc_get_fd(r->rpc);
		pfd.events = (short)rpc_which_events(r->rpc);
		pfd.revents = 0;
		rc = poll(&pfd, 1, 100);
		if (rc < 0 && errno != EINTR) {
			snprintf(r->err, sizeof(r->err), "poll: %s",
				 strerror(errno));
			return -1;
		}
		if (rpc_service(r->rpc, rc > 0 ? pfd.revents : 0) < 0) {
			if (!c->done)
				snprintf(r->err, sizeof(r->err),
					 "connection failed: %s",
					 rpc_get_error(r->rpc));
			r->broken = 1;
			if (!c->done) {
				rpc_disconnect(r->rpc, "e2e: service failed");
				c->done = 1;
				return -1;
			}
		}
	}
	return c->status == RPC_STATUS_SUCCESS ? 0 : -1;
}

/* Queue result check: q is the return of an rpc_*_async call. */
static int finish(struct e2e_rpc *r, struct call *c, int q, const char *what)
{
	if (r->broken) {
		snprintf(r->err, sizeof(r->err), "%s: connection is broken",
			 what);
		return -1;
	}
	if (q != 0) {
		snprintf(r->err, sizeof(r->err), "%s: could not queue: %s",
			 what, rpc_get_error(r->rpc));
		return -1;
	}
	if (wait_call(r, c) != 0) {
		char tmp[sizeof(r->err)];

		snprintf(tmp, sizeof(tmp), "%s: %.400s", what, r->err);
		memcpy(r->err, tmp, sizeof(tmp));
		return -1;
	}
	return 0;
}

struct e2e_rpc *e2e_rpc_open(int port, int program, int version)
{
	struct e2e_rpc *r = calloc(1, sizeof(*r));
	struct call c = { .r = r };
	int q;

	if (!r)
		return NULL;
	r->rpc = rpc_init_context();
	if (!r->rpc) {
		say("rpc_init_context failed");
		free(r);
		return NULL;
	}
	q = rpc_connect_port_async(r->rpc, "127.0.0.1", port, program, version,
				   call_cb, &c);
	if (finish(r, &c, q, "connect") != 0) {
		say("connect 127.0.0.1:%d prog %d vers %d: %s", port, program,
		    version, r->err);
		e2e_rpc_close(r);
		return NULL;
	}
	return r;
}

/*
 * A socket bound to src:src_port (see e2e_rpc_open_from), or for
 * src_port < 0 to the first free reserved port from *next on (*next is
 * left past it); -1 on error.
 */
static int bound_socket(const char *src, int src_port, int *next)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	int port = src_port < 0 ? *next : src_port;

	if (fd < 0 || inet_pton(AF_INET, src, &sin.sin_addr) != 1) {
		say("socket for %s: %s", src, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	for (;;) {
		sin.sin_port = htons((uint16_t)port);
		if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0) {
			*next = port + 1;
			return fd;
		}
		if (src_port >= 0 || errno != EADDRINUSE || ++port >= 1024)
			break;
	}
	say("bind %s:%d: %s", src, port, strerror(errno));
	close(fd);
	return -1;
}

struct e2e_rpc *e2e_rpc_open_from(const char *src, int src_port, int port,
				  int program, int version)
{
	struct sockaddr_in dst = { .sin_family = AF_INET,
				   .sin_port = htons((uint16_t)port) };
	struct e2e_rpc *r = e2e_rpc_open(port, program, version);
	int fd, old;

	if (!r)
		return NULL;
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* Tests run in parallel and bind the same source addresses: a port
	 * another test's connection holds (or left in TIME_WAIT) binds with
	 * SO_REUSEADDR but cannot connect; any reserved port will do. */
	for (int next = 600;;) {
		fd = bound_socket(src, src_port, &next);
		if (fd < 0 ||
		    !connect(fd, (struct sockaddr *)&dst, sizeof(dst)))
			break;
		if (src_port >= 0 || errno != EADDRNOTAVAIL || next >= 1024) {
			int err = errno;

			close(fd);
			fd = -1;
			errno = err;
			break;
		}
		close(fd);
	}
	if (fd < 0) {
		say("connect from %s to port %d: %s", src, port,
		    strerror(errno));
		e2e_rpc_close(r);
		return NULL;
	}
	/* libnfs wants its socket non-blocking, as it made its own. */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	old = rpc_get_fd(r->rpc);
	rpc_set_fd(r->rpc, fd);
	close(old);
	return r;
}

void e2e_rpc_close(struct e2e_rpc *r)
{
	if (!r)
		return;
	if (r->rpc)
		rpc_destroy_context(r->rpc);
	free(r->readbuf);
	while (r->arena) {
		struct arena_blk *n = r->arena->next;

		free(r->arena);
		r->arena = n;
	}
	free(r);
}

const char *e2e_rpc_error(const struct e2e_rpc *r)
{
	return r->err;
}

struct rpc_context *e2e_rpc_ctx(struct e2e_rpc *r)
{
	return r->rpc;
}

nfs_fh3 e2e_fh_dup(struct e2e_rpc *r, const nfs_fh3 *fh)
{
	nfs_fh3 d;

	d.data.data_len = fh->data.data_len;
	d.data.data_val = ar_dup(r, fh->data.data_val, fh->data.data_len);
	return d;
}

int e2e_fh_equal(const nfs_fh3 *a, const nfs_fh3 *b)
{
	return a->data.data_len == b->data.data_len &&
	       memcmp(a->data.data_val, b->data.data_val, a->data.data_len) ==
		       0;
}

sattr3 e2e_sattr_none(void)
{
	sattr3 s;

	memset(&s, 0, sizeof(s));
	s.atime.set_it = DONT_CHANGE;
	s.mtime.set_it = DONT_CHANGE;
	return s;
}

sattr3 e2e_sattr_mode(uint32_t mode)
{
	sattr3 s = e2e_sattr_none();

	s.mode.set_it = 1;
	s.mode.set_mode3_u.mode = mode;
	return s;
}

/* --- deep copies of results --- */

static void copy_flat_getattr(struct e2e_rpc *r, void *d, const void *s)
{
	(void)r;
	memcpy(d, s, sizeof(GETATTR3res));
}

#define FLAT_COPY(fn, type)                                       \
	static void fn(struct e2e_rpc *r, void *d, const void *s) \
	{                                                         \
		(void)r;                                          \
		memcpy(d, s, sizeof(type));                       \
	}

FLAT_COPY(copy_setattr, SETATTR3res)
FLAT_COPY(copy_access, ACCESS3res)
FLAT_COPY(copy_write, WRITE3res)
FLAT_COPY(copy_remove, REMOVE3res)
FLAT_COPY(copy_rmdir, RMDIR3res)
FLAT_COPY(copy_rename, RENAME3res)
FLAT_COPY(copy_link, LINK3res)
FLAT_COPY(copy_fsstat, FSSTAT3res)
FLAT_COPY(copy_fsinfo, FSINFO3res)
FLAT_COPY(copy_pathconf, PATHCONF3res)
FLAT_COPY(copy_commit, COMMIT3res)

static void fix_fh(struct e2e_rpc *r, nfs_fh3 *fh)
{
	*fh = e2e_fh_dup(r, fh);
}

static void fix_post_op_fh(struct e2e_rpc *r, post_op_fh3 *p)
{
	if (p->handle_follows)
		fix_fh(r, &p->post_op_fh3_u.handle);
}

static void copy_lookup(struct e2e_rpc *r, void *d, const void *s)
{
	LOOKUP3res *res = d;

	memcpy(res, s, sizeof(*res));
	if (res->status == NFS3_OK)
		fix_fh(r, &res->LOOKUP3res_u.resok.object);
}

static void copy_read(struct e2e_rpc *r, void *d, const void *s)
{
	READ3res *res = d;

	memcpy(res, s, sizeof(*res));
	if (res->status == NFS3_OK) {
		READ3resok *ok = &res->READ3res_u.resok;

		if (ok->data.data_len > r->readcap) {
			free(r->readbuf);
			r->readcap = ok->data.data_len;
			r->readbuf = malloc(r->readcap);
			if (!r->readbuf) {
				say("out of memory");
				abort();
			}
		}
		if (ok->data.data_len)
			memcpy(r->readbuf, ok->data.data_val,
			       ok->data.data_len);
		ok->data.data_val = r->readbuf;
	}
}

static void copy_readlink(struct e2e_rpc *r, void *d, const void *s)
{
	READLINK3res *res = d;

	memcpy(res, s, sizeof(*res));
	if (res->status == NFS3_OK)
		res->READLINK3res_u.resok.data =
			ar_str(r, res->READLINK3res_u.resok.data);
}

static void copy_create(struct e2e_rpc *r, void *d, const void *s)
{
	CREATE3res *res = d;

	memcpy(res, s, sizeof(*res));
	if (res->status == NFS3_OK)
		fix_post_op_fh(r, &res->CREATE3res_u.resok.obj);
}

static void copy_mkdir(struct e2e_rpc *r, void *d, const void *s)
{
	MKDIR3res *res = d;

	memcpy(res, s, sizeof(*res));
	if (res->status == NFS3_OK)
		fix_post_op_fh(r, &res->MKDIR3res_u.resok.obj);
}

static void copy_symlink(struct e2e_rpc *r, void *d, const void *s)
{
	SYMLINK3res *res = d;

	memcpy(res, s, sizeof(*res));
	if (res->status == NFS3_OK)
		fix_post_op_fh(r, &res->SYMLINK3res_u.resok.obj);
}

static void copy_mknod(struct e2e_rpc *r, void *d, const void *s)
{
	MKNOD3res *res = d;

	memcpy(res, s, sizeof(*res));
	if (res->status == NFS3_OK)
		fix_post_op_fh(r, &res->MKNOD3res_u.resok.obj);
}

static void copy_readdir(struct e2e_rpc *r, void *d, const void *s)
{
	READDIR3res *res = d;
	entry3 **link;

	memcpy(res, s, sizeof(*res));
	if (res->status != NFS3_OK)
		return;
	/*
	 * libnfs carves its decoded entries out of one buffer at 4-byte
	 * alignment, so each is copied out by bytes before any field of it
	 * is read (UBSan: misaligned member access).
	 */
	link = &res->READDIR3res_u.resok.reply.entries;
	for (const void *e = *link; e;) {
		entry3 *c = ar_dup(r, e, sizeof(*c));

		c->name = ar_str(r, c->name);
		e = c->nextentry;
		c->nextentry = NULL;
		*link = c;
		link = &c->nextentry;
	}
}

static void copy_readdirplus(struct e2e_rpc *r, void *d, const void *s)
{
	READDIRPLUS3res *res = d;
	entryplus3 **link;

	memcpy(res, s, sizeof(*res));
	if (res->status != NFS3_OK)
		return;
	/* Copied out by bytes first, as in copy_readdir(). */
	link = &res->READDIRPLUS3res_u.resok.reply.entries;
	for (const void *e = *link; e;) {
		entryplus3 *c = ar_dup(r, e, sizeof(*c));

		c->name = ar_str(r, c->name);
		fix_post_op_fh(r, &c->name_handle);
		e = c->nextentry;
		c->nextentry = NULL;
		*link = c;
		link = &c->nextentry;
	}
}

static void copy_mnt(struct e2e_rpc *r, void *d, const void *s)
{
	mountres3 *res = d;

	memcpy(res, s, sizeof(*res));
	if (res->fhs_status == MNT3_OK) {
		mountres3_ok *ok = &res->mountres3_u.mountinfo;

		ok->fhandle.fhandle3_val = ar_dup(r, ok->fhandle.fhandle3_val,
						  ok->fhandle.fhandle3_len);
		ok->auth_flavors.auth_flavors_val =
			ar_dup(r, ok->auth_flavors.auth_flavors_val,
			       ok->auth_flavors.auth_flavors_len * sizeof(int));
	}
}

static void copy_dump(struct e2e_rpc *r, void *d, const void *s)
{
	mountlist *out = d;
	const mountlist *in = s;

	/* Copied out by bytes first, as in copy_readdir(). */
	*out = NULL;
	for (const void *m = *in; m;) {
		struct mountbody *c = ar_dup(r, m, sizeof(*c));

		c->ml_hostname = ar_str(r, c->ml_hostname);
		c->ml_directory = ar_str(r, c->ml_directory);
		m = c->ml_next;
		c->ml_next = NULL;
		*out = c;
		out = &c->ml_next;
	}
}

static void copy_export(struct e2e_rpc *r, void *d, const void *s)
{
	exports *out = d;
	const exports *in = s;

	/* Copied out by bytes first, as in copy_readdir(). */
	*out = NULL;
	for (const void *e = *in; e;) {
		struct exportnode *c = ar_dup(r, e, sizeof(*c));
		groups *g = &c->ex_groups;
		const void *gi = c->ex_groups;

		c->ex_dir = ar_str(r, c->ex_dir);
		while (gi) {
			struct groupnode *gc = ar_dup(r, gi, sizeof(*gc));

			gc->gr_name = ar_str(r, gc->gr_name);
			gi = gc->gr_next;
			gc->gr_next = NULL;
			*g = gc;
			g = &gc->gr_next;
		}
		e = c->ex_next;
		c->ex_next = NULL;
		*out = c;
		out = &c->ex_next;
	}
}

/* --- the calls --- */

#define CALL(r, res, fn, what, expr)                                       \
	do {                                                               \
		struct call c_ = { .r = (r), .dst = (res), .copy = (fn) }; \
		int q_;                                                    \
		if ((r)->broken) {                                         \
			snprintf((r)->err, sizeof((r)->err),               \
				 "%s: connection is broken", what);        \
			return -1;                                         \
		}                                                          \
		q_ = (expr);                                               \
		return finish((r), &c_, q_, what);                         \
	} while (0)

/* libnfs takes non-const pointers for arguments it only reads. */
static nfs_fh3 fh_arg(const nfs_fh3 *fh)
{
	nfs_fh3 a = *fh;

	return a;
}

int e2e_nfs3_null(struct e2e_rpc *r)
{
	CALL(r, NULL, NULL, "NFS3 NULL",
	     rpc_nfs3_null_async(r->rpc, call_cb, &c_));
}

int e2e_nfs3_getattr(struct e2e_rpc *r, const nfs_fh3 *fh, GETATTR3res *res)
{
	GETATTR3args a = { .object = fh_arg(fh) };

	CALL(r, res, copy_flat_getattr, "GETATTR",
	     rpc_nfs3_getattr_async(r->rpc, call_cb, &a, &c_));
}

int e2e_nfs3_setattr(struct e2e_rpc *r, SETATTR3args *a, SETATTR3res *res)
{
	CALL(r, res, copy_setattr, "SETATTR",
	     rpc_nfs3_setattr_async(r->rpc, call_cb, a, &c_));
}

int e2e_nfs3_lookup(struct e2e_rpc *r, const nfs_fh3 *dir, const char *name,
		    LOOKUP3res *res)
{
	LOOKUP3args a = { .what = { .dir = fh_arg(dir),
				    .name = (char *)name } };

	CALL(r, res, copy_lookup, "LOOKUP",
	     rpc_nfs3_lookup_async(r->rpc, call_cb, &a, &c_));
}

int e2e_nfs3_access(struct e2e_rpc *r, const nfs_fh3 *fh, uint32_t access,
		    ACCESS3res *res)
{
	ACCESS3args a = { .object = fh_arg(fh), .access = access };

	CALL(r, res, copy_access, "ACCESS",
	     rpc_nfs3_access_async(r->rpc, call_cb, &a, &c_));
}

int e2e_nfs3_readlink(struct e2e_rpc *r, const nfs_fh3 *fh, READLINK3res *res)
{
	READLINK3args a = { .symlink = fh_arg(fh) };

	CALL(r, res, copy_readlink, "READLINK",
	     rpc_nfs3_readlink_async(r->rpc, call_cb, &a, &c_));
}

int e2e_nfs3_read(struct e2e_rpc *r, const nfs_fh3 *fh, uint64_t off,
		  uint32_t count, READ3res *res)
{
	READ3args a = { .file = fh_arg(fh), .offset = off, .count = count };

	CALL(r, res, copy_read, "READ",
	     rpc_nfs3_read_async(r->rpc, call_cb, &a, &c_));
}

int e2e_nfs3_write(struct e2e_rpc *r, const nfs_fh3 *fh, uint64_t off,
		   const void *buf, uint32_t len, stable_how how,
		   WRITE3res *res)
{
	WRITE3args a = {
		.file = fh_arg(fh), .offset = off, .count = len, .stable = how
	};

	a.data.data_len = len;
	a.data.data_val = (char *)buf;
	CALL(r, res, copy_write, "WRITE",
	     rpc_nfs3_write_async(r->rpc, call_cb, &a, &c_));
}

int e2e_nfs3_create(struct e2e_rpc *r, CREATE3args *a, CREATE3res *res)
{
	CALL(r, res, copy_create, "CREATE",
	     rpc_nfs3_create_async(r->rpc, call_cb, a, &c_));
}

int e2e_nfs3_mkdir(struct e2e_rpc *r, MKDIR3args *a, MKDIR3res *res)
{
	CALL(r, res, copy_mkdir, "MKDIR",
	     rpc_nfs3_mkdir_async(r->rpc, call_cb, a, &c_));
}

int e2e_nfs3_symlink(struct e2e_rpc *r, SYMLINK3args *a, SYMLINK3res *res)
{
	CALL(r, res, copy_symlink, "SYMLINK",
	     rpc_nfs3_symlink_async(r->rpc, call_cb, a, &c_));
}

int e2e_nfs3_mknod(struct e2e_rpc *r, MKNOD3args *a, MKNOD3res *res)
{
	CALL(r, res, copy_mknod, "MKNOD",
	     rpc_nfs3_mknod_async(r->rpc, call_cb, a, &c_));
}

int e2e_nfs3_remove(struct e2e_rpc *r, const nfs_fh3 *dir, const char *name,
		    REMOVE3res *res)
{
	REMOVE3args a = { .object = { .dir = fh_arg(dir),
				      .name = (char *)name } };

	CALL(r, res, copy_remove, "REMOVE",
	     rpc_nfs3_remove_async(r->rpc, call_cb, &a, &c_));
}

int e2e_nfs3_rmdir(struct e2e_rpc *r, const nfs_fh3 *dir, const char *name,
		   RMDIR3res *res)
{
	RMDIR3args a = { .object = { .dir = fh_arg(dir),
				     .name = (char *)name } };

	CALL(r, res, copy_rmdir, "RMDIR",
	     rpc_nfs3_rmdir_async(r->rpc, call_cb, &a, &c_));
}

int e2e_nfs3_rename(struct e2e_rpc *r, const nfs_fh3 *fdir, const char *from,
		    const nfs_fh3 *tdir, const char *to, RENAME3res *res)
{
	RENAME3args a = {
		.from = { .dir = fh_arg(fdir), .name = (char *)from },
		.to = { .dir = fh_arg(tdir), .name = (char *)to },
	};

	CALL(r, res, copy_rename, "RENAME",
	     rpc_nfs3_rename_async(r->rpc, call_cb, &a, &c_));
}

int e2e_nfs3_link(struct e2e_rpc *r, const nfs_fh3 *file, const nfs_fh3 *dir,
		  const char *name, LINK3res *res)
{
	LINK3args a = { .file = fh_arg(file),
			.link = { .dir = fh_arg(dir), .name = (char *)name } };

	CALL(r, res, copy_link, "LINK",
	     rpc_nfs3_link_async(r->rpc, call_cb, &a, &c_));
}

int e2e_nfs3_readdir(struct e2e_rpc *r, READDIR3args *a, READDIR3res *res)
{
	CALL(r, res, copy_readdir, "READDIR",
	     rpc_nfs3_readdir_async(r->rpc, call_cb, a, &c_));
}

int e2e_nfs3_readdirplus(struct e2e_rpc *r, READDIRPLUS3args *a,
			 READDIRPLUS3res *res)
{
	CALL(r, res, copy_readdirplus, "READDIRPLUS",
	     rpc_nfs3_readdirplus_async(r->rpc, call_cb, a, &c_));
}

int e2e_nfs3_fsstat(struct e2e_rpc *r, const nfs_fh3 *fh, FSSTAT3res *res)
{
	FSSTAT3args a = { .fsroot = fh_arg(fh) };

	CALL(r, res, copy_fsstat, "FSSTAT",
	     rpc_nfs3_fsstat_async(r->rpc, call_cb, &a, &c_));
}

int e2e_nfs3_fsinfo(struct e2e_rpc *r, const nfs_fh3 *fh, FSINFO3res *res)
{
	FSINFO3args a = { .fsroot = fh_arg(fh) };

	CALL(r, res, copy_fsinfo, "FSINFO",
	     rpc_nfs3_fsinfo_async(r->rpc, call_cb, &a, &c_));
}

int e2e_nfs3_pathconf(struct e2e_rpc *r, const nfs_fh3 *fh, PATHCONF3res *res)
{
	PATHCONF3args a = { .object = fh_arg(fh) };

	CALL(r, res, copy_pathconf, "PATHCONF",
	     rpc_nfs3_pathconf_async(r->rpc, call_cb, &a, &c_));
}

int e2e_nfs3_commit(struct e2e_rpc *r, const nfs_fh3 *fh, uint64_t off,
		    uint32_t count, COMMIT3res *res)
{
	COMMIT3args a = { .file = fh_arg(fh), .offset = off, .count = count };

	CALL(r, res, copy_commit, "COMMIT",
	     rpc_nfs3_commit_async(r->rpc, call_cb, &a, &c_));
}

int e2e_mnt3_null(struct e2e_rpc *r)
{
	CALL(r, NULL, NULL, "MOUNT3 NULL",
	     rpc_mount3_null_async(r->rpc, call_cb, &c_));
}

int e2e_mnt3_mnt(struct e2e_rpc *r, const char *path, mountres3 *res)
{
	CALL(r, res, copy_mnt, "MOUNT3 MNT",
	     rpc_mount3_mnt_async(r->rpc, call_cb, (char *)path, &c_));
}

int e2e_mnt3_dump(struct e2e_rpc *r, mountlist *list)
{
	CALL(r, list, copy_dump, "MOUNT3 DUMP",
	     rpc_mount3_dump_async(r->rpc, call_cb, &c_));
}

int e2e_mnt3_umnt(struct e2e_rpc *r, const char *path)
{
	CALL(r, NULL, NULL, "MOUNT3 UMNT",
	     rpc_mount3_umnt_async(r->rpc, call_cb, (char *)path, &c_));
}

int e2e_mnt3_umntall(struct e2e_rpc *r)
{
	CALL(r, NULL, NULL, "MOUNT3 UMNTALL",
	     rpc_mount3_umntall_async(r->rpc, call_cb, &c_));
}

int e2e_mnt3_export(struct e2e_rpc *r, exports *list)
{
	CALL(r, list, copy_export, "MOUNT3 EXPORT",
	     rpc_mount3_export_async(r->rpc, call_cb, &c_));
}

struct many {
	int inflight;
	int completed;
	int failed;
	char first[256];
};

static void many_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct many *m = priv;

	(void)rpc;
	m->inflight--;
	m->completed++;
	if (status != RPC_STATUS_SUCCESS) {
		if (!m->failed++)
			snprintf(m->first, sizeof(m->first),
				 "RPC status %d: %s", status,
				 data ? (const char *)data : "");
	} else if (((CREATE3res *)data)->status != NFS3_OK) {
		if (!m->failed++)
			snprintf(m->first, sizeof(m->first), "CREATE: %s",
				 e2e_nfsstat(((CREATE3res *)data)->status));
	}
}

int e2e_create_many(struct e2e_rpc *r, const nfs_fh3 *dir, const char *prefix,
		    int n, int window)
{
	struct many m = { 0 };
	uint64_t last = e2e_now_ms();
	int next = 0;

	while (next < n || m.inflight > 0) {
		struct pollfd pfd;
		int rc, before = m.completed;

		while (next < n && m.inflight < window && !r->broken) {
			char name[256];
			CREATE3args a = { .where = { .dir = fh_arg(dir),
						     .name = name } };

			snprintf(name, sizeof(name), "%s%05d", prefix, next);
			a.how.mode = UNCHECKED;
			a.how.createhow3_u.obj_attributes =
				e2e_sattr_mode(0644);
			if (rpc_nfs3_create_async(r->rpc, many_cb, &a, &m)) {
				say("create_many: queue: %s",
				    rpc_get_error(r->rpc));
				r->broken = 1;
				break;
			}
			m.inflight++;
			next++;
		}
		if (r->broken && m.inflight == 0)
			break;
		pfd.fd = rpc_get_fd(r->rpc);
		pfd.events = (short)rpc_which_events(r->rpc);
		pfd.revents = 0;
		rc = poll(&pfd, 1, 100);
		if (rc < 0 && errno != EINTR)
			break;
		if (rpc_service(r->rpc, rc > 0 ? pfd.revents : 0) < 0) {
			say("create_many: connection failed: %s",
			    rpc_get_error(r->rpc));
			r->broken = 1;
			rpc_disconnect(r->rpc, "e2e: service failed");
			break;
		}
		if (m.completed != before)
			last = e2e_now_ms();
		if (e2e_now_ms() - last > CALL_TIMEOUT_MS) {
			say("create_many: no progress for %d ms",
			    CALL_TIMEOUT_MS);
			r->broken = 1;
			rpc_disconnect(r->rpc, "e2e timeout");
			break;
		}
	}
	if (m.failed || next < n || m.inflight) {
		say("create_many: %d of %d failed (first: %s), %d not sent",
		    m.failed, n, m.first[0] ? m.first : "-", n - next);
		return -1;
	}
	return 0;
}

int e2e_root_fh(struct e2e_rpc *r, const struct e2e_gw *gw, nfs_fh3 *root)
{
	struct e2e_rpc *m =
		e2e_rpc_open(gw->mount_port, MOUNT_PROGRAM, MOUNT_V3);
	mountres3 res;
	int rc = -1;

	if (!m)
		return -1;
	if (e2e_mnt3_mnt(m, E2E_EXPORT, &res) != 0) {
		say("MNT %s: %s", E2E_EXPORT, e2e_rpc_error(m));
	} else if (res.fhs_status != MNT3_OK) {
		say("MNT %s: %s, want MNT3_OK", E2E_EXPORT,
		    e2e_mntstat(res.fhs_status));
	} else {
		root->data.data_len =
			res.mountres3_u.mountinfo.fhandle.fhandle3_len;
		root->data.data_val = ar_dup(
			r, res.mountres3_u.mountinfo.fhandle.fhandle3_val,
			root->data.data_len);
		rc = 0;
	}
	e2e_rpc_close(m);
	return rc;
}

const char *e2e_nfsstat(int st)
{
	static __thread char other[32];

	switch (st) {
	case NFS3_OK:
		return "NFS3_OK";
	case NFS3ERR_PERM:
		return "NFS3ERR_PERM";
	case NFS3ERR_NOENT:
		return "NFS3ERR_NOENT";
	case NFS3ERR_IO:
		return "NFS3ERR_IO";
	case NFS3ERR_NXIO:
		return "NFS3ERR_NXIO";
	case NFS3ERR_ACCES:
		return "NFS3ERR_ACCES";
	case NFS3ERR_EXIST:
		return "NFS3ERR_EXIST";
	case NFS3ERR_XDEV:
		return "NFS3ERR_XDEV";
	case NFS3ERR_NODEV:
		return "NFS3ERR_NODEV";
	case NFS3ERR_NOTDIR:
		return "NFS3ERR_NOTDIR";
	case NFS3ERR_ISDIR:
		return "NFS3ERR_ISDIR";
	case NFS3ERR_INVAL:
		return "NFS3ERR_INVAL";
	case NFS3ERR_FBIG:
		return "NFS3ERR_FBIG";
	case NFS3ERR_NOSPC:
		return "NFS3ERR_NOSPC";
	case NFS3ERR_ROFS:
		return "NFS3ERR_ROFS";
	case NFS3ERR_MLINK:
		return "NFS3ERR_MLINK";
	case NFS3ERR_NAMETOOLONG:
		return "NFS3ERR_NAMETOOLONG";
	case NFS3ERR_NOTEMPTY:
		return "NFS3ERR_NOTEMPTY";
	case NFS3ERR_DQUOT:
		return "NFS3ERR_DQUOT";
	case NFS3ERR_STALE:
		return "NFS3ERR_STALE";
	case NFS3ERR_REMOTE:
		return "NFS3ERR_REMOTE";
	case NFS3ERR_BADHANDLE:
		return "NFS3ERR_BADHANDLE";
	case NFS3ERR_NOT_SYNC:
		return "NFS3ERR_NOT_SYNC";
	case NFS3ERR_BAD_COOKIE:
		return "NFS3ERR_BAD_COOKIE";
	case NFS3ERR_NOTSUPP:
		return "NFS3ERR_NOTSUPP";
	case NFS3ERR_TOOSMALL:
		return "NFS3ERR_TOOSMALL";
	case NFS3ERR_SERVERFAULT:
		return "NFS3ERR_SERVERFAULT";
	case NFS3ERR_BADTYPE:
		return "NFS3ERR_BADTYPE";
	case NFS3ERR_JUKEBOX:
		return "NFS3ERR_JUKEBOX";
	}
	snprintf(other, sizeof(other), "nfsstat3 %d", st);
	return other;
}

const char *e2e_mntstat(int st)
{
	static __thread char other[32];

	switch (st) {
	case MNT3_OK:
		return "MNT3_OK";
	case MNT3ERR_PERM:
		return "MNT3ERR_PERM";
	case MNT3ERR_NOENT:
		return "MNT3ERR_NOENT";
	case MNT3ERR_IO:
		return "MNT3ERR_IO";
	case MNT3ERR_ACCES:
		return "MNT3ERR_ACCES";
	case MNT3ERR_NOTDIR:
		return "MNT3ERR_NOTDIR";
	case MNT3ERR_INVAL:
		return "MNT3ERR_INVAL";
	case MNT3ERR_NAMETOOLONG:
		return "MNT3ERR_NAMETOOLONG";
	case MNT3ERR_NOTSUPP:
		return "MNT3ERR_NOTSUPP";
	case MNT3ERR_SERVERFAULT:
		return "MNT3ERR_SERVERFAULT";
	}
	snprintf(other, sizeof(other), "mountstat3 %d", st);
	return other;
}

/* ------------------------------------------------------------------ */
/* SHA-256 (FIPS 180-4)                                                */

static const uint32_t K256[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror32(uint32_t x, int n)
{
	return (x >> n) | (x << (32 - n));
}

static void sha256_block(struct e2e_sha256 *s, const uint8_t *p)
{
	uint32_t w[64], a, b, c, d, e, f, g, h;
	int i;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (i = 16; i < 64; i++) {
		uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^
			      (w[i - 15] >> 3);
		uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^
			      (w[i - 2] >> 10);

		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3];
	e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
	for (i = 0; i < 64; i++) {
		uint32_t S1 = ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25);
		uint32_t ch = (e & f) ^ (~e & g);
		uint32_t t1 = h + S1 + ch + K256[i] + w[i];
		uint32_t S0 = ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22);
		uint32_t mj = (a & b) ^ (a & c) ^ (b & c);
		uint32_t t2 = S0 + mj;

		h = g, g = f, f = e, e = d + t1;
		d = c, c = b, b = a, a = t1 + t2;
	}
	s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d;
	s->h[4] += e, s->h[5] += f, s->h[6] += g, s->h[7] += h;
}

void e2e_sha256_init(struct e2e_sha256 *s)
{
	static const uint32_t iv[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	};

	memcpy(s->h, iv, sizeof(iv));
	s->len = 0;
	s->fill = 0;
}

void e2e_sha256_update(struct e2e_sha256 *s, const void *data, size_t len)
{
	const uint8_t *p = data;

	s->len += len;
	if (s->fill) {
		size_t n = 64 - s->fill < len ? 64 - s->fill : len;

		memcpy(s->buf + s->fill, p, n);
		s->fill += n;
		p += n;
		len -= n;
		if (s->fill < 64)
			return;
		sha256_block(s, s->buf);
		s->fill = 0;
	}
	while (len >= 64) {
		sha256_block(s, p);
		p += 64;
		len -= 64;
	}
	memcpy(s->buf, p, len);
	s->fill = len;
}

void e2e_sha256_final(struct e2e_sha256 *s, uint8_t out[32])
{
	uint64_t bits = s->len * 8;
	uint8_t pad[72] = { 0x80 };
	size_t padlen = (s->fill < 56 ? 56 : 120) - s->fill;
	int i;

	for (i = 0; i < 8; i++)
		pad[padlen + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
	e2e_sha256_update(s, pad, padlen + 8);
	for (i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(s->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)s->h[i];
	}
}

void e2e_digest_hex(const uint8_t d[32], char hex[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

void e2e_sha256_hex(const void *data, size_t len, char hex[65])
{
	struct e2e_sha256 s;
	uint8_t d[32];

	e2e_sha256_init(&s);
	e2e_sha256_update(&s, data, len);
	e2e_sha256_final(&s, d);
	e2e_digest_hex(d, hex);
}

uint64_t e2e_rand(uint64_t *state)
{
	uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dull;
}

void e2e_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	uint64_t st = seed * 0x9e3779b97f4a7c15ull + 1;

	while (len >= 8) {
		uint64_t v = e2e_rand(&st);

		memcpy(p, &v, 8);
		p += 8;
		len -= 8;
	}
	if (len) {
		uint64_t v = e2e_rand(&st);

		memcpy(p, &v, len);
	}
}

int e2e_run_cunit(void)
{
	unsigned fails;

	if (CU_get_error() != CUE_SUCCESS) {
		fprintf(stderr, "CUnit setup: %s\n", CU_get_error_msg());
		CU_cleanup_registry();
		return 1;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	if (getenv("E2E_ONLY")) {
		/* A developer's run of the tests whose names hold this. */
		for (CU_pSuite su = CU_get_registry()->pSuite; su;
		     su = su->pNext)
			for (CU_pTest t = su->pTest; t; t = t->pNext)
				if (strstr(t->pName, getenv("E2E_ONLY")))
					CU_basic_run_test(su, t);
	} else {
		CU_basic_run_tests();
	}
	fails = CU_get_number_of_failures() + CU_get_number_of_suites_failed() +
		CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}

int e2e_ctl(const struct e2e_gw *gw, const char *cmd, char *buf, size_t cap)
{
	char line[E2E_PATH_MAX * 2 + 64];
	size_t n;
	FILE *p;

	snprintf(line, sizeof(line), "'%s' ctl --state '%s' %s 2>&1",
		 getenv("MAPFS_GW"), gw->state, cmd);
	p = popen(line, "r");
	if (!p)
		return -1;
	n = fread(buf, 1, cap - 1, p);
	buf[n] = '\0';
	return pclose(p) == 0 ? 0 : -1;
}

static int store_files;

static int count_file(const char *p, const struct stat *sb, int type,
		      struct FTW *ftw)
{
	(void)p;
	(void)sb;
	(void)ftw;
	store_files += type == FTW_F;
	return 0;
}

int e2e_s3_list(const struct e2e_gw *gw, const char *path,
		struct e2e_s3_resp *resp)
{
	char q[1200], key[1024], *p;

	e2e_s3_key(gw, path, key, sizeof(key));
	/* Canonical: everything but the unreserved characters encoded. */
	p = q + snprintf(q, sizeof(q), "list-type=2&prefix=");
	for (const char *c = key; *c && p < q + sizeof(q) - 4; c++)
		p += strchr("-_.~", *c) || (*c >= '0' && *c <= '9') ||
				     (*c >= 'a' && *c <= 'z') ||
				     (*c >= 'A' && *c <= 'Z')
			     ? sprintf(p, "%c", *c)
			     : sprintf(p, "%%%02X", (unsigned char)*c);
	return e2e_s3_request("GET", NULL, q, NULL, 0, NULL, resp);
}

int e2e_store_count(const struct e2e_gw *gw, const char *path)
{
	struct e2e_s3_resp r;
	char *p;
	int n = 0;

	if (!e2e_backend_is_s3()) {
		char q[1200];
		struct stat sb;

		snprintf(q, sizeof(q), "%s/%s", gw->store, path);
		if (stat(q, &sb))
			return errno == ENOENT ? 0 : -1;
		store_files = 0;
		if (nftw(q, count_file, 16, FTW_PHYS))
			return -1;
		return store_files;
	}
	if (e2e_s3_list(gw, path, &r))
		return -1;
	if (r.code != 200) {
		e2e_s3_resp_free(&r);
		return -1;
	}
	for (p = r.body; (p = strstr(p, "<Key>")); p += 5) {
		char *e = strstr(p, "</Key>");

		n += e && e[-1] != '/';
	}
	e2e_s3_resp_free(&r);
	return n;
}
