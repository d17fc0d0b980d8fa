/*
 * addr.h - checking the addresses a cloud API hands out.
 *
 * An instance's address goes into slurm.conf (NodeAddr=), /etc/hosts and
 * SSH command lines, so an API reply (untrusted text) must not be able to
 * smuggle a newline, a space or an option into them: only what inet_pton
 * reads as a whole is an address.
 */
#ifndef PBX_UTIL_ADDR_H
#define PBX_UTIL_ADDR_H

/* 1 when `s` (may be NULL: 0) is exactly an IPv4 dotted quad or an IPv6
 * address as inet_pton(3) reads them, nothing before or after. */
int pbx_ip_literal_ok(const char *s);

#endif
