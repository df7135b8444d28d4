/* Unit tests for nfsd/errmap.c: every row of errno -> nfsstat3. */
#include <CUnit/Basic.h>
#include <errno.h>

#include "nfsd/nfsd.h"

/* Expected values written out as RFC 1813 section 2.6 numbers them. */
static const struct {
	int err, stat;
} rows[] = {
	{ 0, 0 },
	{ -EPERM, 1 },
	{ -ENOENT, 2 },
	{ -EIO, 5 },
	{ -ENXIO, 6 },
	{ -EACCES, 13 },
	{ -EEXIST, 17 },
	{ -EXDEV, 18 },
	{ -ENODEV, 19 },
	{ -ENOTDIR, 20 },
	{ -EISDIR, 21 },
	{ -EINVAL, 22 },
	{ -EFBIG, 27 },
	{ -ENOSPC, 28 },
	{ -EROFS, 30 },
	{ -EMLINK, 31 },
	{ -ENAMETOOLONG, 63 },
	{ -ENOTEMPTY, 66 },
	{ -EDQUOT, 69 },
	{ -ESTALE, 70 },
	{ -EREMOTE, 71 },
	{ -EBADF, 10001 },     /* BADHANDLE */
	{ -ECANCELED, 10002 }, /* NOT_SYNC */
	{ -ENOTSUP, 10004 },   /* NOTSUPP */
	{ -EOPNOTSUPP, 10004 },
	{ -ENOBUFS, 10005 },    /* TOOSMALL */
	{ -EFAULT, 10006 },     /* SERVERFAULT */
	{ -EPROTOTYPE, 10007 }, /* BADTYPE */
	{ -EAGAIN, 10008 },     /* JUKEBOX */
	{ -ETIMEDOUT, 10008 },
	{ -ECONNREFUSED, 10008 },
	{ -EHOSTUNREACH, 10008 },
	{ -ENETUNREACH, 10008 },
	{ -ECONNRESET, 10008 },
	{ -ENOMEM, 10008 },
};

static void test_rows(void)
{
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int got = nfsd_errno_to_stat(rows[i].err);

		if (got != rows[i].stat)
			fprintf(stderr, "errno %d: got %d, want %d\n",
				-rows[i].err, got, rows[i].stat);
		CU_ASSERT(got == rows[i].stat);
	}
}

static void test_unknown_is_io(void)
{
	CU_ASSERT(nfsd_errno_to_stat(-ENOLINK) == 5);
	CU_ASSERT(nfsd_errno_to_stat(-ETXTBSY) == 5);
	CU_ASSERT(nfsd_errno_to_stat(-EBUSY) == 5);
	CU_ASSERT(nfsd_errno_to_stat(-4095) == 5);
	CU_ASSERT(nfsd_errno_to_stat(-100000) == 5);
}

int main(void)
{
	CU_initialize_registry();
	CU_pSuite s = CU_add_suite("errmap", NULL, NULL);
	CU_add_test(s, "every row", test_rows);
	CU_add_test(s, "unknown errno is NFS3ERR_IO", test_unknown_is_io);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned failed = CU_get_number_of_failures();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
