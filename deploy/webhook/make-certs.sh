#!/usr/bin/env bash
# Makes the serving certificate of `tessera webhook`:
#   ca.crt / ca.key           a CA for this purpose only (keep ca.key offline)
#   server.crt / server.key   the webhook's certificate for its Service DNS names
# and, with --apply, creates or replaces the Secret tessera-webhook-tls (tls.crt, tls.key) in
# the namespace and sets the CA as caBundle of the MutatingWebhookConfiguration
# tessera-pod-webhook (apply deploy/webhook/ first).
#
#   deploy/webhook/make-certs.sh OUT_DIR [--days N] [--namespace NS] [--san SAN]... [--apply]
#
# --san adds a subjectAltName to the serving certificate, e.g. --san IP:127.0.0.1 for an API
# server that calls the webhook by URL on the same host.
#
# Rotation: run it again into the same directory (ca.crt/ca.key are reused, so the caBundle
# stays valid) and apply; the webhook re-reads its files when the Secret's projection changes.
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
    -subj "/CN=tessera-webhook-ca" 2>/dev/null
fi
svc="tessera-webhook.${ns}.svc"
printf 'subjectAltName=DNS:%s,DNS:%s.cluster.local%s\nextendedKeyUsage=serverAuth\n' \
  "$svc" "$svc" "$extra_sans" > server.ext
openssl req "${key[@]}" -keyout server.key -out server.csr -subj "/CN=${svc}" 2>/dev/null
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt \
  -days "$days" -extfile server.ext 2>/dev/null
rm -f server.csr server.ext
echo "make-certs.sh: wrote $(pwd)/{ca,server}.{crt,key}"
if [ "$apply" = 1 ]; then
  kubectl -n "$ns" create secret tls tessera-webhook-tls --cert=server.crt --key=server.key \
    --dry-run=client -o yaml | kubectl apply -f -
  bundle=$(base64 -w0 < ca.crt)
  kubectl patch mutatingwebhookconfiguration tessera-pod-webhook --type=json \
    -p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"${bundle}\"}]"
fi
