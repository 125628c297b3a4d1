#!/usr/bin/env python3
"""Classify every thread of a stack dump by hang pattern (see --help).

Standalone: runs from a plain checkout with only ray[default], py-spy and pyyaml installed.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from debug_hang.commands.match import main  # noqa: E402
from debug_hang.errors import run_main  # noqa: E402

if __name__ == "__main__":
    run_main(main, "match_patterns.py")
