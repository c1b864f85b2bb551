"""Isolation: where and how untrusted steps run, and what they may use.

The isolation levels (``levels``: bwrap, unshare, rlimits), the per-job resources (``limits``,
``cgroups`` for memory, ``slots`` for uids), the files as the sandbox sees them (``layout``), the
driver script that runs a job's steps and the host side that watches it (``process``), and
``rg-run``, the small C helper that starts each step confined (``runner`` builds ``runner.c``).
"""
