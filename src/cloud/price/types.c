/*
 * types.c - the vCPUs and memory of Compute Engine's predefined machine
 * types, which the billing catalogue prices per vCPU-hour and GiB-hour
 * (docs/cost.md).  Figures as Compute Engine's machineTypes list gives
 * them (tests/emulators/gce/catalog.py holds the same for the emulator):
 * FAMILY-SHAPE-N has N vCPUs and a memory per vCPU of its family and
 * shape; a2 and g2 come with GPUs of their own.  Shared-core (e2-micro,
 * small, medium; f1, g1) and custom types are not known: prices.hourly
 * prices them.
 */
#include "cloud/price/price.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MiB per vCPU by family and shape ("standard", "highmem", "highcpu"). */
struct shape {
	const char *family, *shape;
	long mib_per_cpu;
};

static const struct shape shapes[] = {
	{ "n1", "standard", 3840 },  { "n1", "highmem", 6656 },  { "n1", "highcpu", 922 },
	{ "n2", "standard", 4096 },  { "n2", "highmem", 8192 },  { "n2", "highcpu", 1024 },
	{ "n2d", "standard", 4096 }, { "n2d", "highmem", 8192 }, { "n2d", "highcpu", 1024 },
	{ "e2", "standard", 4096 },  { "e2", "highmem", 8192 },  { "e2", "highcpu", 1024 },
	{ "g2", "standard", 4096 },
};

/* g2-standard-N: its L4s. */
static int g2_gpus(int cpus)
{
	switch (cpus) {
	case 4:
	case 8:
	case 12:
	case 16:
	case 32:
		return 1;
	case 24:
		return 2;
	case 48:
		return 4;
	case 96:
		return 8;
	default:
		return 0;
	}
}

/* a2-highgpu-Kg: 12 vCPUs, 85 GiB and an A100 per GPU. */
static int a2_lookup(const char *name, struct pbx_gce_type *out)
{
	int k;
	char g, end;
	if (sscanf(name, "a2-highgpu-%d%c%c", &k, &g, &end) != 2 || g != 'g' ||
	    (k != 1 && k != 2 && k != 4 && k != 8))
		return -1;
	out->cpus = 12 * k;
	out->mem_mb = 85L * 1024 * k;
	out->gpu_type = "nvidia-tesla-a100";
	out->gpus = k;
	return 0;
}

int pbx_gce_type_lookup(const char *machine_type, struct pbx_gce_type *out)
{
	char family[8], shape[16], end;
	int n;
	size_t i;
	memset(out, 0, sizeof(*out));
	if (!machine_type)
		return -1;
	if (!strncmp(machine_type, "a2-", 3))
		return a2_lookup(machine_type, out);
	if (sscanf(machine_type, "%7[a-z0-9]-%15[a-z]-%d%c", family, shape, &n, &end) != 3 ||
	    n < 1 || n > 416)
		return -1;
	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		if (strcmp(shapes[i].family, family) || strcmp(shapes[i].shape, shape))
			continue;
		if (!strcmp(family, "g2") && !g2_gpus(n))
			return -1;
		out->cpus = n;
		out->mem_mb = shapes[i].mib_per_cpu * n;
		if (!strcmp(family, "n1") && !strcmp(shape, "highcpu"))
			out->mem_mb = (long)(n * 0.9 * 1024 + 0.5);
		if (!strcmp(family, "g2")) {
			out->gpu_type = "nvidia-l4";
			out->gpus = g2_gpus(n);
		}
		return 0;
	}
	return -1;
}
