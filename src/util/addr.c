/*
 * addr.c - is a string an IP address literal (see addr.h)?
 */
#include "util/addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>

int pbx_ip_literal_ok(const char *s)
{
	struct in_addr a4;
	struct in6_addr a6;
	return s && (inet_pton(AF_INET, s, &a4) == 1 || inet_pton(AF_INET6, s, &a6) == 1);
}
