/*
 * test_bootstrap_render.c - what pbx renders into the bootstrap's stage
 * (src/cluster/bootstrap_render.c), each against its golden file:
 *
 *   test_bootstrap_render GOLDEN_DIR        the TAP tests
 *   test_bootstrap_render gres NODE GPUS TYPE DEV_BASE
 *   test_bootstrap_render exports SHARED [CLIENT...]
 *   test_bootstrap_render unit WATCHER ROOT SLURM_DAEMON
 *   test_bootstrap_render env NODE CLUSTER ROOT SHARED direct|systemd [TRAIN]
 *   test_bootstrap_render task-user
 *   test_bootstrap_render apt-proxy URL [NO_PROXY...]
 *   test_bootstrap_render hosts CLUSTER [ADDRESS NAME]...
 *
 * The others print one file of a stage (env's TRAIN: any word puts a node
 * body's pbx-train on PATH), for the shell tests that run
 * templates/bootstrap.sh without pbx (tests/bootstrap/).  With
 * PBX_GOLDEN_UPDATE=1 the TAP run writes the golden files instead of
 * comparing (then review their diff).
 */
#include "common/tap.h"

#include "cluster/bootstrap_render.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *golden_dir;

/* `got` against GOLDEN_DIR/NAME (or written there: PBX_GOLDEN_UPDATE=1). */
static void golden(const char *name, const struct pbx_buf *got)
{
	struct pbx_buf want = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	char *path = xasprintf("%s/%s", golden_dir, name);
	const char *text = got->len ? got->buf : "";
	const char *update = getenv("PBX_GOLDEN_UPDATE");
	if (update && !strcmp(update, "1")) {
		FILE *f = fopen(path, "w");
		ok(f && fputs(text, f) >= 0 && fclose(f) == 0, "%s written", name);
	} else if (ok(pbx_read_file(path, &want, &err) == 0, "%s read", name)) {
		is_str(text, want.len ? want.buf : "", name);
	} else {
		tap_diag("%s", err.msg);
	}
	pbx_buf_release(&want);
	free(path);
}

static void test_gres(void)
{
	struct pbx_buf b = PBX_BUF_INIT;
	pbx_bootstrap_gres_conf(&b, "head", 0, "", "/dev/nvidia");
	golden("gres-none.conf", &b);
	pbx_buf_reset(&b);
	pbx_bootstrap_gres_conf(&b, "gpu1", 1, "t4", "/dev/nvidia");
	golden("gres-one-typed.conf", &b);
	pbx_buf_reset(&b);
	pbx_bootstrap_gres_conf(&b, "node1", 2, NULL, "/tmp/pbx-x/nodes/node1/dev/nvidia");
	golden("gres-two-body.conf", &b);
	pbx_buf_reset(&b);
	pbx_bootstrap_gres_conf(&b, "big.node-3", 8, "h100-80gb", "/dev/nvidia");
	golden("gres-eight-typed.conf", &b);
	pbx_buf_release(&b);
}

static void test_exports(void)
{
	static const char *const clients[] = { "127.0.4.2", "127.0.4.3", "c1-x-node3" };
	struct pbx_buf b = PBX_BUF_INIT;
	pbx_bootstrap_exports(&b, "/shared", clients, 3);
	golden("exports-three", &b);
	pbx_buf_reset(&b);
	pbx_bootstrap_exports(&b, "/shared", clients, 0);
	ok(b.len == 0, "no compute nodes: no export line (got %zu bytes)", b.len);
	pbx_buf_release(&b);
}

static void test_units(void)
{
	struct pbx_buf b = PBX_BUF_INIT;
	ok(pbx_bootstrap_watcher_unit(&b, "pbx-preempt", "", "slurmd") == 0, "pbx-preempt's unit");
	golden("unit-preempt-vm.service", &b);
	pbx_buf_reset(&b);
	ok(pbx_bootstrap_watcher_unit(&b, "pbx-autostop", "/tmp/pbx-x/head", "slurmctld") == 0,
	   "pbx-autostop's unit");
	golden("unit-autostop-root.service", &b);
	pbx_buf_reset(&b);
	ok(pbx_bootstrap_watcher_unit(&b, "pbx-other", "", "slurmd") == -1 && b.len == 0,
	   "no unit for a watcher pbx does not have");
	pbx_buf_release(&b);
}

/* A node body's env.sh and a VM's, each with every value hostile: quotes,
 * $(...), backticks, a newline; sourced by sh, each must come back as it
 * was (cli tests source the files pbx stages: tests/bootstrap/). */
/* env as sh sources it: each value comes back byte for byte, and nothing
 * else is set (the hostile node name's newline adds no PBX_OWNED). */
