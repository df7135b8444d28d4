/*
 * s3/json.c - the one JSON reader the S3 layer needs: a string value of
 * a flat object (the EC2 instance-metadata credentials answer).
 */
#include "json.h"

#include <stdbool.h>
#include <string.h>

#include <openssl/crypto.h>

#include "buf.h"

/* See s3/json.h. */
char *s3_json_get(const char *js, const char *name)
{
	struct s3_buf k = { 0 }, v = { 0 };
	const char *p = js;
	char *res = NULL;
	bool is_key = true;

	while (*p && *p != '{')
		p++;
	if (*p)
		p++;
	while (*p) {
		struct s3_buf *cur = is_key ? &k : &v;

		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' ||
		       *p == ',' || *p == ':')
			p++;
		if (*p == '}' || !*p)
			break;
		s3_buf_reset(cur);
		if (*p == '"') {
			for (p++; *p && *p != '"'; p++) {
				char ch = *p;

				if (ch == '\\') {
					p++;
					if (!*p)
						goto out;
					ch = *p == 'n'   ? '\n'
					     : *p == 't' ? '\t'
							 : *p;
					if (*p == 'u')
						goto out; /* not in IMDS answers */
				}
				s3_buf_add(cur, &ch, 1);
			}
			if (*p != '"')
				goto out;
			p++;
		} else {
			/* A bare value (number, true, null) */
			while (*p && *p != ',' && *p != '}')
				s3_buf_add(cur, p++, 1);
		}
		s3_buf_add(cur, "", 0);
		if (!is_key && k.p && strcmp(k.p, name) == 0) {
			res = s3_buf_take(&v);
			goto out;
		}
		is_key = !is_key;
	}
out:
	s3_buf_free(&k);
	if (v.p)
		OPENSSL_cleanse(v.p, v.len);
	s3_buf_free(&v);
	return res;
}
