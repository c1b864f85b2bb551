"""Batch: several jobs that share their tests graded in one compiler run, each with its own verdict.

``sharing`` decides who may share a run (and with whom), ``crate`` lays the batch out as one crate
with one module per program, and ``rounds`` builds it once and runs each program's tests in
processes of their own; whatever a batch cannot vouch for goes back to the pool to be graded alone.
"""
