package compile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/sdk"
)

// FuzzLoadConfig: any manifold.toml either loads or is refused with an error
// that names the file, never a panic; one that loads compiles a flow to a plan
// or to errors with paths.
func FuzzLoadConfig(f *testing.F) {
	for _, s := range []string{
		"", "namespace = \"ml\"\n", "image = 1\n", "[labels]\nteam = \"ml\"\n", "[[tolerations]]\nkey = \"k\"\noperator = \"Bogus\"\n",
		"gpu_toleration = false\nargo_multi_node = \"job\"\n", "artifacts = \"pvc://\"\n", "efa_wiring = true\nefa_arch = \"riscv\"\n",
		"[device_classes]\nneuron = \"Not A Name\"\n", "unknown = 1\n", "[node_selector]\n\"\" = \"\"\n", "labels = [1,2]\n",
		"namespace = \"a\"\nnamespace = \"b\"\n", "\x00", "[[tolerations]]\n[[tolerations]]\n",
		"a.b = \"\"\n", "labels = \"team\"\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, toml string) {
		path := filepath.Join(t.TempDir(), compile.ConfigFile)
		if err := os.WriteFile(path, []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := compile.LoadConfig(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		flow := sdk.NewFlow("f", sdk.Image("example.com/flow:v1")).
			Step("train", sdk.Command("true"), sdk.Trainium(4), sdk.EFA(4), sdk.Nodes(2)).
			Step("gpu", sdk.Command("true"), sdk.GPU(1), sdk.After("train"))
		p, errs := compile.Compile(flow, compile.Options{Config: cfg})
		if (p == nil) == (len(errs) == 0) {
			t.Fatalf("Compile returned plan %v and %d errors; want exactly one of them", p != nil, len(errs))
		}
		for _, e := range errs {
			if e.Type == "" || e.Field == "" {
				t.Fatalf("error without a type or path: %#v", e)
			}
		}
	})
}
