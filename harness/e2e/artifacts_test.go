package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/harness/podenv"
	"github.com/manifoldflow/manifold/harness/s3test"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
)

// TestArtifactsAcrossPods runs the foreach example, with an S3 artifact store,
// on the simulated cluster under every way it reaches one: run --kube as Jobs
// and as JobSets (the runtime names the run), an Argo Workflow (the run is the
// workflow's name) and an Airflow DAG run (the run is its run_id). kwok runs no
// containers, so each step's pods as the cluster ran them are read back, and the
// step's program runs on this machine with exactly each pod's environment (plus
// the credentials a pod's service account would give it), against a real S3
// server on loopback: plan, then the three items at once, then report. The
// report step reads what every item put, under <flow>/<run id>/ of the store,
// the run ID being what the target gave the pods.
func TestArtifactsAcrossPods(t *testing.T) {
	c := simcluster.Shared(t)
	srv := s3test.Start(t)
	var base *example
	for _, e := range examples(t) {
		if e.Name == "foreach" {
			base = e
		}
	}
	if base == nil {
		t.Fatal("no foreach example")
	}
	for _, target := range []string{"run-kube-job", "run-kube-jobset", "argo", "airflow"} {
		t.Run(target, func(t *testing.T) {
			bucket := "e2e-" + target
			srv.Bucket(t, bucket)
			e := *base
			e.args = []string{"--artifacts", "s3://" + bucket + "/flows", "--artifacts-endpoint", srv.Endpoint}
			ns := c.Namespace(t)
			var pods map[string][]corev1.Pod
			var runID string
			switch target {
			case "run-kube-job", "run-kube-jobset":
				runID = "e2e-" + strings.TrimPrefix(target, "run-kube-")
				pods = runKube(t, c, &e, ns, strings.TrimPrefix(target, "run-kube-"), runID)
			case "argo":
				wr := runWorkflow(t, c, ns, e.compileTarget(t, "argo"))
				if wr.phase != "Succeeded" {
					t.Fatalf("Workflow %s ended %s: %v", wr.name, wr.phase, wr.failed)
				}
				pods, runID = wr.pods, wr.name
			case "airflow":
				r := runAirflow(t, c, ns, &e, nil)
				if r.state != "success" {
					t.Fatalf("DAG run ended %q: %v\n%s", r.state, r.states, r.log)
				}
				pods = r.pods
				runID = envOf(t, pods["plan"][0], plan.EnvRunID)
				if !strings.HasPrefix(runID, "manual__") {
					t.Errorf("the DAG run's pods have %s=%q, want the run's id", plan.EnvRunID, runID)
				}
			}
			// Every pod of the run has the same run ID.
			for step, ps := range pods {
				for _, p := range ps {
					if got := envOf(t, p, plan.EnvRunID); got != runID {
						t.Errorf("step %s pod %s: %s=%q, want %q", step, p.Name, plan.EnvRunID, got, runID)
					}
				}
			}
			if len(pods["plan"]) != 1 || len(pods["process"]) != 3 || len(pods["report"]) != 1 {
				t.Fatalf("pods: plan %d, process %d, report %d; want 1, 3, 1", len(pods["plan"]), len(pods["process"]), len(pods["report"]))
			}
			for _, step := range []string{"plan", "process", "report"} {
				runPods(t, c, e.bin, step, pods[step])
			}
			want := "us-east-1: 100 objects\nus-west-2: 200 objects\neu-west-1: 300 objects"
			if got := s3String(t, srv, bucket, "flows/foreach/"+runID+"/report/summary.json"); got != want {
				t.Errorf("summary %q, want %q", got, want)
			}
			if got := s3String(t, srv, bucket, "flows/foreach/"+runID+"/process/2/result.json"); got != "eu-west-1: 300 objects" {
				t.Errorf("item 2's result %q", got)
			}
		})
	}
}

// runKube runs e with run --kube --keep as kind (job or jobset) and returns its
// pods by step.
func runKube(t *testing.T, c *simcluster.Cluster, e *example, ns, kind, runID string) map[string][]corev1.Pod {
	t.Helper()
	cmd := e.command(t, "run", "--kube", "--no-build", "--kubeconfig", c.Kubeconfig, "--namespace", ns, "--as", kind, "--run-id", runID, "--keep")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("run --kube: %v\n%s", err, out)
	}
	list, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + runID})
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string][]corev1.Pod{}
	for _, p := range list.Items {
		if !exitedZero(p) {
			continue // a pod of an attempt that did not succeed
		}
		step := p.Labels[plan.LabelStep]
		pods[step] = append(pods[step], p)
	}
	return pods
}

