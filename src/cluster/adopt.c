/*
 * adopt.c - `pbx cluster adopt`: a cluster's record (record.c writes it,
 * record_parse.c reads it) becomes this store's cluster, in one
 * transaction.  Made for pbx on a cluster's head, which runs SLURM's power
 * saving there from a store of its own (docs/power-saving.md, "A store on
 * the head"): it runs inside the cluster's network, so the nodes keep
 * their private addresses only, and their host keys are pinned under
 * those.
 */
#include "cluster/cluster_internal.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* The record as this pbx keeps it: no public address, every pin under
 * its node's private address (NAME/NODE@ADDRESS:PORT; a pin of a node
 * without one is dropped). */
static void adopt_localize(struct pbx_cluster_record *rec)
{
	size_t i, k = 0;
	for (i = 0; i < rec->nnodes; i++) {
		free(rec->nodes[i].public_address);
		rec->nodes[i].public_address = NULL;
	}
	for (i = 0; i < rec->npins; i++) {
		struct pbx_record_pin *p = &rec->pins[i];
		const char *node = strchr(p->hostport, '/') + 1; /* validated: NAME/NODE@... */
		size_t l = strcspn(node, "@"), j;
		for (j = 0; j < rec->nnodes && (strlen(rec->nodes[j].name) != l ||
						strncmp(rec->nodes[j].name, node, l) != 0);
		     j++)
			;
		if (j == rec->nnodes || !*rec->nodes[j].address) {
			free(p->hostport);
			free(p->type);
			free(p->key);
			continue;
		}
		free(p->hostport);
		p->hostport = xasprintf("%s/%s@%s:%d", rec->row.name, rec->nodes[j].name,
					rec->nodes[j].address, rec->nodes[j].ssh_port);
		rec->pins[k++] = *p;
	}
	rec->npins = k;
}

/* The cluster of the record's id here, if any, must be the same cluster:
 * live, of that name and cloud. */
static int adopt_check_uid(struct pbx_store *st, const struct pbx_cluster_row *r,
			   struct pbx_err *err)
{
	struct pbx_cluster_row have;
	struct pbx_err nerr = PBX_ERR_INIT;
	int rc = 0;
	if (pbx_store_cluster_get_uid(st, r->uid, &have, &nerr) < 0)
		return nerr.code == PBX_EXIT_NOTFOUND ? 0 : pbx_err_set(err, "%s", nerr.msg);
	if (!strcmp(have.state, "deleted"))
		rc = pbx_err_set(err, "cluster id %s was deleted in this store: not adopted again",
				 r->uid);
	else if (strcmp(have.name, r->name) != 0 || strcmp(have.cloud, r->cloud) != 0)
		rc = pbx_err_set(err, "cluster id %s is cluster %s (%s) here, not %s (%s)", r->uid,
				 have.name, have.cloud, r->name, r->cloud);
	pbx_cluster_row_free(&have);
	return rc;
}

/* No other live cluster holds the record's name, nor its slot of its
 * cloud (its addresses and ports, on the local cloud). */
static int adopt_check_others(struct pbx_store *st, const struct pbx_cluster_row *r,
			      struct pbx_err *err)
{
	struct pbx_cluster_row *v = NULL;
	size_t n = 0, i;
	int rc = pbx_store_cluster_list(st, 0, &v, &n, err);
	for (i = 0; rc == 0 && i < n; i++) {
		if (!strcmp(v[i].uid, r->uid))
			continue;
		if (!strcmp(v[i].name, r->name))
			rc = pbx_err_set(err,
					 "cluster %s here is another cluster (id %s, not %s): "
					 "not adopted",
					 r->name, v[i].uid, r->uid);
		else if (!strcmp(v[i].cloud, r->cloud) && v[i].slot == r->slot)
			rc = pbx_err_set(err,
					 "cluster %s here holds slot %d of %s, which cluster %s "
					 "uses: not adopted",
					 v[i].name, r->slot, r->cloud, r->name);
	}
	pbx_cluster_rows_free(v, n);
	return rc;
}

