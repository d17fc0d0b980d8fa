/*
 * test_aws_moto.c - the aws provider through its interface against moto
 * with signatures checked (aws_moto.sh starts tests/emulators/aws/
 * ec2_harness.py --no-bodies and sets the IAM user's key): what `pbx
 * cluster resize` needs of it.  Create a head + 2 nodes; remove_nodes of
 * one node: the others, the security group and the key pair stay; create
 * again: only the missing node is made; destroy of a subset keeps the
 * group too; destroy everything listed: nothing is left.  Then template
 * e2 with min_nodes 1 (MinCount 1, MaxCount 2: moto makes MinCount): the
 * start goes on with gpu2 not created, and the next create makes it.
 * Between: another cluster called e1 (another pbx home's, another id)
 * lists none of the first one's resources, a survey (no id) lists all of
 * them with the first one's id, and the other's destroy deletes nothing.
 *
 *   test_aws_moto CONFIG.yaml
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cloud/provider.h"
#include "common/tap.h"
#include "config/config.h"
#include "util/fs.h"

struct counts {
	size_t instances, groups, keys;
};

static struct counts list(const struct pbx_provider *p, void *ctx)
{
	struct pbx_instance *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	struct counts c = { 0, 0, 0 };
	size_t n = 0, i;
	if (p->list(ctx, &v, &n, &err) < 0) {
		printf("# list: %s\n", err.msg);
		c.instances = 999;
		return c;
	}
	for (i = 0; i < n; i++) {
		if (!strcmp(v[i].state, "SECURITY_GROUP"))
			c.groups++;
		else if (!strcmp(v[i].state, "KEY_PAIR"))
			c.keys++;
		else
			c.instances++;
	}
	pbx_instances_free(v, n);
	return c;
}

/* Another pbx home's cluster of the same name: sees and deletes none of
 * the resources of the cluster `spec` made; a survey sees them all. */
static void other_home(const struct pbx_provider *p, const struct pbx_cluster_spec *spec)
{
	struct pbx_cluster_spec other = *spec, survey = *spec;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_instance *v = NULL;
	struct counts c;
	void *ctx = NULL;
	size_t n = 0, i, theirs = 0;
	other.uid = "ffffffffffffffffffffffffffffffff";
	survey.uid = NULL;
	if (!ok(p->open(&other, &ctx, &err) == 0, "open another home's e1: %s", err.msg))
		return;
	c = list(p, ctx);
	ok(c.instances == 0 && c.groups == 0 && c.keys == 0,
	   "another cluster called e1 lists none of the first's resources (%zu %zu %zu)",
	   c.instances, c.groups, c.keys);
	ok(p->destroy(ctx, NULL, 0, &err) == 0, "its destroy: %s", err.msg);
	p->close(ctx);
	if (!ok(p->open(&survey, &ctx, &err) == 0 && p->list(ctx, &v, &n, &err) == 0,
		"a survey of the name e1: %s", err.msg))
		return;
	for (i = 0; i < n; i++)
		theirs += v[i].cluster && !strcmp(v[i].cluster, spec->uid);
	ok(n == 5 && theirs == 5,
	   "lists the first's 3 instances, group and key pair with its id "
	   "(%zu of %zu)",
	   theirs, n);
	pbx_instances_free(v, n);
	p->close(ctx);
}

/* create_begin, then create_poll until every node runs. */
static int create(const struct pbx_provider *p, void *ctx, struct pbx_node_row *nodes, size_t n,
		  struct pbx_err *err)
{
	struct timespec d = { 0, 200 * 1000 * 1000 };
	int rc = p->create_begin(ctx, nodes, n, NULL, err);
	while (rc == 0) {
		rc = p->create_poll(ctx, nodes, n, NULL, err);
		if (rc == 0)
			nanosleep(&d, NULL);
	}
	return rc < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
	struct pbx_config *cfg = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_cluster_spec spec = { 0 };
	struct pbx_node_row *nodes = NULL;
	struct pbx_instance one = { 0 };
	const struct pbx_provider *p = pbx_provider_find("aws");
	struct counts c;
	char *kept, *gone;
	void *ctx = NULL;
	size_t n = 0;
	int rc;
	if (argc < 2 || pbx_config_load(argv[1], 0, &cfg, &err) < 0) {
		ok(0, "config: %s", err.msg);
		return tap_done();
	}
	spec.cfg = cfg;
	spec.t = pbx_config_template(cfg, "e1");
	spec.name = "e1";
	spec.id = 7;
	spec.uid = "0123456789abcdef0123456789abcdef";
	if (!ok(p && p->open(&spec, &ctx, &err) == 0 && p->plan(ctx, &nodes, &n, &err) == 0 &&
			n == 3,
		"open and plan head + 2 nodes: %s", err.msg))
		return tap_done();
	ok(create(p, ctx, nodes, n, &err) == 0, "create: %s", err.msg);
	c = list(p, ctx);
	ok(c.instances == 3 && c.groups == 1 && c.keys == 1, "3 instances, a group, a key pair");
	other_home(p, &spec);
	c = list(p, ctx);
	ok(c.instances == 3 && c.groups == 1 && c.keys == 1, "the first e1 is whole");

