/*
 * s3/sign.c - AWS Signature Version 4 over OpenSSL's EVP interfaces.
 *
 * Follows "Create a canonical request" of the SigV4 spec literally: S3
 * wants the URI encoded once and never normalised, so the caller passes it
 * encoded and the signer leaves it alone.
 */
#include "sign.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#define SHA256_LEN 32
#define ALGORITHM "AWS4-HMAC-SHA256"

static void hex_encode(const unsigned char *in, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[in[i] >> 4];
		out[2 * i + 1] = hex[in[i] & 15];
	}
	out[2 * n] = '\0';
}

int s3_sha256_hex(const void *data, size_t n, char out[S3_SHA256_HEX])
{
	unsigned char md[SHA256_LEN];
	unsigned int len = 0;

	if (!EVP_Digest(data, n, md, &len, EVP_sha256(), NULL) ||
	    len != SHA256_LEN)
		return -EIO;
	hex_encode(md, SHA256_LEN, out);
	return 0;
}

int s3_md5_b64(const void *data, size_t n, char out[32])
{
	unsigned char md[16];
	unsigned int len = 0;

	if (!EVP_Digest(data, n, md, &len, EVP_md5(), NULL) || len != 16)
		return -EIO;
	EVP_EncodeBlock((unsigned char *)out, md, 16);
	return 0;
}

void s3_amz_date(long long t, char out[S3_AMZ_DATE_LEN])
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(out, S3_AMZ_DATE_LEN, "%Y%m%dT%H%M%SZ", &tm);
}

static int hmac(const void *key, size_t klen, const void *data, size_t n,
		unsigned char out[SHA256_LEN])
{
	size_t len = 0;

	if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key, klen, data, n,
		       out, SHA256_LEN, &len) ||
	    len != SHA256_LEN)
		return -EIO;
	return 0;
}

/* One query parameter, name and value percent-encoded. */
struct qparam {
	char *name, *value;
};

