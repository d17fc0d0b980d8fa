/*
 * bootstrap_render.c - gres.conf, env.sh, the NFS export line, the
 * watchers' systemd units and power saving's block of /etc/hosts, rendered
 * for the node bootstrap's stage (see bootstrap_render.h).
 */
#include "cluster/bootstrap_render.h"
#include "util/quote.h"

#include <string.h>

void pbx_bootstrap_gres_conf(struct pbx_buf *out, const char *node, int gpus, const char *gpu_type,
			     const char *dev_base)
{
	const char *type = gpu_type && *gpu_type ? " Type=" : "";
	pbx_buf_addf(out, "# gres.conf for %s, written by the pbx bootstrap\n", node);
	if (gpus == 1)
		pbx_buf_addf(out, "NodeName=%s Name=gpu%s%s File=%s0\n", node, type,
			     *type ? gpu_type : "", dev_base);
	else if (gpus > 1)
		pbx_buf_addf(out, "NodeName=%s Name=gpu%s%s File=%s[0-%d]\n", node, type,
			     *type ? gpu_type : "", dev_base, gpus - 1);
}

void pbx_bootstrap_exports(struct pbx_buf *out, const char *shared, const char *const *clients,
			   size_t n)
{
	size_t i;
	if (!n)
		return;
	pbx_buf_adds(out, shared);
	/* root_squash: a compute node's root is the anonymous uid 65534 on
	 * the shared disk (it writes only its autostop answer, in a
	 * directory of that uid: templates/autostop.sh); a task is its own
	 * uid, and neither is the head's root (docs/SECURITY.md) */
	for (i = 0; i < n; i++)
		pbx_buf_addf(
			out,
			" %s(rw,sync,no_subtree_check,root_squash,anonuid=65534,anongid=65534)",
			clients[i]);
	pbx_buf_addc(out, '\n');
}

/* What a watcher's unit says beyond its name, path and SLURM daemon. */
struct watcher_kind {
	const char *name;
	const char *description; /* and the comment lines after it */
	int preempt;             /* Wants= the network; an ExecStop= (a preemption's) */
	int restart_sec;
};

static const struct watcher_kind watcher_kinds[] = {
	{ "pbx-preempt",
	  "pbx preempt: a spot preemption notice drains this node and sends its jobs SIGTERM\n"
	  "# stopped before these at a shutdown: its ExecStop (a preemption's) needs them",
	  1, 2 },
	{ "pbx-autostop", "pbx autostop: powers this cluster off when it is idle", 0, 10 },
};

int pbx_bootstrap_watcher_unit(struct pbx_buf *out, const char *watcher, const char *root,
			       const char *slurm_daemon)
{
	const struct watcher_kind *k = NULL;
	size_t i;
	for (i = 0; i < sizeof(watcher_kinds) / sizeof(watcher_kinds[0]); i++)
		if (!strcmp(watcher_kinds[i].name, watcher))
			k = &watcher_kinds[i];
	if (!k)
		return -1;
	pbx_buf_addf(out, "[Unit]\nDescription=%s\n", k->description);
	pbx_buf_addf(out, "After=network-online.target remote-fs.target %s.service\n",
		     slurm_daemon);
	if (k->preempt)
		pbx_buf_adds(out, "Wants=network-online.target\n");
	pbx_buf_addf(out, "\n[Service]\nExecStart=%s/usr/local/sbin/%s watch\n", root, k->name);
	if (k->preempt)
		pbx_buf_addf(out, "ExecStop=%s/usr/local/sbin/%s stop\nTimeoutStopSec=60\n", root,
			     k->name);
	pbx_buf_addf(out, "Restart=always\nRestartSec=%d\n", k->restart_sec);
	pbx_buf_adds(out, "\n[Install]\nWantedBy=multi-user.target\n");
	return 0;
}

/* "export NAME=" and `value` quoted for sh, a line. */
static void env_export(struct pbx_buf *out, const char *name, const char *value)
{
	pbx_buf_addf(out, "export %s=", name);
	pbx_shell_quote(out, value);
	pbx_buf_addc(out, '\n');
}

/* "export NAME=" and `root` followed by `path`, quoted for sh, a line. */
static void env_export_under(struct pbx_buf *out, const char *name, const char *root,
			     const char *path)
{
	struct pbx_buf v = PBX_BUF_INIT;
	pbx_buf_addf(&v, "%s%s", root, path);
	env_export(out, name, v.buf);
	pbx_buf_release(&v);
}

/* Behind a proxy: the variables curl, apt's helpers, pip, uv and
 * requests read, in both cases (tools read one or the other). */