	/* a subset: gpu2 */
	one.id = nodes[2].instance_id;
	one.state = (char *)"running";
	gone = strdup(nodes[2].instance_id);
	kept = strdup(nodes[1].instance_id);
	ok(p->remove_nodes(ctx, &nodes[2], 1, &err) == 0, "remove_nodes of one node: %s", err.msg);
	c = list(p, ctx);
	ok(c.instances == 2 && c.groups == 1 && c.keys == 1,
	   "the other 2 instances, the group and the key pair stay (%zu %zu %zu)", c.instances,
	   c.groups, c.keys);
	ok(p->remove_nodes(ctx, &nodes[2], 1, &err) == 0, "removing it again is fine: %s", err.msg);

	/* grow back: only gpu2 is made */
	ok(create(p, ctx, nodes, n, &err) == 0, "create again: %s", err.msg);
	ok(strcmp(nodes[2].instance_id, gone) != 0 && !strcmp(nodes[1].instance_id, kept),
	   "a new instance for the missing node only (%s, kept %s)", nodes[2].instance_id, kept);
	c = list(p, ctx);
	ok(c.instances == 3 && c.groups == 1 && c.keys == 1,
	   "3 instances again, one group, one key");
	one.id = nodes[1].instance_id;
	ok(p->destroy(ctx, &one, 1, &err) == 0, "destroy of a subset: %s", err.msg);
	c = list(p, ctx);
	ok(c.instances == 2 && c.groups == 1 && c.keys == 1,
	   "keeps the rest, the group and the key pair (%zu %zu %zu)", c.instances, c.groups,
	   c.keys);

	/* everything */
	{
		struct pbx_instance *v = NULL;
		size_t nv = 0;
		ok(p->list(ctx, &v, &nv, &err) == 0 && p->destroy(ctx, v, nv, &err) == 0,
		   "destroy what the cluster's tag lists: %s", err.msg);
		pbx_instances_free(v, nv);
	}
	c = list(p, ctx);
	ok(c.instances == 0 && c.groups == 0 && c.keys == 0, "nothing is left (%zu %zu %zu)",
	   c.instances, c.groups, c.keys);
	free(gone);
	free(kept);
	pbx_node_rows_free(nodes, n);
	p->close(ctx);

	/* min_nodes */
	spec.t = pbx_config_template(cfg, "e2");
	spec.name = "e2";
	nodes = NULL;
	ctx = NULL;
	if (!ok(p->open(&spec, &ctx, &err) == 0 && p->plan(ctx, &nodes, &n, &err) == 0,
		"e2: open and plan: %s", err.msg))
		return tap_done();
	ok(create(p, ctx, nodes, n, &err) == 0, "e2 (min_nodes 1): create: %s", err.msg);
	ok(!strcmp(nodes[1].state, "running") && !strcmp(nodes[2].state, PBX_NODE_NOT_CREATED),
	   "gpu1 runs, gpu2 is %s (moto makes MinCount)", nodes[2].state);
	c = list(p, ctx);
	ok(c.instances == 2, "2 instances (%zu)", c.instances);
	rc = create(p, ctx, nodes, n, &err);
	ok(rc == 0 && !strcmp(nodes[2].state, "running"), "the next create makes gpu2: %s %s",
	   nodes[2].state, err.msg);
	{
		struct pbx_instance *v = NULL;
		size_t nv = 0;
		ok(p->list(ctx, &v, &nv, &err) == 0 && p->destroy(ctx, v, nv, &err) == 0,
		   "e2: destroy: %s", err.msg);
		pbx_instances_free(v, nv);
	}
	c = list(p, ctx);
	ok(c.instances == 0 && c.groups == 0 && c.keys == 0, "e2: nothing is left");
	pbx_node_rows_free(nodes, n);
	p->close(ctx);
	pbx_config_free(cfg);
	return tap_done();
}
