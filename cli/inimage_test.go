package cli_test

import (
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/image"
)

// TestImageProgramBuilds: the command line builds, and vets, with the build
// tags of the program in an image, which leave out the workstation's commands
// (inimage.go stands in for them). A command that uses what those leave out
// must be left out too, or the image of every flow fails to build.
func TestImageProgramBuilds(t *testing.T) {
	if out, err := exec.Command("go", "vet", "-tags", image.ImageBuildTags, ".").CombinedOutput(); err != nil {
		t.Fatalf("go vet -tags %s ./cli: %v\n%s", image.ImageBuildTags, err, out)
	}
}

// TestImageProgramLeavesOut: the program in an image links none of what only a
// workstation's commands use. Every package linked runs its initialisers at
// each start of every step's pod, so these stay out: the image builder and its
// registry client (compile reads image build's record through image/built),
// client-go's typed clients and informers, and kind.
func TestImageProgramLeavesOut(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-tags", image.ImageBuildTags, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps -tags %s ./cli: %v", image.ImageBuildTags, err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/manifoldflow/manifold/image/built") {
		t.Fatalf("go list -deps ./cli lists no image/built among its %d packages: is the list whole?", len(deps))
	}
	// Each is a package and every package under it, but the image builder's
	// record.
	left := []string{
		"github.com/manifoldflow/manifold/image",
		"github.com/google/go-containerregistry",
		"k8s.io/client-go/kubernetes",
		"k8s.io/client-go/informers",
		"sigs.k8s.io/kind",
	}
	for _, pkg := range deps {
		for _, l := range left {
			if (pkg == l || strings.HasPrefix(pkg, l+"/")) && pkg != "github.com/manifoldflow/manifold/image/built" {
				t.Errorf("the program in an image links %s", pkg)
			}
		}
	}
}

// schemePackages are the packages of client-go that link its Clientset's
// scheme (k8s.io/client-go/kubernetes/scheme), each with every package under
// it. The scheme registers every API group Kubernetes serves when the program
// starts: about 3 ms of every start of a flow program, for every command and
// every local step. internal/kubeclient serves the few APIs Manifold uses
// without it.
var schemePackages = []string{
	"k8s.io/client-go/kubernetes",
	"k8s.io/client-go/informers",
	"k8s.io/client-go/discovery",
	"k8s.io/client-go/restmapper",
	"k8s.io/client-go/dynamic/dynamicinformer",
	"k8s.io/client-go/applyconfigurations",
}

// TestFlowProgramLeavesOutScheme: a flow program as a workstation builds it
// (go build, no tags: every command, run --kube and kind included) links none
// of schemePackages. Each package that imports one is named with the chain of
// imports that links it, from the program's main package.
func TestFlowProgramLeavesOutScheme(t *testing.T) {
	const program = "github.com/manifoldflow/manifold/examples/hello"
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", program).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", program, err)
	}
	imports := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) > 0 {
			imports[fields[0]] = fields[1:]
		}
	}
	for _, pkg := range []string{program, "github.com/manifoldflow/manifold/cli", "k8s.io/client-go/rest"} {
		if _, ok := imports[pkg]; !ok {
			t.Fatalf("go list -deps %s lists no %s among its %d packages: is the list whole?", program, pkg, len(imports))
		}
	}
	banned := func(pkg string) bool {
		return slices.ContainsFunc(schemePackages, func(p string) bool { return pkg == p || strings.HasPrefix(pkg, p+"/") })
	}

	// The shortest chain of imports from the program to each package.
	from := map[string]string{program: ""}
	queue := []string{program}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		for _, imp := range imports[pkg] {
			if _, seen := from[imp]; !seen {
				if _, dep := imports[imp]; dep {
					from[imp] = pkg
					queue = append(queue, imp)
				}
			}
		}
	}
	chain := func(pkg string) string {
		var c []string
		for p := pkg; p != ""; p = from[p] {
			c = append(c, p)
		}
		slices.Reverse(c)
		return strings.Join(c, " → ")
	}

	var linked []string
	for _, pkg := range slices.Sorted(maps.Keys(imports)) {
		if banned(pkg) {
			linked = append(linked, pkg)
			continue
		}
		for _, imp := range imports[pkg] {
			if banned(imp) {
				t.Errorf("a flow program links %s: %s → %s", imp, chain(pkg), imp)
			}
		}
	}
	if len(linked) > 0 {
		t.Errorf("a flow program links %d packages of client-go's Clientset and its scheme: %s", len(linked), strings.Join(linked, ", "))
	}
}
