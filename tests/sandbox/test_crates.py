"""Programs that use the curated crate set (``reward_sandbox/compile/crates.py``): detection, validation,
keys, and real grading against the prebuilt rlibs in the real sandbox."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from reward_sandbox import Grader
from reward_sandbox.batch.sharing import batch_key
from reward_sandbox.cache import ResultCache, job_key
from reward_sandbox.compile.crates import detect, installed_versions, job_crates
from reward_sandbox.compile.crateset import CURATED, DEBIAN_PACKAGES
from reward_sandbox.isolation.limits import Limits
from reward_sandbox.jobs import InvalidJob, Job

from ..conftest import TEST_LIMITS, needs_bwrap
from .batch.test_batched import verdict, was_batched

# one program per crate of the set, with hidden tests that pass only if the crate really works
PROGRAMS: dict[str, tuple[str, str]] = {
    "regex": (
        'use regex::Regex;\npub fn digits(s: &str) -> Vec<String> {\n    Regex::new(r"\\d+").unwrap()'
        ".find_iter(s).map(|m| m.as_str().to_string()).collect()\n}\n",
        '#[test]\nfn t() { assert_eq!(digits("a12b3"), vec!["12".to_string(), "3".to_string()]); }',
    ),
    "itertools": (
        'use itertools::Itertools;\npub fn joined(v: &[i32]) -> String {\n    v.iter().sorted().join(",")\n}\n',
        '#[test]\nfn t() { assert_eq!(joined(&[3, 1, 2]), "1,2,3"); }',
    ),
    "serde": (
        "use serde::Serialize;\n#[derive(Serialize)]\npub struct P {\n    pub x: i32,\n}\n"
        "pub fn is_serialize<T: Serialize>(_: &T) -> bool {\n    true\n}\n",
        "#[test]\nfn t() { assert!(is_serialize(&P { x: 1 })); }",
    ),
    "serde_json": (
        "pub fn field(s: &str) -> i64 {\n    let v: serde_json::Value = serde_json::from_str(s).unwrap();\n"
        '    v["a"].as_i64().unwrap()\n}\n',
        '#[test]\nfn t() { assert_eq!(field(r#"{"a": 41}"#) + 1, 42); }',
    ),
    "rand": (
        "use rand::{Rng, SeedableRng};\npub fn rolls(seed: u64) -> Vec<u32> {\n"
        "    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);\n    (0..8).map(|_| rng.gen_range(1..=6)).collect()\n}\n"
        "pub fn roll() -> u32 {\n    rand::thread_rng().gen_range(1..=6)\n}\n",
        "#[test]\nfn t() { assert_eq!(rolls(7), rolls(7)); assert!((1..=6).contains(&roll())); }",
    ),
    "once_cell": (
        "use once_cell::sync::Lazy;\nstatic V: Lazy<Vec<i32>> = Lazy::new(|| vec![1, 2, 3]);\n"
        "pub fn total() -> i32 {\n    V.iter().sum()\n}\n",
        "#[test]\nfn t() { assert_eq!(total(), 6); }",
    ),
    "lazy_static": (
        "lazy_static::lazy_static! {\n    static ref N: Vec<u8> = vec![1, 2];\n}\npub fn n() -> usize {\n    N.len()\n}\n",
        "#[test]\nfn t() { assert_eq!(n(), 2); }",
    ),
    "num": (
        "use num::BigUint;\npub fn fact(n: u32) -> String {\n"
        "    (1..=n).fold(BigUint::from(1u32), |a, b| a * b).to_string()\n}\n",
        '#[test]\nfn t() { assert_eq!(fact(25), "15511210043330985984000000"); }',
    ),
    "md5": (
        'pub fn hex(s: &str) -> String {\n    format!("{:x}", md5::compute(s))\n}\n',
        '#[test]\nfn t() { assert_eq!(hex(""), "d41d8cd98f00b204e9800998ecf8427e"); }',
    ),
}

_missing = sorted(set(CURATED) - set(installed_versions()))
needs_crates = pytest.mark.skipif(
    bool(_missing),
    reason=f"crate sources not installed ({', '.join(_missing)}): apt-get install {' '.join(DEBIAN_PACKAGES)}",
)


def test_every_crate_of_the_set_has_a_program() -> None:
    assert sorted(PROGRAMS) == sorted(CURATED)


# --- no compiler needed -----------------------------------------------------------------------------


def test_detection_finds_crate_paths_not_lookalikes() -> None:
    assert detect("use regex::Regex;") == {"regex"}
    assert detect("use ::md5;\nextern crate rand;") == {"md5", "rand"}
    assert detect('fn f() -> String { format!("{:x}", md5::compute(b"")) }') == {"md5"}
    assert detect("fn f() { let v: serde_json::Value = todo!(); }") == {"serde_json"}
    # a segment of a longer path, a comment, a string, a local module of the same name: no crate
    assert detect("use self::regex::X; fn f() { a::rand::g() }") == frozenset()
    assert detect('// use regex::Regex;\nconst S: &str = "rand::thread_rng()";') == frozenset()
    assert detect("mod rand { pub fn g() {} }\nfn f() { rand::g() }") == frozenset()
    assert detect("use std::collections::HashMap;") == frozenset()
    # a value of the same name does not hide the crate; `as rand::Rng` is a path, not a rename
    assert detect("fn md5(s: &str) -> md5::Digest { md5::compute(s) }") == {"md5"}
    assert detect("fn f<R: rand::Rng>(r: &mut R) -> u8 { <R as rand::Rng>::gen(r) }") == {"rand"}
    assert detect("use std::fmt as regex; fn f() -> regex::Result { Ok(()) }") == frozenset()


def test_job_crates_is_declared_plus_detected_and_sorted() -> None:
    job = Job.from_dict({"id": "a", "source": "use regex::Regex;", "crates": ["serde-json", "md5", "md5"]})
    assert job.crates == ("md5", "serde_json")
    assert job_crates(job) == ("md5", "regex", "serde_json")
    assert Job.from_dict(job.to_dict()) == job  # the wire format keeps them


def test_a_crate_outside_the_set_is_invalid_input_naming_it_and_the_set(grader) -> None:
    (graded,) = grader.grade([{"id": "a", "source": "pub fn f() {}", "crates": ["tokio"]}])
    assert graded.status.value == "invalid_input" and "crate(s) tokio not in the available set" in graded.reason
    with pytest.raises(InvalidJob) as err:
        Job.from_dict({"id": "a", "source": "pub fn f() {}", "crates": ["regex", "tokio"]})
    message = str(err.value)
    assert "tokio" in message and "regex" in message and all(name in message for name in CURATED)
    assert "regex" not in message.split("not in")[0]  # only the unknown one is named as unknown
    with pytest.raises(InvalidJob, match="list of crate names"):
        Job.from_dict({"id": "a", "source": "pub fn f() {}", "crates": "regex"})


def test_cache_and_batch_keys_hold_the_crate_set() -> None:
    plain = Job(id="a", source="pub fn f() {}", tests="#[test] fn t() {}")
    regex = Job(id="a", source="use regex::Regex; pub fn f() {}", tests=plain.tests)
    md5 = Job(id="a", source='pub fn f() { md5::compute(b""); }', tests=plain.tests)
    limits = Limits()
    # std-only jobs keep their keys; a crate-using one changes with the crate set's key (versions)
    assert job_key(plain, "tc", "fast", limits, "bwrap") == job_key(plain, "tc", "fast", limits, "bwrap", crates="")
    assert job_key(regex, "tc", "fast", limits, "bwrap", crates="k1") != job_key(
        regex, "tc", "fast", limits, "bwrap", crates="k2"
    )
    # programs linking different crate sets never share a compiler run
    assert len({batch_key(plain), batch_key(regex), batch_key(md5)}) == 3
    assert batch_key(regex) == batch_key(Job(id="b", source="use regex::Regex; pub fn g() {}", tests=plain.tests))


def test_integration_mode_links_the_crates_for_the_library_and_its_test_crate(grader) -> None:
    """Exercism-style jobs: the library uses regex, and so may the separate test crate."""
    source = 'use regex::Regex;\npub fn digits(s: &str) -> bool {\n    Regex::new(r"^\\d+$").unwrap().is_match(s)\n}\n'
    tests = 'use solution::*;\n#[test]\nfn t() {\n    assert!(digits("42"));\n    assert!(!digits("4a"));\n'
    tests += '    assert!(regex::Regex::new("a").unwrap().is_match("a"));\n}\n'
    wrong = source.replace("is_match(s)", 'is_match("1")')
    jobs = [
        {"id": i, "source": s, "test_mode": "integration", "tests": tests} for i, s in (("r", source), ("w", wrong))
    ]
    right, bad = grader.grade(jobs)
    assert right.status.value == "ok", (right.reason, right.output_tail)
    assert bad.status.value == "test_failure" and bad.tests.hidden.passed == 0


# --- the real sandbox -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def alone() -> Grader:
    with Grader(workers=2, limits=TEST_LIMITS, cache=ResultCache(), batch=False) as g:
        yield g


def _job(name: str, **extra: object) -> dict:
    source, tests = PROGRAMS[name]
    return {"id": name, "source": source, "tests": tests, **extra}


@needs_bwrap
@needs_crates
def test_a_program_using_each_crate_builds_and_passes(alone) -> None:
    results = alone.grade([_job(name) for name in PROGRAMS])
    for name, result in zip(PROGRAMS, results):
        assert result.status.value == "ok", (name, result.reason)
        assert result.tests.hidden.passed == 1 and result.tests.hidden.trusted, name
    # the same program with a wrong expectation fails: the crate really ran
    source, _ = PROGRAMS["md5"]
    (wrong,) = alone.grade([{"id": "w", "source": source, "tests": '#[test]\nfn t() { assert_eq!(hex(""), "0"); }'}])
    assert wrong.status.value == "test_failure"


@needs_bwrap
@needs_crates
def test_main_mode_and_declared_crates(alone) -> None:
    main = {
        "id": "m",
        "source": 'pub fn words(s: &str) -> usize {\n    regex::Regex::new(r"\\w+").unwrap().find_iter(s).count()\n}\n',
        "tests": 'fn main() { assert_eq!(words("a bb c"), 3); }',
        "test_mode": "main",
    }
    # declared but unnamed by the code: linked all the same, and the hidden tests may use it
    declared = {
        "id": "d",
        "source": "pub fn n() -> usize {\n    3\n}\n",
        "tests": '#[test]\nfn t() { use itertools::Itertools; assert_eq!((0..n()).join(""), "012"); }',
        "crates": ["itertools"],
    }
    results = alone.grade([main, declared])
    assert [r.status.value for r in results] == ["ok", "ok"], [r.reason for r in results]


@needs_bwrap
@needs_crates
def test_a_crate_using_program_reads_nothing_of_the_host_beyond_the_bound_set(alone) -> None:
    from reward_sandbox.compile.crates import ensure

    built = ensure(alone.toolchain.version, alone.toolchain.cargo)  # the set the grader links
    probe = (
        PROGRAMS["md5"][0] + "pub fn listing(dir: &str) -> Vec<String> {\n"
        "    match std::fs::read_dir(dir) {\n"
        "        Ok(d) => d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect(),\n"
        '        Err(e) => vec![format!("err:{:?}", e.kind())],\n'
        "    }\n}\n"
    )
    cache_base = str(built.root.parent)  # the host's: not in the sandbox at all (the set is at /crates)
    tests = (
        "#[test]\nfn t() {\n"
        '    assert!(listing("/usr/share/cargo/registry").iter().all(|n| n.starts_with("err:")), "{:?}", listing("/usr/share/cargo/registry"));\n'
        f'    assert!(listing("{cache_base}").iter().all(|n| n.starts_with("err:")));\n'
        '    assert!(listing("/crates/lib").iter().any(|n| n.starts_with("libmd5-")));\n'
        '    assert!(std::fs::write("/crates/lib/x", b"1").is_err());\n'
        '    assert_eq!(hex(""), "d41d8cd98f00b204e9800998ecf8427e");\n'
        "}\n"
    )
    (result,) = alone.grade([{"id": "probe", "source": probe, "tests": tests}])
    assert result.status.value == "ok" and result.tests.hidden.passed == 1, (result.reason, result.tests.output[-1500:])


@needs_bwrap
@needs_crates
def test_batched_crate_programs_grade_as_alone(alone) -> None:
    shared = '#[test]\nfn t() { assert_eq!(digits("7 8").len(), 2); }'
    bodies = [
        'Regex::new(r"\\d+").unwrap().find_iter(s).map(|m| m.as_str().to_string()).collect()',
        'Regex::new(r"\\d").unwrap().find_iter(s).map(|m| m.as_str().to_string()).collect()',
        'Regex::new(r"[0-9]+").unwrap().find_iter(s).map(|m| m.as_str().to_string()).filter(|m| !m.is_empty()).collect()',
        'Regex::new(r"\\d+ \\d+").unwrap().find_iter(s).map(|m| m.as_str().to_string()).collect()',  # fails
    ]
    jobs = [
        {
            "id": f"r{i}",
            "source": f"use regex::Regex;\npub fn digits(s: &str) -> Vec<String> {{\n    {b}\n}}\n",
            "tests": shared,
        }
        for i, b in enumerate(bodies)
    ]
    jobs += [{**_job("md5"), "id": "m0"}, {**_job("md5"), "id": "m1", "source": PROGRAMS["md5"][0] + "\n"}]
    with Grader(workers=2, limits=TEST_LIMITS, cache=ResultCache()) as batched:
        together = batched.grade(jobs)
    single = alone.grade(jobs)
    assert [verdict(a) for a in together] == [verdict(b) for b in single]
    assert [r.status.value for r in together] == ["ok", "ok", "ok", "test_failure", "ok", "ok"]
    assert sum(map(was_batched, together)) >= 4  # the regex group and the md5 pair shared compiler runs


# --- where the set comes from, and what rows and prompts say ------------------------------------------


def test_ci_and_both_images_install_every_package_of_the_set() -> None:
    import re

    from ..conftest import ROOT

    script = (ROOT / "scripts" / "system_packages.sh").read_text()
    listed = re.search(r"CRATE_PACKAGES=\(([^)]*)\)", script)
    assert listed is not None and sorted(listed.group(1).split()) == sorted(DEBIAN_PACKAGES)
    sources = re.search(r"SOURCE_DEPENDENCIES=\(([^)]*)\)", script)  # regex's own, which apt only recommends
    assert sources is not None
    dockerfile = (ROOT / "Dockerfile").read_text()
    args = re.findall(r'ARG CRATE_PACKAGES="([^"]*)"', dockerfile)
    wanted = sorted([*DEBIAN_PACKAGES, *sources.group(1).split()])
    assert len(args) == 2 and all(sorted(a.split()) == wanted for a in args)
    assert "RUN reward-sandbox crates" in dockerfile  # the CPU image ships the built rlibs


def test_rows_declare_crates_and_the_prompt_names_them() -> None:
    from rust_grpo.problems.answer_format import THINK
    from rust_grpo.problems.schema import DataError, Problem, normalize, user_prompt

    row = normalize({"id": "r", "prompt": "Count words.", "crates": "regex, serde-json"}, "line 1")
    assert row.crates == ("regex", "serde_json") and row.job("pub fn f() {}").crates == ("regex", "serde_json")
    assert "regex, serde_json" in user_prompt(row) and "No other crate" in user_prompt(row)
    plain = Problem(id="p", prompt="Add.")
    assert "crate" not in user_prompt(plain)  # std-only rows' prompts are unchanged
    offering = dataclasses.replace(THINK, crates=("rand", "md5"))  # data.offer_crates: see test_config
    assert "md5, rand" in user_prompt(plain, offering) and "md5, rand, regex" in user_prompt(row, offering)
    assert "crates" not in plain.to_dict() and row.to_dict()["crates"] == ["regex", "serde_json"]
    with pytest.raises(DataError, match="tokio"):
        normalize({"id": "r", "prompt": "x", "crates": ["tokio"]}, "line 2")


def test_jobs_and_dataset_rows_share_one_crate_check() -> None:
    """``check_crates`` and ``check_crate_name`` are the one check of crate names: a job and a
    dataset row with the same bad value fail with the same words, each naming its record."""
    import re

    from reward_sandbox.jobs import InvalidCrate, check_crate_name, check_crates
    from rust_grpo.problems.schema import DataError, normalize

    assert check_crates(["serde-json", "regex", "regex"]) == ("regex", "serde_json") and check_crates(None) == ()
    assert check_crate_name("my-crate") == "my_crate"
    for field, check, bad in (("crates", check_crates, ["tokio"]), ("crate_name", check_crate_name, "9lives")):
        with pytest.raises(InvalidCrate) as direct:
            check(bad)
        with pytest.raises(InvalidJob, match=re.escape(f"job j: {direct.value}")):
            Job.from_dict({"id": "j", "source": "pub fn f() {}", field: bad})
        with pytest.raises(DataError, match=re.escape(f"line 3 (id=r): {direct.value}")):
            normalize({"id": "r", "prompt": "x", field: bad}, "line 3")


@needs_crates
def test_under_rlimits_a_set_out_of_the_slot_uids_reach_is_a_sandbox_error_not_a_compile_error(fallback_grader):
    import os

    from reward_sandbox.compile.crates import current, passable_by_others

    (result,) = fallback_grader.grade([_job("md5")])
    built = current()
    assert built is not None
    if os.geteuid() == 0 and not passable_by_others(built.lib):
        assert result.status.value == "sandbox_error" and "REWARD_SANDBOX_CRATES" in result.reason
    else:  # a readable base: the fallback links the set where it lies
        assert result.status.value == "ok", result.reason


def test_jobs_built_in_python_spell_their_crates_one_way() -> None:
    a = Job(id="a", source="pub fn f() {}", crates=("serde-json", "md5", "md5"))  # type: ignore[arg-type]
    assert a.crates == ("md5", "serde_json") and hash(a) == hash(Job(id="a", source=a.source, crates=a.crates))


FAKE_CARGO = """#!/bin/bash
# stands in for `cargo build --message-format=json`: counts its runs, makes one rlib, reports it
echo run >> "$RG_FAKE_CARGO_RUNS"
sleep 1
deps="$CARGO_TARGET_DIR/release/deps"
mkdir -p "$deps" && touch "$deps/libmd5-0123.rlib"
echo '{"reason":"compiler-artifact","package_id":"registry+https://github.com/rust-lang/crates.io-index#md5@0.7.0","target":{"name":"md5"},"filenames":["'"$deps"'/libmd5-0123.rlib"]}'
"""


def test_two_processes_build_the_set_once_atomically(tmp_path) -> None:
    import json
    import os
    import subprocess
    import sys

    from ..conftest import ROOT

    registry = tmp_path / "registry"
    (registry / "md5-0.7.0").mkdir(parents=True)
    (registry / "md5-0.7.0" / "Cargo.toml").write_text('[package]\nname = "md5"\nversion = "0.7.0"\n')
    cargo = tmp_path / "cargo"
    cargo.write_text(FAKE_CARGO)
    cargo.chmod(0o755)
    base, runs = tmp_path / "base", tmp_path / "runs"
    env = {**os.environ, "REWARD_SANDBOX_CRATE_REGISTRY": str(registry), "RG_FAKE_CARGO_RUNS": str(runs)}
    code = (
        "import json, sys; from pathlib import Path; from reward_sandbox.compile.crates import ensure; "
        f"s = ensure('tc 1', {str(cargo)!r}, Path({str(base)!r})); print(json.dumps([str(s.root), s.flags(['md5'])]))"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert runs.read_text().count("run") == 1  # the second waited on the lock, then found the first's
    assert outs[0] == outs[1]
    root = Path(outs[0][0])
    assert root.parent == base and root.name.startswith("crates-")
    assert outs[0][1] == ["-L", f"dependency={root}/lib", "--extern", f"md5={root}/lib/libmd5-0123.rlib"]
    assert (root / "vendor" / "md5-0.7.0" / "Cargo.toml").is_file()  # the closure's sources, for cargo
    assert 'directory = "' + str(root / "vendor") + '"' in (root / "cargo-config.toml").read_text()
    assert sorted(p.name for p in base.iterdir() if not p.name.endswith(".lock")) == [root.name]  # no temp left
    # another toolchain is another set
    other = subprocess.run(
        [sys.executable, "-c", code.replace("tc 1", "tc 2")], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert json.loads(other.stdout)[0] != str(root) and runs.read_text().count("run") == 2
