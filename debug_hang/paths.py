"""Where the bundle's data lives: the checkout (scripts/, references/, examples/ beside this
package) or, in an installed wheel, `debug_hang/_bundle/` (pyproject force-includes them there)."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def bundle_root() -> Path:
    """The folder holding SKILL.md, scripts/, references/ and examples/."""
    installed = PACKAGE_DIR / "_bundle"
    return installed if (installed / "references").is_dir() else PACKAGE_DIR.parent
