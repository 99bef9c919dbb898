"""`python3 -m bench prepare|run|selftest ...`: see bench/README.md, or `python3 -m bench COMMAND --help`."""

import sys

USAGE = """usage: python3 -m bench COMMAND [options]   (from the repository root)
  prepare   search and compile the specs into bundles plus a manifest (no GPU; needs a morgana build and NVRTC)
  run       check and time the bundles and the PyTorch baselines on this machine's GPU; table, JSON, results file
  selftest  check the spec reader and its PyTorch translation on the CPU (needs PyTorch, any version)
`python3 -m bench COMMAND --help` lists each command's options."""


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "prepare":
        from .prepare import main as run_command
    elif command == "run":
        from .run import main as run_command
    elif command == "selftest":
        from .selftest import main as run_command
    else:
        print(f"unknown command '{command}'\n{USAGE}", file=sys.stderr)
        return 2
    return run_command(rest)


if __name__ == "__main__":
    sys.exit(main())
