/*
 * s3/xml.c - S3's XML documents over expat.
 *
 * A response is parsed into a small tree first (S3 documents are at most
 * a few MiB: one page), then each reader walks the tree by element name.
 * That keeps every reader a few lines and makes "which element is this
 * text in" a parser question, never a string search.  The tree lives in
 * a few large blocks freed together: a listing page of 1,000 objects is
 * some 11,000 elements, and a malloc for each node, name and text (with
 * the page faults of a heap that grew by 4 MB and shrank again) was 10 ms
 * a page, most of what a cold listing spent beyond the store's time.
 */
#include "xml.h"

#include <errno.h>
#include <expat.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "metrics/metrics.h"

#define XML_DEPTH_MAX 32 /* S3 documents nest 3 deep; anything deeper is junk */
#define NS_SEP '\x01'    /* expat's separator between namespace and name */

#define XML_BLOCK (64u << 10) /* the tree's memory comes in blocks of this */
/* Blocks a thread keeps for its next document: a listing page's tree is
 * about 1 MB, and fresh memory costs a page fault per 4 KiB. */
#define XML_BLOCKS_KEPT 20

struct block {
	struct block *next;
	size_t used, cap;
	char data[];
};

struct node {
	char *name;
	char *text; /* NUL-terminated, or NULL: none */
	size_t tlen, tcap;
	struct node *child, *last, *next, *parent;
	struct block *blocks; /* the root's: all of the tree */
};

struct parse {
	XML_Parser xp;
	struct node *root, *cur;
	struct block *blocks;
	int depth;
	int err;
};

/* Per thread: its kept blocks, freed when it exits (kept_key). */
static __thread struct block *kept;
static __thread unsigned nkept;
static pthread_key_t kept_key;
static pthread_once_t kept_once = PTHREAD_ONCE_INIT;

static void kept_exit(void *unused)
{
	(void)unused;
	while (kept) {
		struct block *next = kept->next;

		free(kept);
		kept = next;
	}
	nkept = 0;
}

static void kept_init(void)
{
	if (pthread_key_create(&kept_key, kept_exit))
		kept_key = (pthread_key_t)-1;
}

static void blocks_free(struct block *b)
{
	pthread_once(&kept_once, kept_init);
	while (b) {
		struct block *next = b->next;

		/* Kept only where the thread's exit can free them. */
		if (b->cap == XML_BLOCK && nkept < XML_BLOCKS_KEPT &&
		    kept_key != (pthread_key_t)-1 &&
		    !pthread_setspecific(kept_key, &kept)) {
			b->next = kept;
			kept = b;
			nkept++;
		} else {
			free(b);
		}
		b = next;
	}
}

/* Free a whole tree (root as xml_parse gave it; NULL: nothing). */
static void node_free(struct node *root)
{
	if (root)
		blocks_free(root->blocks);
}

/* n bytes from the parse's blocks, 8-aligned; NULL when out of memory. */
static void *tree_alloc(struct parse *p, size_t n)
{
	struct block *b = p->blocks;
	void *r;

	n = (n + 7) & ~(size_t)7;
	if (!b || b->cap - b->used < n) {
		size_t cap = n > XML_BLOCK ? n : XML_BLOCK;

		if (cap == XML_BLOCK && kept) {
			b = kept;
			kept = b->next;
			nkept--;
		} else if (!(b = malloc(sizeof(*b) + cap))) {
			return NULL;
		}
		b->next = p->blocks;
		b->used = 0;
		b->cap = cap;
		p->blocks = b;
	}
	r = b->data + b->used;
	b->used += n;
	return r;
}

static void parse_fail(struct parse *p, int err)
{
	if (!p->err)
		p->err = err;
	XML_StopParser(p->xp, XML_FALSE);
}

