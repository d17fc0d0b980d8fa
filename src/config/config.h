/*
 * config.h - $PBX_HOME/config.yaml parsed (with libyaml) into typed structs.
 *
 * The file holds cluster templates and cloud sections:
 *
 *   clusters:
 *     NAME:
 *       cloud: local | gce | aws
 *       login_user: root
 *       ssh_key: ~/.pbx/id_ed25519     # private key file; absent = ssh-agent
 *       image: debian-12
 *       subnet: subnet-0a              # aws only: overrides clouds.aws.subnet
 *       ssh_from: [203.0.113.0/24]     # who reaches port 22 (default anywhere)
 *       compute_external_ips: false    # gce only: compute nodes get addresses
 *       autostop: 1h                   # idle time before it stops itself; off
 *       autostop_action: stop          # or delete (needs the head's identity)
 *       budget: 250                    # the most it may spend (price currency); off
 *       head: { machine_type: e2-standard-4 }
 *       node_groups:
 *         - { name: gpu, count: 2, machine_type: n1-standard-8,
 *             gpus: 2, gpu_type: nvidia-tesla-t4, spot: false }
 *   clouds:
 *     gce:   { project: P, zone: Z, credentials: FILE, endpoint: URL }
 *     aws:   { region: R, profile: NAME, endpoint: URL, subnet: S,
 *              subnets: [S, ...], disk_gb: N }
 *     local: { address_base: 127.0.1.0, ssh_port: 22022, slurm_port_base: 17000 }
 *   prices:                        # docs/cost.md
 *     currency: USD                # what the catalogues are asked in
 *     max_age: 7d                  # refetch a cached catalogue older than this
 *     hourly: { n1-standard-8: 0.38 }       # a node-hour, GPUs not included
 *     spot_hourly: { n1-standard-8: 0.08 }
 *     gpu_hourly: { nvidia-tesla-t4: 0.35 } # a GPU-hour (spot nodes too)
 *
 * Every error names file, line and key ("config.yaml:7: clusters.x.count:
 * must be a positive integer, got 'two'") with code PBX_EXIT_USAGE (unsafe
 * permissions: PBX_EXIT_SECURITY).  Loading changes nothing on disk.  Every
 * key is described in templates/config.yaml.
 *
 * Rules beyond types: unknown and duplicate keys are errors; YAML aliases
 * and tags are refused; template and node group names match
 * [a-z][a-z0-9-]{0,30} and do not end in '-' (group names also not in a
 * digit, since nodes are named NAME1, NAME2, ...); node group names are
 * unique within a template; a template has 1..PBX_CONFIG_MAX_GROUPS groups.
 * Defaults: login_user "root" and image "host" for cloud local (required
 * for gce/aws, as is each node group's machine_type); gpus 0; spot false;
 * autostop an hour for gce/aws, off for local.
 *
 * Ownership: a struct pbx_config and every string and array reachable from
 * it belong to the config and are released by pbx_config_free().
 */
#ifndef PBX_CONFIG_CONFIG_H
#define PBX_CONFIG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define PBX_CONFIG_MAX_SIZE    (1024 * 1024) /* bytes in config.yaml */
#define PBX_CONFIG_MAX_GROUPS  64            /* node groups per template */
#define PBX_CONFIG_MAX_COUNT   10000         /* nodes per node group */
#define PBX_CONFIG_MAX_GPUS    64            /* GPUs per node */
#define PBX_AUTOSTOP_DEFAULT_S 3600          /* gce and aws templates' autostop */
#define PBX_AUTOSTOP_MAX_S     (30L * 86400)

/* A field added to struct pbx_node_group or struct pbx_cluster_template
 * must also be written by config_write.c (pbx on the head gets the whole
 * template) and compared by tests/config/test_config_write.c. */
struct pbx_node_group {
	char *name;         /* group name; nodes are named NAME1, NAME2, ... */
	int count;          /* number of nodes, >= 1 */
	char *machine_type; /* cloud machine type; may be NULL for local */
	int gpus;           /* GPUs per node (GRES gpu count), >= 0 */
	char *gpu_type;     /* accelerator type, may be NULL */
	bool spot;          /* preemptible / spot instances */
	int min;            /* power saving (min:): nodes NAME1..NAMEmin always
	                        run, the rest (up to count, which max: sets) are
	                        made by SLURM's ResumeProgram when jobs wait;
	                        -1 = all always run (docs/power-saving.md) */
	int cpus;           /* CPUs a node advertises to SLURM; 0 = what it has
	                        (set it for local node bodies to run more tasks
	                        at once than this machine has cores) */
	int line;           /* line in the config file, 0 for built-in */
};

