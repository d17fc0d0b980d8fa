/*
 * test_aws_parse.c - reading EC2 replies (libxml2): the error envelope as
 * AWS sends it (no namespace) and as moto does (a namespace, or
 * <ErrorResponse>), instance lists with nextToken, terminate replies, a
 * stopped instance's stop time from its reason (GMT, moto's UTC), the
 * node an instance's pbx-node tag names or its launch's tags and launch
 * index name (launch.c, both ways, hostile tags refused), and
 * which errors are retried (throttling, 5xx) and which never are
 * (capacity, quota, even as HTTP 500), and DescribeImages replies (state,
 * the pbx-image-id tag, the snapshots behind an AMI).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cloud/aws/aws.h"
#include "common/tap.h"
#include "util/xalloc.h"

#define ERR(code)                                                                    \
	"<Response><Errors><Error><Code>" code "</Code><Message>m</Message></Error>" \
	"</Errors><RequestID>r</RequestID></Response>"

static void test_errors(void)
{
	char code[64], msg[256];
	const char *aws = ERR("InvalidAMIID.NotFound");
	const char *moto =
		"<ErrorResponse><Errors><Error><Code>AuthFailure</Code><Message>AWS was not "
		"able to validate the provided access credentials</Message><Type>Sender</Type>"
		"</Error></Errors></ErrorResponse>";
	const char *ns =
		"<?xml version=\"1.0\"?><Response xmlns=\"http://ec2.amazonaws.com/doc/"
		"2016-11-15/\"><Errors><Error><Code>RequestLimitExceeded</Code><Message>slow"
		"</Message></Error></Errors></Response>";
	ok(aws_error_parse(aws, strlen(aws), code, sizeof(code), msg, sizeof(msg)) == 0 &&
		   !strcmp(code, "InvalidAMIID.NotFound") && !strcmp(msg, "m"),
	   "AWS's error envelope");
	ok(aws_error_parse(moto, strlen(moto), code, sizeof(code), msg, sizeof(msg)) == 0 &&
		   !strcmp(code, "AuthFailure"),
	   "moto's 401 envelope");
	ok(aws_error_parse(ns, strlen(ns), code, sizeof(code), msg, sizeof(msg)) == 0 &&
		   !strcmp(code, "RequestLimitExceeded") && !strcmp(msg, "slow"),
	   "with a namespace");
	ok(aws_error_parse("<html>503</html>", 16, code, sizeof(code), msg, sizeof(msg)) < 0,
	   "not an EC2 error");
	ok(aws_error_parse("", 0, code, sizeof(code), msg, sizeof(msg)) < 0, "empty");
	ok(aws_retryable(503, ns, strlen(ns), NULL) == 1, "RequestLimitExceeded is retried");
	ok(aws_retryable(400, ERR("Throttling"), strlen(ERR("Throttling")), NULL) == 1,
	   "Throttling (400) is retried");
	ok(aws_retryable(500, ERR("InsufficientInstanceCapacity"),
			 strlen(ERR("InsufficientInstanceCapacity")), NULL) == 0,
	   "InsufficientInstanceCapacity (500) is never retried");
	ok(aws_retryable(400, ERR("VcpuLimitExceeded"), strlen(ERR("VcpuLimitExceeded")), NULL) ==
		   0,
	   "VcpuLimitExceeded is not retried");
	ok(aws_retryable(502, "<html/>", 7, NULL) == 1, "a 502 without an envelope is retried");
	ok(aws_retryable(401, moto, strlen(moto), NULL) == 0, "AuthFailure is not retried");
}

static void test_instances(void)
{
	const char *page =
		"<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
		"<requestId>r</requestId><reservationSet><item><reservationId>r-1</reservationId>"
		"<instancesSet><item><instanceId>i-1</instanceId><instanceState><code>16</code>"
		"<name>running</name></instanceState><privateIpAddress>10.0.0.4</privateIpAddress>"
		"<ipAddress>54.0.0.1</ipAddress><subnetId>subnet-a</subnetId></item></instancesSet></item>"
		"<item><instancesSet><item><instanceId>i-2</instanceId><instanceState><code>48</code>"
		"<name>terminated</name></instanceState><stateReason><code>Server.SpotInstanceTermination"
		"</code><message>Spot capacity reclaimed</message></stateReason></item></instancesSet>"
		"</item></reservationSet><nextToken>tok+/=</nextToken></DescribeInstancesResponse>";
	const char *term =
		"<TerminateInstancesResponse><instancesSet><item><instanceId>i-3</instanceId>"
		"<currentState><code>32</code><name>shutting-down</name></currentState><previousState>"
		"<code>16</code><name>running</name></previousState></item></instancesSet>"
		"</TerminateInstancesResponse>";
	struct pbx_instance *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0;
	char *next = NULL;
	ok(aws_insts_parse(page, strlen(page), &v, &n, &next, &err) == 0 && n == 2 &&
		   !strcmp(v[0].id, "i-1") && !strcmp(v[0].state, "running") &&
		   !strcmp(v[0].private_ip, "10.0.0.4") && !strcmp(v[0].public_ip, "54.0.0.1") &&
		   !strcmp(v[0].subnet, "subnet-a") && !strcmp(v[1].state, "terminated") &&
		   !v[1].private_ip && v[1].reason &&
		   !strcmp(v[1].reason, "Spot capacity reclaimed"),
	   "a DescribeInstances page: ids, states, addresses, subnet, state reason");
	ok(next && !strcmp(next, "tok+/="), "its nextToken");
	free(next);
	ok(aws_insts_parse(term, strlen(term), &v, &n, &next, &err) == 0 && n == 3 &&
		   !strcmp(v[2].id, "i-3") && !strcmp(v[2].state, "shutting-down") && !next,
	   "a TerminateInstances reply appends currentState");
	pbx_instances_free(v, n);
	v = NULL;
	n = 0;
	ok(aws_insts_parse(ERR("X"), strlen(ERR("X")), &v, &n, &next, &err) < 0 && n == 0,
	   "an error envelope is not an instance list");
	ok(aws_insts_parse("<a", 2, &v, &n, &next, &err) < 0, "broken XML");
}

/* An instance's pbx-node tag (poll.c tags each instance with its node's
 * name) is read when it has a node name's shape, else left out; the
 * cluster id tag beside it, and an instance without either. */
