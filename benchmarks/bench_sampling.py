"""Sampling throughput: vLLM (the CPU build `make setup` installs) against transformers `generate`.

Both engines get the same model (SmolLM2-135M-Instruct from the project's converted checkpoint),
the same chat prompts (the first held-out problems of data/eval.jsonl in the smollm-cpu preset's
answer format), the same lengths and sampling settings (temperature 1, top-p 1), in one run on the
same cores. Tokens are counted the same way for both: each completion's text tokenized again.
transformers samples as the evaluation does (all samples of one problem in one `generate` call,
`--batch-problems` problems a call); vLLM gets every prompt in one call, as `rust-grpo eval` does.
Engine start (vLLM) and model load (transformers) are timed apart from sampling. vLLM runs twice:
eager (what eval and training use by default) and compiled (`rust-grpo eval --compile`: torch.compile,
faster, 25-70 s more to start). Both engines run in
each precision of --dtypes (bfloat16: vLLM's default on a CPU with AVX512-BF16/AMX, as here; float32:
the checkpoint's, transformers' default), so every ratio compares like with like.
Target (issue 45): vLLM at least 5x transformers in tokens per second.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from baselines import provenance

from rust_grpo.config import load_config
from rust_grpo.evaluation.sampling import SamplingSettings, load_hf, sample_hf, vllm_sampling_params
from rust_grpo.models import resolve_model
from rust_grpo.problems.schema import chat_prompt, load_problems
from rust_grpo.problems.selection import run_format
from rust_grpo.vllm_engine import start_engine


def count_tokens(tokenizer, texts: list[str]) -> int:  # type: ignore[no-untyped-def]
    return sum(len(tokenizer(t, add_special_tokens=False).input_ids) for t in texts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=8)
    parser.add_argument("--samples", type=int, default=8, help="completions per problem")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--batch-problems", type=int, default=2, help="problems per transformers generate call")
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"], help="each engine runs in each")
    parser.add_argument(
        "--no-compiled", dest="compiled", action="store_false", help="skip vLLM with torch.compile (eval --compile)"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/bench/sampling.json"))
    args = parser.parse_args()

    cfg = load_config("smollm-cpu")
    fmt = run_format(cfg.data)
    problems = load_problems("data/eval.jsonl", max_rows=args.problems)
    chats = [chat_prompt(p, fmt) for p in problems]
    model = resolve_model(cfg.model.name_or_path)
    s = SamplingSettings(samples=args.samples, max_new_tokens=args.max_new_tokens, temperature=1.0, top_p=1.0)

    report: dict[str, object] = {
        "provenance": provenance(),
        "model": cfg.model.name_or_path,
        "settings": {**vars(args), "out": str(args.out), "temperature": 1.0, "top_p": 1.0},
    }
    tokenizer = load_hf(model)[1]

    def run_vllm(dtype: str, compiled: bool) -> dict[str, float]:
        start = time.perf_counter()
        llm = start_engine(model, seed=0, dtype=dtype, enforce_eager=not compiled)
        started = time.perf_counter() - start
        start = time.perf_counter()
        outputs = llm.chat(chats, vllm_sampling_params(s, s.samples), use_tqdm=False)
        seconds = time.perf_counter() - start
        tokens = count_tokens(tokenizer, [o.text for r in outputs for o in r.outputs])
        del llm
        gc.collect()
        return {"engine_start_s": started, "seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds}

    for dtype in args.dtypes:
        vllm = run_vllm(dtype, compiled=False)
        compiled = run_vllm(dtype, compiled=True) if args.compiled else None

        start = time.perf_counter()
        hf_model, tokenizer, device = load_hf(model, dtype=dtype)
        loaded = time.perf_counter() - start
        start = time.perf_counter()
        texts: list[str] = []
        for i in range(0, len(chats), args.batch_problems):
            texts += sample_hf(hf_model, tokenizer, device, chats[i : i + args.batch_problems], s, s.samples)
        seconds = time.perf_counter() - start
        tokens = count_tokens(tokenizer, texts)
        del hf_model
        hf = {"load_s": loaded, "seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds}
        speedup = vllm["tokens_per_s"] / hf["tokens_per_s"]
        report[dtype] = {"vllm": vllm, "transformers": hf, "speedup": speedup}
        if compiled:
            report[dtype] |= {
                "vllm_compiled": compiled,
                "speedup_compiled": compiled["tokens_per_s"] / hf["tokens_per_s"],
            }
        print(
            f"{dtype}: vLLM {vllm['tokens_per_s']:.0f} tokens/s (engine start {vllm['engine_start_s']:.1f} s), "
            + (
                f"compiled {compiled['tokens_per_s']:.0f} tokens/s (start {compiled['engine_start_s']:.1f} s), "
                if compiled
                else ""
            )
            + f"transformers {hf['tokens_per_s']:.0f} tokens/s (load {hf['load_s']:.1f} s): {speedup:.1f}x"
            + (f", compiled {report[dtype]['speedup_compiled']:.1f}x" if compiled else "")
            + f" ({len(chats)} prompts x {args.samples} samples x {args.max_new_tokens} tokens)",
            flush=True,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
