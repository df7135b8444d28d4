/*
 * nfsd/exports.c - the export table: exports(5) parsing, client matching,
 * squashing, and its lock-free publication to the event loops.
 *
 * Syntax (exports(5)): one export per logical line, "\" at the end of a
 * line continues it, "#" starts a comment.  A line is a path (double
 * quotes allowed), optionally "-opts" defaults for the rest of the line,
 * then clients, each "client(opts)" or a bare "client" (defaults).
 * Clients: "*", an IPv4 or IPv6 address, a network as ADDR/LEN (or an
 * IPv4 ADDR/MASK), or a host name resolved now.  Options: rw, ro,
 * root_squash, no_root_squash, all_squash, no_all_squash, anonuid=N,
 * anongid=N, secure, insecure, sync, async (knfsd's: changes, COMMITs
 * and stable WRITEs answered before they are on disk, made durable
 * within --async-window; fs_ctx.async); wdelay, no_wdelay and
 * no_subtree_check are accepted and mean nothing here (there is no
 * subtree check).  Defaults as on Linux: ro, root_squash, secure, sync,
 * anonuid=anongid=65534.
 *
 * Everything else is an error with its line: a gateway should refuse to
 * start rather than export something other than what was written.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exports.h"

#define EXPORTS_FILE_MAX (1u << 20) /* bytes: a table, not a database */
#define EXPORTS_TOKEN_MAX 4096

/* The parse of one file: where we are and what went wrong. */
struct parser {
	const char *p, *end;
	const char *file;
	unsigned line;
	unsigned flags; /* EXPORTS_PARSE_* */
	const char *base;
	struct exports *t;
	char *err;
	size_t errcap;
};

/* Options being collected for one rule. */
struct rule_opts {
	unsigned flags;
	uint32_t anonuid, anongid;
};

static const struct rule_opts opts_default = {
	.flags = EXPORTS_ROOT_SQUASH | EXPORTS_SECURE,
	.anonuid = EXPORTS_ANON_DEFAULT,
	.anongid = EXPORTS_ANON_DEFAULT,
};

