/*
 * test_gce_parse.c - reading Compute Engine replies: operations (DONE with
 * error codes, QUOTA_EXCEEDED first), instance list pages (addresses,
 * zone, nextPageToken, a powered-off instance's lastStopTimestamp, its
 * numeric id), Google's error shape, and which errors are retried.
 */
#include <stdlib.h>
#include <string.h>

#include "cloud/gce/gce.h"
#include "common/tap.h"
#include "util/xalloc.h"

static json_t *J(const char *s)
{
	json_t *v = json_loads(s, 0, NULL);
	if (!v)
		printf("# bad JSON in test: %s\n", s);
	return v;
}

static void test_ops(void)
{
	struct gce_op o;
	struct pbx_err err = PBX_ERR_INIT;
	json_t *v = J(
		"{\"kind\":\"compute#operation\",\"name\":\"operation-1\",\"status\":\"RUNNING\"}");
	ok(gce_op_parse(v, &o, &err) == 0 && !strcmp(o.name, "operation-1") &&
		   !strcmp(o.status, "RUNNING") && !o.error[0],
	   "running operation");
	json_decref(v);
	v = J("{\"name\":\"op-2\",\"status\":\"DONE\",\"httpErrorStatusCode\":403,\"error\":{\"errors\":["
	      "{\"code\":\"QUOTA_EXCEEDED\",\"message\":\"Quota 'NVIDIA_T4_GPUS' exceeded.  Limit: 1.0 in region us-central1.\"},"
	      "{\"code\":\"OTHER\",\"message\":\"second\"}]}}");
	ok(gce_op_parse(v, &o, &err) == 0 && !strcmp(o.error_code, "QUOTA_EXCEEDED") &&
		   strstr(o.error, "NVIDIA_T4_GPUS") && strstr(o.error, "OTHER: second"),
	   "a DONE operation's errors are read: %s", o.error);
	json_decref(v);
	v = J("{\"name\":\"op-3\",\"status\":\"DONE\",\"error\":{\"errors\":[{\"code\":"
	      "\"ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS\",\"message\":\"The zone does not have enough resources\"}]}}");
	ok(gce_op_parse(v, &o, &err) == 0 &&
		   !strncmp(o.error_code, "ZONE_RESOURCE_POOL_EXHAUSTED", 28),
	   "stockout code read");
	json_decref(v);
	v = J("{\"name\":\"op-4\",\"status\":\"DONE\",\"error\":{}}");
	ok(gce_op_parse(v, &o, &err) == 0 && o.error[0],
	   "an empty error object is still a failure");
	json_decref(v);
	v = J("{\"name\":\"op\",\"status\":\"\"}");
	ok(gce_op_parse(v, &o, &err) < 0, "an empty status is not an operation");
	json_decref(v);
	v = J("{\"status\":\"DONE\"}");
	ok(gce_op_parse(v, &o, &err) < 0, "a reply without a name is not an operation");
	json_decref(v);
	ok(gce_op_parse(NULL, &o, &err) < 0, "no reply is not an operation");
}