static void XMLCALL on_start(void *ud, const XML_Char *name,
			     const XML_Char **attrs)
{
	struct parse *p = ud;
	const char *local = strrchr(name, NS_SEP);
	struct node *n;

	(void)attrs;
	if (p->err)
		return;
	if (++p->depth > XML_DEPTH_MAX) {
		parse_fail(p, -EIO);
		return;
	}
	name = local ? local + 1 : name;
	size_t nlen = strlen(name) + 1;

	n = tree_alloc(p, sizeof(*n) + nlen);
	if (!n) {
		parse_fail(p, -ENOMEM);
		return;
	}
	memset(n, 0, sizeof(*n));
	n->name = memcpy((char *)(n + 1), name, nlen);
	n->parent = p->cur;
	if (!p->cur) {
		p->root = n;
	} else if (p->cur->last) {
		p->cur->last->next = n;
		p->cur->last = n;
	} else {
		p->cur->child = p->cur->last = n;
	}
	p->cur = n;
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
	struct parse *p = ud;

	(void)name;
	if (p->err || !p->cur)
		return;
	p->depth--;
	p->cur = p->cur->parent;
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
	struct parse *p = ud;
	struct node *n = p->cur;

	if (p->err || !n || len <= 0)
		return;
	if (n->tlen + (size_t)len + 1 > n->tcap) {
		/* Most texts come in one piece: exactly their size. */
		size_t cap = n->tlen + (size_t)len + 1;
		char *t;

		if (n->tcap && cap < 2 * n->tcap)
			cap = 2 * n->tcap;
		t = tree_alloc(p, cap);
		if (!t) {
			parse_fail(p, -ENOMEM);
			return;
		}
		if (n->tlen)
			memcpy(t, n->text, n->tlen);
		n->text = t;
		n->tcap = cap;
	}
	memcpy(n->text + n->tlen, s, (size_t)len);
	n->tlen += (size_t)len;
	n->text[n->tlen] = '\0';
}

/* Entity declarations are how XML bombs work; S3 never sends a DTD. */
static void XMLCALL on_doctype(void *ud, const XML_Char *name,
			       const XML_Char *sysid, const XML_Char *pubid,
			       int has_internal)
{
	(void)name, (void)sysid, (void)pubid, (void)has_internal;
	parse_fail(ud, -EIO);
}

static int xml_parse(const char *body, size_t len, struct node **root)
{
	struct parse p = { 0 };

	*root = NULL;
	if (!body || len > (size_t)INT32_MAX)
		return -EIO;
	p.xp = XML_ParserCreateNS(NULL, NS_SEP);
	if (!p.xp)
		return -ENOMEM;
	XML_SetUserData(p.xp, &p);
	XML_SetElementHandler(p.xp, on_start, on_end);
	XML_SetCharacterDataHandler(p.xp, on_text);
	XML_SetStartDoctypeDeclHandler(p.xp, on_doctype);
	if (XML_Parse(p.xp, body, (int)len, XML_TRUE) != XML_STATUS_OK &&
	    !p.err)
		p.err = -EIO;
	XML_ParserFree(p.xp);
	if (!p.err && !p.root)
		p.err = -EIO;
	if (p.err) {
		blocks_free(p.blocks);
		return p.err;
	}
	p.root->blocks = p.blocks;
	*root = p.root;
	return 0;
}

static const struct node *child(const struct node *n, const char *name)
{
	for (n = n ? n->child : NULL; n; n = n->next)
		if (strcmp(n->name, name) == 0)
			return n;
	return NULL;
}

/* The text of n's child name, or NULL if there is no such child. */
static const char *child_text(const struct node *n, const char *name)
{
	const struct node *c = child(n, name);

	if (!c)
		return NULL;
	return c->text ? c->text : "";
}

/* Parse body and insist on its root element's name. */
static int xml_doc(const char *body, size_t len, const char *root_name,
		   struct node **root)
{
	int err = xml_parse(body, len, root);

	if (err)
		return err;
	if (strcmp((*root)->name, root_name)) {
		node_free(*root);
		*root = NULL;
		return -EIO;
	}
	return 0;
}

static void copy_trunc(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src ? src : "");
}

int s3_xml_error(const char *body, size_t len, char code[S3_XML_CODE_MAX],
		 char msg[S3_XML_MSG_MAX])
{
	struct node *root;
	int err = xml_doc(body, len, "Error", &root);

	if (err)
		return err;
	copy_trunc(code, S3_XML_CODE_MAX, child_text(root, "Code"));
	copy_trunc(msg, S3_XML_MSG_MAX, child_text(root, "Message"));
	node_free(root);
	return 0;
}

int s3_xml_time(const char *s, int64_t *ns)
{
	struct tm tm = { 0 };
	const char *end;
	int64_t frac = 0, scale = 100000000;
	time_t t;

	if (!s || !(end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)))
		return -EINVAL;
	if (*end == '.') {
		for (end++; *end >= '0' && *end <= '9'; end++) {
			frac += (*end - '0') * scale;
			scale /= 10;
		}
	}
	if (strcmp(end, "Z") && strcmp(end, "+00:00"))
		return -EINVAL;
	t = timegm(&tm);
	/* Outside 1677..2262 the nanoseconds would overflow int64. */
	if (t < INT64_MIN / 1000000000 || t > (INT64_MAX - frac) / 1000000000)
		return -EINVAL;
	*ns = (int64_t)t * 1000000000 + frac;
	return 0;
}

