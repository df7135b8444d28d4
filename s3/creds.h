/*
 * s3/creds.h - internal to s3/: AWS credentials and region, found in the
 * order the AWS tools use:
 *
 *   1. the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
 *      AWS_SESSION_TOKEN;
 *   2. the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, default
 *      ~/.aws/credentials), then the config file (AWS_CONFIG_FILE, default
 *      ~/.aws/config), profile AWS_PROFILE or "default";
 *   3. EC2 instance metadata with the IMDSv2 token flow (endpoint
 *      AWS_EC2_METADATA_SERVICE_ENDPOINT, default http://169.254.169.254;
 *      AWS_EC2_METADATA_DISABLED=true skips it).  These are temporary and
 *      refreshed five minutes before they expire.
 *
 * Secrets are kept only here and in the copies handed to the signer; none
 * is ever logged.
 */
#ifndef MAPFS_S3_CREDS_H
#define MAPFS_S3_CREDS_H

/* One set of credentials: malloc'd copies the holder frees. */
struct s3_creds {
	char *access_key, *secret_key;
	char *token; /* NULL unless the credentials are temporary */
};

struct s3_cred_src;

/*
 * Find credentials (see above).  -EACCES if there are none anywhere
 * (instance metadata not answering included), -EINVAL for a half-set
 * environment or a broken profile.  *out is freed with s3_creds_close.
 */
int s3_creds_open(struct s3_cred_src **out);
void s3_creds_close(struct s3_cred_src *src);

/* Where the credentials came from, for logs ("environment", ...). */
const char *s3_creds_origin(const struct s3_cred_src *src);

/*
 * Current credentials into out (freed with s3_creds_free), refreshing
 * temporary ones that are about to expire.  Thread-safe.  A refresh that
 * fails while the old set is still valid keeps the old set.
 */
int s3_creds_get(struct s3_cred_src *src, struct s3_creds *out);

/* The server said the token expired: refresh at the next get. */
void s3_creds_expire(struct s3_cred_src *src);

void s3_creds_free(struct s3_creds *c);

/*
 * The region: explicit if given, else AWS_REGION, AWS_DEFAULT_REGION,
 * the profile's region in the config file, else "us-east-1".  *out is
 * malloc'd for the caller.
 */
int s3_region_resolve(const char *explicit_region, char **out);

#endif
