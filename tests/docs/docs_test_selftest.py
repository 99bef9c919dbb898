#!/usr/bin/env python3
"""The docs test's own checks: a marked block is found in either code-block form, a command's exit code and
key output are held to what the doc says, and dangling references are reported. Runs docs_test.py on small
documents in a scratch repository whose `build/morgana` is a shell script."""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))

DOC = textwrap.dedent("""\
    # A doc

    See [the other doc](other.md) and `examples/a.mg`.

    <!-- runnable -->

        build/morgana hello        # indented block
                                   # a comment continuing the line above
        build/morgana \\
          hello

    <!-- runnable: exit 1 -->

    ```
    $ build/morgana fail
    error: ... went wrong
    ```

    <!-- runnable -->

    ```
    $ build/morgana hello
    hello ... world
    ...
    bye
    ```
    """)

BROKEN = textwrap.dedent("""\
    A [dangling link](missing.md), and `examples/missing.mg`.

    <!-- runnable -->

    ```
    $ build/morgana hello
    hello there
    $ build/morgana fail
    ```
    """)

NEEDS = textwrap.dedent("""\
    <!-- runnable: nvrtc -->

        build/morgana compile x.mg

    <!-- runnable: gpu -->

        build/morgana devices
    """)

MORGANA = textwrap.dedent("""\
    #!/bin/sh
    case "$1" in
      hello) echo "hello big world"; echo "middle"; echo "bye" ;;
      fail) echo "error: it went wrong" >&2; exit 1 ;;
      devices) echo "error: no NVIDIA driver found" >&2; exit 1 ;;
      compile) [ -n "$SELFTEST_NO_NVRTC" ] || exit 0
               echo "error: NVRTC (the CUDA runtime compiler) was not found; ..." >&2; exit 1 ;;
    esac
    """)


def run(source, build, doc, env=None):
    p = subprocess.run([sys.executable, os.path.join(HERE, "docs_test.py"), "--source", source, "--build", build, doc],
                       capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    return p.returncode, p.stdout + p.stderr


def main():
    root = tempfile.mkdtemp(prefix="morgana-docs-selftest.")
    build = os.path.join(root, "build-x")
    os.makedirs(build)
    os.makedirs(os.path.join(root, "examples"))
    open(os.path.join(root, "examples", "a.mg"), "w").close()
    with open(os.path.join(build, "morgana"), "w") as f:
        f.write(MORGANA)
    os.chmod(os.path.join(build, "morgana"), 0o755)
    for name, text in {"good.md": DOC, "broken.md": BROKEN, "needs.md": NEEDS, "other.md": "x\n"}.items():
        with open(os.path.join(root, name), "w") as f:
            f.write(text)
    failures = []

    code, out = run(root, build, "good.md")
    if code != 0 or "3 runnable block(s) run" not in out or out.count("ok   good.md") != 4:
        failures.append(f"good.md should pass with 4 commands in 3 blocks:\n{out}")

    code, out = run(root, build, "broken.md")
    for expected in ["broken.md:1: link to 'missing.md', which does not exist",
                     "broken.md:1: `examples/missing.mg` does not exist in the repository",
                     "output lacks the line 'hello there'",
                     "broken.md:8: `build/morgana fail`: exit 1, the doc expects 0"]:
        if expected not in out:
            failures.append(f"broken.md: the report lacks '{expected}':\n{out}")
    if code == 0:
        failures.append("broken.md: exit 0")
    code, out = run(root, build, "needs.md")
    if code != 0 or "needs.md:5 (no NVIDIA GPU here)" not in out or "1 runnable block(s) run, 1 skipped" not in out:
        failures.append(f"needs.md: the gpu block should be skipped, the nvrtc one run:\n{out}")
    code, out = run(root, build, "needs.md", {"SELFTEST_NO_NVRTC": "1"})
    if code != 0 or "needs.md:1 (no NVRTC here)" not in out or "0 runnable block(s) run, 2 skipped" not in out:
        failures.append(f"needs.md without NVRTC: both blocks should be skipped:\n{out}")

    shutil.rmtree(root, ignore_errors=True)
    for f in failures:
        print("FAIL", f)
    print(f"docs test self-test: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