static void env_sourced(const struct pbx_buf *env, const struct pbx_bootstrap_env *e)
{
	char path[] = "/tmp/pbx-render-env-XXXXXX";
	struct pbx_buf got = PBX_BUF_INIT, want = PBX_BUF_INIT;
	int fd = mkstemp(path);
	char *cmd, chunk[512];
	size_t n;
	FILE *p;
	REQUIREF(fd >= 0 && write(fd, env->buf, env->len) == (ssize_t)env->len && close(fd) == 0,
		 "env written to %s", path);
	cmd = xasprintf("sh -c '. \"$1\" && printf \"%%s|\" \"$PBX_ROOT\" \"$PBX_NODE\" "
			"\"$PBX_CLUSTER\" \"$PBX_SHARED\" \"$SLURM_CONF\" \"$PBX_ENV_DIR\" "
			"\"${PBX_OWNED-unset}\"' _ %s",
			path);
	p = popen(cmd, "r");
	while (p && (n = fread(chunk, 1, sizeof(chunk), p)) > 0)
		pbx_buf_add(&got, chunk, n);
	ok(p && pclose(p) == 0, "sh sources the hostile env.sh");
	pbx_buf_addf(&want, "%s|%s|%s|%s|%s/etc/slurm/slurm.conf|%s%s|unset|", e->root, e->node,
		     e->cluster, e->shared, e->root, e->root, e->direct ? "/var/tmp" : "");
	is_str(got.len ? got.buf : "", want.buf, "every value as pbx rendered it, nothing more");
	unlink(path);
	free(cmd);
	pbx_buf_release(&got);
	pbx_buf_release(&want);
}

static void test_env(void)
{
	static const struct pbx_bootstrap_env body = {
		.root = "/tmp/pbx-x/clusters/c1/nodes/node1",
		.node = "node1",
		.cluster = "c1",
		.shared = "/tmp/pbx-x/clusters/c1/shared",
		.direct = 1,
		.train_on_path = 1,
	};
	/* a VM: no pbx-train on PATH (it is in /usr/local/bin), whatever the flag */
	static const struct pbx_bootstrap_env vm = {
		.root = "", .node = "head", .cluster = "c1", .shared = "/shared", .train_on_path = 1
	};
	static const struct pbx_bootstrap_env hostile = {
		.root = "/r/it's $(echo pwned) `id`",
		.node = "n'1\nexport PBX_OWNED=1",
		.cluster = "c$(x)",
		.shared = "/s \"$HOME\" ''",
		.direct = 1,
	};
	struct pbx_buf b = PBX_BUF_INIT;
	pbx_bootstrap_env_sh(&b, &body);
	golden("env-body.sh", &b);
	pbx_buf_reset(&b);
	pbx_bootstrap_env_sh(&b, &vm);
	golden("env-vm.sh", &b);
	pbx_buf_reset(&b);
	pbx_bootstrap_env_sh(&b, &hostile);
	golden("env-hostile.sh", &b);
	env_sourced(&b, &hostile);
	pbx_buf_reset(&b);
	pbx_bootstrap_env_task_user(&b);
	golden("task-user.env.sh", &b);
	pbx_buf_release(&b);
}

/* A cluster behind a proxy: env.sh's variables, apt's file (a host of
 * no_proxy DIRECT, a domain and a block not: apt cannot say them). */
static void test_proxy(void)
{
	static const char *const except[] = { ".example.edu", "10.0.0.0/8", "mirror.example.org",
					      "10.1.2.3" };
	const struct pbx_bootstrap_env vm = { .root = "",
					      .node = "head",
					      .cluster = "c1",
					      .shared = "/shared",
					      .proxy = "http://proxy.example.edu:3128",
					      .no_proxy = except,
					      .nno_proxy = 4 };
	const struct pbx_bootstrap_env none = {
		.root = "", .node = "head", .cluster = "c1", .shared = "/shared"
	};
	struct pbx_buf b = PBX_BUF_INIT;
	pbx_bootstrap_env_sh(&b, &vm);
	golden("env-proxy.sh", &b);
	pbx_buf_reset(&b);
	pbx_bootstrap_apt_proxy(&b, &vm);
	golden("apt-proxy.conf", &b);
	pbx_buf_reset(&b);
	pbx_bootstrap_apt_proxy(&b, &none);
	ok(b.len == 0, "apt-proxy: nothing without a proxy");
	pbx_buf_release(&b);
}

