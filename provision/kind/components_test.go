package kind

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestParseWith(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
	}{
		{nil, nil},
		{[]string{"jobset"}, []string{"jobset"}},
		{[]string{"argo,jobset"}, []string{"jobset", "argo"}},            // install order
		{[]string{"jobset", "jobset, argo"}, []string{"jobset", "argo"}}, // once each
	} {
		comps, err := ParseWith(tc.in)
		if err != nil {
			t.Errorf("ParseWith(%q): %v", tc.in, err)
			continue
		}
		var got []string
		for _, c := range comps {
			got = append(got, c.Name)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseWith(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
	_, err := ParseWith([]string{"jobset,kueue"})
	if err == nil || err.Error() != `--with "kueue": choose from jobset, argo (comma-separated)` {
		t.Errorf("ParseWith(kueue): %v", err)
	}
}

// TestComponentManifests: each embedded manifest is the pinned release's — its
// header names the module and version, its containers run that version's
// images — and lists namespaces and CRDs before what needs them.
func TestComponentManifests(t *testing.T) {
	for _, tc := range []struct {
		name, module string
		images       []string
		deployments  []string
	}{
		{"jobset", "sigs.k8s.io/jobset@" + JobSetVersion,
			[]string{"registry.k8s.io/jobset/jobset:" + JobSetVersion},
			[]string{"jobset-system/jobset-controller-manager"}},
		{"argo", "github.com/argoproj/argo-workflows/v3@" + ArgoVersion,
			[]string{"quay.io/argoproj/workflow-controller:" + ArgoVersion, "quay.io/argoproj/argocli:" + ArgoVersion},
			[]string{"argo/workflow-controller", "argo/argo-server"}},
	} {
		comps, err := ParseWith([]string{tc.name})
		if err != nil {
			t.Fatal(err)
		}
		c := comps[0]
		data, err := manifestFiles.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if header, _, _ := bytes.Cut(data, []byte("\napiVersion")); !bytes.Contains(bytes.ReplaceAll(header, []byte("\n# "), []byte(" ")), []byte(tc.module)) {
			t.Errorf("%s: the header does not name %s:\n%s", c.file, tc.module, header)
		}
		objs, err := c.Objects()
		if err != nil {
			t.Fatal(err)
		}
		var images, deployments []string
		seenOther := false
		for _, o := range objs {
			switch o.GetKind() {
			case "Namespace", "CustomResourceDefinition":
				if seenOther {
					t.Errorf("%s: %s %s comes after objects that need it", c.Name, o.GetKind(), o.GetName())
				}
			case "Deployment":
				seenOther = true
				deployments = append(deployments, o.GetNamespace()+"/"+o.GetName())
				containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
				for _, ct := range containers {
					images = append(images, ct.(map[string]any)["image"].(string))
				}
			default:
				seenOther = true
				if o.GetNamespace() == "" && namespaced(o.GetKind()) {
					t.Errorf("%s: %s %s has no namespace", c.Name, o.GetKind(), o.GetName())
				}
			}
		}
		if diff := cmp.Diff(tc.images, images); diff != "" {
			t.Errorf("%s images (-want +got):\n%s", c.Name, diff)
		}
		if diff := cmp.Diff(tc.deployments, deployments); diff != "" {
			t.Errorf("%s deployments (-want +got):\n%s", c.Name, diff)
		}
	}
}

func namespaced(kind string) bool {
	switch kind {
	case "ClusterRole", "ClusterRoleBinding", "PriorityClass", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		return false
	}
	return true
}

// TestManifestsUpToDate regenerates the embedded manifests from the pinned
// modules (tools/kindmanifests -check) and fails if they differ: the files are
// what the releases' kustomizations make, not edited by hand.
func TestManifestsUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kustomize")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	manifests, err := filepath.Abs("manifests")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gobin, "run", ".", "-o", manifests, "-check")
	cmd.Dir = filepath.Join("..", "..", "tools", "kindmanifests")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("tools/kindmanifests -check: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "is not what tools/kindmanifests makes") {
		t.Errorf("%s", out)
	}
}
