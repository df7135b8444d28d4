/*
 * Unit tests for nfsd/exports.c: the exports(5) parser, client matching
 * (first rule in line order, CIDR edges for IPv4 and IPv6), squashing,
 * MNT's choice of export, and the swap of a published table.
 */
#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "nfsd/exports.h"

static char err[512];

/* Parse text with base /mapfs; the error (if any) lands in err. */
static int parse(const char *text, struct exports **t)
{
	err[0] = '\0';
	return exports_parse(text, strlen(text), "exports", "/mapfs", t, err,
			     sizeof(err));
}

/* An address with a port, IPv4 or IPv6 by its spelling. */
static struct sockaddr_storage peer(const char *addr, uint16_t port)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(addr, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		CU_ASSERT_FATAL(inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		CU_ASSERT_FATAL(inet_pton(AF_INET, addr, &s4->sin_addr) == 1);
	}
	return ss;
}

/* The spec of the rule of entry 0 that admits addr, or "-" for none. */
static const char *who(const struct exports *t, const char *addr)
{
	struct sockaddr_storage ss = peer(addr, 700);
	const struct exports_rule *r = exports_match(&t->entries[0], &ss);

	return r ? r->spec : "-";
}

static void test_example_line(void)
{
	struct exports *t;
	const struct exports_rule *r;

	CU_ASSERT_FATAL(parse("/mapfs 10.0.0.0/8(rw,root_squash) "
			      "192.168.1.5(ro) "
			      "*(ro,all_squash,anonuid=1000,anongid=1000)\n",
			      &t) == 0);
	CU_ASSERT_EQUAL_FATAL(t->n, 1);
	CU_ASSERT_STRING_EQUAL(t->entries[0].path, "/mapfs");
	CU_ASSERT_STRING_EQUAL(t->entries[0].below, "");
	CU_ASSERT_EQUAL_FATAL(t->entries[0].nrules, 3);
	r = t->entries[0].rules;
	CU_ASSERT_STRING_EQUAL(r[0].spec, "10.0.0.0/8");
	CU_ASSERT_EQUAL(r[0].flags,
			EXPORTS_RW | EXPORTS_ROOT_SQUASH | EXPORTS_SECURE);
	CU_ASSERT_EQUAL(r[0].anonuid, 65534);
	CU_ASSERT_STRING_EQUAL(r[1].spec, "192.168.1.5");
	CU_ASSERT_EQUAL(r[1].flags, EXPORTS_ROOT_SQUASH | EXPORTS_SECURE);
	CU_ASSERT(r[2].any);
	CU_ASSERT_EQUAL(r[2].flags, EXPORTS_ROOT_SQUASH | EXPORTS_ALL_SQUASH |
					    EXPORTS_SECURE);
	CU_ASSERT_EQUAL(r[2].anonuid, 1000);
	CU_ASSERT_EQUAL(r[2].anongid, 1000);
	CU_ASSERT_STRING_EQUAL(who(t, "10.200.3.4"), "10.0.0.0/8");
	CU_ASSERT_STRING_EQUAL(who(t, "192.168.1.5"), "192.168.1.5");
	CU_ASSERT_STRING_EQUAL(who(t, "192.168.1.6"), "*");
	exports_free(t);
}

static void test_options(void)
{
	struct exports *t;
	const struct exports_rule *r;

	/* Later options win; ignored knfsd options are accepted. */
	CU_ASSERT_FATAL(parse("/mapfs a1::1(rw,ro,no_root_squash,insecure,"
			      "secure,sync,no_subtree_check) "
			      "1.2.3.4(rw,insecure,all_squash,no_all_squash,"
			      "anonuid=0,anongid=4294967295)\n",
			      &t) == 0);
	r = t->entries[0].rules;
	CU_ASSERT_EQUAL(r[0].flags, EXPORTS_SECURE);
	CU_ASSERT_EQUAL(r[1].flags, EXPORTS_RW | EXPORTS_ROOT_SQUASH);
	CU_ASSERT_EQUAL(r[1].anonuid, 0);
	CU_ASSERT_EQUAL(r[1].anongid, 4294967295u);
	exports_free(t);

	/* "-opts" defaults for the rest of the line; a bare client. */
	CU_ASSERT_FATAL(
		parse("/mapfs -rw,insecure 1.1.1.1 2.2.2.2(ro)\n", &t) == 0);
	r = t->entries[0].rules;
	CU_ASSERT_EQUAL(r[0].flags, EXPORTS_RW | EXPORTS_ROOT_SQUASH);
	CU_ASSERT_EQUAL(r[1].flags, EXPORTS_ROOT_SQUASH);
	exports_free(t);

	/* async is knfsd's (it was accepted and ignored before issue 47);
	 * sync, the default, takes it back. */
	CU_ASSERT_FATAL(parse("/mapfs 1.1.1.1(rw,async) 2.2.2.2(async,sync) "
			      "3.3.3.3(rw)\n",
			      &t) == 0);
	r = t->entries[0].rules;
	CU_ASSERT(r[0].flags & EXPORTS_ASYNC);
	CU_ASSERT(!(r[1].flags & EXPORTS_ASYNC));
	CU_ASSERT(!(r[2].flags & EXPORTS_ASYNC));
	exports_free(t);
}

