"""Evaluation: sample, grade, score and report.

``rust-grpo eval`` sampling (``sampling``), per-record verdicts and summaries for ``score`` and
``eval`` (``scoring``), the check of a problem set that references pass and stubs fail
(``verify``: ``data verify``), the pass@k estimator (``passk``), reports in JSON, Markdown and PNG
(``report``), and the stage-by-stage learning measurements of the benchmarks (``learning``).
"""
