/*
 * s3/store_file_list.c - the file backend's listings: keys in S3's order
 * (byte-wise over whole keys, common prefixes, opaque continuation tokens)
 * from a walk of the directory tree, and the multipart uploads in progress.
 */
#include "store_file_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define LIST_MAX 1000 /* S3 never returns more per page */

/* See store_file_int.h. */
int file_mpu_list(struct store *st, const char *prefix,
		  struct store_upload **out, size_t *n)
{
	struct store_file *sf = sf_of(st);
	struct store_upload *v = NULL;
	char key[STORE_KEY_MAX + 1];
	struct dirent *de;
	size_t nv = 0, plen;
	DIR *d;
	int err;

	if (!prefix || (plen = strlen(prefix)) > STORE_KEY_MAX)
		return -EINVAL;
	err = file_dir_scan(sf->mpu_fd, &d);
	if (err)
		return err;
	while (!err && (de = readdir(d))) {
		ssize_t klen;
		int ufd;

		/* Not an upload (".", "..", a half-made one): skip it. */
		if (!file_upload_id_ok(de->d_name) ||
		    file_dir_step(sf->mpu_fd, de->d_name, 0, &ufd))
			continue;
		klen = fgetxattr(ufd, XA_MPU_KEY, key, sizeof(key) - 1);
		close(ufd);
		if (klen < 0 || (size_t)klen < plen)
			continue;
		key[klen] = '\0';
		if (!strncmp(key, prefix, plen))
			err = store_uploads_add(&v, &nv, key, de->d_name);
	}
	closedir(d);
	if (err) {
		store_uploads_free(v, nv);
		return err;
	}
	*out = v;
	*n = nv;
	return 0;
}

/* ---- listing ---------------------------------------------------------------
 *
 * The key set is every regular file ("d/f") and every directory ("d/")
 * under ROOT.  Sorting a directory's children by name, with a '/' after
 * each directory's name, and descending into a directory right after its
 * marker yields that set in S3's byte-wise order: all keys under "d/" form
 * one contiguous run that starts with "d/" itself.  A subtree whose keys
 * all roll up into one common prefix, or all sort before the token, is
 * never read.
 */

struct lister {
	const char *prefix;
	size_t plen;
	char delim;
	char tok_kind; /* 0 first page, 'K' after a key, 'P' after a prefix */
	const char *tok;
	size_t toklen;
	unsigned max;
	struct store_page *page;
	size_t ecap, pcap;
	char last_kind; /* 'K' or 'P': which array holds the last item */
	bool more;      /* found an item past max: the page is truncated */
	char key[STORE_KEY_MAX + 2]; /* the key being built */
};

struct child {
	char *name;
	bool dir;
};

#define LST_FULL 1

/*
 * True if key belongs after the token.  After a common prefix, every key
 * that rolled up into it was already returned with it.
 */
static bool lst_after(const struct lister *l, const char *key)
{
	if (!l->tok_kind)
		return true;
	if (strcmp(key, l->tok) <= 0)
		return false;
	return l->tok_kind == 'K' || strncmp(key, l->tok, l->toklen) != 0;
}

/* True if no key starting with pfx (of length n) can come after the token. */
static bool lst_tree_done(const struct lister *l, const char *pfx, size_t n)
{
	if (!l->tok_kind)
		return false;
	if (l->tok_kind == 'P' && n >= l->toklen &&
	    memcmp(pfx, l->tok, l->toklen) == 0)
		return true;
	/* pfx sorts before the token and is not a prefix of it. */
	return strncmp(pfx, l->tok, n) < 0;
}

/* Length of the common prefix key rolls up into, or 0 if it does not. */
static size_t lst_rollup(const struct lister *l, const char *key, size_t klen)
{
	const char *d;

	if (!l->delim)
		return 0;
	d = memchr(key + l->plen, l->delim, klen - l->plen);
	return d ? (size_t)(d - key) + 1 : 0;
}

