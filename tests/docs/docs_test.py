#!/usr/bin/env python3
"""The docs test: what README.md and the docs say can be run, runs.

Two checks over README.md, docs/*.md and every other README.md of the repository:

1. Runnable commands. A code block (indented or fenced) right after a marker line

       <!-- runnable -->                 every command must exit 0
       <!-- runnable: exit 1 -->         ... must exit 1
       <!-- runnable: nvrtc -->          ... needs CUDA's NVRTC (skipped, and said so, where morgana finds none)
       <!-- runnable: gpu -->            ... needs an NVIDIA GPU (skipped, and said so, where `morgana devices` fails)

   is run line by line in a scratch folder that mirrors the source root (its top-level entries linked) with `build`
   linked to the build folder under test, so `build/morgana ...` and `examples/...` mean what they mean in a
   checkout; each document's blocks run in order in one folder, so a later block reads what an earlier one wrote.
   A block whose lines start with `$ ` is a transcript: those lines are the commands and the lines after each are
   its key output, which must appear in that order among the lines the command prints (stdout and stderr); `...`
   inside a line stands for any text, a line of only `...` for any number of lines. In any other block every line
   is a command, except comment lines (`# ...`, also an indented comment continuing the line above); a line
   ending in `\\` continues on the next.

2. References. Every relative Markdown link, and every `path` in backquotes that starts with a folder of the
   repository, names a file or folder that exists (a `*` in it must match one; a file the build makes from
   `PATH.in` and an output folder the repository ignores, such as bench/out, count), and every document named (`NAME.md`) is one of the repository's files, so the docs do
   not point outside the repository or at files that moved. Target files (targets/**/*.toml) are checked too:
   their comments cite sources.

usage: docs_test.py --source ROOT --build BUILD_DIR [FILE.md ...]
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

MARKER = re.compile(r"^\s*<!--\s*runnable(?::\s*(?P<opts>[^>]*?))?\s*-->\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
BACKQUOTED = re.compile(r"`([^`\s]+)`")
DOCUMENT_NAME = re.compile(r"(?<![\w/.*<-])([A-Za-z][\w-]*\.md)\b")
COMMAND_TIMEOUT_S = 300


class Block:
    def __init__(self, doc, line, opts, lines, first):
        # line: the marker's line number; first: the line number of lines[0]
        self.doc, self.line, self.opts, self.lines, self.first = doc, line, opts, lines, first


def parse_options(text, where):
    """'gpu; exit 1' -> {'gpu': True, 'exit': 1}."""
    opts = {"gpu": False, "nvrtc": False, "exit": 0}
    for part in filter(None, (p.strip() for p in (text or "").split(";"))):
        words = part.split()
        if words in (["gpu"], ["nvrtc"]):
            opts[words[0]] = True
        elif len(words) == 2 and words[0] == "exit" and words[1].isdigit():
            opts["exit"] = int(words[1])
        else:
            raise SystemExit(f"{where}: unknown runnable option '{part}' (known: gpu, nvrtc, exit N)")
    return opts


def code_block_at(lines, i):
    """The code block starting at line index i (after blank lines): (its lines, dedented; index of the first)."""
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i < len(lines) and FENCE.match(lines[i]):
        fence = FENCE.match(lines[i]).group(1)
        body, first = [], i + 1
        i = first
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        return body, first
    if i < len(lines) and lines[i].startswith("    "):
        body, first = [], i
        while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
            body.append(lines[i][4:])
            i += 1
        while body and not body[-1].strip():
            body.pop()
        return body, first
    return None, i


def runnable_blocks(doc, text):
    lines = text.split("\n")
    blocks = []
    for i, line in enumerate(lines):
        m = MARKER.match(line)
        if not m:
            continue
        where = f"{doc}:{i + 1}"
        body, first = code_block_at(lines, i + 1)
        if body is None:
            raise SystemExit(f"{where}: a runnable marker must be followed by a code block")
        blocks.append(Block(doc, i + 1, parse_options(m.group("opts"), where), body, first + 1))
    return blocks


def commands_of(block):
    """[(line number, command, [expected output lines])] of a block."""
    if any(l.startswith("$ ") for l in block.lines):
        out = []
        for n, l in enumerate(block.lines, block.first):
            if l.startswith("$ "):
                out.append((n, l[2:], []))
            elif out:
                out[-1][2].append(l)
        return [(n, c, [e for e in exp if e.strip()]) for n, c, exp in out]
    out, pending, start = [], "", 0
    for n, l in enumerate(block.lines, block.first):
        s = l.strip()
        if not pending and (not s or s.startswith("#")):
            continue
        start = start or n
        if s.endswith("\\"):
            pending += s[:-1] + " "
            continue
        out.append((start, pending + s, []))
        pending, start = "", 0
    return out


def line_pattern(expected):
    return re.compile(".*".join(re.escape(p) for p in expected.strip().split("...")) + r"\s*$")


def missing_output(expected, actual):
    """The first expected line not found (in order) among the actual lines, or None."""
    lines = [l.rstrip() for l in actual.split("\n")]
    pos = 0
    for e in expected:
        if e.strip() == "...":
            continue
        pat = line_pattern(e)
        while pos < len(lines) and not pat.match(lines[pos].strip()):
            pos += 1
        if pos == len(lines):
            return e
        pos += 1
    return None


def scratch_checkout(source, build):
    """A folder whose entries link to the source root's, with build -> the build folder."""
    root = tempfile.mkdtemp(prefix="morgana-docs-test.")
    for entry in os.listdir(source):
        if entry.startswith(".") or entry.startswith("build"):
            continue
        os.symlink(os.path.join(source, entry), os.path.join(root, entry))
    os.symlink(os.path.abspath(build), os.path.join(root, "build"))
    os.makedirs(os.path.join(root, ".cache"))
    return root


