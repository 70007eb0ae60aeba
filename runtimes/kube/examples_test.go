package kube_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/output"
	"github.com/manifoldflow/manifold/placement"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// TestExamples runs the neuron-train and foreach example programs as a user
// would, `<flow> run --kube`, as Jobs and as JobSets.
func TestExamples(t *testing.T) {
	c := simcluster.Shared(t)
	bins := exampletest.Build(t)
	for _, name := range []string{"neuron-train", "foreach"} {
		for _, as := range []string{"job", "jobset"} {
			t.Run(name+"/"+as, func(t *testing.T) {
				ns := c.Namespace(t)
				if name == "neuron-train" {
					c.BoundClaim(t, ns, "training-data")
				}
				dir := t.TempDir()
				// The pods run side by side for a moment, as a multi-node step's
				// do (kwok would complete each at once, and the next could take
				// its node).
				config := "[labels]\n\"" + simcluster.LabelRunFor + "\" = \"2s\"\n"
				if err := os.WriteFile(filepath.Join(dir, "manifold.toml"), []byte(config), 0o644); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(bins[name], "run", "--kube", "--no-build", "--kubeconfig", c.Kubeconfig, "--namespace", ns, "--as", as, "--run-id", "example")
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				t.Logf("%s run --kube --as %s:\n%s", name, as, out)
				if err != nil {
					t.Fatalf("%s run --kube: %v", name, err)
				}
				rec, tasks, err := record.Read(filepath.Join(dir, record.DefaultRoot), "example")
				if err != nil {
					t.Fatal(err)
				}
				if rec.State != record.Succeeded || rec.Runtime != "kube" || rec.Namespace != ns {
					t.Errorf("recorded %s, runtime %q, namespace %q", rec.State, rec.Runtime, rec.Namespace)
				}
				for _, task := range tasks {
					if task.State != record.Succeeded || task.Node == "" {
						t.Errorf("%s: %s on node %q; want succeeded on a node", task.Label(), task.State, task.Node)
					}
				}
				if name == "neuron-train" {
					for _, task := range tasks {
						if task.Step == "train" && strings.Count(task.Node, "trn1-32xlarge-") != 2 {
							t.Errorf("train ran on %q; want two trn1.32xlarge nodes", task.Node)
						}
					}
				}
				if !strings.Contains(string(out), "run example succeeded") {
					t.Errorf("the output does not end the run as succeeded")
				}
				if left := labelled(t, c, ns, "example"); len(left) > 0 {
					t.Errorf("left on the cluster: %v", left)
				}
			})
		}
	}
}

// TestCheckCommand runs `neuron-train check` as a user would: every step fits the
// simulated cluster; three nodes of train do not (it has two trn1.32xlarge nodes);
// an unreachable cluster is status 2.
func TestCheckCommand(t *testing.T) {
	c := simcluster.Shared(t)
	bin := exampletest.Build(t)["neuron-train"]
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"check"}, args...)...)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}

	out, code := run("--kubeconfig", c.Kubeconfig)
	if code != 0 || !regexp.MustCompile(`(?m)^train\s+2 nodes, 8 EFA each\s+2/\d+: trn1-32xlarge-0, trn1-32xlarge-1\s+ok$`).MatchString(out) {
		t.Errorf("check: status %d; want 0 and train ok on both trn1.32xlarge nodes:\n%s", code, out)
	}

	// -o json prints a Check (docs/reference/output.md), -o yaml the same.
	out, code = run("--kubeconfig", c.Kubeconfig, "--set", "train.nodes=3", "-o", "json")
	var report output.Check
	if code != 1 {
		t.Errorf("check of a 3-node train: status %d; want 1:\n%s", code, out)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&report); err != nil {
		t.Fatalf("check -o json: %v:\n%s", err, out)
	}
	if report.APIVersion != output.APIVersion || report.Kind != output.KindCheck || report.OK || report.NodeCount == 0 {
		t.Errorf("check -o json: apiVersion %q, kind %q, ok %v, %d nodes; want %s, %s, false and the cluster's nodes", report.APIVersion, report.Kind, report.OK, report.NodeCount, output.APIVersion, output.KindCheck)
	}
	yamlOut, code := run("--kubeconfig", c.Kubeconfig, "--set", "train.nodes=3", "-o", "yaml")
	var fromYAML output.Check
	if err := yaml.UnmarshalStrict([]byte(yamlOut), &fromYAML); err != nil || code != 1 {
		t.Fatalf("check -o yaml: status %d, %v:\n%s", code, err, yamlOut)
	}
	if diff := cmp.Diff(report, fromYAML); diff != "" {
		t.Errorf("check -o yaml differs from -o json (-json +yaml):\n%s", diff)
	}
	for _, p := range report.Steps {
		if ok := p.Step != "train"; p.OK != ok {
			t.Errorf("step %s: ok %v; want %v", p.Step, p.OK, ok)
		}
		if p.Step == "train" && !strings.HasPrefix(p.Reason, "it runs on 3 nodes at once, and 2/") {
			t.Errorf("train: reason %q", p.Reason)
		}
	}

	out, code = run("--kubeconfig", writeKubeconfig(t, "https://127.0.0.1:1", nil, "x"))
	if code != 2 || !strings.Contains(out, "cannot reach the cluster at https://127.0.0.1:1") {
		t.Errorf("check of an unreachable cluster: status %d; want 2:\n%s", code, out)
	}
}

