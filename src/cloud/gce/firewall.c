/*
 * firewall.c - the cluster's two firewall rules on Compute Engine (SSH to
 * the head from the template's ssh_from, everything inside the cluster;
 * names and bodies from bodies.c): made by create_begin (create.c) when
 * missing, listed with the cluster (list.c), and deleted by destroy
 * (destroy.c) after its instances.  Rules have no labels: a rule is the
 * cluster's when its description carries the cluster id
 * (gce_firewall_owner); one carrying another id is neither used nor
 * deleted.
 */
#include "cloud/gce/gce_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

static const long ok_404[] = { 404, 0 };

/* Whether the cluster's firewall rule `which` is there: *state
 * GCE_RULE_NONE, GCE_RULE_MINE (its description carries the cluster's id;
 * a legacy cluster's rules carry none), or GCE_RULE_OTHERS (another
 * cluster's, whose name shares the id prefix: never used nor deleted). */
enum { GCE_RULE_NONE, GCE_RULE_MINE, GCE_RULE_OTHERS };
static int gce_rule_state(struct gce *g, int which, int *state, struct pbx_err *err)
{
	char *name = gce_firewall_name(g, which);
	char *path = xasprintf("projects/%s/global/firewalls/%s", g->project, name);
	json_t *r = NULL;
	long st;
	int rc = gce_call(g, "GET", path, NULL, ok_404, &r, &st, err);
	*state = GCE_RULE_NONE;
	if (rc == 0 && st == 200) {
		char *owner = gce_firewall_owner(r);
		int legacy = pbx_cluster_uid_legacy(g->s->uid);
		*state = (legacy && !owner) || (owner && !strcmp(owner, g->s->uid))
				 ? GCE_RULE_MINE
				 : GCE_RULE_OTHERS;
		free(owner);
	}
	json_decref(r);
	free(path);
	free(name);
	return rc;
}

int gce_firewalls(struct gce *g, struct pbx_err *err)
{
	int which, state;
	for (which = 0; which < 2; which++) {
		int rc = gce_rule_state(g, which, &state, err);
		if (rc == 0 && state == GCE_RULE_OTHERS) {
			char *name = gce_firewall_name(g, which);
			rc = pbx_err_set(
				err,
				"%s belongs to another cluster called %s (its id begins "
				"like this one's): stop this cluster and start it again for a "
				"new id",
				name, g->s->name);
			free(name);
		}
		if (rc == 0 && state == GCE_RULE_NONE) {
			char *ins = xasprintf("projects/%s/global/firewalls", g->project);
			json_t *body = gce_firewall_body(g, which);
			rc = gce_mutate(g, "POST", ins, body, NULL, "global", err);
			json_decref(body);
			free(ins);
		}
		if (rc < 0)
			return pbx_err_prefix(err, "firewall rule");
	}
	return 0;
}

/* The cluster's firewall rules that are its own (gce_rule_state). */
int gce_list_rules(struct gce *g, struct pbx_instance **v, size_t *n, struct pbx_err *err)
{
	int which, state;
	for (which = 0; which < 2; which++) {
		char *name;
		if (gce_rule_state(g, which, &state, err) < 0)
			return -1;
		if (state != GCE_RULE_MINE)
			continue;
		name = gce_firewall_name(g, which);
		pbx_instances_add(v, n, name, NULL, "FIREWALL", g->s->uid, 0);
		free(name);
	}
	return 0;
}

/* A survey: every rule named like a rule of a cluster called NAME, new
 * (pbx-NAME-IDP-ssh) or legacy (pbx-NAME-ssh), with the id its
 * description carries. */
int gce_survey_rules(struct gce *g, struct pbx_instance **v, size_t *n, struct pbx_err *err)
{
	char *re = xasprintf("name eq \"pbx-%s(-[0-9a-f]{%d})?-(ssh|internal)\"", g->s->name,
			     GCE_ID_PREFIX);
	char *filter = gce_escape(re);
	char *path = xasprintf("projects/%s/global/firewalls?filter=%s&maxResults=500", g->project,
			       filter);
	json_t *r = NULL, *it;
	size_t i;
	long st;
	int rc = gce_call(g, "GET", path, NULL, ok_404, &r, &st, err);
	json_array_foreach(rc == 0 && st == 200 ? json_object_get(r, "items") : NULL, i, it)
	{
		const char *name = json_string_value(json_object_get(it, "name"));
		char *owner = gce_firewall_owner(it);
		if (name)
			pbx_instances_add(v, n, name, NULL, "FIREWALL", owner, 0);
		free(owner);
	}
	json_decref(r);
	free(path);
	free(filter);
	free(re);
	return rc;
}

/* Waits for the global operations still running on the cluster's firewall
 * rules: a start killed right after a rule's insert was accepted leaves
 * the rule to appear a moment later, after a stop that looked too early
 * would have missed it.  One list of the project's unfinished global
 * operations (every page). */
static int gce_settle_rules(struct gce *g, struct pbx_err *err)
{
	char *names[2] = { gce_firewall_name(g, 0), gce_firewall_name(g, 1) };
	char *filter = gce_escape("status != \"DONE\""), *token = NULL;
	int rc = 0;
	do {
		char *path = xasprintf("projects/%s/global/operations?filter=%s&maxResults=500%s%s",
				       g->project, filter, token ? "&pageToken=" : "",
				       token ? token : "");
		json_t *r = NULL, *op;
		size_t i;
		long st;
		free(token);
		token = NULL;
		rc = gce_call(g, "GET", path, NULL, ok_404, &r, &st, err);
		json_array_foreach(rc == 0 && st == 200 ? json_object_get(r, "items") : NULL, i, op)
		{
			const char *target = json_string_value(json_object_get(op, "targetLink"));
			const char *name = json_string_value(json_object_get(op, "name"));
			const char *last = target ? strrchr(target, '/') : NULL;
			/* An insert that failed made no rule: not the stop's
			 * failure; an unreachable API shows in the GETs after. */
			if (rc == 0 && name && last &&
			    (!strcmp(last + 1, names[0]) || !strcmp(last + 1, names[1])) &&
			    gce_wait_op(g, "global", name, err) < 0)
				pbx_err_clear(err);
		}
		if (rc == 0 && st == 200 && json_string_value(json_object_get(r, "nextPageToken")))
			token = xstrdup(json_string_value(json_object_get(r, "nextPageToken")));
		json_decref(r);
		free(path);
	} while (rc == 0 && token);
	free(token);
	free(filter);
	free(names[0]);
	free(names[1]);
	return rc;
}

/* Deletes the firewall rules that are the cluster's own, once the global
 * operations still running on them are over (a dry run prints the DELETE
 * of both). */
int gce_delete_firewalls(struct gce *g, struct pbx_err *err)
{
	int rc = 0, which, state = GCE_RULE_MINE;
	if (!g->s->dry_run)
		rc = gce_settle_rules(g, err);
	for (which = 0; which < 2 && rc == 0; which++) {
		char *name, *path;
		if (!g->s->dry_run && (rc = gce_rule_state(g, which, &state, err)) < 0)
			break;
		if (state != GCE_RULE_MINE)
			continue;
		name = gce_firewall_name(g, which);
		path = xasprintf("projects/%s/global/firewalls/%s", g->project, name);
		rc = gce_mutate(g, "DELETE", path, NULL, ok_404, "global", err);
		free(path);
		free(name);
	}
	return rc;
}
