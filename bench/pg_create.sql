-- bench/pg_create.sql: one create's commit as a gateway sends it (the
-- inode, the directory entry, the key and the directory's cookie record,
-- each new), for pgbench against a database a gateway has set up, with
-- the session settings of a gateway's committers (PGOPTIONS, as
-- bench/cluster.sh sets them; db/pg_commit.c).
\set tok random(1, 1000000000000)
SELECT * FROM mapfs_commit3(1, 7, :tok, '{}'::text[], '{}'::bytea[], '{}'::bigint[], ARRAY['inodes','dirents','keys','dircookies']::text[], ARRAY[int8send(:tok::bigint), int8send(:tok::bigint+1), int8send(:tok::bigint+2), int8send(:tok::bigint+3)]::bytea[], ARRAY['\x0102030405060708091011121314151617181920'::bytea,'\x01'::bytea,'\x02'::bytea,'\x03'::bytea], ARRAY[0,0,0,0]::bigint[]);
