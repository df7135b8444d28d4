/*
 * tests/fuzz/corpus_gen.c - writes the seed corpus of tests/fuzz/corpus/.
 *
 *   fuzz_corpus_gen DIR    writes DIR/<target>/<seed> for every target
 *
 * The seeds are well-formed inputs built with the project's own encoders
 * (rpcgen codecs, handle_encode), so each target starts from calls a real
 * client sends and from handles that carry a valid MAC under fuzz_key:
 * random bytes would never get past the first check.  Run it again when
 * a wire format changes; the output is deterministic.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

#include "mountd/mount3_prot.h"
#include "nfsd/nfs3_internal.h"
#include "tests/fuzz/fuzz.h"

#define SEED_MAX 4096

static const char *out_root;

static void seed_write(const char *target, const char *name, const void *p,
		       size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", out_root, target);
	if (mkdir(path, 0755) && errno != EEXIST) {
		perror(path);
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/%s/%s", out_root, target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, len, f) != len || fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* A seed of the nfs_args target: selector byte, then the XDR arguments. */
struct xbuf {
	uint8_t b[SEED_MAX];
	size_t len;
};

static void xdr_put(struct xbuf *xb, xdrproc_t proc, void *obj)
{
	XDR x;

	xdrmem_create(&x, (char *)xb->b + xb->len,
		      (u_int)(sizeof(xb->b) - xb->len), XDR_ENCODE);
	if (!proc(&x, obj)) {
		fprintf(stderr, "corpus_gen: encode failed\n");
		exit(1);
	}
	xb->len += xdr_getpos(&x);
	xdr_destroy(&x);
}

static void put_u32(struct xbuf *xb, uint32_t v)
{
	xdr_put(xb, (xdrproc_t)xdr_u_int, &v);
}

/* Handles: the export root (inode 1) and a file, both genuine. */
static uint8_t root_fh[HANDLE_LEN], file_fh[HANDLE_LEN];

static nfs_fh3 fh(uint8_t *h)
{
	return (nfs_fh3){ .data = { HANDLE_LEN, (char *)h } };
}

static filename3 name(const char *s)
{
	return (filename3){ (u_int)strlen(s), (char *)s };
}

/* Seed NAME of procedure proc (0..21 NFS, 22.. MOUNT) with args obj. */
static void args_seed(const char *seed, unsigned sel, xdrproc_t proc, void *obj)
{
	struct xbuf xb = { .len = 1 };

	xb.b[0] = (uint8_t)sel;
	xdr_put(&xb, proc, obj);
	seed_write("nfs_args", seed, xb.b, xb.len);
}

