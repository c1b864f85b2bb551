"""Test binaries linked by lld directly behave as those linked through ``cc``.

The fast backend calls the toolchain's ``rust-lld`` itself (``toolchain.direct_link``) to save the C
driver's processes; a verdict must not depend on that. Both links of one program must print the
same libtest events: passes, assertion failures, panics unwound through the C runtime, a test's
captured output, and a thread's panic."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from reward_sandbox.compile.toolchain import ToolchainError, direct_link, find_toolchain, host_triple, link_flags

PROGRAM = """
pub fn half(n: i32) -> i32 { n / 2 }
#[cfg(test)]
mod tests {
    use super::*;
    #[test] fn ok() { assert_eq!(half(4), 2); }
    #[test] fn wrong() { assert_eq!(half(5), 3); }
    #[test] fn prints_then_fails() { println!("seen {}", half(8)); panic!("boom"); }
    #[test] fn thread_panics() { std::thread::spawn(|| panic!("inner")).join().unwrap(); }
    #[test] #[should_panic(expected = "index")] fn expected() { let v: Vec<u8> = vec![]; let _ = v[1]; }
}
"""


def _events(tmp: Path, flags: list[str], name: str) -> list[dict[str, object]]:
    toolchain = find_toolchain()
    (tmp / "lib.rs").write_text(PROGRAM)
    build = [str(toolchain.rustc), "--test", "-C", "debuginfo=0", *flags, "lib.rs", "-o", name]
    subprocess.run(build, cwd=tmp, check=True, capture_output=True)
    args = ["--format", "json", "-Z", "unstable-options", "--test-threads=1"]
    out = subprocess.run([f"./{name}", *args], cwd=tmp, capture_output=True, text=True, env={"RUSTC_BOOTSTRAP": "1"})
    assert out.returncode == 101
    events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    for event in events:
        event.pop("exec_time", None)
        if isinstance(event.get("stdout"), str):  # thread ids differ between runs
            event["stdout"] = re.sub(r"thread '[^']*' \(\d+\)", "thread", event["stdout"])
    return events


def test_direct_lld_link_gives_the_same_test_events_as_linking_through_cc(tmp_path):
    try:
        toolchain = find_toolchain()
    except ToolchainError:
        pytest.skip("no Rust toolchain")
    host = host_triple(toolchain)
    link = direct_link()
    if host != "x86_64-unknown-linux-gnu":
        assert link is None  # the direct link is only ever tried where it was checked
        pytest.skip(f"direct link only on x86-64 glibc Linux, not {host}")
    assert link is not None, "the direct link should work on this machine (its probe failed)"
    sysroot = str(toolchain.sysroot)
    direct = _events(tmp_path, link_flags(link, sysroot, host), "direct")
    via_cc = _events(tmp_path, link_flags(None, sysroot, host), "via_cc")
    assert direct == via_cc
    finished = [e for e in direct if e.get("type") == "test" and e.get("event") != "started"]
    results = {str(e["name"]).split("::")[-1]: e["event"] for e in finished}
    assert results == {
        "ok": "ok",
        "wrong": "failed",
        "prints_then_fails": "failed",
        "thread_panics": "failed",
        "expected": "ok",
    }


HOSTILE_LINKS = {
    # a file of the host's named as a library: the link fails, and says nothing of the file's contents
    "exact-path": '#[link(name = ":/etc/passwd")]\nextern "C" {}\n',
    "missing-library": '#[link(name = "rg_no_such_library")]\nextern "C" {}\n',
    "whole-archive": '#[link(name = "c", kind = "static", modifiers = "+whole-archive")]\nextern "C" {}\n',
}


@pytest.mark.parametrize("name", sorted(HOSTILE_LINKS))
def test_a_program_choosing_what_the_linker_reads_gets_its_own_verdict(grader, name):
    """``#[link]`` is the one say a program has over the (direct) link: whatever it names, the build
    is the program's own verdict, never a sandbox fault, and no linker message carries a host file's
    contents. (No program can make a file to link: nothing it writes exists before tests run.)"""
    from ..conftest import grade_one

    source = HOSTILE_LINKS[name] + "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
    tests = "#[test]\nfn adds() {\n    assert_eq!(add(2, 2), 4);\n}\n"
    result = grade_one(grader, id=f"link-{name}", source=source, tests=tests)
    assert result.status in ("ok", "compile_error", "test_failure"), result.reason
    assert result.status != "ok" or result.tests.hidden.passed == 1
    text = result.reason + result.output_tail + "".join(d.rendered for d in result.build.diagnostics)
    assert "root:x:0:0" not in text