def run_block(block, cwd, env):
    failures = []
    for n, command, expected in commands_of(block):
        try:
            p = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                               timeout=COMMAND_TIMEOUT_S)
            code, output = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired:
            code, output = "timeout", f"(still running after {COMMAND_TIMEOUT_S} s)"
        where = f"{block.doc}:{n}: `{command.split('  #')[0].strip()}`"
        if code != block.opts["exit"]:
            failures.append(f"{where}: exit {code}, the doc expects {block.opts['exit']}\n{tail(output)}")
            break  # later commands of the block may read what this one should have written
        if (miss := missing_output(expected, output)) is not None:
            failures.append(f"{where}: output lacks the line '{miss}' (in the doc's order)\n{tail(output)}")
        else:
            print(f"ok   {where}")
    return failures


def tail(text, n=25):
    lines = text.rstrip().split("\n")
    return "\n".join("    | " + l for l in lines[-n:])




def reference_failures(doc, text, source, folders, tracked_names):
    """Links and backquoted repository paths that name nothing in the repository."""
    base = os.path.dirname(os.path.join(source, doc))
    failures = []
    for n, line in enumerate(text.split("\n"), 1):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            if not glob.glob(os.path.normpath(os.path.join(base, target))):
                failures.append(f"{doc}:{n}: link to '{target}', which does not exist")
        for path in BACKQUOTED.findall(line):
            path = path.rstrip(".,;:)")
            top = path.split("/")[0]
            if "/" not in path or top not in folders or "<" in path or "{" in path:
                continue
            if glob.glob(os.path.join(source, path)) or os.path.exists(os.path.join(source, path + ".in")):
                continue
            # An output folder the repository ignores (bench/out): named by the docs, made by a command.
            ignored = subprocess.run(["git", "check-ignore", "--no-index", path, path.rstrip("/") + "/x"],
                                     cwd=source, capture_output=True)
            if ignored.returncode != 0:
                failures.append(f"{doc}:{n}: `{path}` does not exist in the repository")
        for name in DOCUMENT_NAME.findall(line):
            if tracked_names is not None and name not in tracked_names:
                failures.append(f"{doc}:{n}: names {name}, which is not in the repository")
    return failures


def documents(source, named):
    if named:
        return named
    listed = subprocess.run(["git", "ls-files", "README.md", "docs/*.md", "*/README.md", "targets/*.toml"],
                            cwd=source,
                            capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout.strip():
        return sorted(set(listed.stdout.split()))
    return sorted(["README.md"] + [os.path.relpath(p, source) for p in glob.glob(f"{source}/docs/*.md")] +
                  [os.path.relpath(p, source) for p in glob.glob(f"{source}/*/**/README.md", recursive=True)] +
                  [os.path.relpath(p, source) for p in glob.glob(f"{source}/targets/**/*.toml", recursive=True)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("docs", nargs="*", help="documents, relative to the source root (default: all)")
    args = ap.parse_args()
    source = os.path.abspath(args.source)
    # The repository's top-level folders (a backquoted path starting with one is checked) and the base names of its
    # files (None outside a git checkout: document names are not checked then).
    folders = {e for e in os.listdir(source) if os.path.isdir(os.path.join(source, e)) and
               not e.startswith(".") and not e.startswith("build") and e != "gpu-pack"}
    tracked = subprocess.run(["git", "ls-files"], cwd=source, capture_output=True, text=True)
    tracked_names = None
    if tracked.returncode == 0 and tracked.stdout.strip():
        tracked_names = {os.path.basename(f) for f in tracked.stdout.split()}
    failures, skipped, ran = [], [], 0
    # What this machine lacks, found out the first time a block needs it: a reason to skip, or "".
    lacks = {}

    def lacking(need):
        if need not in lacks:
            morgana = os.path.join(args.build, "morgana")
            if need == "gpu":
                p = subprocess.run([morgana, "devices"], capture_output=True, text=True)
                lacks[need] = "" if p.returncode == 0 else "no NVIDIA GPU here"
            else:
                with tempfile.TemporaryDirectory() as d:
                    p = subprocess.run([morgana, "compile", os.path.join(source, "examples/embed/add.mg"), "--target",
                                        "h100", "--no-ptx", "--quiet", "-o", os.path.join(d, "add.mgb")],
                                       capture_output=True, text=True)
                lacks[need] = "no NVRTC here" if "NVRTC (the CUDA runtime compiler) was not found" in p.stderr else ""
        return lacks[need]

    for doc in documents(source, args.docs):
        text = open(os.path.join(source, doc), encoding="utf-8").read()
        failures += reference_failures(doc, text, source, folders, tracked_names)
        blocks = runnable_blocks(doc, text)
        if not blocks:
            continue
        cwd = scratch_checkout(source, args.build)
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(cwd, ".cache"))
        try:
            for block in blocks:
                why = next((lacking(n) for n in ("nvrtc", "gpu") if block.opts[n] and lacking(n)), "")
                if why:
                    skipped.append(f"{doc}:{block.line} ({why})")
                    continue
                failures += run_block(block, cwd, env)
                ran += 1
        finally:
            shutil.rmtree(cwd, ignore_errors=True)
    if skipped:
        print(f"skipped: the blocks at {', '.join(skipped)}")
    for f in failures:
        print(f"FAIL {f}")
    print(f"docs test: {ran} runnable block(s) run, {len(skipped)} skipped, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
