"""Ctrl-C during training is never lost, even when Python drops the KeyboardInterrupt it raised."""

import signal

import pytest

from rust_grpo.training.interrupt import StopOnInterrupt, interrupt_at_step_end


class RaisesInItsFinaliser:
    """Created and collected at once: the SIGINT it raises becomes a KeyboardInterrupt inside
    ``__del__``, which CPython prints as "Exception ignored" and drops."""

    def __del__(self) -> None:
        signal.raise_signal(signal.SIGINT)


@pytest.mark.usefixtures("foreground")  # tests/conftest.py: as from a terminal, however the suite was started
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped one, by design
def test_a_ctrl_c_dropped_inside_a_finaliser_still_stops_training_at_the_step_end():
    stop = StopOnInterrupt()
    with interrupt_at_step_end(stop):
        RaisesInItsFinaliser()  # collected at once; no KeyboardInterrupt reaches this frame
        assert stop.interrupted
        with pytest.raises(KeyboardInterrupt):
            stop.on_step_end(None, None, None)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_sigint_the_caller_ignores_stays_ignored():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # e.g. `rust-grpo train &` from a script
    try:
        stop = StopOnInterrupt()
        with interrupt_at_step_end(stop):
            signal.raise_signal(signal.SIGINT)
        assert not stop.interrupted
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.train
@pytest.mark.usefixtures("foreground")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_ctrl_c_dropped_before_the_cold_start_stops_it_and_caches_nothing(tmp_path):  # type: ignore[no-untyped-def]
    """The SFT cold start runs outside the Trainer, so its loop checks the same record: it stops at
    its next step and never saves a half-trained model into the cache."""
    from rust_grpo.problems.answer_format import THINK
    from rust_grpo.problems.schema import load_problems
    from rust_grpo.training.tiny import build_tiny_qwen2
    from rust_grpo.training.warmstart import warm_start

    base = build_tiny_qwen2(tmp_path / "tiny")
    problems = load_problems("data/demo.jsonl")[:2]
    out = tmp_path / "cold-start"
    stop = StopOnInterrupt()
    with interrupt_at_step_end(stop):
        RaisesInItsFinaliser()
        with pytest.raises(KeyboardInterrupt):
            warm_start(base, problems, THINK, out, steps=2, negatives=0)
    assert not (out / "config.json").exists()
    warm_start(base, problems, THINK, out, steps=1, negatives=0)  # no guard active now
    assert (out / "config.json").exists()