static void test_list(void)
{
	struct pbx_instance *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0;
	char *next = NULL;
	json_t *p1 = J(
		"{\"kind\":\"compute#instanceList\",\"items\":[{\"name\":\"c-head\",\"status\":\"RUNNING\","
		"\"zone\":\"https://x/compute/v1/projects/p/zones/us-central1-a\",\"networkInterfaces\":[{"
		"\"networkIP\":\"10.0.0.2\",\"accessConfigs\":[{\"natIP\":\"34.1.2.3\"}]}]},"
		"{\"name\":\"c-gpu1\",\"status\":\"STAGING\"}],\"nextPageToken\":\"tok2\"}");
	json_t *p2 = J(
		"{\"items\":[{\"name\":\"c-gpu2\",\"status\":\"RUNNING\",\"networkInterfaces\":[{\"networkIP\":\"10.0.0.4\"}]}]}");
	ok(gce_list_parse(p1, &v, &n, &next, &err) == 0 && n == 2 && next && !strcmp(next, "tok2"),
	   "page 1: two instances and a next page");
	ok(n == 2 && !strcmp(v[0].zone, "us-central1-a") && !strcmp(v[0].private_ip, "10.0.0.2") &&
		   !strcmp(v[0].public_ip, "34.1.2.3") && !v[1].private_ip && !v[1].public_ip,
	   "zone, private and public address read; absent ones NULL");
	free(next);
	ok(gce_list_parse(p2, &v, &n, &next, &err) == 0 && n == 3 && !next && !v[2].public_ip,
	   "page 2 appends; no nextPageToken ends the list");
	pbx_instances_free(v, n);
	json_decref(p1);
	json_decref(p2);
	v = NULL;
	n = 0;
	p1 = J("{\"items\":5}");
	ok(gce_list_parse(p1, &v, &n, &next, &err) < 0,
	   "items neither array nor object is refused");
	json_decref(p1);
	p1 = J("{\"kind\":\"compute#instanceAggregatedList\",\"items\":{"
	       "\"zones/us-central1-a\":{\"warning\":{\"code\":\"NO_RESULTS_ON_PAGE\"}},"
	       "\"zones/us-central1-b\":{\"instances\":[{\"name\":\"c-head\",\"status\":\"RUNNING\","
	       "\"networkInterfaces\":[{\"networkIP\":\"10.0.0.9\"}]}]}}}");
	ok(gce_list_parse(p1, &v, &n, &next, &err) == 0 && n == 1 &&
		   !strcmp(v[0].zone, "us-central1-b") && !strcmp(v[0].private_ip, "10.0.0.9"),
	   "an aggregated list: instances of every zone, zone from the scope");
	json_decref(p1);
	pbx_instances_free(v, n);
	v = NULL;
	n = 0;
	p1 = J("{\"items\":{\"zones/a\":[]}}");
	ok(gce_list_parse(p1, &v, &n, &next, &err) < 0,
	   "an aggregated scope that is not an object is refused");
	json_decref(p1);
	p1 = J("{}");
	ok(gce_list_parse(p1, &v, &n, &next, &err) == 0 && n == 0,
	   "an empty list has no items member");
	json_decref(p1);
	pbx_instances_free(v, n);
}

/* A list page of one instance with `status` and, when not NULL, the JSON
 * value `stamp` as its lastStopTimestamp; its stopped_at, or -1 when the
 * page is refused. */
static long long stopped_at(const char *status, const char *stamp)
{
	struct pbx_instance *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0;
	char *next = NULL;
	char *page = xasprintf("{\"items\":[{\"name\":\"c-head\",\"status\":\"%s\"%s%s}]}", status,
			       stamp ? ",\"lastStopTimestamp\":" : "", stamp ? stamp : "");
	json_t *p = J(page);
	long long at = gce_list_parse(p, &v, &n, &next, &err) == 0 && n == 1
			       ? (long long)v[0].stopped_at
			       : -1;
	pbx_instances_free(v, n);
	json_decref(p);
	free(next);
	free(page);
	return at;
}

/* A list page of one instance with `status` and the JSON members `more`
 * (",\"k\":v" pairs or ""); its started_at, or -1 when refused. */
static long long started_at(const char *status, const char *more)
{
	struct pbx_instance *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0;
	char *next = NULL;
	char *page =
		xasprintf("{\"items\":[{\"name\":\"c-node1\",\"status\":\"%s\"%s}]}", status, more);
	json_t *p = J(page);
	long long at = gce_list_parse(p, &v, &n, &next, &err) == 0 && n == 1
			       ? (long long)v[0].started_at
			       : -1;
	pbx_instances_free(v, n);
	json_decref(p);
	free(next);
	free(page);
	return at;
}

