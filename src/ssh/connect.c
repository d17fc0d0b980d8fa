/*
 * connect.c - opening a connection: TCP connect with a timeout (or a tunnel
 * through a jump host), the SSH handshake, the host-key check, public-key
 * authentication from a key file or ssh-agent, and tearing it all down.
 *
 * Handshake and authentication run in blocking mode with libssh2's timeout;
 * the session is switched to non-blocking mode once it is ready (see
 * ssh_internal.h).
 */
#include "ssh/ssh_internal.h"
#include "util/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ------------------------------------------------------------ TCP */

/* Finishes a non-blocking connect() within ms; 0 or -1 with errno set. */
static int connect_wait(int fd, int ms)
{
	struct pollfd p = { fd, POLLOUT, 0 };
	int soerr = 0, rc;
	socklen_t sl = sizeof(soerr);
	do {
		rc = poll(&p, 1, ms);
	} while (rc < 0 && errno == EINTR);
	if (rc == 0) {
		errno = ETIMEDOUT;
		return -1;
	}
	if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
		return -1;
	errno = soerr;
	return soerr ? -1 : 0;
}

static int connect_one(const struct addrinfo *ai, int ms)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
			ai->ai_protocol);
	int one = 1, saved;
	if (fd < 0)
		return -1;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 &&
	    (errno != EINPROGRESS || connect_wait(fd, ms) < 0)) {
		saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	return fd;
}

static int tcp_connect(const char *host, int port, int ms, struct pbx_err *err)
{
	struct addrinfo hints, *res = NULL, *ai;
	char portstr[16];
	int fd = -1, rc, saved = 0;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	snprintf(portstr, sizeof(portstr), "%d", port);
	rc = getaddrinfo(host, portstr, &hints, &res);
	if (rc != 0)
		return pbx_err_set(err, "cannot resolve %s: %s", host, gai_strerror(rc));
	for (ai = res; ai && fd < 0; ai = ai->ai_next) {
		fd = connect_one(ai, ms);
		if (fd < 0)
			saved = errno;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return pbx_err_set(err, "cannot connect to %s port %d: %s", host, port,
				   strerror(saved));
	return fd;
}

/* ------------------------------------------------------------ host key */

/* The key type is the first string inside the key blob. */
static char *hostkey_type(const unsigned char *blob, size_t len)
{
	uint32_t n;
	if (len < 4)
		return NULL;
	n = (uint32_t)blob[0] << 24 | (uint32_t)blob[1] << 16 | (uint32_t)blob[2] << 8 | blob[3];
	if (n == 0 || n > len - 4 || n > 64)
		return NULL;
	return xstrndup((const char *)blob + 4, n);
}

static int check_hostkey(struct pbx_ssh *s, const char *hostport, const struct pbx_hostkeys *hk,
			 struct pbx_err *err)
{
	size_t len = 0;
	int type = 0, rc;
	const char *blob = libssh2_session_hostkey(s->sess, &len, &type);
	char *ktype, *b64;
	if (!blob || !len)
		return pbx_err_setc(err, PBX_EXIT_SECURITY, "no host key from %s", hostport);
	ktype = hostkey_type((const unsigned char *)blob, len);
	if (!ktype)
		return pbx_err_setc(err, PBX_EXIT_SECURITY, "malformed host key from %s", hostport);
	b64 = xmalloc(4 * ((len + 2) / 3) + 1);
	EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)blob, (int)len);
	rc = hk->check(hk->ctx, hostport, ktype, b64, err);
	free(ktype);
	free(b64);
	return rc;
}

/* ------------------------------------------------------------ auth */

static int auth_denied(struct pbx_ssh *s, struct pbx_err *err, const char *why)
{
	return pbx_err_set(err, "permission denied (publickey) for %s%s", s->label, why);
}

static int auth_keyfile(struct pbx_ssh *s, const char *user, const char *key, struct pbx_err *err)
{
	char *pub = xasprintf("%s.pub", key);
	char *msg = NULL;
	int rc;
	if (access(key, R_OK) < 0) {
		rc = pbx_err_set(err, "cannot read key file %s: %s", key, strerror(errno));
		free(pub);
		return rc;
	}
	rc = libssh2_userauth_publickey_fromfile_ex(s->sess, user, (unsigned)strlen(user),
						    access(pub, R_OK) == 0 ? pub : NULL, key, NULL);
	free(pub);
	if (rc == 0)
		return 0;
	if (rc == LIBSSH2_ERROR_AUTHENTICATION_FAILED || rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED)
		return auth_denied(s, err, "");
	libssh2_session_last_error(s->sess, &msg, NULL, 0);
	return pbx_err_set(err, "cannot authenticate to %s with key %s: %s", s->label, key,
			   msg ? msg : "unknown error");
}

/* Tries each identity the agent holds; 0 when one was accepted. */
static int agent_try_all(LIBSSH2_AGENT *agent, const char *user)
{
	struct libssh2_agent_publickey *id = NULL, *prev = NULL;
	while (libssh2_agent_get_identity(agent, &id, prev) == 0) {
		if (libssh2_agent_userauth(agent, user, id) == 0)
			return 0;
		prev = id;
	}
	return -1;
}