static void nfs_args_seeds(void)
{
	sattr3 sa = { .mode = { TRUE, { 0644 } },
		      .uid = { TRUE, { 1000 } },
		      .size = { TRUE, { 4096 } },
		      .mtime = { SET_TO_CLIENT_TIME, { { 1700000000, 500 } } },
		      .atime = { .set_it = SET_TO_SERVER_TIME } };
	diropargs3 where = { fh(root_fh), name("file.txt") };
	char data[] = "hello, world\n";
	const char *mnt = "/mapfs/sub/dir";
	const char *umnt = "/mapfs";

	args_seed("getattr", NFSPROC3_GETATTR, (xdrproc_t)xdr_GETATTR3args,
		  &(GETATTR3args){ fh(file_fh) });
	args_seed("setattr", NFSPROC3_SETATTR, (xdrproc_t)xdr_SETATTR3args,
		  &(SETATTR3args){
			  fh(file_fh), sa, { TRUE, { { 1700000000, 1 } } } });
	args_seed("lookup", NFSPROC3_LOOKUP, (xdrproc_t)xdr_LOOKUP3args,
		  &(LOOKUP3args){ where });
	args_seed("lookup_dotdot", NFSPROC3_LOOKUP, (xdrproc_t)xdr_LOOKUP3args,
		  &(LOOKUP3args){ { fh(root_fh), name("..") } });
	args_seed("access", NFSPROC3_ACCESS, (xdrproc_t)xdr_ACCESS3args,
		  &(ACCESS3args){ fh(file_fh), 0x3f });
	args_seed("readlink", NFSPROC3_READLINK, (xdrproc_t)xdr_READLINK3args,
		  &(READLINK3args){ fh(file_fh) });
	args_seed("read", NFSPROC3_READ, (xdrproc_t)xdr_READ3args,
		  &(READ3args){ fh(file_fh), 8192, 131072 });
	args_seed("write", NFSPROC3_WRITE, (xdrproc_t)xdr_WRITE3args,
		  &(WRITE3args){ fh(file_fh),
				 0,
				 sizeof(data) - 1,
				 FILE_SYNC,
				 { sizeof(data) - 1, data } });
	args_seed(
		"create", NFSPROC3_CREATE, (xdrproc_t)xdr_CREATE3args,
		&(CREATE3args){ where, { GUARDED, { .obj_attributes = sa } } });
	args_seed(
		"create_excl", NFSPROC3_CREATE, (xdrproc_t)xdr_CREATE3args,
		&(CREATE3args){ where, { EXCLUSIVE, { .verf = "verifier" } } });
	args_seed("mkdir", NFSPROC3_MKDIR, (xdrproc_t)xdr_MKDIR3args,
		  &(MKDIR3args){ { fh(root_fh), name("dir") }, sa });
	args_seed("symlink", NFSPROC3_SYMLINK, (xdrproc_t)xdr_SYMLINK3args,
		  &(SYMLINK3args){ { fh(root_fh), name("link") },
				   { sa, { 9, "../target" } } });
	args_seed("mknod", NFSPROC3_MKNOD, (xdrproc_t)xdr_MKNOD3args,
		  &(MKNOD3args){ { fh(root_fh), name("dev") },
				 { NF3CHR, { .device = { sa, { 1, 3 } } } } });
	args_seed("mknod_fifo", NFSPROC3_MKNOD, (xdrproc_t)xdr_MKNOD3args,
		  &(MKNOD3args){ { fh(root_fh), name("fifo") },
				 { NF3FIFO, { .pipe_attributes = sa } } });
	args_seed("remove", NFSPROC3_REMOVE, (xdrproc_t)xdr_REMOVE3args,
		  &(REMOVE3args){ where });
	args_seed("rmdir", NFSPROC3_RMDIR, (xdrproc_t)xdr_RMDIR3args,
		  &(RMDIR3args){ { fh(root_fh), name("dir") } });
	args_seed("rename", NFSPROC3_RENAME, (xdrproc_t)xdr_RENAME3args,
		  &(RENAME3args){ where, { fh(root_fh), name("new.txt") } });
	args_seed("link", NFSPROC3_LINK, (xdrproc_t)xdr_LINK3args,
		  &(LINK3args){ fh(file_fh), { fh(root_fh), name("hard") } });
	args_seed("readdir", NFSPROC3_READDIR, (xdrproc_t)xdr_READDIR3args,
		  &(READDIR3args){ fh(root_fh), 0, { 0 }, 4096 });
	args_seed(
		"readdirplus", NFSPROC3_READDIRPLUS,
		(xdrproc_t)xdr_READDIRPLUS3args,
		&(READDIRPLUS3args){ fh(root_fh), 3, "cookieve", 4096, 32768 });
	args_seed("fsstat", NFSPROC3_FSSTAT, (xdrproc_t)xdr_FSSTAT3args,
		  &(FSSTAT3args){ fh(root_fh) });
	args_seed("fsinfo", NFSPROC3_FSINFO, (xdrproc_t)xdr_FSINFO3args,
		  &(FSINFO3args){ fh(root_fh) });
	args_seed("pathconf", NFSPROC3_PATHCONF, (xdrproc_t)xdr_PATHCONF3args,
		  &(PATHCONF3args){ fh(root_fh) });
	args_seed("commit", NFSPROC3_COMMIT, (xdrproc_t)xdr_COMMIT3args,
		  &(COMMIT3args){ fh(file_fh), 0, 0 });
	/* MOUNT follows NFS's 22 procedures in the selector. */
	args_seed("mnt", 22 + MOUNTPROC3_MNT, (xdrproc_t)xdr_mnt3_dirpath,
		  &mnt);
	args_seed("umnt", 22 + MOUNTPROC3_UMNT, (xdrproc_t)xdr_mnt3_dirpath,
		  &umnt);
}