static void test_syntax(void)
{
	struct exports *t;

	/* Comments, blank lines, continuations, quotes, subdirectories. */
	CU_ASSERT_FATAL(parse("# the table\n"
			      "\n"
			      "   /mapfs *(ro) # trailing comment\n"
			      "\"/mapfs/my dir\" \\\n"
			      "   1.2.3.4(rw)\\\n"
			      "   5.6.7.8\n"
			      "/mapfs//projects/a/ *(rw)",
			      &t) == 0);
	CU_ASSERT_EQUAL_FATAL(t->n, 3);
	CU_ASSERT_STRING_EQUAL(t->entries[1].path, "/mapfs/my dir");
	CU_ASSERT_STRING_EQUAL(t->entries[1].below, "my dir");
	CU_ASSERT_EQUAL(t->entries[1].line, 4);
	CU_ASSERT_EQUAL(t->entries[1].nrules, 2);
	CU_ASSERT_STRING_EQUAL(t->entries[2].path, "/mapfs/projects/a");
	CU_ASSERT_STRING_EQUAL(t->entries[2].below, "projects/a");
	CU_ASSERT_EQUAL(t->entries[2].line, 7);
	exports_free(t);

	/* Nothing exported is a valid (closed) table. */
	CU_ASSERT_FATAL(parse("# nothing\n", &t) == 0);
	CU_ASSERT_EQUAL(t->n, 0);
	exports_free(t);
}

