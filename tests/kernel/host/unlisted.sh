# Host side of the kernel first-walk test: 2,500 objects put into the
# file store by hand before the gateway starts, as another writer would,
# so that big/ is a directory no gateway has listed (guest/unlisted.sh).
host_setup() {
  mkdir -p "$RUN/store/big" || return 1
  (cd "$RUN/store/big" && for i in $(seq -w 0 2499); do
    printf '%s\n' "$i" > "f$i"; done)
}
host_drive() { :; }
host_check() { :; }
