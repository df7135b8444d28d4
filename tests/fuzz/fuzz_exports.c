/*
 * tests/fuzz/fuzz_exports.c - the exports(5) parser (nfsd/exports.h), the
 * one text an administrator's typo reaches.
 *
 * Input: the file's text.  Host names are not resolved (no DNS in a
 * fuzzer): they are an error like any other.  Whatever the text, the
 * parser either fails with a message naming the file and a line, or
 * gives a table whose every export lies at or below the base, has at
 * least one rule, and matches peers without reading out of bounds.
 */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "nfsd/exports.h"
#include "tests/fuzz/fuzz.h"

static void check_table(const struct exports *t)
{
	struct sockaddr_in v4 = { .sin_family = AF_INET,
				  .sin_port = htons(800),
				  .sin_addr.s_addr = htonl(0x0a000001) };
	struct sockaddr_in6 v6 = { .sin6_family = AF_INET6,
				   .sin6_port = htons(40000) };
	struct sockaddr_storage a, b;

	memcpy(&a, &v4, sizeof(v4));
	v6.sin6_addr.s6_addr[0] = 0xfd;
	memcpy(&b, &v6, sizeof(v6));
	FUZZ_CHECK(!strcmp(t->base, "/mapfs"));
	for (size_t i = 0; i < t->n; i++) {
		const struct exports_entry *e = &t->entries[i];

		const char *below = exports_path_below(e->path, t->base);

		FUZZ_CHECK(below && !strcmp(below, e->below));
		FUZZ_CHECK(e->nrules > 0);
		for (size_t j = 0; j < e->nrules; j++)
			FUZZ_CHECK(e->rules[j].any || e->rules[j].nnets > 0);
		(void)exports_match(e, &a);
		(void)exports_match(e, &b);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct exports *t = NULL;
	char err[512] = "";
	int rc;

	rc = exports_parse_flags((const char *)data, size, "fuzz", "/mapfs",
				 EXPORTS_PARSE_NO_RESOLVE, &t, err,
				 sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	if (rc) {
		FUZZ_CHECK(!strncmp(err, "fuzz", 4));
		return 0;
	}
	check_table(t);
	exports_free(t);
	return 0;
}