/* A RUNNING instance's last start (where the laptop's spend of a node
 * the head woke begins): lastStartTimestamp, else creationTimestamp;
 * 0 when neither reads or it is not RUNNING. */
static void test_start_times(void)
{
	ok(started_at("RUNNING", ",\"creationTimestamp\":\"2026-11-26T10:00:00.000-08:00\","
				 "\"lastStartTimestamp\":\"2026-11-26T18:30:00Z\"") == 1795717800,
	   "RUNNING: lastStartTimestamp");
	ok(started_at("RUNNING", ",\"creationTimestamp\":\"2026-11-26T02:00:00.000-08:00\"") ==
		   1795687200,
	   "RUNNING, never stopped: creationTimestamp, offset applied");
	ok(started_at("RUNNING", ",\"lastStartTimestamp\":\"yesterday\","
				 "\"creationTimestamp\":\"2026-11-26T10:00:00Z\"") == 1795687200,
	   "a lastStartTimestamp that does not read: creationTimestamp");
	ok(started_at("RUNNING", ",\"creationTimestamp\":12") == 0, "a stamp that is no string: 0");
	ok(started_at("RUNNING", "") == 0, "no stamp: 0");
	ok(started_at("TERMINATED", ",\"lastStartTimestamp\":\"2026-11-26T10:00:00Z\"") == 0,
	   "not RUNNING: 0");
}

/* A list page of one RUNNING instance whose "id" member is the JSON value
 * `id` (none when NULL): 1 when its uid reads as `want` (NULL: none), 0
 * when not, -1 when the page is refused. */
static int uid_is(const char *id, const char *want)
{
	struct pbx_instance *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0;
	char *next = NULL;
	char *page = xasprintf("{\"items\":[{\"name\":\"c-node1\",\"status\":\"RUNNING\"%s%s}]}",
			       id ? ",\"id\":" : "", id ? id : "");
	json_t *p = J(page);
	int r = gce_list_parse(p, &v, &n, &next, &err) == 0 && n == 1 ? 0 : -1;
	if (r == 0)
		r = want ? (v[0].uid && !strcmp(v[0].uid, want)) : !v[0].uid;
	pbx_instances_free(v, n);
	json_decref(p);
	free(next);
	free(page);
	return r;
}

/* An instance's numeric id, which Compute Engine gives no other instance
 * (where the laptop keeps a woken node's host-key pins): a uint64 as a
 * string of decimal digits; anything else is no uid, and never fails the
 * list. */
static void test_uids(void)
{
	static const char *const bad[] = {
		"\"\"",
		"\"12a4\"",
		"\"-12\"",
		"\"+12\"",
		"\" 12\"",
		"\"12 \"",
		"\"0x1f\"",
		"\"1.5\"",
		"\"1e9\"",
		"\"0123\"",
		"\"0\"",
		"\"18446744073709551616\"",
		"\"99999999999999999999\"",
		"\"123456789012345678901\"",
		"\"c-node1\"",
		"1234",
		"null",
		"true",
		"[\"12\"]",
		"{\"id\":\"12\"}",
	};
	size_t i;
	ok(uid_is("\"4616337213435693569\"", "4616337213435693569") == 1,
	   "a string of digits is the uid");
	ok(uid_is("\"1\"", "1") == 1, "one digit");
	ok(uid_is("\"18446744073709551615\"", "18446744073709551615") == 1, "the largest uint64");
	ok(uid_is(NULL, NULL) == 1, "no id: no uid");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(uid_is(bad[i], NULL) == 1, "id %s: no uid, the list still reads", bad[i]);
}

/* lastStopTimestamp of a powered-off instance, offset applied, in unix
 * seconds (2026-11-26T13:43:21Z = 1795700601); a running instance's, an
 * absent or a malformed one is 0 and never fails the list. */
