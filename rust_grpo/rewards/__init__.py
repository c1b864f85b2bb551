"""Rewards: from a sandbox verdict to the numbers training and scoring read, hard to hack.

One grading per completion feeds every reward function and the verdicts (``functions``:
``RewardContext``, ``Evaluation``, ``REWARD_NAMES``); static checks of a completion's code and tests
(``audit``, with ``paths`` for std paths named through ``use`` aliases), wrong versions that its
tests must catch (``mutants``), and the argument-ignoring stub measure (``argless``).
"""