static int perr(struct parser *ps, unsigned line, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(ps->err, ps->errcap, "%s:%u: ", ps->file, line);
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < ps->errcap)
		vsnprintf(ps->err + n, ps->errcap - (size_t)n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int exports_path_canon(const char *in, char *out, size_t cap)
{
	size_t len = 0, clen;

	if (in[0] != '/')
		return -ENOENT;
	for (;;) {
		while (*in == '/')
			in++;
		clen = strcspn(in, "/");
		if (!clen)
			break;
		if (clen > FS_NAME_MAX)
			return -ENAMETOOLONG;
		if (clen == 2 && in[0] == '.' && in[1] == '.') {
			while (len && out[--len] != '/')
				;
		} else if (clen != 1 || in[0] != '.') {
			if (len + 1 + clen >= cap)
				return -ENAMETOOLONG;
			out[len++] = '/';
			memcpy(out + len, in, clen);
			len += clen;
		}
		in += clen;
	}
	if (!len)
		out[len++] = '/';
	out[len] = '\0';
	return 0;
}

const char *exports_path_below(const char *p, const char *dir)
{
	size_t dlen = strlen(dir);

	if (dlen == 1) /* "/" */
		return p + 1;
	if (strncmp(p, dir, dlen))
		return NULL;
	if (p[dlen] == '\0')
		return p + dlen;
	return p[dlen] == '/' ? p + dlen + 1 : NULL;
}

/* --- lexing ------------------------------------------------------------ */

/*
 * Skip blanks, comments and continuations within the logical line.
 * Returns false at the end of the logical line (consumed) or the input.
 */
static bool lex_skip(struct parser *ps)
{
	for (;;) {
		if (ps->p >= ps->end)
			return false;
		if (*ps->p == '\\' && ps->p + 1 < ps->end && ps->p[1] == '\n') {
			ps->p += 2;
			ps->line++;
		} else if (*ps->p == '#') {
			while (ps->p < ps->end && *ps->p != '\n')
				ps->p++;
		} else if (*ps->p == '\n') {
			ps->p++;
			ps->line++;
			return false;
		} else if (isspace((unsigned char)*ps->p)) {
			ps->p++;
		} else {
			return true;
		}
	}
}

/*
 * One token into tok[EXPORTS_TOKEN_MAX]: up to a blank, a newline or a
 * comment; double quotes group (and are removed).  Returns 0 or -EINVAL.
 */
static int lex_token(struct parser *ps, char *tok)
{
	size_t n = 0;
	bool quoted = false;

	while (ps->p < ps->end) {
		char c = *ps->p;

		if (c == '\n' && quoted)
			return perr(ps, ps->line, "unterminated quote");
		if (!quoted && (isspace((unsigned char)c) || c == '#'))
			break;
		if (c == '\\' && ps->p + 1 < ps->end && ps->p[1] == '\n')
			break;
		ps->p++;
		if (c == '"') {
			quoted = !quoted;
			continue;
		}
		if (c == '\0')
			return perr(ps, ps->line, "NUL byte");
		if (n + 1 >= EXPORTS_TOKEN_MAX)
			return perr(ps, ps->line, "token too long");
		tok[n++] = c;
	}
	if (quoted)
		return perr(ps, ps->line, "unterminated quote");
	tok[n] = '\0';
	return 0;
}

/* --- options and clients ----------------------------------------------- */

static int parse_u32(const char *s, uint32_t *out)
{
	unsigned long long v;
	char *end;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/* Apply a comma-separated option list (len bytes of s) to o. */
static int parse_opts(struct parser *ps, unsigned line, const char *s,
		      size_t len, struct rule_opts *o)
{
	static const char *const ignored[] = {
		"wdelay",
		"no_wdelay",
		"no_subtree_check",
	};
	char opt[128];

	while (len) {
		size_t olen = 0;

		while (olen < len && s[olen] != ',')
			olen++;
		if (!olen || olen >= sizeof(opt))
			return perr(ps, line, "bad option list '%.*s'",
				    (int)len, s);
		memcpy(opt, s, olen);
		opt[olen] = '\0';
		s += olen;
		len -= olen;
		if (len) { /* the comma */
			s++;
			if (!--len)
				return perr(ps, line,
					    "option list ends in ','");
		}
		if (!strcmp(opt, "async"))
			o->flags |= EXPORTS_ASYNC;
		else if (!strcmp(opt, "sync"))
			o->flags &= ~EXPORTS_ASYNC;
		else if (!strcmp(opt, "rw"))
			o->flags |= EXPORTS_RW;
		else if (!strcmp(opt, "ro"))
			o->flags &= ~EXPORTS_RW;
		else if (!strcmp(opt, "root_squash"))
			o->flags |= EXPORTS_ROOT_SQUASH;
		else if (!strcmp(opt, "no_root_squash"))
			o->flags &= ~EXPORTS_ROOT_SQUASH;
		else if (!strcmp(opt, "all_squash"))
			o->flags |= EXPORTS_ALL_SQUASH;
		else if (!strcmp(opt, "no_all_squash"))
			o->flags &= ~EXPORTS_ALL_SQUASH;
		else if (!strcmp(opt, "secure"))
			o->flags |= EXPORTS_SECURE;
		else if (!strcmp(opt, "insecure"))
			o->flags &= ~EXPORTS_SECURE;
		else if (!strncmp(opt, "anonuid=", 8)) {
			if (parse_u32(opt + 8, &o->anonuid))
				return perr(ps, line, "bad anonuid '%s'",
					    opt + 8);
		} else if (!strncmp(opt, "anongid=", 8)) {
			if (parse_u32(opt + 8, &o->anongid))
				return perr(ps, line, "bad anongid '%s'",
					    opt + 8);
		} else {
			size_t i;

			for (i = 0; i < sizeof(ignored) / sizeof(ignored[0]);
			     i++)
				if (!strcmp(opt, ignored[i]))
					break;
			if (i == sizeof(ignored) / sizeof(ignored[0]))
				return perr(ps, line, "unknown option '%s'",
					    opt);
		}
	}
	return 0;
}

static void net_mask(struct exports_net *n)
{
	unsigned bytes = n->family == AF_INET ? 4 : 16;

	for (unsigned i = 0; i < bytes; i++) {
		unsigned keep = n->prefix > i * 8 ? n->prefix - i * 8 : 0;

		if (keep < 8)
			n->addr[i] &= (uint8_t)(0xff00u >> keep);
	}
}

/* A numeric address into n (full-length prefix); false if not one. */
static bool net_addr(const char *s, struct exports_net *n)
{
	memset(n, 0, sizeof(*n));
	if (inet_pton(AF_INET, s, n->addr) == 1) {
		n->family = AF_INET;
		n->prefix = 32;
		return true;
	}
	if (inet_pton(AF_INET6, s, n->addr) == 1) {
		n->family = AF_INET6;
		n->prefix = 128;
		return true;
	}
	return false;
}

/* The prefix length of a contiguous IPv4 netmask, or -1. */
static int mask_len(const uint8_t m[4])
{
	uint32_t v = (uint32_t)m[0] << 24 | (uint32_t)m[1] << 16 |
		     (uint32_t)m[2] << 8 | m[3];
	int len = 0;

	while (len < 32 && (v & (0x80000000u >> len)))
		len++;
	return (len == 32 || !(v << len)) ? len : -1;
}

/* "ADDR/LEN" or "ADDR/MASK" into one network. */
static int parse_cidr(struct parser *ps, unsigned line, char *spec,
		      struct exports_rule *r)
{
	char *slash = strchr(spec, '/');
	struct exports_net n;
	uint8_t m[4];
	uint32_t len;
	int ml;

	*slash = '\0';
	if (!net_addr(spec, &n)) {
		*slash = '/';
		return perr(ps, line, "bad network address in '%s'", spec);
	}
	*slash = '/';
	if (!parse_u32(slash + 1, &len)) {
		if (len > n.prefix)
			return perr(ps, line, "prefix /%u too long in '%s'",
				    len, spec);
		n.prefix = len;
	} else if (n.family == AF_INET &&
		   inet_pton(AF_INET, slash + 1, m) == 1 &&
		   (ml = mask_len(m)) >= 0) {
		n.prefix = (unsigned)ml;
	} else {
		return perr(ps, line, "bad prefix or netmask in '%s'", spec);
	}
	net_mask(&n);
	r->nets = malloc(sizeof(n));
	if (!r->nets)
		return -ENOMEM;
	r->nets[0] = n;
	r->nnets = 1;
	return 0;
}

/* A host name: every address it resolves to now. */
static int parse_host(struct parser *ps, unsigned line, const char *spec,
		      struct exports_rule *r)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct addrinfo *res, *ai;
	size_t count = 0;
	int rc;

	if (strpbrk(spec, "*?[@"))
		return perr(ps, line,
			    "'%s': wildcards and netgroups are not supported",
			    spec);
	if (ps->flags & EXPORTS_PARSE_NO_RESOLVE)
		return perr(ps, line, "'%s': host names are not resolved here",
			    spec);
	rc = getaddrinfo(spec, NULL, &hints, &res);
	if (rc)
		return perr(ps, line, "cannot resolve host '%s': %s", spec,
			    gai_strerror(rc));
	for (ai = res; ai; ai = ai->ai_next)
		count++;
	r->nets = calloc(count ? count : 1, sizeof(*r->nets));
	if (!r->nets) {
		freeaddrinfo(res);
		return -ENOMEM;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		struct exports_net *n = &r->nets[r->nnets];

		if (ai->ai_family == AF_INET) {
			n->family = AF_INET;
			n->prefix = 32;
			memcpy(n->addr,
			       &((struct sockaddr_in *)ai->ai_addr)->sin_addr,
			       4);
		} else if (ai->ai_family == AF_INET6) {
			n->family = AF_INET6;
			n->prefix = 128;
			memcpy(n->addr,
			       &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr,
			       16);
		} else {
			continue;
		}
		r->nnets++;
	}
	freeaddrinfo(res);
	if (!r->nnets)
		return perr(ps, line, "host '%s' has no IP address", spec);
	return 0;
}

/* One "client(opts)" or "client" token into a new rule of e. */
static int parse_client(struct parser *ps, unsigned line, char *tok,
			const struct rule_opts *defaults,
			struct exports_entry *e)
{
	struct rule_opts o = *defaults;
	struct exports_rule *r, *grown;
	char *paren = strchr(tok, '(');
	int rc;

	if (paren) {
		size_t len = strlen(paren);

		if (paren[len - 1] != ')')
			return perr(ps, line, "missing ')' in '%s'", tok);
		/*
		 * exports(5): "host (rw)" gives host the defaults and rw to
		 * everyone.  That is almost always a typo: refuse it.
		 */
		if (paren == tok)
			return perr(ps, line,
				    "options '%s' without a client (a blank "
				    "before '(' would export to the world; "
				    "write '*%s' if that is meant)",
				    tok, tok);
		rc = parse_opts(ps, line, paren + 1, len - 2, &o);
		if (rc)
			return rc;
		*paren = '\0';
	}
	grown = realloc(e->rules, (e->nrules + 1) * sizeof(*e->rules));
	if (!grown)
		return -ENOMEM;
	e->rules = grown;
	r = &e->rules[e->nrules];
	memset(r, 0, sizeof(*r));
	r->flags = o.flags;
	r->anonuid = o.anonuid;
	r->anongid = o.anongid;
	r->spec = strdup(tok);
	if (!r->spec)
		return -ENOMEM;
	e->nrules++; /* from here on freed with the table */
	if (!strcmp(tok, "*")) {
		r->any = true;
		return 0;
	}
	if (strchr(tok, '/'))
		return parse_cidr(ps, line, r->spec, r);
	r->nets = malloc(sizeof(*r->nets));
	if (!r->nets)
		return -ENOMEM;
	if (net_addr(tok, r->nets)) {
		r->nnets = 1;
		return 0;
	}
	free(r->nets);
	r->nets = NULL;
	return parse_host(ps, line, tok, r);
}

/* Whether a path has a "." or ".." component (canon would hide it). */
static bool has_dot_component(const char *p)
{
	while (*p) {
		size_t len;

		while (*p == '/')
			p++;
		len = strcspn(p, "/");
		if ((len == 1 && p[0] == '.') ||
		    (len == 2 && p[0] == '.' && p[1] == '.'))
			return true;
		p += len;
	}
	return false;
}

/* The path that starts a line: canonical, at or below the base, new. */
static int parse_path(struct parser *ps, unsigned line, const char *tok,
		      struct exports_entry *e)
{
	char canon[EXPORTS_PATH_MAX + 1];
	size_t i;
	int rc;

	if (tok[0] != '/')
		return perr(ps, line, "'%s' is not an absolute path", tok);
	if (has_dot_component(tok))
		return perr(ps, line, "'%s': no '.' or '..' in export paths",
			    tok);
	rc = exports_path_canon(tok, canon, sizeof(canon));
	if (rc)
		return perr(ps, line, "path '%s' is too long", tok);
	if (!exports_path_below(canon, ps->base))
		return perr(ps, line,
			    "'%s' is not at or below the exported base %s "
			    "(--export)",
			    canon, ps->base);
	for (i = 0; i < ps->t->n; i++)
		if (!strcmp(ps->t->entries[i].path, canon))
			return perr(ps, line,
				    "%s is exported again (first on "
				    "line %u)",
				    canon, ps->t->entries[i].line);
	e->path = strdup(canon);
	if (!e->path)
		return -ENOMEM;
	e->below = exports_path_below(e->path, ps->base);
	e->line = line;
	return 0;
}

/* One logical line that has a token; the export is added to ps->t. */
static int parse_line(struct parser *ps, char *tok)
{
	struct rule_opts defaults = opts_default;
	struct exports_entry *e, *grown;
	unsigned line = ps->line;
	int rc;

	grown = realloc(ps->t->entries, (ps->t->n + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	ps->t->entries = grown;
	e = &ps->t->entries[ps->t->n];
	memset(e, 0, sizeof(*e));
	rc = lex_token(ps, tok);
	if (!rc)
		rc = parse_path(ps, line, tok, e);
	/* Counted even when half made, so that exports_free() frees it. */
	ps->t->n++;
	if (rc)
		return rc;
	while (lex_skip(ps)) {
		line = ps->line;
		rc = lex_token(ps, tok);
		if (rc)
			return rc;
		if (tok[0] == '-') {
			if (e->nrules)
				return perr(ps, line,
					    "default options '%s' "
					    "after a client",
					    tok);
			rc = parse_opts(ps, line, tok + 1, strlen(tok + 1),
					&defaults);
		} else {
			rc = parse_client(ps, line, tok, &defaults, e);
		}
		if (rc)
			return rc;
	}
	if (!e->nrules)
		return perr(ps, e->line,
			    "%s has no clients (write '*(ro)' "
			    "to export it to everyone)",
			    e->path);
	return 0;
}

static struct exports *table_new(const char *base)
{
	struct exports *t = calloc(1, sizeof(*t));
	char canon[EXPORTS_PATH_MAX + 1];

	if (!t)
		return NULL;
	if (exports_path_canon(base, canon, sizeof(canon)) ||
	    !(t->base = strdup(canon))) {
		free(t);
		return NULL;
	}
	return t;
}

int exports_parse_flags(const char *text, size_t len, const char *file,
			const char *base, unsigned flags, struct exports **out,
			char *err, size_t errcap)
{
	struct parser ps = {
		.p = text,
		.end = text + len,
		.file = file,
		.line = 1,
		.flags = flags,
		.err = err,
		.errcap = errcap,
	};
	char *tok = malloc(EXPORTS_TOKEN_MAX);
	int rc = 0;

	ps.t = table_new(base);
	if (!tok || !ps.t) {
		rc = -ENOMEM;
		goto out_free;
	}
	ps.base = ps.t->base;
	for (;;) {
		/* Skip whole blank or comment lines. */
		while (ps.p < ps.end && !lex_skip(&ps))
			;
		if (ps.p >= ps.end)
			break;
		rc = parse_line(&ps, tok);
		if (rc)
			goto out_free;
	}
	free(tok);
	*out = ps.t;
	return 0;
out_free:
	if (rc == -ENOMEM)
		snprintf(err, errcap, "%s: out of memory", file);
	free(tok);
	exports_free(ps.t);
	return rc;
}

int exports_parse(const char *text, size_t len, const char *file,
		  const char *base, struct exports **out, char *err,
		  size_t errcap)
{
	return exports_parse_flags(text, len, file, base, 0, out, err, errcap);
}

int exports_load(const char *path, const char *base, struct exports **out,
		 char *err, size_t errcap)
{
	FILE *f = fopen(path, "r");
	char *buf;
	size_t n;
	int rc;

	if (!f) {
		rc = -errno;
		snprintf(err, errcap, "%s: %s", path, strerror(-rc));
		return rc;
	}
	buf = malloc(EXPORTS_FILE_MAX + 1);
	if (!buf) {
		fclose(f);
		snprintf(err, errcap, "%s: out of memory", path);
		return -ENOMEM;
	}
	n = fread(buf, 1, EXPORTS_FILE_MAX + 1, f);
	if (ferror(f)) {
		rc = -EIO;
		snprintf(err, errcap, "%s: read error", path);
	} else if (n > EXPORTS_FILE_MAX) {
		rc = -EFBIG;
		snprintf(err, errcap, "%s: over %u bytes", path,
			 EXPORTS_FILE_MAX);
	} else {
		rc = exports_parse(buf, n, path, base, out, err, errcap);
	}
	free(buf);
	fclose(f);
	return rc;
}

int exports_localhost(const char *base, struct exports **out)
{
	static const char opts[] = "(rw,no_root_squash,insecure)";
	char text[EXPORTS_PATH_MAX + 2 * sizeof(opts) + 32], err[256];
	int n = snprintf(text, sizeof(text), "\"%s\" 127.0.0.1%s ::1%s\n", base,
			 opts, opts);

	if (n < 0 || (size_t)n >= sizeof(text))
		return -ENAMETOOLONG;
	return exports_parse(text, (size_t)n, "(localhost default)", base, out,
			     err, sizeof(err));
}

int exports_set_ids(struct exports *t, const struct handle_key *key, char *err,
		    size_t errcap)
{
	for (size_t i = 0; i < t->n; i++) {
		struct exports_entry *e = &t->entries[i];

		/* The same id the single-export gateway gave its path. */
		e->id = (uint32_t)handle_siphash(key->k, e->path,
						 strlen(e->path));
		for (size_t j = 0; j < i; j++)
			if (t->entries[j].id == e->id) {
				snprintf(err, errcap,
					 "exports %s and %s have "
					 "the same id: rename one",
					 t->entries[j].path, e->path);
				return -EEXIST;
			}
	}
	return 0;
}

void exports_free(struct exports *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++) {
		struct exports_entry *e = &t->entries[i];

		for (size_t j = 0; j < e->nrules; j++) {
			free(e->rules[j].spec);
			free(e->rules[j].nets);
		}
		free(e->rules);
		free(e->path);
	}
	free(t->entries);
	free(t->base);
	free(t);
}

/* --- matching ----------------------------------------------------------- */

struct exports_entry *exports_find_id(const struct exports *t, uint32_t id)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->entries[i].id == id)
			return &t->entries[i];
	return NULL;
}

