"""Rewards: from a sandbox verdict to the numbers training and scoring read, hard to hack.

One grading per completion (``context``: ``RewardContext``, given the run's problems by id) feeds the
verdicts (``verdict``: ``Evaluation``) and every reward component (``functions``: the one registry,
``REWARD_NAMES``), which ``trl_rewards`` hands to TRL; ``sandbox`` maps a run's ``[reward]`` section onto
the sandbox's settings. Static checks of a completion's code and tests
(``audit``, with ``paths`` for std paths named through ``use`` aliases), wrong versions that its
tests must catch (``mutants``), and the argument-ignoring stub measure (``argless``).
"""
