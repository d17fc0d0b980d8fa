#!/bin/sh
# t0304-aws-data-head.sh - cloud/data-head.sh on the EC2 harness's node
# bodies: a head with instance profile pbx-head stages s3:// data itself
# with the role's credentials from its IMDS; no S3 request is signed by
# the user.
. "$(dirname "$0")/lib.sh"
CLOUD=aws
. "$(dirname "$0")/cloud/data-head.sh"
