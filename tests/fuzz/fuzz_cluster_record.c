/*
 * fuzz_cluster_record.c - libFuzzer target for a cluster's record as
 * `pbx cluster adopt` reads it (src/cluster/record_parse.c,
 * pbx_cluster_record_parse): any bytes must parse or fail cleanly with a
 * usage error; a parsed record has its head first, every node address
 * empty or an IP literal, and every pin named after the cluster.
 */
#include "cluster/cluster.h"
#include "util/addr.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What a parsed record promises (else abort). */
static void check(const struct pbx_cluster_record *rec)
{
	size_t i, l = strlen(rec->row.name);
	if (!rec->nnodes || strcmp(rec->nodes[0].name, "head") != 0)
		abort();
	for (i = 0; i < rec->nnodes; i++)
		if ((*rec->nodes[i].address && !pbx_ip_literal_ok(rec->nodes[i].address)) ||
		    strpbrk(rec->nodes[i].root, "\n\r"))
			abort();
	for (i = 0; i < rec->npins; i++)
		if (strncmp(rec->pins[i].hostport, rec->row.name, l) != 0 ||
		    rec->pins[i].hostport[l] != '/' || strpbrk(rec->pins[i].type, " \n"))
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_cluster_record rec;
	struct pbx_err err = PBX_ERR_INIT;
	if (pbx_cluster_record_parse((const char *)data, size, "fuzz.json", &rec, &err) < 0) {
		if (err.code != PBX_EXIT_USAGE || !err.msg[0] || rec.nodes || rec.row.name)
			abort();
		return 0;
	}
	check(&rec);
	pbx_cluster_record_release(&rec);
	return 0;
}
