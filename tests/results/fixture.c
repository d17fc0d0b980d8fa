/*
 * fixture.c - builds the results tests' store (see fixture.h).  Task i
 * has lr = {0.1, 0.03, 0.01}[i / 4], width = {16, 32}[(i / 2) % 2],
 * repeat = i % 2; metrics at steps 0, 10, 20:
 *   loss  1, 0.6 + 0.01 i, 0.3 + 0.02 i + 0.02 repeat (task 5: 0.9)
 *   acc   0.5, 0.7 + 0.01 i, 0.8 + 0.01 i            (task 5: 0.6)
 * acc at step 20 in the long form.  Task 0's file carries malformed lines,
 * a NaN, an extra step 5 and 15 and a partial last line; task 11 FAILED
 * after step 10; task 10 is RUNNING (no end time).
 */
#include "fixture.h"

#include "results/metrics.h"
#include "store/experiments.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const lrs[] = { "0.1", "0.03", "0.01" };
static const char *const widths[] = { "16", "32" };

static const char task0_text[] = "{\"step\": 0, \"loss\": 1, \"acc\": 0.5}\n"
				 "not json\n"
				 "{\"step\": 5, \"loss\": \"high\", \"acc\": 0.55}\n"
				 "[1, 2]\n"
				 "{\"loss\": 0.7}\n"
				 "{\"step\": -1, \"loss\": 0.7}\n"
				 "\n"
				 "{\"step\": 10, \"loss\": 0.6, \"acc\": 0.7}\n"
				 "{\"step\": 15, \"loss\": NaN, \"acc\": 0.75}\n"
				 "{\"step\": 20, \"loss\": 0.3}\n"
				 "{\"step\": 20, \"name\": \"acc\", \"value\": 0.8}\n"
				 "{\"step\": 30, \"loss\": 0.1";

char *fixture_metrics_text(int i)
{
	struct pbx_buf b = PBX_BUF_INIT;
	int rep = i % 2;
	if (i == 0)
		return xstrdup(task0_text);
	pbx_buf_addf(&b, "{\"step\": 0, \"loss\": 1, \"acc\": 0.5}\n");
	pbx_buf_addf(&b, "{\"step\": 10, \"loss\": 0.%03d, \"acc\": 0.%03d}\n", 600 + 10 * i,
		     700 + 10 * i);
	if (i == 11)
		return pbx_buf_detach(&b, NULL);
	if (i == 5)
		pbx_buf_addf(&b, "{\"step\": 20, \"loss\": 0.9}\n");
	else
		pbx_buf_addf(&b, "{\"step\": 20, \"loss\": 0.%03d}\n", 300 + 20 * i + 20 * rep);
	pbx_buf_addf(&b, "{\"step\": 20, \"name\": \"acc\", \"value\": 0.%03d}\n",
		     i == 5 ? 600 : 800 + 10 * i);
	return pbx_buf_detach(&b, NULL);
}

static int fx_fail(struct pbx_err *err)
{
	printf("# fixture: %s\n", err->msg);
	return -1;
}

static int fx_package(struct fixture *fx, struct pbx_err *err)
{
	struct pbx_package_row p = { 0 };
	struct pbx_submission_row s = { 0 };
	char *params[FIX_NTASKS];
	int64_t cluster;
	int i, rc;
	p.id = FIX_PACKAGE;
	p.short_id = "0123456789ab";
	p.name = "sweep-demo";
	p.experiment_path = "/src/sweep-demo/experiment.yaml";
	p.experiment_text = "name: sweep-demo\n";
	p.user = "test";
	p.host = "localhost";
	p.ntasks = FIX_NTASKS;
	p.created = 1700000000;
	if (pbx_store_cluster_create(fx->st, "local", "0123456789abcdef0123456789abcdef", "local",
				     "{}", 0, &cluster, err) < 0 ||
	    pbx_store_package_put(fx->st, &p, err) < 0)
		return -1;
	for (i = 0; i < FIX_NTASKS; i++)
		params[i] = xasprintf("{\"lr\":\"%s\",\"width\":\"%s\",\"repeat\":\"%d\"}",
				      lrs[i / 4], widths[(i / 2) % 2], i % 2);
	s.package_id = FIX_PACKAGE;
	s.cluster_id = cluster;
	s.remote_dir = "pbx/0123456789ab";
	s.resources_json = "{}";
	s.state = "submitted";
	rc = pbx_store_begin(fx->st, err);
	if (rc == 0)
		rc = pbx_store_submission_create(fx->st, &s, (const char *const *)params,
						 FIX_NTASKS, &fx->submission, err);
	if (rc == 0)
		rc = pbx_store_commit(fx->st, err);
	else
		pbx_store_rollback(fx->st);
	for (i = 0; i < FIX_NTASKS; i++)
		free(params[i]);
	return rc;
}

static int fx_states(struct fixture *fx, struct pbx_err *err)
{
	struct pbx_task_row rows[FIX_NTASKS];
	int i, rc;
	memset(rows, 0, sizeof(rows));
	for (i = 0; i < FIX_NTASKS; i++) {
		rows[i].idx = i;
		rows[i].state = i == 10 ? "RUNNING" : i == 11 ? "FAILED" : "COMPLETED";
		rows[i].exit_code = i == 11 ? 1 : i == 10 ? -1 : 0;
		rows[i].node = "node0";
		rows[i].attempt = 1;
		rows[i].start_time = 1700000000 + i;
		rows[i].end_time = i == 10 ? 0 : rows[i].start_time + 60 + 5 * i;
		rows[i].job_id = "42";
	}
	if (pbx_store_begin(fx->st, err) < 0)
		return -1;
	rc = pbx_store_tasks_update(fx->st, fx->submission, rows, FIX_NTASKS, err);
	if (rc == 0)
		return pbx_store_commit(fx->st, err);
	pbx_store_rollback(fx->st);
	return -1;
}

static int fx_ingest(struct fixture *fx, struct pbx_err *err)
{
	char path[512];
	int i;
	snprintf(path, sizeof(path), "%s/metrics", fx->dir);
	if (pbx_mkdir_p(path, 0700, err) < 0)
		return -1;
	for (i = 0; i < FIX_NTASKS; i++) {
		char *text = fixture_metrics_text(i);
		snprintf(path, sizeof(path), "%s/metrics/%d.jsonl", fx->dir, i);
		if (pbx_write_file_atomic(path, text, strlen(text), 0600, err) < 0 ||
		    pbx_results_ingest(fx->st, fx->submission, i, path, &fx->added[i],
				       &fx->warnings, err) < 0) {
			free(text);
			return -1;
		}
		free(text);
	}
	return 0;
}

int fixture_make(struct fixture *fx, const char *dir)
{
	struct pbx_err err = PBX_ERR_INIT;
	char path[512];
	memset(fx, 0, sizeof(*fx));
	pbx_buf_init(&fx->warnings, 0);
	snprintf(fx->dir, sizeof(fx->dir), "%s", dir);
	snprintf(path, sizeof(path), "%s/pbx.db", dir);
	if (pbx_store_open(path, &fx->st, &err) < 0 || fx_package(fx, &err) < 0 ||
	    fx_states(fx, &err) < 0 || fx_ingest(fx, &err) < 0)
		return fx_fail(&err);
	return 0;
}

void fixture_free(struct fixture *fx)
{
	if (fx->st)
		pbx_store_close(fx->st);
	pbx_buf_release(&fx->warnings);
}
