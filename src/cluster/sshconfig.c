/*
 * sshconfig.c - what `pbx cluster ssh` hands to OpenSSH's ssh(1): a
 * client configuration and a known_hosts file, both private (0600) in the
 * cluster's directory under PBX_HOME and rewritten from the store on every
 * call, so ssh(1) trusts exactly the host keys pbx pinned and reaches a
 * node the way pbx's own connections do (pbx_cluster_connect): the head
 * and any node with a public address directly, a node without one through
 * the head (ProxyJump).
 *
 * Why a file rather than -o options: ssh(1) runs the jump as a second ssh
 * that gets the -F file but none of the -o options, so only a file makes
 * both hops check keys against pbx's pins.  Each host is named by an alias
 * (Host pbx-NODE) and its key is looked up under that alias
 * (HostKeyAlias), because OpenSSH checks a jumped-to host under the
 * address ssh is asked for, which is the node's private one.
 */
#include "cluster/cluster.h"
#include "cluster/cluster_internal.h"
#include "util/buf.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <stdlib.h>
#include <string.h>

/* The Host alias (and HostKeyAlias) of node i: pbx-NODE.  Caller frees. */
static char *host_alias(const struct pbx_cluster *c, size_t i)
{
	return xasprintf("pbx-%s", c->nodes[i].name);
}

/* A path as an ssh_config value: double-quoted (paths may hold spaces),
 * '%' doubled (ssh expands %-tokens in these keys).  -1 for a path ssh
 * cannot be given ('"' or a newline). */
static int add_path(struct pbx_buf *b, const char *key, const char *path, struct pbx_err *err)
{
	const char *p;
	if (strpbrk(path, "\"\n\r"))
		return pbx_err_set(err,
				   "cannot hand the path '%s' to ssh(1) (a quote or newline "
				   "in it)",
				   path);
	pbx_buf_addf(b, "  %s \"", key);
	for (p = path; *p; p++) {
		if (*p == '%')
			pbx_buf_adds(b, "%"); /* "%%" is a literal '%' */
		pbx_buf_add(b, p, 1);
	}
	pbx_buf_adds(b, "\"\n");
	return 0;
}

/* Appends node i's pinned key to the known_hosts text under its alias;
 * -1 (with err) when none is pinned. */
static int add_known(struct pbx_cluster *c, size_t i, struct pbx_buf *known, struct pbx_err *err)
{
	char *pin = pbx_cluster_pin_name(c, i), *type = NULL, *key = NULL, *alias;
	int rc = pbx_store_hostkey_get(c->store, pin, &type, &key, err);
	if (rc == 0)
		rc = pbx_err_set(err, "no host key pinned for %s", pin);
	if (rc > 0) {
		alias = host_alias(c, i);
		pbx_buf_addf(known, "%s %s %s\n", alias, type, key);
		free(alias);
	}
	free(pin);
	free(type);
	free(key);
	return rc < 0 ? -1 : 0;
}

/* Appends node i's Host block; through `jump` (an alias) when not NULL. */
static int add_host(struct pbx_cluster *c, size_t i, const char *jump, const char *known_path,
		    struct pbx_buf *b, struct pbx_err *err)
{
	char *alias = host_alias(c, i);
	pbx_buf_addf(b, "Host %s\n  HostName %s\n  Port %d\n  HostKeyAlias %s\n", alias,
		     pbx_cluster_ssh_addr(c, i), c->nodes[i].ssh_port, alias);
	free(alias);
	if (strpbrk(c->user, " \t\"\n%"))
		return pbx_err_set(err, "cannot hand the login user '%s' to ssh(1)", c->user);
	pbx_buf_addf(b, "  User %s\n", c->user);
	if (jump)
		pbx_buf_addf(b, "  ProxyJump %s\n", jump);
	if (c->key_path && (add_path(b, "IdentityFile", c->key_path, err) < 0))
		return -1;
	if (c->key_path)
		pbx_buf_adds(b, "  IdentitiesOnly yes\n");
	if (add_path(b, "UserKnownHostsFile", known_path, err) < 0)
		return -1;
	pbx_buf_adds(b, "  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n"
			"  CheckHostIP no\n  UpdateHostKeys no\n\n");
	return 0;
}

int pbx_cluster_ssh_config(struct pbx_cluster *c, size_t i, char **config, char **alias,
			   struct pbx_err *err)
{
	struct pbx_buf cfg = PBX_BUF_INIT, known = PBX_BUF_INIT;
	char *known_path = xasprintf("%s/known_hosts", c->dir), *head = NULL;
	int via = pbx_cluster_via_head(c, i), rc;
	*config = xasprintf("%s/ssh_config", c->dir);
	*alias = host_alias(c, i);
	pbx_buf_adds(
		&cfg,
		"# Written by pbx for 'pbx cluster ssh' from its store; rewritten on every call.\n\n");
	rc = pbx_mkdir_p(c->dir, PBX_CLUSTER_DIR_MODE, err);
	if (rc == 0 && via) {
		head = host_alias(c, 0);
		rc = add_known(c, 0, &known, err);
		if (rc == 0)
			rc = add_host(c, 0, NULL, known_path, &cfg, err);
	}
	if (rc == 0)
		rc = add_known(c, i, &known, err);
	if (rc == 0)
		rc = add_host(c, i, head, known_path, &cfg, err);
	if (rc == 0)
		rc = pbx_write_file_atomic(known_path, known.buf, known.len, 0600, err);
	if (rc == 0)
		rc = pbx_write_file_atomic(*config, cfg.buf, cfg.len, 0600, err);
	pbx_buf_release(&cfg);
	pbx_buf_release(&known);
	free(known_path);
	free(head);
	if (rc < 0) {
		free(*config);
		free(*alias);
		*config = *alias = NULL;
	}
	return rc;
}
