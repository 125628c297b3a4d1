#!/usr/bin/env python3
"""List Ray nodes, or run one command on each chosen node (pinned, CPU-free helper task).

Thin entry point: works from a plain checkout (ray[default], py-spy, pyyaml installed) and when
shipped with `ray job submit --working-dir . -- python scripts/run_on_each_ray_node.py ...`.
Run with --help for the interface and the exit codes.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from debug_hang.commands.nodes import PROG, main  # noqa: E402
from debug_hang.errors import run_main  # noqa: E402

if __name__ == "__main__":
    run_main(main, PROG)
