package cli_test

import (
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