/*
 * The peer's address as (family, bytes), an IPv4-mapped IPv6 address
 * as the IPv4 address it is, so one rule serves both listeners.
 */
static bool peer_addr(const struct sockaddr_storage *ss, int *family,
		      const uint8_t **addr)
{
	if (ss->ss_family == AF_INET) {
		*family = AF_INET;
		*addr = (const uint8_t *)&((const struct sockaddr_in *)ss)
				->sin_addr;
		return true;
	}
	if (ss->ss_family == AF_INET6) {
		const struct in6_addr *a6 =
			&((const struct sockaddr_in6 *)ss)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			*family = AF_INET;
			*addr = a6->s6_addr + 12;
		} else {
			*family = AF_INET6;
			*addr = a6->s6_addr;
		}
		return true;
	}
	return false;
}

static bool net_contains(const struct exports_net *n, int family,
			 const uint8_t *addr)
{
	unsigned full = n->prefix / 8, rest = n->prefix % 8;

	if (n->family != family || memcmp(n->addr, addr, full))
		return false;
	return !rest ||
	       !((n->addr[full] ^ addr[full]) & (uint8_t)(0xff00u >> rest));
}

static bool rule_admits(const struct exports_rule *r, int family,
			const uint8_t *addr)
{
	if (r->any)
		return true;
	for (size_t i = 0; i < r->nnets; i++)
		if (net_contains(&r->nets[i], family, addr))
			return true;
	return false;
}

