"""A command never deletes or overwrites what it did not create, and checks its outputs before the work."""

import json
import shutil
import subprocess
import sys

import pytest

from reward_sandbox.outfiles import OutputPathError
from rust_grpo import cli
from rust_grpo.outdir import MARKER, claim_output_dir, output_dir, record_outputs


def snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def mywork(tmp_path):
    folder = tmp_path / "mywork"
    (folder / "src").mkdir(parents=True)
    (folder / "notes.txt").write_text("important\n")
    (folder / "src" / "main.rs").write_text("fn main() {}\n")
    return folder


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--out", "{dir}"],
        ["demo", "--out", "{dir}", "--overwrite"],
        ["train", "--config", "tiny-cpu", "--set", 'train.output_dir="{dir}"'],
        ["train", "--config", "tiny-cpu", "--set", 'train.output_dir="{dir}"', "--overwrite"],
        ["train", "--config", "tiny-cpu", "--set", 'train.output_dir="{dir}"', "--resume"],
        ["eval", "--model", "no-such-model", "--out", "{dir}", "--overwrite"],
    ],
)
def test_a_folder_of_the_users_is_refused_untouched_with_one_line(mywork, argv, capsys):
    before = snapshot(mywork)
    code = cli.main([a.replace("{dir}", str(mywork)) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and str(mywork) in err[0] and "not a rust-grpo output folder" in err[0], err
    assert snapshot(mywork) == before and not (mywork / MARKER).exists()


def test_score_refuses_a_folder_of_the_users_before_grading(mywork, tmp_path):
    completions = tmp_path / "c.jsonl"
    completions.write_text(json.dumps({"problem_id": "x", "code": "fn f() {}"}) + "\n")
    before = snapshot(mywork)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rust_grpo.cli",
            "score",
            str(completions),
            "--dataset",
            "data/eval.jsonl",
            "--out",
            str(mywork),
            "--overwrite",
            "-q",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and "not a rust-grpo output folder" in proc.stderr
    assert snapshot(mywork) == before


def test_an_earlier_run_is_continued_or_replaced_only_when_asked(tmp_path):
    run = claim_output_dir(tmp_path / "run", "run")
    (run / "metrics.jsonl").write_text("{}\n")
    (run / "checkpoint-2").mkdir()
    (run / "checkpoint-2" / "model.bin").write_text("weights\n")
    record_outputs(run)  # what the command wrote, as train() records it at each step and when it ends
    with pytest.raises(OutputPathError, match="--resume to continue it, or --overwrite"):
        claim_output_dir(run, "run")
    with pytest.raises(OutputPathError, match="holds a rust-grpo run, not a report"):
        claim_output_dir(run, "report", overwrite=True)
    assert claim_output_dir(run, "run", resume=True) == run and (run / "checkpoint-2").is_dir()
    claim_output_dir(run, "run", overwrite=True)
    assert sorted(p.name for p in run.iterdir()) == [MARKER]  # no stale checkpoint left for a later --resume


def test_overwrite_deletes_only_the_files_the_command_wrote(tmp_path, caplog):
    with output_dir(tmp_path / "run", "run") as run:
        (run / "checkpoint-2").mkdir()
        (run / "checkpoint-2" / "model.bin").write_text("weights\n")
        (run / "metrics.jsonl").write_text("{}\n")
    (run / "notes.md").write_text("my notes\n")  # the user's, added after the run
    (run / "mine").mkdir()
    (run / "mine" / "plot.png").write_bytes(b"png")
    with output_dir(run, "run", overwrite=True):
        pass
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file() and p.name != MARKER) == [
        "mine/plot.png",
        "notes.md",
    ]
    assert "kept 2 file(s) rust-grpo did not write" in caplog.text and "notes.md" in caplog.text
    (run / "report.json").write_text("{}\n")  # the second run's own output
    record_outputs(run)
    claim_output_dir(run, "run", overwrite=True)  # the user's files stay foreign through every later run
    assert not (run / "report.json").exists() and (run / "notes.md").read_text() == "my notes\n"


def test_overwrite_never_follows_a_link_or_a_hand_edited_manifest_out_of_the_folder(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "model.bin").write_text("the user's\n")
    (tmp_path / "outside.txt").write_text("the user's\n")
    with output_dir(tmp_path / "run", "run") as run:
        (run / "ckpt").mkdir()
        (run / "ckpt" / "model.bin").write_text("ours\n")
    shutil.rmtree(run / "ckpt")
    (run / "ckpt").symlink_to(theirs)  # our folder replaced by a link to one of theirs
    marker = json.loads((run / MARKER).read_text())
    marker["files"] += ["../outside.txt", str(tmp_path / "outside.txt")]
    (run / MARKER).write_text(json.dumps(marker))
    claim_output_dir(run, "run", overwrite=True)
    assert (theirs / "model.bin").read_text() == "the user's\n"
    assert (tmp_path / "outside.txt").read_text() == "the user's\n"


def test_a_file_of_the_users_under_a_name_the_command_writes_is_refused_not_kept(tmp_path):
    with output_dir(tmp_path / "run", "run") as run:
        (run / "metrics.jsonl").write_text("{}\n")
    (run / "README.md").write_text("my notes\n")  # TRL writes its model card here at every save
    (run / "checkpoint-50-best").mkdir()  # transformers' rotation deletes checkpoint-* folders
    (run / "checkpoint-50-best" / "model.bin").write_text("my best\n")
    with pytest.raises(OutputPathError, match=r"holds README\.md, checkpoint-50-best with files its manifest does not"):
        claim_output_dir(run, "run", overwrite=True)
    assert (run / "README.md").read_text() == "my notes\n" and (run / "metrics.jsonl").exists()


def test_resume_takes_only_checkpoints_the_run_recorded_and_a_nested_report_is_not_the_runs(tmp_path):
    from rust_grpo.training.train import latest_checkpoint

    with output_dir(tmp_path / "run", "run") as run:
        (run / "checkpoint-2").mkdir()
        (run / "checkpoint-2" / "model.bin").write_text("complete\n")
        with output_dir(run / "eval", "report") as report:  # `eval --out run/eval` during the run
            (report / "report.md").write_text("the eval's\n")
    (run / "checkpoint-4").mkdir()  # a save cut off by a kill: never recorded
    (run / "checkpoint-4" / "model.bin").write_text("half\n")
    assert latest_checkpoint(run).endswith("checkpoint-2")
    with pytest.raises(OutputPathError, match="holds checkpoint-4 with files its manifest does not list"):
        claim_output_dir(run, "run", overwrite=True)
    shutil.rmtree(run / "checkpoint-4")
    claim_output_dir(run, "run", overwrite=True)
    assert (run / "eval" / "report.md").read_text() == "the eval's\n"  # another command's folder, kept
    assert not (run / "checkpoint-2").exists()


def test_a_marker_without_a_manifest_is_not_overwritten(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    (old / MARKER).write_text(json.dumps({"kind": "run"}) + "\n")  # written by an older rust-grpo
    (old / "notes.md").write_text("mine\n")
    with pytest.raises(OutputPathError, match="older rust-grpo that kept no list"):
        claim_output_dir(old, "run", overwrite=True)
    assert (old / "notes.md").read_text() == "mine\n"


def test_a_folder_left_holding_only_the_marker_is_reused_without_overwrite(tmp_path):
    with pytest.raises(RuntimeError), output_dir(tmp_path / "r", "report"):
        raise RuntimeError("the command failed before writing anything")
    assert claim_output_dir(tmp_path / "r", "report") == tmp_path / "r"


def test_demo_overwrite_of_an_earlier_run_keeps_the_users_files(tmp_path, capsys):
    """The newcomer's path: `demo --out DIR` twice, with a file of theirs added in between."""
    run = tmp_path / "demo"
    assert cli.main(["demo", "--out", str(run), "--steps", "1"]) == 0
    (run / "my-notes.md").write_text("what I saw\n")
    assert cli.main(["demo", "--out", str(run), "--steps", "1", "--overwrite"]) == 0
    assert (run / "my-notes.md").read_text() == "what I saw\n"
    assert (run / "summary.md").exists() and "my-notes.md" not in json.loads((run / MARKER).read_text())["files"]
    capsys.readouterr()
    assert cli.main(["demo", "--out", str(run), "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "pass --overwrite to replace it" in err and "--resume" not in err  # demo has no --resume


def test_data_build_never_writes_over_existing_files_without_overwrite(tmp_path, capsys):
    source = tmp_path / "source"
    source.mkdir()
    (source / "p.rsp").write_text(
        "=== add\nAdd.\n--- signature\nfn add(a: i32, b: i32) -> i32\n--- solution\n"
        "fn add(a: i32, b: i32) -> i32 { a + b }\n--- tests\nassert_eq!(add(1, 2), 3);\n"
    )
    out = tmp_path / "out"
    out.mkdir()
    (out / "eval.jsonl").write_text("my own eval set\n")
    (out / "keep.txt").write_text("mine\n")
    assert cli.main(["data", "build", "--source", str(source), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "already holds eval.jsonl" in err and "--overwrite" in err
    assert sorted(p.name for p in out.iterdir()) == ["eval.jsonl", "keep.txt"]  # nothing written, nothing lost
    assert (out / "eval.jsonl").read_text() == "my own eval set\n"
    assert cli.main(["data", "build", "--source", str(source), "--out", str(out), "--overwrite"]) == 0
    assert (out / "keep.txt").read_text() == "mine\n" and (out / "train.jsonl").exists()


def test_outputs_are_as_readable_as_the_users_other_files(tmp_path):
    from reward_sandbox.outfiles import write_text

    write_text(tmp_path / "report.md", "# report\n")
    (tmp_path / "plain.md").write_text("# made by open()\n")
    assert (tmp_path / "report.md").stat().st_mode & 0o777 == (tmp_path / "plain.md").stat().st_mode & 0o777


def test_a_file_where_the_folder_should_be_is_refused(tmp_path):
    (tmp_path / "out").write_text("mine\n")
    with pytest.raises(OutputPathError, match="is a file"):
        claim_output_dir(tmp_path / "out", "report", overwrite=True)
    assert (tmp_path / "out").read_text() == "mine\n"


def test_output_files_are_refused_before_any_work_when_they_exist_or_cannot_be_written(tmp_path, capsys):
    from reward_sandbox import cli as sandbox_cli

    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"id": "a", "source": "pub fn f() {}"}) + "\n")
    existing = tmp_path / "results.jsonl"
    existing.write_text("mine\n")
    assert sandbox_cli.main(["run", "-i", str(jobs), "-o", str(existing)]) == 2
    err = capsys.readouterr().err
    assert "exists; pass --overwrite" in err and "isolation=" not in err  # refused before grading
    assert existing.read_text() == "mine\n"
    blocked = tmp_path / "a-file" / "results.jsonl"
    (tmp_path / "a-file").write_text("mine\n")
    assert sandbox_cli.main(["run", "-i", str(jobs), "-o", str(blocked)]) == 2
    err = capsys.readouterr().err
    assert "cannot create it" in err and "isolation=" not in err
    for argv in (
        ["data", "import", "--format", "exercism", str(tmp_path), "--out", str(existing)],
        ["data", "filter", str(jobs), "--out", str(existing)],
    ):
        assert cli.main(argv) == 2
        assert "exists; pass --overwrite" in capsys.readouterr().err
        assert existing.read_text() == "mine\n"
