#!/bin/sh
# Installs state (state-mcp, state-http, statectl) from a release: picks the archive for this
# machine (Linux or macOS, x86_64 or arm64), checks it against SHA256SUMS, and puts the
# binaries in ~/.local/bin (man pages and completions beside them, under ~/.local/share).
#
#   curl -fsSL <release>/install.sh | sh -s -- --from <release>
#   sh install.sh --from ./dist                  # from a directory holding the release
#
# Options:
#   --from DIR|URL   where the release is: a directory or a URL holding SHA256SUMS and the
#                    state-<version>-<target>.tar.gz archives (or $STATE_INSTALL_FROM)
#   --prefix DIR     install under DIR/bin and DIR/share (default ~/.local)
#   --version V      a version SHA256SUMS lists (default: the newest it lists for this machine)
set -eu

usage() {
    cat <<'USAGE'
install.sh: installs state (state-mcp, state-http, statectl) from a release, checked against
its SHA256SUMS, into ~/.local/bin (man pages and completions under ~/.local/share).

  curl -fsSL <release>/install.sh | sh -s -- --from <release>
  sh install.sh --from ./dist

Options:
  --from DIR|URL   where the release is: a directory or a URL holding SHA256SUMS and the
                   state-<version>-<target>.tar.gz archives (or $STATE_INSTALL_FROM)
  --prefix DIR     install under DIR/bin and DIR/share (default ~/.local)
  --version V      a version SHA256SUMS lists (default: the newest it lists for this machine)
  -h, --help       this text
USAGE
}

say() { printf 'install.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

from="${STATE_INSTALL_FROM:-}"
prefix="${HOME:?HOME is not set}/.local"
version=""
while [ $# -gt 0 ]; do
    case "$1" in
        --from) from="${2:?--from needs a directory or URL}"; shift 2 ;;
        --prefix) prefix="${2:?--prefix needs a directory}"; shift 2 ;;
        --version) version="${2:?--version needs a version}"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done
[ -n "$from" ] || die "say where the release is: --from DIR_OR_URL (it holds SHA256SUMS and the archives)"

case "$(uname -s)" in
    Linux) os=unknown-linux-gnu ;;
    Darwin) os=apple-darwin ;;
    MINGW*|MSYS*|CYGWIN*) die "no native Windows release: install inside WSL2 (a Linux shell on Windows) instead" ;;
    *) die "no release for $(uname -s) yet: build from source with cargo (see README.md)" ;;
esac
case "$(uname -m)" in
    x86_64|amd64) arch=x86_64 ;;
    aarch64|arm64) arch=aarch64 ;;
    *) die "no release for $(uname -m) yet: build from source with cargo (see README.md)" ;;
esac
# A shell under Rosetta on an Apple silicon Mac says x86_64: the native build is the one to run.
if [ "$os" = apple-darwin ] && [ "$arch" = x86_64 ] && [ "$(sysctl -n sysctl.proc_translated 2>/dev/null)" = 1 ]; then
    arch=aarch64
fi
target="$arch-$os"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT INT TERM

fetch() { # fetch NAME: copy or download $from/NAME into $work
    case "$from" in
        http://*|https://*)
            if command -v curl >/dev/null 2>&1; then
                curl -fsSL "$from/$1" -o "$work/$1" || die "cannot download $from/$1"
            elif command -v wget >/dev/null 2>&1; then
                wget -q "$from/$1" -O "$work/$1" || die "cannot download $from/$1"
            else
                die "neither curl nor wget is installed"
            fi ;;
        *)
            [ -f "$from/$1" ] || die "$from/$1 does not exist"
            cp "$from/$1" "$work/$1" ;;
    esac
}

fetch SHA256SUMS
if [ -z "$version" ]; then
    # The newest version, compared field by field (macOS's sort has no -V everywhere).
    archive="$(grep -o "state-[0-9][^ ]*-$target\.tar\.gz" "$work/SHA256SUMS" \
        | awk -v tail="-$target.tar.gz" '{
            version = substr($0, 7, length($0) - 6 - length(tail)); split(version, part, /[.-]/)
            printf "%09d%09d%09d %s\n", part[1], part[2], part[3], $0 }' \
        | sort | tail -n 1 | cut -d' ' -f2)"
    [ -n "$archive" ] || die "the release has no archive for $target"
else
    archive="state-$version-$target.tar.gz"
    grep -q " $archive\$" "$work/SHA256SUMS" || die "the release has no $archive"
fi
fetch "$archive"

expected="$(grep " $archive\$" "$work/SHA256SUMS" | cut -d' ' -f1)"
if command -v sha256sum >/dev/null 2>&1; then
    actual="$(sha256sum "$work/$archive" | cut -d' ' -f1)"
else
    actual="$(shasum -a 256 "$work/$archive" | cut -d' ' -f1)"
fi
[ "$actual" = "$expected" ] || die "$archive does not match its checksum (expected $expected, got $actual): not installed"

tar -xzf "$work/$archive" -C "$work"
unpacked="$work/${archive%.tar.gz}"
mkdir -p "$prefix/bin"
for bin in state-mcp state-http statectl; do
    # Replace, never rewrite in place: a running server keeps its old binary.
    cp "$unpacked/bin/$bin" "$prefix/bin/.$bin.new"
    chmod 755 "$prefix/bin/.$bin.new"
    mv -f "$prefix/bin/.$bin.new" "$prefix/bin/$bin"
done
if [ -d "$unpacked/share" ]; then
    mkdir -p "$prefix/share"
    cp -R "$unpacked/share/." "$prefix/share/"
fi

say "installed state-mcp, state-http and statectl (${archive%.tar.gz}) into $prefix/bin"
case ":${PATH:-}:" in
    *":$prefix/bin:"*) ;;
    *) say "add $prefix/bin to your PATH, e.g.: export PATH=\"$prefix/bin:\$PATH\"" ;;
esac