const struct exports_rule *exports_match(const struct exports_entry *e,
					 const struct sockaddr_storage *peer)
{
	const uint8_t *addr;
	int family;

	if (!peer_addr(peer, &family, &addr))
		return NULL;
	/* exports(5) and knfsd: the first client that matches decides. */
	for (size_t i = 0; i < e->nrules; i++)
		if (rule_admits(&e->rules[i], family, addr))
			return &e->rules[i];
	return NULL;
}

bool exports_port_ok(const struct exports_rule *r,
		     const struct sockaddr_storage *peer)
{
	uint16_t port;

	if (!(r->flags & EXPORTS_SECURE))
		return true;
	if (peer->ss_family == AF_INET)
		port = ntohs(((const struct sockaddr_in *)peer)->sin_port);
	else if (peer->ss_family == AF_INET6)
		port = ntohs(((const struct sockaddr_in6 *)peer)->sin6_port);
	else
		return false;
	return port < IPPORT_RESERVED;
}

int exports_mount_find(const struct exports *t, const char *path,
		       const struct sockaddr_storage *peer,
		       struct exports_entry **e, const struct exports_rule **r)
{
	struct exports_entry *best = NULL;
	const struct exports_rule *best_rule = NULL;
	bool contained = false;

	/*
	 * As rpc.mountd: the deepest export containing the path that
	 * admits the client, so a client refused a subdirectory export
	 * may still mount through a parent export that admits it.
	 */
	for (size_t i = 0; i < t->n; i++) {
		struct exports_entry *c = &t->entries[i];
		const struct exports_rule *m;

		if (!exports_path_below(path, c->path))
			continue;
		contained = true;
		m = exports_match(c, peer);
		if (m && (!best || strlen(c->path) > strlen(best->path))) {
			best = c;
			best_rule = m;
		}
	}
	if (!best)
		return contained ? -EACCES : -ENOENT;
	*e = best;
	*r = best_rule;
	return 0;
}

