/*
 * parse.c - the EC2 Query API's XML replies read with libxml2 (no network,
 * no entity expansion, no DTD): the error envelope, instance lists
 * (RunInstances, DescribeInstances with nextToken, TerminateInstances;
 * a stopped instance's stop time from its reason; the cluster and node
 * an instance's tags name),
 * image lists (DescribeImages) and single values (groupId, keyName).
 * Elements are matched by local name: real EC2 sends <Response> without a
 * namespace, moto with one.  Every
 * entry point is fuzzed (tests/fuzz/fuzz_aws_reply.c, fuzz_aws_image.c).
 */
#include "cloud/aws/aws.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/addr.h"
#include "util/utctime.h"
#include "util/xalloc.h"

#define AWS_XML_OPTS                                                                      \
	(XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_NOBLANKS | \
	 XML_PARSE_NOCDATA)

/* libxml2 prints some errors (e.g. "encoding error") through its generic
 * handler whatever the parse options say: pbx prints nothing of a reply. */
static void aws_xml_quiet(void *ctx, const char *fmt, ...)
{
	(void)ctx;
	(void)fmt;
}

static xmlDocPtr aws_xml_read(const char *xml, size_t len)
{
	xmlDocPtr d;
	if (!xml || !len || len > (size_t)0x7fffffff)
		return NULL;
	xmlSetGenericErrorFunc(NULL, aws_xml_quiet); /* per thread */
	d = xmlReadMemory(xml, (int)len, "ec2.xml", NULL, AWS_XML_OPTS);
	if (d && (d->intSubset || d->extSubset)) {
		/* EC2 sends no DTD: one is refused with its entities */
		xmlFreeDoc(d);
		return NULL;
	}
	return d;
}

static int is(const xmlNode *n, const char *name)
{
	return n && n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, name);
}

/* The first child element named `name`, or NULL. */
static xmlNode *child(const xmlNode *n, const char *name)
{
	xmlNode *c;
	for (c = n ? n->children : NULL; c; c = c->next)
		if (is(c, name))
			return c;
	return NULL;
}

/* The text of child `name` (caller frees), or NULL. */
static char *child_text(const xmlNode *n, const char *name)
{
	xmlNode *c = child(n, name);
	xmlChar *t;
	char *s;
	if (!c)
		return NULL;
	t = xmlNodeGetContent(c);
	s = t ? xstrdup((const char *)t) : NULL;
	xmlFree(t);
	return s;
}

/* The value of tag `key` in an item's tagSet (caller frees), or NULL. */
static char *item_tag(const xmlNode *item, const char *key)
{
	xmlNode *t;
	for (t = child(child(item, "tagSet"), "item"); t; t = t->next) {
		char *k = is(t, "item") ? child_text(t, "key") : NULL;
		int match = k && !strcmp(k, key);
		free(k);
		if (match)
			return child_text(t, "value");
	}
	return NULL;
}

/* An item's field `name`: a child's text, or with "tag:KEY" the tag's
 * value ("" when the item has no such tag).  Caller frees; NULL when
 * there is no such child. */
static char *item_field(const xmlNode *item, const char *name)
{
	char *v;
	if (strncmp(name, "tag:", 4) != 0)
		return child_text(item, name);
	v = item_tag(item, name + 4);
	return v ? v : xstrdup("");
}

/* The first element named `name` at or below n, depth first. */
static xmlNode *find(xmlNode *n, const char *name, int depth)
{
	xmlNode *c, *r;
	if (depth > 64)
		return NULL;
	for (c = n; c; c = c->next) {
		if (is(c, name))
			return c;
		if (c->type == XML_ELEMENT_NODE && (r = find(c->children, name, depth + 1)))
			return r;
	}
	return NULL;
}

int aws_error_parse(const char *xml, size_t len, char *code, size_t code_size, char *msg,
		    size_t msg_size)
{
	xmlDocPtr d = aws_xml_read(xml, len);
	xmlNode *root = d ? xmlDocGetRootElement(d) : NULL, *e;
	char *c, *m;
	int rc = -1;
	if (!root || (!is(root, "Response") && !is(root, "ErrorResponse"))) {
		xmlFreeDoc(d);
		return -1;
	}
	e = child(child(root, "Errors"), "Error");
	if (!e)
		e = child(root, "Error");
	c = child_text(e, "Code");
	m = child_text(e, "Message");
	if (c && *c) {
		snprintf(code, code_size, "%s", c);
		snprintf(msg, msg_size, "%s", m ? m : "");
		rc = 0;
	}
	free(c);
	free(m);
	xmlFreeDoc(d);
	return rc;
}

