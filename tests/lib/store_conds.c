/* tests/lib/store_conds.c - see store_conds.h. */
#include "tests/lib/store_conds.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct got {
	char buf[64];
	size_t len;
	int calls;
};

static int sink(void *arg, const void *p, size_t n)
{
	struct got *g = arg;

	g->calls++;
	if (g->len + n > sizeof(g->buf))
		return -EOVERFLOW;
	memcpy(g->buf + g->len, p, n);
	g->len += n;
	return 0;
}

/* Does key hold exactly want? */
static bool holds(struct store *st, const char *key, const char *want)
{
	struct got g = { .len = 0 };
	uint64_t n;

	return store_get_stream(st, key, 0, sizeof(g.buf), sink, &g, &n) == 0 &&
	       g.len == strlen(want) && !memcmp(g.buf, want, g.len);
}

static int fd_of(const char *data)
{
	char path[] = "/tmp/mapfs-conds-XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0)
		return -1;
	unlink(path);
	if (write(fd, data, strlen(data)) != (ssize_t)strlen(data)) {
		close(fd);
		return -1;
	}
	return fd;
}

#define FAIL_IF(cond, what)         \
	do {                        \
		if (cond) {         \
			err = what; \
			goto out;   \
		}                   \
	} while (0)

const char *store_conds_check(struct store *st, const char *prefix)
{
	char a[256], b[256], gone[256];
	struct store_cond none = { .kind = STORE_IF_NONE };
	struct store_cond m1 = { .kind = STORE_IF_MATCH };
	struct store_cond m2 = { .kind = STORE_IF_MATCH };
	struct store_info i1, i2, info;
	char etags[1][STORE_ETAG_MAX];
	const char *err = NULL;
	struct got g = { .len = 0 };
	char *id = NULL;
	uint64_t n;
	int fd = -1;

	snprintf(a, sizeof(a), "%sconds-a", prefix);
	snprintf(b, sizeof(b), "%sconds-b", prefix);
	snprintf(gone, sizeof(gone), "%sconds-gone", prefix);

	/* If-None-Match: * creates once. */
	FAIL_IF(store_put_if(st, a, "one", 3, NULL, &none, &i1),
		"PUT If-None-Match of a new key");
	FAIL_IF(store_put_if(st, a, "two", 3, NULL, &none, NULL) != -ESTALE,
		"PUT If-None-Match of a key that exists is not -ESTALE");
	FAIL_IF(!holds(st, a, "one"), "a refused PUT changed the object");

	/* If-Match replaces only the version named. */
	memcpy(m1.etag, i1.etag, sizeof(m1.etag));
	FAIL_IF(store_put_if(st, a, "three", 5, NULL, &m1, &i2),
		"PUT If-Match of the version there");
	FAIL_IF(!strcmp(i1.etag, i2.etag), "a new version has the old ETag");
	FAIL_IF(store_put_if(st, a, "four", 4, NULL, &m1, NULL) != -ESTALE,
		"PUT If-Match of an older version is not -ESTALE");
	FAIL_IF(!holds(st, a, "three"), "a refused If-Match PUT changed it");
	FAIL_IF(store_put_if(st, gone, "x", 1, NULL, &m1, NULL) != -ENOENT,
		"PUT If-Match of a key that is gone is not -ENOENT");
	FAIL_IF(store_head(st, gone, &info) != -ENOENT,
		"a refused PUT of a key that is gone made it");

	/* The same from a file. */
	memcpy(m2.etag, i2.etag, sizeof(m2.etag));
	fd = fd_of("five");
	FAIL_IF(fd < 0, "a temp file");
	FAIL_IF(store_put_fd_if(st, a, fd, 4, NULL, &m1, NULL) != -ESTALE,
		"PUT from a file If-Match an older version is not -ESTALE");
	FAIL_IF(store_put_fd_if(st, a, fd, 4, NULL, &m2, &i1),
		"PUT from a file If-Match of the version there");
	FAIL_IF(!holds(st, a, "five"), "PUT from a file");

	/* Reads pinned to a version. */
	FAIL_IF(store_get_stream_if(st, a, i1.etag, 0, 64, sink, &g, &n) ||
			g.len != 4,
		"GET If-Match of the version there");
	g.len = 0;
	g.calls = 0;
	FAIL_IF(store_get_stream_if(st, a, i2.etag, 0, 64, sink, &g, &n) !=
			-ESTALE,
		"GET If-Match of an older version is not -ESTALE");
	FAIL_IF(g.calls != 0, "a refused GET handed bytes");

	/* Complete, the same way: a refused one leaves the upload. */
	FAIL_IF(store_mpu_create(st, a, NULL, &id), "multipart create");
	close(fd);
	fd = fd_of("six");
	FAIL_IF(fd < 0 || store_mpu_part(st, a, id, 1, fd, 0, 3, etags[0]),
		"multipart part");
	FAIL_IF(store_mpu_complete_if(st, a, id, 1, etags, &none, NULL) !=
			-ESTALE,
		"Complete If-None-Match of a key that exists is not -ESTALE");
	FAIL_IF(!holds(st, a, "five"), "a refused Complete changed it");
	memcpy(m1.etag, i1.etag, sizeof(m1.etag));
	FAIL_IF(store_mpu_complete_if(st, a, id, 1, etags, &m1, &i2),
		"Complete If-Match of the version there");
	free(id);
	id = NULL;
	FAIL_IF(!holds(st, a, "six"), "Complete");

	/* A write that meets its own earlier try (same write id) goes on;
	 * another write's id is another writer. */
	{
		struct store_meta wm = { .has_mode = true,
					 .mode = 0100644,
					 .wid = "try-1" };
		struct store_cond own = { .kind = STORE_IF_NONE,
					  .wid = "try-1" };
		struct store_cond other = { .kind = STORE_IF_NONE,
					    .wid = "try-2" };

		FAIL_IF(store_put_if(st, gone, "w", 1, &wm, &own, NULL),
			"PUT If-None-Match with a write id");
		FAIL_IF(store_head(st, gone, &info) ||
				strcmp(info.meta.wid, "try-1"),
			"the write id does not come back with HEAD");
		FAIL_IF(store_put_if(st, gone, "w", 1, &wm, &own, NULL),
			"a retry of the same write (its id on the object) "
			"is refused");
		FAIL_IF(store_put_if(st, gone, "x", 1, NULL, &other, NULL) !=
				-ESTALE,
			"a write of another id over it is not -ESTALE");
		FAIL_IF(!holds(st, gone, "w"), "a refused write changed it");
	}

	/* Copy onto a key whose version moved on. */
	FAIL_IF(store_put(st, b, "seven", 5, NULL, &info), "PUT");
	FAIL_IF(store_copy_if(st, b, a, NULL, &m1, NULL) != -ESTALE,
		"copy If-Match of an older version is not -ESTALE");
	FAIL_IF(!holds(st, a, "six"), "a refused copy changed it");
	memcpy(m2.etag, i2.etag, sizeof(m2.etag));
	FAIL_IF(store_copy_if(st, b, a, NULL, &m2, NULL), "copy If-Match");
	FAIL_IF(!holds(st, a, "seven"), "copy");

	/* A link id (hard links) goes with a copy's new metadata, onto
	 * another key and onto the same one. */
	{
		struct store_meta lm = { .has_mode = true,
					 .mode = 0100644,
					 .link = "00c0ffee-2a" };

		FAIL_IF(store_copy(st, a, b, &lm, NULL) ||
				store_head(st, b, &info) ||
				strcmp(info.meta.link, "00c0ffee-2a"),
			"a copy's link id does not come back with HEAD");
		FAIL_IF(store_copy(st, a, a, &lm, NULL) ||
				store_head(st, a, &info) ||
				strcmp(info.meta.link, "00c0ffee-2a") ||
				!holds(st, a, "seven"),
			"a copy onto itself does not take the link id");
	}
out:
	if (fd >= 0)
		close(fd);
	if (id) {
		store_mpu_abort(st, a, id);
		free(id);
	}
	store_delete(st, a);
	store_delete(st, b);
	store_delete(st, gone);
	return err;
}
