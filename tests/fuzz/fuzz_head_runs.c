/*
 * fuzz_head_runs.c - libFuzzer target for the head's node runs as the
 * user's pbx reads them (src/cluster/headruns_parse.c,
 * pbx_head_runs_parse and pbx_head_runs_fit; cluster "hr", id UID, a
 * group node of 3 nodes with min: 1): any bytes parse or fail cleanly
 * with a message and nothing returned; parsed runs are at most
 * PBX_HEAD_RUNS_MAX, of node2 or node3 only, sorted by node then start,
 * each ending after it began (or open), a node's runs disjoint with only
 * its last open; fitted, every time lies within [creation, now].
 */
#include "cluster/cluster.h"

#include "../common/headruns_fixture.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define UID     HEADRUNS_UID
#define CREATED 1000
#define NOW     2000000000

/* The template the replies are checked against (made once). */
static const struct pbx_cluster_template *template_of_test(void)
{
	static struct pbx_config *cfg;
	struct pbx_err err = PBX_ERR_INIT;
	if (!cfg && pbx_config_parse("fuzz.yaml", headruns_config_yaml,
				     strlen(headruns_config_yaml), &cfg, &err) < 0)
		abort();
	return pbx_config_template(cfg, "hr");
}

/* What parsed runs promise (else abort). */
static void check(const struct pbx_head_run *v, size_t n)
{
	size_t i;
	if (n > PBX_HEAD_RUNS_MAX)
		abort();
	for (i = 0; i < n; i++) {
		if ((strcmp(v[i].node, "node2") && strcmp(v[i].node, "node3")) ||
		    v[i].started < 1 || (v[i].ended && v[i].ended < v[i].started))
			abort();
		if (i && (strcmp(v[i - 1].node, v[i].node) > 0 ||
			  (!strcmp(v[i - 1].node, v[i].node) &&
			   (!v[i - 1].ended || v[i].started < v[i - 1].ended))))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct pbx_cluster_template *t = template_of_test();
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_head_run *v = NULL;
	size_t n = 0, i;
	if (!t)
		abort();
	if (pbx_head_runs_parse((const char *)data, size, "hr", UID, t, &v, &n, &err) < 0) {
		if (!err.msg[0] || v || n)
			abort();
		return 0;
	}
	check(v, n);
	if (pbx_head_runs_fit(v, n, CREATED, NOW, &err) == 0) {
		for (i = 0; i < n; i++)
			if (v[i].started < CREATED || v[i].started > NOW ||
			    (v[i].ended && (v[i].ended < v[i].started || v[i].ended > NOW)))
				abort();
		check(v, n);
	} else if (!err.msg[0]) {
		abort();
	}
	free(v);
	return 0;
}