struct pbx_cluster_template {
	char *name;                  /* the key under `clusters:` */
	char *cloud;                 /* "local", "gce", "aws" or "ssh" */
	char *login_user;            /* SSH login user */
	char *ssh_key;               /* private key path (tilde-expanded), NULL = agent */
	char *image;                 /* image name / family / AMI */
	char *subnet;                /* aws: this template's subnet (before
	                                 clouds.aws.subnet); may be NULL */
	char *head_machine_type;     /* head node machine type, may be NULL */
	char *head_service_account;  /* gce: e-mail of the service account the head
	                                 runs as (cloud-platform scope), may be NULL */
	char *head_instance_profile; /* aws: IAM instance profile name of the head,
	                                 may be NULL */
	struct pbx_node_group *groups;
	size_t ngroups;
	long max_array_size;       /* slurm.max_array_size; 0 = default (10001) */
	long max_job_count;        /* slurm.max_job_count; 0 = default (50000) */
	int suspend_time;          /* slurm.suspend_time: seconds an idle power-saving
					 node runs before it is removed; 0 = 600 */
	int resume_timeout;        /* slurm.resume_timeout: seconds a node may take to
					 come up; 0 = boot_timeout + 300 */
	int min_nodes;             /* fewest compute nodes a start accepts; 0 = all */
	int boot_timeout;          /* seconds a fresh node may take to answer SSH
					 with its login user; 0 = 300 */
	int autostop;              /* seconds the cluster may sit idle (no SLURM
					 job, no SSH session) before it stops itself;
					 0 = never (docs/autostop.md) */
	bool autostop_delete;      /* autostop_action: delete: the head deletes the
					 cluster (as its own identity) instead of
					 stopping it, once every result is harvested */
	int64_t budget;            /* the most the cluster may spend, in nano-units
					 of prices.currency; 0 = none (docs/cost.md) */
	char **ssh_from;           /* IPv4 blocks allowed to reach the head's sshd;
					 NULL = anywhere (0.0.0.0/0) */
	size_t nssh_from;          /* >= 1 */
	bool compute_external_ips; /* gce: compute nodes get an external address
					 too (default: none; outbound through the
					 cluster's Cloud NAT) */
	char *proxy;               /* the nodes' HTTP proxy, "http://HOST:PORT"
					 (proxy.c: checked and written so): apt,
					 the environment build and the tasks go
					 out through it (docs/configuration.md, "A
					 cluster behind a proxy"); NULL = none */
	char **no_proxy;           /* no_proxy: hosts, domains (".example.edu")
					 and addresses reached without it */
	size_t nno_proxy;
	int line;         /* line of the template's name, 0 for built-in */
	int ssh_key_line; /* line of ssh_key:, 0 when absent */
	/* cloud "ssh": an existing SLURM cluster pbx uses as it is (its login
	 * node; docs/ssh-clusters.md) */
	char *host;     /* its login node's name or address */
	int port;       /* its sshd's port (22) */
	char *work_dir; /* where pbx's packages and task directories go: a
			   plain path, absolute or relative to the login
			   user's home, or $NAME/... (a variable of the login
			   environment, after setup) */
	char *setup;    /* shell commands run before each of pbx's (module
			   load ...), may be NULL */
	int openssh;    /* transport: openssh (1): log in with the user's own
			   ssh and one control connection (src/ssh/openssh.c);
			   0: pbx's own SSH client (libssh2) */
};

struct pbx_cloud_gce {
	char *project, *zone, *credentials; /* each may be NULL; credentials
						 is tilde-expanded */
	char *endpoint;                     /* compute v1 base URL; NULL =
						 https://compute.googleapis.com/compute/v1/ */
	char *billing_endpoint;             /* Cloud Billing Catalog API base URL;
						 NULL = see pbx_price_gce_base */
	char *storage_endpoint;             /* Cloud Storage JSON API base URL
						 (https://storage.googleapis.com/
						 when NULL; src/objstore) */
	char **zones;                       /* zones to fall back to, in order,
						 when one has no capacity; may be NULL */
	size_t nzones;
	int credentials_line; /* 0 when absent */
};

struct pbx_cloud_aws {
	char *region, *profile, *endpoint; /* each may be NULL; endpoint: the
						 EC2 Query API URL (an emulator) */
	char *pricing_endpoint;            /* Price List Query API URL; NULL =
						 see pbx_price_aws_base */
	char *s3_endpoint;                 /* S3 endpoint (path-style requests
						 to it); NULL = the region's
						 virtual-hosted one (src/objstore) */
	char *subnet;                      /* subnet for every instance; NULL =
						 the default VPC's */
	char **subnets;                    /* subnets to fall back to, in order,
						 on InsufficientInstanceCapacity */
	size_t nsubnets;
	int disk_gb; /* root volume size; 0 = 50 */
};

