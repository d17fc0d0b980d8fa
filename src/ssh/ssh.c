/*
 * ssh.c - the session plumbing every other file of src/ssh builds on:
 * process-wide libssh2 setup, the per-connection lock, waiting on the
 * socket, channel slots, turning libssh2 errors into struct pbx_err, and
 * closing a connection.  See ssh_internal.h for the locking model.
 */
#include "ssh/ssh_internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Poll timeouts: a shared session may have our data queued by another
 * thread, so it looks again soon; a private one only needs to notice
 * nothing at all is happening. */
#define PBX_SSH_POLL_SHARED_MS  3
#define PBX_SSH_POLL_PRIVATE_MS 200

/* ------------------------------------------------------------ global init */

static pthread_once_t pbx_ssh_once = PTHREAD_ONCE_INIT;
static int pbx_ssh_init_rc;

static void ssh_init_once(void)
{
	pbx_ssh_init_rc = libssh2_init(0);
}

int pbx_ssh_global_init(struct pbx_err *err)
{
	pthread_once(&pbx_ssh_once, ssh_init_once);
	if (pbx_ssh_init_rc != 0)
		return pbx_err_set(err, "cannot initialise libssh2 (error %d)", pbx_ssh_init_rc);
	return 0;
}

/* ------------------------------------------------------------ time, lock */

int64_t pbx_ssh_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void pbx_ssh_lock(struct pbx_ssh *s)
{
	pthread_mutex_lock(&s->lock);
}

void pbx_ssh_unlock(struct pbx_ssh *s)
{
	pthread_mutex_unlock(&s->lock);
}

int pbx_ssh_out_blocked(struct pbx_ssh *s, int64_t *deadline)
{
	struct pollfd p = { s->sock, POLLOUT, 0 };
	int64_t now = pbx_ssh_now_ms();
	if (!(libssh2_session_block_directions(s->sess) & LIBSSH2_SESSION_BLOCK_OUTBOUND))
		return 0;
	if (!*deadline)
		*deadline = now + s->timeout_ms;
	if (now >= *deadline)
		return 0; /* give up; the caller sees EAGAIN and retries later */
	if (poll(&p, 1, 100) < 0 && errno != EINTR)
		return 0;
	return 1;
}

/* Acknowledge what arrives at once instead of after the delayed-ACK timer
 * (40 ms on Linux).  sshd leaves Nagle on for non-interactive sessions, so
 * when it sends two small packets in a row (its host-key notice, then a
 * channel confirmation; or output, then the exit status) the second waits
 * for our ACK of the first: every exec stalled 40 ms without this.  Linux
 * clears the flag again on its own, so it is set before every wait. */
