/*
 * nfsd/nfsd.c - the state shared by the NFS and MOUNT programs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/random.h>

#include "nfsd/nfsd.h"

#define NFSD_XFER_DEFAULT (1u << 20) /* rtmax/wtmax when unset: 1 MiB */

/* Initialise n; fs, key and export fields are set by the caller first. */
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
	rc = pthread_mutex_init(&n->mounts_lock, NULL);
	return -rc;
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
	pthread_mutex_destroy(&n->mounts_lock);
}
