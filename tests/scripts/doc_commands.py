#!/usr/bin/env python3
"""doc_commands.py - every `pbx` command the docs show is one pbx takes.

    python3 doc_commands.py SOURCE_DIR PBX

Reads README.md, docs/*.md and tests/README.md (every `pbx ...` code span
in their prose too, where only the verb and options must be right) and
the man pages' EXAMPLES; in each fenced or indented code
block takes every command that runs pbx (`pbx` first, after a `$ ` prompt, a
`VAR=value` or sudo, or after `&&`, `;` or `|`), joins backslash continuations,
cuts it at a comment, a pipe, `&&`, `;` or a redirection, and asks
`PBX __check ARGS`: the verb, the subcommand, the options and the count of
positional arguments checked as for a run, nothing run.  Prints each
refused command with its file and line and pbx's message; exit 1 if any.
"""

import os
import re
import shlex
import subprocess
import sys

DOCS = ["README.md", "tests/README.md"]
FENCE = re.compile(r"^\s*(```|~~~)")
LEAD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")  # VAR=value before the command
CUT = {"|", "||", "&&", ";", ">", ">>", "<", "2>", "2>&1", "&"}


def doc_files(src):
    """The Markdown files whose commands are checked."""
    files = [os.path.join(src, f) for f in DOCS]
    docs = os.path.join(src, "docs")
    if os.path.isdir(docs):
        files += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    return [f for f in files if os.path.isfile(f)]


def code_lines(path):
    """(line number, text) of each logical line of code: inside fenced
    blocks, and indented blocks (4 spaces or a tab after a blank line or
    another such line)."""
    inside, pending, start, indented, blank = False, "", 0, False, True
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                inside, pending = not inside, ""
                continue
            if not inside:
                is_code = (line.startswith("    ") or line.startswith("\t")) and (blank or indented)
                indented = is_code
                blank = not line.strip()
                if not is_code and not pending:
                    continue
            text = line.rstrip("\n")
            if not pending:
                start = n
            if text.endswith("\\"):
                pending += text[:-1] + " "
                continue
            yield start, pending + text
            pending = ""


def pbx_runs(text):
    """Each pbx command in one shell line, as its argument list."""
    text = re.sub(r"^\s*[$#]\s+", "", text)  # a prompt
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        return
    runs, cur, at_start = [], None, True
    for w in words:
        if w in CUT or re.match(r"^[0-9]?[<>]", w):
            if cur is not None:
                runs.append(cur)
            cur, at_start = None, True
            continue
        if cur is not None:
            cur.append(w)
        elif at_start and w == "pbx":
            cur = []
        elif at_start and (LEAD.match(w) or w in ("sudo", "env", "time", "nohup")):
            pass  # still the command's position
        else:
            at_start = False
    if cur is not None:
        runs.append(cur)
    for r in runs:
        if r and not r[0].startswith("__"):  # the hidden verbs (__complete)
            yield r


INLINE = re.compile(r"`(pbx [^`]+)`")
# what an inline mention may leave out: its arguments (prose names a verb
# and an option, not a whole command)
INLINE_OK = ("missing argument", "too many arguments", "requires an argument", "expected a COMMAND")


def inline_runs(path):
    """(line number, args) of each `pbx ...` code span in prose."""
    inside = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                inside = not inside
            if inside or line.startswith("    "):
                continue
            for m in INLINE.finditer(line):
                text = re.sub(r"\[[^]]*\]|\.\.\.|…", " ", m.group(1))
                for args in pbx_runs(text):
                    yield n, args


def man_lines(path):
    """(line number, text) of each line of a man page's EXAMPLES, unescaped
    (the other pages' code blocks come from the docs, checked there)."""
    inside, examples = False, False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.startswith(".SH"):
                examples = line.split(None, 1)[1].strip().strip('"') == "EXAMPLES"
            elif line.startswith(".nf"):
                inside = True
            elif line.startswith(".fi"):
                inside = False
            elif inside and examples and not line.startswith("."):
                yield n, line.rstrip("\n").replace("\\-", "-").replace("\\(aq", "'").replace("\\e", "\\")


def check(pbx, env, args, lenient):
    """pbx's refusal of args (its first line), or None."""
    p = subprocess.run([pbx, "__check"] + args, capture_output=True, text=True, env=env)
    if p.returncode == 0:
        return None
    msg = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[0]
    if lenient and any(w in msg for w in INLINE_OK):
        return None
    return msg


def runs_in(src):
    """(file, line, args, lenient) of every pbx command the docs show."""
    for path in doc_files(src):
        rel = os.path.relpath(path, src)
        for n, line in code_lines(path):
            for args in pbx_runs(line):
                yield rel, n, args, False
        for n, args in inline_runs(path):
            yield rel, n, args, True
    man = os.path.join(src, "man")
    for page in sorted(os.listdir(man)) if os.path.isdir(man) else []:
        for n, line in man_lines(os.path.join(man, page)):
            for args in pbx_runs(line):
                yield os.path.join("man", page), n, args, False


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: doc_commands.py SOURCE_DIR PBX")
    src, pbx = argv
    checked, bad = 0, []
    env = dict(os.environ, PBX_HOME="/nonexistent/pbx-doc-commands")
    for rel, n, args, lenient in runs_in(src):
        checked += 1
        msg = check(pbx, env, args, lenient)
        if msg:
            bad.append("%s:%d: pbx %s\n    %s" % (rel, n, " ".join(args), msg))
    for b in bad:
        print(b)
    print("%d pbx commands in the docs checked, %d refused" % (checked, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
