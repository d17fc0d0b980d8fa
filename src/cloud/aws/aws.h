/*
 * aws.h - what the files of the EC2 provider share: credentials as the
 * AWS CLI finds them (creds.c), the SigV4 signer (sigv4.c), one EC2 Query
 * API call over src/http (ec2.c), the parsers of its XML replies with
 * libxml2 (parse.c, fuzzed: tests/fuzz/fuzz_aws_reply.c and
 * fuzz_aws_image.c), the provider's context (aws.c; what the files of
 * its operations share besides is aws_internal.h), its prebaked images
 * (image.c: CreateImage), one call of a JSON 1.1 API (json11.c) and the
 * vCPU quotas of Service Quotas (quota.c, fuzz_aws_quota.c).
 */
#ifndef PBX_CLOUD_AWS_AWS_H
#define PBX_CLOUD_AWS_AWS_H

#include <stddef.h>

#include "cloud/provider.h"
#include "http/http.h"
#include "util/buf.h"

#define PBX_EC2_VERSION    "2016-11-15"
/* The tag that names the one node an instance was made for: the head's
 * at its RunInstances, or, for a launch whose pbx-launch would be too
 * long, each instance's once EC2 lists it (poll.c).  By it, or by
 * pbx-launch, list_nodes (list.c) tells the nodes apart. */
#define AWS_TAG_NODE       "pbx-node"
/* The tag by which one RunInstances names each instance it makes: the
 * numbers of its nodes in launch order (launch.c), with pbx-role (the
 * nodes' group); each instance's amiLaunchIndex picks its own. */
#define AWS_TAG_LAUNCH     "pbx-launch"
#define AWS_TAG_ROLE       "pbx-role"
/* EC2's longest tag value. */
#define AWS_LAUNCH_TAG_MAX 256
/* The head's instance type when the template names none. */
#define AWS_HEAD_TYPE      "m5.xlarge"

/* ------------------------------------------------------------ creds.c */

/* Credentials; the secret and token are wiped when freed.  `source` says
 * where they came from ("environment", "profile NAME in FILE",
 * "instance metadata") and is what messages show: never the secret. */
struct aws_creds {
	char *access_key, *secret_key, *token; /* token may be NULL */
	char source[300];
};
void aws_creds_free(struct aws_creds *c);

/* Where the chain looks: profile (NULL = AWS_PROFILE, AWS_DEFAULT_PROFILE
 * or "default"); an explicit profile (config or AWS_PROFILE) skips the
 * environment's keys, as botocore does. */
struct aws_creds_opts {
	const char *profile;   /* clouds.aws.profile, may be NULL */
	struct pbx_http *http; /* for IMDSv2; may be NULL (no IMDS) */
};

/* Finds credentials: env (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN), the profile in the shared credentials file
 * (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials), in the config file
 * (AWS_CONFIG_FILE or ~/.aws/config, section [profile NAME] / [default]),
 * then IMDSv2 (AWS_EC2_METADATA_SERVICE_ENDPOINT, unless
 * AWS_EC2_METADATA_DISABLED=true).  -1 with err listing where it looked. */
int aws_creds_find(const struct aws_creds_opts *o, struct aws_creds *out, struct pbx_err *err);
/* The region: AWS_REGION, AWS_DEFAULT_REGION, then `region` of the
 * profile in the config file.  Caller frees; NULL when none. */
char *aws_region_find(const char *profile);

/* An INI file as the AWS CLI reads it: sections, `key = value` lines,
 * comments (# ;), indented continuation lines ignored.  Calls fn for each
 * key of section `want` (compared exactly); 0, or -1 with err naming file
 * and line. */
typedef void (*aws_ini_fn)(void *ctx, const char *key, const char *value);
int aws_ini_read(const char *name, const char *text, size_t len, const char *want, aws_ini_fn fn,
		 void *ctx, struct pbx_err *err);

/* ------------------------------------------------------------ sigv4.c */

/* RFC 3986 encoding as SigV4 wants it: every byte but A-Z a-z 0-9 - _ . ~
 * as %XX (uppercase).  Appends to b. */
void aws_uri_encode(struct pbx_buf *b, const char *s, size_t len);

/* The same, but '/' stays as it is (a path's segments). */
void aws_uri_encode_path(struct pbx_buf *b, const char *s, size_t len);

struct aws_sign_in {
	const char *method;       /* "POST" */
	const char *host;         /* Host header value (with :port when not default) */
	const char *path;         /* "/", not encoded: the signer encodes it */
	const char *content_type; /* signed when not NULL */
	const char *body;
	size_t body_len;
	const char *amz_date; /* YYYYMMDDTHHMMSSZ */
	const char *region, *service;
	const struct aws_creds *creds;
	/* S3 and other REST calls (NULL for the EC2 form POST): */
	const char *const *query;   /* key, value, key, value, ..., NULL; not
				       encoded (aws_canonical_query) */
	const char *const *headers; /* more headers to sign, "Name: value",
				       NULL-terminated (names any case) */
	const char *payload_hash;   /* the payload's SHA-256 hex (or
				       UNSIGNED-PAYLOAD): used as is, and signed
				       as x-amz-content-sha256, which the caller
				       sends with this value; NULL = hash body,
				       sign no such header */
};