static int auth_agent(struct pbx_ssh *s, const char *user, struct pbx_err *err)
{
	LIBSSH2_AGENT *agent = libssh2_agent_init(s->sess);
	int rc;
	if (!agent)
		return pbx_err_set(err, "cannot use ssh-agent for %s", s->label);
	if (libssh2_agent_connect(agent) != 0) {
		libssh2_agent_free(agent);
		return pbx_err_set(err,
				   "cannot connect to ssh-agent (is SSH_AUTH_SOCK set?) "
				   "for %s; set a key file instead",
				   s->label);
	}
	if (libssh2_agent_list_identities(agent) != 0)
		rc = pbx_err_set(err, "cannot list ssh-agent identities for %s", s->label);
	else if (agent_try_all(agent, user) != 0)
		rc = auth_denied(s, err, " (no ssh-agent identity was accepted)");
	else
		rc = 0;
	libssh2_agent_disconnect(agent);
	libssh2_agent_free(agent);
	return rc;
}

/* ------------------------------------------------------------ connect */

static struct pbx_ssh *ssh_new(const struct pbx_ssh_target *t, int port)
{
	struct pbx_ssh *s = xcalloc(1, sizeof(*s));
	int v6 = strchr(t->host, ':') != NULL;
	s->sock = -1;
	s->timeout_ms = t->timeout_ms > 0 ? t->timeout_ms : PBX_SSH_DEFAULT_TIMEOUT_MS;
	s->label = xasprintf("%s@%s%s%s:%d", t->user, v6 ? "[" : "", t->host, v6 ? "]" : "", port);
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->req_lock, NULL);
	pthread_cond_init(&s->slot_cv, NULL);
	return s;
}

/* The socket: direct TCP, or a tunnel through t->via. */
static int open_transport(struct pbx_ssh *s, const struct pbx_ssh_target *t, int port,
			  struct pbx_err *err)
{
	if (!t->via) {
		s->sock = tcp_connect(t->host, port, s->timeout_ms, err);
		return s->sock < 0 ? -1 : 0;
	}
	s->via = t->via;
	if (pbx_ssh_jump_open(t->via, t->host, port, &s->jump, &s->sock, err) < 0)
		return pbx_err_prefix(err, "cannot reach %s via %s", s->label,
				      pbx_ssh_label(t->via));
	return 0;
}

static int handshake(struct pbx_ssh *s, struct pbx_err *err)
{
	char *msg = NULL;
	int rc;
	s->sess = libssh2_session_init();
	if (!s->sess)
		return pbx_err_set(err, "cannot create ssh session for %s", s->label);
	libssh2_session_set_blocking(s->sess, 1);
	libssh2_session_set_timeout(s->sess, s->timeout_ms);
	rc = libssh2_session_handshake(s->sess, s->sock);
	if (rc == 0) {
		s->established = 1;
		return 0;
	}
	libssh2_session_last_error(s->sess, &msg, NULL, 0);
	return pbx_err_set(err, "ssh handshake with %s failed: %s", s->label,
			   msg ? msg : "unknown error");
}

static int hostport_check(struct pbx_ssh *s, const struct pbx_ssh_target *t, int port,
			  const struct pbx_hostkeys *hk, struct pbx_err *err)
{
	char *hostport;
	int rc;
	if (t->name)
		return check_hostkey(s, t->name, hk, err);
	hostport = strchr(t->host, ':') ? xasprintf("[%s]:%d", t->host, port)
					: xasprintf("%s:%d", t->host, port);
	rc = check_hostkey(s, hostport, hk, err);
	free(hostport);
	return rc;
}

int pbx_ssh_connect(const struct pbx_ssh_target *t, const struct pbx_hostkeys *hk,
		    struct pbx_ssh **out, struct pbx_err *err)
{
	int port = t->port > 0 ? t->port : 22;
	struct pbx_ssh *s;
	*out = NULL;
	if (t->openssh)
		return pbx_ssh_openssh_connect(t, out, err);
	if (!t->host || !*t->host || !t->user || !*t->user)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "ssh target needs a host and a user");
	if (!hk || !hk->check)
		return pbx_err_setc(err, PBX_EXIT_USAGE, "no host key policy for %s", t->host);
	if (pbx_ssh_global_init(err) < 0)
		return -1;
	s = ssh_new(t, port);
	if (open_transport(s, t, port, err) < 0 || handshake(s, err) < 0 ||
	    hostport_check(s, t, port, hk, err) < 0 ||
	    (t->key_path ? auth_keyfile(s, t->user, t->key_path, err)
			 : auth_agent(s, t->user, err)) < 0) {
		pbx_ssh_free(s);
		return -1;
	}
	libssh2_keepalive_config(s->sess, 0, 60);
	libssh2_session_set_blocking(s->sess, 0);
	*out = s;
	return 0;
}

void pbx_ssh_free(struct pbx_ssh *s)
{
	if (!s)
		return;
	if (s->sess) {
		/* Teardown runs blocking, bounded by a short timeout. */
		libssh2_session_set_blocking(s->sess, 1);
		libssh2_session_set_timeout(s->sess, 2000);
		if (s->established && !s->broken)
			libssh2_session_disconnect(s->sess, "bye");
		libssh2_session_free(s->sess);
	}
	if (s->sock >= 0)
		close(s->sock);
	if (s->jump)
		pbx_ssh_jump_close(s->jump);
	pthread_cond_destroy(&s->slot_cv);
	pthread_mutex_destroy(&s->req_lock);
	pthread_mutex_destroy(&s->lock);
	for (size_t i = 0; i < s->nargv_base; i++)
		free(s->argv_base[i]);
	free(s->argv_base);
	free(s->dest);
	free(s->label);
	free(s);
}
