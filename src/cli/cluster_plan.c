/*
 * cluster_plan.c - the one-screen summary that opens `pbx cluster start
 * --dry-run`: where the cluster would run, its
 * instances by kind, its image, disks and network, and what the image
 * lacks (a GPU group on a stock image has no NVIDIA driver).  On stderr,
 * so --json keeps stdout to the requests; the price table and the SSH
 * exposure line are printed beside it by cmd-cluster-lifecycle.c.
 */
#include "cli/cmd.h"
#include "cli/output.h"
#include "cloud/aws/aws.h"
#include "cloud/gce/gce.h"
#include "config/config.h"

#include <stdio.h>
#include <string.h>

/* Whether image names a stock Debian or Ubuntu image (no NVIDIA driver):
 * Compute Engine's debian-cloud / ubuntu-os-cloud families. */
static int plan_stock_image(const char *image)
{
	return image && (strstr(image, "debian-cloud/") || strstr(image, "ubuntu-os-cloud/"));
}

static void plan_group(const struct pbx_cluster_template *t, const struct pbx_node_group *g)
{
	char extra[160] = "";
	size_t len = 0;
	if (g->gpus)
		len += (size_t)snprintf(extra + len, sizeof(extra) - len, ", %d GPU%s%s%s", g->gpus,
					g->gpus == 1 ? "" : "s", g->gpu_type ? " " : "",
					g->gpu_type ? g->gpu_type : "");
	if (g->spot && len < sizeof(extra))
		len += (size_t)snprintf(extra + len, sizeof(extra) - len, ", spot");
	if (g->min >= 0 && len < sizeof(extra))
		snprintf(extra + len, sizeof(extra) - len,
			 ", power saving: %d always on, up to %d made when jobs wait", g->min,
			 g->count);
	pbx_info("  %-7s %d x %s%s", g->name, g->count, g->machine_type ? g->machine_type : "-",
		 extra);
	(void)t;
}

void pbx_cli_cluster_plan(const struct pbx_config *cfg, const struct pbx_cluster_template *t,
			  const char *name)
{
	int gce = !strcmp(t->cloud, "gce"), aws = !strcmp(t->cloud, "aws"), gpus = 0, n = 1;
	size_t i;
	if (!gce && !aws)
		return;
	pbx_info("dry run of 'pbx cluster start %s': nothing is created; it would make", name);
	if (gce)
		pbx_info("  where   Compute Engine, project %s, zone %s",
			 cfg->gce.project ? cfg->gce.project : "(none: clouds.gce.project)",
			 cfg->gce.zone ? cfg->gce.zone : "(none: clouds.gce.zone)");
	else
		pbx_info("  where   EC2, region %s%s%s",
			 cfg->aws.region ? cfg->aws.region : "(the profile's)",
			 t->subnet || cfg->aws.subnet ? ", subnet " : "",
			 t->subnet         ? t->subnet
			 : cfg->aws.subnet ? cfg->aws.subnet
					   : "");
	pbx_info("  head    1 x %s, an external address (SSH)", t->head_machine_type
									? t->head_machine_type
								: gce ? GCE_HEAD_MACHINE
								      : AWS_HEAD_TYPE);
	for (i = 0; i < t->ngroups; i++) {
		plan_group(t, &t->groups[i]);
		n += t->groups[i].count;
		gpus |= t->groups[i].gpus > 0;
	}
	pbx_info("  image   %s", t->image ? t->image : "(none)");
	pbx_info("  disks   a %d GB boot disk each (%d instance%s at most)",
		 gce                ? 50
		 : cfg->aws.disk_gb ? cfg->aws.disk_gb
				    : 50,
		 n, n == 1 ? "" : "s");
	if (gce && t->compute_external_ips)
		pbx_info("  network 2 firewall rules (SSH to every node; everything inside the "
			 "cluster), an external address on every node (no NAT)");
	else if (gce)
		pbx_info(
			"  network 2 firewall rules (SSH to the head; everything inside the "
			"cluster), the region's Cloud NAT for the nodes (made when none is there)");
	else
		pbx_info("  network a security group (SSH to the head; everything inside the "
			 "cluster), a key pair; nodes in the VPC's subnet");
	if (gpus && gce && plan_stock_image(t->image))
		pbx_warning("a GPU group on a stock image (%s), which has no NVIDIA driver: the "
			    "bootstrap stops with 'no nvidia-smi'; use an image with the driver "
			    "(a Deep Learning VM image, or your own: 'pbx image build')",
			    t->image);
}