static void test_stop_times(void)
{
	static const char *const bad[] = {
		"\"2026-11-26 13:43:21Z\"",
		"\"2026-11-26T13:43:21\"",
		"\"2026-11-26T13:43:21.Z\"",
		"\"2026-11-26T13:43:21+0800\"",
		"\"2026-11-26T13:43:21+08\"",
		"\"2026-11-26T13:43:21Z \"",
		"\"2026-11-26T13:43:21-08:00x\"",
		"\"2026-13-26T13:43:21Z\"",
		"\"2026-11-31T13:43:21Z\"",
		"\"2026-02-29T00:00:00Z\"",
		"\"2026-11-26T24:00:00Z\"",
		"\"2026-11-26T13:60:00Z\"",
		"\"2026-11-26T13:43:21+24:00\"",
		"\"2026-11-26T13:43:21+08:60\"",
		"\"+2026-11-26T13:43:21Z\"",
		"\"2026-1-26T13:43:21Z\"",
		"\"1969-12-31T23:59:59Z\"",
		"\"1970-01-01T00:00:00Z\"",
		"\"yesterday\"",
		"\"\"",
		"1795700601",
		"null",
		"{}",
	};
	size_t i;
	ok(stopped_at("TERMINATED", "\"2026-11-26T05:43:21.123-08:00\"") == 1795700601,
	   "TERMINATED: lastStopTimestamp with a -08:00 offset and milliseconds");
	ok(stopped_at("TERMINATED", "\"2026-11-26T13:43:21Z\"") == 1795700601,
	   "TERMINATED: lastStopTimestamp in UTC (Z)");
	ok(stopped_at("SUSPENDED", "\"2026-11-26T19:13:21.5+05:30\"") == 1795700601,
	   "SUSPENDED: a +05:30 offset");
	ok(stopped_at("STOPPING", "\"2024-02-29T00:00:00.000000z\"") == 1709164800,
	   "STOPPING: a leap day, microseconds, lowercase z");
	ok(stopped_at("RUNNING", "\"2026-11-26T05:43:21.123-08:00\"") == 0,
	   "RUNNING: an earlier stop's lastStopTimestamp is not read (0)");
	ok(stopped_at("TERMINATED", NULL) == 0, "TERMINATED without lastStopTimestamp: 0");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(stopped_at("TERMINATED", bad[i]) == 0,
		   "malformed lastStopTimestamp %s: 0, listed", bad[i]);
}

/* Addresses that are not IP addresses (they reach slurm.conf and ssh) are
 * refused, naming the instance; the instance is still listed. */
static void test_bad_addresses(void)
{
	static const char *const bad[] = {
		"10.0.0.1\\nNodeName=evil",
		"1.2.3.4 -o ProxyCommand=touch\\u0020/tmp/x",
		"-oProxyCommand=x",
		"10.0.0",
		"10.0.0.1/24",
		"host.example",
		"",
		"10.0.0.1 ",
		"010.0.0.1x",
		"::1 x",
	};
	static const char *const fields[] = { "networkIP", "natIP" };
	size_t i, f;
	for (f = 0; f < 2; f++)
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			struct pbx_instance *v = NULL;
			struct pbx_err err = PBX_ERR_INIT;
			size_t n = 0;
			char *next = NULL;
			char *text =
				f == 0 ? xasprintf(
						 "{\"items\":[{\"name\":\"c-gpu7\",\"status\":\"RUNNING\","
						 "\"networkInterfaces\":[{\"networkIP\":\"%s\"}]}]}",
						 bad[i])
				       : xasprintf(
						 "{\"items\":[{\"name\":\"c-gpu7\",\"status\":\"RUNNING\","
						 "\"networkInterfaces\":[{\"networkIP\":\"10.0.0.3\","
						 "\"accessConfigs\":[{\"natIP\":\"%s\"}]}]}]}",
						 bad[i]);
			json_t *p = J(text);
			ok(p && gce_list_parse(p, &v, &n, &next, &err) < 0 &&
				   strstr(err.msg, "instance c-gpu7 has a ") &&
				   strstr(err.msg, fields[f]) &&
				   strstr(err.msg, "not an IP address") && n == 1 &&
				   !v[0].private_ip == !f,
			   "%s '%s' refused: %s", fields[f], bad[i], err.msg);
			pbx_instances_free(v, n);
			json_decref(p);
			free(text);
		}
	{
		json_t *p = J(
			"{\"items\":[{\"name\":\"c\",\"status\":\"RUNNING\",\"networkInterfaces\":"
			"[{\"networkIP\":\"fd00::5\",\"accessConfigs\":[{\"natIP\":null}]}]}]}");
		struct pbx_instance *v = NULL;
		struct pbx_err err = PBX_ERR_INIT;
		size_t n = 0;
		char *next = NULL;
		ok(gce_list_parse(p, &v, &n, &next, &err) == 0 && n == 1 &&
			   !strcmp(v[0].private_ip, "fd00::5") && !v[0].public_ip,
		   "an IPv6 address and a null natIP are fine: %s", err.msg);
		pbx_instances_free(v, n);
		json_decref(p);
	}
}