/* s (may be NULL; freed when refused) when it has a node name's shape:
 * 1 to 63 of a-z 0-9 -; else NULL.  A node's tag goes into matching only,
 * but is refused unless pbx could have written it. */
static char *node_name(char *s)
{
	size_t len = s ? strlen(s) : 0;
	if (len && len <= 63 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == len)
		return s;
	free(s);
	return NULL;
}

/* An instance's amiLaunchIndex: 0 to 99999 (a launch is far smaller), -1
 * when absent or anything else. */
static long launch_index(const xmlNode *item)
{
	char *t = child_text(item, "amiLaunchIndex");
	size_t n = t ? strlen(t) : 0;
	long v = -1;
	if (n && n <= 5 && strspn(t, "0123456789") == n && (t[0] != '0' || n == 1))
		v = strtol(t, NULL, 10);
	free(t);
	return v;
}

/* The node an instance's launch tags name at its launch index (launch.c),
 * with a node name's shape; NULL when they name none. */
static char *launch_node(const xmlNode *item, long index)
{
	char *role = item_tag(item, AWS_TAG_ROLE), *launch = item_tag(item, AWS_TAG_LAUNCH);
	char *node = aws_launch_node(role, launch, index);
	free(role);
	free(launch);
	return node_name(node);
}

/* Instances found so far and the first bad address among them. */
struct inst_walk {
	struct pbx_instance **v;
	size_t *n;
	int bad;
	struct pbx_err *err;
};

/* The text of address child `name` of instance `id`: a copy when it is an
 * IP address (pbx_ip_literal_ok), NULL when absent; anything else gives
 * NULL and, for the first such, w->err naming the instance and field. */
static char *address(xmlNode *item, const char *name, const char *id, struct inst_walk *w)
{
	char *t = child_text(item, name);
	if (!t || pbx_ip_literal_ok(t))
		return t;
	free(t);
	if (!w->bad++)
		pbx_err_set(w->err, "EC2 reply: instance %.80s has a %s that is not an IP address",
			    id, name);
	return NULL;
}

/* Unix seconds of the time in an instance's reason (DescribeInstances'
 * <reason>, the API's StateTransitionReason), which EC2 writes as
 * "User initiated (2026-11-26 10:00:00 GMT)" and moto with UTC for GMT:
 * the first "(YYYY-MM-DD HH:MM:SS GMT)" or "(... UTC)" in it.  0 when s
 * is NULL or holds no such time, a field is out of range, or the time is
 * not after 1970; never an error. */
static int64_t reason_time(const char *s)
{
	const char *p;
	for (p = s ? strchr(s, '(') : NULL; p; p = strchr(p + 1, '(')) {
		int64_t t;
		if (strnlen(p + 1, 24) < 24 ||
		    (strncmp(p + 20, " GMT)", 5) != 0 && strncmp(p + 20, " UTC)", 5) != 0))
			continue;
		if ((t = pbx_utc_datetime(p + 1, " ")) > 0)
			return t;
	}
	return 0;
}

/* One instance item; one with a bad address is still kept (without it),
 * so that it can be found and terminated, and the reply fails. */
