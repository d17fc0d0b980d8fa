/*
 * jump.c - reaching a private node through a jump host.
 *
 * A direct-tcpip channel is opened on the jump connection, and a pump
 * thread copies bytes between it and one end of a socketpair; the inner
 * SSH session runs over the other end as if it were a TCP socket.  Several
 * tunnels (and the jump connection's own users) share the jump session, so
 * every libssh2 call goes through the jump connection's lock (ssh_internal.h).
 *
 * The pump stops when the inner side closes its end, when the channel
 * reaches EOF, or when asked to; it then closes and frees the channel.
 */
#include "ssh/ssh_internal.h"
#include "util/xalloc.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>

#define PUMP_BUF 32768

struct pbx_ssh_jump {
	struct pbx_ssh *via; /* the jump connection (not owned) */
	LIBSSH2_CHANNEL *ch; /* the direct-tcpip channel (owned by the pump) */
	int fd;              /* the pump's end of the socketpair */
	pthread_t thread;
	atomic_int stop;
	char up[PUMP_BUF]; /* inner -> channel */
	size_t up_len, up_off;
	char down[PUMP_BUF]; /* channel -> inner */
	size_t down_len, down_off;
	int fd_eof, ch_eof, failed;
};

/* ------------------------------------------------------------ pump steps */

/* Inner session -> channel. */
static void pump_up(struct pbx_ssh_jump *j, int *moved)
{
	ssize_t n;
	if (j->up_off == j->up_len && !j->fd_eof) {
		n = recv(j->fd, j->up, sizeof(j->up), MSG_DONTWAIT);
		if (n > 0) {
			j->up_len = (size_t)n;
			j->up_off = 0;
			*moved = 1;
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			j->fd_eof = 1;
		}
	}
	while (j->up_off < j->up_len) {
		PBX_SSH_CALL(
			j->via, n,
			libssh2_channel_write(j->ch, j->up + j->up_off, j->up_len - j->up_off));
		if (n == LIBSSH2_ERROR_EAGAIN)
			return;
		if (n < 0) {
			j->failed = 1;
			return;
		}
		j->up_off += (size_t)n;
		*moved = 1;
	}
}

/* Channel -> inner session. */
static void pump_down(struct pbx_ssh_jump *j, int *moved)
{
	ssize_t n;
	int eof;
	if (j->down_off == j->down_len && !j->ch_eof) {
		PBX_SSH_CALL(j->via, n, libssh2_channel_read(j->ch, j->down, sizeof(j->down)));
		PBX_SSH_CALL(j->via, eof, libssh2_channel_eof(j->ch));
		if (n > 0) {
			j->down_len = (size_t)n;
			j->down_off = 0;
			*moved = 1;
		} else if (n != LIBSSH2_ERROR_EAGAIN && n < 0) {
			j->failed = 1;
		} else if (eof == 1 && n != LIBSSH2_ERROR_EAGAIN) {
			j->ch_eof = 1;
		}
	}
	while (j->down_off < j->down_len) {
		n = send(j->fd, j->down + j->down_off, j->down_len - j->down_off,
			 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n < 0) {
			j->fd_eof = 1; /* inner side went away */
			j->down_off = j->down_len;
			return;
		}
		j->down_off += (size_t)n;
		*moved = 1;
	}
}

static int pump_done(const struct pbx_ssh_jump *j)
{
	if (j->failed || atomic_load(&j->stop))
		return 1;
	if (j->fd_eof && j->up_off == j->up_len)
		return 1;
	return j->ch_eof && j->down_off == j->down_len;
}

static void *pump_main(void *arg)
{
	struct pbx_ssh_jump *j = arg;
	while (!pump_done(j)) {
		int moved = 0;
		short ev = 0;
		pump_up(j, &moved);
		pump_down(j, &moved);
		if (moved || pump_done(j))
			continue;
		if (j->up_off == j->up_len && !j->fd_eof)
			ev |= POLLIN;
		if (j->down_off < j->down_len)
			ev |= POLLOUT;
		if (pbx_ssh_wait(j->via, j->fd, ev, 100) < 0)
			j->failed = 1;
	}
	pbx_ssh_chan_free(j->via, j->ch);
	j->ch = NULL;
	shutdown(j->fd, SHUT_RDWR);
	pbx_ssh_leave(j->via);
	return NULL;
}

/* ------------------------------------------------------------ open/close */

static LIBSSH2_CHANNEL *jump_channel(struct pbx_ssh *via, const char *host, int port,
				     struct pbx_err *err)
{
	int64_t deadline = pbx_ssh_now_ms() + via->timeout_ms;
	LIBSSH2_CHANNEL *ch;
	int eagain;
	for (;;) {
		PBX_SSH_CALLP(
			via, ch, eagain,
			libssh2_channel_direct_tcpip_ex(via->sess, host, port, "127.0.0.1", 22));
		if (ch)
			return ch;
		if (!eagain) {
			pbx_ssh_fail(via, err, "cannot open a direct-tcpip channel");
			return NULL;
		}
		if (pbx_ssh_wait_until(via, deadline, "cannot open a direct-tcpip channel", err) <
		    0)
			return NULL;
	}
}

int pbx_ssh_jump_open(struct pbx_ssh *via, const char *host, int port, struct pbx_ssh_jump **out,
		      int *fd, struct pbx_err *err)
{
	struct pbx_ssh_jump *j;
	int sv[2];
	LIBSSH2_CHANNEL *ch;
	pbx_ssh_enter(via);
	pbx_ssh_req_begin(via);
	ch = jump_channel(via, host, port, err);
	pbx_ssh_req_end(via);
	if (!ch || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		if (ch) {
			pbx_err_set(err, "cannot create a socketpair: %s", strerror(errno));
			pbx_ssh_chan_free(via, ch);
		}
		pbx_ssh_leave(via);
		return -1;
	}
	j = xcalloc(1, sizeof(*j));
	j->via = via;
	j->ch = ch;
	j->fd = sv[1];
	fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK);
	atomic_init(&j->stop, 0);
	if (pthread_create(&j->thread, NULL, pump_main, j) != 0) {
		close(sv[0]);
		close(sv[1]);
		pbx_ssh_chan_free(via, ch);
		pbx_ssh_leave(via);
		free(j);
		return pbx_err_set(err, "cannot start the tunnel thread");
	}
	*out = j;
	*fd = sv[0];
	return 0;
}

void pbx_ssh_jump_close(struct pbx_ssh_jump *j)
{
	if (!j)
		return;
	atomic_store(&j->stop, 1);
	pthread_join(j->thread, NULL);
	close(j->fd);
	free(j);
}
