package simcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// requires returns the version each module path of go.mod file path requires.
func requires(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && strings.HasPrefix(f[1], "v") {
			out[f[0]] = f[1]
		}
	}
	return out
}

// TestToolsModulesMatchVersions: the versions the tools modules build are the
// ones the cache directory is named after, so a version bump in one place
// cannot leave stale binaries in use.
func TestToolsModulesMatchVersions(t *testing.T) {
	mods := map[string]map[string]string{}
	for _, m := range []string{".", "etcd", "argo", "kueue"} {
		mods[m] = requires(t, filepath.Join("..", "..", "tools", "simcluster", m, "go.mod"))
	}
	for _, c := range []struct{ module, path, want string }{
		{".", "k8s.io/kubernetes", KubernetesVersion},
		{".", "sigs.k8s.io/kwok", KwokVersion},
		{".", "sigs.k8s.io/jobset", JobSetVersion},
		{"etcd", "go.etcd.io/etcd/server/v3", EtcdVersion},
		{"argo", "github.com/argoproj/argo-workflows/v3", ArgoVersion},
		{"kueue", "sigs.k8s.io/kueue", KueueVersion},
	} {
		if got := mods[c.module][c.path]; got != c.want {
			t.Errorf("tools/simcluster/%s/go.mod requires %s %s, want %s", c.module, c.path, got, c.want)
		}
	}
	for _, tool := range Tools() {
		if _, ok := mods[tool.Module]; !ok {
			t.Errorf("tool %s is built in unknown module %q", tool.Name, tool.Module)
		}
	}
}

// TestReadyNamesTheFix: with tools missing, the error says to run make sim-tools.
func TestReadyNamesTheFix(t *testing.T) {
	err := Ready(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "make sim-tools") || !strings.Contains(err.Error(), "kube-apiserver") {
		t.Errorf("Ready(empty dir) = %v", err)
	}
}
