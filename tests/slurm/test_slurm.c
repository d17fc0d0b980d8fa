/*
 * test_slurm.c - @KEY@ substitution, slurm.conf rendering and the sinfo
 * parser.
 */
#include "common/tap.h"
#include "slurm/conf.h"
#include "slurm/sinfo.h"
#include "tmpl/tmpl.h"
#include "util/quote.h"

#include <stdlib.h>
#include <string.h>

static void test_subst(void)
{
	struct pbx_buf out = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	const char *vars[] = { "A", "1", "LONG_NAME", "x@y", NULL };
	const char *keep[] = { "ROOT", NULL };
	ok(pbx_tmpl_subst("t", "a=@A@ b=@LONG_NAME@ r=@ROOT@/x mail@host @ @@", vars, keep, &out,
			  &err) == 0, "substitution succeeds");
	is_str(out.buf, "a=1 b=x@y r=@ROOT@/x mail@host @ @@", "known keys replaced, others kept");
	pbx_buf_reset(&out);
	ok(pbx_tmpl_subst("t.in", "x=@NOPE@", vars, keep, &out, &err) < 0, "unknown key fails");
	is_str(err.msg, "template t.in: unknown placeholder @NOPE@", "error names key and template");
	pbx_buf_release(&out);
}

static void test_render(void)
{
	struct pbx_slurm_node nodes[2] = {
		{ "gpu1", "localhost", "127.0.1.2", 17001, 2, 2 },
		{ "gpu2", "gpu2", "127.0.1.3", 0, 0, 0 },
	};
	struct pbx_slurm_conf c = { "demo", "vm", "127.0.1.1", 17000, 17032, 17063, "root",
				    "DebugFlags=NO_CONF_HASH", nodes, 2 };
	struct pbx_err err = PBX_ERR_INIT;
	char *conf;
	ok(pbx_slurm_render_conf(&c, &conf, &err) == 0, "render: %s", err.msg);
	ok(strstr(conf, "\nClusterName=demo\n") != NULL, "cluster name");
	ok(strstr(conf, "\nSlurmctldHost=vm(127.0.1.1)\n") != NULL, "controller host and address");
	ok(strstr(conf, "\nSrunPortRange=17032-17063\n") != NULL, "srun ports");
	ok(strstr(conf, "\nNodeName=gpu1 NodeHostname=localhost NodeAddr=127.0.1.2 Port=17001 CPUs=2"
			" Gres=gpu:2 State=UNKNOWN\n") != NULL, "node line with port, cpus, gres");
	ok(strstr(conf, "\nNodeName=gpu2 NodeHostname=gpu2 NodeAddr=127.0.1.3 State=UNKNOWN\n") != NULL,
	   "node line without optional fields");
	ok(strstr(conf, "PartitionName=main Nodes=gpu1,gpu2 ") != NULL, "partition lists the nodes");
	ok(strstr(conf, "@ROOT@/var/spool/slurmctld") != NULL, "@ROOT@ left for the bootstrap");
	ok(strstr(conf, "@CLUSTER@") == NULL && strstr(conf, "@EXTRA@") == NULL, "no other placeholder left");
	ok(strstr(conf, "\nDebugFlags=NO_CONF_HASH\n") != NULL, "extra lines");
	free(conf);
}

static void test_sinfo(void)
{
	struct pbx_sinfo_node *nodes;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n;
	const char *text = "gpu1 idle\ngpu2 down*\r\ngpu1 idle\n\ngpu3 mix";
	ok(pbx_sinfo_parse(text, strlen(text), &nodes, &n, &err) == 0 && n == 3,
	   "3 distinct nodes (duplicate per partition, CRLF, blank line, no final newline)");
	is_str(pbx_sinfo_state_of(nodes, n, "gpu2"), "down*", "state of gpu2");
	ok(pbx_sinfo_state_of(nodes, n, "gpu9") == NULL, "unknown node has no state");
	pbx_sinfo_free(nodes, n);
	ok(pbx_sinfo_parse("gpu1 idle\ngpu2\n", 15, &nodes, &n, &err) < 0, "one field is refused");
	is_str(err.msg, "sinfo output line 2: expected 'NODE STATE'", "error names the line");
	ok(pbx_sinfo_parse("a b c\n", 6, &nodes, &n, &err) < 0, "three fields are refused");
	ok(pbx_sinfo_parse("a;rm b\n", 7, &nodes, &n, &err) < 0, "odd bytes are refused");
	ok(pbx_sinfo_state_usable("idle") && pbx_sinfo_state_usable("mix") &&
	   !pbx_sinfo_state_usable("idle*") && !pbx_sinfo_state_usable("down") &&
	   !pbx_sinfo_state_usable("drain"), "usable states");
}

static void test_quote(void)
{
	struct pbx_buf b = PBX_BUF_INIT;
	const char *argv[] = { "echo", "it's", "$(rm -rf /)", "a b", "", NULL };
	pbx_shell_join(&b, argv);
	is_str(b.buf, "'echo' 'it'\\''s' '$(rm -rf /)' 'a b' ''", "argv quoted for a POSIX shell");
	pbx_buf_release(&b);
}

int main(void)
{
	test_subst();
	test_render();
	test_sinfo();
	test_quote();
	return tap_done();
}
