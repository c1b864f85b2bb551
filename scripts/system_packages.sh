#!/usr/bin/env bash
# The system packages the project needs besides Python and Rust, checked by `make setup` (and so by
# `make demo` and `make test`):
#   gcc, libc6-dev  the linker rustc calls (nothing builds without it)
#   bubblewrap      the strong sandbox; without it grading falls back to rlimits only, which refuses
#                   to run untrusted code as root: on a root machine nothing can be graded
#   util-linux      prlimit (the adversarial tests use it)
# As root on Debian/Ubuntu the missing ones are installed with apt-get; otherwise one line names
# them, and the run stops only when it cannot work without them (no C toolchain, or root without
# bubblewrap), since a user without root still gets the rlimits fallback.
set -euo pipefail

missing=()
command -v gcc >/dev/null || missing+=(gcc)
[ -e /usr/include/stdio.h ] || missing+=(libc6-dev)
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v prlimit >/dev/null || missing+=(util-linux)
[ ${#missing[@]} -eq 0 ] && exit 0

root=$([ "$(id -u)" = 0 ] && echo yes || echo no)
if [ "$root" = yes ] && command -v apt-get >/dev/null; then
  echo "installing system packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || echo "apt-get update failed; installing from the package lists already here"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  exit 0
fi

fatal=no
effect=""
for pkg in "${missing[@]}"; do
  case "$pkg" in
    gcc | libc6-dev) fatal=yes ;;
    bubblewrap)
      [ "$root" = yes ] && fatal=yes
      effect="; grading falls back to rlimits-only isolation" ;;
  esac
done
how=$([ "$root" = yes ] && echo "with your package manager" || echo "as root: apt-get install ${missing[*]}")
if [ "$fatal" = yes ]; then
  echo "missing system packages: ${missing[*]}; install them $how" >&2
  exit 1
fi
echo "missing system packages: ${missing[*]} (continuing$effect); install them $how" >&2
