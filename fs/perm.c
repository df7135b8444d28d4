/*
 * fs/perm.c - POSIX permission checks against the caller's AUTH_SYS
 * credentials (uid, gid, supplementary gids).
 */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs_int.h"

bool fs_in_group(const struct fs_ctx *ctx, uint32_t gid)
{
	if (ctx->gid == gid)
		return true;
	for (uint32_t i = 0; i < ctx->ngids && i < FS_MAX_GIDS; i++)
		if (ctx->gids[i] == gid)
			return true;
	return false;
}

/*
 * want: R_OK|W_OK|X_OK.  One class of bits applies (owner, else group,
 * else other), as in POSIX.  Root passes everything except execute of a
 * non-directory with no x bit anywhere.
 */
int fs_perm(const struct fs_ctx *ctx, const struct fs_inode *in, int want)
{
	uint32_t bits;

	if (ctx->uid == 0) {
		if ((want & X_OK) && in->type != FS_DIR && !(in->mode & 0111))
			return -EACCES;
		return 0;
	}
	if (ctx->uid == in->uid)
		bits = (in->mode >> 6) & 7;
	else if (fs_in_group(ctx, in->gid))
		bits = (in->mode >> 3) & 7;
	else
		bits = in->mode & 7;
	/* R_OK, W_OK, X_OK are 4, 2, 1: the same layout as the mode bits. */
	return ((uint32_t)want & ~bits) ? -EACCES : 0;
}

/*
 * Sticky directories (S_ISVTX): only the owner of the directory or of
 * the entry (or root) may remove or rename it.
 */
int fs_sticky_check(const struct fs_ctx *ctx, const struct fs_inode *dir,
		    const struct fs_inode *victim)
{
	if (!(dir->mode & S_ISVTX) || ctx->uid == 0 || ctx->uid == dir->uid ||
	    ctx->uid == victim->uid)
		return 0;
	return -EPERM;
}

bool fs_setid_killable(const struct fs_inode *in)
{
	return (in->mode & S_ISUID) ||
	       ((in->mode & S_ISGID) && (in->mode & S_IXGRP));
}

void fs_kill_setid(struct fs_inode *in)
{
	in->mode &= ~(uint32_t)S_ISUID;
	if (in->mode & S_IXGRP)
		in->mode &= ~(uint32_t)S_ISGID;
}
