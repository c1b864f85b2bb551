#!/usr/bin/env bash
# Build the CPU image without a Docker daemon and run what it advertises inside it:
# `reward-sandbox check` and `run` (a few jobs), `rust-grpo score` with its PNG report (and no torch
# in the image), and the default command `reward-sandbox serve` (refused without a token; with one:
# /healthz, one job graded over HTTP, a clean stop on SIGTERM). See scripts/docker_check_in_image.py.
#  - base image: a Debian bookworm made here by debootstrap (no registry needed);
#  - Rust: the `rust` stage is replaced (--build-context) by this machine's toolchain, trimmed;
#  - build and run: buildah with the vfs storage driver and chroot isolation (works as root, no daemon).
#  - the GPU image's dependencies: resolved again for its CPython 3.11 (scripts/lock_images.sh --check), as
#    they cannot be installed without CUDA wheels of several GB; the CPU image installs its lock here.
# Needs buildah and debootstrap (installed here when run as root on Debian). Leaves its work in
# build/docker-check. The serve check listens on port 8808 of this machine (chroot: no own network).
set -euo pipefail
if ! command -v buildah >/dev/null || ! command -v debootstrap >/dev/null || ! /usr/bin/python3 -c 'import seccomp' 2>/dev/null; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "docker-check needs buildah, debootstrap and python3-seccomp: as root, apt-get install buildah debootstrap python3-seccomp" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || echo "apt-get update failed; installing from the package lists already here" >&2
  apt-get install -y -qq --no-install-recommends buildah debootstrap python3-seccomp >/dev/null
fi
cd "$(dirname "$0")/.."
bash scripts/lock_images.sh --check
work=${WORK:-build/docker-check}
mkdir -p "$work"
B=(buildah --storage-driver vfs)
sysroot=$(rustc --print sysroot)

if ! "${B[@]}" images --quiet localhost/rg-bookworm >/dev/null 2>&1 || [ -z "$("${B[@]}" images --quiet localhost/rg-bookworm)" ]; then
  [ -d "$work/rootfs/usr" ] || debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates \
      bookworm "$work/rootfs" http://deb.debian.org/debian
  ctr=$("${B[@]}" from scratch)
  "${B[@]}" add "$ctr" "$work/rootfs" /
  "${B[@]}" config --cmd /bin/bash "$ctr"
  "${B[@]}" commit --rm "$ctr" localhost/rg-bookworm
fi

rust="$work/rust-context/opt/rust"
if [ ! -x "$rust/cargo/bin/rustc" ]; then
  mkdir -p "$rust/rustup/toolchains" "$rust/cargo/bin"
  name=$(basename "$sysroot")
  (cd "$sysroot" && tar -c --exclude=share/doc --exclude=lib/rustlib/src --exclude=lib/rustlib/rustc-src . ) \
    | (mkdir -p "$rust/rustup/toolchains/$name" && tar -C "$rust/rustup/toolchains/$name" -x)
  printf 'default_toolchain = "%s"\nprofile = "minimal"\nversion = "12"\n' "$name" > "$rust/rustup/settings.toml"
  for tool in cargo cargo-clippy clippy-driver rustc rustdoc; do ln -sf "../../rustup/toolchains/$name/bin/$tool" "$rust/cargo/bin/$tool"; done
fi

"${B[@]}" bud --isolation chroot --layers=false --target cpu --build-arg CPU_BASE=localhost/rg-bookworm \
  --build-context rust="$work/rust-context" -t localhost/rust-grpo:cpu \
  ${PIP_CERT:+--volume "$PIP_CERT:/etc/ssl/host-ca.crt:ro" --build-arg PIP_CERT=/etc/ssl/host-ca.crt} .

cat > "$work/jobs.jsonl" <<'JOBS'
{"id": "ok", "source": "pub fn add(a: i32, b: i32) -> i32 { a + b }", "tests": "#[test]\nfn t() { assert_eq!(add(2, 2), 4); }"}
{"id": "fails", "source": "pub fn add(a: i32, b: i32) -> i32 { a - b }", "tests": "#[test]\nfn t() { assert_eq!(add(2, 2), 4); }"}
{"id": "broken", "source": "pub fn add(a: i32 { a }"}
{"id": "exit-hack", "source": "pub fn f() -> i32 { std::process::exit(0) }", "tests": "#[test]\nfn t() { assert_eq!(f(), 1); }"}
JOBS
ctr=$("${B[@]}" from localhost/rust-grpo:cpu)
trap '"${B[@]}" rm "$ctr" >/dev/null 2>&1 || true' EXIT
"${B[@]}" copy "$ctr" "$work/jobs.jsonl" /tmp/jobs.jsonl
"${B[@]}" copy "$ctr" scripts/docker_check_in_image.py /tmp/check.py
"${B[@]}" run --isolation chroot "$ctr" -- reward-sandbox check
"${B[@]}" run --isolation chroot "$ctr" -- reward-sandbox run -i /tmp/jobs.jsonl -o /home/grader/results.jsonl --no-cache
"${B[@]}" run --isolation chroot "$ctr" -- python3 -c '
import json
r = {x["id"]: x for x in map(json.loads, open("/home/grader/results.jsonl"))}
got = {k: v["status"] for k, v in r.items()}
want = {"ok": "ok", "fails": "test_failure", "broken": "compile_error", "exit-hack": "test_failure"}
print("statuses:", got, "isolation:", {v["isolation"] for v in r.values()})
assert got == want, (got, want)
print("run ok")
'
R=("${B[@]}" run --isolation chroot "$ctr" --)
"${R[@]}" python3 /tmp/check.py no-torch
"${R[@]}" python3 /tmp/check.py score /app/data/demo.jsonl /app/runs/score-check
cmd=$("${B[@]}" inspect --type image localhost/rust-grpo:cpu | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["OCIv1"]["config"]["Cmd"]))')
# least privilege (docker-compose.yml): grade in the image's file system as uid 10001, no capability, our
# seccomp profile; bubblewrap must still isolate (needs Debian's python3-seccomp on this machine)
mnt=$("${B[@]}" mount "$ctr")
/usr/bin/python3 scripts/seccomp_check.py "$mnt"
"${B[@]}" umount "$ctr" >/dev/null
echo "default command: $cmd"
"${R[@]}" python3 /tmp/check.py serve "$cmd"
echo "docker-check ok"
