#!/usr/bin/env python3
"""tests/s3/notify.py - make an S3 server push event notifications of one
key prefix to an HTTP endpoint (radosgw: an SNS topic with a push-endpoint,
then a bucket notification for created and removed objects).

    notify.py ENDPOINT BUCKET PREFIX PUSH_URL [--persistent]

The keys come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (what
tests/s3/rgw.sh prints).  Prints the topic's ARN; exit 1 with a line on
stderr if the server refuses.
"""
import sys

import boto3
from botocore.config import Config


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    endpoint, bucket, prefix, push = args
    persistent = "--persistent" in sys.argv
    cfg = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1})
    sns = boto3.client("sns", endpoint_url=endpoint, region_name="us-east-1",
                       config=cfg)
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      config=cfg)
    name = "mapfs-" + "".join(c if c.isalnum() else "-" for c in prefix)[:60]
    attrs = {"push-endpoint": push}
    if persistent:
        attrs["persistent"] = "true"
    arn = sns.create_topic(Name=name, Attributes=attrs)["TopicArn"]
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={"TopicConfigurations": [{
            "Id": name, "TopicArn": arn,
            "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"],
            "Filter": {"Key": {"FilterRules": [
                {"Name": "prefix", "Value": prefix}]}},
        }]})
    print(arn)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # the test prints why
        print(f"notify.py: {e}", file=sys.stderr)
        sys.exit(1)