static void test_node_tags(void)
{
	const char *page =
		"<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
		"<reservationSet><item><instancesSet>"
		"<item><instanceId>i-1</instanceId><instanceState><name>running</name></instanceState>"
		"<tagSet><item><key>pbx-cluster-id</key><value>abc</value></item><item><key>pbx-node"
		"</key><value>node1</value></item></tagSet></item>"
		"<item><instanceId>i-2</instanceId><instanceState><name>running</name></instanceState>"
		"<tagSet><item><key>pbx-node</key><value>Node 2; rm</value></item></tagSet></item>"
		"<item><instanceId>i-3</instanceId><instanceState><name>pending</name></instanceState>"
		"<tagSet><item><key>pbx-node</key><value></value></item></tagSet></item>"
		"<item><instanceId>i-4</instanceId><instanceState><name>running</name></instanceState>"
		"</item></instancesSet></item></reservationSet></DescribeInstancesResponse>";
	struct pbx_instance *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0;
	char *next = NULL;
	ok(aws_insts_parse(page, strlen(page), &v, &n, &next, &err) == 0 && n == 4,
	   "instances with node tags parse");
	ok(n == 4 && v[0].node && !strcmp(v[0].node, "node1") && v[0].cluster &&
		   !strcmp(v[0].cluster, "abc"),
	   "the pbx-node tag names the instance's node, beside its cluster id");
	ok(n == 4 && !v[1].node && !v[2].node,
	   "a node tag that is no node name (or empty) is left out");
	ok(n == 4 && !v[3].node, "an instance without the tag has no node");
	pbx_instances_free(v, n);
	free(next);
}

/* A DescribeInstances page of one instance in `state` with, when not
 * NULL, `reason` (DescribeInstances' <reason>: StateTransitionReason); its
 * stopped_at, or -1 when the page is refused. */
