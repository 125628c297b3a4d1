"""`python -m debug_hang ...` = the `debug-hang` command (used by the standalone scripts)."""

from debug_hang.commands.cli import entry

entry()
