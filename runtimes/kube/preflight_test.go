package kube_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/sdk"
)

// oneStep is a flow of one Command step that mounts the claim "data".
func oneStep() *sdk.Flow {
	return sdk.NewFlow("kube-one", sdk.Image("example.com/flow:v1")).Step("only", sdk.Command("true"), sdk.Volume("data", "/data"))
}

// writeKubeconfig writes a kubeconfig with one context, "test", for server with
// token, and returns its path.
func writeKubeconfig(t *testing.T, server string, ca []byte, token string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRefusedBeforeCreating shows that a cluster that cannot run the flow is one
// clear error, and that nothing is recorded or created.
func TestRefusedBeforeCreating(t *testing.T) {
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()

	// A service account with no role at all.
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "nobody", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nobody := writeKubeconfig(t, c.Config.Host, c.Config.CAData, tok.Status.Token)

	for _, tc := range []struct {
		name string
		o    kube.Options
		want string
	}{
		{"unreachable", kube.Options{Kubeconfig: writeKubeconfig(t, "https://127.0.0.1:1", nil, "x")},
			"cannot reach the cluster at https://127.0.0.1:1 (context test)"},
		{"no such context", kube.Options{Kubeconfig: c.Kubeconfig, Context: "nope"},
			`the kubeconfig has no context "nope": pass --context with one of sim`},
		{"no kubeconfig", kube.Options{Kubeconfig: filepath.Join(t.TempDir(), "missing")},
			"reading the kubeconfig"},
		{"missing namespace", kube.Options{Kubeconfig: c.Kubeconfig, Namespace: "no-such-namespace"},
			"namespace no-such-namespace does not exist on the cluster at " + c.Config.Host + ": create it"},
		{"missing claim", kube.Options{Kubeconfig: c.Kubeconfig, Namespace: ns},
			"step only mounts the PersistentVolumeClaim data, which does not exist in namespace " + ns},
		// RBAC refusals are one a line.
		{"RBAC", kube.Options{Kubeconfig: nobody, Namespace: ns},
			"RBAC on the cluster at " + c.Config.Host + " (context test) does not let this user do what the run needs; ask a cluster admin for the Role `check --rbac` prints, or use another --namespace or --context:\n" +
				"  create jobs.batch in namespace " + ns + " (to create each step's Job, and dry-run it first)\n" +
				"  list jobs.batch in namespace " + ns + " (to follow each step's Job as it runs)\n"},
		{"RBAC jobsets", kube.Options{Kubeconfig: nobody, Namespace: ns, As: kube.AsJobSet},
			"\n  create jobsets.jobset.x-k8s.io in namespace " + ns + " (to create each step's JobSet, and dry-run it first)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tc.o.Root = root
			res, err := kube.Run(ctx, compileFlow(t, oneStep()), tc.o)
			if err == nil || res != nil {
				t.Fatalf("result %+v, error %v; want an error and no result", res, err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(tc.name, "RBAC") && strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q; want one line with %q", err, tc.want)
			}
			if entries, _ := os.ReadDir(root); len(entries) > 0 {
				t.Errorf("a refused run recorded %d entries", len(entries))
			}
		})
	}
	jobs, err := c.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(jobs.Items) > 0 {
		t.Errorf("refused runs created %d Jobs (%v)", len(jobs.Items), err)
	}
}
