//go:build tools

// Package tools pins the real control-plane components that the
// Kubernetes e2e tests run against. Nothing here is compiled into
// Tessera; scripts/k8s-setup.sh builds each command below from this
// module so that every build uses the versions in go.mod and go.sum.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