static void inst_add(xmlNode *item, struct inst_walk *w)
{
	struct pbx_instance x = { 0 };
	xmlNode *st = child(item, "instanceState");
	char *lifecycle;
	if (!st)
		st = child(item, "currentState");
	x.id = child_text(item, "instanceId");
	x.state = child_text(st, "name");
	if (!x.id || !x.state || !*x.id) {
		free(x.id);
		free(x.state);
		return;
	}
	x.private_ip = address(item, "privateIpAddress", x.id, w);
	x.public_ip = address(item, "ipAddress", x.id, w);
	x.subnet = child_text(item, "subnetId");
	x.reason = child_text(child(item, "stateReason"), "message");
	x.cluster = item_tag(item, PBX_LABEL_CLUSTER_ID);
	x.launch_index = launch_index(item);
	x.type = child_text(item, "instanceType");
	x.uid = xstrdup(x.id); /* EC2 never gives an instance id to another */
	lifecycle = child_text(item, "instanceLifecycle");
	x.spot = lifecycle && !strcmp(lifecycle, "spot");
	free(lifecycle);
	x.node = node_name(item_tag(item, AWS_TAG_NODE));
	if (!x.node)
		x.node = launch_node(item, x.launch_index);
	if (!strcmp(x.state, "running")) {
		char *launched = child_text(item, "launchTime");
		x.started_at = pbx_rfc3339_time(launched);
		free(launched);
	}
	if (!strcmp(x.state, "stopped") || !strcmp(x.state, "stopping")) {
		char *why = child_text(item, "reason");
		x.stopped_at = reason_time(why);
		free(why);
	}
	*w->v = xreallocarray(*w->v, *w->n + 1, sizeof(**w->v));
	(*w->v)[(*w->n)++] = x;
}

/* Every instancesSet's items below n (reservations hold one each). */
static void insts_walk(xmlNode *n, struct inst_walk *w, int depth)
{
	xmlNode *c;
	if (depth > 16)
		return;
	for (c = n; c; c = c->next) {
		if (is(c, "instancesSet")) {
			xmlNode *it;
			for (it = c->children; it; it = it->next)
				if (is(it, "item"))
					inst_add(it, w);
		} else if (c->type == XML_ELEMENT_NODE) {
			insts_walk(c->children, w, depth + 1);
		}
	}
}

int aws_insts_parse(const char *xml, size_t len, struct pbx_instance **v, size_t *n, char **next,
		    struct pbx_err *err)
{
	xmlDocPtr d = aws_xml_read(xml, len);
	xmlNode *root = d ? xmlDocGetRootElement(d) : NULL;
	struct inst_walk w = { v, n, 0, err };
	*next = NULL;
	if (!root || !strstr((const char *)root->name, "Response") || is(root, "Response")) {
		xmlFreeDoc(d);
		return pbx_err_set(err, "the EC2 reply is not an instance list (%zu bytes)", len);
	}
	insts_walk(root->children, &w, 0);
	*next = child_text(root, "nextToken");
	if (*next && (!**next || w.bad)) {
		free(*next);
		*next = NULL;
	}
	xmlFreeDoc(d);
	return w.bad ? -1 : 0;
}

char *aws_xml_text(const char *xml, size_t len, const char *name)
{
	xmlDocPtr d = aws_xml_read(xml, len);
	xmlNode *e = d ? find(xmlDocGetRootElement(d), name, 0) : NULL;
	xmlChar *t = e ? xmlNodeGetContent(e) : NULL;
	char *s = t ? xstrdup((const char *)t) : NULL;
	xmlFree(t);
	xmlFreeDoc(d);
	return s;
}

/* The `name` child of each item of every `set` element below n. */
static void texts_walk(xmlNode *n, const char *set, const char *name, char ***v, size_t *cnt,
		       int depth)
{
	xmlNode *c, *it;
	if (depth > 64)
		return;
	for (c = n; c; c = c->next) {
		if (is(c, set)) {
			for (it = c->children; it; it = it->next) {
				char *t = is(it, "item") ? item_field(it, name) : NULL;
				if (!t)
					continue;
				*v = xreallocarray(*v, *cnt + 1, sizeof(**v));
				(*v)[(*cnt)++] = t;
			}
		} else if (c->type == XML_ELEMENT_NODE) {
			texts_walk(c->children, set, name, v, cnt, depth + 1);
		}
	}
}

int aws_xml_texts(const char *xml, size_t len, const char *set, const char *name, char ***v,
		  size_t *n)
{
	xmlDocPtr d = aws_xml_read(xml, len);
	if (!d)
		return -1;
	texts_walk(xmlDocGetRootElement(d), set, name, v, n, 0);
	xmlFreeDoc(d);
	return 0;
}

/* ------------------------------------------------------- instance types */