static int lst_grow(void **arr, size_t *cap, size_t n, size_t size)
{
	size_t ncap;
	void *p;

	if (n < *cap)
		return 0;
	ncap = *cap ? 2 * *cap : 64;
	p = realloc(*arr, ncap * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

/*
 * Offer key to the page, as an entry (stat sb, a marker if marker) or
 * rolled up into a common prefix (sb unused, may be NULL).  Returns 0,
 * LST_FULL once max items are in and another one exists, or -errno.
 */
static int lst_offer(struct lister *l, const char *key, const struct stat *sb,
		     bool marker)
{
	struct store_page *pg = l->page;
	size_t klen = strlen(key), cp;
	char *s;
	int err;

	if (!lst_after(l, key))
		return 0;
	cp = lst_rollup(l, key, klen);
	if (cp && pg->nprefixes &&
	    strlen(pg->prefixes[pg->nprefixes - 1]) == cp &&
	    memcmp(pg->prefixes[pg->nprefixes - 1], key, cp) == 0)
		return 0;
	if (pg->nentries + pg->nprefixes >= l->max) {
		l->more = true;
		return LST_FULL;
	}
	s = cp ? strndup(key, cp) : strdup(key);
	if (!s)
		return -ENOMEM;
	if (cp) {
		err = lst_grow((void **)&pg->prefixes, &l->pcap, pg->nprefixes,
			       sizeof(*pg->prefixes));
		if (err)
			goto out_free;
		pg->prefixes[pg->nprefixes++] = s;
		l->last_kind = 'P';
		return 0;
	}
	err = lst_grow((void **)&pg->entries, &l->ecap, pg->nentries,
		       sizeof(*pg->entries));
	if (err)
		goto out_free;
	pg->entries[pg->nentries].key = s;
	pg->entries[pg->nentries].size = marker ? 0 : (uint64_t)sb->st_size;
	file_etag_fill(sb, marker, pg->entries[pg->nentries].etag);
	pg->entries[pg->nentries].last_modified_ns = file_ts_ns(&sb->st_mtim);
	pg->nentries++;
	l->last_kind = 'K';
	return 0;
out_free:
	free(s);
	return err;
}

static int child_cmp(const void *a, const void *b)
{
	const struct child *x = a, *y = b;
	const unsigned char *p = (const unsigned char *)x->name;
	const unsigned char *q = (const unsigned char *)y->name;
	int cp, cq;

	while (*p && *p == *q) {
		p++;
		q++;
	}
	/* A directory's name sorts as if followed by '/'. */
	cp = *p ? *p : (x->dir ? '/' : 0);
	cq = *q ? *q : (y->dir ? '/' : 0);
	return cp - cq;
}

static void children_free(struct child *kids, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(kids[i].name);
	free(kids);
}

/*
 * The children of dfd (whose key prefix, keylen bytes, is in l->key)
 * that are objects or directories, start with npfx, fit in a key and can
 * still come after the token; sorted in key order.
 */
static int lst_children(struct lister *l, int dfd, size_t keylen,
			const char *npfx, bool at_root, struct child **out,
			size_t *nout)
{
	size_t npl = strlen(npfx), n = 0, cap = 0, nl;
	struct child *kids = NULL;
	struct dirent *de;
	struct stat sb;
	bool dir;
	int err = 0;
	DIR *d;

	err = file_dir_scan(dfd, &d);
	if (err)
		return err;
	for (errno = 0; (de = readdir(d)); errno = 0) {
		const char *name = de->d_name;

		if (!strcmp(name, ".") || !strcmp(name, "..") ||
		    strncmp(name, npfx, npl) ||
		    (at_root &&
		     !strncmp(name, RESERVED_PREFIX, strlen(RESERVED_PREFIX))))
			continue;
		if (de->d_type == DT_UNKNOWN) {
			if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW))
				continue;
			dir = S_ISDIR(sb.st_mode);
			if (!dir && !S_ISREG(sb.st_mode))
				continue;
		} else if (de->d_type == DT_DIR || de->d_type == DT_REG) {
			dir = de->d_type == DT_DIR;
		} else {
			continue; /* symlinks, devices, sockets: not objects */
		}
		nl = strlen(name);
		if (keylen + nl + dir > STORE_KEY_MAX)
			continue;
		memcpy(l->key + keylen, name, nl);
		l->key[keylen + nl] = '/';
		l->key[keylen + nl + dir] = '\0';
		if (dir ? lst_tree_done(l, l->key, keylen + nl + 1)
			: !lst_after(l, l->key))
			continue;
		err = lst_grow((void **)&kids, &cap, n, sizeof(*kids));
		if (err)
			break;
		kids[n].name = strdup(name);
		if (!kids[n].name) {
			err = -ENOMEM;
			break;
		}
		kids[n++].dir = dir;
	}
	if (!err && errno)
		err = -errno;
	closedir(d);
	if (err) {
		children_free(kids, n);
		return err;
	}
	if (n)
		qsort(kids, n, sizeof(*kids), child_cmp);
	*out = kids;
	*nout = n;
	return 0;
}

