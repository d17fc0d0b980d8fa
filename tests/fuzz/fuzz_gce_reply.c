/*
 * fuzz_gce_reply.c - libFuzzer target for the Compute Engine reply parsers
 * (src/cloud/gce/parse.c): any bytes, read as an operation, an instance
 * list page, and an error reply, must parse or fail cleanly; what parses
 * has its required fields, IP addresses only, and a uid of 1 to 20
 * digits only.
 */
#include "cloud/gce/gce.h"
#include "util/addr.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether uid is NULL or 1 to 20 decimal digits. */
static int uid_ok(const char *uid)
{
	size_t n = uid ? strspn(uid, "0123456789") : 0;
	return !uid || (n >= 1 && n <= 20 && !uid[n]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_err err = PBX_ERR_INIT;
	json_t *v = json_loadb((const char *)data, size, 0, NULL);
	struct gce_op op;
	struct pbx_instance *insts = NULL;
	size_t n = 0, i;
	char *next = NULL, msg[256];
	if (gce_op_parse(v, &op, &err) == 0 && (!op.name[0] || !op.status[0]))
		abort();
	if (gce_list_parse(v, &insts, &n, &next, &err) == 0)
		for (i = 0; i < n; i++)
			if (!insts[i].id || !insts[i].state ||
			    (insts[i].private_ip && !pbx_ip_literal_ok(insts[i].private_ip)) ||
			    (insts[i].public_ip && !pbx_ip_literal_ok(insts[i].public_ip)) ||
			    !uid_ok(insts[i].uid))
				abort();
	pbx_instances_free(insts, n);
	free(next);
	if (gce_error_text((const char *)data, size, msg, sizeof(msg)) == 0 &&
	    strlen(msg) >= sizeof(msg))
		abort();
	(void)gce_retryable(403, (const char *)data, size, NULL);
	json_decref(v);
	return 0;
}