static long long stopped_at(const char *state, const char *reason)
{
	char *xml = xasprintf(
		"<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/"
		"2016-11-15/\"><reservationSet><item><instancesSet><item><instanceId>i-1</instanceId>"
		"<instanceState><code>80</code><name>%s</name></instanceState>%s%s%s<stateReason><code>"
		"Client.UserInitiatedShutdown</code><message>Client.UserInitiatedShutdown: User "
		"initiated shutdown (2020-01-01 00:00:00 GMT)</message></stateReason></item>"
		"</instancesSet></item></reservationSet></DescribeInstancesResponse>",
		state, reason ? "<reason>" : "", reason ? reason : "", reason ? "</reason>" : "");
	struct pbx_instance *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0;
	char *next = NULL;
	long long at = aws_insts_parse(xml, strlen(xml), &v, &n, &next, &err) == 0 && n == 1
			       ? (long long)v[0].stopped_at
			       : -1;
	pbx_instances_free(v, n);
	free(next);
	free(xml);
	return at;
}

/* A DescribeInstances page of one instance in `state` launched at
 * `launch` (the <launchTime> element left out when NULL); its
 * started_at, or -1 when the page is refused. */
static long long started_at(const char *state, const char *launch)
{
	char *xml = xasprintf(
		"<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/"
		"2016-11-15/\"><reservationSet><item><instancesSet><item><instanceId>i-1</instanceId>"
		"<instanceState><code>16</code><name>%s</name></instanceState>%s%s%s</item>"
		"</instancesSet></item></reservationSet></DescribeInstancesResponse>",
		state, launch ? "<launchTime>" : "", launch ? launch : "",
		launch ? "</launchTime>" : "");
	struct pbx_instance *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0;
	char *next = NULL;
	long long at = aws_insts_parse(xml, strlen(xml), &v, &n, &next, &err) == 0 && n == 1
			       ? (long long)v[0].started_at
			       : -1;
	pbx_instances_free(v, n);
	free(next);
	free(xml);
	return at;
}

/* A running instance's launchTime (its last start, where the laptop's
 * spend of a node the head woke begins), as EC2 writes it (milliseconds)
 * and without; 0 when it does not read or the instance is not running. */
static void test_start_times(void)
{
	ok(started_at("running", "2026-11-26T10:00:00.000Z") == 1795687200,
	   "running: launchTime, milliseconds as EC2 writes them");
	ok(started_at("running", "2026-11-26T10:00:00+00:00") == 1795687200,
	   "running: launchTime with an offset");
	ok(started_at("running", "2026-11-26 10:00:00") == 0, "a launchTime that does not read: 0");
	ok(started_at("running", NULL) == 0, "no launchTime: 0");
	ok(started_at("stopped", "2026-11-26T10:00:00.000Z") == 0, "not running: 0");
}

/* A stopped or stopping instance's reason carries when it stopped
 * (2026-11-26 10:00:00 UTC = 1795687200); GMT as EC2 writes it, UTC as
 * moto does.  A running instance's, or a reason without such a time, is 0;
 * the stateReason message is never read for it. */
static void test_stop_times(void)
{
	static const char *const bad[] = {
		"",
		"User initiated",
		"User initiated ()",
		"User initiated (2026-11-26 10:00:00)",
		"User initiated (2026-11-26 10:00:00 PST)",
		"User initiated (2026-11-26T10:00:00 GMT)",
		"User initiated (2026-11-26 10:00:00 GMT",
		"User initiated (2026-11-26 10:00 GMT)",
		"User initiated (2026-13-26 10:00:00 GMT)",
		"User initiated (2026-02-29 10:00:00 GMT)",
		"User initiated (2026-11-26 24:00:00 GMT)",
		"User initiated (2026-11-26 1a:00:00 GMT)",
		"User initiated (1969-12-31 23:59:59 GMT)",
		"Server.ScheduledStop",
	};
	size_t i;
	ok(stopped_at("stopped", "User initiated (2026-11-26 10:00:00 GMT)") == 1795687200,
	   "stopped: the time of its reason (GMT, as EC2 writes it)");
	ok(stopped_at("stopped", "User initiated (2026-11-26 10:00:00 UTC)") == 1795687200,
	   "stopped: the time of its reason (UTC, as moto writes it)");
	ok(stopped_at("stopping", "User initiated (2026-11-26 10:00:00 GMT)") == 1795687200,
	   "stopping: the time of its reason");
	ok(stopped_at("stopped", "(x) User initiated (2024-02-29 23:59:59 GMT) again") ==
		   1709251199,
	   "the first well-formed time in the reason, a leap day");
	ok(stopped_at("running", "User initiated (2026-11-26 10:00:00 GMT)") == 0,
	   "running: an earlier stop's reason is not read (0)");
	ok(stopped_at("terminated", "User initiated (2026-11-26 10:00:00 GMT)") == 0,
	   "terminated: not a powered-off instance (0)");
	ok(stopped_at("stopped", NULL) == 0,
	   "stopped without a reason: 0 (not the stateReason's time)");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(stopped_at("stopped", bad[i]) == 0, "a reason without a time ('%s'): 0, listed",
		   bad[i]);
}