/*
 * A call record: xid, CALL, rpcvers, prog, vers, proc, credential,
 * AUTH_NONE verifier, then args (already XDR).
 */
static void call_put(struct xbuf *xb, uint32_t xid, uint32_t prog,
		     uint32_t vers, uint32_t proc, bool auth_sys,
		     const struct xbuf *args)
{
	static const uint32_t gids[] = { 1000, 27, 100 };

	put_u32(xb, xid);
	put_u32(xb, CALL);
	put_u32(xb, 2);
	put_u32(xb, prog);
	put_u32(xb, vers);
	put_u32(xb, proc);
	if (auth_sys) {
		/* stamp, "client" (6 + 2 pad), uid, gid, 3 gids */
		put_u32(xb, AUTH_SYS);
		put_u32(xb, 4 + 4 + 8 + 4 + 4 + 4 + 3 * 4);
		put_u32(xb, 0x12345678);
		put_u32(xb, 6);
		memcpy(xb->b + xb->len, "client\0\0", 8);
		xb->len += 8;
		put_u32(xb, 1000);
		put_u32(xb, 1000);
		put_u32(xb, 3);
		for (int i = 0; i < 3; i++)
			put_u32(xb, gids[i]);
	} else {
		put_u32(xb, AUTH_NONE);
		put_u32(xb, 0);
	}
	put_u32(xb, AUTH_NONE);
	put_u32(xb, 0);
	memcpy(xb->b + xb->len, args->b, args->len);
	xb->len += args->len;
}

/* Frame rec as record marks: in frags fragments, the last one flagged. */
static void record_put(struct xbuf *out, const struct xbuf *rec, int frags)
{
	size_t off = 0, step = rec->len / (size_t)frags;

	for (int i = 0; i < frags; i++) {
		size_t n = i == frags - 1 ? rec->len - off : step;

		put_u32(out, (i == frags - 1 ? 0x80000000u : 0) | (uint32_t)n);
		memcpy(out->b + out->len, rec->b + off, n);
		out->len += n;
		off += n;
	}
}

/* A stream seed: the 4-byte split seed, then the framed records. */
static void stream_seed(const char *seed, uint32_t split, struct xbuf *recs[],
			int nrecs, int frags)
{
	struct xbuf out = { .len = 0 };

	put_u32(&out, split);
	for (int i = 0; i < nrecs; i++)
		record_put(&out, recs[i], frags);
	seed_write("rpc_record", seed, out.b, out.len);
}

