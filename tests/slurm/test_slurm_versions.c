/*
 * test_slurm_versions.c - pbx's SLURM output parsers against what SLURM
 * 20.11 to 24.11 print: for each version, tests/slurm/fixtures/VERSION/
 * holds the output of every command pbx parses (NAME.txt, written from
 * SLURM's source at that version: fixtures/README.md) and what pbx must
 * make of it (NAME.expect).  Run with the fixtures directory as argument.
 */
#include "common/tap.h"
#include "slurm/sacctmgr.h"
#include "slurm/sinfo.h"
#include "slurm/squeue.h"
#include "util/buf.h"
#include "util/fs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const versions[] = { "20.11", "21.08", "22.05", "23.02",
					"23.11", "24.05", "24.11", NULL };
static const char *dir;

/* The fixture VERSION/NAME as a NUL-terminated buffer; the test ends when
 * it cannot be read. */
static void fixture(const char *version, const char *name, struct pbx_buf *b)
{
	struct pbx_err err = PBX_ERR_INIT;
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s/%s", dir, version, name);
	pbx_buf_reset(b);
	REQUIREF(pbx_read_file(path, b, &err) == 0, "read %s: %s", path, err.msg);
	pbx_buf_addc(b, '\0');
	b->len--;
}

/* The next line of *p (without its newline) into line; 0 at the end. */
static int next_line(const char **p, char *line, size_t size)
{
	size_t l;
	if (!**p)
		return 0;
	l = strcspn(*p, "\n");
	snprintf(line, size, "%.*s", (int)l, *p);
	*p += l + ((*p)[l] == '\n');
	return 1;
}

static void check_squeue(const char *v)
{
	struct pbx_buf text = PBX_BUF_INIT, want = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_squeue_job *jobs = NULL;
	const char *p;
	char line[256];
	size_t n = 0, i = 0, bad = 0;
	fixture(v, "squeue-r.txt", &text);
	fixture(v, "squeue-r.expect", &want);
	ok(pbx_squeue_parse(text.buf, text.len, &jobs, &n, &err) == 0, "%s: squeue -r parses: %s",
	   v, err.msg);
	for (p = want.buf; next_line(&p, line, sizeof(line)); i++) {
		char id[64], state[64];
		if (sscanf(line, "%63s %63s", id, state) != 2 || i >= n ||
		    strcmp(jobs[i].job_id, id) != 0 ||
		    strcmp(pbx_slurm_task_state(jobs[i].state), state) != 0) {
			if (!bad++)
				tap_diag("%s: line %zu: want '%s', got '%s %s'", v, i + 1, line,
					 i < n ? jobs[i].job_id : "-",
					 i < n ? pbx_slurm_task_state(jobs[i].state) : "-");
		}
	}
	ok(bad == 0 && i == n, "%s: every job state maps to the pbx state expected (%zu)", v, n);
	pbx_squeue_free(jobs, n);
	pbx_buf_release(&text);
	pbx_buf_release(&want);
}

static const char *sinfo_class(const char *state)
{
	if (pbx_sinfo_state_usable(state))
		return "usable";
	return pbx_sinfo_state_resumable(state) ? "resumable" : "other";
}

static void check_sinfo(const char *v)
{
	struct pbx_buf text = PBX_BUF_INIT, want = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_sinfo_node *nodes = NULL;
	const char *p;
	char line[256];
	size_t n = 0, i = 0, bad = 0;
	fixture(v, "sinfo.txt", &text);
	fixture(v, "sinfo.expect", &want);
	ok(pbx_sinfo_parse(text.buf, text.len, &nodes, &n, &err) == 0, "%s: sinfo parses: %s", v,
	   err.msg);
	for (p = want.buf; next_line(&p, line, sizeof(line)); i++) {
		char node[64], cls[64];
		const char *state = NULL;
		if (sscanf(line, "%63s %63s", node, cls) != 2 ||
		    !(state = pbx_sinfo_state_of(nodes, n, node)) ||
		    strcmp(sinfo_class(state), cls) != 0)
			if (!bad++)
				tap_diag("%s: want '%s', got state %s (%s)", v, line,
					 state ? state : "none", state ? sinfo_class(state) : "-");
	}
	ok(bad == 0 && i == n, "%s: every node state is usable, resumable or neither as expected",
	   v);
	pbx_sinfo_free(nodes, n);
	pbx_buf_release(&text);
	pbx_buf_release(&want);
}

static void check_scontrol(const char *v)
{
	struct pbx_buf text = PBX_BUF_INIT, want = PBX_BUF_INIT;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_slurm_limits lim = { 0 };
	long a = -1, j = -1;
	int rc;
	fixture(v, "scontrol-config.txt", &text);
	fixture(v, "scontrol-config.expect", &want);
	REQUIRE(sscanf(want.buf, "%ld %ld", &a, &j) == 2);
	rc = pbx_scontrol_limits_parse(text.buf, text.len, &lim, &err);
	ok(rc == 0 && lim.max_array_size == a && lim.max_job_count == j,
	   "%s: scontrol show config: MaxArraySize %ld, MaxJobCount %ld (got %ld, %ld) %s", v, a, j,
	   lim.max_array_size, lim.max_job_count, err.msg);
	pbx_buf_release(&text);
	pbx_buf_release(&want);
}

static void check_sacctmgr(const char *v)
{
	static const char *const kinds[] = { "unknown", "none", "set" };
	struct pbx_buf text = PBX_BUF_INIT, want = PBX_BUF_INIT;
	const char *p;
	char line[256];
	fixture(v, "sacctmgr.txt", &text);
	fixture(v, "sacctmgr.expect", &want);
	for (p = want.buf; next_line(&p, line, sizeof(line));) {
		struct pbx_err err = PBX_ERR_INIT;
		struct pbx_submit_limit lim;
		char account[64], qos[64], kind[16];
		long max;
		int rc;
		REQUIRE(sscanf(line, "%63s %63s %15s %ld", account, qos, kind, &max) == 4);
		rc = pbx_sacctmgr_limit_parse(text.buf, text.len,
					      strcmp(account, "-") ? account : NULL,
					      strcmp(qos, "-") ? qos : NULL, &lim, &err);
		ok(rc == 0 && !strcmp(kinds[lim.kind], kind) && lim.max == max,
		   "%s: sacctmgr, account %s, QOS %s: %s %ld (got %s %ld, %s) %s", v, account, qos,
		   kind, max, kinds[lim.kind], lim.max, lim.source, err.msg);
	}
	pbx_buf_release(&text);
	pbx_buf_release(&want);
}

int main(int argc, char **argv)
{
	size_t i;
	if (argc != 2) {
		fprintf(stderr, "usage: %s FIXTURES_DIR\n", argv[0]);
		return 2;
	}
	dir = argv[1];
	for (i = 0; versions[i]; i++) {
		check_squeue(versions[i]);
		check_sinfo(versions[i]);
		check_scontrol(versions[i]);
		check_sacctmgr(versions[i]);
	}
	return tap_done();
}
