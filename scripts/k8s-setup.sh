#!/usr/bin/env bash
# Builds the real Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl) and kwok from the Go
# modules pinned in tests/k8s/tools, once, into a cache outside the repository:
#
#   ${TESSERA_K8S_CACHE:-$HOME/.cache/tessera/k8s}/<k8s-version>-<key>/bin
#
# <key> is a hash of go.mod, go.sum, the Go toolchain version and the build
# flags, so a change to any of them builds into a new directory. Prints the bin
# directory on stdout and nothing else; progress goes to stderr. Idempotent:
# when the directory is complete it prints it and exits at once. An
# interrupted build resumes with the binaries still missing.
#
# Builds run at the lowest CPU priority with one package at a time (-p 1),
# since they share the machine with other work. Set TESSERA_K8S_BUILD_JOBS to
# allow more parallel packages.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/tests/k8s/tools"
cache="${TESSERA_K8S_CACHE:-$HOME/.cache/tessera/k8s}"
jobs="${TESSERA_K8S_BUILD_JOBS:-1}"

command -v go >/dev/null || { echo "k8s-setup: go is not installed" >&2; exit 1; }

# Bump when the way binaries are built changes, so old builds are not reused.
flags_rev=1

k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$tools/go.mod")
[ -n "$k8s_version" ] || { echo "k8s-setup: no k8s.io/kubernetes in $tools/go.mod" >&2; exit 1; }
key=$( { cat "$tools/go.mod" "$tools/go.sum"; go env GOVERSION; echo "flags $flags_rev"; } |
  sha256sum | cut -c1-12)
dir="$cache/$k8s_version-$key"
bin="$dir/bin"

if [ -f "$dir/complete" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$bin"
# One builder at a time per cache directory.
exec 9>"$dir/lock"
flock 9
if [ -f "$dir/complete" ]; then
  echo "$bin"
  exit 0
fi

# name|package|ldflags kind
components=(
  "kube-apiserver|k8s.io/kubernetes/cmd/kube-apiserver|kube"
  "kube-controller-manager|k8s.io/kubernetes/cmd/kube-controller-manager|kube"
  "kube-scheduler|k8s.io/kubernetes/cmd/kube-scheduler|kube"
  "kubectl|k8s.io/kubernetes/cmd/kubectl|kube"
  "etcd|go.etcd.io/etcd/server/v3|plain"
  "kwok|sigs.k8s.io/kwok/cmd/kwok|plain"
)

# Components report their release through these variables; without them the
# API server calls itself v0.0.0-master.
minor=${k8s_version#v1.}
minor=${minor%%.*}
vpkg=k8s.io/component-base/version
kube_ldflags="-s -w -X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor"
kube_ldflags+=" -X $vpkg.gitTreeState=clean"

export CGO_ENABLED=0 GOWORK=off
times="$dir/build-times.txt"
total=0
cd "$tools"
for entry in "${components[@]}"; do
  IFS='|' read -r name pkg kind <<<"$entry"
  if [ -x "$bin/$name" ]; then
    echo "k8s-setup: $name already built" >&2
    continue
  fi
  ldflags="-s -w"
  [ "$kind" = kube ] && ldflags="$kube_ldflags"
  echo "k8s-setup: building $name ($pkg)" >&2
  start=$(date +%s)
  nice -n 19 go build -trimpath -buildvcs=false -p "$jobs" -ldflags "$ldflags" -o "$bin/$name.tmp" "$pkg" >&2
  mv "$bin/$name.tmp" "$bin/$name"
  secs=$(($(date +%s) - start))
  total=$((total + secs))
  echo "$name $secs" >>"$times"
  echo "k8s-setup: $name built in ${secs}s" >&2
done
echo "total-this-run $total" >>"$times"
echo "k8s-setup: built in ${total}s into $bin" >&2
{
  echo "kubernetes $k8s_version"
  go -C "$tools" list -m -f '{{.Path}} {{.Version}}' go.etcd.io/etcd/server/v3 sigs.k8s.io/kwok
  go env GOVERSION
} >"$dir/versions.txt"
touch "$dir/complete"
echo "$bin"
