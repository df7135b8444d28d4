# bench/s3fs_lib.sh - sourced by the bench scripts that run s3fs-fuse
# beside the gateway on the same bucket (compare.sh, bigwrite.sh).  Needs
# WORK (a temp dir) and the MAPFS_S3_* and AWS_* variables.
#
#   s3fs_mount    s3fs (its defaults, path-style, in the foreground) of the
#                 bucket at $WORK/s3fs-mnt, waited for: S3FS_MNT, S3FS_PID;
#                 returns 1 if it did not mount (its log: $WORK/s3fs.log)
#   s3fs_umount   unmounts it, if mounted, and waits for s3fs to end

s3fs_mount() {
	S3FS_MNT=$WORK/s3fs-mnt
	mkdir -p "$S3FS_MNT"
	printf '%s:%s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$WORK/s3fs.passwd"
	chmod 600 "$WORK/s3fs.passwd"
	s3fs "$MAPFS_S3_BUCKET" "$S3FS_MNT" -f -o url="$MAPFS_S3_ENDPOINT" -o use_path_request_style \
		-o passwd_file="$WORK/s3fs.passwd" -o endpoint=us-east-1 -o dbglevel=err \
		>>"$WORK/s3fs.log" 2>&1 &
	S3FS_PID=$!
	for _ in $(seq 300); do mountpoint -q "$S3FS_MNT" && return 0; sleep 0.1; done
	return 1
}

s3fs_umount() {
	[ -n "${S3FS_MNT:-}" ] || return 0
	if mountpoint -q "$S3FS_MNT"; then
		fusermount -u "$S3FS_MNT" 2>/dev/null || umount "$S3FS_MNT" 2>/dev/null ||
			umount -l "$S3FS_MNT" 2>/dev/null || true
	fi
	if [ -n "${S3FS_PID:-}" ]; then
		for _ in $(seq 150); do kill -0 "$S3FS_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$S3FS_PID" 2>/dev/null || true
		wait "$S3FS_PID" 2>/dev/null || true
	fi
	S3FS_PID=
}