static void rpc_record_seeds(void)
{
	struct xbuf none = { .len = 0 }, getattr = { .len = 0 };
	struct xbuf null_call = { .len = 0 }, ga_call = { .len = 0 };
	struct xbuf mnt_call = { .len = 0 }, mnt = { .len = 0 };
	struct xbuf bad_vers = { .len = 0 }, bad_cred = { .len = 0 };
	struct xbuf reply = { .len = 0 };
	const char *path = "/mapfs";

	xdr_put(&getattr, (xdrproc_t)xdr_GETATTR3args,
		&(GETATTR3args){ fh(file_fh) });
	xdr_put(&mnt, (xdrproc_t)xdr_mnt3_dirpath, &path);
	call_put(&null_call, 1, NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, false,
		 &none);
	call_put(&ga_call, 2, NFS_PROGRAM, NFS_V3, NFSPROC3_GETATTR, true,
		 &getattr);
	call_put(&mnt_call, 3, MOUNT_PROGRAM, MOUNT_V3, MOUNTPROC3_MNT, true,
		 &mnt);
	call_put(&bad_cred, 4, NFS_PROGRAM, NFS_V3, NFSPROC3_GETATTR, true,
		 &getattr);
	/* Credential length one word short of its body. */
	bad_cred.b[7 * 4 + 3] -= 4;
	call_put(&bad_vers, 5, NFS_PROGRAM, NFS_V3, NFSPROC3_NULL, false,
		 &none);
	bad_vers.b[2 * 4 + 3] = 3;
	put_u32(&reply, 6);
	put_u32(&reply, REPLY);
	put_u32(&reply, MSG_ACCEPTED);

	stream_seed("null", 0x01000000, (struct xbuf *[]){ &null_call }, 1, 1);
	stream_seed("getattr_authsys", 0x02000000,
		    (struct xbuf *[]){ &ga_call }, 1, 1);
	stream_seed("getattr_3frags", 0x03000000, (struct xbuf *[]){ &ga_call },
		    1, 3);
	stream_seed("mnt", 0x04000000, (struct xbuf *[]){ &mnt_call }, 1, 1);
	stream_seed("pipeline", 0x05000000,
		    (struct xbuf *[]){ &null_call, &ga_call, &mnt_call }, 3, 1);
	stream_seed("bad_cred", 0x06000000, (struct xbuf *[]){ &bad_cred }, 1,
		    1);
	stream_seed("bad_rpcvers", 0x07000000, (struct xbuf *[]){ &bad_vers },
		    1, 1);
	stream_seed("reply", 0x08000000, (struct xbuf *[]){ &reply }, 1, 1);
	/* Bit 15 of the split seed: a small record limit (fuzz_rpc_record). */
	stream_seed("small_limit", 0x00408000, (struct xbuf *[]){ &ga_call }, 1,
		    2);
}

static void handle_seeds(void)
{
	uint8_t raw[1 + HANDLE_LEN], alt[1 + 16 + HANDLE_LEN] = { 1 };
	static const uint8_t fields[16] = { 0, 0, 0, FUZZ_EXPORT_ID, 0, 0, 0,
					    0, 0, 0, 0x10,           0, 0, 0,
					    0, 2 };

	raw[0] = 0;
	memcpy(raw + 1, file_fh, HANDLE_LEN);
	seed_write("handle", "genuine", raw, sizeof(raw));
	raw[1 + 10] ^= 1;
	seed_write("handle", "inode_flipped", raw, sizeof(raw));
	seed_write("handle", "short", raw, HANDLE_LEN);
	memcpy(alt + 1, fields, 16);
	seed_write("handle", "altered_none", alt, 1 + 16);
	alt[1 + 16 + 27] = 0x80;
	seed_write("handle", "altered_mac", alt, sizeof(alt));
}

#define NS "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\""
#define HDR "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"

/* A seed of fuzz_s3_xml: reader selector byte, then the body. */
static void xml_seed(const char *seed, uint8_t sel, const char *doc)
{
	uint8_t b[SEED_MAX];
	size_t len = strlen(doc);

	b[0] = sel;
	memcpy(b + 1, doc, len);
	seed_write("s3_xml", seed, b, 1 + len);
}

