package kind

import (
	"bytes"
	"fmt"
	"regexp"
	"sync"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// DefaultName is the cluster's name when none is given; its kubeconfig context
// is kind-manifold.
const DefaultName = "manifold"

// LabelSimulate records on a worker the instance type it simulates. kind puts it
// on the node when the node joins (the config's node labels); Up finds the
// workers to shape by it.
const LabelSimulate = "manifold.dev/simulate"

// validName is what kind accepts as a cluster name.
var validName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9.-]+$`) })

// CheckName returns an error if kind would refuse name as a cluster's name.
func CheckName(name string) error {
	if !validName().MatchString(name) {
		return fmt.Errorf("cluster name %q: use lowercase letters, digits, '.' and '-' only, such as %s", name, DefaultName)
	}
	return nil
}

// Zone is the availability zone (topology.kubernetes.io/zone) of every kind
// worker: a multi-node EFA step keeps its pods in one zone, and a node without
// the label is in none.
const Zone = "kind"

// Config returns the kind cluster config of cluster name: one control-plane
// node, then one worker per simulated instance (groups in order, the workers of
// a group together), each labelled with LabelSimulate; with no groups, one plain
// worker. Every worker is in Zone. kind names the workers <name>-worker, <name>-worker2, … in this order.
// image, if not "", is every node's image (kindest/node:<version>); "" leaves
// kind's default.
func Config(name string, groups []Group, image string) *v1alpha4.Cluster {
	cfg := &v1alpha4.Cluster{
		TypeMeta: v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name:     name,
		Nodes:    []v1alpha4.Node{{Role: v1alpha4.ControlPlaneRole, Image: image}},
	}
	types := workerTypes(groups)
	if len(types) == 0 {
		cfg.Nodes = append(cfg.Nodes, v1alpha4.Node{Role: v1alpha4.WorkerRole, Image: image, Labels: map[string]string{corev1.LabelTopologyZone: Zone}})
	}
	for _, t := range types {
		cfg.Nodes = append(cfg.Nodes, v1alpha4.Node{
			Role:   v1alpha4.WorkerRole,
			Image:  image,
			Labels: map[string]string{LabelSimulate: t, corev1.LabelTopologyZone: Zone},
		})
	}
	return cfg
}

// ConfigYAML returns cfg as a kind config file, fields in kind's order, without
// empty ones.
func ConfigYAML(cfg *v1alpha4.Cluster) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(cfg); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