/* Addresses that are not IP addresses (they reach slurm.conf and ssh) are
 * refused, naming the instance; every instance is still listed (a
 * RunInstances reply's instances must be terminated on failure). */
static void test_bad_addresses(void)
{
	static const char *const bad[] = {
		"10.0.0.1\nNodeName=evil",
		"1.2.3.4 -o ProxyCommand=touch /tmp/x",
		"-oProxyCommand=x",
		"10.0.0",
		"10.0.0.1/24",
		"host.example",
		"10.0.0.1 ",
		"&lt;x&gt;",
		"1.2.3.4&#10;x",
	};
	static const char *const fields[] = { "privateIpAddress", "ipAddress" };
	size_t i, f;
	for (f = 0; f < 2; f++)
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char *xml = xasprintf(
				"<RunInstancesResponse><instancesSet><item>"
				"<instanceId>i-0bad</instanceId><instanceState><name>pending</name>"
				"</instanceState><%s>%s</%s></item><item><instanceId>i-0good</instanceId>"
				"<instanceState><name>pending</name></instanceState>"
				"<privateIpAddress>10.0.0.5</privateIpAddress></item></instancesSet>"
				"</RunInstancesResponse>",
				fields[f], bad[i], fields[f]);
			struct pbx_instance *v = NULL;
			struct pbx_err err = PBX_ERR_INIT;
			size_t n = 0;
			char *next = NULL;
			ok(aws_insts_parse(xml, strlen(xml), &v, &n, &next, &err) < 0 &&
				   strstr(err.msg, "instance i-0bad has a ") &&
				   strstr(err.msg, fields[f]) &&
				   strstr(err.msg, "not an IP address") && n == 2 &&
				   !v[0].private_ip && !v[0].public_ip &&
				   !strcmp(v[1].private_ip, "10.0.0.5"),
			   "%s '%s' refused, both instances listed: %s", fields[f], bad[i],
			   err.msg);
			pbx_instances_free(v, n);
			free(next);
			free(xml);
		}
}

static void test_values(void)
{
	const char *g =
		"<CreateSecurityGroupResponse><requestId>r</requestId><groupId>sg-9</groupId>"
		"</CreateSecurityGroupResponse>";
	const char *bomb =
		"<!DOCTYPE x [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;\">]>"
		"<R><groupId>&b;</groupId></R>";
	const char *keys =
		"<DescribeKeyPairsResponse><keySet><item><keyName>pbx-a</keyName></item>"
		"<item><keyName>pbx-b</keyName></item></keySet></DescribeKeyPairsResponse>";
	const char *groups =
		"<DescribeSecurityGroupsResponse><securityGroupInfo><item><groupId>sg-1"
		"</groupId><ipPermissions><item><groups><item><groupId>sg-1</groupId>"
		"</item></groups></item></ipPermissions></item></securityGroupInfo>"
		"</DescribeSecurityGroupsResponse>";
	char *s = aws_xml_text(g, strlen(g), "groupId"), **v = NULL;
	size_t n = 0;
	is_str(s, "sg-9", "groupId of CreateSecurityGroup");
	free(s);
	s = aws_xml_text(bomb, strlen(bomb), "groupId");
	ok(!s || !strstr(s, "aaaaaaaaaaaaaaaaaaaa"), "entities are not expanded");
	free(s);
	ok(aws_xml_texts(keys, strlen(keys), "keySet", "keyName", &v, &n) == 0 && n == 2 &&
		   !strcmp(v[1], "pbx-b"),
	   "every keyName");
	while (n)
		free(v[--n]);
	free(v);
	v = NULL;
	ok(aws_xml_texts(groups, strlen(groups), "securityGroupInfo", "groupId", &v, &n) == 0 &&
		   n == 1 && !strcmp(v[0], "sg-1"),
	   "a group's own id, not the ids in its rules");
	while (n)
		free(v[--n]);
	free(v);
}

/* A reply in a bad encoding: refused, and nothing printed (libxml2's
 * generic error handler would write "encoding error" to stderr). */
