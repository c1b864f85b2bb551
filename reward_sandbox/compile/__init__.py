"""Compile: from a job to crate text, and from the compiler's and libtest's output back; no process.

The lexer and the code views built on it (``lexer``, ``usetree``: the one reading of code every
static check shares), the crate files a job becomes (``assemble``: program, hidden tests,
sentinel; ``sentinel``: the sentinel test's body, prebuilt once per process; ``prelude`` and
``trait_scope``: which names the hidden tests see), the programs refused before grading
(``soundness``), the toolchain and the curated crate set (``toolchain``; ``crateset``: its
sources, its names being the contract's ``jobs.CURATED_CRATES``; ``crates``: its rlibs and who
links what), and what the steps leave: rustc's diagnostics (``diagnostics``) and libtest's event
stream (``testlog``). Which steps run is ``reward_sandbox.backends``; where they run, ``isolation``.
"""
