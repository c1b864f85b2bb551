"""Lay out several jobs that share their tests as one crate: each program is a module of its own.

Every program is assembled exactly as when it is graded alone (``compile/assemble.py``: its own random
tag, hidden-test module, sentinel and nonce), in a directory named by its tag, and the batch's
root (itself under a random name, so no program can ``include_str!`` it) declares it as
``pub mod {tag}_m``. The crate is built once; each program's tests then run in processes of their
own (``rounds.py``), selected by filters that match that program's tests alone: the hidden run's
filter is the one a run alone gets (``{tag}_hidden::``; libtest filters match anywhere in a name),
the own run's selects the program's module and skips its hidden tests.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace

from ..compile.assemble import Assembly, assemble
from ..jobs import Job


@dataclass(frozen=True)
class Member:
    """One program of a batch: its single-grading assembly, written under ``{tag}/``."""

    job: Job
    asm: Assembly

    @property
    def tag(self) -> str:
        return self.asm.tag

    def hidden_filter(self) -> list[str]:
        return [f"{self.asm.hidden_module}::"]

    def own_filter(self) -> list[str]:
        return [self.asm.prefix, "--skip", f"{self.asm.hidden_module}::"]


@dataclass(frozen=True)
class BatchCrate:
    files: dict[str, str]  # relative to the sources directory
    root: str  # the crate root's file name
    members: tuple[Member, ...]

    @property
    def sentinel_aliases(self) -> list[str]:
        """Each member's name of the sentinel crate (``compile/sentinel.py``), where it links one."""
        return [m.asm.sentinel_crate for m in self.members if m.asm.sentinel_crate]


def build_batch(jobs: list[Job], work_dir: str, sentinel_crate: bool = False) -> BatchCrate:
    """The batch's files: each program as alone, under its tag, and the root that declares them.
    ``sentinel_crate``: as ``assemble``'s; the build then needs ``sentinel_aliases``' ``--extern``s."""
    members = []
    for job in jobs:
        asm = assemble(job, work_dir, sentinel_crate=sentinel_crate)
        members.append(Member(job, replace(asm, module=f"{asm.tag}_m")))
    files: dict[str, str] = {}
    lines = []
    for member in members:
        for name, text in member.asm.files.items():
            if name != member.asm.hidden_root:
                files[f"{member.tag}/{name}"] = text
        lines.append(f'#[path = "{member.tag}/{member.asm.lib_path}"] pub mod {member.asm.module};\n')
    root = f"rg{secrets.token_hex(8)}.rs"
    files[root] = "".join(lines)
    return BatchCrate(files=files, root=root, members=tuple(members))
