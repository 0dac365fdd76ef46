// Pins the Prometheus Operator release whose PrometheusRule CRD manifests_test.py installs
// (example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml in the module),
// fetched into the Go module cache with `go mod download`; nothing here is built.
module tessera.invalid/tests/k8s/promcrd

go 1.22

require github.com/prometheus-operator/prometheus-operator v0.85.0
