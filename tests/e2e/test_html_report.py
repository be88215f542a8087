"""The HTML report is one self-contained file that a browser renders (headless Chromium)."""

import re
import shutil
import subprocess

import numpy as np
import pytest
from helpers import run_numaprof

pytestmark = pytest.mark.e2e
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def html_report(recorded, tmp_path_factory):
    r = recorded("serial_init")
    out = tmp_path_factory.mktemp("html") / "report.html"
    run_numaprof("report", r.dir, "--format", "html", "-o", out, "--top", "4", check=True)
    return out, r


def test_self_contained(html_report):
    out, _ = html_report
    text = out.read_text()
    refs = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', text)
    assert refs, "no images at all"
    assert all(ref.startswith("data:") for ref in refs), [r[:40] for r in refs
                                                         if not r.startswith("data:")]
    assert "http://" not in text and "https://" not in text
    assert "<h2>Traffic</h2>" in text


def test_the_findings_are_listed_under_their_own_heading(html_report):
    """Every finding of the report, under "Findings" (they were under "Threads")."""
    import html

    out, r = html_report
    text = out.read_text()
    assert "<h2>Findings</h2>" in text and "<h2>Threads</h2>" not in text
    items = re.findall(r"<li>(.*?)</li>", text.split("<h2>Findings</h2>", 1)[1], re.S)
    assert [html.unescape(i) for i in items] == r.report["findings"]


def test_one_scatter_per_hot_object(html_report):
    out, r = html_report
    text = out.read_text()
    hot = [o["name"] for o in r.report["objects"][:4]]
    sections = re.findall(r'<h3>([^<]*)</h3><div class="obj">(.*?)</div>', text)
    assert [name for name, _ in sections] == hot
    for _, body in sections:
        assert body.count("<img") == 2  # offset x time scatter + pages-by-node bars


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make setup installs it)")
def test_renders_in_headless_chromium(html_report, tmp_path):
    out, _ = html_report
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--host-resolver-rules=MAP * ~NOTFOUND", f"--screenshot={shot}",
         "--window-size=1200,2400", f"file://{out}"],
        capture_output=True, text=True, timeout=120)
    assert shot.exists(), proc.stderr[-2000:]
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100
    # non-blank: many distinct colours, not a white page
    flat = (pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    assert len(np.unique(flat, axis=0)) > 50
    assert float(flat.mean()) < 250


def test_the_html_suggestions_are_the_ones_suggest_gives(recorded, tmp_path):
    """Same profile, same target: every view renders the one suggestions object.  The
    HTML once said parallel_init where suggest said bind_block (it skipped the patch
    fallback) and showed no patches."""
    import html
    import json

    from helpers import EXAMPLES

    r = recorded("serial_init")
    out = tmp_path / "r.html"
    run_numaprof("report", r.dir, "--format", "html", "--target", "2s", "-o", out,
                 cwd=EXAMPLES, check=True)
    sug = json.loads(run_numaprof("suggest", r.dir, "--target", "2s", "--format", "json",
                                  cwd=EXAMPLES, check=True).stdout)
    text = out.read_text()
    section = text[text.index("<h2>Suggestions</h2>"):]
    shown = dict(re.findall(r"<h3>([^<:]+): ([^<]+)</h3>", section))
    want = {o["name"]: ("keep as is (first touch)" if o["policy"] == "first_touch"
                        else o["policy"]) for o in sug["objects"]}
    assert shown == want
    patched = [o for o in sug["objects"] if o["patch"]]
    assert patched, "serial_init's master-initialised arrays get patches"
    for o in patched:
        assert html.escape(o["patch"]) in section, o["name"]
