#!/usr/bin/env bash
# Builds Tessera's container image without a container engine and without a base image.
#
#   scripts/build-image.sh [--binary PATH] [--out DIR] [--tag NAME:VERSION]
#
# The image's root filesystem holds only what the `tessera` binary needs to run:
#   /usr/local/bin/tessera            the binary (the image's entrypoint)
#   the shared libraries `ldd` lists for it, and the dynamic loader, at the paths ldd reports
#   /etc/passwd, /etc/group           root and the user tessera (UID/GID 65532), which runs it
#   /etc/nsswitch.conf                files, then DNS
#   /etc/ssl/certs/ca-certificates.crt  this machine's CA bundle (also at OpenSSL's default path)
#   /tmp                              mode 1777
# buildah assembles it in a private storage directory (vfs driver) that is removed afterwards,
# and writes DIR/tessera-VERSION.oci.tar: an OCI archive whose one image is named NAME:VERSION.
#
# Defaults: --binary build/release/apps/tessera/tessera (built with the release preset when it
# is missing), --out out/image, --tag ghcr.io/tessera-scheduler/tessera:<project VERSION in
# CMakeLists.txt>, the name deploy/*/deployment.yaml pull.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

VERSION="$(sed -n 's/^project(tessera VERSION \([0-9][0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")"
[ -n "$VERSION" ] || { echo "build-image: no project VERSION in CMakeLists.txt" >&2; exit 1; }
BINARY=""
OUT="$ROOT/out/image"
TAG="ghcr.io/tessera-scheduler/tessera:$VERSION"
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) BINARY="${2:?--binary needs a path}"; shift 2 ;;
    --out) OUT="${2:?--out needs a directory}"; shift 2 ;;
    --tag) TAG="${2:?--tag needs NAME:VERSION}"; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "build-image: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$TAG" in
  *:*) ;;
  *) echo "build-image: --tag must be NAME:VERSION, got $TAG" >&2; exit 2 ;;
esac
IMAGE_VERSION="${TAG##*:}"
case "$IMAGE_VERSION" in
  */*) echo "build-image: --tag must end in :VERSION, got $TAG" >&2; exit 2 ;;
esac

if [ -z "$BINARY" ]; then
  BINARY="$ROOT/build/release/apps/tessera/tessera"
  if [ ! -x "$BINARY" ]; then
    echo "build-image: building $BINARY (release preset)"
    (cd "$ROOT" && cmake --preset release >/dev/null && cmake --build --preset release --target tessera)
  fi
fi
[ -f "$BINARY" ] && [ -x "$BINARY" ] || { echo "build-image: $BINARY is not an executable" >&2; exit 1; }
command -v buildah >/dev/null || "$ROOT/scripts/setup.sh"
command -v buildah >/dev/null || { echo "build-image: buildah is not installed" >&2; exit 1; }
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
[ -s "$CA_BUNDLE" ] || { echo "build-image: $CA_BUNDLE is missing (Debian package ca-certificates)" >&2; exit 1; }

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tessera-image.XXXXXX")"
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT
ROOTFS="$WORK/rootfs"
mkdir -p "$ROOTFS"/{etc/ssl/certs,tmp,usr/local/bin,usr/lib/ssl}

# The binary, then every library ldd resolves and the loader, copied (dereferenced) to the path
# ldd reports, which is where the loader and the binary's PT_INTERP look for them.
install -m 0755 "$BINARY" "$ROOTFS/usr/local/bin/tessera"
if ! LDD_OUT="$(ldd "$BINARY" 2>&1)"; then
  case "$LDD_OUT" in
    *"not a dynamic executable"* | *"statically linked"*) LDD_OUT="" ;;
    *) echo "build-image: ldd $BINARY failed: $LDD_OUT" >&2; exit 1 ;;
  esac
fi
if grep -q "not found" <<<"$LDD_OUT"; then
  echo "build-image: unresolved libraries:" >&2
  grep "not found" <<<"$LDD_OUT" >&2
  exit 1
fi
LIBS=()
while read -r lib; do
  [ -n "$lib" ] && LIBS+=("$lib")
done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$LDD_OUT" | sort -u)
for lib in "${LIBS[@]}"; do
  mkdir -p "$ROOTFS$(dirname "$lib")"
  cp -L "$lib" "$ROOTFS$lib"
  chmod 0755 "$ROOTFS$lib"
done

cat >"$ROOTFS/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/usr/sbin/nologin
tessera:x:65532:65532:tessera:/nonexistent:/usr/sbin/nologin
EOF
cat >"$ROOTFS/etc/group" <<'EOF'
root:x:0:
tessera:x:65532:
EOF
cat >"$ROOTFS/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
EOF
cp -L "$CA_BUNDLE" "$ROOTFS/etc/ssl/certs/ca-certificates.crt"
ln -s /etc/ssl/certs/ca-certificates.crt "$ROOTFS/usr/lib/ssl/cert.pem"
ln -s /etc/ssl/certs "$ROOTFS/usr/lib/ssl/certs"
chmod 0644 "$ROOTFS"/etc/passwd "$ROOTFS"/etc/group "$ROOTFS"/etc/nsswitch.conf \
  "$ROOTFS"/etc/ssl/certs/ca-certificates.crt
chmod 1777 "$ROOTFS/tmp"

# One layer, owned by root, entries sorted and dated from the last commit (or the epoch), so
# that the same inputs give the same layer.
EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || echo 0)}"
tar -C "$ROOTFS" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$EPOCH" \
  -cf "$WORK/rootfs.tar" .

BUILDAH=(buildah --root "$WORK/storage" --runroot "$WORK/run" --storage-driver vfs)
export BUILDAH_ISOLATION=chroot
CTR="$("${BUILDAH[@]}" from --isolation chroot --quiet scratch)"
"${BUILDAH[@]}" add --quiet "$CTR" "$WORK/rootfs.tar" / >/dev/null
"${BUILDAH[@]}" config \
  --entrypoint '["/usr/local/bin/tessera"]' \
  --user 65532:65532 \
  --workingdir / \
  --env PATH=/usr/local/bin:/usr/bin:/bin \
  --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --created-by "scripts/build-image.sh" \
  --label org.opencontainers.image.title=tessera \
  --label org.opencontainers.image.description="Tessera GPU allocator for Kubernetes" \
  --label org.opencontainers.image.version="$IMAGE_VERSION" \
  "$CTR"
ARCHIVE="$OUT/tessera-$IMAGE_VERSION.oci.tar"
rm -f "$ARCHIVE"
"${BUILDAH[@]}" commit --quiet --format oci --disable-compression=false --timestamp "$EPOCH" \
  --rm "$CTR" "oci-archive:$ARCHIVE:$TAG" >/dev/null

DIGEST="$(tar -xOf "$ARCHIVE" index.json | jq -r '.manifests[0].digest' 2>/dev/null || true)"
echo "image:    $TAG"
echo "archive:  $ARCHIVE ($(du -h "$ARCHIVE" | cut -f1))"
[ -n "$DIGEST" ] && echo "manifest: $DIGEST"
echo "contents: /usr/local/bin/tessera and ${#LIBS[@]} libraries (${LIBS[*]##*/})"