static void test_quiet(void)
{
	const char bad[] = "<?xml version=\"1.0\" encoding=\"EUC-JP\"?><R>\x8f\xff\xff</R>";
	char path[] = "/tmp/pbx-aws-parse.XXXXXX", code[64], msg[64];
	int fd = mkstemp(path), saved = dup(2);
	struct stat st;
	fflush(stderr);
	dup2(fd, 2);
	ok(aws_error_parse(bad, sizeof(bad) - 1, code, sizeof(code), msg, sizeof(msg)) < 0,
	   "a reply in a bad encoding is refused");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	if (fstat(fd, &st) != 0)
		st.st_size = -1;
	ok(st.st_size == 0, "and libxml2 printed nothing (%ld bytes)", (long)st.st_size);
	close(fd);
	unlink(path);
}

static void test_images(void)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct aws_image *v = NULL;
	size_t n = 0;
	const char *xml =
		"<DescribeImagesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
		"<imagesSet><item><imageId>ami-0a1</imageId><name>img-a</name>"
		"<imageState>available</imageState><blockDeviceMapping><item><ebs>"
		"<snapshotId>snap-0b2</snapshotId></ebs></item><item><virtualName>ephemeral0"
		"</virtualName></item><item><ebs><snapshotId>snap-../x</snapshotId></ebs></item>"
		"</blockDeviceMapping><tagSet><item><key>pbx-image</key><value>img-a</value></item>"
		"<item><key>pbx-image-id</key><value>abc</value></item></tagSet></item>"
		"<item><imageId>ami-0c3</imageId><name>img-b</name><imageState>failed</imageState>"
		"<stateReason><message>no&#10;space</message></stateReason></item>"
		"<item><imageId>snap-9</imageId><name>x</name><imageState>available</imageState>"
		"</item></imagesSet></DescribeImagesResponse>";
	ok(aws_images_parse(xml, strlen(xml), &v, &n, &err) == 0 && n == 2, "two images (%s)",
	   err.msg);
	ok(n == 2 && !strcmp(v[0].id, "ami-0a1") && !strcmp(v[0].name, "img-a") &&
		   !strcmp(v[0].state, "available") && !strcmp(v[0].owner, "abc") && !v[0].reason,
	   "id, name, state and the pbx-image-id tag");
	ok(n == 2 && v[0].nsnapshots == 1 && !strcmp(v[0].snapshots[0], "snap-0b2"),
	   "its EBS snapshot; a mapping without one and a bad id are left out");
	ok(n == 2 && !strcmp(v[1].state, "failed") && !strcmp(v[1].owner, "") && v[1].reason &&
		   !strcmp(v[1].reason, "no?space") && v[1].nsnapshots == 0,
	   "a failed image: its reason, control characters made '?'; no tag is \"\"");
	aws_images_free(v, n);
	v = NULL;
	n = 0;
	ok(aws_images_parse(ERR("InvalidAMIID.NotFound"), strlen(ERR("InvalidAMIID.NotFound")), &v,
			    &n, &err) < 0 &&
		   n == 0,
	   "an error envelope is not an image list");
	ok(aws_images_parse("<a", 2, &v, &n, &err) < 0 && n == 0, "broken XML");
}

/* streq that takes NULL: both NULL, or the same text */
static int same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/* is(aws_launch_node(role, launch, index), want); frees it */
static int launch_is(const char *role, const char *launch, long index, const char *want)
{
	char *got = aws_launch_node(role, launch, index);
	int r = same(got, want);
	if (!r)
		tap_diag("aws_launch_node(%s, %s, %ld) = %s, not %s", role ? role : "NULL",
			 launch ? launch : "NULL", index, got ? got : "NULL", want ? want : "NULL");
	free(got);
	return r;
}

