/*
 * tests/fuzz/fuzz_events.c - the S3 event parser (events/parse.h): what
 * anyone who knows the receiver's secret, or a broken sender, posts.
 *
 * Input: a request body.  The parser answers 0 or -EINVAL/-ENOMEM, never
 * more than EV_RECORDS_MAX records, every one with a bucket and a
 * non-empty key; decoding a key never writes past its buffer.
 */
#include <errno.h>
#include <string.h>

#include "events/parse.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ev_batch b;
	char out[64];
	int rc = ev_parse((const char *)data, size, &b);

	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	if (rc)
		return 0;
	FUZZ_CHECK(b.n <= EV_RECORDS_MAX);
	for (size_t i = 0; i < b.n; i++) {
		FUZZ_CHECK(b.recs[i].bucket && b.recs[i].key &&
			   b.recs[i].key[0]);
		if (!ev_key_decode(b.recs[i].key, out, sizeof(out)))
			FUZZ_CHECK(strlen(out) < sizeof(out));
	}
	ev_batch_free(&b);
	return 0;
}
