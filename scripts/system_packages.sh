#!/usr/bin/env bash
# The system packages the project needs besides Python and Rust, checked by `make setup` (and so by
# `make demo` and `make test`):
#   gcc, libc6-dev  the linker rustc calls (nothing builds without it)
#   bubblewrap      the strong sandbox; without it grading falls back to rlimits only, which refuses
#                   to run untrusted code as root: on a root machine nothing can be graded
#   util-linux      prlimit (the adversarial tests use it)
#   librust-*-dev   the sources of the crate set graded programs may use (reward_sandbox/compile/crates.py,
#                   CRATE_PACKAGES below), built once into rlibs; without them crate-using programs
#                   get sandbox_error and their tests skip. Installed apart: a missing one never
#                   stops the rest.
# As root on Debian/Ubuntu the missing ones are installed with apt-get; otherwise one line names
# them, and the run stops only when it cannot work without them (no C toolchain, or root without
# bubblewrap), since a user without root still gets the rlimits fallback.
set -euo pipefail

missing=()
command -v gcc >/dev/null || missing+=(gcc)
[ -e /usr/include/stdio.h ] || missing+=(libc6-dev)
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v prlimit >/dev/null || missing+=(util-linux)
# keep in step with reward_sandbox/compile/crateset.py: DEBIAN_PACKAGES
CRATE_PACKAGES=(librust-itertools-dev librust-lazy-static-dev librust-md5-dev librust-num-dev librust-once-cell-dev
  librust-rand-dev librust-regex-dev librust-serde-dev librust-serde-json-dev librust-serde-derive-dev)
# regex's own sources, checked too: a machine image held regex without them (its crate set then fails to build)
SOURCE_DEPENDENCIES=(librust-aho-corasick-dev librust-memchr-dev)
crates=()
for pkg in "${CRATE_PACKAGES[@]}" "${SOURCE_DEPENDENCIES[@]}"; do  # bash alone (no dpkg, no grep):
  name=${pkg#librust-}  # librust-serde-json-dev -> serde_json-*, librust-aho-corasick-dev -> aho-corasick-*
  name=${name%-dev}
  compgen -G "/usr/share/cargo/registry/${name//-/_}-[0-9]*" >/dev/null ||
    compgen -G "/usr/share/cargo/registry/${name}-[0-9]*" >/dev/null || crates+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && [ ${#crates[@]} -eq 0 ] && exit 0

root=$([ "$(id -u)" = 0 ] && echo yes || echo no)
if [ "$root" = yes ] && command -v apt-get >/dev/null; then
  echo "installing system packages: ${missing[*]} ${crates[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || echo "apt-get update failed; installing from the package lists already here"
  [ ${#missing[@]} -eq 0 ] || apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [ ${#crates[@]} -gt 0 ] && ! apt-get install -y -qq --no-install-recommends "${crates[@]}" >/dev/null; then
    echo "could not install the crate sources (${crates[*]}): crate-using programs will not grade here" >&2
  fi
  exit 0
fi
if [ ${#missing[@]} -eq 0 ]; then  # said only when nothing more pressing is: the one line stays one line
  echo "missing crate sources: ${crates[*]} (crate-using programs will not grade); as root: apt-get install ${crates[*]}" >&2
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