static void ssh_quickack(int sock)
{
#ifdef TCP_QUICKACK
	int one = 1;
	setsockopt(sock, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
#else
	(void)sock;
#endif
}

int pbx_ssh_wait(struct pbx_ssh *s, int fd, short events, int ms)
{
	struct pollfd p[2];
	int dir, shared, n = 1, cap, next = 0, rc;
	/* Idle connections send a keepalive now and then (NATs, dead peers). */
	PBX_SSH_CALL(s, rc, libssh2_keepalive_send(s->sess, &next));
	(void)rc;
	pbx_ssh_lock(s);
	dir = libssh2_session_block_directions(s->sess);
	shared = s->active > 1;
	pbx_ssh_unlock(s);
	p[0].fd = s->sock;
	p[0].events = (dir & LIBSSH2_SESSION_BLOCK_OUTBOUND) ? POLLOUT : 0;
	if ((dir & LIBSSH2_SESSION_BLOCK_INBOUND) || !dir)
		p[0].events |= POLLIN;
	p[0].revents = 0;
	if (fd >= 0 && events) {
		p[1].fd = fd;
		p[1].events = events;
		p[1].revents = 0;
		n = 2;
	}
	ssh_quickack(s->sock);
	cap = shared ? PBX_SSH_POLL_SHARED_MS : PBX_SSH_POLL_PRIVATE_MS;
	if (ms < 0 || ms > cap)
		ms = cap;
	if (poll(p, (nfds_t)n, ms) < 0)
		return errno == EINTR ? 0 : -1;
	return (p[0].revents & POLLNVAL) ? -1 : 0;
}

int pbx_ssh_wait_until(struct pbx_ssh *s, int64_t deadline, const char *what, struct pbx_err *err)
{
	if (pbx_ssh_now_ms() > deadline)
		return pbx_err_set(err, "%s on %s: timed out", what, s->label);
	if (pbx_ssh_wait(s, -1, 0, 100) < 0)
		return pbx_err_set(err, "%s on %s: connection lost", what, s->label);
	return 0;
}

void pbx_ssh_enter(struct pbx_ssh *s)
{
	pbx_ssh_lock(s);
	s->active++;
	pbx_ssh_unlock(s);
}

void pbx_ssh_leave(struct pbx_ssh *s)
{
	pbx_ssh_lock(s);
	s->active--;
	pbx_ssh_unlock(s);
}

/* ------------------------------------------------------------ channel slots */

void pbx_ssh_req_begin(struct pbx_ssh *s)
{
	pthread_mutex_lock(&s->req_lock);
}

void pbx_ssh_req_end(struct pbx_ssh *s)
{
	pthread_mutex_unlock(&s->req_lock);
}

void pbx_ssh_slot_take(struct pbx_ssh *s)
{
	pbx_ssh_lock(s);
	while (s->channels >= PBX_SSH_MAX_CHANNELS)
		pthread_cond_wait(&s->slot_cv, &s->lock);
	s->channels++;
	pbx_ssh_unlock(s);
}

void pbx_ssh_slot_give(struct pbx_ssh *s)
{
	pbx_ssh_lock(s);
	s->channels--;
	pthread_cond_signal(&s->slot_cv);
	pbx_ssh_unlock(s);
}

/* ------------------------------------------------------------ errors */

static int ssh_transport_error(int rc)
{
	switch (rc) {
	case LIBSSH2_ERROR_SOCKET_SEND:
	case LIBSSH2_ERROR_SOCKET_RECV:
	case LIBSSH2_ERROR_SOCKET_DISCONNECT:
	case LIBSSH2_ERROR_SOCKET_TIMEOUT:
	case LIBSSH2_ERROR_TIMEOUT:
	case LIBSSH2_ERROR_DECRYPT:
	case LIBSSH2_ERROR_BANNER_RECV:
	case LIBSSH2_ERROR_BANNER_SEND:
	case LIBSSH2_ERROR_KEX_FAILURE:
	case LIBSSH2_ERROR_INVALID_MAC:
		return 1;
	default:
		return 0;
	}
}

int pbx_ssh_fail_rc(struct pbx_ssh *s, struct pbx_err *err, const char *what, int rc)
{
	char *msg = NULL;
	int len = 0, code;
	pbx_ssh_lock(s);
	code = libssh2_session_last_error(s->sess, &msg, &len, 0);
	if (rc >= 0 || rc == LIBSSH2_ERROR_EAGAIN)
		rc = code;
	if (ssh_transport_error(rc))
		s->broken = 1;
	pbx_err_set(err, "%s on %s: %s", what, s->label,
		    (msg && len > 0) ? msg : "connection error");
	pbx_ssh_unlock(s);
	return -1;
}

int pbx_ssh_fail(struct pbx_ssh *s, struct pbx_err *err, const char *what)
{
	return pbx_ssh_fail_rc(s, err, what, 0);
}

/* ------------------------------------------------------------ channels */

int pbx_ssh_chan_op(struct pbx_ssh *s, LIBSSH2_CHANNEL *ch, int (*op)(LIBSSH2_CHANNEL *),
		    struct pbx_err *err, const char *what)
{
	int64_t deadline = pbx_ssh_now_ms() + s->timeout_ms;
	int rc;
	for (;;) {
		PBX_SSH_CALL(s, rc, op(ch));
		if (rc != LIBSSH2_ERROR_EAGAIN)
			break;
		if (pbx_ssh_wait_until(s, deadline, what, err) < 0)
			return -1;
	}
	return rc < 0 ? pbx_ssh_fail_rc(s, err, what, rc) : 0;
}

void pbx_ssh_chan_free(struct pbx_ssh *s, LIBSSH2_CHANNEL *ch)
{
	struct pbx_err ignored = PBX_ERR_INIT;
	if (!ch)
		return;
	pbx_ssh_chan_op(s, ch, libssh2_channel_close, &ignored, "close channel");
	pbx_ssh_chan_op(s, ch, libssh2_channel_free, &ignored, "free channel");
}

/* ------------------------------------------------------------ public bits */

const char *pbx_ssh_label(const struct pbx_ssh *s)
{
	return s ? s->label : "(none)";
}

void pbx_ssh_close(struct pbx_ssh *s)
{
	pbx_ssh_free(s);
}