/* This store's row of node `name` when it says the node is awake while
 * the record says asleep, else NULL.  The head makes and removes the nodes
 * that sleep (power saving), so it knows best which are awake: the user's
 * record, sent after every start, has them as the user's store does,
 * asleep, and taking that in would lose the instance of an awake node
 * (never suspended: a leak). */
static struct pbx_node_row *adopt_awake(struct pbx_node_row *old, size_t n,
					const struct pbx_node_row *rec)
{
	size_t i;
	if (!rec->state || strcmp(rec->state, PBX_NODE_ASLEEP) != 0)
		return NULL;
	for (i = 0; i < n; i++)
		if (!strcmp(old[i].name, rec->name) && old[i].state &&
		    strcmp(old[i].state, PBX_NODE_ASLEEP) != 0)
			return &old[i];
	return NULL;
}

/* Replaces the nodes of cluster `id` with the record's, keeping what this
 * store knows of the awake ones the record has asleep (adopt_awake). */
static int adopt_nodes(struct pbx_store *st, int64_t id, struct pbx_cluster_record *rec,
		       struct pbx_err *err)
{
	struct pbx_node_row *old = NULL;
	size_t n = 0, i;
	int rc = pbx_store_node_list(st, id, &old, &n, err);
	for (i = 0; rc == 0 && i < n; i++)
		rc = pbx_store_node_delete(st, id, old[i].name, err);
	for (i = 0; rc == 0 && i < rec->nnodes; i++) {
		struct pbx_node_row *awake = adopt_awake(old, n, &rec->nodes[i]);
		struct pbx_node_row *row = awake ? awake : &rec->nodes[i];
		row->cluster_id = id;
		rc = pbx_store_node_put(st, row, err);
	}
	pbx_node_rows_free(old, n);
	return rc;
}

/* Replaces the pins of the cluster's nodes ("NAME/...") with the record's. */
static int adopt_pins(struct pbx_store *st, const struct pbx_cluster_record *rec,
		      struct pbx_err *err)
{
	char *prefix = xasprintf("%s/", rec->row.name);
	size_t i;
	int removed, rc = pbx_store_hostkey_forget_prefix(st, prefix, &removed, err);
	free(prefix);
	for (i = 0; rc == 0 && i < rec->npins; i++)
		rc = pbx_store_hostkey_put(st, rec->pins[i].hostport, rec->pins[i].type,
					   rec->pins[i].key, err);
	return rc;
}

static int adopt_write(struct pbx_store *st, struct pbx_cluster_record *rec, struct pbx_err *err)
{
	int64_t id = 0;
	if (adopt_check_uid(st, &rec->row, err) < 0 || adopt_check_others(st, &rec->row, err) < 0 ||
	    pbx_store_cluster_put(st, &rec->row, &id, err) < 0 ||
	    adopt_nodes(st, id, rec, err) < 0 || adopt_pins(st, rec, err) < 0)
		return -1;
	pbx_store_event(st, id, "cluster.adopted", "%zu nodes, %zu pins", rec->nnodes, rec->npins);
	return 0;
}

int pbx_cluster_adopt(struct pbx_store *st, const char *text, size_t len, const char *what,
		      char **name, struct pbx_err *err)
{
	struct pbx_cluster_record rec;
	int rc;
	if (name)
		*name = NULL;
	if (pbx_cluster_record_parse(text, len, what, &rec, err) < 0)
		return -1;
	adopt_localize(&rec);
	rc = pbx_store_begin(st, err);
	if (rc == 0 && adopt_write(st, &rec, err) < 0) {
		pbx_store_rollback(st);
		rc = -1;
	}
	if (rc == 0)
		rc = pbx_store_commit(st, err);
	if (rc == 0 && name)
		*name = xstrdup(rec.row.name);
	pbx_cluster_record_release(&rec);
	return rc;
}
