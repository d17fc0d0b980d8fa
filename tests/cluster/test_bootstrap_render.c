/*
 * test_bootstrap_render.c - what pbx renders into the bootstrap's stage
 * (src/cluster/bootstrap_render.c), each against its golden file:
 *
 *   test_bootstrap_render GOLDEN_DIR        the TAP tests
 *   test_bootstrap_render gres NODE GPUS TYPE DEV_BASE
 *   test_bootstrap_render exports SHARED [CLIENT...]
 *   test_bootstrap_render unit WATCHER ROOT SLURM_DAEMON
 *
 * The last three print one file of a stage, for the shell tests that run
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

/* The tool: one stage file on stdout. */
static int render(int argc, char **argv)
{
	struct pbx_buf b = PBX_BUF_INIT;
	if (!strcmp(argv[1], "gres") && argc == 6)
		pbx_bootstrap_gres_conf(&b, argv[2], atoi(argv[3]), argv[4], argv[5]);
	else if (!strcmp(argv[1], "unit") && argc == 5 &&
		 pbx_bootstrap_watcher_unit(&b, argv[2], argv[3], argv[4]) == 0)
		;
	else if (!strcmp(argv[1], "exports") && argc >= 3)
		pbx_bootstrap_exports(&b, argv[2], (const char *const *)argv + 3,
				      (size_t)(argc - 3));
	else {
		fprintf(stderr,
			"usage: %s GOLDEN_DIR | gres NODE GPUS TYPE DEV_BASE | "
			"exports SHARED [CLIENT...] | unit WATCHER ROOT SLURM_DAEMON\n",
			argv[0]);
		return 2;
	}
	fwrite(b.buf ? b.buf : "", 1, b.len, stdout);
	pbx_buf_release(&b);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 2)
		return render(argc, argv);
	if (argc != 2)
		return render(1, argv);
	golden_dir = argv[1];
	test_gres();
	test_exports();
	test_units();
	return tap_done();
}