/* pbx-launch written for a launch's nodes (create.c), and read back */
static void test_launch_tag(void)
{
	const char *const four[] = { "cpu3", "cpu4", "cpu5", "cpu9" };
	const char *const order[] = { "cpu9", "cpu1", "cpu2" };
	const char *const one[] = { "cpu12" };
	const char *const digits[] = { "gpu21", "gpu22" };
	const char *const bad[] = { "cpu1", "gpu2" };
	const char *const zero[] = { "cpu01" };
	const char **many = xcalloc(200, sizeof(*many));
	char *t, *names[200];
	int i, r = 1;
	t = aws_launch_tag("cpu", four, 4);
	ok(same(t, "3-5,9"), "a launch of cpu3 cpu4 cpu5 cpu9: 3-5,9 (%s)", t ? t : "NULL");
	free(t);
	t = aws_launch_tag("cpu", order, 3);
	ok(same(t, "9,1-2"), "numbers stay in launch order: 9,1-2 (%s)", t ? t : "NULL");
	free(t);
	t = aws_launch_tag("cpu", one, 1);
	ok(same(t, "12"), "one node: its number (%s)", t ? t : "NULL");
	free(t);
	t = aws_launch_tag("gpu2", digits, 2);
	ok(same(t, "1-2"), "a group name ending in a digit: the numbers after it (%s)",
	   t ? t : "NULL");
	free(t);
	t = aws_launch_tag("cpu", bad, 2);
	ok(!t, "a node of another group: no tag");
	free(t);
	t = aws_launch_tag("cpu", zero, 1);
	ok(!t, "a number with a leading zero: no tag");
	free(t);
	for (i = 0; i < 200; i++)
		many[i] = names[i] = xasprintf("cpu%d", 1000 + 2 * i);
	t = aws_launch_tag("cpu", many, 200);
	ok(!t, "200 nodes numbered apart would pass EC2's 256 characters: no tag");
	free(t);
	for (i = 0; i < 200; i++) {
		free(names[i]);
		many[i] = names[i] = xasprintf("cpu%d", 1 + i);
	}
	t = aws_launch_tag("cpu", many, 200);
	ok(same(t, "1-200"), "200 consecutive nodes: 1-200");
	for (i = 0; t && i < 200; i++)
		r &= launch_is("cpu", t, i, names[i]);
	ok(r, "  and each launch index reads back as its node");
	free(t);
	for (i = 0; i < 200; i++)
		free(names[i]);
	free(many);

	ok(launch_is("cpu", "3-5,9", 0, "cpu3") && launch_is("cpu", "3-5,9", 2, "cpu5") &&
		   launch_is("cpu", "3-5,9", 3, "cpu9"),
	   "launch indexes 0, 2 and 3 of 3-5,9: cpu3, cpu5, cpu9");
	ok(launch_is("cpu", "9,1-2", 1, "cpu1"),
	   "ranges in launch order: index 1 of 9,1-2 is cpu1");
	ok(launch_is("cpu", "3-5,9", 4, NULL) && launch_is("cpu", "3-5,9", -1, NULL),
	   "an index outside the launch names no node");
	ok(launch_is(NULL, "1-2", 0, NULL) && launch_is("cpu", NULL, 0, NULL),
	   "either tag missing: no node");
	ok(launch_is("cpu", "", 0, NULL) && launch_is("cpu", "1,", 0, NULL) &&
		   launch_is("cpu", ",1", 0, NULL) && launch_is("cpu", "1-", 0, NULL) &&
		   launch_is("cpu", "-1", 0, NULL) && launch_is("cpu", "1--2", 0, NULL),
	   "empty parts are refused");
	ok(launch_is("cpu", "01", 0, NULL) && launch_is("cpu", "0", 0, NULL) &&
		   launch_is("cpu", "+1", 0, NULL) && launch_is("cpu", " 1", 0, NULL) &&
		   launch_is("cpu", "1000000000", 0, NULL) && launch_is("cpu", "1;rm", 0, NULL),
	   "numbers: 1 to 999999999, digits only, no leading zero");
	ok(launch_is("cpu", "5-3", 0, NULL) && launch_is("cpu", "3-3", 0, NULL),
	   "a range must rise");
	ok(launch_is("cpu", "1-3,2", 0, NULL) && launch_is("cpu", "4,1-9", 0, NULL) &&
		   launch_is("cpu", "1,1", 0, NULL),
	   "overlapping ranges are refused (no two instances of one node)");
	ok(launch_is("cpu", "1-999999999", 999999998, "cpu999999999"),
	   "the widest range reaches its last number");
	ok(launch_is("Cpu", "1", 0, NULL) && launch_is("c u", "1", 0, NULL) &&
		   launch_is("", "1", 0, NULL),
	   "a role that is no group name names no node");
	{
		char longv[AWS_LAUNCH_TAG_MAX + 8];
		size_t k = 0;
		while (k + 2 < sizeof(longv) - 1) {
			k += (size_t)snprintf(longv + k, sizeof(longv) - k, "%s%zu", k ? "," : "",
					      k / 2 + 1);
		}
		ok(strlen(longv) > AWS_LAUNCH_TAG_MAX && launch_is("cpu", longv, 0, NULL),
		   "a value longer than EC2's 256 characters is refused");
	}
}

