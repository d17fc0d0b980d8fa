/*
 * bodies.c - the JSON bodies pbx sends to Compute Engine (shapes as in
 * the compute v1 reference, see docs/cloud-api.md, "Compute Engine:
 * instance body" and "Compute Engine: bulkInsert", and
 * docs/gce-network.md): the cluster's two firewall rules, the Cloud
 * Router with Cloud NAT that pbx clusters share per network and region
 * (outbound traffic of compute nodes that have no external address), and a
 * bulkInsert per node kind, with the cluster's labels, network tags, the
 * login user's key in ssh-keys metadata (with the user's, spec.user_key,
 * where pbx on the head makes nodes), GPUs with onHostMaintenance
 * TERMINATE, optional Spot; and the names of the cluster's resources, made
 * by gce_name only.
 */
#include "cloud/gce/gce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

/* The scope of the head's service account: cloud-platform, with the
 * account's IAM roles deciding what it may do (Google's advice) */
#define GCE_HEAD_SCOPE "https://www.googleapis.com/auth/cloud-platform"
#define GCE_DISK_GB    "50"

char *gce_name(const struct gce *g, const char *prefix, const char *part)
{
	const char *uid = g->s->uid;
	int legacy = !uid || pbx_cluster_uid_legacy(uid);
	return xasprintf("%s%s%s%.*s%s%s", prefix, g->s->name, legacy ? "" : "-",
			 legacy ? 0 : GCE_ID_PREFIX, legacy ? "" : uid, part ? "-" : "",
			 part ? part : "");
}

char *gce_instance_name(const struct gce *g, const char *node)
{
	return gce_name(g, "", node);
}

char *gce_firewall_name(const struct gce *g, int which)
{
	return gce_name(g, "pbx-", which == 0 ? "ssh" : "internal");
}

/* The network every node and the router are on. */
#define GCE_NETWORK "global/networks/default"

/* The Cloud Router (which carries the Cloud NAT) that pbx makes in a region
 * when no NAT serves the network there yet.  It is not one cluster's: a NAT
 * covering every subnetwork must be the only one on its network in a
 * region, so every pbx cluster there shares it, and the stop that leaves no
 * pbx node in the region deletes it (router.c).  Hence a fixed name, without
 * a cluster id. */
char *gce_router_name(const struct gce *g)
{
	(void)g;
	return xstrdup("pbx-nat-default");
}

json_t *gce_router_body(const struct gce *g)
{
	char *name = gce_router_name(g), *net = xasprintf("projects/%s/" GCE_NETWORK, g->project);
	/* AUTO_ONLY: Google allocates the NAT addresses; every range of every
	 * subnetwork of the network in this region goes through it. */
	json_t *b = json_pack("{s:s, s:s, s:s, s:[{s:s, s:s, s:s}]}", "name", name, "description",
			      GCE_ROUTER_DESCRIPTION, "network", net, "nats", "name", "pbx-nat",
			      "natIpAllocateOption", "AUTO_ONLY", "sourceSubnetworkIpRangesToNat",
			      "ALL_SUBNETWORKS_ALL_IP_RANGES");
	free(name);
	free(net);
	return b;
}

int gce_nodes_external(const struct gce *g, int head)
{
	return head || (g->s->t && g->s->t->compute_external_ips);
}

/* Network tags (firewall targets): every node carries pbx-NAME-ID, the
 * head also pbx-NAME-ID-head, so one cluster's rules never open another's
 * nodes. */
static char *tag(const struct gce *g, int head)
{
	return gce_name(g, "pbx-", head ? "head" : NULL);
}

char *gce_firewall_owner(json_t *rule)
{
	const char *d = json_string_value(json_object_get(rule, "description"));
	const char *at = d ? strstr(d, GCE_OWNER_KEY) : NULL;
	size_t len;
	if (!at)
		return NULL;
	at += strlen(GCE_OWNER_KEY);
	len = strspn(at, "0123456789abcdef");
	return len ? xstrndup(at, len) : NULL;
}

/* The blocks SSH may come from: the template's ssh_from, else anywhere. */
static json_t *ssh_sources(const struct pbx_cluster_template *t)
{
	json_t *a = json_array();
	size_t i;
	for (i = 0; t && i < t->nssh_from; i++)
		json_array_append_new(a, json_string(t->ssh_from[i]));
	if (!json_array_size(a))
		json_array_append_new(a, json_string("0.0.0.0/0"));
	return a;
}

json_t *gce_firewall_body(const struct gce *g, int which)
{
	char *name = gce_firewall_name(g, which), *all = tag(g, 0), *head = tag(g, 1);
	int everyone = gce_nodes_external(g, 0);
	/* rules have no labels: the description carries the cluster's id */
	char *ssh = xasprintf("pbx: SSH to the cluster's %s; " GCE_OWNER_KEY "%s",
			      everyone ? "nodes" : "head", g->s->uid);
	char *inside =
		xasprintf("pbx: everything inside the cluster; " GCE_OWNER_KEY "%s", g->s->uid);
	json_t *b;
	if (which == 0)
		/* SSH to the nodes with an external address (the head, and the
		 * compute nodes with compute_external_ips), from the template's
		 * ssh_from (default anywhere: pbx cannot know the user's public
		 * address reliably). */
		b = json_pack("{s:s, s:s, s:s, s:s, s:i, s:o, s:[s], s:[{s:s, s:[s]}]}", "name",
			      name, "description", ssh, "network", GCE_NETWORK, "direction",
			      "INGRESS", "priority", 1000, "sourceRanges", ssh_sources(g->s->t),
			      "targetTags", everyone ? all : head, "allowed", "IPProtocol", "tcp",
			      "ports", "22");
	else
		b = json_pack("{s:s, s:s, s:s, s:s, s:i, s:[s], s:[s], s:[{s:s}, {s:s}, {s:s}]}",
			      "name", name, "description", inside, "network", GCE_NETWORK,
			      "direction", "INGRESS", "priority", 1000, "sourceTags", all,
			      "targetTags", all, "allowed", "IPProtocol", "tcp", "IPProtocol",
			      "udp", "IPProtocol", "icmp");
	free(name);
	free(all);
	free(head);
	free(ssh);
	free(inside);
	return b;
}

