/*
 * test_slurm.c - @KEY@ substitution, slurm.conf rendering and the sinfo
 * parser.
 */
#include "common/tap.h"
#include "slurm/conf.h"
#include "slurm/sinfo.h"
#include "slurm/squeue.h"
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
			  &err) == 0,
	   "substitution succeeds");
	is_str(out.buf, "a=1 b=x@y r=@ROOT@/x mail@host @ @@", "known keys replaced, others kept");
	pbx_buf_reset(&out);
	ok(pbx_tmpl_subst("t.in", "x=@NOPE@", vars, keep, &out, &err) < 0, "unknown key fails");
	is_str(err.msg, "template t.in: unknown placeholder @NOPE@",
	       "error names key and template");
	pbx_buf_release(&out);
}

static void test_render(void)
{
	struct pbx_slurm_node nodes[2] = {
		{ "gpu1", "localhost", "127.0.1.2", 17001, 2, 4096, 2 },
		{ "gpu2", "gpu2", "127.0.1.3", 0, 0, 0, 0 },
	};
	struct pbx_slurm_conf c = { "demo", "vm",  "127.0.1.1", 17000,
				    17032,  17063, "root",      "DebugFlags=NO_CONF_HASH",
				    1001,   0,     nodes,       2 };
	struct pbx_err err = PBX_ERR_INIT;
	char *conf;
	ok(pbx_slurm_render_conf(&c, &conf, &err) == 0, "render: %s", err.msg);
	ok(strstr(conf, "\nClusterName=demo\n") != NULL, "cluster name");
	ok(strstr(conf, "\nSlurmctldHost=vm(127.0.1.1)\n") != NULL, "controller host and address");
	ok(strstr(conf, "\nSrunPortRange=17032-17063\n") != NULL, "srun ports");
	ok(strstr(conf,
		  "\nNodeName=gpu1 NodeHostname=localhost NodeAddr=127.0.1.2 Port=17001 CPUs=2"
		  " RealMemory=4096 Gres=gpu:2 State=UNKNOWN\n") != NULL,
	   "node line with port, cpus, memory, gres");
	ok(strstr(conf, "\nMaxArraySize=1001\nMaxJobCount=50000\n") != NULL,
	   "limits: the template's MaxArraySize, the default MaxJobCount");
	ok(strstr(conf, "\nNodeName=gpu2 NodeHostname=gpu2 NodeAddr=127.0.1.3 State=UNKNOWN\n") !=
		   NULL,
	   "node line without optional fields");
	ok(strstr(conf, "PartitionName=main Nodes=gpu1,gpu2 ") != NULL,
	   "partition lists the nodes");
	ok(strstr(conf, "@ROOT@/var/spool/slurmctld") != NULL, "@ROOT@ left for the bootstrap");
	ok(strstr(conf, "@CLUSTER@") == NULL && strstr(conf, "@EXTRA@") == NULL,
	   "no other placeholder left");
	ok(strstr(conf, "\nDebugFlags=NO_CONF_HASH\n") != NULL, "extra lines");
	ok(strstr(conf, "\nAuthInfo=socket=@ROOT@/run/munge/munge.socket.2\n") != NULL,
	   "AuthInfo: SLURM's default credential lifetime");
	free(conf);
	c.cred_expire = 15;
	ok(pbx_slurm_render_conf(&c, &conf, &err) == 0, "render with cred_expire: %s", err.msg);
	ok(strstr(conf, "\nAuthInfo=socket=@ROOT@/run/munge/munge.socket.2,cred_expire=15\n") !=
		   NULL,
	   "AuthInfo: cred_expire (the requeue delay)");
	free(conf);
	nodes[0].gpu_type = "t4";
	nodes[1].gpu_type = "t4"; /* no GPUs: no Gres, typed or not */
	ok(pbx_slurm_render_conf(&c, &conf, &err) == 0, "render with a GPU type: %s", err.msg);
	ok(strstr(conf, " RealMemory=4096 Gres=gpu:t4:2 State=UNKNOWN\n") != NULL, "typed GRES");
	ok(strstr(conf, "\nNodeName=gpu2 NodeHostname=gpu2 NodeAddr=127.0.1.3 State=UNKNOWN\n") !=
		   NULL,
	   "a node without GPUs has no Gres");
	free(conf);
}