/* An instance is named by its launch (pbx-role, pbx-launch, amiLaunchIndex)
 * unless its pbx-node tag names it; a malformed launch index or launch tag
 * names nothing. */
static void test_launch_nodes(void)
{
#define LAUNCHED(id, idx, role, launch)                                                       \
	"<item><instanceId>" id "</instanceId><instanceState><name>running</name>"            \
	"</instanceState><amiLaunchIndex>" idx "</amiLaunchIndex><tagSet><item><key>pbx-role" \
	"</key><value>" role "</value></item><item><key>pbx-launch</key><value>" launch       \
	"</value></item></tagSet></item>"
	const char *page =
		"<RunInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
		"<instancesSet>" LAUNCHED("i-1", "0", "cpu", "3-5,9") LAUNCHED(
			"i-2", "3", "cpu", "3-5,9") LAUNCHED("i-3", "4", "cpu",
							     "3-5,9") LAUNCHED("i-4", "01", "cpu",
									       "3-5,9")
			LAUNCHED("i-5", "1", "cpu", "3-2") LAUNCHED(
				"i-6", "1", "../x",
				"1-2") "<item><instanceId>i-7</instanceId><instanceState><name>running</name></instanceState>"
				       "<amiLaunchIndex>1</amiLaunchIndex><tagSet><item><key>pbx-node</key><value>cpu7"
				       "</value></item><item><key>pbx-role</key><value>cpu</value></item><item><key>"
				       "pbx-launch</key><value>1-2</value></item></tagSet></item>"
				       "</instancesSet></RunInstancesResponse>";
	struct pbx_instance *v = NULL;
	struct pbx_err err = PBX_ERR_INIT;
	size_t n = 0;
	char *next = NULL;
	ok(aws_insts_parse(page, strlen(page), &v, &n, &next, &err) == 0 && n == 7,
	   "instances with launch tags parse");
	ok(n == 7 && same(v[0].node, "cpu3") && v[0].launch_index == 0 && same(v[1].node, "cpu9") &&
		   v[1].launch_index == 3,
	   "launch indexes 0 and 3 of 3-5,9 are cpu3 and cpu9");
	ok(n == 7 && !v[2].node, "an index past the launch names no node");
	ok(n == 7 && !v[3].node && v[3].launch_index == -1,
	   "a launch index that is not a plain number names no node");
	ok(n == 7 && !v[4].node && !v[5].node, "a malformed launch or role tag names no node");
	ok(n == 7 && same(v[6].node, "cpu7"), "a pbx-node tag comes first");
	pbx_instances_free(v, n);
	free(next);
#undef LAUNCHED
}

/* EC2's vCPU quotas (quota.c): which quota counts a type, a
 * GetServiceQuota reply, DescribeInstanceTypes' vCPUs, and the instance
 * type and lifecycle of DescribeInstances items. */
