/*
 * headruns_fixture.h - the cluster that the head's runs replies are read
 * against in tests/cluster/test_headruns.c and the fuzz target
 * tests/fuzz/fuzz_head_runs.c: cluster "hr" (id HEADRUNS_UID), a gce
 * template whose group `node` has 3 nodes with min: 1 (node2 and node3
 * may sleep), with hourly prices for its two machine types.
 */
#ifndef PBX_TESTS_HEADRUNS_FIXTURE_H
#define PBX_TESTS_HEADRUNS_FIXTURE_H

#define HEADRUNS_UID "0123456789abcdef0123456789abcdef"

static const char headruns_config_yaml[] =
	"clusters:\n"
	"  hr:\n"
	"    cloud: gce\n"
	"    login_user: pbx\n"
	"    image: projects/debian-cloud/global/images/family/debian-12\n"
	"    head: { service_account: pbx-e2e@pbx-test.iam.gserviceaccount.com }\n"
	"    node_groups:\n"
	"      - { name: node, count: 3, min: 1, machine_type: e2-standard-2 }\n"
	"clouds:\n"
	"  gce: { project: pbx-test, zone: us-central1-a }\n"
	"prices:\n"
	"  hourly: { e2-standard-4: 3600, e2-standard-2: 7200 }\n";

#endif
