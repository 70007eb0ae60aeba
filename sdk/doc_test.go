package sdk_test

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDocFlow builds the flow program the package doc shows, as it is
// written there, and validates its flow: the doc cannot drift from the SDK. The
// program is given to the go command as an overlay file of a directory that does
// not exist, so nothing is written to the source tree.
func TestPackageDocFlow(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	f, err := parser.ParseFile(token.NewFileSet(), "flow.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	var program []string
	in := false
	for _, line := range strings.Split(f.Doc.Text(), "\n") {
		code, indented := strings.CutPrefix(line, "\t")
		switch {
		case indented && code == "package main":
			in = true
		case !indented && line != "" && in:
			in = false
		}
		if in {
			program = append(program, code)
		}
	}
	src := strings.Join(program, "\n")
	if !strings.Contains(src, "func main() { cli.Main(flow) }") {
		t.Fatalf("the package doc shows no whole flow program:\n%s", src)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(src+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	at, err := filepath.Abs(filepath.Join("testdata", "docflow", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {at: file}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "docflow")
	build := exec.Command(goCmd, "build", "-overlay", filepath.Join(dir, "overlay.json"), "-o", bin, "./testdata/docflow")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of the package doc's program: %v\n%s\n%s", err, out, src)
	}
	// With the store the doc compiles it with: its steps pass data.
	validate := exec.Command(bin, "validate", "--artifacts", "s3://ml-artifacts/flows")
	validate.Dir = dir
	out, err := validate.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "flow neuron-train is valid: 3 steps\n") {
		t.Errorf("the package doc's program: validate: %v\n%s", err, out)
	}
}
