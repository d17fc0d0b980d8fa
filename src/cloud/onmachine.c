/*
 * onmachine.c - whether pbx may ask a cloud's metadata server for
 * credentials (docs/SECURITY.md, "Metadata servers"): only on a machine of
 * that cloud, so a laptop with no cloud configured never sends a request to
 * 169.254.169.254 or metadata.google.internal (a dry run or a price lookup
 * once did).  A machine is the cloud's when its firmware says so (DMI, as
 * the clouds' own agents tell), when pbx runs on a cluster's node
 * (PBX_THIS_NODE: pbx-head, with the node's own identity), or when the
 * metadata server's address is set explicitly (the emulators).
 */
#include "cloud/provider.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The first line of `path`, or "" when it cannot be read. */
static void first_line(const char *path, char *out, size_t size)
{
	FILE *f = fopen(path, "r");
	out[0] = '\0';
	if (!f)
		return;
	if (!fgets(out, (int)size, f))
		out[0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

/* PBX_TEST_DMI_DIR (tests) or the kernel's DMI directory. */
static void dmi_file(const char *name, char *out, size_t size)
{
	const char *dir = getenv("PBX_TEST_DMI_DIR");
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir && *dir ? dir : "/sys/class/dmi/id", name);
	first_line(path, out, size);
}

static int set(const char *var)
{
	const char *v = getenv(var);
	return v && *v;
}

int pbx_may_ask_metadata(const char *cloud)
{
	char vendor[128], product[128], bios[128], uuid[64];
	if (set("PBX_THIS_NODE"))
		return 1;
	dmi_file("sys_vendor", vendor, sizeof(vendor));
	dmi_file("product_name", product, sizeof(product));
	dmi_file("bios_vendor", bios, sizeof(bios));
	if (!strcmp(cloud, "aws")) {
		first_line("/sys/hypervisor/uuid", uuid, sizeof(uuid)); /* Xen instances */
		return set("AWS_EC2_METADATA_SERVICE_ENDPOINT") || !strcmp(vendor, "Amazon EC2") ||
		       !strncmp(bios, "Amazon EC2", 10) || !strncasecmp(uuid, "ec2", 3);
	}
	if (!strcmp(cloud, "gce"))
		return set("GCE_METADATA_HOST") || !strcmp(product, "Google Compute Engine") ||
		       !strcmp(vendor, "Google") || !strcmp(bios, "Google");
	return 0;
}
