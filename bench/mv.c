/*
 * mapfs-mv: one RENAME through NFS, as `mv OLD NEW` on a mount does it,
 * for benches that time what follows in the store (bench/rename.sh).
 *
 *   mapfs-mv 'nfs://HOST/EXPORT?nfsport=P&mountport=Q&version=3' OLD NEW
 *
 * OLD and NEW are paths under the export ("/dir", "/a/b").  Prints the
 * RENAME's time in milliseconds; exits 0, or 1 with the server's error.
 */
#include <nfsc/libnfs.h>
#include <stdio.h>
#include <time.h>

int main(int argc, char **argv)
{
	struct nfs_context *nfs;
	struct nfs_url *url;
	struct timespec a, b;
	int rc;

	if (argc != 4) {
		fprintf(stderr, "usage: mapfs-mv NFS-URL OLD NEW\n");
		return 2;
	}
	nfs = nfs_init_context();
	if (!nfs)
		return 1;
	url = nfs_parse_url_dir(nfs, argv[1]);
	if (!url || nfs_mount(nfs, url->server, url->path)) {
		fprintf(stderr, "mapfs-mv: %s: %s\n", argv[1],
			nfs_get_error(nfs));
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	rc = nfs_rename(nfs, argv[2], argv[3]);
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (rc) {
		fprintf(stderr, "mapfs-mv: RENAME %s %s: %s\n", argv[2],
			argv[3], nfs_get_error(nfs));
	} else {
		printf("%.1f\n", (double)(b.tv_sec - a.tv_sec) * 1e3 +
					 (double)(b.tv_nsec - a.tv_nsec) / 1e6);
	}
	nfs_destroy_url(url);
	nfs_destroy_context(nfs);
	return rc ? 1 : 0;
}