// TestExamplesPodSecurity runs `<flow> check` of every example, as Jobs and as
// JobSets, against a namespace labelled pod-security.kubernetes.io/enforce=
// restricted, as a user would: every step's pod is admitted by the API
// server's dry run, but for the steps with EFA wiring (validate marks them
// "(wired)"), whose IPC_LOCK capability is refused before anything is created,
// each with Manifold's own line naming the step, the level and the option.
func TestExamplesPodSecurity(t *testing.T) {
	c := simcluster.Shared(t)
	bins := exampletest.Build(t)
	ns := c.LabelledNamespace(t, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	wiredRE := regexp.MustCompile(`(?m)^  (\S+) .*\(wired\)`)
	names := exampletest.Names() // dynamic flows: none of the cluster runtimes runs one yet
	if len(names) < 6 {
		t.Fatalf("examples built: %v; want every example", names)
	}
	for _, name := range names {
		cmd := exec.Command(bins[name], "validate")
		cmd.Dir = t.TempDir()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s validate: %v\n%s", name, err, out)
		}
		wired := map[string]bool{}
		for _, m := range wiredRE.FindAllStringSubmatch(string(out), -1) {
			wired[m[1]] = true
		}
		for _, as := range []string{"job", "jobset"} {
			t.Run(name+"/"+as, func(t *testing.T) {
				cmd := exec.Command(bins[name], "check", "--kubeconfig", c.Kubeconfig, "--namespace", ns, "--as", as, "-o", "json")
				cmd.Dir = t.TempDir()
				out, err := cmd.Output()
				var exit *exec.ExitError
				if err != nil && !errors.As(err, &exit) {
					t.Fatal(err)
				}
				var report placement.Report
				if err := json.Unmarshal(out, &report); err != nil {
					t.Fatalf("check -o json: %v:\n%s", err, out)
				}
				if len(report.Steps) == 0 {
					t.Fatalf("check reports no steps:\n%s", out)
				}
				for _, p := range report.Steps {
					switch {
					case !wired[p.Step] && !p.OK:
						t.Errorf("step %s: refused in a restricted namespace: %s", p.Step, p.Reason)
					case wired[p.Step] && (p.OK || !strings.Contains(p.Reason, "pod-security.kubernetes.io/enforce=restricted of namespace "+ns) ||
						!strings.Contains(p.Reason, "securityContext.capabilities.add") || !strings.Contains(p.Reason, "sdk.EFAWiring")):
						t.Errorf("step %s (EFA wiring): ok %t, reason %q; want it refused by the restricted level, naming the field and sdk.EFAWiring", p.Step, p.OK, p.Reason)
					}
				}
				if want := len(wired) > 0; (err != nil) != want {
					t.Errorf("check exit: %v; want a failure exactly when a step is wired (%v)", err, wired)
				}
				for _, gvr := range kinds {
					// (Every namespace holds the ConfigMap kube-root-ca.crt: what
					// Manifold makes is labelled part of it.)
					list, err := c.Dynamic.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{LabelSelector: plan.LabelPartOf + "=" + plan.PartOf})
					if err != nil || len(list.Items) > 0 {
						t.Errorf("check created %s in %s: %v", gvr.Resource, ns, err)
					}
				}
			})
		}
	}
}
