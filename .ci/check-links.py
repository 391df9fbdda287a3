#!/usr/bin/env python3
"""Checks that no reference in the repository points at a missing file or
outside the repository.

  python3 .ci/check-links.py

Over the files git knows (tracked, plus untracked ones that are not ignored,
so that a change can be checked before it is committed):

  1. every Markdown file (*.md): each relative link or image target,
     [text](path) and ![alt](path), and each reference definition
     [label]: path, must exist relative to the file (a #fragment is stripped;
     http(s):, mailto: and other URLs and pure #anchors are skipped; fenced
     code blocks and inline code are skipped). An absolute path, or one that
     leaves the repository, is an error;
  2. every text file but this one: each mention of a Markdown file under
     docs/ (a path that starts with docs/ and ends in .md) and of
     CONTRIBUTING.md must exist relative to the repository root;
  3. every text file but this one: any mention of ../shared/ is an error
     (the shared design files live outside the repository).

Prints one line per problem, "file:line: message", and exits 1 if there is
any; otherwise prints a one-line summary and exits 0. Standard library only.
"""
import os
import re
import subprocess
import sys
from urllib.parse import unquote

SELF = ".ci/check-links.py"
# [text](target) or ![alt](target), with an optional "title"; <target> too.
INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
DOCS_PATH = re.compile(
    r"(?<![A-Za-z0-9_./-])(docs/[A-Za-z0-9_./-]+\.md|CONTRIBUTING\.md)"
    r"(?![A-Za-z0-9_-])")
SHARED = "../shared/"


def repo_root():
    out = subprocess.run(["git", "rev-parse", "--show-toplevel"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def repo_files(root):
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, capture_output=True, check=True)
    names = {n for n in out.stdout.decode("utf-8", "replace").split("\0") if n}
    # A file deleted in the working tree but still in the index is gone.
    return sorted(n for n in names if os.path.isfile(os.path.join(root, n)))


def read_text(path):
    """The file's lines, or None for a binary file."""
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", "replace").splitlines()


def markdown_targets(lines):
    """(line number, target) of every link outside code."""
    in_fence = None
    for number, line in enumerate(lines, 1):
        fence = FENCE.match(line)
        if fence:
            if in_fence is None:
                in_fence = fence.group(1)
            elif fence.group(1) == in_fence:
                in_fence = None
            continue
        if in_fence is not None:
            continue
        text = INLINE_CODE.sub("", line)
        for m in INLINE_LINK.finditer(text):
            yield number, m.group(1)
        m = REFERENCE_DEF.match(text)
        if m:
            yield number, m.group(1)


def check_link(root, name, target):
    """A problem with one Markdown link target, or None."""
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    if not target or target.startswith("#") or URL_SCHEME.match(target):
        return None
    path = unquote(target.split("#", 1)[0])
    if not path:
        return None
    if os.path.isabs(path):
        return "link to an absolute path leaves the repository: %s" % target
    resolved = os.path.normpath(
        os.path.join(root, os.path.dirname(name), path))
    if os.path.relpath(resolved, root).startswith(".."):
        return "link leaves the repository: %s" % target
    if not os.path.exists(resolved):
        return "broken link: %s (no %s)" % (target, os.path.relpath(resolved, root))
    return None


def main():
    root = repo_root()
    problems = []
    markdown = links = mentions = 0
    for name in repo_files(root):
        lines = read_text(os.path.join(root, name))
        if lines is None:
            continue
        if name.endswith(".md"):
            markdown += 1
            for number, target in markdown_targets(lines):
                links += 1
                problem = check_link(root, name, target)
                if problem:
                    problems.append("%s:%d: %s" % (name, number, problem))
        if name == SELF:
            continue
        for number, line in enumerate(lines, 1):
            for m in DOCS_PATH.finditer(line):
                mentions += 1
                if not os.path.isfile(os.path.join(root, m.group(1))):
                    problems.append("%s:%d: names a missing file: %s"
                                    % (name, number, m.group(1)))
            if SHARED in line:
                problems.append("%s:%d: points outside the repository: %s"
                                % (name, number, SHARED))
    for p in problems:
        print(p)
    if problems:
        print("check-links: %d problem(s)" % len(problems), file=sys.stderr)
        return 1
    print("check-links: %d Markdown files, %d links, %d docs paths named: all resolve"
          % (markdown, links, mentions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
