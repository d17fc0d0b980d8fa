/*
 * body.c - node bodies (see body.h): the directories, host key and sshd
 * of one body.  Moved here from local.c unchanged in behaviour, so the
 * local provider and the Compute Engine emulator's helper share it.
 */
#include "cloud/local/body.h"
#include "cloud/local/procs.h"
#include "cloud/provider.h"
#include "util/fs.h"
#include "util/proc.h"
#include "util/xalloc.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A node's host key, made in this process: ECDSA P-256 as PKCS#8 PEM,
 * which sshd reads (OpenSSH before 9.6 reads no PEM Ed25519 key).  One
 * ssh-keygen per node was 5 ms of CPU that every other node body waited
 * for; pbx pins whatever type the node presents. */
static int body_hostkey(const char *path, struct pbx_err *err)
{
	EVP_PKEY *key;
	BIO *mem;
	char *pem = NULL;
	long len = 0;
	int rc;
	if (access(path, F_OK) == 0)
		return 0;
	key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	mem = BIO_new(BIO_s_mem());
	if (!key || !mem || !PEM_write_bio_PrivateKey(mem, key, NULL, NULL, 0, NULL, NULL) ||
	    (len = BIO_get_mem_data(mem, &pem)) <= 0)
		rc = pbx_err_set(err, "cannot make a host key for %s", path);
	else
		rc = pbx_write_file_atomic(path, pem, (size_t)len, 0600, err);
	if (pem)
		OPENSSL_cleanse(pem, (size_t)len);
	BIO_free(mem);
	EVP_PKEY_free(key);
	return rc;
}

/* The pid in PIDFILE when it names a live process called COMM, else 0. */
static int body_pid_alive(const char *pidfile, const char *comm)
{
	FILE *f = fopen(pidfile, "r");
	char path[64], name[64] = "";
	int pid = 0;
	if (!f)
		return 0;
	if (fscanf(f, "%d", &pid) != 1)
		pid = 0;
	fclose(f);
	if (pid <= 1 || kill(pid, 0) < 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	f = fopen(path, "r");
	if (f) {
		if (!fgets(name, sizeof(name), f))
			name[0] = '\0';
		fclose(f);
		name[strcspn(name, "\n")] = '\0';
		if (strcmp(name, comm) != 0)
			return 0;
	}
	return pid;
}

/* Size of a file, 0 when it does not exist. */
static off_t body_file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_size : 0;
}

/* The last line a log got after offset FROM (at most its last 4 KiB), for
 * error messages; "" when none. */