void exports_squash(const struct exports_rule *r, const struct rpc_cred *c,
		    struct fs_ctx *ctx)
{
	uint32_t i;

	/* AUTH_NONE is anonymous, as knfsd treats AUTH_NULL. */
	if (c->flavor != AUTH_SYS || (r->flags & EXPORTS_ALL_SQUASH)) {
		ctx->uid = r->anonuid;
		ctx->gid = r->anongid;
		ctx->ngids = 0; /* knfsd drops the group list too */
		return;
	}
	ctx->uid = c->uid;
	ctx->gid = c->gid;
	ctx->ngids = c->ngids < FS_MAX_GIDS ? c->ngids : FS_MAX_GIDS;
	for (i = 0; i < ctx->ngids; i++)
		ctx->gids[i] = c->gids[i];
	if (!(r->flags & EXPORTS_ROOT_SQUASH))
		return;
	/* uid 0 and gid 0 are squashed each on its own, as knfsd does. */
	if (ctx->uid == 0)
		ctx->uid = r->anonuid;
	if (ctx->gid == 0)
		ctx->gid = r->anongid;
	for (i = 0; i < ctx->ngids; i++)
		if (ctx->gids[i] == 0)
			ctx->gids[i] = r->anongid;
}

/* --- publication -------------------------------------------------------- */

