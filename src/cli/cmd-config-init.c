/*
 * cmd-config-init.c - `pbx config init [local|gce|aws ...]`: a first
 * $PBX_HOME/config.yaml from what this machine already knows
 * (docs/configuration.md).  It makes $PBX_HOME (0700) and an SSH
 * key for the clouds ($PBX_HOME/id_ed25519, by ssh-keygen) when there is
 * none, reads gcloud's active configuration (project, zone) and the AWS
 * profile's region, writes one template per cloud, and says what is still
 * missing.  It reads files only: no network, no metadata server.  An
 * existing config.yaml is never replaced (--print shows what would be
 * written).
 */
#include "cli/cmd.h"
#include "cli/output.h"
#include "cloud/aws/aws.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* What was found, each NULL when not: values are of safe characters
 * (init_safe) or left out. */
struct init_facts {
	char *gce_project, *gce_zone, *gce_where; /* gce_where: the gcloud file read */
	int gce_adc;                              /* application default credentials found */
	char *aws_region, *aws_creds;             /* aws_creds: where the keys are */
	char *key;                                /* the SSH key's path */
	int key_made;
};

/* A value that goes into YAML unquoted: [A-Za-z0-9._:/@-], at most 128. */
static int init_safe(const char *v)
{
	size_t n = strlen(v);
	if (!n || n > 128)
		return 0;
	return strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:/@-") ==
	       n;
}

struct init_ini {
	const char *want; /* key */
	char *value;
};

static void init_ini_key(void *ctx, const char *key, const char *value)
{
	struct init_ini *k = ctx;
	if (!strcmp(key, k->want) && init_safe(value)) {
		free(k->value);
		k->value = xstrdup(value);
	}
}

/* `key` of [section] in INI file `path`, or NULL. */
static char *init_ini_get(const char *path, const char *section, const char *key)
{
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	struct init_ini k = { key, NULL };
	if (pbx_read_file(path, &b, NULL) == 0)
		aws_ini_read(path, b.buf, b.len, section, init_ini_key, &k, &err);
	pbx_buf_release(&b);
	return k.value;
}

/* gcloud's active configuration: CLOUDSDK_CONFIG (default
 * ~/.config/gcloud), its active_config (or CLOUDSDK_ACTIVE_CONFIG_NAME),
 * configurations/config_NAME: [core] project, [compute] zone. */
static void init_gcloud(struct init_facts *f)
{
	const char *dir = getenv("CLOUDSDK_CONFIG"), *home = getenv("HOME");
	char *base = dir && *dir ? xstrdup(dir) : xasprintf("%s/.config/gcloud", home ? home : "");
	char *active = getenv("CLOUDSDK_ACTIVE_CONFIG_NAME")
			       ? xstrdup(getenv("CLOUDSDK_ACTIVE_CONFIG_NAME"))
			       : NULL;
	char *path, *adc;
	const char *gac = getenv("GOOGLE_APPLICATION_CREDENTIALS");
	struct pbx_buf b = PBX_BUF_INIT;
	if (!active) {
		path = xasprintf("%s/active_config", base);
		if (pbx_read_file(path, &b, NULL) == 0) {
			b.len = strcspn(b.buf, "\r\n");
			b.buf[b.len] = '\0';
			active = xstrdup(b.buf);
		}
		pbx_buf_release(&b);
		free(path);
	}
	if (!active || !init_safe(active)) {
		free(active);
		active = xstrdup("default");
	}
	path = xasprintf("%s/configurations/config_%s", base, active);
	f->gce_project = init_ini_get(path, "core", "project");
	f->gce_zone = init_ini_get(path, "compute", "zone");
	if (f->gce_project || f->gce_zone)
		f->gce_where = xstrdup(path);
	adc = xasprintf("%s/application_default_credentials.json", base);
	f->gce_adc = (gac && *gac && access(gac, R_OK) == 0) || access(adc, R_OK) == 0;
	free(adc);
	free(path);
	free(active);
	free(base);
}

/* The AWS profile's region and where its keys are (no metadata server). */
static void init_aws(struct init_facts *f)
{
	struct aws_creds c;
	struct aws_creds_opts o = { 0 };
	struct pbx_err err = PBX_ERR_INIT;
	char *r = aws_region_find(NULL);
	if (r && init_safe(r))
		f->aws_region = r;
	else
		free(r);
	if (aws_creds_find(&o, &c, &err) == 0) {
		f->aws_creds = xstrdup(c.source);
		aws_creds_free(&c);
	}
}

