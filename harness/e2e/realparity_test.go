package e2e_test

import (
	"bytes"
	"context"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	corev1 "k8s.io/api/core/v1"

	"github.com/manifoldflow/manifold/artifact"
	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/s3test"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/image/built"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// s3Secret is the Secret a parity run's pods take their S3 credentials from
// (manifold.toml's secrets), as a pod on EKS would take them from its service
// account.
const s3Secret = "s3-credentials"

// TestRealNodeParity runs hello four ways — `run` on this machine, `run --kube`
// as Jobs, the argo target's WorkflowTemplate under Argo's controller and
// executor, and the airflow target's DAG under `airflow dags test` with
// KubernetesPodOperator — the last three in real containers on a real node, all
// with one S3 artifact store (moto on loopback, which the pods reach from the
// node's network: host_network). Each Run step's output and each artifact it
// put are the same bytes everywhere: greet's stdout as this machine's run
// recorded it and as each step container's log holds it, and greet's and
// shout's artifacts under each run's own prefix of the store. The Airflow
// operator reads its pods' real logs (the greeting is in its output), and a
// step whose container exits 3 fails its task and the DAG run, the operator
// reporting the container's own output.
func TestRealNodeParity(t *testing.T) {
	c := simcluster.Shared(t)
	node := c.RealNode(t)
	ctx := context.Background()
	reg, err := c.Registry(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.PushBusybox(t, "busybox:1.37")
	srv := s3test.Start(t)

	// The flow's image, built once and pushed to the loopback registry.
	base := exampleNamed(t, "hello")
	work, env := exampletest.Workspace(t)
	if err := os.WriteFile(filepath.Join(work, compile.ConfigFile), []byte(realNodeConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command(base.bin, "image", "build", "--tag", reg.Host+"/flows/hello:parity", "--push")
	build.Dir, build.Env = work, env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("hello image build: %v\n%s", err, out)
	}
	built, err := built.Read(filepath.Join(work, built.File))
	if err != nil {
		t.Fatal(err)
	}

	// On this machine: the reference run, its artifacts in its run directory
	// (the local runtime's store).
	local := exec.Command(base.bin, "run", "--run-id", "parity-local")
	local.Dir, local.Env = work, env
	if out, err := local.CombinedOutput(); err != nil {
		t.Fatalf("hello run: %v\n%s", err, out)
	}
	runDir := filepath.Join(work, record.DefaultRoot, "parity-local")
	greetOut, err := os.ReadFile(filepath.Join(runDir, "_steps", "greet", record.StdoutLog))
	if err != nil {
		t.Fatal(err)
	}
	if string(greetOut) != "hello, world\n" {
		t.Fatalf("greet's stdout on this machine is %q", greetOut)
	}
	want := map[string][]byte{}
	for _, a := range [][2]string{{"greet", "greeting"}, {"shout", "shout"}} {
		key := artifact.Key(a[0], -1, a[1])
		if want[key], err = os.ReadFile(filepath.Join(runDir, filepath.FromSlash(key))); err != nil {
			t.Fatal(err)
		}
	}

	// onCluster is the same flow on the cluster, with its artifacts in a bucket
	// of its own: the steps' image is the one built, the pods in the node's
	// network with the store's credentials.
	onCluster := func(t *testing.T, bucket string) (*example, realStore) {
		store := s3Store(t, c, srv, bucket)
		e := *base
		e.config = store.config + "entrypoint = \"" + built.Entrypoint + "\"\n" + realNodeConfig
		e.args = append(slices.Clone(store.args), "--set", "greet.image="+built.Reference, "--set", "shout.image="+built.Reference)
		return &e, store
	}
	// same checks that the run with runID in ns ran every step on the real
	// node, that greet's container printed what it printed here, and that the
	// run's artifacts are those of the run here.
	same := func(t *testing.T, store realStore, runID string, pods map[string][]corev1.Pod) {
		t.Helper()
		for _, s := range []string{"greet", "shout", "echo"} {
			if len(pods[s]) != 1 {
				t.Errorf("step %s ran %d pods, want 1", s, len(pods[s]))
			}
			for _, p := range pods[s] {
				// In the node's network, a pod's address is the node's: loopback.
				if p.Spec.NodeName != node.Name || !p.Spec.HostNetwork || p.Status.PodIP != "127.0.0.1" {
					t.Errorf("step %s pod %s: node %s, hostNetwork %t, address %s; want the real node %s, true, 127.0.0.1", s, p.Name, p.Spec.NodeName, p.Spec.HostNetwork, p.Status.PodIP, node.Name)
				}
			}
		}
		if len(pods["greet"]) == 1 {
			if got := stepLog(t, c, store.ns, pods["greet"][0].Name); got != string(greetOut) {
				t.Errorf("greet's container printed %q; on this machine it printed %q", got, greetOut)
			}
		}
		got := store.read(t)
		for key, data := range want {
			if g, ok := got["hello/"+runID+"/"+key]; !ok || !bytes.Equal(g, data) {
				t.Errorf("artifact %s of run %s is %q; on this machine it is %q (%s holds %s)", key, runID, g, data, store.what, slices.Sorted(maps.Keys(got)))
			}
		}
	}

	t.Run("run-kube", func(t *testing.T) {
		e, store := onCluster(t, "parity-kube")
		same(t, store, "parity-kube", runKube(t, c, e, store.ns, "job", "parity-kube"))
	})
	t.Run("argo", func(t *testing.T) {
		e, store := onCluster(t, "parity-argo")
		c.ArgoExecutor(t, store.ns)
		wr := runWorkflow(t, c, store.ns, e.compileTarget(t, "argo"))
		if wr.phase != "Succeeded" {
			t.Fatalf("Workflow %s ended %s: %v", wr.name, wr.phase, wr.failed)
		}
		same(t, store, wr.name, wr.pods)
	})
	t.Run("airflow", func(t *testing.T) {
		e, store := onCluster(t, "parity-airflow")
		r := runAirflow(t, c, store.ns, e, nil, envReadLogs+"=1")
		if r.state != "success" {
			t.Fatalf("DAG run ended %q: %v\n%s", r.state, r.states, r.log)
		}
		if len(r.pods["greet"]) == 0 {
			t.Fatal("greet ran no pod")
		}
		runID := envOf(t, r.pods["greet"][0], plan.EnvRunID)
		same(t, store, runID, r.pods)
		// The operators read their pods' logs from the node.
		for _, line := range []string{"hello, world", "HELLO, WORLD!", "hello, world, from a Command step"} {
			if !strings.Contains(r.output, line) {
				t.Errorf("the operators' output lacks the line %q their pods printed:\n%s", line, r.log)
			}
		}
	})
	t.Run("airflow-exit", func(t *testing.T) {
		e, store := onCluster(t, "parity-airflow-exit")
		r := runAirflow(t, c, store.ns, e, nil, envReadLogs+"=1", envExitStep+"=echo")
		if r.state != "failed" {
			t.Errorf("DAG run ended %q, want failed\n%s", r.state, r.log)
		}
		if got := r.states["echo"]; len(got) != 1 || got[0] != "failed" {
			t.Errorf("echo: task states %v, want [failed]", got)
		}
		if got := r.states["shout"]; len(got) != 1 || got[0] != "success" {
			t.Errorf("shout: task states %v, want [success]", got)
		}
		if !strings.Contains(r.output, "this step fails on purpose") {
			t.Errorf("the operator's output lacks what the failing container printed:\n%s", r.log)
		}
		pods := r.pods["echo"]
		if len(pods) != 1 {
			t.Fatalf("echo ran %d pods, want 1", len(pods))
		}
		var exit int32 = -1
		for _, s := range pods[0].Status.ContainerStatuses {
			if s.Name == plan.ContainerName && s.State.Terminated != nil {
				exit = s.State.Terminated.ExitCode
			}
		}
		if exit != 3 || pods[0].Spec.NodeName != node.Name {
			t.Errorf("echo's pod %s on node %s: container %s exit code %d; want 3 on the real node %s", pods[0].Name, pods[0].Spec.NodeName, plan.ContainerName, exit, node.Name)
		}
	})
}

// stepLog returns what pod's step container printed, as the kubelet serves it
// through the API server, less the lines Argo's executor adds to it for itself
// (which it marks argo=true).
func stepLog(t *testing.T, c *simcluster.Cluster, ns, pod string) string {
	t.Helper()
	data, err := c.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: plan.ContainerName}).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("logs of pod %s: %v", pod, err)
	}
	var out strings.Builder
	for line := range strings.Lines(string(data)) {
		if !strings.Contains(line, " argo=true ") {
			out.WriteString(line)
		}
	}
	return out.String()
}

// s3Object returns what the object key of bucket holds.
func s3Object(t testing.TB, srv *s3test.Server, bucket, key string) []byte {
	t.Helper()
	out, err := srv.Client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("object %s/%s: %v (objects: %v)", bucket, key, err, srv.Keys(t, bucket, ""))
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
