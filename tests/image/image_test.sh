#!/usr/bin/env bash
# Builds the container image from a `tessera` binary with scripts/build-image.sh, unpacks its
# root filesystem from the OCI archive (index -> manifest -> config and layers), checks the
# image's name, user and entrypoint, and runs the entrypoint's --help from that root filesystem.
#
#   tests/image/image_test.sh TESSERA_BINARY SOURCE_DIR
set -euo pipefail
BINARY="${1:?usage: image_test.sh TESSERA_BINARY SOURCE_DIR}"
SRC="${2:?usage: image_test.sh TESSERA_BINARY SOURCE_DIR}"
fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in buildah jq tar ldd; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/setup.sh installs it)"
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/tessera-image-test.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# The default name: the one the manifests pull.
"$SRC/scripts/build-image.sh" --binary "$BINARY" --out "$WORK/out"
VERSION="$(sed -n 's/^project(tessera VERSION \([0-9][0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")"
ARCHIVE="$WORK/out/tessera-$VERSION.oci.tar"
[ -f "$ARCHIVE" ] || fail "no archive $ARCHIVE"

LAYOUT="$WORK/layout"
mkdir -p "$LAYOUT"
tar -xf "$ARCHIVE" -C "$LAYOUT"
jq -e '.imageLayoutVersion == "1.0.0"' "$LAYOUT/oci-layout" >/dev/null || fail "not an OCI layout"
blob() { echo "$LAYOUT/blobs/${1%%:*}/${1#*:}"; }
check_digest() {
  local file
  file="$(blob "$1")"
  [ -f "$file" ] || fail "missing blob $1"
  [ "sha256:$(sha256sum "$file" | cut -d' ' -f1)" = "$1" ] || fail "blob $1 does not match its digest"
}

[ "$(jq '.manifests | length' "$LAYOUT/index.json")" = 1 ] || fail "expected one image in index.json"
REF="$(jq -r '.manifests[0].annotations["org.opencontainers.image.ref.name"] // ""' "$LAYOUT/index.json")"
for m in "$SRC"/deploy/scheduler/deployment.yaml "$SRC"/deploy/extender/deployment.yaml; do
  while read -r image; do
    [ "$image" = "$REF" ] || fail "$m pulls $image, the image is named $REF"
  done < <(sed -n 's/^ *image: *\([^ #]*\).*/\1/p' "$m")
done

MANIFEST_DIGEST="$(jq -r '.manifests[0].digest' "$LAYOUT/index.json")"
check_digest "$MANIFEST_DIGEST"
MANIFEST="$(blob "$MANIFEST_DIGEST")"
CONFIG_DIGEST="$(jq -r '.config.digest' "$MANIFEST")"
check_digest "$CONFIG_DIGEST"
CONFIG="$(blob "$CONFIG_DIGEST")"

USER_SPEC="$(jq -r '.config.User // ""' "$CONFIG")"
UID_PART="${USER_SPEC%%:*}"
GID_PART="${USER_SPEC#*:}"
[ "$GID_PART" != "$USER_SPEC" ] || GID_PART="$UID_PART"
[[ "$UID_PART" =~ ^[0-9]+$ ]] || fail "User '$USER_SPEC' is not a numeric UID (runAsNonRoot needs one)"
[ "$UID_PART" -ne 0 ] || fail "image runs as root"
ENTRYPOINT="$(jq -r '.config.Entrypoint | if type == "array" and length == 1 then .[0] else "" end' "$CONFIG")"
[ "$ENTRYPOINT" = /usr/local/bin/tessera ] || fail "Entrypoint is $(jq -c .config.Entrypoint "$CONFIG")"
jq -e '(.config.Cmd // []) | length == 0' "$CONFIG" >/dev/null || fail "unexpected Cmd in the config"

ROOTFS="$WORK/rootfs"
mkdir -p "$ROOTFS"
N=0
while read -r layer; do
  check_digest "$layer"
  tar -xf "$(blob "$layer")" -C "$ROOTFS"   # GNU tar detects gzip
  N=$((N + 1))
