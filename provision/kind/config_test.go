package kind

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// TestConfigYAML: the exact kind config of each --simulate: the control plane,
// then the workers in the order given, each labelled with its instance type and
// the one zone.
func TestConfigYAML(t *testing.T) {
	for _, tc := range []struct {
		name, simulate, image, want string
	}{
		{"manifold", "trn1.32xlarge=2,inf2.xlarge=1", "", `kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
name: manifold
nodes:
  - role: control-plane
  - role: worker
    labels:
      manifold.dev/simulate: trn1.32xlarge
      topology.kubernetes.io/zone: kind
  - role: worker
    labels:
      manifold.dev/simulate: trn1.32xlarge
      topology.kubernetes.io/zone: kind
  - role: worker
    labels:
      manifold.dev/simulate: inf2.xlarge
      topology.kubernetes.io/zone: kind
`},
		{"manifold", "", "", `kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
name: manifold
nodes:
  - role: control-plane
  - role: worker
    labels:
      topology.kubernetes.io/zone: kind
`},
		{"dev", "p5.48xlarge=1", "kindest/node:v1.35.0", `kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
name: dev
nodes:
  - role: control-plane
    image: kindest/node:v1.35.0
  - role: worker
    image: kindest/node:v1.35.0
    labels:
      manifold.dev/simulate: p5.48xlarge
      topology.kubernetes.io/zone: kind
`},
	} {
		groups, err := ParseSimulate(tc.simulate)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ConfigYAML(Config(tc.name, groups, tc.image))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, string(got)); diff != "" {
			t.Errorf("--simulate %q (-want +got):\n%s", tc.simulate, diff)
		}
		// kind reads the file into the same types, every field known.
		var back v1alpha4.Cluster
		dec := yaml.NewDecoder(bytes.NewReader(got))
		dec.KnownFields(true)
		if err := dec.Decode(&back); err != nil {
			t.Errorf("--simulate %q: the config does not read back: %v", tc.simulate, err)
		}
		if diff := cmp.Diff(Config(tc.name, groups, tc.image), &back); diff != "" {
			t.Errorf("--simulate %q: read back (-want +got):\n%s", tc.simulate, diff)
		}
	}
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"manifold", "dev-1", "a.b"} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Manifold", "my_cluster", "a b"} {
		err := CheckName(bad)
		if err == nil || !strings.Contains(err.Error(), "use lowercase letters, digits, '.' and '-' only") {
			t.Errorf("CheckName(%q) = %v, want an error that says what a name may hold", bad, err)
		}
	}
}
