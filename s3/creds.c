/*
 * s3/creds.c - the credential chain of s3/creds.h: environment, shared
 * files, EC2 instance metadata (IMDSv2).
 */
#include "creds.h"
#include "buf.h"
#include "json.h"
#include "xml.h"
#include "common/log.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#define IMDS_DEFAULT "http://169.254.169.254"
#define IMDS_TOKEN_TTL "21600"
#define IMDS_TIMEOUT_MS 2000L
#define IMDS_CONNECT_MS 1000L
#define IMDS_BODY_MAX 65536
#define REFRESH_BEFORE_S 300 /* AWS SDKs refresh five minutes early */
#define INI_LINE_MAX 4096

enum cred_origin { ORIGIN_ENV, ORIGIN_FILE, ORIGIN_IMDS };

struct s3_cred_src {
	pthread_mutex_t lock;
	enum cred_origin origin;
	struct s3_creds cur;
	int64_t expires; /* seconds since the epoch; 0 = never */
	char *imds;      /* endpoint, for ORIGIN_IMDS */
};

static void secret_free(char *s)
{
	if (s) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

void s3_creds_free(struct s3_creds *c)
{
	free(c->access_key);
	secret_free(c->secret_key);
	secret_free(c->token);
	c->access_key = c->secret_key = c->token = NULL;
}

/* Copies of ak, sk and token (NULL or "" = none) into c. */
static int creds_set(struct s3_creds *c, const char *ak, const char *sk,
		     const char *token)
{
	c->access_key = strdup(ak);
	c->secret_key = strdup(sk);
	c->token = token && *token ? strdup(token) : NULL;
	if (!c->access_key || !c->secret_key ||
	    (token && *token && !c->token)) {
		s3_creds_free(c);
		return -ENOMEM;
	}
	return 0;
}

static const char *env_nonempty(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* ---- shared files ------------------------------------------------------ */

static char *trim(char *s)
{
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	end = s + strlen(s);
	while (end > s && (end[-1] == ' ' || end[-1] == '\t' ||
			   end[-1] == '\n' || end[-1] == '\r'))
		*--end = '\0';
	return s;
}

/* The path of a shared file: the override variable, else ~/.aws/NAME. */
static char *aws_file(const char *env, const char *name)
{
	const char *home = getenv("HOME");
	struct s3_buf b = { 0 };

	if (env_nonempty(env))
		return strdup(getenv(env));
	if (!home || !*home)
		return NULL;
	s3_buf_fmt(&b, "%s/.aws/%s", home, name);
	return s3_buf_take(&b);
}

/*
 * Read the INI file path: the value of names[i] in section goes to
 * vals[i] (a malloc'd copy; the first one wins).  A missing file is not
 * an error (0 with nothing found).
 */
static int ini_read(const char *path, const char *section,
		    const char *const *names, char **vals, size_t n)
{
	char line[INI_LINE_MAX];
	bool in = false;
	FILE *f;

	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	while (fgets(line, sizeof(line), f)) {
		char *s = trim(line), *eq;

		if (!*s || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			char *close = strchr(s, ']');

			if (close) {
				*close = '\0';
				in = strcmp(trim(s + 1), section) == 0;
			}
			continue;
		}
		eq = strchr(s, '=');
		if (!in || !eq)
			continue;
		*eq = '\0';
		s = trim(s);
		for (size_t i = 0; i < n; i++) {
			if (strcmp(s, names[i]) || vals[i])
				continue;
			vals[i] = strdup(trim(eq + 1));
			if (!vals[i]) {
				fclose(f);
				return -ENOMEM;
			}
		}
	}
	fclose(f);
	return 0;
}

static const char *profile_name(void)
{
	const char *p = env_nonempty("AWS_PROFILE");

	return p ? p : "default";
}

/* The config file names profiles "[profile NAME]", except "[default]". */
static char *config_section(const char *profile)
{
	struct s3_buf b = { 0 };

	if (strcmp(profile, "default") == 0)
		s3_buf_str(&b, "default");
	else
		s3_buf_fmt(&b, "profile %s", profile);
	return s3_buf_take(&b);
}

/* Keys of the profile from the credentials file, then the config file. */
static int creds_from_files(struct s3_creds *c, bool *found)
{
	static const char *const names[] = { "aws_access_key_id",
					     "aws_secret_access_key",
					     "aws_session_token" };
	const char *profile = profile_name();
	char *vals[3] = { 0 }, *path, *sect;
	int err;

	*found = false;
	path = aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
	err = path ? ini_read(path, profile, names, vals, 3) : 0;
	free(path);
	if (!err && !vals[0]) {
		path = aws_file("AWS_CONFIG_FILE", "config");
		sect = config_section(profile);
		err = path && sect ? ini_read(path, sect, names, vals, 3) : 0;
		free(path);
		free(sect);
	}
	if (!err && (vals[0] || vals[1])) {
		if (!vals[0] || !vals[1] || !*vals[0] || !*vals[1]) {
			log_error("s3: profile %s has only half of a key pair",
				  profile);
			err = -EINVAL;
		} else {
			err = creds_set(c, vals[0], vals[1], vals[2]);
			*found = !err;
		}
	}
	free(vals[0]);
	secret_free(vals[1]);
	secret_free(vals[2]);
	return err;
}

int s3_region_resolve(const char *explicit_region, char **out)
{
	static const char *const names[] = { "region" };
	const char *r =
		explicit_region && *explicit_region ? explicit_region : NULL;
	char *val = NULL, *path, *sect;
	int err = 0;

	if (!r)
		r = env_nonempty("AWS_REGION");
	if (!r)
		r = env_nonempty("AWS_DEFAULT_REGION");
	if (!r) {
		path = aws_file("AWS_CONFIG_FILE", "config");
		sect = config_section(profile_name());
		if (path && sect)
			err = ini_read(path, sect, names, &val, 1);
		free(path);
		free(sect);
		if (err)
			return err;
		if (val && *val) {
			*out = val;
			return 0;
		}
		free(val);
		r = "us-east-1";
	}
	*out = strdup(r);
	return *out ? 0 : -ENOMEM;
}

/* ---- instance metadata -------------------------------------------------- */

static size_t imds_write(char *p, size_t size, size_t n, void *ud)
{
	struct s3_buf *b = ud;

	if (b->len + size * n > IMDS_BODY_MAX)
		return 0;
	s3_buf_add(b, p, size * n);
	return s3_buf_err(b) ? 0 : size * n;
}

/* One blocking IMDS request; body gets the answer.  -EAGAIN on failure. */
static int imds_call(const char *url, bool put, const char *hdr,
		     struct s3_buf *body)
{
	struct curl_slist *h = NULL, *h2;
	long status = 0;
	CURLcode cc;
	CURL *c;

	c = curl_easy_init();
	if (!c)
		return -ENOMEM;
	if (hdr) {
		h = curl_slist_append(NULL, hdr);
		if (!h) {
			curl_easy_cleanup(c);
			return -ENOMEM;
		}
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, IMDS_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, IMDS_CONNECT_MS);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, imds_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
	if (put)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	cc = curl_easy_perform(c);
	if (cc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	/* The token travels in h: wipe it before the list is freed. */
	for (h2 = h; h2; h2 = h2->next)
		OPENSSL_cleanse(h2->data, strlen(h2->data));
	curl_slist_free_all(h);
	if (cc != CURLE_OK || status != 200 || s3_buf_err(body))
		return -EAGAIN;
	return 0;
}

/* Fetch the role's credentials through IMDSv2 into c. */
static int imds_fetch(const char *ep, struct s3_creds *c, int64_t *expires)
{
	struct s3_buf url = { 0 }, hdr = { 0 }, tok = { 0 }, role = { 0 },
		      js = { 0 };
	char *ak = NULL, *sk = NULL, *st = NULL, *exp = NULL, *code = NULL, *nl;
	int64_t ns;
	int err;

	s3_buf_fmt(&url, "%s/latest/api/token", ep);
	err = s3_buf_err(&url) ? -ENOMEM
			       : imds_call(url.p, true,
					   "X-aws-ec2-metadata-token-ttl-"
					   "seconds: " IMDS_TOKEN_TTL,
					   &tok);
	if (err)
		goto out;
	s3_buf_fmt(&hdr, "X-aws-ec2-metadata-token: %s",
		   trim(tok.p ? tok.p : ""));
	s3_buf_reset(&url);
	s3_buf_fmt(&url, "%s/latest/meta-data/iam/security-credentials/", ep);
	err = s3_buf_err(&url) || s3_buf_err(&hdr)
		      ? -ENOMEM
		      : imds_call(url.p, false, hdr.p, &role);
	if (err)
		goto out;
	nl = role.p ? strchr(role.p, '\n') : NULL;
	if (nl)
		*nl = '\0';
	if (!role.p || !*trim(role.p) || strpbrk(trim(role.p), "/?#")) {
		err = -EACCES; /* an instance without a role */
		goto out;
	}
	s3_buf_str(&url, trim(role.p));
	err = s3_buf_err(&url) ? -ENOMEM : imds_call(url.p, false, hdr.p, &js);
	if (err)
		goto out;
	code = s3_json_get(js.p, "Code");
	ak = s3_json_get(js.p, "AccessKeyId");
	sk = s3_json_get(js.p, "SecretAccessKey");
	st = s3_json_get(js.p, "Token");
	exp = s3_json_get(js.p, "Expiration");
	if ((code && strcmp(code, "Success")) || !ak || !sk || !*ak || !*sk) {
		err = -EAGAIN;
		goto out;
	}
	*expires = 0;
	if (exp && s3_xml_time(exp, &ns) == 0)
		*expires = ns / 1000000000;
	err = creds_set(c, ak, sk, st);
out:
	free(code);
	free(ak);
	secret_free(sk);
	secret_free(st);
	free(exp);
	s3_buf_free(&url);
	if (hdr.p)
		OPENSSL_cleanse(hdr.p, hdr.len);
	s3_buf_free(&hdr);
	if (tok.p)
		OPENSSL_cleanse(tok.p, tok.len);
	s3_buf_free(&tok);
	s3_buf_free(&role);
	if (js.p)
		OPENSSL_cleanse(js.p, js.len);
	s3_buf_free(&js);
	return err;
}

/* ---- the chain ---------------------------------------------------------- */

int s3_creds_open(struct s3_cred_src **out)
{
	const char *ak = env_nonempty("AWS_ACCESS_KEY_ID");
	const char *sk = env_nonempty("AWS_SECRET_ACCESS_KEY");
	const char *dis = getenv("AWS_EC2_METADATA_DISABLED");
	struct s3_cred_src *src;
	bool found = false;
	int err;

	src = calloc(1, sizeof(*src));
	if (!src)
		return -ENOMEM;
	pthread_mutex_init(&src->lock, NULL);
	if (ak || sk) {
		if (!ak || !sk) {
			log_error("s3: AWS_ACCESS_KEY_ID and "
				  "AWS_SECRET_ACCESS_KEY must be set together");
			err = -EINVAL;
			goto out_free;
		}
		src->origin = ORIGIN_ENV;
		err = creds_set(&src->cur, ak, sk,
				env_nonempty("AWS_SESSION_TOKEN"));
		goto out_done;
	}
	err = creds_from_files(&src->cur, &found);
	if (err || found) {
		src->origin = ORIGIN_FILE;
		goto out_done;
	}
	if (dis && strcasecmp(dis, "true") == 0) {
		err = -EACCES;
		goto out_done;
	}
	src->origin = ORIGIN_IMDS;
	src->imds = strdup(env_nonempty("AWS_EC2_METADATA_SERVICE_ENDPOINT")
				   ? getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")
				   : IMDS_DEFAULT);
	if (!src->imds) {
		err = -ENOMEM;
		goto out_free;
	}
	/* Strip a trailing '/' so paths join cleanly. */
	if (*src->imds && src->imds[strlen(src->imds) - 1] == '/')
		src->imds[strlen(src->imds) - 1] = '\0';
	err = imds_fetch(src->imds, &src->cur, &src->expires);
	if (err == -EAGAIN) {
		/* Off EC2 nothing answers there: that is "no credentials". */
		log_error("s3: no credentials in the environment or the "
			  "shared files, and instance metadata at %s did not "
			  "provide any",
			  src->imds);
		err = -EACCES;
		goto out_free;
	}
out_done:
	if (!err) {
		log_info("s3: credentials from %s", s3_creds_origin(src));
		*out = src;
		return 0;
	}
	if (err == -EACCES)
		log_error("s3: no AWS credentials found (environment, shared "
			  "files, instance metadata)");
out_free:
	s3_creds_close(src);
	return err;
}

void s3_creds_close(struct s3_cred_src *src)
{
	if (!src)
		return;
	s3_creds_free(&src->cur);
	free(src->imds);
	pthread_mutex_destroy(&src->lock);
	free(src);
}

const char *s3_creds_origin(const struct s3_cred_src *src)
{
	switch (src->origin) {
	case ORIGIN_ENV:
		return "the environment";
	case ORIGIN_FILE:
		return "the shared credentials/config file";
	default:
		return "EC2 instance metadata";
	}
}

void s3_creds_expire(struct s3_cred_src *src)
{
	pthread_mutex_lock(&src->lock);
	if (src->origin == ORIGIN_IMDS)
		src->expires = 1;
	pthread_mutex_unlock(&src->lock);
}

int s3_creds_get(struct s3_cred_src *src, struct s3_creds *out)
{
	int64_t now = (int64_t)time(NULL);
	int err = 0;

	pthread_mutex_lock(&src->lock);
	if (src->origin == ORIGIN_IMDS && src->expires &&
	    now >= src->expires - REFRESH_BEFORE_S) {
		struct s3_creds fresh = { 0 };
		int64_t exp = 0;

		err = imds_fetch(src->imds, &fresh, &exp);
		if (!err) {
			s3_creds_free(&src->cur);
			src->cur = fresh;
			src->expires = exp;
		} else if (now < src->expires) {
			log_warn("s3: refreshing instance credentials failed "
				 "(%s); the current ones are still valid",
				 strerror(-err));
			err = 0;
		} else {
			log_error("s3: instance credentials expired and could "
				  "not be refreshed (%s)",
				  strerror(-err));
			err = -EAGAIN;
		}
	}
	if (!err)
		err = creds_set(out, src->cur.access_key, src->cur.secret_key,
				src->cur.token);
	pthread_mutex_unlock(&src->lock);
	return err;
}