/* One instanceTypeSet item: its name and default vCPUs, appended. */
static void vcpus_add(xmlNode *item, char ***types, int **vcpus, size_t *n)
{
	char *name = child_text(item, "instanceType");
	char *count = child_text(child(item, "vCpuInfo"), "defaultVCpus"), *end = NULL;
	long k = count ? strtol(count, &end, 10) : 0;
	if (name && *name && strlen(name) < 64 && end && !*end && k >= 1 && k <= 100000) {
		*types = xreallocarray(*types, *n + 1, sizeof(**types));
		*vcpus = xreallocarray(*vcpus, *n + 1, sizeof(**vcpus));
		(*types)[*n] = name;
		(*vcpus)[(*n)++] = (int)k;
		name = NULL;
	}
	free(name);
	free(count);
}

int aws_vcpus_parse(const char *xml, size_t len, char ***types, int **vcpus, size_t *n,
		    struct pbx_err *err)
{
	xmlDocPtr d = aws_xml_read(xml, len);
	xmlNode *root = d ? xmlDocGetRootElement(d) : NULL, *set, *it;
	if (!root) {
		xmlFreeDoc(d);
		return pbx_err_set(err, "DescribeInstanceTypes: the reply is not XML");
	}
	for (set = child(root, "instanceTypeSet"), it = set ? set->children : NULL; it;
	     it = it->next)
		if (is(it, "item"))
			vcpus_add(it, types, vcpus, n);
	xmlFreeDoc(d);
	return 0;
}

/* ------------------------------------------------------------- images */

void aws_images_free(struct aws_image *v, size_t n)
{
	size_t i, k;
	for (i = 0; i < n; i++) {
		free(v[i].id);
		free(v[i].name);
		free(v[i].state);
		free(v[i].reason);
		free(v[i].owner);
		for (k = 0; k < v[i].nsnapshots; k++)
			free(v[i].snapshots[k]);
		free(v[i].snapshots);
	}
	free(v);
}

/* Is s PREFIX followed by one or more of [0-9a-z] (an EC2 resource id)? */
static int ec2_id_ok(const char *s, const char *prefix)
{
	size_t p = strlen(prefix);
	return s && !strncmp(s, prefix, p) && s[p] &&
	       strspn(s + p, "0123456789abcdefghijklmnopqrstuvwxyz") == strlen(s + p);
}

/* Control characters (bytes below 0x20, and 0x7f) made '?': a reply's
 * text that messages quote. */
static void printable(char *s)
{
	for (; s && *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

/* The snapshot of each blockDeviceMapping item's ebs. */
static void image_snapshots(const xmlNode *item, struct aws_image *x)
{
	xmlNode *m;
	for (m = child(child(item, "blockDeviceMapping"), "item"); m; m = m->next) {
		char *snap = is(m, "item") ? child_text(child(m, "ebs"), "snapshotId") : NULL;
		if (!ec2_id_ok(snap, "snap-")) {
			free(snap);
			continue;
		}
		x->snapshots =
			xreallocarray(x->snapshots, x->nsnapshots + 1, sizeof(*x->snapshots));
		x->snapshots[x->nsnapshots++] = snap;
	}
}

static void image_add(const xmlNode *item, struct aws_image **v, size_t *n)
{
	struct aws_image x = { 0 };
	x.id = child_text(item, "imageId");
	x.name = child_text(item, "name");
	x.state = child_text(item, "imageState");
	if (!ec2_id_ok(x.id, "ami-") || !x.name || !x.state || !*x.state) {
		free(x.id);
		free(x.name);
		free(x.state);
		return;
	}
	printable(x.name);
	printable(x.state);
	x.reason = child_text(child(item, "stateReason"), "message");
	printable(x.reason);
	x.owner = item_field(item, "tag:" PBX_LABEL_IMAGE_ID);
	printable(x.owner);
	image_snapshots(item, &x);
	*v = xreallocarray(*v, *n + 1, sizeof(**v));
	(*v)[(*n)++] = x;
}

int aws_images_parse(const char *xml, size_t len, struct aws_image **v, size_t *n,
		     struct pbx_err *err)
{
	xmlDocPtr d = aws_xml_read(xml, len);
	xmlNode *root = d ? xmlDocGetRootElement(d) : NULL, *it;
	if (!is(root, "DescribeImagesResponse")) {
		xmlFreeDoc(d);
		return pbx_err_set(err, "the EC2 reply is not an image list (%zu bytes)", len);
	}
	for (it = child(child(root, "imagesSet"), "item"); it; it = it->next)
		if (is(it, "item"))
			image_add(it, v, n);
	xmlFreeDoc(d);
	return 0;
}
