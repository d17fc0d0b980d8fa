/*
 * pyserver.h - starts a Python test server on 127.0.0.1 for a C test and
 * stops it again.  The script gets a port-file path as its first argument
 * (then the given extra ones), binds a free port and writes the number
 * there; pyserver_start waits (up to 10 s) for the file.
 */
#ifndef PBX_TESTS_PYSERVER_H
#define PBX_TESTS_PYSERVER_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct pyserver {
	pid_t pid;
	int port;
	char portfile[256];
};

/* argv extra: NULL-terminated list (may be NULL).  Returns 0 or -1. */
static inline int pyserver_start(struct pyserver *s, const char *script, const char *dir,
				 const char *const *extra)
{
	const char *argv[16];
	int i, n = 0;
	snprintf(s->portfile, sizeof(s->portfile), "%s/port.%d", dir, (int)getpid());
	unlink(s->portfile);
	argv[n++] = "python3";
	argv[n++] = script;
	argv[n++] = s->portfile;
	for (i = 0; extra && extra[i] && n < 15; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	s->pid = fork();
	if (s->pid < 0)
		return -1;
	if (s->pid == 0) {
		execvp("python3", (char *const *)argv);
		_exit(127);
	}
	for (i = 0; i < 1000; i++) {
		FILE *f = fopen(s->portfile, "r");
		struct timespec ts = { 0, 10000000 };
		if (f) {
			int ok = fscanf(f, "%d", &s->port) == 1;
			fclose(f);
			if (ok)
				return 0;
		}
		if (waitpid(s->pid, NULL, WNOHANG) == s->pid)
			return -1;
		nanosleep(&ts, NULL);
	}
	return -1;
}

static inline void pyserver_stop(struct pyserver *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		waitpid(s->pid, NULL, 0);
		s->pid = 0;
	}
	unlink(s->portfile);
}

#endif
