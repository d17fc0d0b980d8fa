/*
 * launch.c - how one RunInstances names each instance it makes, with no
 * call per node.  EC2 tags every instance of a launch alike
 * (TagSpecifications) but numbers them: amiLaunchIndex, 0 up, in the
 * order of the launch.  So a launch of nodes cpu3, cpu4, cpu5 and cpu9 of
 * group cpu carries pbx-role=cpu (tags.c) and pbx-launch=3-5,9, and its
 * instance of launch index 3 is cpu9.  create.c writes the tag
 * (aws_launch_tag); parse.c reads every listed instance's node back from
 * it (aws_launch_node), which is how the laptop's view (list.c, awake.c)
 * tells the nodes a head woke apart.
 *
 * The tag comes from EC2, i.e. from anyone allowed to tag in the account:
 * it is parsed strictly (numbers 1 to 999999999 without leading zeros,
 * ranges rising, none overlapping another, at most 256 characters, EC2's
 * longest tag value), and what it names must have a node name's shape.
 */
#include "cloud/aws/aws.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "util/xalloc.h"

#define LAUNCH_MAX_NUMBER 999999999L

/* The number that follows `group` in node name `name` (cpu12 of group
 * cpu: 12), or -1 when name is not GROUP then a number without a leading
 * zero. */
static long node_number(const char *group, const char *name)
{
	size_t g = strlen(group), len = strlen(name);
	const char *d = name + g;
	if (len <= g || len - g > 9 || strncmp(name, group, g) != 0 || *d == '0' ||
	    strspn(d, "0123456789") != len - g)
		return -1;
	return strtol(d, NULL, 10);
}

char *aws_launch_tag(const char *group, const char *const *names, size_t k)
{
	struct pbx_buf b = PBX_BUF_INIT;
	size_t i = 0;
	if (!group || !k)
		return NULL;
	while (i < k) {
		long first = node_number(group, names[i]), last = first;
		if (first < 0) {
			pbx_buf_release(&b);
			return NULL;
		}
		while (i + 1 < k && node_number(group, names[i + 1]) == last + 1) {
			last++;
			i++;
		}
		i++;
		pbx_buf_addf(&b, "%s%ld", b.len ? "," : "", first);
		if (last > first)
			pbx_buf_addf(&b, "-%ld", last);
	}
	if (b.len > AWS_LAUNCH_TAG_MAX) {
		pbx_buf_release(&b);
		return NULL;
	}
	return pbx_buf_detach(&b, NULL);
}

/* One number at *p (advanced past it): 1 to LAUNCH_MAX_NUMBER, no leading
 * zero, no sign; -1 when there is none. */
static long launch_number(const char **p)
{
	size_t n = strspn(*p, "0123456789");
	long v;
	if (n == 0 || n > 9 || **p == '0')
		return -1;
	v = strtol(*p, NULL, 10);
	*p += n;
	return v;
}

/* The tag's ranges into lo[]/hi[] (at most `max`); their count, or -1
 * when the value is not RANGE(,RANGE)* with rising, non-overlapping
 * ranges. */
static int launch_ranges(const char *s, long *lo, long *hi, int max)
{
	const char *p = s;
	int n = 0, i;
	if (strlen(s) > AWS_LAUNCH_TAG_MAX)
		return -1;
	for (;;) {
		if (n == max || (lo[n] = hi[n] = launch_number(&p)) < 0)
			return -1;
		if (*p == '-') {
			p++;
			if ((hi[n] = launch_number(&p)) <= lo[n])
				return -1;
		}
		for (i = 0; i < n; i++)
			if (lo[n] <= hi[i] && lo[i] <= hi[n])
				return -1;
		n++;
		if (!*p)
			return n;
		if (*p++ != ',')
			return -1;
	}
}

char *aws_launch_node(const char *role, const char *launch, long index)
{
	/* each range takes at least 2 characters ("1,") */
	long lo[AWS_LAUNCH_TAG_MAX / 2 + 1], hi[AWS_LAUNCH_TAG_MAX / 2 + 1];
	int n, i;
	int64_t at = index;
	size_t rl;
	if (!role || !launch || index < 0 ||
	    (n = launch_ranges(launch, lo, hi, (int)(sizeof(lo) / sizeof(lo[0])))) < 0)
		return NULL;
	rl = strlen(role);
	if (!rl || rl > 53 || strspn(role, "abcdefghijklmnopqrstuvwxyz0123456789-") != rl)
		return NULL;
	for (i = 0; i < n; i++) {
		int64_t span = (int64_t)hi[i] - lo[i] + 1;
		if (at < span)
			return xasprintf("%s%ld", role, lo[i] + (long)at);
		at -= span;
	}
	return NULL;
}