int exports_pub_init(struct exports_pub *p, int nslots)
{
	int rc;

	if (nslots <= 0)
		return -EINVAL;
	atomic_init(&p->cur, NULL);
	p->nslots = nslots;
	p->slots = aligned_alloc(_Alignof(struct exports_slot),
				 (size_t)nslots * sizeof(*p->slots));
	if (!p->slots)
		return -ENOMEM;
	for (int i = 0; i < nslots; i++)
		atomic_init(&p->slots[i].held, NULL);
	rc = pthread_mutex_init(&p->lock, NULL);
	if (rc) {
		free(p->slots);
		p->slots = NULL;
	}
	return -rc;
}

void exports_pub_fini(struct exports_pub *p)
{
	if (!p->slots)
		return;
	exports_free(atomic_load(&p->cur));
	atomic_store(&p->cur, NULL);
	free(p->slots);
	p->slots = NULL;
	pthread_mutex_destroy(&p->lock);
}

struct exports *exports_pin(struct exports_pub *p, int slot)
{
	struct exports *t;

	if (slot < 0 || slot >= p->nslots)
		return NULL;
	/*
	 * Publish the hazard, then check that the table is still current:
	 * if a writer swapped it meanwhile, it may not have seen our slot,
	 * so take the new one.  Once the check holds, the writer's scan
	 * (after its swap) sees the slot and waits (seq_cst on both sides).
	 */
	do {
		t = atomic_load(&p->cur);
		atomic_store(&p->slots[slot].held, t);
	} while (t != atomic_load(&p->cur));
	return t;
}

void exports_unpin(struct exports_pub *p, int slot)
{
	if (slot >= 0 && slot < p->nslots)
		atomic_store(&p->slots[slot].held, NULL);
}

void exports_publish(struct exports_pub *p, struct exports *t)
{
	const struct timespec nap = { 0, 100 * 1000 };
	struct exports *old;

	pthread_mutex_lock(&p->lock);
	old = atomic_exchange(&p->cur, t);
	/* Readers hold a table for a handle check: microseconds. */
	for (int i = 0; old && i < p->nslots; i++)
		while (atomic_load(&p->slots[i].held) == old)
			nanosleep(&nap, NULL);
	pthread_mutex_unlock(&p->lock);
	exports_free(old);
}
