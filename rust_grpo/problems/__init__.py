"""Problems: the rows a policy is trained and evaluated on, and the answers it is asked for.

Our schema and its loaders (``schema``: ``Problem``, JSONL, Parquet, Oxen's format, chat prompts),
importers of external suites (``importers``), the shipped problem set built from its sources
(``problemset``; the JSONL files themselves live in ``rust_grpo/data/``), difficulty filtering
(``difficulty``), the answer formats (``answer_format``) and the parsing of a completion into code
(``parsing``).
"""
