"""Do the two sampling engines score one trained model alike? A finished `bench_learning.py` run's GRPO
adapter (on the cached cold start it was trained from) is sampled and graded on the benchmark's own
held-out problems through each engine in turn: the same problems, samples, token budget, temperature,
top-p, top-k (0) and seed; only the engine and its precision change.

It separates the two things a learning run's figures mix: how the model was trained and how it was
scored. When the engines agree on the same adapter, a gap between a vLLM run's figures and a
transformers run's is the training's (or the draw's), not the scorer's.

    python benchmarks/score_backends.py --run runs/bench [--engines vllm:bfloat16,vllm:float32,hf:float32]

Writes <run>/backends.json: per engine the stage's metrics (as `learning.json`'s stages), the seconds it
took to sample, and the share of completions holding a token that transformers' former default top-k
(50) would have forbidden inside the top-p nucleus; every engine's graded completions beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines import provenance
from bench_learning import arguments, heldout_set, score_stage

from rust_grpo.config import load_config
from rust_grpo.problems.answer_format import AnswerFormat
from rust_grpo.problems.schema import Problem, chat_prompt
from rust_grpo.problems.selection import run_format, training_problems


def beyond_top_k(
    policy: tuple[Any, Any],
    problems: list[Problem],
    rows: list[dict[str, Any]],
    fmt: AnswerFormat,
    temperature: float,
    k: int = 50,
    top_p: float = 0.95,
) -> dict[str, int]:
    """How many completions hold a token ranked k or lower that top-p alone keeps (teacher-forced, the
    float32 policy, ``(model, tokenizer)``, at the run's temperature): the samples a top-k of ``k`` would have
    changed."""
    import torch

    model, tokenizer = policy
    by_id = {p.id: p for p in problems}
    hit = tokens = 0
    for row in rows:
        chat = chat_prompt(by_id[str(row["problem_id"])], fmt)
        prompt = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        p_ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
        c_ids = tokenizer(str(row["completion"]), return_tensors="pt", add_special_tokens=False)["input_ids"]
        if c_ids.shape[1] == 0:
            continue
        with torch.no_grad():
            logits = model(torch.cat([p_ids, c_ids], 1)).logits[0, p_ids.shape[1] - 1 : -1]
        probs = (logits / temperature).softmax(-1)
        sorted_p, order = probs.sort(-1, descending=True)
        nucleus = ((sorted_p.cumsum(-1) - sorted_p) < top_p).sum(-1)
        rank = (order == c_ids[0][:, None]).float().argmax(-1)
        n = int(((rank >= k) & (rank < nucleus)).sum())
        tokens += n
        hit += n > 0
    return {"completions": hit, "tokens": tokens, "of": len(rows)}


def main() -> int:
    own = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    own.add_argument("--run", type=Path, required=True, help="a bench_learning.py --out folder")
    own.add_argument("--engines", default="vllm:bfloat16,vllm:float32,hf:float32", help="BACKEND:DTYPE, ...")
    own.add_argument("--samples", type=int, default=0, help="per held-out problem (0: the run's)")
    mine = own.parse_args()
    report = json.loads((mine.run / "learning.json").read_text())
    sampling = report["sampling"]
    bench = (report.get("provenance") or {}).get("config", "configs/smollm-cpu.toml")
    args = arguments().parse_args(["--config", bench, "--seed", str(sampling["seed"])])
    args.samples = mine.samples or sampling["samples"]
    args.max_new_tokens, args.temperature = sampling["max_new_tokens"], sampling["temperature"]
    cfg = load_config(args.config, list((report.get("provenance") or {}).get("overrides", [])))
    _, heldout, tiers = heldout_set(args)
    if sorted(p.id for p in heldout) != sorted(report["heldout"]):
        raise SystemExit(f"{mine.run}: its held-out problems are not this benchmark's default set")

    from rust_grpo.training.train import resolve_model_path

    sft = resolve_model_path(cfg.model, training_problems(cfg.data), run_format(cfg.data))  # cached
    adapter = str(mine.run / "learning" / "final")
    origin = provenance()
    engines: dict[str, dict[str, Any]] = {}
    from rust_grpo.evaluation.sampling import load_hf

    policy = load_hf(sft, adapter, "float32")[:2]  # the float32 policy for the top-k check, once for every engine
    for spec in mine.engines.split(","):
        args.backend, args.dtype = spec.split(":")
        args.out = mine.run / "backends" / spec.replace(":", "-")
        args.out.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        metrics, _ = score_stage("grpo", sft, adapter, heldout, tiers, args, cfg)
        seconds = round(time.monotonic() - start)
        rows = [json.loads(line) for line in (args.out / "grpo-completions.jsonl").read_text().splitlines()]
        engines[spec] = {
            "metrics": metrics,
            "seconds": seconds,
            "beyond_top50": beyond_top_k(policy, heldout, rows, run_format(cfg.data), args.temperature),
        }
        print(
            f"{spec}: build {metrics['build']:.3f} all {metrics['hidden_pass']:.3f} share {metrics['hidden_share']:.3f}"
        )
    out = {"run": str(mine.run), "samples": args.samples, "engines": engines, "provenance": origin}
    (mine.run / "backends.json").write_text(json.dumps(out, indent=2))
    print(f"wrote {mine.run / 'backends.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
