/*
 * nfsd/nfsd.c - the state shared by the NFS and MOUNT programs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "fs/fs.h"

#include "exports.h"
#include "nfsd.h"

#define NFSD_XFER_DEFAULT (1u << 20) /* rtmax/wtmax when unset: 1 MiB */

/* Initialise n; fs, key, fsid, nloops, read_only are the caller's. */
void nfsd_write_verf(const struct nfsd *n, uint8_t out[8])
{
	uint64_t e = n->fs ? fs_write_epoch(n->fs) : 0;

	for (int i = 0; i < 8; i++)
		out[i] = n->write_verf[i] ^ (uint8_t)(e >> (8 * i));
}

int nfsd_init(struct nfsd *n)
{
	ssize_t r;
	int rc;

	/*
	 * A new write verifier every start: a client that sees it change
	 * resends every UNSTABLE write not yet committed (RFC 1813 3.3.7).
	 */
	do
		r = getrandom(n->write_verf, sizeof(n->write_verf), 0);
	while (r < 0 && errno == EINTR);
	if (r != (ssize_t)sizeof(n->write_verf))
		return r < 0 ? -errno : -EIO;
	if (!n->rtmax)
		n->rtmax = NFSD_XFER_DEFAULT;
	if (!n->wtmax)
		n->wtmax = NFSD_XFER_DEFAULT;
	n->mounts = NULL;
	rc = exports_pub_init(&n->exports, n->nloops);
	if (rc)
		return rc;
	rc = pthread_mutex_init(&n->mounts_lock, NULL);
	if (rc)
		exports_pub_fini(&n->exports);
	return -rc;
}

void nfsd_exports_set(struct nfsd *n, struct exports *t)
{
	char *list = NULL, *old;
	size_t len = 0;
	FILE *f = open_memstream(&list, &len);

	for (size_t i = 0; f && t && i < t->n; i++)
		for (size_t j = 0; j < t->entries[i].nrules; j++)
			if (t->entries[i].rules[j].flags & EXPORTS_ASYNC)
				fprintf(f, "%s %s\n", t->entries[i].path,
					t->entries[i].rules[j].spec);
	if (f)
		fclose(f);
	pthread_mutex_lock(&n->mounts_lock);
	old = n->async_rules;
	n->async_rules = list;
	pthread_mutex_unlock(&n->mounts_lock);
	free(old);
	exports_publish(&n->exports, t);
}

char *nfsd_async_rules(struct nfsd *n)
{
	char *copy;

	pthread_mutex_lock(&n->mounts_lock);
	copy = strdup(n->async_rules ? n->async_rules : "");
	pthread_mutex_unlock(&n->mounts_lock);
	return copy;
}

uint64_t nfsd_export_root(struct nfsd *n, struct exports_entry *e, int loop)
{
	/* The walk to an export is the server's, not the client's. */
	struct fs_ctx root = { .loop = loop };
	uint64_t ino = atomic_load(&e->root_ino), next;
	const char *p = e->below;
	char name[FS_NAME_MAX + 1];
	struct fs_attr a;

	if (ino)
		return ino;
	ino = FS_ROOT_INO;
	while (*p) {
		size_t len = strcspn(p, "/"); /* <= FS_NAME_MAX: canonical */

		memcpy(name, p, len);
		name[len] = '\0';
		p += len + (p[len] == '/');
		if (fs_lookup(n->fs, &root, ino, name, &next, &a) ||
		    a.type != FS_DIR)
			return 0;
		ino = next;
	}
	atomic_store(&e->root_ino, ino);
	return ino;
}

/* Free what nfsd_init() and MOUNT set up; n's caller-set fields stay. */
void nfsd_fini(struct nfsd *n)
{
	struct nfsd_mount *m, *next;

	for (m = n->mounts; m; m = next) {
		next = m->next;
		free(m->host);
		free(m->path);
		free(m);
	}
	n->mounts = NULL;
	free(n->async_rules);
	n->async_rules = NULL;
	pthread_mutex_destroy(&n->mounts_lock);
	exports_pub_fini(&n->exports);
}
