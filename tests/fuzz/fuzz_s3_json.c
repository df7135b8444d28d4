/*
 * tests/fuzz/fuzz_s3_json.c - the JSON reader of the instance-metadata
 * credentials answer (s3/json.h): what an attacker who can answer for
 * 169.254.169.254 (or a buggy proxy) feeds the gateway.
 *
 * Input: the answer's bytes (cut at the first NUL, as the HTTP body
 * reaches the reader).  For every name the gateway asks, the reader
 * gives NULL or a string no longer than the input.
 */
#include <stdlib.h>
#include <string.h>

#include "s3/json.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = {
		"Code",  "AccessKeyId", "SecretAccessKey",
		"Token", "Expiration",  ""
	};
	char *js = malloc(size + 1);

	if (!js)
		return 0;
	memcpy(js, data, size);
	js[size] = '\0';
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char *v = s3_json_get(js, names[i]);

		FUZZ_CHECK(!v || strlen(v) <= strlen(js));
		free(v);
	}
	free(js);
	return 0;
}
