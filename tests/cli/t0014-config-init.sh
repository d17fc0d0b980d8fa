#!/bin/sh
# t0014-config-init.sh - `pbx config init`: a first
# configuration from what this machine knows, with no network.  In a home
# with gcloud's configuration (an active configuration other than
# default), an AWS profile with a region and no keys: PBX_HOME made 0700,
# an SSH key made with ssh-keygen (0600), config.yaml (0600) with the local,
# gce and aws templates, the project, zone and region found, the missing
# credentials and AMI named; `pbx config check` accepts it and flags the
# AMI placeholder; a second init changes nothing (exit 1); --print writes
# nothing; an unknown cloud is a usage error.
. "$(dirname "$0")/lib.sh"
trap 'rm -rf "$TEST_TMP"' EXIT

H=$TEST_TMP/user
mkdir -p "$H/.config/gcloud/configurations" "$H/.aws"
echo work >"$H/.config/gcloud/active_config"
printf '[core]\naccount = me@uni.edu\nproject = stats285-lab\n\n[compute]\nzone = us-west1-b\n' \
	>"$H/.config/gcloud/configurations/config_work"
printf '[core]\nproject = not-this-one\n' >"$H/.config/gcloud/configurations/config_default"
printf '[default]\nregion = eu-west-1\n' >"$H/.aws/config"
export HOME="$H" PBX_HOME="$H/.pbx"
# (lib.sh points the clouds' files into TEST_TMP: here they are the home's)
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_PROFILE AWS_REGION AWS_DEFAULT_REGION CLOUDSDK_CONFIG \
	GOOGLE_APPLICATION_CREDENTIALS AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE

run_pbx config init --print gce
ok $rc "--print: $errout"
is "$(ls -A "$H/.pbx" 2>/dev/null | wc -l)" 0 "--print makes nothing"
echo "$out" | grep -q "^    project: stats285-lab$"
ok $? "--print shows the configuration"

run_pbx config init local gce aws
ok $rc "init local gce aws: $errout"
is "$(stat -c %a "$H/.pbx") $(stat -c %a "$H/.pbx/config.yaml") $(stat -c %a "$H/.pbx/id_ed25519")" "700 600 600" \
	"PBX_HOME 0700, config.yaml and the key 0600"
is "$(ssh-keygen -l -f "$H/.pbx/id_ed25519.pub" | awk '{print $NF}')" "(ED25519)" "the key is ed25519"
is "$(echo "$out" | sed -n 3,4p)" "gce: project stats285-lab, zone us-west1-b, from $H/.config/gcloud/configurations/config_work
aws: region eu-west-1; credentials: (none)" "the project and zone from gcloud's active configuration, the profile's region"
echo "$out" | grep -q "^missing 1: Compute Engine credentials ('gcloud auth application-default login'"
ok $? "the missing Compute Engine credentials are named"
echo "$out" | grep -q "^missing 2: AWS credentials"
ok $? "the missing AWS credentials are named"
echo "$out" | grep -q "^missing 3: the AMI of clusters.aws.image (the Debian 12 AMI of eu-west-1"
ok $? "and the AMI"
is "$("$PBX" config templates 2>&1 | awk '{print $1}' | sort | tr '\n' ' ')" "aws gce local " "three templates"

run_pbx config check
ok $rc "config check accepts it: $out $errout"
is "$errout" "pbx: warning: $H/.pbx/config.yaml: clusters.aws.image: 'ami-0123456789abcdef0' is the example's placeholder: the AMI of your region goes there" \
	"and flags the AMI placeholder"

cp "$H/.pbx/config.yaml" "$TEST_TMP/before"
run_pbx config init gce
is "$rc" 1 "a second init: exit 1"
cmp -s "$TEST_TMP/before" "$H/.pbx/config.yaml"
ok $? "the configuration is unchanged"
echo "$errout" | grep -q "config.yaml exists: nothing changed"
ok $? "it says so: $errout"
run_pbx config init azure
is "$rc" 2 "an unknown cloud is a usage error: $errout"

# with credentials and no gcloud configuration
rm -rf "$H/.pbx" "$H/.config"
AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=secret run_pbx config init aws
ok $rc "init aws: $errout"
echo "$out" | grep -q "^aws: region eu-west-1; credentials: environment (AWS_ACCESS_KEY_ID)$"
ok $? "the credentials' source is named, never the keys: $out"
is "$(echo "$out" | grep -c secret)" 0 "the secret is not shown"
run_pbx config init --print gce
echo "$out" | grep -q "^    project: my-project    # your project's id (not found in gcloud's configuration)$"
ok $? "no gcloud configuration: a placeholder with a comment"
done_testing