static int qparam_cmp(const void *a, const void *b)
{
	const struct qparam *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

/* A header: lower-cased name, normalised value, input order for ties. */
struct hdr {
	char *name, *value;
	size_t order;
};

static int hdr_cmp(const void *a, const void *b)
{
	const struct hdr *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Encode, sort and join the query: "a=1&b=%2F". */
static int canon_query(const struct s3_sign_in *in, struct s3_buf *out)
{
	struct qparam *qp;
	struct s3_buf tmp = { 0 };
	size_t i;
	int err = 0;

	if (!in->nquery)
		return 0;
	qp = calloc(in->nquery, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	for (i = 0; i < in->nquery && !err; i++) {
		s3_buf_uri(&tmp, in->query[i].name, false);
		qp[i].name = s3_buf_take(&tmp);
		s3_buf_uri(&tmp, in->query[i].value ? in->query[i].value : "",
			   false);
		qp[i].value = s3_buf_take(&tmp);
		if (!qp[i].name || !qp[i].value)
			err = -ENOMEM;
	}
	if (!err) {
		qsort(qp, in->nquery, sizeof(*qp), qparam_cmp);
		for (i = 0; i < in->nquery; i++)
			s3_buf_fmt(out, "%s%s=%s", i ? "&" : "", qp[i].name,
				   qp[i].value);
		err = s3_buf_err(out);
	}
	for (i = 0; i < in->nquery; i++) {
		free(qp[i].name);
		free(qp[i].value);
	}
	free(qp);
	return err;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/*
 * The spec's Trimall: leading and trailing white space removed, inner
 * runs (folded lines included) collapsed to one space.
 */
static char *value_trim(const char *v)
{
	char *out = malloc(strlen(v) + 1), *o = out;
	bool gap = false;

	if (!out)
		return NULL;
	while (is_space(*v))
		v++;
	for (; *v; v++) {
		if (is_space(*v)) {
			gap = true;
			continue;
		}
		if (gap && o != out)
			*o++ = ' ';
		gap = false;
		*o++ = *v;
	}
	*o = '\0';
	return out;
}

static int hdrs_prepare(const struct s3_sign_in *in, struct hdr *h)
{
	for (size_t i = 0; i < in->nheaders; i++) {
		const char *n = in->headers[i].name;
		size_t len = strlen(n);

		if (!len || strpbrk(n, ": \t\r\n"))
			return -EINVAL;
		h[i].order = i;
		h[i].name = malloc(len + 1);
		h[i].value = value_trim(
			in->headers[i].value ? in->headers[i].value : "");
		if (!h[i].name || !h[i].value)
			return -ENOMEM;
		for (size_t j = 0; j <= len; j++)
			h[i].name[j] = (n[j] >= 'A' && n[j] <= 'Z')
					       ? (char)(n[j] - 'A' + 'a')
					       : n[j];
	}
	return 0;
}

/*
 * Canonical headers ("name:value\n" each, repeated names joined with ','
 * in the order given) and the signed header list ("a;b;c").
 */
static int canon_headers(const struct s3_sign_in *in, struct s3_buf *canon,
			 struct s3_buf *signed_list)
{
	struct hdr *h;
	size_t i;
	int err;

	if (!in->nheaders)
		return -EINVAL;
	h = calloc(in->nheaders, sizeof(*h));
	if (!h)
		return -ENOMEM;
	err = hdrs_prepare(in, h);
	if (err)
		goto out_free;
	qsort(h, in->nheaders, sizeof(*h), hdr_cmp);
	for (i = 0; i < in->nheaders; i++) {
		bool same = i && strcmp(h[i].name, h[i - 1].name) == 0;

		if (same) {
			s3_buf_fmt(canon, ",%s", h[i].value);
			continue;
		}
		if (i) {
			s3_buf_str(canon, "\n");
			s3_buf_str(signed_list, ";");
		}
		s3_buf_fmt(canon, "%s:%s", h[i].name, h[i].value);
		s3_buf_str(signed_list, h[i].name);
	}
	s3_buf_str(canon, "\n");
	err = s3_buf_err(canon) ? -ENOMEM : s3_buf_err(signed_list);
out_free:
	for (i = 0; i < in->nheaders; i++) {
		free(h[i].name);
		free(h[i].value);
	}
	free(h);
	return err;
}

/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" secret, date), region), service),
 * "aws4_request"); wiped by the caller. */
static int signing_key(const struct s3_sign_in *in, const char *date8,
		       unsigned char key[SHA256_LEN])
{
	size_t slen = strlen(in->secret_key);
	unsigned char k[SHA256_LEN];
	char *seed = malloc(slen + 5);
	int err;

	if (!seed)
		return -ENOMEM;
	memcpy(seed, "AWS4", 4);
	memcpy(seed + 4, in->secret_key, slen + 1);
	err = hmac(seed, slen + 4, date8, strlen(date8), k);
	OPENSSL_cleanse(seed, slen + 4);
	free(seed);
	if (!err)
		err = hmac(k, SHA256_LEN, in->region, strlen(in->region), key);
	if (!err)
		err = hmac(key, SHA256_LEN, in->service, strlen(in->service),
			   k);
	if (!err)
		err = hmac(k, SHA256_LEN, "aws4_request", 12, key);
	OPENSSL_cleanse(k, sizeof(k));
	return err;
}

int s3_sign(const struct s3_sign_in *in, struct s3_sign_out *out)
{
	struct s3_buf hdrs = { 0 }, signed_list = { 0 };
	unsigned char key[SHA256_LEN], sig[SHA256_LEN];
	char date8[9], creq_hash[S3_SHA256_HEX], sig_hex[S3_SHA256_HEX];
	int err;

	memset(out, 0, sizeof(*out));
	if (!in->amz_date || strlen(in->amz_date) != S3_AMZ_DATE_LEN - 1 ||
	    !in->method || !in->uri || in->uri[0] != '/' || !in->payload_hash ||
	    !in->region || !in->service || !in->access_key || !in->secret_key)
		return -EINVAL;
	memcpy(date8, in->amz_date, 8);
	date8[8] = '\0';

	err = canon_query(in, &out->query);
	if (!err)
		err = canon_headers(in, &hdrs, &signed_list);
	if (err)
		goto out_free;
	s3_buf_fmt(&out->creq, "%s\n%s\n%s\n%s\n%s\n%s", in->method, in->uri,
		   out->query.p ? out->query.p : "", hdrs.p, signed_list.p,
		   in->payload_hash);
	err = s3_buf_err(&out->creq);
	if (!err)
		err = s3_sha256_hex(out->creq.p, out->creq.len, creq_hash);
	if (err)
		goto out_free;
	s3_buf_fmt(&out->sts, ALGORITHM "\n%s\n%s/%s/%s/aws4_request\n%s",
		   in->amz_date, date8, in->region, in->service, creq_hash);
	err = s3_buf_err(&out->sts);
	if (!err)
		err = signing_key(in, date8, key);
	if (!err)
		err = hmac(key, SHA256_LEN, out->sts.p, out->sts.len, sig);
	OPENSSL_cleanse(key, sizeof(key));
	if (err)
		goto out_free;
	hex_encode(sig, SHA256_LEN, sig_hex);
	s3_buf_fmt(&out->authz,
		   ALGORITHM " Credential=%s/%s/%s/%s/aws4_request, "
			     "SignedHeaders=%s, Signature=%s",
		   in->access_key, date8, in->region, in->service,
		   signed_list.p, sig_hex);
	err = s3_buf_err(&out->authz);
	if (!err && !out->query.p)
		s3_buf_str(&out->query, "");
	if (!err)
		err = s3_buf_err(&out->query);
out_free:
	s3_buf_free(&hdrs);
	s3_buf_free(&signed_list);
	return err;
}

void s3_sign_out_free(struct s3_sign_out *out)
{
	s3_buf_free(&out->query);
	s3_buf_free(&out->creq);
	s3_buf_free(&out->sts);
	s3_buf_free(&out->authz);
}