/* $PBX_HOME/id_ed25519, made with ssh-keygen when there is none. */
static int init_key(struct init_facts *f, int write)
{
	char *home = pbx_home_path(""), *pub;
	pid_t pid;
	int st;
	f->key = xasprintf("%sid_ed25519", home);
	free(home);
	if (access(f->key, F_OK) == 0 || !write)
		return 0;
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
		}
		execlp("ssh-keygen", "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "pbx",
		       "-f", f->key, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		pbx_error("ssh-keygen could not make %s (is openssh-client installed?)", f->key);
		return PBX_EXIT_FAIL;
	}
	pub = xasprintf("%s.pub", f->key);
	chmod(f->key, 0600);
	free(pub);
	f->key_made = 1;
	return 0;
}

static void init_local(struct pbx_buf *b)
{
	pbx_buf_adds(b, "  # all nodes on this machine: no cloud account needed\n"
			"  local:\n"
			"    cloud: local\n"
			"    node_groups:\n"
			"      - { name: node, count: 2 }\n\n");
}

static void init_gce_template(struct pbx_buf *b, const struct init_facts *f)
{
	pbx_buf_addf(b,
		     "  # Compute Engine: a head and 2 CPU nodes, stopped after 1 h idle\n"
		     "  gce:\n"
		     "    cloud: gce\n"
		     "    login_user: pbx\n"
		     "    ssh_key: %s\n"
		     "    image: projects/debian-cloud/global/images/family/debian-12\n"
		     "    autostop: 1h\n"
		     "    head: { machine_type: e2-standard-2 }\n"
		     "    node_groups:\n"
		     "      - { name: node, count: 2, machine_type: e2-standard-4 }\n\n",
		     f->key);
}

static void init_aws_template(struct pbx_buf *b, const struct init_facts *f)
{
	pbx_buf_addf(b,
		     "  # EC2: a head and 2 CPU nodes, stopped after 1 h idle.  image: the\n"
		     "  # Debian 12 AMI of your region (admin is its user):\n"
		     "  #   aws ec2 describe-images --owners 136693071363 \\\n"
		     "  #     --filters 'Name=name,Values=debian-12-amd64-*' \\\n"
		     "  #     --query 'sort_by(Images, &CreationDate)[-1].ImageId'\n"
		     "  aws:\n"
		     "    cloud: aws\n"
		     "    login_user: admin\n"
		     "    ssh_key: %s\n"
		     "    image: ami-0123456789abcdef0\n"
		     "    autostop: 1h\n"
		     "    head: { machine_type: m5.large }\n"
		     "    node_groups:\n"
		     "      - { name: node, count: 2, machine_type: m5.xlarge }\n\n",
		     f->key);
}

/* The configuration's text for the clouds chosen. */
static void init_text(struct pbx_buf *b, const struct init_facts *f, int local, int gce, int aws)
{
	pbx_buf_adds(b, "# $PBX_HOME/config.yaml, written by `pbx config init`; every key is\n"
			"# described in templates/config.yaml.  Check it with `pbx config check`.\n"
			"clusters:\n");
	if (local)
		init_local(b);
	if (gce)
		init_gce_template(b, f);
	if (aws)
		init_aws_template(b, f);
	if (!gce && !aws)
		return;
	pbx_buf_adds(b, "clouds:\n");
	if (gce)
		pbx_buf_addf(
			b,
			"  gce:\n"
			"    project: %s%s\n"
			"    zone: %s%s\n",
			f->gce_project ? f->gce_project : "my-project",
			f->gce_project
				? ""
				: "    # your project's id (not found in gcloud's configuration)",
			f->gce_zone ? f->gce_zone : "us-central1-a",
			f->gce_zone ? "" : "    # gcloud's configuration names no zone");
	if (aws)
		pbx_buf_addf(b, "  aws:\n    region: %s%s\n",
			     f->aws_region ? f->aws_region : "us-east-1",
			     f->aws_region ? "" : "    # no region in AWS_REGION or the profile");
}

/* What is still missing, one line each, on stdout. */
static void init_missing(const struct init_facts *f, int gce, int aws)
{
	int n = 0;
	if (gce && !f->gce_project)
		printf("missing %d: the Compute Engine project (clouds.gce.project; 'gcloud config set "
		       "project ID' then run init again, or edit the file)\n",
		       ++n);
	if (gce && !f->gce_adc)
		printf("missing %d: Compute Engine credentials ('gcloud auth application-default "
		       "login', or a service-account key file as clouds.gce.credentials)\n",
		       ++n);
	if (aws && !f->aws_creds)
		printf("missing %d: AWS credentials ('aws configure', or AWS_ACCESS_KEY_ID and "
		       "AWS_SECRET_ACCESS_KEY)\n",
		       ++n);
	if (aws)
		printf("missing %d: the AMI of clusters.aws.image (the Debian 12 AMI of %s; the "
		       "comment above it says how to find it)\n",
		       ++n, f->aws_region ? f->aws_region : "your region");
	if (!n)
		printf("nothing is missing: 'pbx config check', then 'pbx cluster price NAME'\n");
}

static void init_facts_free(struct init_facts *f)
{
	free(f->gce_project);
	free(f->gce_zone);
	free(f->gce_where);
	free(f->aws_region);
	free(f->aws_creds);
	free(f->key);
}

