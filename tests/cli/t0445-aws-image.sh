#!/bin/sh
# t0445-aws-image.sh - cloud/image.sh on EC2 (moto with the harness's
# strictness): `pbx image build|list|delete` (an AMI and its snapshot), a
# template naming the AMI, refusals, kill -9 mid-build, the harness's
# stopped and started bodies.
. "$(dirname "$0")/lib.sh"
CLOUD=aws
. "$(dirname "$0")/cloud/image.sh"
