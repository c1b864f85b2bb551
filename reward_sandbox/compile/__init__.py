"""Compile: from a job to a built, run and read crate, with no process or isolation of its own.

The lexer and the code views built on it (``lexer``, ``usetree``), the crate files a job becomes
(``assemble``: program, hidden tests, sentinel; ``prelude`` and ``trait_scope``: what names the hidden
tests see), the programs refused before grading (``soundness``), the toolchain and the crate set
(``toolchain``, ``crates``), the steps each backend runs (``backends``), and what those steps leave:
rustc's diagnostics (``diagnostics``) and libtest's event stream (``testlog``).
"""
