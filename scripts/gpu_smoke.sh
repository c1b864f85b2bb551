#!/usr/bin/env bash
# GPU smoke test: a few real GRPO steps with vLLM in colocate mode, then server mode, then an eval
# with the vLLM backend. Needs one CUDA GPU and the model on the hub (or HF_HOME with it cached).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-Qwen/Qwen2.5-Coder-0.5B-Instruct}
OUT=${OUT:-runs/gpu-smoke}
python -m pip install -q -e ".[train,serve,vllm]"
common=(--set "model.name_or_path=\"$MODEL\"" --set train.max_steps=3 --set train.max_completion_length=256 --set train.save_steps=1000)
rust-grpo train --config configs/modern-1.5b.toml "${common[@]}" --set "train.output_dir=\"$OUT/colocate\"" --set vllm.gpu_memory_utilization=0.3
trl vllm-serve --model "$MODEL" --port 8011 --gpu-memory-utilization 0.3 > "$OUT/vllm-serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 120); do curl -sf localhost:8011/health/ >/dev/null && break; sleep 2; done
rust-grpo train --config configs/modern-1.5b.toml "${common[@]}" --set "train.output_dir=\"$OUT/server\"" \
  --set vllm.mode=server --set vllm.server_port=8011 --set vllm.gpu_memory_utilization=0.3
rust-grpo eval --model "$MODEL" --backend vllm --samples 4 --limit 8 --max-new-tokens 512 --out "$OUT/eval"
echo "gpu smoke ok: $OUT"
