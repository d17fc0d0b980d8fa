/*
 * poll.c - create_poll of the aws provider: DescribeInstances of the
 * cluster (by tag, every page) at most once a second until every node's
 * instance is running with an address, which the node's row then takes
 * (pbx_cloud_node_running: loopback only against an API on loopback).  A
 * node whose instance is stopped (autostop) is started again; one that is
 * gone, or stops again after that, fails the creation, and what it made
 * goes (aws_clean_up, create.c).  In a cluster with power saving, each
 * live instance whose tags name no node, or another (a launch whose
 * pbx-launch would have been too long, an instance of an older pbx), is
 * tagged with its node's name (pbx-node, aws_tag_node).
 */
#include "cloud/aws/aws_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/xalloc.h"

#define AWS_POLL_LIMIT        3000 /* create_poll calls (about 200 ms apart): 10 min */
#define AWS_DESCRIBE_EVERY_MS 1000
#define AWS_RESTART_GRACE_MS  90000 /* stopped -> pending takes seconds */
#define AWS_SEEN_GRACE \
	150 /* polls an accepted instance may be missing
				   from DescribeInstances (eventual consistency) */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The nodes whose instance is stopped (autostop, a shutdown on it,
 * StopInstances): one StartInstances for all of them, once per start;
 * their disks are as they were.  The poll then waits for `running` as
 * for a new instance, and takes the new public address EC2 gives. */
static int aws_start_stopped(struct aws *a, struct pbx_node_row *nodes, size_t n,
			     const struct pbx_instance *have, size_t nhave,
			     const struct pbx_create_hooks *h, struct pbx_err *err)
{
	struct aws_params p = { 0 };
	size_t i, k = 0;
	char key[32];
	int rc;
	for (i = 0; i < n; i++) {
		const struct pbx_instance *x = aws_find(have, nhave, nodes[i].instance_id);
		if (x && !strcmp(x->state, "stopped") && strcmp(nodes[i].state, "starting") != 0) {
			snprintf(key, sizeof(key), "InstanceId.%zu", ++k);
			aws_param(&p, key, "%s", x->id);
		}
	}
	if (!k)
		return 0;
	rc = aws_do(a, "StartInstances", &p, NULL, NULL, err);
	if (rc < 0)
		return pbx_err_prefix(err, "starting stopped instances");
	a->started_ms = now_ms();
	for (i = 0; i < n; i++) {
		const struct pbx_instance *x = aws_find(have, nhave, nodes[i].instance_id);
		if (x && !strcmp(x->state, "stopped") && strcmp(nodes[i].state, "starting") != 0)
			pbx_cloud_node_state(nodes, i, "starting", "starting (was stopped)", h);
	}
	return 0;
}

/* Whether this context tagged instance `id` already. */
static int aws_tagged_here(const struct aws *a, const char *id)
{
	size_t i;
	for (i = 0; i < a->ntagged; i++)
		if (!strcmp(a->tagged[i], id))
			return 1;
	return 0;
}

/* Instance x of `node`, live, is named as the node by its tags: one
 * CreateTags of pbx-node = the node's name unless it is.  A launch names
 * its instances itself (pbx-launch and amiLaunchIndex, launch.c), so this
 * tags only an instance whose launch could not (a launch tag longer than
 * EC2 allows: nodes numbered far apart), one whose tags were removed, or
 * one an older pbx made; list_nodes (list.c) tells the nodes apart by
 * them.  Only in a cluster with power saving, where the user's pbx learns
 * from the list what the head woke.  Done here, once EC2 lists the
 * instance (a CreateTags just after RunInstances may meet EC2's eventual
 * consistency), and on every start.  Best effort, once per instance and
 * context: a refusal (an older IAM policy of the head's without it) is an
 * event, and the creation goes on. */
