/*
 * awake.c - the user's view of a power-saving cluster on a cloud
 * (docs/power-saving.md, "The laptop's view"): there the head's
 * own pbx makes and deletes the nodes while the user's pbx is not
 * running, so the user's store has them as its last start left them
 * (asleep).  `cluster show`, `state` and `exec` ask the cloud once, by
 * the cluster's labels (the provider's list_nodes: one request a page,
 * on Compute Engine and EC2), which instances run, and take the answer
 * into the store and the open cluster's rows, both ways: a node whose
 * instance runs is up at the instance's addresses, one whose instance is
 * gone is asleep.  A node's instance is the one the list says is its
 * (EC2: the pbx-node tag), else the one named as its dns_name.  Its
 * host-key pins stay only while the instance's uid (an identity the cloud
 * never gives another instance) is the one the store has.
 */
#include "cluster/cluster_internal.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Whether x runs with an address pbx may connect to. */
static int awake_running(const struct pbx_instance *x)
{
	return x && x->state && !strcasecmp(x->state, "running") && x->private_ip && *x->private_ip;
}

/* The listed instance of node `node`, or NULL; borrowed.  An instance is
 * the node's when the list names its node (`node`: EC2's pbx-node tag),
 * else when its id is the node's dns_name (Compute Engine's instance
 * name).  One that runs comes first: on EC2 the instance a suspend
 * terminated may still be listed (shutting-down) beside the next one. */
static const struct pbx_instance *awake_find(struct pbx_cluster *c, const struct pbx_instance *v,
					     size_t n, const char *node)
{
	char *name = c->provider->dns_name(c->pctx, node);
	const struct pbx_instance *x = NULL;
	size_t i;
	for (i = 0; i < n; i++) {
		int mine = v[i].node ? !strcmp(v[i].node, node)
				     : (name && v[i].id && !strcmp(v[i].id, name));
		if (mine && (!x || (!awake_running(x) && awake_running(&v[i]))))
			x = &v[i];
	}
	free(name);
	return x;
}

static int same(const char *a, const char *b)
{
	return (!a || !*a) ? (!b || !*b) : (b && !strcmp(a, b));
}

static void awake_set(char **field, const char *value)
{
	free(*field);
	*field = value ? xstrdup(value) : NULL;
}

/* Node i, just learnt up, when the head is a node body (an emulator's;
 * its root is not "") is one too, whose root only it knows: asked as
 * discover.c asks, one SSH round trip (pinning its new host key).  On a VM
 * (root "") nothing is asked.  Best effort: a node that does not answer
 * keeps the root it had. */
static void awake_root(struct pbx_cluster *c, size_t i)
{
	struct pbx_err e = PBX_ERR_INIT;
	struct pbx_buf out = PBX_BUF_INIT;
	struct pbx_ssh *s;
	int status = 1;
	if (!c->nodes[0].root || !*c->nodes[0].root)
		return;
	if (pbx_cluster_connect(c, i, &s, &e) == 0 &&
	    pbx_ssh_capture(s, "printf '%s' \"${PBX_BODY_ROOT-}\"", &out, NULL, &status, &e) == 0 &&
	    status == 0 && out.buf && out.buf[0] == '/') {
		awake_set(&c->nodes[i].root, out.buf);
		pbx_store_node_put(c->store, &c->nodes[i], &e);
	}
	pbx_err_clear(&e);
	pbx_buf_release(&out);
}

/* Whether listed instance x is the one the store has for node r: both
 * carry a uid (pbx_instance's: Compute Engine's numeric id, EC2's instance
 * id), and it is the same.  An id (Compute Engine's: the instance name) is
 * not enough: the head deletes and makes a node's instance under the same
 * name, often at the same address, while no pbx runs here. */
static int awake_same_instance(const struct pbx_node_row *r, const struct pbx_instance *x)
{
	return r->instance_uid && *r->instance_uid && x->uid && *x->uid &&
	       !strcmp(r->instance_uid, x->uid);
}

/* x's private address where pbx may use it (pbx_instance_private_usable,
 * behind the cluster's head), else NULL; borrowed. */
static const char *awake_private(const struct pbx_cluster *c, const struct pbx_instance *x)
{
	return pbx_instance_private_usable(x, c->nnodes ? &c->nodes[0] : NULL) ? x->private_ip
									       : NULL;
}

/* Node r takes running instance x: up at its addresses, with its id and
 * uid.  Its host-key pins stay when x is the instance the store has
 * (awake_same_instance), so a changed key of it is refused as anywhere;
 * else they are forgotten (a new instance, or one whose uid is unknown:
 * t0452 saw a start refused for a changed host key when they were kept
 * by name), and its key is taken on first contact, as the head's own pbx
 * takes it after every resume.  1 when r changed. */
