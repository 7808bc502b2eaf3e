// Package kubernetes holds no code: its tests decode the manifests under
// deploy/kubernetes strictly into the Kubernetes API types and check that
// they fit together and fit the server. It is a module of its own so that
// k8s.io/api and its dependencies stay out of the server's go.mod.
package kubernetes
