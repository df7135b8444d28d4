# Who may change what, through the kernel client (issue 33; each check
# here is one pjdfstest found failing): set-id bits taken away by a
# user's write or truncate and by chown; chown by a non-owner refused
# even when it changes nothing, for every type; the sticky rule on both
# names of a rename; a directory moved to another parent only by who may
# write it; a path past the store's key limit refused with ENAMETOOLONG
# at the call that crosses it, never ENOENT.  fsop (helpers/fsop.c)
# prints 0 or the errno's name of one call made as the given user.
. /kt/lib.sh
D=/mnt/perms
rm -rf "$D"; mkdir -p "$D"; chmod 0777 "$D"
U="-u 65534 -g 65534" O="-u 65533 -g 65533"
# is WANT CMD...: the command prints WANT.
is() {
  want=$1; shift
  got=$("$@" 2>&1)
  [ "$got" = "$want" ] || { echo "want '$want', got '$got': $*"; return 1; }
}

# 1. set-id: a write or truncate by a user clears S_ISUID, and S_ISGID
#    with group execute; root keeps them; chown clears them for anyone.
t write-clears-suid    sh -c "echo d > $D/s1 && chmod 4777 $D/s1 && [ \$(fsop $U write $D/s1) = 0 ] && [ \$(fsop mode $D/s1) = 777 ]"
t write-clears-sgid    sh -c "echo d > $D/s2 && chmod 2777 $D/s2 && [ \$(fsop $U write $D/s2) = 0 ] && [ \$(fsop mode $D/s2) = 777 ]"
t write-keeps-sgid-nox sh -c "echo d > $D/s3 && chmod 2766 $D/s3 && [ \$(fsop $U write $D/s3) = 0 ] && [ \$(fsop mode $D/s3) = 2766 ]"
t write-by-root-keeps  sh -c "echo d > $D/s4 && chmod 6777 $D/s4 && [ \$(fsop write $D/s4) = 0 ] && [ \$(fsop mode $D/s4) = 6777 ]"
t truncate-clears      sh -c "echo d > $D/s5 && chmod 6777 $D/s5 && [ \$(fsop $U truncate $D/s5 0) = 0 ] && [ \$(fsop mode $D/s5) = 777 ]"
t seen-after-reread    sh -c "echo 3 > /proc/sys/vm/drop_caches; [ \$(fsop mode $D/s1) = 777 ] && [ \$(fsop mode $D/s5) = 777 ]"
t chown-clears         sh -c "echo d > $D/s6 && chmod 6755 $D/s6 && [ \$(fsop chown $D/s6 65534 65534) = 0 ] && [ \$(fsop mode $D/s6) = 755 ]"
t chown-dir-keeps-sgid sh -c "mkdir $D/sd && chmod 2775 $D/sd && [ \$(fsop chown $D/sd 65534 65534) = 0 ] && [ \$(fsop mode $D/sd) = 2775 ]"

# 2. chown by a non-owner to the present owner: EPERM, every type.
mkdir "$D/own"; chmod 0777 "$D/own"
t make-every-type      sh -c "echo f > $D/own/file && mkdir $D/own/dir && mkfifo $D/own/fifo && mknod $D/own/chr c 1 3 && [ \$(fsop mksock $D/own/sock) = 0 ] && ln -s file $D/own/sym && chown -h 65533:65533 $D/own/file $D/own/dir $D/own/fifo $D/own/chr $D/own/sock $D/own/sym"
for ty in file dir fifo chr sock; do
  t "chown-nonowner-$ty"  is EPERM fsop $U chown "$D/own/$ty" 65533 65533
  t "chown-owner-$ty"     is 0 fsop $O chown "$D/own/$ty" 65533 65533
done
t lchown-nonowner-sym  is EPERM fsop $U lchown "$D/own/sym" 65533 65533
t lchown-owner-sym     is 0 fsop $O lchown "$D/own/sym" 65533 65533

# 3. a sticky directory: others' names are neither moved away nor
#    replaced; the file's owner and the directory's owner may.
mkdir "$D/box" "$D/pub"; chmod 1777 "$D/box"; chmod 0777 "$D/pub"
t sticky-setup         sh -c "[ \$(fsop $O create $D/box/theirs 644) = 0 ] && [ \$(fsop $U create $D/box/mine 644) = 0 ] && [ \$(fsop $O mkdir $D/box/theirdir 755) = 0 ]"
t sticky-rename-away   is EPERM fsop $U rename "$D/box/theirs" "$D/pub/took"
t sticky-rename-inbox  is EPERM fsop $U rename "$D/box/theirs" "$D/box/renamed"
t sticky-rename-over   is EPERM fsop $U rename "$D/box/mine" "$D/box/theirs"
t sticky-rename-dir    is EPERM fsop $U rename "$D/box/theirdir" "$D/pub/theirdir"
t sticky-still-there   sh -c "[ -f $D/box/theirs ] && [ -f $D/box/mine ] && [ -d $D/box/theirdir ] && [ ! -e $D/pub/took ]"
t sticky-owner-may     is 0 fsop $O rename "$D/box/theirs" "$D/pub/moved"
t sticky-root-may      is 0 fsop rename "$D/box/mine" "$D/box/by-root"

# 4. root's directory in 65534's own sticky box: it may rename it in
#    place, not move it to another parent (its ".." would change).
mkdir "$D/ubox"; chmod 1777 "$D/ubox"; chown 65534:65534 "$D/ubox"; mkdir "$D/ubox/rootdir"
t dir-move-needs-write is EACCES fsop $U rename "$D/ubox/rootdir" "$D/pub/rootdir"
t dir-rename-in-place  is 0 fsop $U rename "$D/ubox/rootdir" "$D/ubox/inplace"

# 5. long paths: 255-byte names until the store's key limit; the call
#    that would cross it says ENAMETOOLONG, of every kind.
N=$(printf 'n%.0s' $(seq 255))
P=$D/long
mkdir "$P"
depth=0 last=0
while [ $depth -lt 20 ]; do
  last=$(fsop mkdir "$P/$N" 755)
  [ "$last" = 0 ] || break
  P=$P/$N; depth=$((depth+1))
done
t long-mkdir-refused   is ENAMETOOLONG echo "$last"
t long-depth-reached   sh -c "[ $depth -ge 2 ]"
t long-create          is ENAMETOOLONG fsop create "$P/$N" 644
t long-mkfifo          is ENAMETOOLONG fsop mkfifo "$P/$N" 644
t long-mknod           is ENAMETOOLONG fsop mknod-chr "$P/$N" 1 3
t long-symlink         is ENAMETOOLONG fsop symlink x "$P/$N"
t long-link            sh -c "echo l > $D/long/f && [ \$(fsop link $D/long/f $P/$N) = ENAMETOOLONG ]"
t long-rename-file     is ENAMETOOLONG fsop rename "$D/long/f" "$P/$N"
t long-rename-dir      sh -c "mkdir -p $D/long/sub/$N && [ \$(fsop rename $D/long/sub $P/x) = ENAMETOOLONG ] && [ -d $D/long/sub/$N ]"
t long-short-fits      is 0 fsop create "$P/x" 644
t rm-rf-all            sh -c "rm -rf $D && [ ! -e $D ]"
summary
