"""The report page in a real browser: Debian's ``chromium`` driven by playwright.

Skipped, saying why, where chromium (``apt-get install chromium``, which ``.ci/run`` does) or
playwright (the ``test`` extra) is missing; playwright's own browser download is never used.
The run folders are synthetic (``benchmarks/perf/report_bench.py``), so no model runs.
"""

import json
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a real browser (chromium) on a trained run

ROOT = Path(__file__).resolve().parents[3]

CHROMIUM = "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip(
        f"{CHROMIUM} not found (apt-get install -y chromium): report browser tests skipped",
        allow_module_level=True,
    )
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright not installed (pip install -e '.[test]')"
)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from benchmarks.perf.report_bench import make_synthetic_run
    from learners.reports.run_report import write_report

    root = tmp_path_factory.mktemp("report")
    made = make_synthetic_run(root / "run", steps=3, rounds=4)
    make_synthetic_run(root / "other" / "run2", steps=3, rounds=4, seed=1)
    one = write_report([root / "run"], root / "one.html")
    two = write_report([root / "run", root / "other" / "run2"], root / "two.html")
    yield made, one, two
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def _open(browser, path):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    log = {"errors": [], "requests": []}
    page.on(
        "console",
        lambda m: log["errors"].append(m.text) if m.type in ("error", "assert") else None,
    )
    page.on("pageerror", lambda e: log["errors"].append(str(e)))
    page.on("request", lambda r: log["requests"].append(r.url))
    page.goto(path.resolve().as_uri())
    page.wait_for_function("window.__report && window.__report.ready", timeout=60_000)
    return page, log


def _tab(page, name):
    page.click(f"#tabs button[data-tab={name}]")
    page.wait_for_selector(f"#sec-{name}.active")


def _rows(page):
    return page.locator("#pool-body tr.task").count()


def test_page_loads_from_file_with_no_console_error_and_no_network(browser, report):
    _, one, _ = report
    page, log = _open(browser, one)
    for name in ("pool", "critic", "transcripts", "config", "curves"):
        _tab(page, name)
    page.wait_for_timeout(300)
    assert log["errors"] == []
    assert log["requests"] == [one.resolve().as_uri()]  # the file itself, nothing else
    assert page.evaluate("window.__report.errors") == []
    page.close()


SECTION_CHARTS = {
    "curves": [
        "reward",
        "pool",
        "proposals",
        "critic",
        "accuracy",
        "throughput",
        "time",
        "learner",
        "truncation",
        "any",
    ],
    "pool": ["outcomes", "qd"],
    "critic": ["roc", "hist", "box", "auc"],
}


def test_each_section_renders_its_charts(browser, report):
    _, one, _ = report
    page, _ = _open(browser, one)
    for tab, charts in SECTION_CHARTS.items():
        _tab(page, tab)
        for chart in charts:  # a Plotly chart with at least one drawn trace
            traces = page.locator(f"#sec-{tab} #chart-{chart}.js-plotly-plot .trace")
            traces.first.wait_for(state="attached", timeout=20_000)
            assert traces.count() >= 1, chart
    _tab(page, "transcripts")
    assert page.locator("#tr-list details.round").count() == 12
    page.close()


def test_a_chart_with_one_trace_names_it_in_a_legend(browser, report):
    # Plotly hides the legend of a one-trace chart by default; a card whose title names several
    # metrics ("probe AUC, gate alpha, score format") must say which one is drawn
    _, one, _ = report
    page, _ = _open(browser, one)
    legend = page.locator("#sec-curves #chart-throughput .legendtext")
    legend.first.wait_for(state="attached", timeout=20_000)
    assert legend.all_text_contents() == ["rollout/tokens_per_s"]
    page.close()


def test_search_finds_the_known_task(browser, report):
    from benchmarks.perf.report_bench import KNOWN_WORD

    made, one, _ = report
    page, _ = _open(browser, one)
    _tab(page, "pool")
    assert _rows(page) == made["proposals"]
    page.fill("#pool-search", KNOWN_WORD)
    page.wait_for_function("document.querySelectorAll('#pool-body tr.task').length === 1")
    row = page.locator("#pool-body tr.task")
    assert row.get_attribute("data-task") == made["known_task"]
    assert page.inner_text("#pool-count") == f"1 of {made['proposals']} proposals"
    row.click()  # its details: the full question
    assert KNOWN_WORD in page.inner_text("#pool-body tr.detail")
    page.close()


def test_a_filter_changes_the_row_count(browser, report):
    made, one, _ = report
    page, _ = _open(browser, one)
    _tab(page, "pool")
    page.select_option("#pool-status", "rejected")
    rejected = made["proposals"] - made["accepted"]
    page.wait_for_function(f"document.querySelectorAll('#pool-body tr.task').length === {rejected}")
    assert page.locator("#pool-body tr.task .tag.accepted").count() == 0
    page.select_option("#pool-status", "accepted")
    page.select_option("#pool-solved", "solved")
    page.wait_for_function(
        f"document.querySelectorAll('#pool-body tr.task').length < {made['accepted']}"
    )
    assert _rows(page) >= 1
    page.fill("#pool-step-min", "99")
    page.wait_for_function("document.querySelectorAll('#pool-body tr.task').length === 0")
    assert page.inner_text("#pool-count").startswith("0 of")
    page.close()


def test_a_transcript_opens_from_its_task(browser, report):
    from benchmarks.perf.report_bench import KNOWN_WORD

    made, one, _ = report
    page, _ = _open(browser, one)
    _tab(page, "pool")
    page.fill("#pool-search", made["known_task"])
    page.wait_for_function("document.querySelectorAll('#pool-body tr.task').length >= 1")
    page.click(f"#pool-body tr.task[data-task='{made['known_task']}'] a.round-link")
    page.wait_for_selector("#sec-transcripts.active")
    rid = f"#round-{made['known_step']}-{made['known_round']}"
    page.wait_for_selector(f"{rid}[open]")
    body = page.inner_text(rid)
    assert KNOWN_WORD in body and "challenger_0" in body and "critic_0" in body
    assert f"→ {made['known_task']}" in body  # the round names the task it added
    assert page.locator(rid).is_visible()
    # and the transcript search finds the same round
    page.fill("#tr-search", KNOWN_WORD)
    page.wait_for_function("document.getElementById('tr-count').textContent.startsWith('1 of')")
    # back: the round's link to the task it added shows that one task in the pool
    page.click(f"{rid} > summary")  # the search drew the list anew: open the round again
    page.click(f"{rid} a:text('→ {made['known_task']}')")
    page.wait_for_selector("#sec-pool.active")
    page.wait_for_function("document.querySelectorAll('#pool-body tr.task').length === 1")
    assert page.locator("#pool-body tr.task").get_attribute("data-task") == made["known_task"]
    page.close()


def test_several_runs_are_overlaid_and_selectable(browser, report):
    _, _, two = report
    page, log = _open(browser, two)
    legend = page.locator("#chart-pool .legendtext").all_text_contents()
    assert {"run · pool/seeds", "run2 · pool/seeds", "run · pool/generated"} <= set(legend)
    assert page.locator("#run-select option").count() == 2
    _tab(page, "pool")
    ids = page.locator("#pool-body tr.task").evaluate_all("rs => rs.map(r => r.dataset.task)")
    page.select_option("#run-select", "1")  # the pool of the other run (another seed)
    page.wait_for_function(
        f"JSON.stringify([...document.querySelectorAll('#pool-body tr.task')]"
        f".map(r => r.dataset.task)) !== {json.dumps(json.dumps(ids))}"
    )
    assert log["errors"] == []
    page.close()
