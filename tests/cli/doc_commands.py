#!/usr/bin/env python3
"""doc_commands.py - every pbx command line the docs show names a real verb
(and subcommand), and `pbx parrun` / `pbx run` take the experiment before
the cluster.  Used by t0010-input.sh.

Usage: doc_commands.py PBX SOURCE_DIR
Prints one line per mistake ("FILE:LINE: ...") and exits 1 when there is one.

Command lines are taken from code, not prose: `inline code` in Markdown and
man pages, indented Markdown code blocks, comment and code lines of YAML and
shell files that start with "pbx ", and the examples of `pbx help VERB`.
"""
import glob
import os
import re
import subprocess
import sys

EXPERIMENT_ARG = re.compile(r"(\.ya?ml|\.conf|EXP|EXPERIMENT|\$|^\")")


def verbs_and_subcommands(pbx):
    def section(text, title):
        out, on = [], False
        for line in text.splitlines():
            if line.startswith(title):
                on = True
                continue
            if on and not line.strip():
                break
            if on:
                out.append(line.split()[0])
        return out

    verbs = section(subprocess.run([pbx, "--help"], capture_output=True, text=True).stdout,
                    "verbs:")
    subs = {}
    for v in verbs:
        text = subprocess.run([pbx, "help", v], capture_output=True, text=True).stdout
        found = section(text, "subcommands:")
        if found:
            subs[v] = found
    # the hidden verb of shell completion (src/cli/complete.c), which
    # `pbx --help` does not list
    return verbs + ["__complete"], subs


def commands_in(path, text):
    """(line number, command text) for each pbx command line in a file."""
    md = path.endswith((".md", ".1", ".5"))
    for n, line in enumerate(text.splitlines(), 1):
        for code in re.findall(r"`(pbx [^`]*)`", line):
            yield n, code
        if md:   # an indented code block
            m = re.match(r"^(?: {4}|\t)\s*(?:\$ )?(pbx [a-z].*)", line)
        else:    # a command line, or one shown indented in a comment
            m = re.match(r"^\s*(?:#\s{2,}|#\s*\$ |\$ )?(pbx [a-z].*)", line)
        if m:
            yield n, m.group(1)


def check(cmd, verbs, subs):
    words = cmd.split()[1:]
    while words and words[0].startswith("-"):
        words = words[1:] if words[0] not in ("-C", "--config") else words[2:]
    if not words or words[0] in ("help", "VERB"):
        return None
    verb = words[0]
    if verb not in verbs:
        return "unknown verb '%s' in '%s'" % (verb, cmd)
    args = [w for w in words[1:] if not w.startswith("-") and not w.startswith("[")]
    if verb in subs and args and args[0].isalpha() and args[0].islower() \
            and args[0] not in subs[verb]:
        return "unknown subcommand 'pbx %s %s' in '%s'" % (verb, args[0], cmd)
    if verb in ("parrun", "run") and args and not EXPERIMENT_ARG.search(args[0]):
        return "'%s': the experiment comes first (pbx %s EXPERIMENT CLUSTER)" % (cmd, verb)
    return None


def main():
    pbx, src = sys.argv[1], sys.argv[2]
    verbs, subs = verbs_and_subcommands(pbx)
    files = [os.path.join(src, f) for f in ("README.md", "BENCHMARKS.md")]
    for pattern in ("docs/**/*", "templates/**/*", "man/*", "src/**/*.md", "scripts/*.sh",
                    "bench/**/*.sh", "tests/**/*.md"):
        files += glob.glob(os.path.join(src, pattern), recursive=True)
    bad = []
    # docs.commands' fixture of refused commands (tests/scripts/doc-commands-bad)
    files = [f for f in files if "doc-commands-bad" not in f]
    for path in sorted(set(f for f in files if os.path.isfile(f))):
        try:
            text = open(path, encoding="utf-8").read()
        except UnicodeDecodeError:
            continue
        for n, cmd in commands_in(path, text):
            why = check(cmd, verbs, subs)
            if why:
                bad.append("%s:%d: %s" % (os.path.relpath(path, src), n, why))
    for v in verbs:
        if v in ("help", "version"):
            continue
        text = subprocess.run([pbx, "help", v], capture_output=True, text=True).stdout
        for n, cmd in commands_in("help", text):
            why = check(cmd, verbs, subs)
            if why:
                bad.append("pbx help %s: %s" % (v, why))
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
