/*
 * test_aws_creds.c - AWS credentials and region found as the AWS CLI
 * finds them: environment (with a session token), AWS_PROFILE and
 * clouds.aws.profile (which skip the environment's keys), the shared
 * credentials file and the config file (AWS_SHARED_CREDENTIALS_FILE,
 * AWS_CONFIG_FILE, [profile NAME] sections), IMDSv2 last (against
 * tests/http/server.py on loopback); messages name where pbx looked and
 * never a secret; INI errors name file and line.
 *
 *   test_aws_creds SERVER.py
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cloud/aws/aws.h"
#include "cloud/provider.h"
#include "common/pyserver.h"
#include "common/tap.h"

static char dir[128];

static void clear_env(void)
{
	static const char *const names[] = {
		"AWS_ACCESS_KEY_ID",
		"AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN",
		"AWS_SECURITY_TOKEN",
		"AWS_PROFILE",
		"AWS_DEFAULT_PROFILE",
		"AWS_REGION",
		"AWS_DEFAULT_REGION",
		"AWS_SHARED_CREDENTIALS_FILE",
		"AWS_CONFIG_FILE",
		"AWS_EC2_METADATA_SERVICE_ENDPOINT",
		NULL,
	};
	size_t i;
	for (i = 0; names[i]; i++)
		unsetenv(names[i]);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
}

static void put(const char *name, const char *text)
{
	char path[512];
	FILE *f;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
}

static int find(const char *profile, struct aws_creds *c, struct pbx_err *err)
{
	struct aws_creds_opts o = { profile, NULL };
	aws_creds_free(c);
	pbx_err_clear(err);
	return aws_creds_find(&o, c, err);
}

static void test_env_and_profiles(void)
{
	struct aws_creds c = { 0 };
	struct pbx_err err = PBX_ERR_INIT;
	char path[512];
	char *r;
	clear_env();
	ok(find(NULL, &c, &err) < 0 && strstr(err.msg, "no AWS credentials found") &&
		   strstr(err.msg, "profile 'default'"),
	   "nothing anywhere: says where it looked: %s", err.msg);

	setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "env-secret", 1);
	setenv("AWS_SESSION_TOKEN", "env-token", 1);
	ok(find(NULL, &c, &err) == 0 && !strcmp(c.access_key, "AKIAENV") &&
		   !strcmp(c.secret_key, "env-secret") && c.token &&
		   !strcmp(c.token, "env-token") && strstr(c.source, "environment"),
	   "environment keys with a session token");

	put("credentials",
	    "# comment\n[default]\naws_access_key_id = AKIADEFAULT\n"
	    "aws_secret_access_key=default-secret\n\n[dev]\n  ; indented comment\n"
	    "aws_access_key_id = AKIADEV  \naws_secret_access_key = dev/secret+=\n"
	    "aws_session_token = dev-token\ns3 =\n    max_concurrent_requests = 20\n");
	put("config",
	    "[default]\nregion = eu-west-1\n[profile dev]\nregion = ap-south-1\n"
	    "[profile cfgonly]\naws_access_key_id = AKIACFG\naws_secret_access_key = cfg-secret\n"
	    "region = us-west-2\n");
	snprintf(path, sizeof(path), "%s/credentials", dir);
	setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
	snprintf(path, sizeof(path), "%s/config", dir);
	setenv("AWS_CONFIG_FILE", path, 1);
	ok(find(NULL, &c, &err) == 0 && !strcmp(c.access_key, "AKIAENV"),
	   "the environment comes before the default profile");
	ok(find("dev", &c, &err) == 0 && !strcmp(c.access_key, "AKIADEV") &&
		   !strcmp(c.secret_key, "dev/secret+=") && c.token &&
		   !strcmp(c.token, "dev-token") && strstr(c.source, "profile dev in "),
	   "clouds.aws.profile skips the environment: %s", c.source);
	setenv("AWS_PROFILE", "cfgonly", 1);
	ok(find(NULL, &c, &err) == 0 && !strcmp(c.access_key, "AKIACFG") && !c.token &&
		   strstr(c.source, "/config"),
	   "AWS_PROFILE: keys from [profile NAME] of the config file");
	r = aws_region_find(NULL);
	ok(r && !strcmp(r, "us-west-2"), "the region of AWS_PROFILE's profile: %s", r ? r : "-");
	free(r);
	r = aws_region_find("dev");
	ok(r && !strcmp(r, "ap-south-1"), "the region of profile dev (config file): %s",
	   r ? r : "-");
	free(r);
	setenv("AWS_REGION", "sa-east-1", 1);
	r = aws_region_find("dev");
	ok(r && !strcmp(r, "sa-east-1"), "AWS_REGION comes first");
	free(r);
	unsetenv("AWS_REGION");
	unsetenv("AWS_PROFILE");
	unsetenv("AWS_ACCESS_KEY_ID");
	ok(find(NULL, &c, &err) == 0 && !strcmp(c.access_key, "AKIADEFAULT") && !c.token,
	   "without the environment's key: [default]");
	ok(find("nosuch", &c, &err) < 0 && strstr(err.msg, "profile 'nosuch'") &&
		   !strstr(err.msg, "secret"),
	   "an unknown profile: %s", err.msg);

	put("credentials", "[half]\naws_access_key_id = AKIAHALF\n");
	ok(find("half", &c, &err) < 0 && strstr(err.msg, "must both be set"),
	   "a key without its secret: %s", err.msg);
	put("credentials", "[bad\naws_access_key_id = x\n");
	ok(find("bad", &c, &err) < 0 && strstr(err.msg, "credentials:1:") && strstr(err.msg, "']'"),
	   "a broken section header names file and line: %s", err.msg);
	put("credentials", "[x]\naws_access_key_id = AKIAX\nthis line has no equals sign\n");
	ok(find("x", &c, &err) < 0 && strstr(err.msg, "credentials:3:"),
	   "a line without '=' names file and line: %s", err.msg);
	aws_creds_free(&c);
}

static void test_imds(const char *server)
{
	struct pyserver srv;
	struct aws_creds c = { 0 };
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_http_opts ho = { .service = "imds", .max_attempts = 1 };
	struct aws_creds_opts o = { NULL, NULL };
	char url[64];
	clear_env();
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
	setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);
	if (!ok(pyserver_start(&srv, server, dir, NULL) == 0, "server.py started"))
		return;
	pbx_http_open(&ho, &o.http, &err);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", srv.port);
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", url, 1);
	ok(aws_creds_find(&o, &c, &err) < 0, "AWS_EC2_METADATA_DISABLED=true: IMDS not asked");
	unsetenv("AWS_EC2_METADATA_DISABLED");
	pbx_err_clear(&err);
	ok(aws_creds_find(&o, &c, &err) == 0 && !strcmp(c.access_key, "ASIAIMDS") &&
		   !strcmp(c.secret_key, "imds-secret") && c.token &&
		   !strcmp(c.token, "imds-token") && strstr(c.source, "role pbx-role"),
	   "IMDSv2: token, role, credentials: %s", c.source[0] ? c.source : err.msg);
	aws_creds_free(&c);
	/* An IMDS endpoint off loopback is refused by name, nothing sent. */
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://imds.evil.invalid", 1);
	pbx_err_clear(&err);
	ok(aws_creds_find(&o, &c, &err) < 0 && err.code == PBX_EXIT_USAGE &&
		   strstr(err.msg,
			  "AWS_EC2_METADATA_SERVICE_ENDPOINT: plain http:// to imds.evil.invalid"),
	   "AWS_EC2_METADATA_SERVICE_ENDPOINT off loopback refused: %s", err.msg);
	unsetenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	pbx_http_close(o.http);
	pyserver_stop(&srv);
}

