"""benchmarks/results/ holds what README.md and docs/ cite, each file's provenance in its index."""

from .conftest import ROOT, run_script


def test_every_results_file_is_cited_indexed_and_every_cited_file_exists():
    proc = run_script("benchmarks/results_index.py", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_index_names_a_page_and_an_origin_for_every_file():
    rows = [
        line
        for line in (ROOT / "benchmarks" / "results" / "INDEX.md").read_text().splitlines()
        if line.startswith("| `")
    ]
    files = sorted(p.name for p in (ROOT / "benchmarks" / "results").iterdir() if p.name != "INDEX.md")
    assert [row.split("`")[1] for row in rows] == files
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[4] != "not recorded" and cells[5], f"no origin or no citing page: {row}"