done < <(jq -r '.layers[].digest' "$MANIFEST")
[ "$N" -ge 1 ] || fail "no layers"
[ "$N" = "$(jq '.rootfs.diff_ids | length' "$CONFIG")" ] || fail "layers and diff_ids differ"

cmp -s "$BINARY" "$ROOTFS$ENTRYPOINT" || fail "$ENTRYPOINT is not the binary"
grep -q ":x:$UID_PART:" "$ROOTFS/etc/passwd" || fail "UID $UID_PART has no /etc/passwd entry"
[ -s "$ROOTFS/etc/ssl/certs/ca-certificates.crt" ] || fail "no CA bundle"
[ ! -e "$ROOTFS/bin/sh" ] && [ ! -e "$ROOTFS/usr/bin/sh" ] || fail "the image has a shell"
# Every file that is neither the binary, a library, the loader nor expected configuration.
EXTRA="$(cd "$ROOTFS" && find . -type f ! -path ./usr/local/bin/tessera ! -name '*.so*' \
  ! -path ./etc/passwd ! -path ./etc/group ! -path ./etc/nsswitch.conf \
  ! -path ./etc/ssl/certs/ca-certificates.crt)"
[ -z "$EXTRA" ] || fail "unexpected files in the image: $EXTRA"

# Run the entrypoint from the root filesystem as the image's user. A sanitizer build needs /proc,
# so first try a private mount namespace with /proc mounted in the root filesystem; then a plain
# chroot; where chroot is not permitted, the image's own loader with only its libraries.
run_help() {
  mkdir -p "$ROOTFS/proc"
  if command -v unshare >/dev/null &&
    unshare --mount --fork sh -c 'mount -t proc proc "$1/proc" 2>/dev/null &&
      exec chroot --userspec="$2:$3" "$1" "$4" --help' sh "$ROOTFS" "$UID_PART" "$GID_PART" \
      "$ENTRYPOINT" >"$WORK/help.out" 2>"$WORK/unshare.err"; then
    echo "ran: chroot with /proc, as $UID_PART:$GID_PART"
    return 0
  fi
  if chroot --userspec="$UID_PART:$GID_PART" "$ROOTFS" "$ENTRYPOINT" --help \
    >"$WORK/help.out" 2>"$WORK/chroot.err"; then
    echo "ran: chroot, as $UID_PART:$GID_PART"
    return 0
  fi
  echo "note: chroot did not run the entrypoint:" >&2
  tail -n 3 "$WORK/unshare.err" "$WORK/chroot.err" >&2
  local interp
  interp="$(cd "$ROOTFS" && find lib64 lib usr/lib -maxdepth 2 -name 'ld-linux*.so*' 2>/dev/null | head -1)"
  [ -n "$interp" ] || fail "no dynamic loader in the image"
  local libpath
  libpath="$(cd "$ROOTFS" && find . -name '*.so*' -type f -printf '%h\n' | sort -u |
    sed "s|^\.|$ROOTFS|" | paste -sd:)"
  "$ROOTFS/$interp" --library-path "$libpath" --list "$ROOTFS$ENTRYPOINT" >"$WORK/list.out"
  if awk '$2 == "=>" && $3 ~ /^\// { print $3 }' "$WORK/list.out" | grep -v "^$ROOTFS/"; then
    fail "libraries above resolve outside the image"
  fi
  "$ROOTFS/$interp" --library-path "$libpath" "$ROOTFS$ENTRYPOINT" --help \
    >"$WORK/help.out" 2>"$WORK/loader.err" || {
    tail -n 5 "$WORK/loader.err" >&2
    fail "--help failed (chroot with /proc, chroot, the image's loader)"
  }
  echo "ran: the image's loader with the image's libraries only"
}
run_help
grep -q "Usage:" "$WORK/help.out" || { cat "$WORK/help.out" >&2; fail "--help printed no usage"; }
for cmd in scheduler extender agent webhook sim generate; do
  grep -qw "$cmd" "$WORK/help.out" || fail "--help does not list $cmd"
done
echo "image $REF: user $USER_SPEC, entrypoint $ENTRYPOINT, $N layer(s): ok"