/* List dfd's subtree in key order; l->key holds its keylen-byte prefix. */
static int lst_dir(struct lister *l, int dfd, size_t keylen, const char *npfx,
		   bool at_root)
{
	struct child *kids = NULL;
	struct stat sb;
	size_t n = 0, i, nl;
	int cfd, err;

	err = lst_children(l, dfd, keylen, npfx, at_root, &kids, &n);
	if (err)
		return err;
	for (i = 0; i < n && !err; i++) {
		nl = strlen(kids[i].name);
		memcpy(l->key + keylen, kids[i].name, nl);
		if (!kids[i].dir) {
			l->key[keylen + nl] = '\0';
			/* Gone or replaced since readdir: not listed. */
			if (fstatat(dfd, kids[i].name, &sb,
				    AT_SYMLINK_NOFOLLOW) ||
			    !S_ISREG(sb.st_mode))
				continue;
			err = lst_offer(l, l->key, &sb, false);
			continue;
		}
		l->key[keylen + nl] = '/';
		l->key[keylen + nl + 1] = '\0';
		if (lst_rollup(l, l->key, keylen + nl + 1)) {
			err = lst_offer(l, l->key, NULL, true);
			continue;
		}
		err = file_dir_step(dfd, kids[i].name, 0, &cfd);
		if (err) {
			/* Removed or replaced since readdir: not listed. */
			if (err == -ENOENT)
				err = 0;
			continue;
		}
		if (fstat(cfd, &sb))
			err = -errno;
		else
			err = lst_offer(l, l->key, &sb, true);
		if (!err)
			err = lst_dir(l, cfd, keylen + nl + 1, "", false);
		close(cfd);
	}
	children_free(kids, n);
	return err;
}

int file_list(struct store *st, const char *prefix, char delimiter,
	      const char *token, unsigned max_keys, struct store_page *out)
{
	struct store_file *sf = sf_of(st);
	char dirkey[STORE_KEY_MAX + 1];
	struct keypath kp;
	struct lister *l;
	const char *slash, *npfx;
	const char *last;
	struct stat sb;
	size_t keylen;
	int dfd, err;

	memset(out, 0, sizeof(*out));
	if (!prefix)
		prefix = "";
	if (token && ((token[0] != 'K' && token[0] != 'P') ||
		      strnlen(token + 1, STORE_KEY_MAX + 1) > STORE_KEY_MAX))
		return -EINVAL;
	/* No key can be that long, or under an invalid directory: empty. */
	if (strnlen(prefix, STORE_KEY_MAX + 1) > STORE_KEY_MAX)
		return 0;
	slash = strrchr(prefix, '/');
	keylen = slash ? (size_t)(slash - prefix) + 1 : 0;
	npfx = prefix + keylen;
	if (slash) {
		memcpy(dirkey, prefix, keylen);
		dirkey[keylen] = '\0';
		if (file_key_parse(dirkey, &kp))
			return 0;
		err = file_marker_open(sf, &kp, false, &dfd, &sb);
		if (err)
			return err == -ENOENT ? 0 : err;
	} else {
		dfd = fcntl(sf->root_fd, F_DUPFD_CLOEXEC, 0);
		if (dfd < 0)
			return -errno;
	}

	l = calloc(1, sizeof(*l));
	if (!l) {
		err = -ENOMEM;
		goto out_close_dir;
	}
	l->prefix = prefix;
	l->plen = strlen(prefix);
	l->delim = delimiter;
	l->max = max_keys == 0 || max_keys > LIST_MAX ? LIST_MAX : max_keys;
	l->page = out;
	if (token) {
		l->tok_kind = token[0];
		l->tok = token + 1;
		l->toklen = strlen(l->tok);
	}
	memcpy(l->key, prefix, keylen);
	l->key[keylen] = '\0';
	err = 0;
	/* Prefix "d/" names the directory itself: its marker comes first. */
	if (slash && !*npfx)
		err = lst_offer(l, l->key, &sb, true);
	if (!err)
		err = lst_dir(l, dfd, keylen, npfx, !slash);
	if (err < 0)
		goto out_free_page;
	if (l->more) {
		last = l->last_kind == 'P'
			       ? out->prefixes[out->nprefixes - 1]
			       : out->entries[out->nentries - 1].key;
		out->next_token = malloc(strlen(last) + 2);
		if (!out->next_token) {
			err = -ENOMEM;
			goto out_free_page;
		}
		out->next_token[0] = l->last_kind;
		strcpy(out->next_token + 1, last);
	}
	err = 0;
	goto out_free_lister;
out_free_page:
	store_page_free(out);
out_free_lister:
	free(l);
out_close_dir:
	close(dfd);
	return err;
}
