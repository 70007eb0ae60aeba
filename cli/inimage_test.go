package cli_test

import (
	"os/exec"
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