/* Quotes around an ETag are part of the wire format, not of the tag. */
static int etag_copy(char etag[STORE_ETAG_MAX], const char *s)
{
	size_t n;

	if (!s)
		return -EIO;
	n = strlen(s);
	if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
		s++;
		n -= 2;
	}
	if (n >= STORE_ETAG_MAX)
		return -EIO;
	memcpy(etag, s, n);
	etag[n] = '\0';
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * A key as listed: url-decoded if asked, strip removed; NULL = skip it.
 * A key with a NUL byte (%00) is skipped whole: as a C string it would
 * be a shorter key, another object's name.
 */
static int list_key(const char *raw, bool url, const char *strip, char **out)
{
	size_t slen = strlen(strip), n = strlen(raw);
	char *k = malloc(n + 1), *o = k;

	*out = NULL;
	if (!k)
		return -ENOMEM;
	for (const char *c = raw; *c; c++) {
		if (url && *c == '%') {
			int hi = hexval(c[1]), lo = hi < 0 ? -1 : hexval(c[2]);

			if (lo < 0) {
				free(k);
				return -EIO;
			}
			if (!(hi | lo)) {
				metrics_inc(MET_KEYS_SKIPPED);
				log_warn("s3: a listed key with a NUL byte "
					 "skipped: "
					 "\"%s\"",
					 raw);
				free(k);
				return 0;
			}
			*o++ = (char)(hi << 4 | lo);
			c += 2;
		} else if (url && *c == '+') {
			*o++ = ' ';
		} else {
			*o++ = *c;
		}
	}
	*o = '\0';
	if (strncmp(k, strip, slen) || (size_t)(o - k) > slen + STORE_KEY_MAX) {
		/* Outside our prefix or too long to be a key: not ours. */
		free(k);
		return 0;
	}
	if ((size_t)(o - k) == slen) {
		free(k);
		return 0;
	}
	memmove(k, k + slen, (size_t)(o - k) - slen + 1);
	*out = k;
	return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EIO;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || *end ? -EIO : 0;
}

static int list_entry(const struct node *c, bool url, const char *strip,
		      struct store_page *out)
{
	struct store_entry *e = &out->entries[out->nentries];
	const char *lm;
	char *key;
	int err;

	if (!child_text(c, "Key"))
		return -EIO;
	err = list_key(child_text(c, "Key"), url, strip, &key);
	if (err || !key)
		return err;
	memset(e, 0, sizeof(*e));
	e->key = key;
	out->nentries++;
	err = parse_u64(child_text(c, "Size"), &e->size);
	if (!err && child_text(c, "ETag"))
		err = etag_copy(e->etag, child_text(c, "ETag"));
	lm = child_text(c, "LastModified");
	if (!err && lm && s3_xml_time(lm, &e->last_modified_ns))
		err = -EIO;
	return err;
}

int s3_xml_list(const char *body, size_t len, const char *strip,
		struct store_page *out)
{
	const struct node *c;
	struct node *root;
	const char *enc, *trunc;
	size_t n = 0;
	bool url;
	int err;

	memset(out, 0, sizeof(*out));
	err = xml_doc(body, len, "ListBucketResult", &root);
	if (err)
		return err;
	enc = child_text(root, "EncodingType");
	url = enc && strcmp(enc, "url") == 0;
	for (c = root->child; c; c = c->next)
		n++;
	out->entries = calloc(n ? n : 1, sizeof(*out->entries));
	out->prefixes = calloc(n ? n : 1, sizeof(*out->prefixes));
	if (!out->entries || !out->prefixes) {
		err = -ENOMEM;
		goto out_free;
	}
	for (c = root->child; c && !err; c = c->next) {
		if (strcmp(c->name, "Contents") == 0) {
			err = list_entry(c, url, strip, out);
		} else if (strcmp(c->name, "CommonPrefixes") == 0) {
			const char *p = child_text(c, "Prefix");
			char *k;

			if (!p) {
				err = -EIO;
				break;
			}
			err = list_key(p, url, strip, &k);
			if (!err && k)
				out->prefixes[out->nprefixes++] = k;
		}
	}
	trunc = child_text(root, "IsTruncated");
	if (!err && trunc && strcmp(trunc, "true") == 0) {
		const char *tok = child_text(root, "NextContinuationToken");

		if (!tok || !*tok)
			err = -EIO;
		else if (!(out->next_token = strdup(tok)))
			err = -ENOMEM;
	}
out_free:
	node_free(root);
	if (err)
		store_page_free(out);
	return err;
}