struct init_opts {
	int print;
};

extern const struct pbx_cmd pbx_cmd_config_init; /* below; cmd-config.c lists it */

static const struct pbx_option init_opts[] = {
	PBX_OPT_FLAG('p', "print", struct init_opts, print,
		     "print the configuration instead of writing it (nothing is made)"),
	PBX_OPT_END,
};

/* Writes text to path, created exclusively (0600): never over a file. */
static int init_write(const char *path, const struct pbx_buf *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		pbx_error("cannot create %s: %s", path, strerror(errno));
		return PBX_EXIT_FAIL;
	}
	if (write(fd, text->buf, text->len) != (ssize_t)text->len || fsync(fd) < 0) {
		pbx_error("cannot write %s: %s", path, strerror(errno));
		close(fd);
		unlink(path);
		return PBX_EXIT_FAIL;
	}
	close(fd);
	return 0;
}

static int cmd_config_init_exec(struct pbx_ctx *ctx, int argc, char **argv)
{
	struct init_opts o = { 0 };
	struct init_facts f = { 0 };
	struct pbx_buf text = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	int first, rc, i, local = 0, gce = 0, aws = 0;
	if ((rc = pbx_opts_parse(&pbx_cmd_config_init, argc, argv, &o, &first)))
		return rc;
	for (i = first; i < argc; i++) {
		if (!strcmp(argv[i], "local"))
			local = 1;
		else if (!strcmp(argv[i], "gce"))
			gce = 1;
		else if (!strcmp(argv[i], "aws"))
			aws = 1;
		else
			return pbx_usage_error(&pbx_cmd_config_init, "'%s': want local, gce or aws",
					       argv[i]);
	}
	if (first == argc)
		local = 1;
	if (!o.print && access(ctx->config_path, F_OK) == 0) {
		pbx_error("%s exists: nothing changed ('pbx config check' validates it; 'pbx "
			  "config init --print' shows what init would write)",
			  ctx->config_path);
		return PBX_EXIT_FAIL;
	}
	if (!o.print) {
		char *home = pbx_home_path("");
		rc = pbx_mkdir_p(home, 0700, &err);
		free(home);
		if (rc < 0)
			return pbx_report(&err);
	}
	if (gce)
		init_gcloud(&f);
	if (aws)
		init_aws(&f);
	rc = (gce || aws) ? init_key(&f, !o.print) : 0;
	if (rc == 0) {
		init_text(&text, &f, local, gce, aws);
		if (o.print)
			fwrite(text.buf, 1, text.len, stdout);
		else
			rc = init_write(ctx->config_path, &text);
	}
	if (rc == 0 && !o.print) {
		printf("wrote %s (templates:%s%s%s)\n", ctx->config_path, local ? " local" : "",
		       gce ? " gce" : "", aws ? " aws" : "");
		if (f.key_made)
			printf("made the SSH key %s (and .pub)\n", f.key);
		if (f.gce_where)
			printf("gce: project %s, zone %s, from %s\n",
			       f.gce_project ? f.gce_project : "(none)",
			       f.gce_zone ? f.gce_zone : "(none)", f.gce_where);
		if (aws)
			printf("aws: region %s; credentials: %s\n",
			       f.aws_region ? f.aws_region : "(none)",
			       f.aws_creds ? f.aws_creds : "(none)");
		if (gce || aws)
			init_missing(&f, gce, aws);
		else
			printf("next: 'pbx cluster start local', then 'pbx parrun "
			       "templates/experiments/sweep-demo/experiment.yaml local' "
			       "(docs/experiments.md)\n");
	}
	pbx_buf_release(&text);
	init_facts_free(&f);
	return rc;
}

const struct pbx_cmd pbx_cmd_config_init = {
	.name = "init",
	.summary = "write a first configuration from what this machine knows",
	.usage = "pbx config init [-p] [local|gce|aws ...]",
	.description = "Makes $PBX_HOME (mode 0700) and writes $PBX_HOME/config.yaml with one\n"
		       "template per cloud named (default: local): local (nodes on this\n"
		       "machine), gce (project and zone from gcloud's active configuration),\n"
		       "aws (the profile's region).  For a cloud it makes the SSH key\n"
		       "$PBX_HOME/id_ed25519 with ssh-keygen when there is none, and says\n"
		       "what is still missing (a project, credentials, an AMI).  It reads\n"
		       "files only: no network, no metadata server.  An existing config.yaml\n"
		       "is never replaced (exit 1).",
	.args = "CLOUD",
	.options = init_opts,
	.examples = "pbx config init\n"
		    "pbx config init local gce\n"
		    "pbx config init --print aws",
	.min_args = 0,
	.max_args = PBX_ARGS_MANY,
	.exec = cmd_config_init_exec,
};