static void test_errors(void)
{
	char msg[256];
	const char *rl =
		"{\"error\":{\"code\":403,\"message\":\"Rate Limit Exceeded\",\"errors\":[{\"message\":"
		"\"Rate Limit Exceeded\",\"domain\":\"usageLimits\",\"reason\":\"rateLimitExceeded\"}]}}";
	const char *q =
		"{\"error\":{\"code\":403,\"message\":\"Quota exceeded\",\"errors\":[{\"reason\":\"quotaExceeded\"}]}}";
	const char *ex =
		"{\"error\":{\"code\":409,\"message\":\"The resource 'projects/p/zones/z/instances/x' already exists\","
		"\"errors\":[{\"reason\":\"alreadyExists\"}]}}";
	ok(gce_error_text(ex, strlen(ex), msg, sizeof(msg)) == 0 &&
		   !strcmp(msg,
			   "The resource 'projects/p/zones/z/instances/x' already exists (alreadyExists)"),
	   "error text: message (reason): %s", msg);
	ok(gce_error_text("<html>", 6, msg, sizeof(msg)) < 0, "no Google error in HTML");
	ok(gce_retryable(403, rl, strlen(rl), NULL), "403 rateLimitExceeded is retried");
	ok(!gce_retryable(403, q, strlen(q), NULL), "403 quotaExceeded is not");
	ok(gce_retryable(429, "", 0, NULL) && gce_retryable(503, "", 0, NULL), "429 and 503 are");
	ok(!gce_retryable(409, ex, strlen(ex), NULL), "409 alreadyExists is not");
}

/* Against an API on loopback (an emulator) only loopback addresses may be
 * connected to; against Google any.  The addresses here are data only. */
static void test_loopback_guard(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	const char *emu = "http://127.0.0.1:8089/compute/v1/",
		   *google = "https://compute.googleapis.com/compute/v1/";
	ok(pbx_cloud_address_allowed(emu, "c-head", "127.0.70.2", &err) == 0,
	   "emulator: loopback address allowed");
	ok(pbx_cloud_address_allowed(emu, "c-head", NULL, &err) == 0,
	   "emulator: no address, nothing to refuse");
	ok(pbx_cloud_address_allowed(emu, "c-head", "10.0.0.2", &err) < 0 &&
		   strstr(err.msg, "10.0.0.2") && strstr(err.msg, "c-head"),
	   "emulator: a private address is refused: %s", err.msg);
	pbx_err_clear(&err);
	ok(pbx_cloud_address_allowed("http://localhost:9/compute/v1/", "c-gpu1", "34.1.2.3", &err) <
		   0,
	   "emulator on localhost: a public address is refused");
	pbx_err_clear(&err);
	ok(pbx_cloud_address_allowed(google, "c-head", "34.1.2.3", &err) == 0,
	   "Google: any address");
}

