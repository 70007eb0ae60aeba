package kube_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/sdk"
)

// TestServerPasswordWithheld connects through a kubeconfig whose server URL
// carries a user and password: the report of `check`, and an error naming the
// cluster, show the URL with its password withheld.
func TestServerPasswordWithheld(t *testing.T) {
	c := simcluster.Shared(t)
	data, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	const password = "kubepw-42"
	server := regexp.MustCompile(`server: https://`)
	if !server.Match(data) {
		t.Fatalf("the cluster's kubeconfig names no https server:\n%s", data)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, server.ReplaceAll(data, []byte("server: https://u:"+password+"@")), 0o600); err != nil {
		t.Fatal(err)
	}
	p := compileFlow(t, sdk.NewFlow("userinfo", sdk.Image("busybox:1.36")).Step("a", sdk.Command("true")))
	// The URL's user signs in in place of the kubeconfig's token, so the
	// cluster may refuse what check asks: then the error names the cluster.
	for _, ns := range []string{"default", "no-such-namespace"} {
		report, err := kube.Check(context.Background(), p, kube.Options{Kubeconfig: kubeconfig, Namespace: ns})
		shown := ""
		if err != nil {
			shown = err.Error()
		} else {
			shown = report.Cluster
		}
		if strings.Contains(shown, password) || !strings.Contains(shown, "127.0.0.1") {
			t.Errorf("check in namespace %s names the cluster as %q; want its URL without the password", ns, shown)
		}
	}
}
