# POSIX workload through the kernel client: round trips, renames, links,
# hard links (ln, Connectathon's link-and-rename and link/unlink loop, cp -al),
# modes, FIFOs and devices, deep mkdir, a 1000-file tree removed, a tar tree extracted.
. /kt/lib.sh
D=/mnt/posix L=/tmp/local
rm -rf "$D"; mkdir -p "$D" "$L"
t dd-random-local     dd if=/dev/urandom of=$L/r4 bs=65536 count=64
t cp-to-nfs           cp $L/r4 $D/r4
t sha256-roundtrip    sh -c "[ \"\$(sha256sum < $L/r4)\" = \"\$(sha256sum < $D/r4)\" ]"
t dd-nfs-to-nfs       dd if=$D/r4 of=$D/r4.copy bs=4096
t sha256-after-drop   sh -c "sync; echo 3 > /proc/sys/vm/drop_caches; [ \"\$(sha256sum < $L/r4)\" = \"\$(sha256sum < $D/r4.copy)\" ]"
t cp-back             sh -c "cp $D/r4.copy $L/back && cmp $L/r4 $L/back"
t dd-unaligned        sh -c "cp $L/r4 $L/orig && dd if=$L/orig of=$D/r4 bs=777 seek=5 skip=3 count=50 conv=notrunc 2>/dev/null && dd if=$L/orig of=$L/r4 bs=777 seek=5 skip=3 count=50 conv=notrunc 2>/dev/null && ! cmp -s $L/orig $L/r4 && cmp $L/r4 $D/r4"
t mkdir-p             sh -c "mkdir -p $D/a/b/c/d/e && [ -d $D/a/b/c/d/e ]"
t rename-file         sh -c "mv $D/r4.copy $D/a/b/moved && [ -f $D/a/b/moved ] && [ ! -e $D/r4.copy ]"
t rename-over         sh -c "echo one > $D/x && echo two > $D/y && mv -f $D/x $D/y && [ \"\$(cat $D/y)\" = one ] && [ ! -e $D/x ]"
t rename-dir          sh -c "mv $D/a $D/a2 && [ -f $D/a2/b/moved ] && [ -d $D/a2/b/c/d/e ]"
t symlink             sh -c "ln -s a2/b/moved $D/sl && [ -L $D/sl ] && [ \"\$(readlink $D/sl)\" = a2/b/moved ] && cmp $D/sl $D/a2/b/moved"
t mkfifo              sh -c "mkfifo $D/fifo && [ -p $D/fifo ] && (echo through > $D/fifo &) && [ \"\$(cat $D/fifo)\" = through ]"
t mknod-chr           sh -c "mknod $D/null c 1 3 && [ -c $D/null ] && [ \"\$(stat -c %t,%T $D/null)\" = 1,3 ] && echo x > $D/null && rm $D/null $D/fifo"
t ln-hard             sh -c "echo linked > $D/h1 && ln $D/h1 $D/a2/h2 && [ \"\$(stat -c %h $D/h1)\" = 2 ] && [ \"\$(stat -c %i $D/h1)\" = \"\$(stat -c %i $D/a2/h2)\" ] && echo more >> $D/a2/h2 && [ \"\$(tail -1 $D/h1)\" = more ] && rm $D/h1 && [ \"\$(stat -c %h $D/a2/h2)\" = 1 ] && [ \"\$(head -1 $D/a2/h2)\" = linked ]"
t mknod-fifo          sh -c "mknod $D/p p && [ -p $D/p ] && rm $D/p"
t link-rename-test7   sh -c "mkdir $D/t7 && i=0; while [ \$i -lt 20 ]; do echo \$i > $D/t7/f\$i && mv $D/t7/f\$i $D/t7/n\$i && ln $D/t7/n\$i $D/t7/f\$i && [ \$(stat -c %h $D/t7/f\$i) = 2 ] && rm $D/t7/n\$i && [ \$(stat -c %h $D/t7/f\$i) = 1 ] && [ \"\$(cat $D/t7/f\$i)\" = \$i ] || exit 1; i=\$((i+1)); done"
t link-unlink-100     sh -c "echo lr > $D/lr && i=0; while [ \$i -lt 100 ]; do ln $D/lr $D/lr.l && rm $D/lr.l || exit 1; i=\$((i+1)); done; [ \$(stat -c %h $D/lr) = 1 ]"
t cp-al               sh -c "cp -al $D/a2 $D/a2.snap && [ \$(stat -c %h $D/a2.snap/b/moved) = 2 ] && cmp $D/a2/b/moved $D/a2.snap/b/moved && rm -r $D/a2.snap && [ \$(stat -c %h $D/a2/b/moved) = 1 ]"
t chmod               sh -c "chmod 640 $D/y && [ \"\$(stat -c %a $D/y)\" = 640 ] && chmod 711 $D/a2 && [ \"\$(stat -c %a $D/a2)\" = 711 ]"
t tree-1000-create    sh -c "mkdir $D/tree && cd $D/tree && i=0; while [ \$i -lt 1000 ]; do [ \$((i % 100)) = 0 ] && mkdir d\$((i / 100)); echo \$i > d\$((i / 100))/f\$i; i=\$((i+1)); done"
t tree-1000-count     sh -c "[ \"\$(find $D/tree -type f | wc -l)\" -eq 1000 ]"
t rm-rf-1000          sh -c "rm -rf $D/tree && [ ! -e $D/tree ]"
t tar-make-local      sh -c "mkdir -p $L/src/sub/deep && for i in 1 2 3 4 5 6 7 8; do head -c \$((i * 3000)) /dev/urandom > $L/src/f\$i; done && echo hi > $L/src/sub/deep/note && ln -s ../f1 $L/src/sub/link && chmod 600 $L/src/f2 && cd $L && tar cf $L/src.tar src"
t tar-extract         sh -c "cd $D && tar xf $L/src.tar"
t tar-contents        sh -c "cd $L/src && for f in \$(find . -type f); do cmp \$f $D/src/\$f || exit 1; done && [ \"\$(readlink $D/src/sub/link)\" = ../f1 ] && [ \"\$(stat -c %a $D/src/f2)\" = 600 ]"
t rm-rf-all           sh -c "rm -rf $D && [ ! -e $D ]"
summary