/* The canonical query string of kv (key, value, ..., NULL): each key and
 * value URI-encoded (aws_uri_encode), sorted by encoded key then value,
 * joined with '&'; "" for none.  Also a valid URL query.  Caller frees. */
char *aws_canonical_query(const char *const *kv);

/* The Authorization header value (caller frees; it holds no secret).
 * Signs content-type (when given), host, x-amz-date,
 * x-amz-security-token (with a session token), x-amz-content-sha256
 * (with payload_hash) and `headers`, names lower-cased and sorted.  When
 * creq/sts are not NULL they get the canonical request and the string to
 * sign (tests). */
char *aws_sigv4_authorization(const struct aws_sign_in *in, struct pbx_buf *creq,
			      struct pbx_buf *sts);
/* X-Amz-Date for time t into out[17]. */
void aws_amz_date(long long t, char out[17]);

/* -------------------------------------------------------------- ec2.c */

/* A Query API request's parameters, in the order added. */
struct aws_params {
	char **k, **v;
	size_t n;
};
void aws_param(struct aws_params *p, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void aws_params_free(struct aws_params *p);
/* Action=ACTION&Version=...&k=v..., form-encoded as botocore does (a
 * space is '+').  Caller frees. */
char *aws_form_body(const char *action, const struct aws_params *p);

struct aws;
/* One EC2 call.  Returns 0 with *reply (the XML text, caller releases;
 * empty in dry-run) or -1 with err: transport failure, or an error reply
 * (its Code in *code when code is not NULL, 64 bytes), the message
 * naming the action, the code and what to do about capacity, quota and
 * credential errors.  Throttling and 5xx are retried by src/http. */
int aws_call(struct aws *a, const char *action, const struct aws_params *p, struct pbx_buf *reply,
	     char code[64], struct pbx_err *err);
/* The retry classifier: 5xx (not capacity or quota), RequestLimitExceeded,
 * Throttling and the other throttling and transient codes. */
int aws_retryable(long status, const char *body, size_t len, void *ctx);

/* ----------------------------------------------------------- launch.c */

/* pbx-launch's value for a launch of nodes names[0..k) of group `group`,
 * in launch order: their numbers, each run of consecutive ones as A-B
 * ("3-5,9").  NULL when a name is not GROUP followed by a number, or the
 * value would be longer than AWS_LAUNCH_TAG_MAX.  Caller frees. */
char *aws_launch_tag(const char *group, const char *const *names, size_t k);
/* The node of the instance of launch index `index` in a launch tagged
 * pbx-role=ROLE and pbx-launch=LAUNCH: ROLE followed by the index-th
 * number of LAUNCH.  NULL when either tag is missing or malformed (see
 * launch.c) or index is out of the launch.  Caller frees. */
char *aws_launch_node(const char *role, const char *launch, long index);

/* ------------------------------------------------------------ parse.c */

/* The error envelope (<Response><Errors><Error><Code/><Message/>, with or
 * without a namespace): 0 with code and message, -1 when not one. */
int aws_error_parse(const char *xml, size_t len, char *code, size_t code_size, char *msg,
		    size_t msg_size);

/* Instances of a RunInstances, DescribeInstances or TerminateInstances
 * reply (instancesSet items anywhere, currentState for terminate),
 * appended to *v as the one record both providers fill
 * (src/cloud/provider.h): id and state (never NULL), subnet, both
 * addresses as the reply has them (not yet judged:
 * pbx_instance_check_addresses), reason (stateReason's message), cluster
 * (tag pbx-cluster-id), node (tag pbx-node when it has a node name's
 * shape, 1 to 63 of a-z 0-9 -, else what its launch's tags and its
 * amiLaunchIndex name: aws_launch_node), launch_index, stopped_at
 * (stopped or stopping: the time in StateTransitionReason), started_at
 * (running: launchTime), type (instanceType), spot (instanceLifecycle is
 * spot) and uid (the instance id: EC2 never gives it to another); *next gets nextToken (caller frees) or NULL.  -1 when
 * the text is not an EC2 reply, and when an address is not an IP address
 * (err names the instance; it is appended without that address, so that
 * what was made can still be terminated). */
int aws_insts_parse(const char *xml, size_t len, struct pbx_instance **v, size_t *n, char **next,
		    struct pbx_err *err);
/* The default vCPUs of each instance type of a DescribeInstanceTypes reply
 * (instanceTypeSet items: instanceType, vCpuInfo/defaultVCpus of 1 to
 * 100000): names appended to *types (free each and *types), vCPUs to
 * *vcpus, *n counting both; an item lacking either is skipped.  -1 with err
 * when the reply is not XML. */
int aws_vcpus_parse(const char *xml, size_t len, char ***types, int **vcpus, size_t *n,
		    struct pbx_err *err);

/* The text of the first element named `name` (local name) anywhere in the
 * reply; caller frees; NULL when absent or not XML. */
char *aws_xml_text(const char *xml, size_t len, const char *name);
/* The `name` child of each <item> of every `set` element (e.g. groupId of
 * DescribeSecurityGroups' securityGroupInfo items, not the groupIds inside
 * their rules), appended to *v (free each and *v); -1 when not XML.
 * `name` "tag:KEY" is the item's tag KEY instead ("" when it has none, so
 * the list stays parallel to the item's other fields). */
int aws_xml_texts(const char *xml, size_t len, const char *set, const char *name, char ***v,
		  size_t *n);

/* One AMI of a DescribeImages reply.  All strings owned by the array
 * (aws_images_free); id (ami-...), name and state are never NULL. */
struct aws_image {
	char *id, *name, *state; /* state: pending, available, failed, ... */
	char *reason;            /* stateReason message (control characters
				      made '?'), may be NULL */
	char *owner;             /* its tag pbx-image-id, "" when none */
	char **snapshots;        /* the EBS snapshots of its block device
				      mapping (snap-...) */
	size_t nsnapshots;
};
void aws_images_free(struct aws_image *v, size_t n);
/* The images of a DescribeImages reply (imagesSet items), appended to *v;
 * an item without an ami- id, a name or a state is skipped, as is a
 * snapshot id that is not snap-[0-9a-z]+.  -1 with err when the text is
 * not a DescribeImagesResponse. */
int aws_images_parse(const char *xml, size_t len, struct aws_image **v, size_t *n,
		     struct pbx_err *err);

/* ------------------------------------------------------------ image.c */

/* `pbx image build|delete` on EC2 (see struct pbx_image_ops). */
extern const struct pbx_image_ops aws_image_ops;

/* -------------------------------------------------------------- aws.c */

struct aws {
	const struct pbx_cluster_spec *s;
	struct pbx_http *http;
	struct aws_creds creds; /* empty in dry-run */
	char *endpoint;         /* ends in '/' */
	char *host;             /* Host header of the endpoint */
	char *region;
	char **subnets; /* clouds.aws.subnet, then subnets' others */
	size_t nsubnets;
	char *user, *key_path, *pubkey;
	char *key_name; /* the key pair that holds pubkey, once known (aws_key) */
	char *group_id; /* the cluster's security group, once known */
	char **made;    /* instance ids this context created */
	size_t nmade;
	char **tagged; /* instance ids this context tagged with their node (poll.c) */
	size_t ntagged;
	int touched; /* it created the group or key pair */
	int polls;
	long long last_describe_ms; /* polls describe at most once a second */
	long long started_ms;       /* when this start sent StartInstances, or 0 */
};

/* ----------------------------------------------------------- json11.c */

/* A call of an AWS JSON 1.1 API: where, signed as whom. */
struct aws_json_call {
	struct pbx_http *http;
	const struct aws_creds *creds;
	const char *base;    /* URL the POST goes to, e.g. https://HOST/ */
	const char *host;    /* its Host header (with :port when not default) */
	const char *region;  /* the signing region */
	const char *service; /* the signing name: "pricing", "servicequotas" */
	const char *target;  /* X-Amz-Target, e.g. "AWSPriceListService.GetProducts" */
};
/* One signed POST of `body` (a JSON text).  0 with *resp (any HTTP status;
 * the caller releases resp->body) or -1 with err when nothing came back.
 * Throttling and 5xx replies are retried by src/http. */
int aws_json_post(const struct aws_json_call *c, const char *body, struct pbx_http_resp *resp,
		  struct pbx_err *err);
/* "Code: message" of a JSON 1.1 error reply body[0..len) into out (control
 * characters made '?'), or what it is when it is not one. */
void aws_json_error(const char *body, size_t len, char *out, size_t size);

/* ------------------------------------------------------------ quota.c */

/* The Service Quotas (service ec2) that count an instance family's vCPUs. */
struct aws_vcpu_quota {
	const char *family;    /* "G and VT", "P", "Standard", ... */
	const char *on_demand; /* quota code of running on-demand instances */
	const char *spot;      /* quota code of spot instance requests */
};
/* The quotas of instance type `type` (g4dn.xlarge: G and VT), static; NULL
 * for a family pbx knows no quota of. */
const struct aws_vcpu_quota *aws_vcpu_quota_of(const char *type);
/* The Value of a GetServiceQuota (or GetAWSDefaultServiceQuota) reply for
 * quota `code` into *value; -1 with err when it is not one. */
int aws_quota_parse(const char *json, size_t len, const char *code, double *value,
		    struct pbx_err *err);
/* The account's value of EC2 quota `code` in c's region (GetServiceQuota;
 * AWS's default when the account has none of its own), through c (its
 * target is set here; service "servicequotas").  0 or -1 with err. */
int aws_service_quota(const struct aws_json_call *c, const char *code, double *value,
		      struct pbx_err *err);

/* `pbx config check --clouds` (check.c): one DescribeRegions. */
int aws_check(void *ctx, struct pbx_cloud_check *c, struct pbx_err *err);

#endif
