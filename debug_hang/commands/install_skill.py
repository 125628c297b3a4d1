"""`debug-hang install-skill [DEST]`: install this bundle as an agent skill.

The skill lands in DEST/<name>/ where <name> is the `name` of SKILL.md's frontmatter (the Agent
Skills specification requires the folder to be named after the skill): SKILL.md, scripts/,
references/, examples/ and a copy of the `debug_hang` package, so that the scripts run from the
skill folder with nothing but ray[default], py-spy and pyyaml installed.

The bundle is found next to the package: in a checkout (SKILL.md beside debug_hang/), or in an
installed wheel (debug_hang/_bundle/, see pyproject's force-include).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

from debug_hang import paths
from debug_hang.errors import EXIT_CODES_HELP, EXIT_OK, BadInputError, NotFoundError, UsageError, run_main

PROG = "debug-hang install-skill"
PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the debug_hang package
DEFAULT_DEST = Path("~/.claude/skills")
BUNDLE_DIRS = ("scripts", "references", "examples")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", "_bundle", ".mypy_cache", ".pytest_cache")


def bundle_root() -> Path:
    """The folder holding SKILL.md, scripts/, references/ and examples/ for this installation."""
    candidate = paths.bundle_root()
    if (candidate / "SKILL.md").is_file() and all((candidate / d).is_dir() for d in BUNDLE_DIRS):
        return candidate
    raise NotFoundError(
        f"no skill bundle found beside {PACKAGE_DIR} (looked for _bundle/ and the checkout root): "
        "reinstall debug-hang, or run from a checkout")


def skill_name(skill_md: Path) -> str:
    """The `name` field of SKILL.md's YAML frontmatter."""
    text = skill_md.read_text(encoding="utf-8")
    if not text.startswith("---"):
        raise BadInputError(f"{skill_md} has no YAML frontmatter")
    try:
        front = yaml.safe_load(text.split("---", 2)[1])
    except (IndexError, yaml.YAMLError) as exc:
        raise BadInputError(f"{skill_md}: invalid frontmatter: {exc}") from None
    name = front.get("name") if isinstance(front, dict) else None
    if not isinstance(name, str) or not name:
        raise BadInputError(f"{skill_md}: frontmatter has no name")
    return name


def target_dir(dest: Path, name: str) -> Path:
    """DEST/<name>, or DEST itself when DEST is already named after the skill."""
    dest = dest.expanduser()
    return dest if dest.name == name else dest / name


def install(dest: Path, force: bool = False, source: Path | None = None) -> Path:
    """Copy the bundle into DEST/<name>/; returns that folder. Atomic: a failed copy leaves nothing."""
    root = source or bundle_root()
    name = skill_name(root / "SKILL.md")
    target = target_dir(dest, name)
    if target.exists() and not force:
        raise UsageError(f"{target} already exists: pass --force to replace it")
    if target.resolve() in (root.resolve(), PACKAGE_DIR.parent.resolve()):
        raise UsageError(f"{target} is the bundle itself: choose another DEST")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=target.parent))
    try:
        staging.chmod(0o777 & ~_umask())  # mkdtemp creates 0700; a skill folder is an ordinary folder
        shutil.copy2(root / "SKILL.md", staging / "SKILL.md")
        for sub in BUNDLE_DIRS:
            shutil.copytree(root / sub, staging / sub, ignore=IGNORE)
        shutil.copytree(PACKAGE_DIR, staging / PACKAGE_DIR.name, ignore=IGNORE)
        for script in (staging / "scripts").iterdir():
            if script.suffix in (".py", ".sh"):
                script.chmod(script.stat().st_mode | 0o111)
        if target.exists():
            old = target.with_name(f".{name}.old-{os.getpid()}")
            target.rename(old)
            shutil.rmtree(old)
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Install the debug-hang agent skill (SKILL.md, scripts/, references/, examples/ and the "
                    "debug_hang package) into DEST/debug-hang/.",
        epilog="examples:\n"
               "  debug-hang install-skill                       # ~/.claude/skills/debug-hang/\n"
               "  debug-hang install-skill .claude/skills        # a project's skills folder\n"
               "  debug-hang install-skill ~/.claude/skills --force   # replace an older copy\n\n"
               "A DEST already named debug-hang is used as the skill folder itself.\n\n" + EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("dest", nargs="?", type=Path, default=DEFAULT_DEST,
                        help="skills folder (default ~/.claude/skills/)")
    parser.add_argument("--force", action="store_true", help="replace an existing installation")
    parser.add_argument("--print-source", action="store_true",
                        help="print where the bundle is read from and exit")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.print_source:
        print(bundle_root())
        return EXIT_OK
    target = install(args.dest, force=args.force)
    files = sum(1 for p in target.rglob("*") if p.is_file())
    print(f"installed skill {target.name} into {target} ({files} files)")
    print(f"check it: {target / 'scripts' / 'diagnose_ray_hang.sh'} --help", file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":
    run_main(main, PROG)
