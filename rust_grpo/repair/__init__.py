"""Repair: multi-turn episodes in which a failing answer gets the sandbox's feedback and tries again.

The feedback and the episode loop, independent of how answers are produced (``episodes``), the
episodes inside GRPO training through TRL's ``rollout_func`` (``rollout``), and
``rust-grpo eval --repair-turns`` (``evaluate``).
"""
