"""The documentation site builds with `mkdocs build --strict` (a broken link or anchor, a page missing from the
nav, a nav entry without its page all fail it), and the results pages show only plots docs/make_plots.py draws.

The build runs on a copy of the repository's mkdocs.yml and docs/, where the pages other branches still owe
(docs_helpers.PENDING_PAGES) are stubbed; `.ci/run` builds the real tree, stubs and all absent.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

from docs_helpers import DOCS, PENDING_PAGES, load_script
from testutil import REPO

# matplotlib's first import in a fresh environment runs fc-list to build its font cache: done here, at import
with contextlib.suppress(ImportError):
    import matplotlib.pyplot  # noqa: F401

pytest.importorskip("mkdocs", reason="mkdocs is in the dev extra: pip install -e '.[dev]'")
pytest.importorskip("material", reason="mkdocs-material is in the dev extra: pip install -e '.[dev]'")


def site_copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(DOCS, root / "docs")
    for page in PENDING_PAGES:
        stub = root / "docs" / page
        if not stub.exists():
            stub.write_text(f"# {page}\n\n(written in another branch)\n")
    return root


def build(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(root / "site")],
                          cwd=root, capture_output=True, text=True, timeout=300, check=False,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(root)})


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built from a copy of mkdocs.yml and docs/ (once for this module's tests)."""
    root = site_copy(tmp_path_factory.mktemp("site"))
    proc = build(root)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return root / "site"


def test_the_site_builds_strictly(site):
    assert (site / "get-started.html").is_file()
    assert (site / "reference" / "config.html").is_file()
    assert not list(site.rglob("*.py"))  # the generator scripts are not published


def relative_links(page: Path) -> list[str]:
    return [href for href in re.findall(r'(?:href|src)="([^"]+)"', page.read_text())
            if not re.match(r"[a-z][a-z0-9+.-]*:", href) and not href.startswith("#")]


def test_the_site_works_from_disk(site):
    """Opened from disk (file://), every link of every page opens a file, not a folder (a folder shows a listing);
    search loads its index from a script beside the pages; nothing is fetched from the network."""
    pages = [p for p in site.rglob("*.html") if p.name != "404.html"]  # 404.html is a server's page: absolute links
    broken = [(str(p.relative_to(site)), href) for p in pages for href in relative_links(p)
              if not (p.parent / unquote(href.split("#")[0].split("?")[0])).resolve().is_file()]
    assert len(pages) >= 30 and not broken, broken[:10]
    assert (site / "search" / "search_index.js").read_text().startswith("var __index = ")
    remote = [str(p.relative_to(site)) for p in pages if re.search(r'<script[^>]+src="https?:', p.read_text())]
    assert not remote, remote  # (Material's offline plugin would load its file:// worker shim from a CDN)
    assert 'src="javascripts/iframe-worker.js"' in (site / "index.html").read_text()


def test_the_nav_names_no_page_twice(site):
    """A section's own index page is listed under its own title, not the section's ("Results > Results")."""
    nav = re.findall(r'<label class="md-nav__link"[^>]*>\s*<span class="md-ellipsis">\s*([^<]+?)\s*</span>|'
                     r'<a href="[^"]*" class="md-nav__link[^"]*">\s*<span class="md-ellipsis">\s*([^<]+?)\s*</span>',
                     (site / "index.html").read_text())
    titles = [section or page for section, page in nav]
    assert "Overview" in titles and titles.count("Results") == 1, titles


def markup_left_as_text(html: str) -> list[str]:
    """Markdown that did not become HTML: a list item or table row inside a paragraph, list item or cell (a list
    without a blank line before it, a nested block indented 2 spaces instead of 4)."""
    html = re.sub(r"<pre.*?</pre>|<code>.*?</code>", "CODE", html, flags=re.S)
    return [re.sub(r"<[^>]+>", "", m.group(2))[:120] for m in re.finditer(r"<(p|li|td)>(.*?)</\1>", html, re.S)
            if re.search(r"\n\s*([-*+] |\d+\. |\|)", m.group(2))]


def test_no_page_shows_list_or_table_markup_as_text(site):
    found = {str(p.relative_to(site)): markup_left_as_text(p.read_text()) for p in site.rglob("*.html")}
    assert not {page: texts for page, texts in found.items() if texts}
    quoted = [str(p.relative_to(site)) for p in site.rglob("*.html") if "<blockquote>" in p.read_text()]
    assert not quoted, quoted  # the pages quote nothing: a wrapped line starting `>= 2.6` became a quote once


def test_the_markup_check_can_fail():
    assert markup_left_as_text("<p>What the runs show:\n- one\n- two</p>")
    assert not markup_left_as_text("<p>What the runs show:</p>\n<ul>\n<li>one</li>\n</ul>")


def test_a_broken_link_fails_the_build(tmp_path):
    root = site_copy(tmp_path)
    page = root / "docs" / "guides" / "sweeps.md"
    page.write_text(page.read_text() + "\nSee [nowhere](no-such-page.md).\n")
    proc = build(root)
    assert proc.returncode != 0 and "no-such-page.md" in proc.stderr


def test_pending_pages_are_still_pending():
    """A page listed as owed by another branch that has landed should leave the list (it then builds for real)."""
    landed = [p for p in PENDING_PAGES if (DOCS / p).exists() and "written in another branch" not in
              (DOCS / p).read_text()]
    nav = (REPO / "mkdocs.yml").read_text()
    assert all(p in nav for p in PENDING_PAGES)
    if landed:
        pytest.skip(f"landed, remove from docs_helpers.PENDING_PAGES: {landed}")


def test_results_pages_show_the_plots_make_plots_draws(tmp_path):
    made = {p.name for p in load_script("make_plots").make_all(tmp_path)}
    shown = {Path(m).name for page in (DOCS / "results").glob("*.md")
             for m in re.findall(r"!\[[^\]]*\]\((img/[^)]+)\)", page.read_text())}
    assert shown and shown <= made, shown - made
    assert all((DOCS / "results" / "img" / name).is_file() for name in made)  # committed


def test_search_works_from_disk_in_chromium(site):
    """Material's search runs in a Web Worker, which Chromium refuses on file:// pages: docs/javascripts/
    iframe-worker.js runs it in an iframe instead. Opened from disk with a query (`?q=`), the page lists results
    that link to pages (runs where Chromium is installed: `apt-get install chromium`)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no Chromium here (apt-get install chromium)")
    url = (site / "guides" / "slurm.html").as_uri() + "?q=preemption"
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
                           "--dump-dom", url], capture_output=True, text=True, timeout=120, check=False)
    meta = re.search(r'class="md-search-result__meta">([^<]*)<', proc.stdout)
    assert meta and "matching document" in meta.group(1), (meta and meta.group(1), proc.stderr[-2000:])
    links = re.findall(r'<a href="([^"]+)" class="md-search-result__link"', proc.stdout)
    assert links and all(".html" in link for link in links), links


def test_mkdocs_yml_gives_each_key_once():
    """mkdocs.yml is edited by several branches: a second `plugins:` from a merge would silently replace the first
    (YAML keeps the last), dropping e.g. the offline plugin."""
    from ddppo.config import UniqueKeyLoader

    yaml.load((REPO / "mkdocs.yml").read_text(), UniqueKeyLoader)
