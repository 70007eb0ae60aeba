package airflow

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/harness/testflows"
)

// TestDeployLeavesOthersFiles: a DAG file, or a .kpo.json, of the flow's name
// that manifold did not write is not overwritten: deploy refuses, naming it
// and what to do, and writes nothing; with takeOver it replaces both. And
// undeploy, finding a .kpo.json that is not manifold's beside no DAG file,
// removes nothing.
func TestDeployLeavesOthersFiles(t *testing.T) {
	p := testflows.Compile(t, flow)
	for _, name := range []string{"deployflow.py", "deployflow.kpo.json"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			theirs := filepath.Join(dir, name)
			const data = "# their own file\n"
			if err := os.WriteFile(theirs, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
			dep, err := Deploy(dir, p, false)
			if err == nil {
				t.Fatalf("deploy over another's %s wrote %v; want it refused", name, dep.Files)
			}
			for _, want := range []string{theirs, "not written by manifold", "--take-over"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			entries, _ := os.ReadDir(dir)
			if got, _ := os.ReadFile(theirs); string(got) != data || len(entries) != 1 {
				t.Errorf("the refused deploy changed the dags folder: %d files, %s holds %q", len(entries), name, got)
			}
			if name == "deployflow.kpo.json" {
				if removed, err := Undeploy(dir, "deployflow"); err == nil || len(removed) > 0 {
					t.Errorf("undeploy removed %v (%v); want nothing removed, and an error", removed, err)
				}
			}
			if _, err := Deploy(dir, p, true); err != nil {
				t.Fatalf("deploy with takeOver: %v", err)
			}
			if got, _ := os.ReadFile(theirs); string(got) == data {
				t.Errorf("deploy with takeOver left %s as it was", name)
			}
		})
	}
}
