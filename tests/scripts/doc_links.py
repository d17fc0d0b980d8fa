"""doc_links.py SOURCE_DIR - every relative link of the repository's
Markdown files ([text](path) and [text](path#anchor)) names a file or
folder that exists; URLs (scheme:...) and in-page anchors are not
checked.  Prints each broken link with its file and line; exit 1 if any."""

import os
import re
import subprocess
import sys

LINK = re.compile(r"\]\(([^)\s#]+)(#[^)]*)?\)")


def markdown_files(root):
    """The repository's Markdown files: git's list, else a walk that
    leaves out build trees and hidden folders."""
    git = subprocess.run(["git", "-C", root, "ls-files", "*.md"], capture_output=True, text=True)
    if git.returncode == 0 and git.stdout.strip():
        return git.stdout.split()
    found = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith((".", "build"))]
        found += [os.path.relpath(os.path.join(d, x), root) for x in names if x.endswith(".md")]
    return found


def main(root):
    files = markdown_files(root)
    bad = 0
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                for m in LINK.finditer(line):
                    target = m.group(1)
                    if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target) or "{" in target:
                        continue
                    path = os.path.normpath(os.path.join(root, os.path.dirname(f), target))
                    if not os.path.exists(path):
                        print("%s:%d: a link to %s, which does not exist" % (f, n, target))
                        bad += 1
    print("%d Markdown files, %d broken links" % (len(files), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
