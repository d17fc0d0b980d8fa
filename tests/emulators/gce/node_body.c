/*
 * node_body.c - pbx-node-body, the test helper through which the Compute
 * Engine emulator (emulator.py) gives its RUNNING instances real node
 * bodies, made by the local provider's own code (src/cloud/local/body.c)
 * and ended by its own process finder (procs.c):
 *
 *   pbx-node-body start ROOT PORT AUTHORIZED_KEYS HOME ADDRESS...
 *       starts the body's sshd on every ADDRESS:PORT; exits 0 once it
 *       listens, 1 with sshd's reason on stderr otherwise
 *   pbx-node-body stop ROOT
 *       ends every process that names ROOT/ (sshd, its sessions, daemons
 *       the bootstrap started) and removes ROOT
 *   pbx-node-body halt ROOT
 *       the same, keeping ROOT: the body is powered off (a guest shutdown,
 *       instances.stop) and a later start boots the same root again
 *   pbx-node-body procs ROOT
 *       prints the pids of the processes that stop and halt would end (one
 *       a line) and ends nothing; exits 0 when there is one, 1 when none
 *       is left: a guest that shut itself down has ended them all
 *       (bodies.py's alive asks this once the body's sshd is gone)
 *
 * Usage errors exit 2.  Built by tests/emulators/gce/CMakeLists.txt.
 */
#include "cloud/local/body.h"
#include "cloud/local/procs.h"
#include "util/fs.h"
#include "util/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int node_body_usage(void)
{
	fprintf(stderr, "usage: pbx-node-body start ROOT PORT AUTHORIZED_KEYS HOME ADDRESS...\n"
			"       pbx-node-body stop|halt|procs ROOT\n");
	return 2;
}

static int node_body_start(int argc, char **argv)
{
	struct pbx_err err = PBX_ERR_INIT;
	struct pbx_body b;
	char *end;
	long port;
	if (argc < 7)
		return node_body_usage();
	port = strtol(argv[3], &end, 10);
	if (*end || port < 1 || port > 65535) {
		fprintf(stderr, "pbx-node-body: bad port '%s'\n", argv[3]);
		return 2;
	}
	b.root = argv[2];
	b.port = (int)port;
	b.authorized_keys = argv[4];
	b.home = argv[5];
	b.addresses = (const char *const *)(argv + 6);
	if (pbx_body_start(&b, &err) < 0) {
		fprintf(stderr, "pbx-node-body: %s\n", err.msg);
		return 1;
	}
	return 0;
}

/* Ends every process naming ROOT/ (stop and halt); removes ROOT too
 * when REMOVE. */
static int node_body_end(int argc, char **argv, int remove)
{
	struct pbx_err err = PBX_ERR_INIT;
	char *needle;
	int rc;
	if (argc != 3 || argv[2][0] != '/' || !strcmp(argv[2], "/"))
		return node_body_usage();
	needle = xasprintf("%s/", argv[2]);
	pbx_local_procs_kill(needle, 5000);
	free(needle);
	if (!remove)
		return 0;
	rc = pbx_rm_rf(argv[2], &err);
	if (rc < 0)
		fprintf(stderr, "pbx-node-body: %s\n", err.msg);
	return rc < 0 ? 1 : 0;
}

/* Prints the pids of the processes naming ROOT/ (those node_body_end
 * would end); 0 when there is one, 1 when none. */
static int node_body_procs(int argc, char **argv)
{
	char *needle;
	pid_t *pids;
	size_t n, i;
	if (argc != 3 || argv[2][0] != '/' || !strcmp(argv[2], "/"))
		return node_body_usage();
	needle = xasprintf("%s/", argv[2]);
	n = pbx_local_procs_find(needle, &pids);
	free(needle);
	for (i = 0; i < n; i++)
		printf("%d\n", (int)pids[i]);
	free(pids);
	return n ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "start"))
		return node_body_start(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "stop"))
		return node_body_end(argc, argv, 1);
	if (argc >= 2 && !strcmp(argv[1], "halt"))
		return node_body_end(argc, argv, 0);
	if (argc >= 2 && !strcmp(argv[1], "procs"))
		return node_body_procs(argc, argv);
	return node_body_usage();
}