int s3_xml_upload_id(const char *body, size_t len, char **upload_id)
{
	struct node *root;
	const char *id;
	int err = xml_doc(body, len, "InitiateMultipartUploadResult", &root);

	if (err)
		return err;
	id = child_text(root, "UploadId");
	if (!id || !*id)
		err = -EIO;
	else if (!(*upload_id = strdup(id)))
		err = -ENOMEM;
	node_free(root);
	return err;
}

int s3_xml_etag(const char *body, size_t len, const char *root_name,
		char etag[STORE_ETAG_MAX], int64_t *last_modified_ns)
{
	struct node *root;
	const char *lm;
	int err = xml_doc(body, len, root_name, &root);

	if (err)
		return err;
	err = etag_copy(etag, child_text(root, "ETag"));
	lm = child_text(root, "LastModified");
	if (last_modified_ns) {
		*last_modified_ns = 0;
		if (!err && lm && s3_xml_time(lm, last_modified_ns))
			err = -EIO;
	}
	node_free(root);
	return err;
}

void s3_xml_uploads_free(struct s3_uploads *u)
{
	for (size_t i = 0; i < u->n; i++) {
		free(u->v[i].key);
		free(u->v[i].upload_id);
	}
	free(u->v);
	free(u->next_key);
	free(u->next_id);
	memset(u, 0, sizeof(*u));
}

static int dup_opt(const char *s, char **out)
{
	*out = NULL;
	if (s && !(*out = strdup(s)))
		return -ENOMEM;
	return 0;
}

int s3_xml_uploads(const char *body, size_t len, struct s3_uploads *out)
{
	const struct node *c;
	struct node *root;
	const char *t;
	size_t n = 0;
	int err;

	memset(out, 0, sizeof(*out));
	err = xml_doc(body, len, "ListMultipartUploadsResult", &root);
	if (err)
		return err;
	for (c = root->child; c; c = c->next)
		n++;
	out->v = calloc(n ? n : 1, sizeof(*out->v));
	if (!out->v)
		err = -ENOMEM;
	for (c = root->child; c && !err; c = c->next) {
		struct s3_upload *u = &out->v[out->n];
		const char *key = child_text(c, "Key");
		const char *id = child_text(c, "UploadId");

		if (strcmp(c->name, "Upload"))
			continue;
		if (!key || !id) {
			err = -EIO;
			break;
		}
		out->n++;
		if (!(u->key = strdup(key)) || !(u->upload_id = strdup(id)))
			err = -ENOMEM;
		t = child_text(c, "Initiated");
		if (!err && t && s3_xml_time(t, &u->initiated_ns))
			err = -EIO;
	}
	t = child_text(root, "IsTruncated");
	out->truncated = t && strcmp(t, "true") == 0;
	if (!err && out->truncated) {
		err = dup_opt(child_text(root, "NextKeyMarker"),
			      &out->next_key);
		if (!err)
			err = dup_opt(child_text(root, "NextUploadIdMarker"),
				      &out->next_id);
		if (!err && !out->next_key)
			err = -EIO;
	}
	node_free(root);
	if (err)
		s3_xml_uploads_free(out);
	return err;
}

int s3_xml_delete_result(const char *body, size_t len,
			 char code[S3_XML_CODE_MAX], char *key, size_t key_len)
{
	const struct node *e;
	struct node *root;
	int err = xml_doc(body, len, "DeleteResult", &root);

	if (err)
		return err;
	e = child(root, "Error");
	if (e) {
		copy_trunc(code, S3_XML_CODE_MAX, child_text(e, "Code"));
		copy_trunc(key, key_len, child_text(e, "Key"));
	}
	node_free(root);
	return e ? 1 : 0;
}

void s3_xml_delete_body(struct s3_buf *b, const char *const *keys, size_t n)
{
	s3_buf_str(b,
		   "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		   "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
		   "<Quiet>true</Quiet>");
	for (size_t i = 0; i < n; i++) {
		s3_buf_str(b, "<Object><Key>");
		s3_buf_xml(b, keys[i]);
		s3_buf_str(b, "</Key></Object>");
	}
	s3_buf_str(b, "</Delete>");
}

void s3_xml_complete_body(struct s3_buf *b, int n,
			  char (*etags)[STORE_ETAG_MAX])
{
	s3_buf_str(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		      "<CompleteMultipartUpload "
		      "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
	for (int i = 0; i < n; i++) {
		s3_buf_fmt(b, "<Part><PartNumber>%d</PartNumber><ETag>\"",
			   i + 1);
		s3_buf_xml(b, etags[i]);
		s3_buf_str(b, "\"</ETag></Part>");
	}
	s3_buf_str(b, "</CompleteMultipartUpload>");
}