static void aws_tag_node(struct aws *a, const struct pbx_node_row *node,
			 const struct pbx_instance *x)
{
	static const char *const live[] = { "pending", "running", "stopping", "stopped", NULL };
	struct pbx_err e = PBX_ERR_INIT;
	struct aws_params p = { 0 };
	size_t k;
	for (k = 0; live[k] && strcmp(live[k], x->state) != 0; k++)
		;
	if (!live[k] || (x->node && !strcmp(x->node, node->name)) || aws_tagged_here(a, x->id) ||
	    !pbx_power_saving(a->s->t))
		return;
	a->tagged = xreallocarray(a->tagged, a->ntagged + 1, sizeof(*a->tagged));
	a->tagged[a->ntagged++] = xstrdup(x->id);
	aws_param(&p, "ResourceId.1", "%s", x->id);
	aws_param(&p, "Tag.1.Key", "%s", AWS_TAG_NODE);
	aws_param(&p, "Tag.1.Value", "%s", node->name);
	if (aws_do(a, "CreateTags", &p, NULL, NULL, &e) < 0)
		pbx_store_event(a->s->store, a->s->id, "aws.tag",
				"instance %s of node %s not tagged %s: %s", x->id, node->name,
				AWS_TAG_NODE, e.msg);
	pbx_err_clear(&e);
}

int aws_create_poll(void *ctx, struct pbx_node_row *nodes, size_t n,
		    const struct pbx_create_hooks *h, struct pbx_err *err)
{
	static const char *const all[] = { "pending",       "running",    "stopping", "stopped",
					   "shutting-down", "terminated", NULL };
	struct aws *a = ctx;
	struct pbx_instance *have = NULL;
	size_t nhave = 0, i, running = 0;
	int rc;
	if (a->s->dry_run)
		return 1;
	if (++a->polls > AWS_POLL_LIMIT)
		return pbx_err_set(err, "instances not running after %d s", AWS_POLL_LIMIT / 5);
	if (now_ms() - a->last_describe_ms < AWS_DESCRIBE_EVERY_MS)
		return 0;
	a->last_describe_ms = now_ms();
	if (aws_describe(a, all, &have, &nhave, err) < 0)
		return -1;
	if (aws_start_stopped(a, nodes, n, have, nhave, h, err) < 0) {
		pbx_instances_free(have, nhave);
		return -1;
	}
	for (i = 0; i < n; i++) {
		const struct pbx_instance *x = aws_find(have, nhave, nodes[i].instance_id);
		if (!strcmp(nodes[i].state, PBX_NODE_NOT_CREATED)) {
			running++; /* min_nodes let it go */
			continue;
		}
		if (!x && a->polls < AWS_SEEN_GRACE)
			continue;
		if (x)
			aws_tag_node(a, &nodes[i], x);
		if (x && (!strcmp(x->state, "stopping") || !strcmp(x->state, "stopped"))) {
			/* started once it is stopped (aws_start_stopped); stopped
			 * again long after StartInstances: it powered itself off */
			if (!strcmp(nodes[i].state, "starting") && a->started_ms &&
			    now_ms() - a->started_ms > AWS_RESTART_GRACE_MS) {
				pbx_err_set(
					err,
					"instance %s of node %s is %s again after StartInstances%s%s",
					x->id, nodes[i].name, x->state, x->reason ? ": " : "",
					x->reason ? x->reason : "");
				pbx_instances_free(have, nhave);
				aws_clean_up(a, err);
				return -1;
			}
			continue;
		}
		if (!x || !strcmp(x->state, "shutting-down") || !strcmp(x->state, "terminated")) {
			pbx_err_set(err, "instance %s of node %s is %s%s%s", nodes[i].instance_id,
				    nodes[i].name, x ? x->state : "gone",
				    x && x->reason ? ": " : "", x && x->reason ? x->reason : "");
			pbx_instances_free(have, nhave);
			aws_clean_up(a, err);
			return -1;
		}
		if (strcmp(x->state, "running") != 0 || !x->private_ip)
			continue;
		/* an EC2 instance id is never given to another instance: it is
		 * the instance's uid too */
		rc = pbx_cloud_node_running(a->endpoint, nodes, i, x->id, x->id, x->private_ip,
					    i == 0 ? x->public_ip : NULL, x->subnet, h, err);
		if (rc < 0) {
			pbx_instances_free(have, nhave);
			return -1;
		}
		if (rc > 0)
			continue; /* once the head runs */
		running++;
	}
	pbx_instances_free(have, nhave);
	return running == n;
}
