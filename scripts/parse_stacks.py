#!/usr/bin/env python3
"""Read stack dumps of any format (py-spy text/JSON, `ray stack`, faulthandler, a diagnose
folder) into the debug-hang/stacks/v1 model; --group folds them and names the outliers.
Run with --help for the formats, the options and the exit codes."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from debug_hang.commands.parse import PROG, main  # noqa: E402
from debug_hang.errors import run_main  # noqa: E402

if __name__ == "__main__":
    run_main(main, PROG)