/* Each bad input fails with -EINVAL and names its file and line. */
static void test_errors(void)
{
	static const struct {
		const char *text, *msg;
	} bad[] = {
		{ "/mapfs *(rw)\n/mapfs/x *(bogus)\n",
		  "exports:2: unknown option 'bogus'" },
		{ "\n\n/mapfs 1.2.3.4 (rw)\n",
		  "exports:3: options '(rw)' without a client" },
		{ "/mapfs\n", "exports:1: /mapfs has no clients" },
		{ "/other *(rw)\n", "exports:1: '/other' is not at or below" },
		{ "/mapfsx *(rw)\n",
		  "exports:1: '/mapfsx' is not at or below" },
		{ "mapfs *(rw)\n",
		  "exports:1: 'mapfs' is not an absolute path" },
		{ "/mapfs/../etc *(rw)\n",
		  "exports:1: '/mapfs/../etc': no '.'" },
		{ "/mapfs/a *(rw)\n/mapfs/a/ 1.2.3.4\n",
		  "exports:2: /mapfs/a is exported again (first on line 1)" },
		{ "/mapfs 10.0.0.0/33\n", "exports:1: prefix /33 too long" },
		{ "/mapfs ::/129\n", "exports:1: prefix /129 too long" },
		{ "/mapfs 10.0.0.0/255.0.255.0\n",
		  "exports:1: bad prefix or netmask" },
		{ "/mapfs 10.0.0.300/8\n", "exports:1: bad network address" },
		{ "/mapfs *(rw,)\n", "exports:1: option list ends in ','" },
		{ "/mapfs *(rw\n", "exports:1: missing ')'" },
		{ "/mapfs *(anonuid=-1)\n", "exports:1: bad anonuid '-1'" },
		{ "/mapfs *(anongid=4294967296)\n", "exports:1: bad anongid" },
		{ "/mapfs *.example.com(rw)\n",
		  "exports:1: '*.example.com': wildcards" },
		{ "/mapfs @trusted(rw)\n", "exports:1: '@trusted': wildcards" },
		{ "/mapfs *(rw) -ro\n",
		  "exports:1: default options '-ro' after a client" },
		{ "\"/mapfs *(rw)\n", "exports:1: unterminated quote" },
		{ "/mapfs \\\n  \\\n  *(rw,subtree_check)\n",
		  "exports:3: unknown option 'subtree_check'" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct exports *t = NULL;
		int rc = parse(bad[i].text, &t);

		CU_ASSERT_EQUAL(rc, -EINVAL);
		if (strncmp(err, bad[i].msg, strlen(bad[i].msg))) {
			fprintf(stderr,
				"\n  case %zu: got '%s', want '%s...'\n", i,
				err, bad[i].msg);
			CU_FAIL("error message");
		}
		if (rc == 0)
			exports_free(t);
	}
}

static void test_cidr_v4(void)
{
	struct exports *t;

	/* Host bits past the prefix are ignored, as knfsd does. */
	CU_ASSERT_FATAL(parse("/mapfs 10.1.2.3/8 192.168.4.0/255.255.254.0 "
			      "172.16.0.0/12 1.2.3.4/32 9.9.9.9/0\n",
			      &t) == 0);
	CU_ASSERT_STRING_EQUAL(who(t, "10.0.0.0"), "10.1.2.3/8");
	CU_ASSERT_STRING_EQUAL(who(t, "10.255.255.255"), "10.1.2.3/8");
	CU_ASSERT_STRING_EQUAL(who(t, "192.168.4.1"),
			       "192.168.4.0/255.255.254.0");
	CU_ASSERT_STRING_EQUAL(who(t, "192.168.5.255"),
			       "192.168.4.0/255.255.254.0");
	CU_ASSERT_STRING_EQUAL(who(t, "172.31.255.255"), "172.16.0.0/12");
	CU_ASSERT_STRING_EQUAL(who(t, "1.2.3.4"), "1.2.3.4/32");
	/* /0 takes every IPv4 address, and no IPv6 one. */
	CU_ASSERT_STRING_EQUAL(who(t, "172.32.0.0"), "9.9.9.9/0");
	CU_ASSERT_STRING_EQUAL(who(t, "1.2.3.5"), "9.9.9.9/0");
	CU_ASSERT_STRING_EQUAL(who(t, "2001:db8::1"), "-");
	exports_free(t);

	CU_ASSERT_FATAL(parse("/mapfs 192.168.4.0/23 172.16.0.0/12\n", &t) ==
			0);
	CU_ASSERT_STRING_EQUAL(who(t, "192.168.6.0"), "-");
	CU_ASSERT_STRING_EQUAL(who(t, "192.168.3.255"), "-");
	CU_ASSERT_STRING_EQUAL(who(t, "172.15.255.255"), "-");
	CU_ASSERT_STRING_EQUAL(who(t, "172.32.0.0"), "-");
	/* An IPv4-mapped IPv6 peer is its IPv4 address. */
	CU_ASSERT_STRING_EQUAL(who(t, "::ffff:192.168.5.1"), "192.168.4.0/23");
	exports_free(t);
}

static void test_cidr_v6(void)
{
	struct exports *t;

	CU_ASSERT_FATAL(parse("/mapfs fd00::/8 2001:db8:0:ff80::/57 ::1 "
			      "2001:db8::/32(rw)\n",
			      &t) == 0);
	CU_ASSERT_STRING_EQUAL(who(t, "fdff:ffff::1"), "fd00::/8");
	CU_ASSERT_STRING_EQUAL(who(t, "fe00::1"), "-");
	CU_ASSERT_STRING_EQUAL(who(t, "2001:db8:0:ff80::1"),
			       "2001:db8:0:ff80::/57");
	CU_ASSERT_STRING_EQUAL(who(t, "2001:db8:0:ffff:ffff::"),
			       "2001:db8:0:ff80::/57");
	/* One bit off at the 57th: the next, wider rule takes it. */
	CU_ASSERT_STRING_EQUAL(who(t, "2001:db8:0:ff00::1"), "2001:db8::/32");
	CU_ASSERT_STRING_EQUAL(who(t, "::1"), "::1");
	CU_ASSERT_STRING_EQUAL(who(t, "::2"), "-");
	CU_ASSERT_STRING_EQUAL(who(t, "2001:db9::"), "-");
	CU_ASSERT_STRING_EQUAL(who(t, "127.0.0.1"), "-");
	exports_free(t);
}

static void test_first_match(void)
{
	struct exports *t;
	struct sockaddr_storage ss = peer("10.1.1.1", 700);

	/* exports(5): the first client that matches decides, not the best. */
	CU_ASSERT_FATAL(
		parse("/mapfs 10.0.0.0/8(ro) 10.1.1.1(rw) *(rw)\n", &t) == 0);
	CU_ASSERT_STRING_EQUAL(who(t, "10.1.1.1"), "10.0.0.0/8");
	CU_ASSERT(!(exports_match(&t->entries[0], &ss)->flags & EXPORTS_RW));
	CU_ASSERT_STRING_EQUAL(who(t, "11.1.1.1"), "*");
	exports_free(t);
}

static void test_hostname(void)
{
	struct exports *t;

	CU_ASSERT_FATAL(parse("/mapfs localhost(rw)\n", &t) == 0);
	CU_ASSERT_STRING_EQUAL(who(t, "127.0.0.1"), "localhost");
	CU_ASSERT_STRING_EQUAL(who(t, "127.0.0.2"), "-");
	exports_free(t);
	CU_ASSERT(parse("/mapfs no-such-host.invalid(rw)\n", &t) == -EINVAL);
	CU_ASSERT(strstr(err, "exports:1: cannot resolve host "
			      "'no-such-host.invalid'") == err);
}

static void test_secure_port(void)
{
	struct exports *t;
	struct sockaddr_storage low = peer("1.2.3.4", 1023);
	struct sockaddr_storage high = peer("1.2.3.4", 1024);
	struct sockaddr_storage high6 = peer("::1", 40000);

	CU_ASSERT_FATAL(parse("/mapfs 1.2.3.4 ::1(insecure)\n", &t) == 0);
	CU_ASSERT(exports_port_ok(&t->entries[0].rules[0], &low));
	CU_ASSERT(!exports_port_ok(&t->entries[0].rules[0], &high));
	CU_ASSERT(exports_port_ok(&t->entries[0].rules[1], &high6));
	exports_free(t);
}

static void test_squash(void)
{
	struct exports_rule r = { .flags = EXPORTS_ROOT_SQUASH,
				  .anonuid = 1000,
				  .anongid = 2000 };
	struct rpc_cred c = { .flavor = AUTH_SYS,
			      .uid = 0,
			      .gid = 0,
			      .ngids = 3,
			      .gids = { 5, 0, 7 } };
	struct fs_ctx ctx;

	memset(&ctx, 0, sizeof(ctx));
	exports_squash(&r, &c, &ctx);
	CU_ASSERT(ctx.uid == 1000 && ctx.gid == 2000);
	CU_ASSERT(ctx.ngids == 3 && ctx.gids[0] == 5 && ctx.gids[1] == 2000 &&
		  ctx.gids[2] == 7);
	/* root_squash maps uid 0 and gid 0 each on its own. */
	c.uid = 42;
	exports_squash(&r, &c, &ctx);
	CU_ASSERT(ctx.uid == 42 && ctx.gid == 2000);
	c.uid = 0;
	c.gid = 9;
	exports_squash(&r, &c, &ctx);
	CU_ASSERT(ctx.uid == 1000 && ctx.gid == 9);
	/* no_root_squash: root stays root. */
	r.flags = 0;
	exports_squash(&r, &c, &ctx);
	CU_ASSERT(ctx.uid == 0 && ctx.gid == 9 && ctx.gids[1] == 0);
	/* all_squash: everyone is anonymous, without groups. */
	r.flags = EXPORTS_ALL_SQUASH;
	c.uid = 1234;
	exports_squash(&r, &c, &ctx);
	CU_ASSERT(ctx.uid == 1000 && ctx.gid == 2000 && ctx.ngids == 0);
	/* AUTH_NONE is anonymous too, even with no squashing at all. */
	r.flags = 0;
	c.flavor = AUTH_NONE;
	exports_squash(&r, &c, &ctx);
	CU_ASSERT(ctx.uid == 1000 && ctx.gid == 2000 && ctx.ngids == 0);
	/* More groups than fs/ keeps are cut, never overflow. */
	c.flavor = AUTH_SYS;
	c.ngids = RPC_MAX_GIDS;
	exports_squash(&r, &c, &ctx);
	CU_ASSERT(ctx.ngids ==
		  (RPC_MAX_GIDS < FS_MAX_GIDS ? RPC_MAX_GIDS : FS_MAX_GIDS));
}

static void test_mount_find(void)
{
	struct exports *t;
	struct exports_entry *e;
	const struct exports_rule *r;
	struct sockaddr_storage a = peer("10.0.0.1", 700);
	struct sockaddr_storage b = peer("10.0.0.2", 700);
	struct sockaddr_storage c = peer("10.0.0.3", 700);

	CU_ASSERT_FATAL(parse("/mapfs 10.0.0.1(rw) 10.0.0.2(ro)\n"
			      "/mapfs/p/a 10.0.0.1(ro)\n"
			      "/mapfs/q 10.0.0.3\n",
			      &t) == 0);
	/* The deepest export that admits the client. */
	CU_ASSERT(exports_mount_find(t, "/mapfs/p/a/x", &a, &e, &r) == 0);
	CU_ASSERT_STRING_EQUAL(e->path, "/mapfs/p/a");
	CU_ASSERT(exports_mount_find(t, "/mapfs/p/a", &a, &e, &r) == 0);
	CU_ASSERT_STRING_EQUAL(e->path, "/mapfs/p/a");
	/* Refused there, b mounts through the parent. */
	CU_ASSERT(exports_mount_find(t, "/mapfs/p/a/x", &b, &e, &r) == 0);
	CU_ASSERT_STRING_EQUAL(e->path, "/mapfs");
	CU_ASSERT_STRING_EQUAL(r->spec, "10.0.0.2");
	/* "/mapfs/p/ab" is not inside "/mapfs/p/a". */
	CU_ASSERT(exports_mount_find(t, "/mapfs/p/ab", &a, &e, &r) == 0);
	CU_ASSERT_STRING_EQUAL(e->path, "/mapfs");
	/* c is admitted only on /mapfs/q. */
	CU_ASSERT(exports_mount_find(t, "/mapfs/p", &c, &e, &r) == -EACCES);
	CU_ASSERT(exports_mount_find(t, "/mapfs/q/z", &c, &e, &r) == 0);
	CU_ASSERT(exports_mount_find(t, "/elsewhere", &a, &e, &r) == -ENOENT);
	CU_ASSERT(exports_mount_find(t, "/", &a, &e, &r) == -ENOENT);
	exports_free(t);
}

static void test_ids(void)
{
	struct handle_key k1 = { { 1 } }, k2 = { { 2 } };
	struct exports *t, *u;

	CU_ASSERT_FATAL(parse("/mapfs *\n/mapfs/a *\n", &t) == 0);
	CU_ASSERT_FATAL(parse("/mapfs/a *\n/mapfs *\n", &u) == 0);
	CU_ASSERT(exports_set_ids(t, &k1, err, sizeof(err)) == 0);
	CU_ASSERT(exports_set_ids(u, &k1, err, sizeof(err)) == 0);
	/* Ids follow the path, not the line: a reload keeps handles. */
	CU_ASSERT(t->entries[0].id == u->entries[1].id);
	CU_ASSERT(t->entries[1].id == u->entries[0].id);
	CU_ASSERT(t->entries[0].id != t->entries[1].id);
	CU_ASSERT(exports_find_id(t, t->entries[1].id) == &t->entries[1]);
	/* The same as the id the single-export gateway gave /mapfs. */
	CU_ASSERT(t->entries[0].id ==
		  (uint32_t)handle_siphash(k1.k, "/mapfs", 6));
	CU_ASSERT(exports_set_ids(u, &k2, err, sizeof(err)) == 0);
	CU_ASSERT(u->entries[1].id != t->entries[0].id);
	exports_free(t);
	exports_free(u);
}

/* No exports file: this host only (127.0.0.1 and ::1), rw, insecure. */
static void test_localhost(void)
{
	struct sockaddr_storage far = peer("203.0.113.9", 40000);
	struct sockaddr_storage other = peer("127.0.0.2", 40000);
	struct sockaddr_storage lo = peer("127.0.0.1", 40000);
	struct sockaddr_storage lo6 = peer("::1", 40000);
	const struct exports_rule *r;
	struct exports *t;

	CU_ASSERT_FATAL(exports_localhost("/mapfs/", &t) == 0);
	CU_ASSERT_EQUAL_FATAL(t->n, 1);
	CU_ASSERT_STRING_EQUAL(t->entries[0].path, "/mapfs");
	CU_ASSERT_STRING_EQUAL(t->entries[0].below, "");
	CU_ASSERT(exports_match(&t->entries[0], &far) == NULL);
	CU_ASSERT(exports_match(&t->entries[0], &other) == NULL);
	r = exports_match(&t->entries[0], &lo);
	CU_ASSERT_FATAL(r != NULL);
	CU_ASSERT_EQUAL(r->flags, EXPORTS_RW);
	CU_ASSERT(exports_port_ok(r, &lo));
	r = exports_match(&t->entries[0], &lo6);
	CU_ASSERT_FATAL(r != NULL);
	CU_ASSERT_EQUAL(r->flags, EXPORTS_RW);
	exports_free(t);
}

/* Readers on two "loops" pin and check while the table is swapped. */
struct reader {
	struct exports_pub *p;
	int slot;
	atomic_bool *stop;
	atomic_ulong reads;
	unsigned long bad;
};

static void *reader_run(void *arg)
{
	struct reader *rd = arg;

	while (!atomic_load(rd->stop)) {
		struct exports *t = exports_pin(rd->p, rd->slot);

		/* A freed table would show a wrong base (or crash ASan). */
		if (!t || strcmp(t->base, "/mapfs") || t->n != 1 ||
		    strncmp(t->entries[0].path, "/mapfs", 6))
			rd->bad++;
		exports_unpin(rd->p, rd->slot);
		atomic_fetch_add(&rd->reads, 1);
	}
	return NULL;
}

static void test_publish(void)
{
	struct exports_pub p;
	struct exports *t;
	atomic_bool stop = false;
	struct reader rd[2];
	pthread_t th[2];

	CU_ASSERT_FATAL(exports_pub_init(&p, 2) == 0);
	CU_ASSERT(exports_pin(&p, 0) == NULL);
	exports_unpin(&p, 0);
	CU_ASSERT(exports_pin(&p, 2) == NULL); /* no such loop */
	CU_ASSERT_FATAL(parse("/mapfs *\n", &t) == 0);
	exports_publish(&p, t);
	CU_ASSERT(exports_pin(&p, 1) == t);
	exports_unpin(&p, 1);
	for (int i = 0; i < 2; i++) {
		rd[i].p = &p;
		rd[i].slot = i;
		rd[i].stop = &stop;
		atomic_init(&rd[i].reads, 0);
		rd[i].bad = 0;
		CU_ASSERT_FATAL(
			pthread_create(&th[i], NULL, reader_run, &rd[i]) == 0);
	}
	/* Swap only once both read, or the race would not be run. */
	while (!atomic_load(&rd[0].reads) || !atomic_load(&rd[1].reads))
		sched_yield();
	for (int i = 0; i < 2000; i++) {
		CU_ASSERT_FATAL(
			parse(i & 1 ? "/mapfs *(rw)\n" : "/mapfs/x *(ro)\n",
			      &t) == 0);
		exports_publish(&p, t);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		CU_ASSERT_EQUAL(rd[i].bad, 0);
	}
	exports_pub_fini(&p);
}

int main(void)
{
	CU_initialize_registry();
	CU_pSuite s = CU_add_suite("exports", NULL, NULL);
	CU_add_test(s, "the example line of issue 6", test_example_line);
	CU_add_test(s, "every option; -defaults", test_options);
	CU_add_test(s, "comments, quotes, continuations", test_syntax);
	CU_add_test(s, "errors name file and line", test_errors);
	CU_add_test(s, "IPv4 networks and edges", test_cidr_v4);
	CU_add_test(s, "IPv6 networks and edges", test_cidr_v6);
	CU_add_test(s, "first match in line order", test_first_match);
	CU_add_test(s, "host names resolved at load", test_hostname);
	CU_add_test(s, "secure and insecure ports", test_secure_port);
	CU_add_test(s, "root_squash, all_squash, anon ids", test_squash);
	CU_add_test(s, "MNT picks the deepest admitting export",
		    test_mount_find);
	CU_add_test(s, "export ids", test_ids);
	CU_add_test(s, "the table without a file", test_localhost);
	CU_add_test(s, "swapping a table under readers", test_publish);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed =
		CU_get_number_of_failures() + CU_get_number_of_suites_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