static void test_vcpu_quotas(void)
{
	const char *types =
		"<DescribeInstanceTypesResponse><instanceTypeSet><item><instanceType>g4dn.xlarge"
		"</instanceType><vCpuInfo><defaultVCpus>4</defaultVCpus><defaultCores>2</defaultCores>"
		"</vCpuInfo></item><item><instanceType>m5.large</instanceType><vCpuInfo>"
		"<defaultVCpus>2</defaultVCpus></vCpuInfo></item><item><instanceType>bad.one"
		"</instanceType><vCpuInfo><defaultVCpus>0</defaultVCpus></vCpuInfo></item><item>"
		"<instanceType>x.y</instanceType><vCpuInfo><defaultVCpus>4x</defaultVCpus></vCpuInfo>"
		"</item></instanceTypeSet></DescribeInstanceTypesResponse>";
	const char *insts =
		"<DescribeInstancesResponse><reservationSet><item><instancesSet><item><instanceId>i-1"
		"</instanceId><instanceType>g5.xlarge</instanceType><instanceState><name>running</name>"
		"</instanceState><instanceLifecycle>spot</instanceLifecycle></item><item><instanceId>"
		"i-2</instanceId><instanceType>c5.large</instanceType><instanceState><name>pending"
		"</name></instanceState></item></instancesSet></item></reservationSet>"
		"</DescribeInstancesResponse>";
	const char *quota = "{\"Quota\": {\"ServiceCode\": \"ec2\", \"QuotaCode\": \"L-DB2E81BA\", "
			    "\"Value\": 64.0, \"Unit\": \"None\"}}";
	const struct aws_vcpu_quota *q;
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_instance *v = NULL;
	char **names = NULL, *next = NULL, msg[128];
	int *vcpus = NULL;
	size_t n = 0, i;
	double value = -1;
	q = aws_vcpu_quota_of("g4dn.xlarge");
	CHECKF(q && !strcmp(q->on_demand, "L-DB2E81BA") && !strcmp(q->spot, "L-3819A6DF"),
	       "g4dn: G and VT, on-demand and spot quotas");
	q = aws_vcpu_quota_of("p4d.24xlarge");
	CHECKF(q && !strcmp(q->on_demand, "L-417A185B") && !strcmp(q->spot, "L-7212CCBC"),
	       "p4d: P");
	q = aws_vcpu_quota_of("inf2.xlarge");
	CHECKF(q && !strcmp(q->family, "Inf"), "inf2: Inf, not Standard's i");
	q = aws_vcpu_quota_of("im4gn.large");
	CHECKF(q && !strcmp(q->on_demand, "L-1216C47A"), "im4gn: Standard");
	CHECKF(aws_vcpu_quota_of("trn1.2xlarge") == NULL &&
		       aws_vcpu_quota_of("mac1.metal") == NULL &&
		       aws_vcpu_quota_of("u-6tb1.metal") == NULL && aws_vcpu_quota_of("") == NULL &&
		       aws_vcpu_quota_of(NULL) == NULL && aws_vcpu_quota_of("g") == NULL,
	       "families with quotas pbx does not know, and what is no type: none");
	CHECKF(aws_quota_parse(quota, strlen(quota), "L-DB2E81BA", &value, &err) == 0 &&
		       value == 64.0,
	       "GetServiceQuota: its Value");
	CHECKF(aws_quota_parse(quota, strlen(quota), "L-417A185B", &value, &err) < 0 &&
		       strstr(err.msg, "names no such quota"),
	       "a reply for another quota is refused");
	pbx_err_clear(&err);
	CHECKF(aws_quota_parse("{\"Quota\": {\"QuotaCode\": \"L-1\", \"Value\": -1}}", 45, "L-1",
			       &value, &err) < 0,
	       "a negative Value is refused");
	pbx_err_clear(&err);
	aws_json_error("{\"__type\": \"com.amazonaws.servicequotas.model#AccessDeniedException\", "
		       "\"message\": \"no\\u001b[31m\"}",
		       96, msg, sizeof(msg));
	CHECK_STR(msg, "AccessDeniedException: no?[31m"); /* control characters made '?' */
	CHECKF(aws_vcpus_parse(types, strlen(types), &names, &vcpus, &n, &err) == 0 && n == 2 &&
		       !strcmp(names[0], "g4dn.xlarge") && vcpus[0] == 4 &&
		       !strcmp(names[1], "m5.large") && vcpus[1] == 2,
	       "DescribeInstanceTypes: each type's default vCPUs; 0 and 4x skipped");
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(vcpus);
	CHECKF(aws_vcpus_parse("nope", 4, &names, &vcpus, &n, &err) < 0, "not XML: refused");
	pbx_err_clear(&err);
	n = 0;
	CHECKF(aws_insts_parse(insts, strlen(insts), &v, &n, &next, &err) == 0 && n == 2 &&
		       !strcmp(v[0].type, "g5.xlarge") && v[0].spot &&
		       !strcmp(v[1].type, "c5.large") && !v[1].spot,
	       "DescribeInstances: each instance's type and whether it is spot");
	pbx_instances_free(v, n);
	free(next);
}

int main(void)
{
	test_vcpu_quotas();
	test_launch_tag();
	test_launch_nodes();
	test_images();
	test_quiet();
	test_errors();
	test_instances();
	test_node_tags();
	test_stop_times();
	test_start_times();
	test_bad_addresses();
	test_values();
	return tap_done();
}
