# scripts/lib.sh: what scripts/test and scripts/demo share. Source it; it only defines things.
#
#   ensure_packages CALLER PACKAGE...   installs the missing Debian packages when run as root
#                                       (apt-get), otherwise prints the exact install line; returns
#                                       non-zero when something is still missing
#   ensure_cargo CALLER                 puts rustup's cargo on PATH when it is not; returns
#                                       non-zero when there is no cargo

# Build tools every cargo build needs (rustc links with cc).
gpusvc_build_packages=(build-essential)
# The C/C++ suite: CMake, Ninja, GoogleTest; the example host's own GL (EGL and GLES 3 headers and
# libraries); pkg-config for the installed-package test (cmake/tests/package.sh).
gpusvc_cpp_packages=(cmake ninja-build libgtest-dev libegl-dev libgles-dev pkgconf)
# EGL + Mesa (llvmpipe) at run time; glutin loads libEGL when a context is opened.
gpusvc_runtime_packages=(libegl1 libegl-mesa0 libgl1-mesa-dri libgles2 libgl1)
# scripts/fetch-corpus downloads the npm meshes with curl (over HTTPS).
gpusvc_corpus_packages=(curl ca-certificates)

ensure_packages() {
  local caller=$1 p
  shift
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    echo "== system packages: all $# present"
    return 0
  fi
  if [[ $(id -u) -eq 0 ]]; then
    echo "== installing system packages: ${missing[*]}"
    apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
      { echo "$caller: apt-get install failed" >&2; return 1; }
  else
    echo "$caller: missing system packages: ${missing[*]}" >&2
    echo "install them with:  sudo apt-get install -y ${missing[*]}" >&2
    return 1
  fi
}

ensure_cargo() {
  local caller=$1
  if ! command -v cargo >/dev/null && [[ -f "$HOME/.cargo/env" ]]; then
    # shellcheck source=/dev/null
    . "$HOME/.cargo/env"
  fi
  command -v cargo >/dev/null || { echo "$caller: cargo not found (install Rust with rustup)" >&2; return 1; }
}
