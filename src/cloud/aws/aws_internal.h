/*
 * aws_internal.h - what the files of the aws provider's operations share
 * (aws.h is what the EC2 client shares with the rest of pbx): the
 * operations that aws.c puts in the provider's table, and what they use
 * of one another.
 *
 *   aws.c      open, close, plan, login, layout; the table
 *   tags.c     the names and tags of the cluster's resources, finding them
 *   access.c   the cluster's security group and key pair
 *   create.c   create_begin: one RunInstances per node kind, all or nothing
 *   poll.c     create_poll: DescribeInstances until every node runs
 *   list.c     list: what carries the cluster's tags; list_nodes
 *   destroy.c  destroy and remove_nodes: TerminateInstances, then waiting
 *   ec2.c      one call (aws_call, aws_do)
 */
#ifndef PBX_CLOUD_AWS_AWS_INTERNAL_H
#define PBX_CLOUD_AWS_AWS_INTERNAL_H

#include <stddef.h>

#include "cloud/aws/aws.h"

#define AWS_WAIT_LIMIT_S 600

/* The state list gives the cluster's security group and key pair (struct
 * pbx_instance), by which destroy tells them from instances. */
#define AWS_SG           "SECURITY_GROUP"
#define AWS_KEY          "KEY_PAIR"

/* -------------------------------------------------------------- ec2.c */

/* A simple call whose reply is not needed (reply may be NULL; else it gets
 * the reply, which the caller releases); codes in `ok` (NULL-terminated,
 * may be NULL) count as success.  Frees p's parameters. */
int aws_do(struct aws *a, const char *action, struct aws_params *p, const char *const *ok,
	   struct pbx_buf *reply, struct pbx_err *err);

/* ------------------------------------------------------------- tags.c */

/* The name of the cluster's security group and key pair (see tags.c).
 * Caller frees. */
char *aws_res_name(const struct aws *a);
/* Adds TagSpecification.N for resource type `type` to p: the cluster's
 * labels, and Name and pbx-role=ROLE for instances and volumes (role NULL:
 * Name is aws_res_name), then each KEY, VALUE pair of `extra` (NULL, or a
 * list ending in NULL). */
void aws_tag_spec(const struct aws *a, struct aws_params *p, int n, const char *type,
		  const char *role, const char *const *extra);
/* The instances of the cluster in `states` (NULL-terminated; NULL = the
 * live ones), every page; *v owned by the caller (pbx_instances_free). */
int aws_describe(struct aws *a, const char *const *states, struct pbx_instance **v, size_t *n,
		 struct pbx_err *err);
/* The instance of v with id `id` (may be NULL: none); borrowed from v. */
const struct pbx_instance *aws_find(const struct pbx_instance *v, size_t n, const char *id);
/* The `field` of each item of the `set` list of `action`'s reply (e.g.
 * DescribeSecurityGroups, securityGroupInfo, groupId), filtered by the
 * cluster's tags; with `ids` (may be NULL) also each item's pbx-cluster-id
 * tag ("" when none), as many.  *v and *ids owned by the caller
 * (aws_strs_free). */
int aws_tagged_ids(struct aws *a, const char *action, const char *set, const char *field, char ***v,
		   size_t *n, char ***ids, struct pbx_err *err);
int aws_tagged(struct aws *a, const char *action, const char *set, const char *field, char ***v,
	       size_t *n, struct pbx_err *err);
/* The cluster's key pairs: their names and public keys (OpenSSH format),
 * as many; both owned by the caller (aws_strs_free). */
int aws_key_pairs(struct aws *a, char ***names, char ***keys, size_t *n, struct pbx_err *err);
/* Frees the n strings of v and v. */
void aws_strs_free(char **v, size_t n);

/* ----------------------------------------------------------- access.c */

/* Finds or makes the cluster's security group (a->group_id) and
 * authorizes its rules; sets a->touched when it made it. */
int aws_group(struct aws *a, struct pbx_err *err);
/* The cluster's key pair that holds this pbx's login key (the user's; on
 * the head, the head's own), imported unless there: the first as
 * aws_res_name, another key as aws_res_name-KKKKKKKK (the first 8 hex
 * digits of the SHA-256 of its key).  Sets a->key_name, and a->touched
 * when it imported it. */
int aws_key(struct aws *a, struct pbx_err *err);
/* Deletes the cluster's security group and key pair, and those among v
 * (what list gave), once no instance uses them any more. */
int aws_delete_own(struct aws *a, const struct pbx_instance *v, size_t n, struct pbx_err *err);
/* A head deleting its own cluster, the rest of which is gone: moves
 * instance `self` into its VPC's default security group, which lets it
 * reach the API still and admits nothing from outside, then deletes the
 * cluster's group and key pair (aws_delete_own with v), so nothing is left
 * once `self` is terminated.  Needs ec2:ModifyInstanceAttribute. */
int aws_leave_own(struct aws *a, const char *self, const struct pbx_instance *v, size_t n,
		  struct pbx_err *err);

/* ----------------------------------------------------------- create.c */

int aws_create_begin(void *ctx, struct pbx_node_row *nodes, size_t n,
		     const struct pbx_create_hooks *h, struct pbx_err *err);
/* After a failed creation (err says why): removes what this context made
 * (all or nothing), and says so in err. */
void aws_clean_up(struct aws *a, struct pbx_err *err);

/* ------------------------------------------ poll.c, list.c, destroy.c */

int aws_create_poll(void *ctx, struct pbx_node_row *nodes, size_t n,
		    const struct pbx_create_hooks *h, struct pbx_err *err);
int aws_list(void *ctx, struct pbx_instance **v, size_t *n, struct pbx_err *err);
/* The cluster's live instances (one DescribeInstances a page), with their
 * addresses and the node each one's pbx-node tag names (NULL: untagged,
 * not learnt). */
int aws_list_nodes(void *ctx, struct pbx_instance **v, size_t *n, struct pbx_err *err);
int aws_destroy(void *ctx, const struct pbx_instance *v, size_t n, struct pbx_err *err);
int aws_remove_nodes(void *ctx, const struct pbx_node_row *nodes, size_t n, struct pbx_err *err);

#endif
