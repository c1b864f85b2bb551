import pytest

from reward_sandbox import InvalidJob, Job, Limits, TestMode


def test_minimal_job_gets_defaults():
    job = Job.from_dict({"id": "a", "source": "pub fn f() {}"})
    assert job.test_mode is TestMode.UNIT
    assert job.crate_name == "solution"
    assert not job.has_tests


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"id": "x"}, "missing required field 'source'"),
        ({"id": "x", "source": 3}, "'source' must be a string"),
        ({"id": "x", "source": "  "}, "'source' is empty"),
        ({"id": "x", "source": "fn f(){}", "test_mode": "fuzz"}, "'test_mode' must be one of"),
        ({"id": "x", "source": "fn f(){}", "test_mode": "integration"}, "needs non-empty 'tests'"),
        ({"id": "x", "source": "fn f(){}", "crate_name": "9lives"}, "'crate_name' must be a Rust identifier"),
        ({"id": "x", "source": "fn f(){}", "timeout_s": -1}, "'timeout_s' must be a number"),
        ({"id": "x", "source": "fn f(){}", "timeout_s": True}, "'timeout_s' must be a number"),
        ({"id": "x", "source": "a\x00b"}, "NUL byte"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_invalid_records_name_the_record_and_the_reason(record, expected):
    with pytest.raises(InvalidJob) as info:
        Job.from_dict(record, index=7)
    assert "record 7" in str(info.value)
    assert expected in str(info.value)


def test_dashed_crate_names_become_identifiers():
    assert (
        Job.from_dict({"id": "a", "source": "x", "crate_name": "rna-transcription"}).crate_name == "rna_transcription"
    )


def test_limits_reject_nonsense_and_unknown_keys():
    with pytest.raises(ValueError, match="run_wall_s"):
        Limits(run_wall_s=0)
    with pytest.raises(ValueError, match="unknown limit"):
        Limits.from_dict({"wall": 3})
    assert Limits().with_run_timeout(2.5).run_cpu_s == 3  # CPU time, rounded up
    assert Limits().with_run_timeout(2.5).run_wall_s == 5.0  # wall: twice the CPU time


def test_the_expected_hidden_test_count_is_a_lower_bound_of_what_compiles():
    from reward_sandbox.compile.assemble import count_tests

    tests = """
#[test]
fn a() {}
// #[test] in a comment
#[test]
#[ignore]
fn b() {}
#[test]
#[cfg(feature = "extra")]
fn off() {}
#[cfg(feature = "io")]
mod io {
    #[test]
    fn off_too() {}
}
#[cfg(test)]
mod inner {
    #[test]
    fn c() {}
}
macro_rules! cases { ($($n:ident),*) => { $( #[test] fn $n() {} )* } }
cases!(d, e);
"""
    assert count_tests(tests) == 3  # a, b, inner::c; the macro's d and e are not counted, never over-counted