static int awake_up(struct pbx_cluster *c, struct pbx_node_row *r, const struct pbx_instance *x,
		    struct pbx_err *err)
{
	int removed = 0, rc = 0;
	if (!awake_same_instance(r, x)) {
		char *prefix = xasprintf("%s/%s@", c->row.name, r->name);
		rc = pbx_store_hostkey_forget_prefix(c->store, prefix, &removed, err);
		free(prefix);
	}
	if (rc < 0)
		return -1;
	if (r->state && !strcmp(r->state, "up") && same(r->instance_id, x->id) &&
	    same(r->instance_uid, x->uid) && same(r->address, awake_private(c, x)) &&
	    same(r->public_address, x->public_ip))
		return 0;
	if (x->started_at > 0) { /* where its spend begins (spend.c) */
		c->starts = xreallocarray(c->starts, c->nstarts + 1, sizeof(*c->starts));
		snprintf(c->starts[c->nstarts].name, sizeof(c->starts[0].name), "%s", r->name);
		c->starts[c->nstarts++].at = x->started_at;
	}
	awake_set(&r->state, "up");
	awake_set(&r->instance_id, x->id);
	awake_set(&r->instance_uid, x->uid);
	awake_set(&r->address, awake_private(c, x));
	awake_set(&r->public_address, x->public_ip);
	/* the zone comes from the cloud's reply and goes into API paths
	 * later: a name of the zones' own shape, else the stored one stays */
	if (x->zone && pbx_config_name_ok(x->zone))
		awake_set(&r->zone, x->zone);
	awake_set(&r->operation, NULL);
	return pbx_store_node_put(c->store, r, err) < 0 ? -1 : 1;
}

/* Whether x is no instance, or one powering off or off (the head's
 * suspend deletes it: STOPPING, then gone). */
static int awake_gone(const struct pbx_instance *x)
{
	static const char *const off[] = { "STOPPING",      "TERMINATED", "SUSPENDING",
					   "SUSPENDED",     "stopping",   "stopped",
					   "shutting-down", "terminated", NULL };
	size_t i;
	for (i = 0; x && x->state && off[i]; i++)
		if (!strcmp(x->state, off[i]))
			return 1;
	return !x;
}

/* Node r, whose instance is gone, is asleep (its other fields stay, as
 * the head's suspend leaves them).  1 when r changed. */
static int awake_down(struct pbx_cluster *c, struct pbx_node_row *r, struct pbx_err *err)
{
	if (r->state && !strcmp(r->state, PBX_NODE_ASLEEP))
		return 0;
	if (pbx_store_node_set_state(c->store, c->row.id, r->name, PBX_NODE_ASLEEP, err) < 0)
		return -1;
	awake_set(&r->state, PBX_NODE_ASLEEP);
	return 1;
}

int pbx_cluster_learn_awake(struct pbx_cluster *c, size_t *changed, struct pbx_err *err)
{
	const struct pbx_provider *p = c->provider;
	struct pbx_instance *v = NULL;
	size_t n = 0, i, k = 0;
	int rc = 0;
	if (changed)
		*changed = 0;
	/* only a provider whose list names each node's instance (list_nodes:
	 * Compute Engine's instance names, EC2's pbx-node tags) */
	if (!strcmp(c->row.cloud, "local") || !pbx_power_saving(c->spec.t) || c->here >= 0 ||
	    !p->list_nodes || !p->dns_name)
		return 0;
	if (p->list_nodes(c->pctx, &v, &n, err) < 0)
		return pbx_err_prefix(err, "cannot list cluster %s's instances in %s", c->row.name,
				      p->name);
	for (i = 0; i < c->nnodes && rc == 0; i++) {
		struct pbx_node_row *r = &c->nodes[i];
		const struct pbx_instance *x;
		int one;
		if (strcmp(r->role, "compute") != 0 || !pbx_power_remade(c->spec.t, r->name))
			continue; /* the head and the nodes start makes alone */
		x = awake_find(c, v, n, r->name);
		/* an instance being made (PROVISIONING) is left as the store has it */
		one = awake_running(x) ? awake_up(c, r, x, err)
		      : awake_gone(x)  ? awake_down(c, r, err)
				       : 0;
		if (one > 0 && !strcmp(r->state, "up"))
			awake_root(c, i);
		if (one < 0)
			rc = pbx_err_prefix(err, "cluster %s: node %s", c->row.name, r->name);
		else
			k += (size_t)one;
	}
	pbx_instances_free(v, n);
	if (k)
		pbx_store_event(c->store, c->row.id, "power.view", "%zu nodes learnt from %s", k,
				p->name);
	if (changed)
		*changed = k;
	return rc;
}
