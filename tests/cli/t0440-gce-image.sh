#!/bin/sh
# t0440-gce-image.sh - cloud/image.sh on the Compute Engine emulator:
# `pbx image build|list|delete` (images are records of the emulator), a
# template naming the image by its bare name, refusals, kill -9 mid-build.
. "$(dirname "$0")/lib.sh"
CLOUD=gce
. "$(dirname "$0")/cloud/image.sh"
