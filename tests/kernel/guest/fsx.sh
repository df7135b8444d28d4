# A file-system exerciser run through the kernel client: random writes,
# reads, truncates, fsyncs and reopens, all checked against a model.
. /kt/lib.sh
t fsx-seed-1  fsx /mnt/fsx.1 ${FSX_OPS:-1500} 0x5eed1
t fsx-seed-2  fsx /mnt/fsx.2 ${FSX_OPS:-1500} 0x5eed2
cat /tmp/t.out
summary