static void body_log_tail(const char *path, off_t from, char *out, size_t size)
{
	char chunk[4097], *line;
	off_t end = body_file_size(path), at = end - from > 4096 ? end - 4096 : from;
	ssize_t n = 0;
	int fd;
	out[0] = '\0';
	if (end <= from || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	n = pread(fd, chunk, (size_t)(end - at), at);
	close(fd);
	if (n <= 0)
		return;
	chunk[n] = '\0';
	while (n > 0 && (chunk[n - 1] == '\n' || chunk[n - 1] == '\r'))
		chunk[--n] = '\0';
	line = strrchr(chunk, '\n');
	line = line ? line + 1 : chunk;
	n = (ssize_t)strlen(line);
	if ((size_t)n >= size)
		n = (ssize_t)size - 1;
	memcpy(out, line, (size_t)n);
	out[n] = '\0';
}

/* Waits until the node's sshd (PID, our child: sshd -D) listens: it
 * writes its pid file after binding, so a pid file naming a live sshd
 * means it accepts connections.  Never connects to find out (each
 * connection costs sshd a fork and a re-exec, CPU every other node body
 * waits for).  If sshd exits instead, the error quotes the last line its
 * log got after LOG_FROM (e.g. "Cannot bind any address."). */
static int body_wait_sshd(pid_t pid, const char *pidfile, const char *logfile, off_t log_from,
			  int timeout_ms, struct pbx_err *err)
{
	struct timespec delay = { 0, 2 * 1000 * 1000 };
	char last[512];
	int waited = 0, status;
	for (;;) {
		if (body_pid_alive(pidfile, "sshd") == pid)
			return 0;
		if (waitpid(pid, &status, WNOHANG) == pid) {
			body_log_tail(logfile, log_from, last, sizeof(last));
			return pbx_err_set(err, "sshd did not start (%s %d)%s%s; see %s",
					   WIFEXITED(status) ? "exit status" : "signal",
					   WIFEXITED(status) ? WEXITSTATUS(status)
							     : WTERMSIG(status),
					   last[0] ? ": " : "", last, logfile);
		}
		if (waited >= timeout_ms) {
			kill(pid, SIGTERM);
			return pbx_err_set(err, "sshd did not listen within %d s; see %s",
					   timeout_ms / 1000, logfile);
		}
		nanosleep(&delay, NULL);
		waited += 2;
	}
}

/* sshd's command line for body B; *owned holds the strings to free
 * (pbx_body_argv_free).  It runs in the foreground (-D) in a session of
 * its own, so the caller sees it die rather than waiting out a timeout (a
 * daemonizing sshd forks before it binds, and its parent exits 0 either
 * way).  Sessions get the body's own HOME, as on a fresh cloud image: the
 * host's dotfiles are not the node's (a host .bashrc runs in every SSH
 * session, bash sources it for commands run by sshd). */
static const char **body_sshd_argv(const struct pbx_body *b, const char *hostkey,
				   const char *pidfile, const char *logfile, char ***owned)
{
	static const char *const fixed[] = { "-o", "StrictModes=no",
					     "-o", "PermitRootLogin=prohibit-password",
					     "-o", "PasswordAuthentication=no",
					     "-o", "KbdInteractiveAuthentication=no",
					     "-o", "Subsystem=sftp internal-sftp",
					     "-o", "MaxStartups=200:30:400",
					     "-o", "MaxSessions=200",
					     "-o", "UseDNS=no",
					     NULL };
	size_t naddr = 0, i, k = 0, o = 0;
	const char **argv;
	while (b->addresses[naddr])
		naddr++;
	argv = xcalloc(2 * naddr + 40, sizeof(*argv));
	*owned = xcalloc(naddr + 4, sizeof(**owned));
	argv[k++] = "/usr/sbin/sshd";
	argv[k++] = "-D";
	argv[k++] = "-f";
	argv[k++] = "/dev/null";
	argv[k++] = "-h";
	argv[k++] = hostkey;
	argv[k++] = "-E";
	argv[k++] = logfile;
	for (i = 0; i < naddr; i++) {
		argv[k++] = "-o";
		argv[k++] = (*owned)[o++] =
			xasprintf("ListenAddress=%s:%d", b->addresses[i], b->port);
	}
	/* Paths are quoted: sshd splits unquoted config values at spaces. */
	argv[k++] = "-o";
	/* the login user's own file too, as on a VM (the head's key: docs/head-identity.md) */
	argv[k++] = (*owned)[o++] =
		xasprintf("AuthorizedKeysFile=\"%s\" \"%s/.ssh/authorized_keys\"",
			  b->authorized_keys, b->home);
	argv[k++] = "-o";
	argv[k++] = (*owned)[o++] = xasprintf("PidFile=\"%s\"", pidfile);
	argv[k++] = "-o";
	argv[k++] = (*owned)[o++] =
		xasprintf("SetEnv=\"HOME=%s\" \"PBX_BODY_ROOT=%s\"", b->home, b->root);
	for (i = 0; fixed[i]; i++)
		argv[k++] = fixed[i];
	return argv;
}

static void body_argv_free(const char **argv, char **owned)
{
	size_t i;
	for (i = 0; owned[i]; i++)
		free(owned[i]);
	free(owned);
	free(argv);
}

/* Starts the body's sshd unless it already runs, and waits until it
 * listens. */
static int body_start_sshd(const struct pbx_body *b, struct pbx_err *err)
{
	char *hostkey = xasprintf("%s/etc/ssh/ssh_host_ecdsa_key", b->root);
	char *pidfile = xasprintf("%s/run/sshd.pid", b->root);
	char *logfile = xasprintf("%s/var/log/sshd.log", b->root);
	char **owned;
	const char **argv = body_sshd_argv(b, hostkey, pidfile, logfile, &owned);
	int rc = 0;
	if (!body_pid_alive(pidfile, "sshd")) {
		off_t log_from = body_file_size(logfile);
		pid_t pid;
		unlink(pidfile); /* stale: its pid may be reused before sshd writes it */
		rc = body_hostkey(hostkey, err);
		if (rc == 0)
			rc = pbx_spawn_detached(argv, &pid, err);
		if (rc == 0)
			rc = body_wait_sshd(pid, pidfile, logfile, log_from, 10000, err);
	}
	body_argv_free(argv, owned);
	free(hostkey);
	free(pidfile);
	free(logfile);
	return rc;
}

/* Whether S can stand between double quotes in an sshd config value. */
static int body_quotable(const char *s)
{
	return !strpbrk(s, "\"\\\n");
}

/* A body whose sshd has ended may still be shutting down: autostop's
 * watcher ends last, a few seconds after sshd, killing what it finds of
 * the body (templates/autostop.sh).  A start waits for that, as a cloud
 * starts no instance while it is STOPPING: otherwise the new sshd could
 * be swept away, and the bootstrap would find the old watcher alive and
 * start none (the cluster would never stop itself again).  At most
 * BODY_HALT_WAIT_MS: what is left then is no shutdown (e.g. a shell whose
 * directory is in the body), and the start goes on. */
#define BODY_HALT_WAIT_MS 15000
static void body_wait_halted(const char *root)
{
	char *dir = xasprintf("%s/", root);
	int waited;
	for (waited = 0; waited < BODY_HALT_WAIT_MS; waited += 100) {
		pid_t *pids = NULL;
		size_t n = pbx_local_procs_find(dir, &pids);
		free(pids);
		if (!n)
			break;
		usleep(100 * 1000);
	}
	free(dir);
}

int pbx_body_start(const struct pbx_body *b, struct pbx_err *err)
{
	static const char *const subdirs[] = { "etc/ssh", "run", "var/log", NULL };
	size_t i;
	if (!b->addresses || !b->addresses[0])
		return pbx_err_set(err, "node body %s: no address to listen on", b->root);
	if (!body_quotable(b->root) || !body_quotable(b->home) || strchr(b->home, '%') ||
	    !body_quotable(b->authorized_keys))
		return pbx_err_set(
			err,
			"node body %s: a path with a quote, backslash, newline (or %% in "
			"its home) cannot "
			"go into sshd's configuration",
			b->root);
	for (i = 0; subdirs[i]; i++) {
		char *d = xasprintf("%s/%s", b->root, subdirs[i]);
		int rc = pbx_mkdir_p(d, 0755, err);
		free(d);
		if (rc < 0)
			return -1;
	}
	if (pbx_mkdir_p(b->home, 0700, err) < 0)
		return -1;
	if (mkdir("/run/sshd", 0755) < 0 && errno != EEXIST)
		return pbx_err_set(err, "cannot create /run/sshd: %s", strerror(errno));
	if (!pbx_body_running(b->root))
		body_wait_halted(b->root);
	return body_start_sshd(b, err);
}

int pbx_body_layout(int port_base, int ports, int nodes, const char *dir,
		    struct pbx_slurm_layout *l, struct pbx_err *err)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	char *bin;
	memset(l, 0, sizeof(*l));
	if (gethostname(l->ctld_host, sizeof(l->ctld_host) - 1) < 0)
		return pbx_err_set(err, "gethostname: %s", strerror(errno));
	l->ctld_host[strcspn(l->ctld_host, ".")] = '\0';
	l->ctld_port = port_base;
	l->node_port_base = port_base;
	l->srun_port_lo = port_base + ports / 2;
	l->srun_port_hi = port_base + ports - 1;
	l->node_cpus = cpus > 0 ? (int)cpus : 1;
	/* Node bodies share this machine's memory: give each an equal part so
	 * --mem requests schedule as they would on real nodes. */
	if (pages > 0 && psize > 0 && nodes > 0)
		l->node_mem_mb = (long)((double)pages * (double)psize / 1048576.0 * 0.8 / nodes);
	l->same_host = 1;
	l->slurm_user = "root";
	l->bootstrap_mode = "direct";
	l->extra = "DebugFlags=NO_CONF_HASH\nSlurmdParameters=config_overrides";
	snprintf(l->shared_dir, sizeof(l->shared_dir), "%s/shared", dir);
	snprintf(l->ctld_lock, sizeof(l->ctld_lock), "%s/slurmctld-starting.lock", dir);
	bin = pbx_find_pbx_train(); /* node bodies link to the local build */
	if (bin && strlen(bin) < sizeof(l->train_bin))
		snprintf(l->train_bin, sizeof(l->train_bin), "%s", bin);
	free(bin);
	/* A requeued (preempted) task starts again after this many seconds,
	 * not SLURM's 120; step launches here take well under a second. */
	l->cred_expire = 15;
	return 0;
}

int pbx_body_running(const char *root)
{
	char *pidfile = xasprintf("%s/run/sshd.pid", root);
	int pid = body_pid_alive(pidfile, "sshd");
	free(pidfile);
	return pid > 0;
}
