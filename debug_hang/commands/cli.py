"""The `debug-hang` command: one subcommand per step, plus `diagnose` and `demo`.

Each subcommand delegates to the same `main(argv)` the standalone script of that step calls, so
`debug-hang parse-stacks X` and `scripts/parse_stacks.py X` behave identically.
"""

from __future__ import annotations

import importlib
import sys

from debug_hang.errors import EXIT_CODES_HELP, EXIT_OK, EXIT_USAGE, run_main

SUBCOMMANDS = {
    "diagnose": ("debug_hang.commands.diagnose", "diagnose a hung Ray job end to end (= diagnose_ray_hang.sh)"),
    "watch": ("debug_hang.commands.watch", "follow a running job; diagnose it once when it stops making progress"),
    "demo": ("debug_hang.commands.demo", "start a local cluster, run a real hanging example, diagnose it"),
    "nodes": ("debug_hang.commands.nodes", "list nodes / run a command on each node (= run_on_each_ray_node.py)"),
    "parse-stacks": ("debug_hang.commands.parse", "parse stack dumps in any format, group them (= parse_stacks.py)"),
    "match": ("debug_hang.commands.match", "classify threads by hang pattern (= match_patterns.py)"),
    "fr": ("debug_hang.commands.fr", "analyse PyTorch Flight Recorder dumps: which rank never entered which collective"),
    "install-skill": ("debug_hang.commands.install_skill", "install this bundle as an agent skill"),
}

USAGE = "usage: debug-hang SUBCOMMAND [ARGS...]   (debug-hang SUBCOMMAND --help for details)\n\nsubcommands:\n" + "\n".join(
    f"  {name:<14} {text}" for name, (_, text) in SUBCOMMANDS.items()) + f"\n\n{EXIT_CODES_HELP}"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return EXIT_OK
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        print(f"debug-hang: unknown subcommand {name!r}\n{USAGE}", file=sys.stderr)
        return EXIT_USAGE
    module = importlib.import_module(SUBCOMMANDS[name][0])
    code: int = module.main(rest)
    return code


def entry() -> None:
    """Console-script entry point."""
    run_main(main, "debug-hang")


if __name__ == "__main__":
    entry()
