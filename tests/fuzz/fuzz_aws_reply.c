/*
 * fuzz_aws_reply.c - libFuzzer target for the EC2 reply parsers
 * (src/cloud/aws/parse.c, libxml2): any bytes, read as an error envelope,
 * an instance list (RunInstances, DescribeInstances with nextToken,
 * TerminateInstances), key pairs with their keys and single values, must parse or fail cleanly; what
 * parses has its required fields (a node, from its tag or its launch's
 * tags, when kept, a node name's shape; a launch index of -1 to 99999),
 * and the retry classifier answers 0 or 1.
 */
#include "cloud/aws/aws.h"
#include "util/addr.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Each item's `field` of a keySet list: present, as many as parsed. */
static void key_set_field(const char *text, size_t size, const char *field)
{
	char **v = NULL;
	size_t nv = 0, i;
	if (aws_xml_texts(text, size, "keySet", field, &v, &nv) == 0)
		for (i = 0; i < nv; i++)
			if (!v[i])
				abort();
	for (i = 0; i < nv; i++)
		free(v[i]);
	free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_instance *insts = NULL;
	const char *text = (const char *)data;
	size_t n = 0, i;
	char *next = NULL, *s, code[64], msg[256];
	int r;
	if (aws_error_parse(text, size, code, sizeof(code), msg, sizeof(msg)) == 0 &&
	    (!code[0] || strlen(code) >= sizeof(code) || strlen(msg) >= sizeof(msg)))
		abort();
	if (aws_insts_parse(text, size, &insts, &n, &next, &err) == 0)
		for (i = 0; i < n; i++)
			if (!insts[i].id || !*insts[i].id || !insts[i].state ||
			    (insts[i].private_ip && !pbx_ip_literal_ok(insts[i].private_ip)) ||
			    (insts[i].public_ip && !pbx_ip_literal_ok(insts[i].public_ip)) ||
			    insts[i].launch_index < -1 || insts[i].launch_index > 99999 ||
			    (insts[i].node &&
			     (!*insts[i].node || strlen(insts[i].node) > 63 ||
			      strspn(insts[i].node, "abcdefghijklmnopqrstuvwxyz0123456789-") !=
				      strlen(insts[i].node))))
				abort();
	pbx_instances_free(insts, n);
	free(next);
	s = aws_xml_text(text, size, "groupId");
	free(s);
	/* the key pairs' names and keys (DescribeKeyPairs with IncludePublicKey) */
	key_set_field(text, size, "keyName");
	key_set_field(text, size, "publicKey");
	r = aws_retryable(503, text, size, NULL);
	if (r != 0 && r != 1)
		abort();
	return 0;
}
