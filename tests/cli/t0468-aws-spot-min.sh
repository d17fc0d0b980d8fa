#!/bin/sh
# t0468-aws-spot-min.sh - cloud/spot-min.sh on EC2 (the moto harness): a
# spot node within its group's min: interrupted and terminated is powered
# up again and made anew, found by the name the head writes into every
# node's /etc/hosts; its task completes as an uninterrupted twin's.
. "$(dirname "$0")/lib.sh"
CLOUD=aws
. "$(dirname "$0")/cloud/spot-min.sh"
