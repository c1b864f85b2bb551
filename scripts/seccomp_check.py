"""Measure the least privilege the reward server needs: grade inside the CPU image's file system as
uid 10001 with no capability at all, no_new_privs and the compose file's seccomp profile
(docker/grader-seccomp.json), as `docker compose up` runs it, and check that bubblewrap isolation
still works; then once more with a /proc path masked the way Docker masks them by default, which
the kernel answers by refusing bubblewrap's own /proc mount (why compose sets systempaths=unconfined).

    python3 scripts/seccomp_check.py ROOTFS      (as root; ROOTFS: `buildah mount` of the CPU image)

Run by scripts/docker_check.sh. Needs Debian's python3-seccomp (libseccomp's bindings) and util-linux
(unshare, setpriv) on the host. Exit 0 when every expectation holds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import seccomp  # type: ignore[import-not-found]  # Debian's python3-seccomp: not in the project's venv

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / "docker" / "grader-seccomp.json"
JOBS = [
    {
        "id": "ok",
        "source": "pub fn add(a: i32, b: i32) -> i32 { a + b }",
        "tests": "#[test]\nfn t() { assert_eq!(add(2, 2), 4); }",
    },
    {
        "id": "fails",
        "source": "pub fn add(a: i32, b: i32) -> i32 { a - b }",
        "tests": "#[test]\nfn t() { assert_eq!(add(2, 2), 4); }",
    },
    {
        "id": "exit-hack",
        "source": "pub fn f() -> i32 { std::process::exit(0) }",
        "tests": "#[test]\nfn t() { assert_eq!(f(), 1); }",
    },
]
WANT = {"ok": "ok", "fails": "test_failure", "exit-hack": "test_failure"}
# what the image's grader process runs as: the Dockerfile's USER, its PATH and toolchain
USER = [
    "setpriv",
    "--reuid",
    "10001",
    "--regid",
    "10001",
    "--clear-groups",
    "--inh-caps=-all",
    "--bounding-set=-all",
    "--no-new-privs",
]
ENV = ["env", "-i", "HOME=/home/grader", "PATH=/opt/rust/cargo/bin:/usr/local/bin:/usr/bin:/bin",
       "RUSTUP_HOME=/opt/rust/rustup", "CARGO_HOME=/opt/rust/cargo"]  # fmt: skip


def profile_filter() -> seccomp.SyscallFilter:
    """The profile as the kernel gets it: allow by default, EPERM for each listed call."""
    profile = json.loads(PROFILE.read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW", "this check reads deny-list profiles only"
    f = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    for rule in profile["syscalls"]:
        assert rule["action"] == "SCMP_ACT_ERRNO"
        for name in rule["names"]:
            f.add_rule(seccomp.ERRNO(rule.get("errnoRet", 1)), name)  # a misspelt name raises
    return f


def grade(rootfs: Path, *, masked: bool, with_profile: bool) -> dict[str, tuple[str, str]]:
    """Each job's (status, isolation), graded in ``rootfs`` in a mount namespace of its own."""
    out = "/home/grader/seccomp-check.jsonl"
    (rootfs / "home/grader/seccomp-jobs.jsonl").write_text("".join(json.dumps(j) + "\n" for j in JOBS))
    (rootfs / out.lstrip("/")).unlink(missing_ok=True)
    mask = f"mount --bind /dev/null {rootfs}/proc/timer_list && " if masked else ""
    grader = [*USER, *ENV, "reward-sandbox", "run", "-i", "/home/grader/seccomp-jobs.jsonl", "-o", out, "--no-cache"]
    # pivot_root, not chroot: the kernel refuses a new user namespace to a chrooted process
    script = (
        f"mount --bind {rootfs} {rootfs} && mount --rbind /dev {rootfs}/dev && mount -t proc proc {rootfs}/proc && "
        f"mount -t tmpfs tmpfs {rootfs}/tmp && {mask}cd {rootfs} && mkdir -p .old-root && pivot_root . .old-root && "
        "umount -l /.old-root && exec " + " ".join(grader)
    )
    preexec = profile_filter().load if with_profile else None
    proc = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        preexec_fn=preexec,  # the filter must be on before exec, as Docker sets it
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        sys.exit(f"grading failed (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")
    rows = [json.loads(line) for line in (rootfs / out.lstrip("/")).read_text().splitlines()]
    return {r["id"]: (r["status"], r["isolation"]) for r in rows}


def denied_under_profile() -> bool:
    """The filter really loads: keyctl, on the profile's list, fails with EPERM under it."""
    probe = "import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); libc.syscall(250, 0, 0, 0, 0, 0); sys.exit(ctypes.get_errno())"
    proc = subprocess.run([sys.executable, "-c", probe], preexec_fn=profile_filter().load, check=False)
    return proc.returncode == 1  # EPERM


def main() -> int:
    rootfs = Path(sys.argv[1])
    assert denied_under_profile(), "the profile's filter did not deny keyctl"
    got = grade(rootfs, masked=False, with_profile=True)
    print(f"uid 10001, no capabilities, no_new_privs, {PROFILE.name}: {got}")
    assert {k: s for k, (s, _) in got.items()} == WANT and {i for _, i in got.values()} == {"bwrap"}, got
    masked = grade(rootfs, masked=True, with_profile=True)
    print(f"the same with a /proc path masked as Docker masks them: {masked}")
    assert {i for _, i in masked.values()} == {"rlimits"}, "expected the fallback when /proc is masked"
    print("seccomp check ok: bubblewrap needs no capability, only the calls the profile leaves and an unmasked /proc")
    return 0


if __name__ == "__main__":
    sys.exit(main())
