// Package simcluster starts a simulated AWS Kubernetes cluster for tests.
package simcluster
