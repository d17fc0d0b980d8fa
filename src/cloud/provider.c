/*
 * provider.c - the table of providers and helpers they share.
 */
#include "cloud/provider.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

extern const struct pbx_provider pbx_provider_local;

static const struct pbx_provider *const providers[] = {
	&pbx_provider_local,
	NULL,
};

const struct pbx_provider *pbx_provider_find(const char *cloud)
{
	size_t i;
	for (i = 0; providers[i]; i++)
		if (!strcmp(providers[i]->name, cloud))
			return providers[i];
	return NULL;
}

void pbx_events_stage(const struct pbx_cluster_events *ev, size_t node, const char *stage)
{
	if (ev && ev->stage)
		ev->stage(ev->ctx, node, stage);
}

static int pbx_try_connect(const struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc;
	if (fd < 0)
		return -1;
	rc = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	close(fd);
	return rc;
}

int pbx_wait_port(const char *host, int port, int timeout_ms, struct pbx_err *err)
{
	struct sockaddr_in sa;
	struct timespec delay = { 0, 20 * 1000 * 1000 };
	int waited = 0;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)port);
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return pbx_err_set(err, "invalid IPv4 address '%s'", host);
	while (pbx_try_connect(&sa) < 0) {
		if (waited >= timeout_ms)
			return pbx_err_set(err, "%s:%d does not accept connections after %d ms: %s",
					   host, port, timeout_ms, strerror(errno));
		nanosleep(&delay, NULL);
		waited += 20;
	}
	return 0;
}
