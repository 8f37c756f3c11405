// Package k8s checks the Kubernetes manifests in deploy/k8s without a cluster:
// its tests decode every document strictly into the typed Kubernetes API and
// check what the API server would not, the references between objects and the
// flags each binary ends up with (Services and their ports, probes, -peers,
// ConfigMap keys, disruption budgets, the autoscaler, volumes, images and the
// kustomization list). A table of broken manifests proves that every check can
// fail.
package k8s