static void s3_xml_seeds(void)
{
	xml_seed("error", 0,
		 HDR
		 "<Error><Code>NoSuchKey</Code>"
		 "<Message>The resource you requested does not exist</Message>"
		 "<Resource>/mybucket/myfoto.jpg</Resource>"
		 "<RequestId>4442587FB7D0A2F9</RequestId></Error>");
	xml_seed("list", 1,
		 HDR
		 "<ListBucketResult " NS ">"
		 "<Name>bucket</Name><Prefix></Prefix><KeyCount>2</KeyCount>"
		 "<MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter>"
		 "<IsTruncated>true</IsTruncated>"
		 "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/"
		 "wm36Hy4vbOwM=</NextContinuationToken>"
		 "<Contents><Key>a.txt</Key>"
		 "<LastModified>2009-10-12T17:50:30.000Z</LastModified>"
		 "<ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag>"
		 "<Size>434234</Size><StorageClass>STANDARD</StorageClass>"
		 "</Contents>"
		 "<CommonPrefixes><Prefix>photos/</Prefix></CommonPrefixes>"
		 "</ListBucketResult>");
	xml_seed("list_url_prefix", 0x81,
		 HDR
		 "<ListBucketResult " NS ">"
		 "<EncodingType>url</EncodingType>"
		 "<IsTruncated>false</IsTruncated>"
		 "<Contents><Key>pre/a%20b+c%2Fd</Key><Size>0</Size>"
		 "<ETag>\"x-2\"</ETag>"
		 "<LastModified>1970-01-01T00:00:01.5Z</LastModified>"
		 "</Contents><Contents><Key>pre/</Key><Size>0</Size></Contents>"
		 "<CommonPrefixes><Prefix>pre/dir%2F/</Prefix></CommonPrefixes>"
		 "</ListBucketResult>");
	xml_seed(
		"upload_id", 2,
		HDR
		"<InitiateMultipartUploadResult " NS ">"
		"<Bucket>bucket</Bucket><Key>big</Key>"
		"<UploadId>VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVw"
		"</UploadId></InitiateMultipartUploadResult>");
	xml_seed("copy_object", 0x83,
		 HDR "<CopyObjectResult " NS ">"
		     "<LastModified>2009-10-28T22:32:00.000Z</LastModified>"
		     "<ETag>\"9b2cf535f27731c974343645a3985328\"</ETag>"
		     "</CopyObjectResult>");
	xml_seed("copy_part", 0x84,
		 HDR "<CopyPartResult>"
		     "<LastModified>2011-04-11T20:34:56.000Z</LastModified>"
		     "<ETag>\"9b2cf535f27731c974343645a3985328\"</ETag>"
		     "</CopyPartResult>");
	xml_seed("complete", 5,
		 HDR "<CompleteMultipartUploadResult " NS ">"
		     "<Location>http://b.s3.amazonaws.com/big</Location>"
		     "<Bucket>b</Bucket><Key>big</Key>"
		     "<ETag>\"3858f62230ac3c915f300c664312c11f-9\"</ETag>"
		     "</CompleteMultipartUploadResult>");
	xml_seed("uploads", 6,
		 HDR
		 "<ListMultipartUploadsResult " NS ">"
		 "<Bucket>b</Bucket><IsTruncated>true</IsTruncated>"
		 "<NextKeyMarker>my-movie.m2ts</NextKeyMarker>"
		 "<NextUploadIdMarker>YW55IGlkZWEgd2h5</NextUploadIdMarker>"
		 "<Upload><Key>my-divisor</Key><UploadId>XMgbGlrZSBlbHZpbmcn"
		 "</UploadId><Initiated>2010-11-10T20:48:33.000Z</Initiated>"
		 "</Upload></ListMultipartUploadsResult>");
	xml_seed("delete_result", 7,
		 HDR "<DeleteResult " NS ">"
		     "<Deleted><Key>sample1.txt</Key></Deleted>"
		     "<Error><Key>sample2.txt</Key><Code>AccessDenied</Code>"
		     "<Message>Access Denied</Message></Error></DeleteResult>");
	xml_seed("doctype", 0,
		 HDR "<!DOCTYPE Error [<!ENTITY a \"aaaa\">]>"
		     "<Error><Code>&a;</Code></Error>");
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz_corpus_gen DIR\n");
		return 2;
	}
	out_root = argv[1];
	if (mkdir(out_root, 0755) && errno != EEXIST) {
		perror(out_root);
		return 1;
	}
	handle_encode(&fuzz_key, FUZZ_EXPORT_ID, 1, 1, root_fh);
	handle_encode(&fuzz_key, FUZZ_EXPORT_ID, 4096, 2, file_fh);
	nfs_args_seeds();
	rpc_record_seeds();
	handle_seeds();
	s3_xml_seeds();
	return 0;
}
