/*
 * destroy.c - destroy and remove_nodes of the aws provider:
 * TerminateInstances (AWS_RUN_MAX ids a call, an id EC2 no longer knows
 * being gone already), then DescribeInstances until none of them is live.
 * destroy then deletes the security group and key pair (access.c) once no
 * instance of the cluster is left (a head deleting its own cluster moves
 * itself out of the group first); remove_nodes (a resize) leaves them.
 * create.c's all-or-nothing clean-up destroys what a failed start made.
 */
#include "cloud/aws/aws_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

#define AWS_RUN_MAX 1000 /* instance ids per TerminateInstances */

static int is_res(const struct pbx_instance *x)
{
	return x->state && (!strcmp(x->state, AWS_SG) || !strcmp(x->state, AWS_KEY));
}

/* TerminateInstances of v[from..to)'s instances (at most AWS_RUN_MAX);
 * *code gets EC2's error code. */
static int aws_terminate_some(struct aws *a, const struct pbx_instance *v, size_t from, size_t to,
			      char code[64], struct pbx_err *err)
{
	struct aws_params p = { 0 };
	struct pbx_buf r = PBX_BUF_INIT;
	size_t i, m = 0;
	int rc = 0;
	for (i = from; i < to; i++) {
		char k[40];
		if (is_res(&v[i]))
			continue;
		snprintf(k, sizeof(k), "InstanceId.%zu", ++m);
		aws_param(&p, k, "%s", v[i].id);
	}
	if (m)
		rc = aws_call(a, "TerminateInstances", &p, &r, code, err);
	pbx_buf_release(&r);
	aws_params_free(&p);
	return rc;
}

/* TerminateInstances of v's instances, AWS_RUN_MAX a call.  One unknown id
 * fails the whole call (InvalidInstanceID.NotFound: an instance already
 * gone, e.g. one the store remembers): that batch is then sent one
 * instance at a time, an unknown one being done. */
static int aws_terminate(struct aws *a, const struct pbx_instance *v, size_t n, struct pbx_err *err)
{
	static const char nf[] = "InvalidInstanceID.NotFound";
	size_t i, k;
	for (i = 0; i < n; i += AWS_RUN_MAX) {
		size_t to = n - i < AWS_RUN_MAX ? n : i + AWS_RUN_MAX;
		char code[64] = "";
		if (aws_terminate_some(a, v, i, to, code, err) == 0)
			continue;
		if (strcmp(code, nf) != 0)
			return -1;
		for (k = i; k < to; k++) {
			pbx_err_clear(err);
			if (aws_terminate_some(a, v, k, k + 1, code, err) < 0 &&
			    strcmp(code, nf) != 0)
				return -1;
		}
		pbx_err_clear(err);
	}
	return 0;
}

/* What aws_wait_gone waits for: v's instances; *others gets how many
 * other instances of the cluster are live. */
struct gone {
	struct aws *a;
	const struct pbx_instance *v;
	size_t n, others;
};

/* One round of aws_wait_gone: one DescribeInstances of the cluster's live
 * instances (every page). */
static int count_left(void *ctx, size_t *left, const char **one, struct pbx_err *err)
{
	struct gone *w = ctx;
	struct pbx_instance *have = NULL;
	size_t nhave = 0, i, k;
	if (aws_describe(w->a, NULL, &have, &nhave, err) < 0)
		return -1;
	w->others = 0;
	for (k = 0; k < nhave; k++) {
		for (i = 0; i < w->n && strcmp(w->v[i].id, have[k].id) != 0; i++)
			;
		if (i < w->n) {
			(*left)++;
			*one = w->v[i].id;
		} else {
			w->others++;
		}
	}
	pbx_instances_free(have, nhave);
	return 0;
}

/* Waits until none of v's instances is live. */
static int aws_wait_gone(struct aws *a, const struct pbx_instance *v, size_t n, size_t *others,
			 struct pbx_err *err)
{
	struct gone w = { a, v, n, 0 };
	int rc = pbx_cloud_wait_gone(count_left, &w, AWS_WAIT_LIMIT_S, 300, err);
	*others = w.others;
	return rc;
}

/* The head leaves the cluster's group and deletes it and the key pair
 * (aws_leave_own) before it terminates itself.  Best effort: what fails
 * is left for the user's next `stop`, which lists by tag, as before. */
static void aws_self_leave(struct aws *a, const char *self, const struct pbx_instance *rest,
			   size_t nrest)
{
	struct pbx_err err = PBX_ERR_INIT;
	if (aws_leave_own(a, self, rest, nrest, &err) < 0)
		fprintf(stderr,
			"pbx: warning: the cluster's security group and key pair stay "
			"for the user's next stop: %s\n",
			err.msg);
}

int aws_destroy(void *ctx, const struct pbx_instance *v, size_t n, struct pbx_err *err)
{
	struct aws *a = ctx;
	struct pbx_instance *rest = NULL, *me = NULL;
	size_t others = 0, nrest = 0, nme = 0;
	int rc;
	if (!a->s->uid)
		return pbx_err_set(err, "cluster %s: no cluster id, nothing is deleted",
				   a->s->name);
	/* a head deleting its own cluster (spec.self): itself last; the group
	 * it is in cannot go before it leaves it */
	pbx_instances_split_self(v, n, a->s->self, &rest, &nrest, &me, &nme);
	rc = aws_terminate(a, rest, nrest, err);
	if (rc == 0 && !a->s->dry_run)
		rc = aws_wait_gone(a, rest, nrest, &others, err);
	/* a subset (resize -N) leaves the rest of the cluster standing */
	if (rc == 0 && !others && !nme)
		rc = aws_delete_own(a, rest, nrest, err);
	/* (others counts the head itself, still running) */
	if (rc == 0 && nme && others <= nme && !a->s->dry_run)
		aws_self_leave(a, me[0].id, rest, nrest);
	if (rc == 0 && nme)
		rc = aws_terminate(a, me, nme, err);
	free(rest);
	free(me);
	return rc;
}

/* A resize's removal: the nodes' instances (those recorded), waiting
 * until they are gone; the group and key pair stay. */
int aws_remove_nodes(void *ctx, const struct pbx_node_row *nodes, size_t n, struct pbx_err *err)
{
	struct aws *a = ctx;
	struct pbx_instance *v = xcalloc(n ? n : 1, sizeof(*v));
	size_t i, m = 0, others = 0;
	int rc;
	for (i = 0; i < n; i++)
		if (nodes[i].instance_id && *nodes[i].instance_id)
			v[m++].id = xstrdup(nodes[i].instance_id);
	rc = aws_terminate(a, v, m, err);
	if (rc == 0 && m && !a->s->dry_run)
		rc = aws_wait_gone(a, v, m, &others, err);
	pbx_instances_free(v, m);
	return rc;
}