/* Whether a metadata server may be asked (src/cloud/onmachine.c): only on
 * the cloud's machines, a cluster's node, or where its address is set.
 * Firmware is read from PBX_TEST_DMI_DIR. */
static void test_may_ask_metadata(void)
{
	char dmi[300];
	snprintf(dmi, sizeof(dmi), "%s/dmi", dir);
	mkdir(dmi, 0700);
	setenv("PBX_TEST_DMI_DIR", dmi, 1);
	unsetenv("PBX_THIS_NODE");
	unsetenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	unsetenv("GCE_METADATA_HOST");
	ok(!pbx_may_ask_metadata("aws") && !pbx_may_ask_metadata("gce"),
	   "a laptop (no firmware sign, nothing set): neither metadata server is asked");
	put("dmi/sys_vendor", "Amazon EC2\n");
	ok(pbx_may_ask_metadata("aws") && !pbx_may_ask_metadata("gce"),
	   "an EC2 machine: IMDS only");
	put("dmi/sys_vendor", "Google\n");
	put("dmi/product_name", "Google Compute Engine\n");
	ok(!pbx_may_ask_metadata("aws") && pbx_may_ask_metadata("gce"),
	   "a Compute Engine machine: its metadata server only");
	put("dmi/sys_vendor", "QEMU\n");
	put("dmi/product_name", "Standard PC (Q35 + ICH9, 2009)\n");
	setenv("PBX_THIS_NODE", "head", 1);
	ok(pbx_may_ask_metadata("aws") && pbx_may_ask_metadata("gce"),
	   "pbx on a cluster's node (pbx-head): its cloud's server");
	unsetenv("PBX_THIS_NODE");
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:1", 1);
	setenv("GCE_METADATA_HOST", "127.0.0.1:1", 1);
	ok(pbx_may_ask_metadata("aws") && pbx_may_ask_metadata("gce"),
	   "an address set: asked there");
	unsetenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	unsetenv("GCE_METADATA_HOST");
	unsetenv("PBX_TEST_DMI_DIR");
}

int main(int argc, char **argv)
{
	snprintf(dir, sizeof(dir), "/tmp/pbx-aws-creds.%d", (int)getpid());
	mkdir(dir, 0700);
	setenv("HOME", dir, 1);
	test_env_and_profiles();
	test_may_ask_metadata();
	if (argc > 1)
		test_imds(argv[1]);
	{
		char cmd[300];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			printf("# could not remove %s\n", dir);
	}
	return tap_done();
}