static void env_proxy(struct pbx_buf *out, const struct pbx_bootstrap_env *e)
{
	static const char *const via[] = { "http_proxy", "https_proxy", "HTTP_PROXY",
					   "HTTPS_PROXY" };
	struct pbx_buf except = PBX_BUF_INIT;
	size_t i;
	for (i = 0; i < sizeof(via) / sizeof(via[0]); i++)
		env_export(out, via[i], e->proxy);
	pbx_buf_adds(&except, PBX_NO_PROXY_ALWAYS);
	for (i = 0; i < e->nno_proxy; i++)
		pbx_buf_addf(&except, ",%s", e->no_proxy[i]);
	env_export(out, "no_proxy", except.buf);
	env_export(out, "NO_PROXY", except.buf);
	pbx_buf_release(&except);
}

void pbx_bootstrap_env_sh(struct pbx_buf *out, const struct pbx_bootstrap_env *e)
{
	pbx_buf_adds(out, "# pbx node environment: sourced by pbx before every remote command\n");
	if (e->direct && e->train_on_path) {
		struct pbx_buf dir = PBX_BUF_INIT;
		pbx_buf_addf(&dir, "%s/usr/local/bin", e->root);
		pbx_buf_adds(out, "export PATH=");
		pbx_shell_quote(out, dir.buf);
		pbx_buf_adds(out, ":\"$PATH\"\n");
		pbx_buf_release(&dir);
	}
	if (e->direct) {
		/* Node bodies share one host: Open MPI's shared-memory transport
		 * crashes between them; its TCP transport over loopback works. */
		pbx_buf_adds(out, "export OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include=lo "
				  "OMPI_MCA_oob_tcp_if_include=lo\n");
		/* their local disk is this host's: tasks unpack Python
		 * environments (templates/pbx-env.sh) under the body's var/tmp,
		 * which goes with the cluster, not under the host's /var/tmp */
		env_export_under(out, "PBX_ENV_DIR", e->root, "/var/tmp");
	}
	env_export_under(out, "SLURM_CONF", e->root, "/etc/slurm/slurm.conf");
	env_export(out, "PBX_SHARED", e->shared);
	env_export(out, "PBX_ROOT", e->root);
	env_export(out, "PBX_NODE", e->node);
	env_export(out, "PBX_CLUSTER", e->cluster);
	if (e->proxy)
		env_proxy(out, e);
}

/* An apt host name: what no_proxy may hold but a domain (".edu") or a
 * block ("10.0.0.0/8"), which apt cannot say. */
static int apt_host(const char *s)
{
	return *s && *s != '.' && !strchr(s, '/');
}

void pbx_bootstrap_apt_proxy(struct pbx_buf *out, const struct pbx_bootstrap_env *e)
{
	size_t i;
	if (!e->proxy)
		return;
	pbx_buf_adds(out, "// pbx: the cluster's way out (the template's proxy:)\n");
	pbx_buf_addf(out, "Acquire::http::Proxy \"%s/\";\n", e->proxy);
	pbx_buf_addf(out, "Acquire::https::Proxy \"%s/\";\n", e->proxy);
	for (i = 0; i < e->nno_proxy; i++)
		if (apt_host(e->no_proxy[i]))
			pbx_buf_addf(out, "Acquire::http::Proxy::%s \"DIRECT\";\n", e->no_proxy[i]);
}

void pbx_bootstrap_env_task_user(struct pbx_buf *out)
{
	/* pbx submits tasks as this user (src/jobs/arrays.c); a name of
	 * [a-z-], written as it is */
	pbx_buf_adds(out, "export PBX_TASK_USER=" PBX_TASK_USER "\n");
}

/* Whether `s` is made of bytes of `set` only, and not empty. */
static int only_of(const char *s, const char *set)
{
	return *s && strspn(s, set) == strlen(s);
}

/* Why entry e cannot be a line of /etc/hosts, or NULL. */
static const char *hosts_entry_bad(const struct pbx_hosts_entry *e)
{
	if (!e->address || !only_of(e->address, "0123456789abcdef.:"))
		return "address";
	if (!e->name || e->name[0] == '-' ||
	    !only_of(e->name, "abcdefghijklmnopqrstuvwxyz0123456789-"))
		return "name";
	return NULL;
}

int pbx_bootstrap_hosts_block(struct pbx_buf *out, const char *cluster,
			      const struct pbx_hosts_entry *entries, size_t n, struct pbx_err *err)
{
	size_t i;
	for (i = 0; i < n; i++) {
		const char *bad = hosts_entry_bad(&entries[i]);
		if (bad)
			return pbx_err_set(err,
					   "power saving's /etc/hosts line %zu: not a host %s: "
					   "address '%s', name '%s'",
					   i + 1, bad, entries[i].address ? entries[i].address : "",
					   entries[i].name ? entries[i].name : "");
	}
	pbx_buf_addf(out, "# pbx: nodes of cluster %s that sleep (begin)\n", cluster);
	for (i = 0; i < n; i++)
		pbx_buf_addf(out, "%s %s\n", entries[i].address, entries[i].name);
	pbx_buf_addf(out, "# pbx: nodes of cluster %s that sleep (end)\n", cluster);
	return 0;
}
