"""Training: GRPO with TRL around the rewards, and what a run writes.

The entry point and its wiring (``train``), the trainer's additions to TRL's GRPO step
(``trainer``, ``dynamic_sampling``, ``canaries``), the SFT cold start (``warmstart``), the offline
tiny model (``tiny``), per-step metrics and curves (``callbacks``, ``plots``) and the run's README
(``runcard``). Modules here load torch when used; this package imports none of them.
"""
