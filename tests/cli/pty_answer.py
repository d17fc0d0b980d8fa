#!/usr/bin/env python3
"""pty_answer.py - runs a command on a pseudo-terminal of its own (stdin,
stdout and stderr), waits for PROMPT in what it prints, then types ANSWER
(read from the file ANSWER_FILE, so that it is on no command line) and a
newline, as a person at a terminal would; prints everything the terminal
showed (echo included) and exits with the command's status.  For
cli.t0278-registry-login: a password prompt must not echo.  Stdlib only.

    python3 pty_answer.py PROMPT ANSWER_FILE COMMAND [ARGS...]
"""
import os
import pty
import select
import sys
import time


def main():
    prompt, answer_file, argv = sys.argv[1].encode(), sys.argv[2], sys.argv[3:]
    with open(answer_file, "rb") as f:
        answer = f.read().rstrip(b"\n")
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(argv[0], argv)
    seen, answered, deadline = b"", False, time.time() + 120
    while time.time() < deadline:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                data = os.read(fd, 4096)
            except OSError:  # EIO: the command closed the terminal
                break
            if not data:
                break
            seen += data
        if not answered and prompt in seen:
            os.write(fd, answer + b"\n")
            answered = True
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(seen.decode(errors="replace"))
    sys.exit(os.waitstatus_to_exitcode(status) if answered else 99)


if __name__ == "__main__":
    main()