/* What pbx dials: a public address; through the head, nothing; else the
 * private one.  A compute node waits until the head runs. */
static void test_dial_guard(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	const char *emu = "http://127.0.0.1:8089/compute/v1/";
	struct pbx_node_row nodes[2];
	memset(nodes, 0, sizeof(nodes));
	nodes[0].state = "creating";
	ok(pbx_cloud_dial_allowed(emu, nodes, 0, "c-head", "10.128.0.2", "127.0.71.2", &err) == 0,
	   "a head with a loopback public address: allowed (its private one is never dialed)");
	ok(pbx_cloud_dial_allowed(emu, nodes, 0, "c-head", "10.128.0.2", "10.1.1.1", &err) < 0 &&
		   strstr(err.msg, "10.1.1.1"),
	   "a head with a non-loopback public address: refused");
	pbx_err_clear(&err);
	ok(pbx_cloud_dial_allowed(emu, nodes, 1, "c-gpu1", "10.128.0.3", NULL, &err) == 1,
	   "a private-only compute node before the head runs: cannot tell yet");
	nodes[0].state = "running";
	nodes[0].public_address = "127.0.71.2";
	ok(pbx_cloud_dial_allowed(emu, nodes, 1, "c-gpu1", "10.128.0.3", NULL, &err) == 0,
	   "behind a head with a public address: allowed (the head dials it)");
	nodes[0].public_address = NULL;
	ok(pbx_cloud_dial_allowed(emu, nodes, 1, "c-gpu1", "10.128.0.3", NULL, &err) < 0 &&
		   strstr(err.msg, "10.128.0.3"),
	   "the head has no public address: pbx would dial it, refused");
	pbx_err_clear(&err);
	ok(pbx_cloud_dial_allowed(emu, nodes, 1, "c-gpu1", "127.0.70.3", NULL, &err) == 0,
	   "a loopback private address: allowed");
}

/* The laptop's view keeps a listed instance's private address and says
 * whether pbx may dial it itself; behind a head with a public address
 * (an emulator's booted VMs) pbx uses it through the head. */
static void test_view_addresses(void)
{
	const char *emu = "http://127.0.0.1:8089/compute/v1/";
	struct pbx_instance *v = NULL;
	struct pbx_node_row head;
	size_t n = 0;
	memset(&head, 0, sizeof(head));
	pbx_instances_add(&v, &n, "c-cpu1", "z", "RUNNING", "c", 0);
	pbx_instances_set_addresses(&v[0], emu, "10.128.0.3", NULL);
	ok(v[0].private_ip && !strcmp(v[0].private_ip, "10.128.0.3") && !v[0].private_direct,
	   "emulator: a VM's private address is kept, not to be dialed directly");
	ok(!pbx_instance_private_usable(&v[0], &head), "no head address: not usable");
	head.public_address = "127.0.137.2";
	ok(pbx_instance_private_usable(&v[0], &head),
	   "behind a head with a public address: usable");
	pbx_instances_set_addresses(&v[0], emu, "10.128.0.3", "10.9.9.9");
	ok(!v[0].public_ip && pbx_instance_private_usable(&v[0], &head),
	   "a non-loopback public address is left out (then reached through the head)");
	pbx_instances_set_addresses(&v[0], emu, "127.0.70.3", NULL);
	ok(v[0].private_direct && pbx_instance_private_usable(&v[0], NULL),
	   "a loopback private address: dialed directly");
	pbx_instances_set_addresses(&v[0], emu, "10.128.0.3", "127.0.137.5");
	ok(!pbx_instance_private_usable(&v[0], &head),
	   "with a public address of its own: its private one is not used");
	pbx_instances_free(v, n);
}

int main(void)
{
	test_loopback_guard();
	test_dial_guard();
	test_view_addresses();
	test_ops();
	test_list();
	test_stop_times();
	test_start_times();
	test_uids();
	test_bad_addresses();
	test_errors();
	return tap_done();
}
