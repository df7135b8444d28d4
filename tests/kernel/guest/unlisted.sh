# The guest of the kernel first-walk test (host/unlisted.sh): big/ holds
# 2,500 objects the gateway has never listed (three pages of its store's
# listing, merged page by page while the kernel reads the directory,
# issue 18).  ls, ls -l and find see each name once, with its size; a
# file reads back; a second walk, from the gateway's namespace now, sees
# the same.
. /kt/lib.sh
D=/mnt/big
t ls-2500             sh -c "ls $D > /tmp/ls1 && [ \$(wc -l < /tmp/ls1) -eq 2500 ] && [ \$(sort -u /tmp/ls1 | wc -l) -eq 2500 ]"
t ls-l-sizes          sh -c "[ \$(ls -l $D | grep -c '^-.* 5 .* f[0-9][0-9][0-9][0-9]\$') -eq 2500 ]"
t find-2500           sh -c "[ \$(find $D -type f | wc -l) -eq 2500 ]"
t read-one            sh -c "[ \"\$(cat $D/f1234)\" = 1234 ]"
t again-same          sh -c "sync; echo 3 > /proc/sys/vm/drop_caches; ls $D > /tmp/ls2 && cmp /tmp/ls1 /tmp/ls2"
summary
