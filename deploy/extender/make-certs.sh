#!/usr/bin/env bash
# Makes the certificates for `tessera extender` in extender mode:
#   ca.crt / ca.key           a CA for this purpose only (keep ca.key offline)
#   server.crt / server.key   the extender's serving certificate for its Service DNS names
#   client.crt / client.key   kube-scheduler's client certificate (CN kube-scheduler)
# and, with --apply, creates or replaces the Secret tessera-extender-tls (tls.crt, tls.key,
# ca.crt) in the namespace. Copy ca.crt, client.crt and client.key to
# /etc/kubernetes/tessera-extender/ on every control-plane node (kube-scheduler's tlsConfig).
#
#   deploy/extender/make-certs.sh OUT_DIR [--days N] [--namespace NS] [--san SAN]... [--apply]
#
# --san adds a subjectAltName to the serving certificate, e.g. --san IP:10.96.0.20 for a
# kube-scheduler that calls the Service's ClusterIP, or --san IP:127.0.0.1 for a sidecar.
#
# Rotation: run it again into a new directory (reusing ca.crt/ca.key there keeps clients
# valid), apply the Secret, then replace the client files; the extender re-reads its files when
# the Secret's projection changes, without a restart.
set -euo pipefail
out="${1:?usage: make-certs.sh OUT_DIR [--days N] [--namespace NS] [--san SAN]... [--apply]}"
shift
days=365
ns=tessera-system
apply=0
extra_sans=""
while [ $# -gt 0 ]; do
  case "$1" in
    --days) days="$2"; shift 2 ;;
    --namespace) ns="$2"; shift 2 ;;
    --san)
      case "$2" in
        IP:?*|DNS:?*) extra_sans="${extra_sans},$2" ;;
        *) echo "make-certs.sh: --san wants IP:ADDRESS or DNS:NAME, got '$2'" >&2; exit 2 ;;
      esac
      shift 2 ;;
    --apply) apply=1; shift ;;
    *) echo "make-certs.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
cd "$out"
umask 077
key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
if [ ! -f ca.key ]; then
  openssl req -x509 "${key[@]}" -keyout ca.key -out ca.crt -days "$days" \
    -subj "/CN=tessera-extender-ca" 2>/dev/null
fi
svc="tessera-extender.${ns}.svc"
printf 'subjectAltName=DNS:%s,DNS:%s.cluster.local,DNS:tessera-extender.%s%s\nextendedKeyUsage=serverAuth\n' \
  "$svc" "$svc" "$ns" "$extra_sans" > server.ext
printf 'extendedKeyUsage=clientAuth\n' > client.ext
openssl req "${key[@]}" -keyout server.key -out server.csr -subj "/CN=${svc}" 2>/dev/null
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt \
  -days "$days" -extfile server.ext 2>/dev/null
openssl req "${key[@]}" -keyout client.key -out client.csr -subj "/CN=kube-scheduler" 2>/dev/null
openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt \
  -days "$days" -extfile client.ext 2>/dev/null
rm -f server.csr client.csr server.ext client.ext
echo "make-certs.sh: wrote $(pwd)/{ca,server,client}.{crt,key}"
if [ "$apply" = 1 ]; then
  kubectl -n "$ns" create secret generic tessera-extender-tls --from-file=tls.crt=server.crt \
    --from-file=tls.key=server.key --from-file=ca.crt=ca.crt --dry-run=client -o yaml |
    kubectl apply -f -
fi