static void test_gpu_type(void)
{
	static const char *const cases[][2] = {
		{ "nvidia-tesla-t4", "t4" },
		{ "nvidia-l4", "l4" },
		{ "nvidia-h100-80gb", "h100-80gb" },
		{ "NVIDIA-Tesla-V100", "v100" },
		{ "t4", "t4" },
		{ "A10G", "a10g" },
		{ "a:b,c d$(x)", "abcdx" },
		{ "nvidia-", "" },
		{ ":::", "" },
	};
	char out[32], tiny[4];
	size_t i;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pbx_slurm_gpu_type(cases[i][0], out, sizeof(out));
		ok(strcmp(out, cases[i][1]) == 0, "gpu type of '%s' is '%s' (got '%s')",
		   cases[i][0], cases[i][1], out);
	}
	pbx_slurm_gpu_type(NULL, out, sizeof(out));
	ok(out[0] == '\0', "no accelerator: untyped");
	pbx_slurm_gpu_type("nvidia-h100-80gb", tiny, sizeof(tiny));
	ok(strcmp(tiny, "h10") == 0, "cut to the buffer");
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
		   !pbx_sinfo_state_usable("drain"),
	   "usable states");
	ok(pbx_sinfo_state_resumable("down") && pbx_sinfo_state_resumable("down*") &&
		   pbx_sinfo_state_resumable("drain") && pbx_sinfo_state_resumable("drng") == 0 &&
		   pbx_sinfo_state_resumable("inval") && pbx_sinfo_state_resumable("fail") &&
		   !pbx_sinfo_state_resumable("idle") && !pbx_sinfo_state_resumable("mix") &&
		   !pbx_sinfo_state_resumable("alloc") && !pbx_sinfo_state_resumable("idle*"),
	   "states a resume may fix: down, drained, invalid, failed");
}

static void test_quote(void)
{
	struct pbx_buf b = PBX_BUF_INIT;
	const char *argv[] = { "echo", "it's", "$(rm -rf /)", "a b", "", NULL };
	pbx_shell_join(&b, argv);
	is_str(b.buf, "'echo' 'it'\\''s' '$(rm -rf /)' 'a b' ''", "argv quoted for a POSIX shell");
	pbx_buf_release(&b);
}

static void test_squeue(void)
{
	struct pbx_squeue_job *j;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_slurm_limits lim;
	size_t n;
	const char *text =
		"1234_7 RUNNING\n1234_[8-99%4] PENDING\n55 COMPLETING\n1234_[3] PENDING\n";
	const char *conf = "Configuration data as of 2026\nMaxArraySize            = 1001\n"
			   "MaxJobCount             = 50000\nMaxJobId = 67043328\n";
	ok(pbx_squeue_parse(text, strlen(text), &j, &n, &err) == 0 && n == 4, "4 squeue lines: %s",
	   err.msg);
	ok(n == 4 && j[0].array_job == 1234 && j[0].array_task == 7 &&
		   !strcmp(j[0].state, "RUNNING"),
	   "array task");
	ok(n == 4 && j[1].array_task == -1 && j[1].range_lo == 8 && j[1].range_hi == 99,
	   "pending range with throttle");
	ok(n == 4 && j[2].array_job == 55 && j[2].array_task == -1 && j[2].range_lo == -1,
	   "plain job");
	ok(n == 4 && j[3].range_lo == 3 && j[3].range_hi == 3, "single-element range");
	pbx_squeue_free(j, n);
	ok(pbx_squeue_parse("12_x RUNNING\n", 13, &j, &n, &err) < 0, "bad task id refused");
	ok(pbx_squeue_parse("12 running\n", 11, &j, &n, &err) < 0, "lowercase state refused");
	ok(pbx_squeue_parse("12_[9-3] PENDING\n", 17, &j, &n, &err) < 0, "inverted range refused");
	is_str(err.msg, "squeue output line 1: expected 'JOBID STATE'",
	       "squeue error names the line");
	ok(pbx_scontrol_limits_parse(conf, strlen(conf), &lim, &err) == 0 &&
		   lim.max_array_size == 1001 && lim.max_job_count == 50000,
	   "limits from scontrol");
	ok(pbx_scontrol_limits_parse("MaxJobCount = 5\n", 16, &lim, &err) < 0,
	   "missing MaxArraySize");
	is_str(pbx_slurm_task_state("COMPLETING"), "RUNNING", "COMPLETING maps to RUNNING");
	is_str(pbx_slurm_task_state("OUT_OF_MEMORY"), "OUT_OF_MEMORY", "OOM kept");
	is_str(pbx_slurm_task_state("WEIRD"), "UNKNOWN", "unknown state");
}

int main(void)
{
	test_squeue();
	test_subst();
	test_render();
	test_gpu_type();
	test_sinfo();
	test_quote();
	return tap_done();
}