// exitedZero reports whether pod p succeeded, or its containers all exited 0:
// run --kube goes on from a step once they have, while the kubelet may still
// be marking the pod Succeeded.
func exitedZero(p corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded {
		return true
	}
	if p.Status.Phase == corev1.PodFailed || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Terminated == nil || c.State.Terminated.ExitCode != 0 {
			return false
		}
	}
	return true
}

// mainContainer returns pod p's step container.
func mainContainer(t *testing.T, p corev1.Pod) corev1.Container {
	t.Helper()
	i := slices.IndexFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == plan.ContainerName })
	if i < 0 {
		t.Fatalf("pod %s has no container %s", p.Name, plan.ContainerName)
	}
	return p.Spec.Containers[i]
}

// stepEnv returns the environment the kubelet gives pod p's step container, less
// what Argo's executor adds for itself (ARGO_*).
func stepEnv(t *testing.T, p corev1.Pod) []string {
	t.Helper()
	c := mainContainer(t, p)
	c.Env = slices.DeleteFunc(slices.Clone(c.Env), func(e corev1.EnvVar) bool { return strings.HasPrefix(e.Name, "ARGO_") })
	env, err := podenv.Resolve(p.ObjectMeta, c, nil)
	if err != nil {
		t.Fatalf("pod %s: %v", p.Name, err)
	}
	return env
}

func envOf(t *testing.T, p corev1.Pod, name string) string {
	t.Helper()
	v, _ := podenv.Lookup(stepEnv(t, p), name)
	return v
}

// runPods runs step's program, `<bin> step NAME` as each pod's command says,
// once per pod and all at once, each with its pod's environment.
func runPods(t *testing.T, c *simcluster.Cluster, bin, step string, pods []corev1.Pod) {
	t.Helper()
	dir := t.TempDir()
	items := podItems(t, c, pods, filepath.Join(dir, "items"))
	creds := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"AWS_ACCESS_KEY_ID=" + s3test.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3test.SecretKey, "AWS_REGION=" + s3test.Region,
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none"),
	}
	var wg sync.WaitGroup
	errs := make([]string, len(pods))
	for i, p := range pods {
		cmdline := mainContainer(t, p).Command
		k := slices.Index(cmdline, "step")
		if k < 0 || k+1 >= len(cmdline) || cmdline[k+1] != step {
			t.Fatalf("pod %s runs %q, not step %s", p.Name, cmdline, step)
		}
		env := stepEnv(t, p)
		for k, kv := range env {
			// The file of the item, as the pod's ConfigMap volume holds it.
			if v, ok := strings.CutPrefix(kv, plan.EnvItemFile+"="+emit.ItemsPath); ok && items != "" {
				env[k] = plan.EnvItemFile + "=" + items + v
			}
		}
		wg.Go(func() {
			cmd := exec.Command(bin, "step", step)
			cmd.Dir = t.TempDir() // no run directory here: the store is S3
			cmd.Env = append(creds, env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = p.Name + ": " + err.Error() + "\n" + string(out)
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Fatalf("step %s: %s", step, e)
		}
	}
}

// podItems writes, under dir, the items of the ConfigMap that pods mount at
// emit.ItemsPath (the items of a fan-out run as one Indexed Job), each as the
// file of its key, and returns dir; "" when they mount none.
func podItems(t *testing.T, c *simcluster.Cluster, pods []corev1.Pod, dir string) string {
	t.Helper()
	for _, p := range pods {
		for _, v := range p.Spec.Volumes {
			if v.Name != emit.ItemsVolume || v.ConfigMap == nil {
				continue
			}
			cm, err := c.Client.CoreV1().ConfigMaps(p.Namespace).Get(context.Background(), v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for key, value := range cm.Data {
				if err := os.WriteFile(filepath.Join(dir, key), []byte(value), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			return dir
		}
	}
	return ""
}

// s3String reads the JSON string the object key of bucket holds.
func s3String(t *testing.T, srv *s3test.Server, bucket, key string) string {
	t.Helper()
	var v string
	if err := json.Unmarshal(s3Object(t, srv, bucket, key), &v); err != nil {
		t.Fatalf("object %s: %v", key, err)
	}
	return v
}
