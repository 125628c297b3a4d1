"""Command-line entry points, one module per command (`debug-hang SUBCOMMAND`, the scripts/ wrappers)."""
