/* events/parse.c - see parse.h.  JSON by jansson. */
#include "parse.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* The string at obj.a.b... (NULL-terminated path), or NULL. */
static const char *str_at(json_t *obj, const char *const *path)
{
	for (; obj && *path; path++)
		obj = json_is_object(obj) ? json_object_get(obj, *path) : NULL;
	return json_is_string(obj) ? json_string_value(obj) : NULL;
}

/* Append one record; 0, -ENOMEM, or 1 when full (the rest is skipped). */
static int rec_add(struct ev_batch *b, const char *bucket, const char *key,
		   bool removed)
{
	struct ev_rec *r;

	if (b->n >= EV_RECORDS_MAX)
		return 1;
	r = realloc(b->recs, (b->n + 1) * sizeof(*r));
	if (!r)
		return -ENOMEM;
	b->recs = r;
	r = &b->recs[b->n];
	r->bucket = strdup(bucket);
	r->key = strdup(key);
	r->removed = removed;
	if (!r->bucket || !r->key) {
		free(r->bucket);
		free(r->key);
		return -ENOMEM;
	}
	b->n++;
	return 0;
}

/* {"Records":[{eventName, s3:{bucket:{name}, object:{key}}}, ...]} */
static int parse_records(json_t *root, struct ev_batch *b)
{
	static const char *const p_name[] = { "eventName", NULL };
	static const char *const p_bucket[] = { "s3", "bucket", "name", NULL };
	static const char *const p_key[] = { "s3", "object", "key", NULL };
	json_t *recs = json_object_get(root, "Records"), *r;
	size_t i;
	int rc = 0;

	if (!json_is_array(recs))
		return -EINVAL;
	json_array_foreach(recs, i, r)
	{
		const char *name = str_at(r, p_name);
		const char *bucket = str_at(r, p_bucket);
		const char *key = str_at(r, p_key);
		bool created = name && !strncmp(name, "ObjectCreated:", 14);
		bool removed = name && !strncmp(name, "ObjectRemoved:", 14);

		if (!bucket || !key || !*key || (!created && !removed)) {
			b->skipped++;
			continue;
		}
		rc = rec_add(b, bucket, key, removed);
		if (rc)
			break;
	}
	if (rc == 1)
		b->skipped += json_array_size(recs) - i;
	return rc < 0 ? rc : 0;
}

/* EventBridge: {"detail-type":"Object Created", "detail":{...}} */
static int parse_eventbridge(json_t *root, struct ev_batch *b)
{
	static const char *const p_type[] = { "detail-type", NULL };
	static const char *const p_bucket[] = { "detail", "bucket", "name",
						NULL };
	static const char *const p_key[] = { "detail", "object", "key", NULL };
	const char *type = str_at(root, p_type);
	const char *bucket = str_at(root, p_bucket);
	const char *key = str_at(root, p_key);
	int rc;

	if (!type || !bucket || !key || !*key)
		return -EINVAL;
	if (strcmp(type, "Object Created") && strcmp(type, "Object Deleted")) {
		b->skipped++;
		return 0;
	}
	rc = rec_add(b, bucket, key, !strcmp(type, "Object Deleted"));
	return rc < 0 ? rc : 0;
}

static int parse_root(json_t *root, struct ev_batch *b, int depth);

/* SNS: {"Type":"Notification","Message":"<S3 event JSON>"} or a
 * SubscriptionConfirmation with its SubscribeURL. */
static int parse_sns(json_t *root, const char *type, struct ev_batch *b,
		     int depth)
{
	static const char *const p_msg[] = { "Message", NULL };
	static const char *const p_url[] = { "SubscribeURL", NULL };
	const char *msg, *url;
	json_t *inner;
	int rc;

	if (!strcmp(type, "SubscriptionConfirmation")) {
		url = str_at(root, p_url);
		if (!url)
			return -EINVAL;
		b->confirm_url = strdup(url);
		return b->confirm_url ? 0 : -ENOMEM;
	}
	if (strcmp(type, "Notification")) {
		b->skipped++; /* UnsubscribeConfirmation, ... */
		return 0;
	}
	msg = str_at(root, p_msg);
	if (!msg)
		return -EINVAL;
	inner = json_loads(msg, JSON_REJECT_DUPLICATES, NULL);
	if (!inner)
		return -EINVAL;
	/* S3's test message ({"Event":"s3:TestEvent"}) has no records. */
	rc = json_object_get(inner, "Event") ? 0
					     : parse_root(inner, b, depth + 1);
	json_decref(inner);
	return rc;
}

static int parse_root(json_t *root, struct ev_batch *b, int depth)
{
	static const char *const p_type[] = { "Type", NULL };
	const char *type;

	if (!json_is_object(root) || depth > 1)
		return -EINVAL;
	if (json_object_get(root, "Records"))
		return parse_records(root, b);
	if (json_object_get(root, "detail-type"))
		return parse_eventbridge(root, b);
	type = str_at(root, p_type);
	if (type && depth == 0)
		return parse_sns(root, type, b, depth);
	return -EINVAL;
}

int ev_parse(const char *body, size_t len, struct ev_batch *out)
{
	json_t *root;
	int rc;

	memset(out, 0, sizeof(*out));
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
	if (!root)
		return -EINVAL;
	rc = parse_root(root, out, 0);
	json_decref(root);
	if (rc)
		ev_batch_free(out);
	return rc;
}

void ev_batch_free(struct ev_batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		free(b->recs[i].bucket);
		free(b->recs[i].key);
	}
	free(b->recs);
	free(b->confirm_url);
	memset(b, 0, sizeof(*b));
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int ev_key_decode(const char *key, char *out, size_t cap)
{
	size_t o = 0;

	for (const char *p = key; *p; p++) {
		int c = (unsigned char)*p;

		if (c == '+') {
			c = ' ';
		} else if (c == '%') {
			int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);

			if (lo < 0)
				return -EINVAL;
			c = hi * 16 + lo;
			p += 2;
		}
		if (c == 0 || o + 1 >= cap)
			return -EINVAL;
		out[o++] = (char)c;
	}
	out[o] = '\0';
	return 0;
}