static json_t *labels(const struct gce *g, const char *role)
{
	struct pbx_labels l;
	json_t *o = json_object();
	size_t i;
	pbx_cluster_labels(g->s, &l);
	for (i = 0; i < l.n; i++)
		json_object_set_new(o, l.keys[i], json_string(l.values[i]));
	json_object_set_new(o, "pbx-role", json_string(role));
	return o;
}

static json_t *scheduling(const struct pbx_node_group *grp)
{
	json_t *s = json_object();
	if (grp && grp->gpus > 0)
		json_object_set_new(s, "onHostMaintenance", json_string("TERMINATE"));
	if (grp && grp->spot) {
		json_object_set_new(s, "provisioningModel", json_string("SPOT"));
		json_object_set_new(s, "preemptible", json_true());
		json_object_set_new(s, "automaticRestart", json_false());
		json_object_set_new(s, "instanceTerminationAction", json_string("DELETE"));
	} else if (grp && grp->gpus > 0) {
		json_object_set_new(s, "automaticRestart", json_true());
	}
	return s;
}

/* The node's network interface: on the cluster's network, with an
 * external address (ONE_TO_ONE_NAT access config) only for the head, or
 * for every node with compute_external_ips. */
static json_t *network_interfaces(const struct gce *g, int head)
{
	json_t *nic = json_pack("{s:s}", "network", GCE_NETWORK);
	if (gce_nodes_external(g, head))
		json_object_set_new(nic, "accessConfigs",
				    json_pack("[{s:s, s:s}]", "name", "external-nat", "type",
					      "ONE_TO_ONE_NAT"));
	return json_pack("[o]", nic);
}

/* instanceProperties: as an Instance, with bare machine and accelerator
 * type names (bulkInsert's form). */
static json_t *properties(const struct gce *g, const struct pbx_node_group *grp)
{
	const struct pbx_cluster_template *t = g->s->t;
	const char *machine = grp                    ? grp->machine_type
			      : t->head_machine_type ? t->head_machine_type
						     : GCE_HEAD_MACHINE;
	const char *also = g->s->user_key; /* the user's, when pbx on the head makes them */
	char *ssh = also && strcmp(also, g->pubkey) != 0
			    ? xasprintf("%s:%s\n%s:%s", g->user, g->pubkey, g->user, also)
			    : xasprintf("%s:%s", g->user, g->pubkey),
	     *image = gce_source_image(g);
	char *tg = tag(g, grp == NULL), *all = tag(g, 0);
	json_t *p =
		json_pack("{s:s, s:[{s:b, s:b, s:s, s:s, s:{s:s, s:s}}],"
			  " s:o, s:{s:[{s:s, s:s}]}, s:o, s:{s:[s, s]}, s:o}",
			  "machineType", machine, "disks", "boot", 1, "autoDelete", 1, "mode",
			  "READ_WRITE", "type", "PERSISTENT", "initializeParams", "sourceImage",
			  image, "diskSizeGb", GCE_DISK_GB, "networkInterfaces",
			  network_interfaces(g, grp == NULL), "metadata", "items", "key",
			  "ssh-keys", "value", ssh, "labels", labels(g, grp ? "compute" : "head"),
			  "tags", "items", all, tg, "scheduling", scheduling(grp));
	if (!strcmp(tg, all)) /* compute nodes: one tag */
		json_array_remove(json_object_get(json_object_get(p, "tags"), "items"), 1);
	if (!grp && t->head_service_account) /* the head's own identity (docs/head-identity.md) */
		json_object_set_new(p, "serviceAccounts",
				    json_pack("[{s:s, s:[s]}]", "email", t->head_service_account,
					      "scopes", GCE_HEAD_SCOPE));
	if (grp && grp->gpus > 0)
		json_object_set_new(p, "guestAccelerators",
				    json_pack("[{s:s, s:i}]", "acceleratorType",
					      grp->gpu_type ? grp->gpu_type : "nvidia-tesla-t4",
					      "acceleratorCount", grp->gpus));
	free(ssh);
	free(image);
	free(tg);
	free(all);
	return p;
}

json_t *gce_bulk_body(const struct gce *g, const struct pbx_node_group *grp,
		      const struct pbx_node_row *nodes, const size_t *idx, size_t n,
		      size_t min_count)
{
	json_t *per = json_object(), *b;
	size_t i;
	for (i = 0; i < n; i++) {
		char *name = gce_instance_name(g, nodes[idx[i]].name);
		json_object_set_new(per, name, json_object());
		free(name);
	}
	b = json_pack("{s:I, s:I, s:o, s:o}", "count", (json_int_t)n, "minCount",
		      (json_int_t)(min_count >= 1 && min_count <= n ? min_count : n),
		      "perInstanceProperties", per, "instanceProperties", properties(g, grp));
	return b;
}