static void test_hosts(void)
{
	static const struct pbx_hosts_entry two[] = { { "10.0.1.5", "c1-node3" },
						      { "fd00::a:1", "c1-spot1" } };
	static const struct pbx_hosts_entry bad[][1] = {
		{ { "10.0.1.5\n10.6.6.6", "evil" } },
		{ { "10.0.1.5", "c1-node3 extra" } },
		{ { "10.0.1.5", "-c1" } },
		{ { "", "c1-node3" } },
		{ { "10.0.1.5", "C1-Node3" } },
		{ { "10.0.1.5 # x", "c1-node3" } },
		{ { "10.0.1.5", "c1-node3\n127.0.0.1 metadata" } },
	};
	struct pbx_buf b = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	size_t i;
	ok(pbx_bootstrap_hosts_block(&b, "c1", two, 2, &err) == 0, "hosts: two nodes (%s)",
	   err.msg);
	golden("hosts-two", &b);
	pbx_buf_reset(&b);
	ok(pbx_bootstrap_hosts_block(&b, "c1", two, 0, &err) == 0, "hosts: no node (%s)", err.msg);
	golden("hosts-none", &b);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		pbx_buf_reset(&b);
		pbx_err_clear(&err);
		ok(pbx_bootstrap_hosts_block(&b, "c1", bad[i], 1, &err) == -1 && b.len == 0 &&
			   strstr(err.msg, "line 1: not a host "),
		   "hosts: bad entry %zu refused, nothing rendered", i);
	}
	pbx_buf_release(&b);
}

/* env NODE CLUSTER ROOT SHARED direct|systemd [TRAIN] */
static void render_env(struct pbx_buf *b, int argc, char **argv)
{
	const struct pbx_bootstrap_env e = {
		.node = argv[2],
		.cluster = argv[3],
		.root = argv[4],
		.shared = argv[5],
		.direct = !strcmp(argv[6], "direct"),
		.train_on_path = argc > 7,
	};
	pbx_bootstrap_env_sh(b, &e);
}

/* apt-proxy URL [NO_PROXY...] */
static void render_apt_proxy(struct pbx_buf *b, int argc, char **argv)
{
	const struct pbx_bootstrap_env e = { .proxy = argv[2],
					     .no_proxy = (const char *const *)argv + 3,
					     .nno_proxy = (size_t)(argc - 3) };
	pbx_bootstrap_apt_proxy(b, &e);
}

/* hosts CLUSTER [ADDRESS NAME]...; -1 (the error on stderr) when refused */
static int render_hosts(struct pbx_buf *b, int argc, char **argv)
{
	size_t n = (size_t)(argc - 3) / 2, i;
	struct pbx_hosts_entry *e = xcalloc(n ? n : 1, sizeof(*e));
	struct pbx_err err = PBX_ERR_INIT;
	int rc;
	for (i = 0; i < n; i++) {
		e[i].address = argv[3 + 2 * i];
		e[i].name = argv[4 + 2 * i];
	}
	rc = pbx_bootstrap_hosts_block(b, argv[2], e, n, &err);
	if (rc < 0)
		fprintf(stderr, "%s\n", err.msg);
	free(e);
	return rc;
}

/* One stage file into b: 0, 1 (refused: the error on stderr) or 2 (usage). */
static int render_file(struct pbx_buf *b, int argc, char **argv)
{
	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "gres") && argc == 6)
		pbx_bootstrap_gres_conf(b, argv[2], atoi(argv[3]), argv[4], argv[5]);
	else if (!strcmp(argv[1], "unit") && argc == 5)
		return pbx_bootstrap_watcher_unit(b, argv[2], argv[3], argv[4]) == 0 ? 0 : 2;
	else if (!strcmp(argv[1], "exports") && argc >= 3)
		pbx_bootstrap_exports(b, argv[2], (const char *const *)argv + 3,
				      (size_t)(argc - 3));
	else if (!strcmp(argv[1], "env") && (argc == 7 || argc == 8))
		render_env(b, argc, argv);
	else if (!strcmp(argv[1], "task-user") && argc == 2)
		pbx_bootstrap_env_task_user(b);
	else if (!strcmp(argv[1], "apt-proxy") && argc >= 3)
		render_apt_proxy(b, argc, argv);
	else if (!strcmp(argv[1], "hosts") && argc >= 3 && argc % 2 == 1)
		return render_hosts(b, argc, argv) == 0 ? 0 : 1;
	else
		return 2;
	return 0;
}

/* The tool: one stage file on stdout. */
static int render(int argc, char **argv)
{
	struct pbx_buf b = PBX_BUF_INIT;
	int rc = render_file(&b, argc, argv);
	if (rc == 2)
		fprintf(stderr,
			"usage: %s GOLDEN_DIR | gres NODE GPUS TYPE DEV_BASE | "
			"exports SHARED [CLIENT...] | unit WATCHER ROOT SLURM_DAEMON | "
			"env NODE CLUSTER ROOT SHARED direct|systemd [TRAIN] | task-user | "
			"apt-proxy URL [NO_PROXY...] | "
			"hosts CLUSTER [ADDRESS NAME]...\n",
			argv[0]);
	else if (rc == 0)
		fwrite(b.buf ? b.buf : "", 1, b.len, stdout);
	pbx_buf_release(&b);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc != 2 || !strcmp(argv[1], "task-user"))
		return render(argc, argv);
	golden_dir = argv[1];
	test_gres();
	test_exports();
	test_units();
	test_env();
	test_proxy();
	test_hosts();
	return tap_done();
}
