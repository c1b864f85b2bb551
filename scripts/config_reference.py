"""docs/config.md: every configuration key with its default and help text, generated from the config
dataclasses' own metadata (``rust_grpo/config.py``: one help string per field), so the page cannot
drift from the code.

    python scripts/config_reference.py            write docs/config.md
    python scripts/config_reference.py --check    fail when docs/config.md is stale (tests/test_config.py)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rust_grpo.config import RunConfig  # noqa: E402

PAGE = ROOT / "docs" / "config.md"


def _default(f: dataclasses.Field) -> str:  # type: ignore[type-arg]
    value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    return json.dumps(value, default=str)


def render() -> str:
    lines = [
        "# Configuration reference",
        "",
        "Every key of a run's TOML (`--config FILE` or a preset, `--set SECTION.KEY=VALUE`), with its default and",
        "what it does. Generated from the help text each field carries in `rust_grpo/config.py` by",
        "`python scripts/config_reference.py` (a test fails when this page is stale). Presets, recipes and how",
        "the sections work together: [training.md](training.md). Any other `GRPOConfig` field of the installed",
        "TRL goes in a `[trl]` table, passed through as it is.",
    ]
    for section in dataclasses.fields(RunConfig):
        if section.name == "trl":
            continue
        lines += ["", f"## `[{section.name}]`", "", "| key | default | what it does |", "|---|---|---|"]
        for f in dataclasses.fields(section.default_factory()):  # type: ignore[misc]
            help_text = f.metadata.get("help", "").replace("|", "\\|")
            lines.append(f"| `{f.name}` | `{_default(f)}` | {help_text} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = render()
    if args.check:
        if PAGE.exists() and PAGE.read_text(encoding="utf-8") == text:
            return 0
        print(f"{PAGE.relative_to(ROOT)} is stale: python scripts/config_reference.py", file=sys.stderr)
        return 1
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
