"""The agent skill: SKILL.md valid per the Agent Skills specification (checked with the skills-ref
validator on a copy installed by `debug-hang install-skill`), every script and command it and its
references name exists and answers --help, and the pattern table agrees with the catalog.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import skills_ref
import yaml

from debug_hang.analyse.patterns import DETECTS, EDGES, KINDS, catalog
from debug_hang.commands import install_skill
from debug_hang.commands.cli import SUBCOMMANDS
from debug_hang.errors import UsageError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import catalog_doc  # noqa: E402 - a maintainer tool, not part of the package

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
SKILL_MD = ROOT / "SKILL.md"
REFERENCE_DOCS = sorted((ROOT / "references").rglob("*.md"))
DOCS = [SKILL_MD, *REFERENCE_DOCS]
ALLOWED_KEYS = {"name", "description", "license", "allowed-tools", "metadata", "compatibility"}
# The words a responder types when a job hangs: the description must contain each.
RESPONDER_WORDS = ("hang", "hung", "stuck", "no progress", "GPU idle", "NCCL", "ray.get", "deadlock",
                   "collective", "all_reduce")
# Backticked kebab-case words in the docs that are not pattern ids (commands, flags, values).
NON_PATTERN_WORDS = {
    "debug-hang", "py-spy", "install-skill", "parse-stacks", "no-hang", "ray-head", "ray-worker",
    "placement-groups", "cluster-events", "rsync-up", "rsync-down", "node-id", "job-id", "ray-get",
    "log-uploader",  # a thread name in the logging_flush_deadlock case
    "py-bt", "eu-stack",  # gdb's Python backtrace command, elfutils' stack dumper
    *EDGES, *KINDS, *DETECTS,  # the catalog's edge, kind and detect vocabularies
}
ID_SHAPE = re.compile(r"`([a-z]+(?:-[a-z]+)+)`")  # catalog ids: lowercase words joined by hyphens


def frontmatter(text: str) -> dict[str, Any]:
    assert text.startswith("---\n"), "SKILL.md must start with YAML frontmatter"
    front = yaml.safe_load(text.split("---", 2)[1])
    assert isinstance(front, dict)
    return front


def code_text(text: str) -> list[str]:
    """The command-like text of a Markdown document: fenced code lines and inline code spans."""
    chunks: list[str] = []
    in_block = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continue
        if in_block:
            chunks.append(line)
        else:
            chunks.extend(re.findall(r"`([^`]+)`", line))
    return chunks


def run(args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("skills")
    return install_skill.install(dest)


# ---------------------------------------------------------------- the installed bundle

def test_installed_copy_is_a_valid_skill(installed: Path) -> None:
    # GIVEN the bundle installed by install-skill WHEN skills-ref validates it THEN no error
    assert installed.name == "debug-hang"
    assert skills_ref.validate(installed) == []
    assert skills_ref.read_properties(installed).name == "debug-hang"


def test_installed_copy_holds_the_bundle_without_caches(installed: Path) -> None:
    for part in ("SKILL.md", "scripts/diagnose_ray_hang.sh", "scripts/run_on_each_ray_node.py",
                 "references/patterns.yaml", "references/patterns.md", "references/report-template.md",
                 "references/running-outside-the-cluster.md", "references/manual-path.md", "references/pitfalls.md",
                 "references/cases/README.md", "debug_hang/__init__.py", "debug_hang/pipeline.py"):
        assert (installed / part).is_file(), part
    assert sorted(p.name for p in (installed / "examples").glob("*.py")) == sorted(
        p.name for p in (ROOT / "examples").glob("*.py"))
    assert not list(installed.rglob("__pycache__")) and not list(installed.rglob("*.pyc"))
    assert not (installed / "debug_hang" / "_bundle").exists()
    for script in (installed / "scripts").iterdir():
        assert script.stat().st_mode & 0o100, f"{script.name} is not executable"


def test_installed_scripts_run_from_the_skill_folder(installed: Path) -> None:
    # the scripts import the copied package, and the copy finds its catalog
    assert run(["bash", "scripts/diagnose_ray_hang.sh", "--help"], cwd=installed).returncode == 0
    capture = next(p for p in sorted((ROOT / "tests" / "data" / "cases").iterdir()) if (p / "stacks.json").exists())
    proc = run([sys.executable, "scripts/match_patterns.py", str(capture), "--format", "summary"], cwd=installed)
    assert proc.returncode == 0, proc.stderr
    assert "process(es)" in proc.stdout


def test_install_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    assert install_skill.main([str(tmp_path)]) == 0
    with pytest.raises(UsageError, match="--force"):
        install_skill.main([str(tmp_path)])
    (tmp_path / "debug-hang" / "stale.txt").write_text("old")
    assert install_skill.main([str(tmp_path), "--force"]) == 0
    assert not (tmp_path / "debug-hang" / "stale.txt").exists()
    # a DEST already named after the skill is the skill folder itself
    assert install_skill.main([str(tmp_path / "debug-hang"), "--force"]) == 0
    assert not (tmp_path / "debug-hang" / "debug-hang").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "staging folder left behind"


def test_install_skill_is_a_debug_hang_subcommand(tmp_path: Path) -> None:
    proc = run([sys.executable, "-m", "debug_hang", "install-skill", str(tmp_path / "skills")])
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "skills" / "debug-hang" / "SKILL.md").read_text() == SKILL_MD.read_text()


def test_bundle_root_is_the_checkout_here() -> None:
    assert install_skill.bundle_root() == ROOT


def test_install_from_a_wheel_layout(tmp_path: Path) -> None:
    # GIVEN the layout a wheel installs (pyproject force-includes the bundle under debug_hang/_bundle/)
    site = tmp_path / "site-packages"
    shutil.copytree(ROOT / "debug_hang", site / "debug_hang", ignore=shutil.ignore_patterns("__pycache__"))
    bundle = site / "debug_hang" / "_bundle"
    bundle.mkdir()
    shutil.copy(SKILL_MD, bundle / "SKILL.md")
    for sub in ("scripts", "references", "examples"):
        shutil.copytree(ROOT / sub, bundle / sub, ignore=shutil.ignore_patterns("__pycache__"))
    # WHEN install-skill runs from there (not from the checkout)
    env = {"PYTHONPATH": str(site), "PATH": str(Path(sys.executable).parent)}
    proc = subprocess.run([sys.executable, "-m", "debug_hang", "install-skill", str(tmp_path / "skills")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
    # THEN the bundle was read from _bundle/, and the skill is complete without a _bundle copy inside
    assert proc.returncode == 0, proc.stderr
    where = subprocess.run([sys.executable, "-m", "debug_hang", "install-skill", "--print-source"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
    assert where.stdout.strip() == str(bundle), where.stdout
    skill = tmp_path / "skills" / "debug-hang"
    assert skills_ref.validate(skill) == []
    assert (skill / "references" / "patterns.yaml").is_file() and (skill / "debug_hang" / "commands" / "cli.py").is_file()
    assert not (skill / "debug_hang" / "_bundle").exists()


# ---------------------------------------------------------------- SKILL.md itself

def test_frontmatter_has_only_allowed_keys_and_valid_values() -> None:
    front = frontmatter(SKILL_MD.read_text())
    assert set(front) <= ALLOWED_KEYS, set(front) - ALLOWED_KEYS
    assert front["name"] == "debug-hang"
    desc = front["description"]
    assert isinstance(desc, str) and len(desc) <= 1024
    assert "<" not in desc and ">" not in desc
    missing = [w for w in RESPONDER_WORDS if w.lower() not in desc.lower()]
    assert not missing, f"description lacks the responders' words {missing}"
    tools = front["allowed-tools"]
    assert isinstance(tools, str), "allowed-tools is one space-separated string, not a list"
    assert all(re.fullmatch(r"[A-Z]\w*(\([^()\s]+\))?", t) for t in tools.split()), tools
    assert len(front.get("compatibility", "")) <= 500
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in (front.get("metadata") or {}).items())


def skill_body() -> str:
    return SKILL_MD.read_text().split("---", 2)[2]


def test_skill_body_fits_an_agents_budget() -> None:
    # GIVEN the body an agent loads mid-incident (frontmatter excluded) THEN at most ~3,000 tokens
    # (chars/4, the usual estimate) and short enough to read at once
    body = skill_body()
    assert len(body) / 4 <= 3000, f"SKILL.md body is ~{len(body) / 4:.0f} tokens: move detail to references/"
    assert len(SKILL_MD.read_text().splitlines()) <= 150


def test_skill_md_has_the_playbook_sections() -> None:
    text = skill_body()
    for heading in ("## Step 0", "## Step 1", "## When the tool fails or is unsure", "## Traps that cost most",
                    "## References: when to open each"):
        assert heading in text, heading
    traps = re.findall(r"^\d+\. \*\*", text.split("## Traps that cost most", 1)[1].split("\n## ", 1)[0], re.MULTILINE)
    assert 6 <= len(traps) <= 8, len(traps)
    for word in ("the seed", "seed's", " here "):
        assert word not in text.lower(), f"author-speak {word!r} in SKILL.md"


def test_sample_output_is_what_the_tool_prints_for_the_case_it_cites() -> None:
    # GIVEN the sample in Step 1 and the recorded case it names WHEN that capture is re-analysed
    from debug_hang.pipeline import reanalyse
    from debug_hang.report.summary import summary_lines
    from debug_hang.report.write import DEFAULT_PREFIX

    step1 = skill_body().split("## Step 1", 1)[1].split("\n## ", 1)[0]
    case = re.search(r"references/cases/(\w+)\.md", step1)
    sample = step1.split("```\n", 2)[2].split("```", 1)[0] if step1.count("```") >= 4 else ""
    assert case and sample.strip()
    diag = reanalyse(ROOT / "tests" / "data" / "cases" / case.group(1))
    printed = [f"report: /tmp/{DEFAULT_PREFIX}x2b9q1ab/report.md",  # a default folder's path (mkdtemp)
               f"verdict: {diag.verdict} (job {diag.job_id}, {diag.seconds:.1f}s)", diag.summary, *summary_lines(diag)]
    # THEN every sample line is a printed line ("..." standing for a cut path)
    for line in sample.strip().splitlines():
        shape = re.compile(".*?".join(re.escape(part) for part in line.split("...")) + "$")
        assert any(shape.match(p) for p in printed), f"stale sample line in SKILL.md: {line}"


def test_failure_table_has_a_row_for_every_exit_code() -> None:
    # GIVEN the exit codes the scripts define WHEN SKILL.md's failure table is read THEN each has a row
    codes = sorted({int(n) for n in re.findall(r"^EXIT_\w+ = (\d+)", (ROOT / "debug_hang" / "errors.py").read_text(),
                                               re.MULTILINE)})
    section = skill_body().split("## When the tool fails or is unsure", 1)[1].split("\n## ", 1)[0]
    rows = set(int(n) for n in re.findall(r"^\| exit (\d+) \|", section, re.MULTILINE))
    assert set(codes) <= rows, f"exit codes without a row: {sorted(set(codes) - rows)}"
    for fallback in ("State API did not answer", "py-spy not found", "permission denied", "Kubernetes", "inconclusive"):
        assert fallback in section, fallback


def test_the_rerun_commands_use_flags_that_exist() -> None:
    from debug_hang.commands.diagnose import build_parser
    from debug_hang.commands.nodes import build_parser as nodes_parser

    have = {"diagnose_ray_hang.sh": build_parser(), "run_on_each_ray_node.py": nodes_parser()}
    for doc in DOCS:
        for chunk in code_text(doc.read_text()):
            for script, parser in have.items():
                if script not in chunk:
                    continue
                args = re.split(r"[\"']", chunk.split(script, 1)[1])[0]  # a quoted COMMAND has its own flags
                flags = set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", args))
                known = {opt for action in parser._actions for opt in action.option_strings}
                assert flags <= known, f"{doc.name}: {script} {sorted(flags - known)} do not exist"


def test_manual_path_phases_run_in_order() -> None:
    text = (ROOT / "references" / "manual-path.md").read_text()
    numbers = [int(n) for n in re.findall(r"^## Phase (\d+):", text, re.MULTILINE)]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 6, numbers


def test_manual_path_lists_every_ray_state() -> None:
    # Every state Ray reports for tasks, actors and placement groups (Ray's own vocabularies)
    from ray._private.custom_types import ACTOR_STATUS, PLACEMENT_GROUP_STATUS, TASK_STATUS
    from ray.core.generated.gcs_pb2 import PlacementGroupStats

    text = (ROOT / "references" / "manual-path.md").read_text()
    states = [*TASK_STATUS, *ACTOR_STATUS, *PLACEMENT_GROUP_STATUS, *PlacementGroupStats.SchedulingState.keys()]
    missing = [s for s in states if f"`{s}`" not in text]
    assert not missing, f"references/manual-path.md lacks {missing}"


def test_report_template_keeps_the_report_shape() -> None:
    text = (ROOT / "references" / "report-template.md").read_text()
    for heading in ("## Cluster summary", "## Blocked tasks", "## Blocking chain", "## Root cause",
                    "## Fix suggestions", "← root cause"):
        assert heading in text


def test_pitfalls_have_symptom_wrong_move_right_move_and_no_authors_column() -> None:
    text = (ROOT / "references" / "pitfalls.md").read_text()
    rows = [line for line in text.splitlines() if re.match(r"\|\s*\d+\s*\|", line)]
    numbers = sorted(int(r.split("|")[1]) for r in rows)
    assert numbers == list(range(1, len(rows) + 1)) and len(rows) >= 30
    assert all(len(r.strip().strip("|").split(" | ")) == 4 for r in rows), "4 columns: #, symptom, wrong, right"
    assert "[H]" not in text and "backing" not in text.lower()


def md_slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(text: str) -> set[str]:
    return {md_slug(h) for h in re.findall(r"^#{1,6} (.+?)\s*$", re.sub(r"```.*?```", "", text, flags=re.S), re.MULTILINE)}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_long_docs_start_with_contents_and_their_anchors_resolve(doc: Path) -> None:
    text = doc.read_text()
    lines = text.splitlines()
    if len(lines) > 100:
        head = "\n".join(lines[:30])
        assert len(re.findall(r"\]\(#[\w-]+\)", head)) >= 3, f"{doc.name}: over 100 lines, needs a contents list at its top"
    for anchor in re.findall(r"\]\(#([\w-]+)\)", text):
        assert anchor in headings(text), f"{doc.name}: #{anchor} matches no heading"
    for rel, anchor in re.findall(r"\]\(((?:\.\./)?[\w./-]+\.md)#([\w-]+)\)", text):
        target = (doc.parent / rel).resolve()
        assert target.is_file() and anchor in headings(target.read_text()), f"{doc.name}: {rel}#{anchor}"


def test_every_reference_file_named_in_skill_md_exists() -> None:
    named = set(re.findall(r"(references/[\w./-]+\.(?:md|yaml|json))", SKILL_MD.read_text()))
    assert {"references/manual-path.md", "references/pitfalls.md", "references/patterns.md"} <= named
    for rel in named:
        assert (ROOT / rel).is_file(), rel


# ---------------------------------------------------------------- what the docs name exists

def named_scripts() -> set[str]:
    names: set[str] = set()
    for doc in DOCS:
        names.update(re.findall(r"scripts/([\w-]+\.(?:py|sh))", doc.read_text()))
    return names


@pytest.mark.parametrize("script", sorted(named_scripts()))
def test_every_named_script_exists_and_answers_help(script: str) -> None:
    path = ROOT / "scripts" / script
    assert path.is_file(), f"{script} is named in the docs but does not exist"
    runner = ["bash"] if script.endswith(".sh") else [sys.executable]
    proc = run([*runner, f"scripts/{script}", "--help"])
    assert proc.returncode == 0, proc.stderr[-500:]
    assert "usage" in proc.stdout.lower()


def named_commands() -> set[tuple[str, ...]]:
    """`debug-hang X`, `python -m debug_hang X`, `python -m debug_hang.M`, `ray X [Y]`, `py-spy X`."""
    found: set[tuple[str, ...]] = set()
    for doc in DOCS:
        for chunk in code_text(doc.read_text()):
            for sub in re.findall(r"(?:^|[\s;(|&])(?:debug-hang|python3? -m debug_hang) ([a-z][a-z-]+)", chunk):
                found.add(("debug-hang", sub))
            for mod in re.findall(r"python3? -m (debug_hang\.\w+)", chunk):
                found.add(("module", mod))
            for words in re.findall(r"(?:^|[\s;(|&\"])ray ((?:[a-z][a-z-]*)(?: [a-z][a-z-]*)?)", chunk):
                found.add(("ray", *words.split()))
            for sub in re.findall(r"(?:^|[\s;(|&])py-spy (dump|record|top)\b", chunk):
                found.add(("py-spy", sub))
    return found


def help_argv(command: tuple[str, ...]) -> list[str]:
    tool, *rest = command
    if tool == "debug-hang":
        assert rest[0] in SUBCOMMANDS, f"`debug-hang {rest[0]}` is named in the docs but is no subcommand"
        return [sys.executable, "-m", "debug_hang", rest[0], "--help"]
    if tool == "module":
        return [sys.executable, "-m", rest[0], "--help"]
    exe = shutil.which(tool) or str(Path(sys.executable).parent / tool)
    return [exe, *rest, "--help"]


@pytest.mark.parametrize("command", sorted(named_commands()), ids=" ".join)
def test_every_named_command_answers_help(command: tuple[str, ...]) -> None:
    proc = run(help_argv(command))
    assert proc.returncode == 0, f"{' '.join(command)} --help: {proc.stderr[-500:]}"


def test_the_docs_name_the_main_commands() -> None:
    commands = named_commands()
    for needed in (("ray", "status"), ("ray", "list", "tasks"), ("ray", "list", "actors"), ("ray", "job", "submit"),
                   ("py-spy", "dump"), ("debug-hang", "diagnose"), ("ray", "exec")):
        assert needed in commands, needed


def test_every_referenced_file_exists() -> None:
    for doc in DOCS:
        for rel in re.findall(r"(references/[\w./-]+\.(?:md|yaml|json))", doc.read_text()):
            assert (ROOT / rel).is_file(), f"{doc.name} names {rel}, which does not exist"
        for rel in re.findall(r"(examples/\w+\.py)", doc.read_text()):
            assert (ROOT / rel).is_file(), f"{doc.name} names {rel}, which does not exist"


# ---------------------------------------------------------------- patterns: catalog, table, page

def test_patterns_md_has_a_section_per_catalog_id() -> None:
    text = (ROOT / "references" / "patterns.md").read_text()
    for pid in catalog():
        assert f"\n## {pid}\n" in text, pid


def test_patterns_md_is_generated_from_the_catalog() -> None:
    assert (ROOT / "references" / "patterns.md").read_text() == catalog_doc.render(), (
        "references/patterns.md is stale: tools/catalog_doc.py > references/patterns.md")


def test_every_pattern_id_mentioned_exists_in_the_catalog() -> None:
    ids = set(catalog())
    for doc in DOCS:
        for word in set(ID_SHAPE.findall(doc.read_text())):
            if word in NON_PATTERN_WORDS:
                continue
            assert word in ids, (f"{doc.relative_to(ROOT)} mentions `{word}`: not a pattern id of the catalog "
                                 "(add it to NON_PATTERN_WORDS if it is not meant as one)")


def test_catalog_doc_check_mode() -> None:
    proc = run([sys.executable, str(ROOT / "tools" / "catalog_doc.py"), "--check"])
    assert proc.returncode == 0, proc.stderr