struct pbx_cloud_local {
	char *address_base;  /* first node address is base+1; default 127.0.1.0 */
	int ssh_port;        /* sshd port of node bodies; default 22022 */
	int slurm_port_base; /* first SLURM port; default 17000 */
};

/* One entry of prices.hourly, spot_hourly or gpu_hourly. */
struct pbx_price_override {
	char *name;    /* machine type / instance type / accelerator type */
	int64_t nanos; /* per hour, in 1e-9 of the currency (util/money.h) */
	int line;
};

#define PBX_PRICES_MAX_AGE_DEFAULT_S (7L * 86400)

struct pbx_prices {
	char *currency; /* ISO 4217; NULL = USD */
	long max_age;   /* seconds; 0 = 7 days */
	struct pbx_price_override *hourly, *spot_hourly, *gpu_hourly;
	size_t nhourly, nspot_hourly, ngpu_hourly;
};

struct pbx_config {
	char *path; /* file it came from, or "(built-in)" */
	struct pbx_cluster_template *templates;
	size_t ntemplates;
	struct pbx_cloud_gce gce;
	struct pbx_cloud_aws aws;
	struct pbx_cloud_local local;
	struct pbx_prices prices;
	char *publisher; /* `pbx publish`'s name in a pool; NULL = the login name */
	/* data_cache_max: the download cache's bound (docs/data.md), when
	 * data_cache_bounded; else none */
	int data_cache_bounded;
	uint64_t data_cache_max;
};

/* A publisher name: 1 to 64 of a-z A-Z 0-9 . _ -, not beginning with '.'
 * or '-' (it becomes a part of object names in a pool, src/pool). */
int pbx_publisher_name_valid(const char *name);

/*
 * Loads and validates `path`.  A missing file yields the built-in default
 * (one template "local", 2 compute nodes with 2 GPU GRES each) when
 * `missing_ok`.  Refuses a file others can write.  On success *out is owned
 * by the caller (pbx_config_free); on failure *out is NULL and err says
 * FILE:LINE: KEY: problem.
 */
int pbx_config_load(const char *path, int missing_ok, struct pbx_config **out, struct pbx_err *err);
/* Parses YAML text as if read from `name` (used by tests and fuzzing). */
int pbx_config_parse(const char *name, const char *text, size_t len, struct pbx_config **out,
		     struct pbx_err *err);
/* The built-in default configuration; caller frees with pbx_config_free. */
struct pbx_config *pbx_config_default(void);
void pbx_config_free(struct pbx_config *cfg);
/* Template by name, or NULL. */
const struct pbx_cluster_template *pbx_config_template(const struct pbx_config *cfg,
						       const char *name);
/* " (it defines no cluster template: add one under clusters:)" when cfg
 * has none, else "": for "no cluster template named X" messages.  Static
 * text. */
const char *pbx_config_none_hint(const struct pbx_config *cfg);
/* Total compute nodes in a template. */
int pbx_template_node_count(const struct pbx_cluster_template *t);
/* How pbx logs in to cloud ssh template t, for messages: "USER@HOST:PORT",
 * or "HOST (user and port from your ssh_config)" when transport: openssh
 * leaves login_user to ssh_config.  Caller frees. */
char *pbx_template_login(const struct pbx_cluster_template *t);
/* One-line summary, e.g. "local: 2 x node (2 GPU)" or
 * "gce: 2 x gpu n1-standard-8 (2 GPU nvidia-tesla-t4, spot), head e2-standard-4".
 * Caller frees. */
char *pbx_template_describe(const struct pbx_cluster_template *t);
/*
 * For `pbx config check`: verifies that every ssh_key (and the gce
 * credentials file) exists and is private (no group/other access; the
 * message says "chmod 600").  Errors read "FILE:LINE: KEY.PATH: problem";
 * code PBX_EXIT_SECURITY for permissions, PBX_EXIT_USAGE for a missing
 * file.  Reads nothing but file metadata; changes nothing.
 */
int pbx_config_check_files(const struct pbx_config *cfg, struct pbx_err *err);
/* True when `name` is a valid template / cluster / node group name:
 * [a-z][a-z0-9-]{0,30}, not ending in '-' (usable as a hostname and as a
 * cloud label). */
bool pbx_config_name_ok(const char *name);

#endif
