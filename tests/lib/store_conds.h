/*
 * tests/lib/store_conds.h - one conformance check of a store's
 * conditional writes and pinned reads (s3/store.h: the *_if calls), run
 * against every backend by its unit test (file store, radosgw).
 */
#ifndef MAPFS_TEST_STORE_CONDS_H
#define MAPFS_TEST_STORE_CONDS_H

#include "s3/store.h"

/*
 * Exercise the conditions on keys under prefix (made and deleted here):
 * NULL if the store kept every promise, else what it broke (a static
 * string naming the step).
 */
const char *store_conds_check(struct store *st, const char *prefix);

#endif
