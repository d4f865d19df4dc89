"""Docs drift: every repository path the docs and docstrings name exists, and every config
field has help text in ``--help``."""

import dataclasses
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOP = ("sage_env", "learners", "benchmarks", "docs", "tests", "examples", "scripts", ".ci")
# a path after a colon is a revision's (``git show 33f5782:benchmarks/results/x.json``): not checked
PATH = re.compile(r"(?<![\w./:-])((?:{})/[\w./-]*\w)".format("|".join(re.escape(t) for t in TOP)))
GENERATED = ("runs/", "benchmarks/compare_protocols/results")  # written by runs; absent on a
# clone (every committed result the docs name is checked)


def _sources():
    yield from [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for top in ("sage_env", "learners", "benchmarks", "examples"):
        yield from sorted((ROOT / top).rglob("*.py"))


def _named_paths():
    for src in _sources():
        text = src.read_text(encoding="utf-8")
        for m in PATH.finditer(text):
            path = m.group(1).rstrip(".")
            if any(ch in path for ch in "*<>{}") or path.startswith(GENERATED):
                continue
            if re.fullmatch(r"tests/(s|second)", path):  # a unit, "tests/s"
                continue
            yield src.relative_to(ROOT).as_posix(), path


NAMED = sorted(set(_named_paths()))


def _exists(path: str) -> bool:
    target = ROOT / path
    if target.exists():
        return True
    # a module named by its dotted path's file form without .py (sage_env/verifiers)
    return target.with_suffix(".py").exists()


@pytest.mark.parametrize("source, path", NAMED)
def test_named_repository_path_exists(source, path):
    assert _exists(path), f"{source} names {path}, which does not exist"


def test_the_scan_finds_paths():
    assert len(NAMED) > 50  # the docs name many files; a broken regex would find none


README_MAX_LINES = 80  # issue 36: what a newcomer reads first; the rest lives in docs/


def _readme_commands() -> list[str]:
    return re.findall(r"```bash\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)


def test_readme_fits_on_a_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


def test_ci_runs_readme_command_2_as_written():
    train, tests = _readme_commands()[:2]
    assert "sage-env train --preset demo" in train
    assert tests.endswith("python -m pytest -q")
    ci = [line for line in (ROOT / ".ci/run").read_text().splitlines() if line.strip()]
    assert ci[-1] == tests


def _dict_fields(obj, prefix=""):
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            yield from _dict_fields(value, f"{prefix}{f.name}.")
        elif isinstance(value, dict):
            yield prefix + f.name


def _help_entries(text: str) -> dict[str, str]:
    """``{flag line: help text}`` from tyro's boxed ``--help`` output."""
    entries: dict[str, str] = {}
    current = None
    for raw in text.splitlines():
        line = raw.rstrip().rstrip("│|").rstrip().lstrip("│|")
        if re.match(r"^\s*(-h, )?--[a-z]", line):
            current = line.strip()
            entries[current] = ""
        elif current is not None and re.match(r"^\s{4,}\S", line):
            entries[current] += " " + line.strip()
        else:
            current = None
    return entries


@pytest.mark.parametrize(
    "choice",
    [
        ["--algorithm", "trr"],
        ["--algorithm", "ema"],
        ["--protocol", "azr"],
        ["--protocol", "mae"],
    ],
)
def test_every_train_flag_has_help(capsys, monkeypatch, choice):
    from learners.cli import main
    from learners.training.loop import TrainConfig

    monkeypatch.setenv("COLUMNS", "120")
    with pytest.raises(SystemExit):
        main(["train", *choice, "--help"])
    entries = _help_entries(capsys.readouterr().out)
    assert len(entries) > 60
    if choice[0] == "--protocol":  # the protocol's own settings are flags
        assert any(flag.startswith("--env.protocol-config.") for flag in entries)
    # tyro gives a dict field one flag per key; the field's help heads that group
    groups = tuple(f"--{p.replace('_', '-')}." for p in _dict_fields(TrainConfig()))
    bare = [
        flag
        for flag, text in entries.items()
        if not re.sub(r"\((default|required|fixed)[^)]*\)", "", text).strip()
        and not flag.startswith(groups)
    ]
    assert not bare, f"flags without help text: {bare}"


# --- relative markdown links: README.md and docs/ -------------------------------------------

LINK = re.compile(r"\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")  # [text](target) and ![alt](target)


def _prose(text: str):
    """``(line number, line)`` outside fenced code blocks."""
    fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence:
            yield number, line


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: link text kept, lowercased, punctuation except ``-`` and
    ``_`` dropped, spaces to ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    for _, line in _prose(path.read_text(encoding="utf-8")):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            anchor = github_anchor(m.group(1))
            seen[anchor] = seen.get(anchor, 0) + 1
    # a repeated heading's anchors are anchor, anchor-1, anchor-2, ...
    return {f"{a}-{i}" if i else a for a, n in seen.items() for i in range(n)}


def _doc_links():
    for src in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for number, line in _prose(src.read_text(encoding="utf-8")):
            for m in LINK.finditer(line):
                if not re.match(r"[a-z][a-z0-9+.-]*:", m.group(1)):  # http:, mailto: ...
                    yield f"{src.relative_to(ROOT).as_posix()}:{number}", m.group(1)


LINKS = list(_doc_links())


def test_the_link_scan_finds_links():
    assert len(LINKS) > 150  # the docs link to each other often; a broken regex finds none


def test_github_anchor_rule():
    assert github_anchor("Where the update's time goes") == "where-the-updates-time-goes"
    assert github_anchor("7. Read a whole run: `sage-env report`") == (
        "7-read-a-whole-run-sage-env-report"
    )
    assert github_anchor("The demo run (README command 1)") == "the-demo-run-readme-command-1"


@pytest.mark.parametrize("where, target", LINKS)
def test_relative_doc_link_resolves(where, target):
    src = ROOT / where.rsplit(":", 1)[0]
    path, _, anchor = target.partition("#")
    dest = (src.parent / path).resolve() if path else src
    assert dest.exists(), f"{where} links to {target}: no such file"
    if anchor and dest.suffix == ".md":
        assert anchor in _anchors(dest), f"{where} links to {target}: no such heading"


# --- issue 51: the preset table, quick snippets, the README's hand-stepping ------------------

PHASES_OF_ROLE = {
    "challenger": ("challenge", "propose"),
    "critic": ("review_question", "review_plan", "judge_question", "judge_answer"),
    "planner": ("plan",),
    "solver": ("solve",),
}
"""The phases a role's budget in the preset table stands for."""


def _preset_rows(doc: str = "docs/guide/training.md") -> dict[str, dict[str, str]]:
    """``{preset: {column: cell}}`` of the table under ``## Presets`` in ``doc``."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    block = text.split("\n## Presets\n", 1)[1].strip().split("\n\n", 1)[0]
    lines = [ln for ln in block.splitlines() if ln.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:]]
    return {r[0].strip("`"): dict(zip(head, r, strict=True)) for r in rows}


def _first_number(cell: str) -> float:
    return float(re.match(r"[\d.e-]+", cell).group(0))


def test_training_guide_preset_table_matches_presets():
    from learners.training.presets import PRESETS

    rows = _preset_rows()
    assert set(rows) == set(PRESETS)
    for name, cfg in PRESETS.items():
        row = rows[name]
        assert cfg.model.split("/")[-1].lower() in row["model"].lower(), name
        assert ("GPU" in row["device"]) == (cfg.device == "cuda"), name
        assert ("bf16" in row["device"]) == (cfg.dtype == "bfloat16"), name
        assert int(_first_number(row["steps"])) == cfg.steps, name
        said = re.search(r"validation at ([\d, and]+)\)", row["steps"])
        if said:  # "validation at 0, 6 and 12"
            at = [int(x) for x in re.findall(r"\d+", said.group(1))]
            every = list(range(cfg.val_every, cfg.steps + 1, cfg.val_every))
            assert at == [0] * cfg.val_at_start + every, name
        else:
            assert cfg.val_every == 0 or "validation" not in row["steps"], name
        assert int(_first_number(row["rounds/step"])) == cfg.rounds_per_step, name
        assert int(row["k"]) == cfg.env.solver_samples, name
        assert float(row["temperature"]) == cfg.temperature, name
        assert float(row["lr"]) == cfg.learner.lr, name
        budget = row["max new tokens"]
        if budget.startswith("per phase:"):  # "challenger 160 (192 for ...), critic 40, ..."
            for role, tokens, wider in re.findall(r"(\w+) (\d+)(?: \((\d+) for)?", budget):
                for phase in PHASES_OF_ROLE[role]:
                    assert cfg.phase_max_new_tokens[phase] == int(tokens), (name, phase)
                    for key in (k for k in cfg.phase_max_new_tokens if k.startswith(phase + "/")):
                        assert cfg.phase_max_new_tokens[key] == int(wider or tokens), (name, key)
        else:
            assert int(_first_number(budget)) == cfg.max_new_tokens, name
            assert not cfg.phase_max_new_tokens, name


def _numbers(cell: str) -> list[int]:
    """The integers of a cell, ``1,024`` read as 1024."""
    return [int(x.replace(",", "")) for x in re.findall(r"\d[\d,]*", cell)]


def test_scaling_guide_preset_table_matches_presets():
    from learners.training.presets import PRESETS

    rows = _preset_rows("docs/guide/scaling.md")
    assert set(rows) == set(PRESETS) - {"debug"}  # debug, for developing a learner: training.md
    for name, row in rows.items():
        cfg = PRESETS[name]
        assert cfg.model.split("/")[-1].lower() in row["model"].lower(), name
        processes = _numbers(row["processes"])[0]
        assert ("CPU" in row["processes"]) == (cfg.device != "cuda"), name
        rounds = _numbers(row["rounds per step"])
        assert rounds[0] == cfg.rounds_per_step, name
        if len(rounds) > 1:  # "8 per process = 64"
            assert rounds[1] == processes * cfg.rounds_per_step, name
        prompt, new, sequence = (c.strip() for c in row[_column(row, "lengths")].split("/"))
        assert int(prompt) == cfg.max_prompt_tokens, name
        if new.startswith("per phase"):  # "per phase, 40-192"
            budgets = cfg.phase_max_new_tokens.values()
            assert _numbers(new) == [min(budgets), max(budgets)], name
        else:
            assert int(new) == cfg.max_new_tokens and not cfg.phase_max_new_tokens, name
        assert int(sequence) == cfg.learner.max_seq_tokens, name
        assert int(row["generate batch"]) == cfg.generation_batch_size, name
        micro = _numbers(row["micro batch"])  # "16 (at most 1,024 padded tokens)"
        assert micro[0] == cfg.learner.micro_batch_size, name
        capped = cfg.learner.micro_batch_tokens
        assert micro[1:] == ([capped] if capped else []), name
        lora = cfg.learner.lora
        if row["LoRA"] == "off":
            assert lora.r == 0, name
        else:  # "r = 128, alpha 256"
            assert _numbers(row["LoRA"]) == [lora.r, int(lora.alpha)], name
        assert float(row["lr"]) == cfg.learner.lr, name


def test_prose_preset_figures_match_presets():
    """The preset figures stated in prose: README command 1's steps, scaling.md's Qwen line."""
    from learners.training.presets import PRESETS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    steps = re.search(r"`demo` preset, (\d+) steps", readme)
    assert steps and int(steps.group(1)) == PRESETS["demo"].steps
    scaling = (ROOT / "docs/guide/scaling.md").read_text(encoding="utf-8")
    said = re.search(
        r"Both Qwen presets train (\w+) weights with gradient checkpointing, k = (\d+) solver"
        r"\s+samples,\s+(\d+) steps, a checkpoint every (\d+) steps",
        scaling,
    )
    assert said, "scaling.md's line on what both Qwen presets share moved; update this test"
    for name in ("paper", "paper-1gpu"):
        cfg = PRESETS[name]
        assert said.group(1) == {"bfloat16": "bf16"}.get(cfg.dtype), name
        assert cfg.learner.gradient_checkpointing, name
        assert int(said.group(2)) == cfg.env.solver_samples, name
        assert int(said.group(3)) == cfg.steps, name
        assert int(said.group(4)) == cfg.save_every, name


def _column(row: dict[str, str], start: str) -> str:
    return next(c for c in row if c.startswith(start))


QUICK = "<!-- quick"
"""An HTML comment on the line above a ```bash block: the block takes seconds and is run."""


def _quick_snippets() -> list[tuple[str, str]]:
    found = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs/guide").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        for m in re.finditer(r"^<!-- quick[^\n]*-->\n```bash\n(.*?)\n```", text, re.S | re.M):
            found.append((doc.relative_to(ROOT).as_posix(), m.group(1)))
    return found


def test_quick_snippets_are_found():
    assert any(doc == "docs/guide/learners.md" for doc, _ in _quick_snippets())


@pytest.mark.slow
@pytest.mark.parametrize("doc, snippet", _quick_snippets())
def test_quick_guide_snippet_runs(doc, snippet, tmp_path):
    """Run as written (``sage-env`` as ``python -m learners``) in an empty folder; everything
    it writes goes under ``runs/``, which .gitignore holds."""
    import os
    import subprocess
    import sys

    script = snippet.replace("sage-env ", f"{sys.executable} -m learners ")
    script = re.sub(r"^python ", f"{sys.executable} ", script, flags=re.M)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        ["bash", "-ec", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, f"{doc}:\n{snippet}\n{out.stderr[-3000:]}"
    assert [p.name for p in tmp_path.iterdir()] == ["runs"], f"{doc} writes outside runs/"
    assert "runs/" in (ROOT / ".gitignore").read_text().splitlines()


def test_tiny_model_has_one_path_under_runs():
    paths = set()
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        paths.update(re.findall(r"build_tiny_model\('([^']+)'\)", doc.read_text(encoding="utf-8")))
    assert paths == {"runs/tiny-model"}


def test_readme_hand_stepping_types_after_the_response_prefix():
    import subprocess
    import sys

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Step the environment by hand", 1)[1]
    snippet = re.search(r"```python\n(.*?)\n```", section, re.S).group(1)
    assert 'obs["prefix"]' in snippet
    # every turn answered with an empty line: the env still gets the prefix as the reply
    probe = snippet.replace("env.step(", "seen.append(obs['prefix']) or env.step(")
    probe = "seen = []\n" + probe + "\nassert any(seen), seen\n"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        input="\n" * 200,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
