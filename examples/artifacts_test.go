package examples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/podenv"
	"github.com/manifoldflow/manifold/harness/s3test"
	"github.com/manifoldflow/manifold/plan"
)

// podOf is one pod of a compiled flow: its step, foreach index (or -1) and
// container.
type podOf struct {
	step  string
	index string
	c     corev1.Container
	spec  corev1.PodSpec
}

// jobPods runs `<example> compile --target job args...` and returns its Jobs' pods
// in the order they are applied.
func jobPods(t *testing.T, example string, args ...string) []podOf {
	t.Helper()
	cmd := exec.Command(exampletest.Build(t)[example], append([]string{"compile", "--target", "job"}, args...)...)
	cmd.Dir = t.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s compile: %v\n%s", example, err, stderr.String())
	}
	var pods []podOf
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var j batchv1.Job
		if err := yaml.Unmarshal([]byte(doc), &j); err != nil {
			t.Fatal(err)
		}
		if j.Kind != "Job" {
			continue
		}
		p := j.Spec.Template
		pods = append(pods, podOf{step: p.Labels[plan.LabelStep], index: j.Labels[plan.LabelIndex], c: p.Spec.Containers[0], spec: p.Spec})
	}
	return pods
}

// podEnv returns the container's environment as the kubelet gives it, after
// replace has rewritten the values it names (a volume's mount path, here a
// directory of this machine).
func podEnv(t *testing.T, c corev1.Container, replace map[string]string) []string {
	t.Helper()
	env, err := podenv.Resolve(metav1.ObjectMeta{}, c, replace)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// runStep runs a Run step's container command, with this example's program as
// the entrypoint, under env and nothing of this machine but PATH and HOME (and
// extra: the credentials a pod's service account would give it). It returns the
// output and whether the step succeeded.
func runStep(t *testing.T, example string, p podOf, env, extra []string) (string, bool) {
	t.Helper()
	argv := p.c.Command
	if len(argv) != 3 || argv[1] != "step" || argv[2] != p.step {
		t.Fatalf("step %s: command %q is not a Run step's", p.step, argv)
	}
	cmd := exec.Command(exampletest.Build(t)[example], argv[1:]...)
	cmd.Dir = t.TempDir() // the container's working directory holds no run
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	cmd.Env = append(cmd.Env, extra...)
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

// awsEnv is what a pod's service account gives it on EKS (through IRSA or Pod
// Identity): credentials and a region, here the test server's.
func awsEnv(t *testing.T) []string {
	dir := t.TempDir()
	return []string{
		"AWS_ACCESS_KEY_ID=" + s3test.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3test.SecretKey, "AWS_REGION=" + s3test.Region,
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none"),
	}
}

func getObject(t *testing.T, srv *s3test.Server, bucket, key string) string {
	t.Helper()
	out, err := srv.Client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("object %s: %v", key, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	var v string
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("object %s: %v\n%s", key, err, data)
	}
	return v
}

// TestHelloStepsShareS3: the hello flow compiled for the job target with an S3
// store on an S3-compatible server; each Run step runs as its pod would (its
// command, the emitted environment) against a real S3 server on loopback, and
// shout reads what greet put in an earlier process. A step of another run, or
// one whose artifact was never put, fails naming what it looked for.
func TestHelloStepsShareS3(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "ml-artifacts")
	pods := jobPods(t, "hello", "--param", "name=manifold", "--run-id", "run-1",
		"--artifacts", "s3://ml-artifacts/flows", "--artifacts-endpoint", srv.Endpoint)
	if got := []string{pods[0].step, pods[1].step, pods[2].step}; !cmp.Equal(got, []string{"greet", "shout", "echo"}) {
		t.Fatalf("steps %v", got)
	}
	creds := awsEnv(t)
	for _, p := range pods[:2] {
		env := podEnv(t, p.c, nil)
		for _, want := range []string{"MANIFOLD_RUN_ID=run-1", "MANIFOLD_S3_ENDPOINT=" + srv.Endpoint,
			"MANIFOLD_ARTIFACTS=s3://ml-artifacts/flows/hello/run-1/" + p.step} {
			if !slices.Contains(env, want) {
				t.Errorf("step %s: the pod's environment lacks %s: %q", p.step, want, env)
			}
		}
		if out, ok := runStep(t, "hello", p, env, creds); !ok {
			t.Fatalf("step %s failed:\n%s", p.step, out)
		}
	}
	if got := getObject(t, srv, "ml-artifacts", "flows/hello/run-1/greet/greeting.json"); got != "hello, manifold" {
		t.Errorf("greeting = %q", got)
	}
	if got := getObject(t, srv, "ml-artifacts", "flows/hello/run-1/shout/shout.json"); got != "HELLO, MANIFOLD!" {
		t.Errorf("shout = %q", got)
	}
	// The Command step's MANIFOLD_ARTIFACTS names its place in the store.
	if env := podEnv(t, pods[2].c, nil); !slices.Contains(env, "MANIFOLD_ARTIFACTS=s3://ml-artifacts/flows/hello/run-1/echo") {
		t.Errorf("echo's environment: %q", env)
	}

	// shout of another run, where greet never ran.
	other := jobPods(t, "hello", "--run-id", "run-2", "--artifacts", "s3://ml-artifacts/flows", "--artifacts-endpoint", srv.Endpoint)
	out, ok := runStep(t, "hello", other[1], podEnv(t, other[1].c, nil), creds)
	want := `error: step shout: step "greet" has no artifact "greeting" (looked for s3://ml-artifacts/flows/hello/run-2/greet/greeting.json)`
	if ok || !strings.Contains(out, want) {
		t.Errorf("shout without greet: succeeded %v:\n%s\nwant %s", ok, out, want)
	}
	// Without the run's ID, the step says what is missing.
	env := slices.DeleteFunc(podEnv(t, pods[1].c, nil), func(kv string) bool { return strings.HasPrefix(kv, "MANIFOLD_RUN_ID=") })
	if out, ok := runStep(t, "hello", pods[1], env, creds); ok || !strings.Contains(out, "MANIFOLD_RUN_ID") {
		t.Errorf("shout without MANIFOLD_RUN_ID: succeeded %v:\n%s", ok, out)
	}
}

// TestForeachItemsShareS3: the foreach flow's items run at once, each a process
// of its own as each is a pod, and the step after them reads every item's
// artifact. The run ID is the job target's default, as compiled output applied
// by hand has.
func TestForeachItemsShareS3(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "ml-artifacts")
	pods := jobPods(t, "foreach", "--artifacts", "s3://ml-artifacts", "--artifacts-endpoint", srv.Endpoint)
	creds := awsEnv(t)
	run := func(ps ...podOf) {
		t.Helper()
		var wg sync.WaitGroup
		outs := make([]string, len(ps))
		oks := make([]bool, len(ps))
		for i, p := range ps {
			wg.Go(func() { outs[i], oks[i] = runStep(t, "foreach", p, podEnv(t, p.c, nil), creds) })
		}
		wg.Wait()
		for i, p := range ps {
			if !oks[i] {
				t.Fatalf("step %s item %q failed:\n%s", p.step, p.index, outs[i])
			}
		}
	}
	var items []podOf
	for _, p := range pods {
		if p.step == "process" {
			items = append(items, p)
		}
	}
	if len(items) != 3 || pods[0].step != "plan" || pods[len(pods)-1].step != "report" {
		t.Fatalf("pods %v", pods)
	}
	run(pods[0])
	run(items...)
	run(pods[len(pods)-1])
	want := "us-east-1: 100 objects\nus-west-2: 200 objects\neu-west-1: 300 objects"
	if got := getObject(t, srv, "ml-artifacts", "foreach/default/report/summary.json"); got != want {
		t.Errorf("summary (-want +got):\n%s", cmp.Diff(want, got))
	}
	keys := srv.Keys(t, "ml-artifacts", "")
	wantKeys := []string{"foreach/default/plan/regions.json", "foreach/default/process/0/result.json",
		"foreach/default/process/1/result.json", "foreach/default/process/2/result.json", "foreach/default/report/summary.json"}
	if diff := cmp.Diff(wantKeys, keys); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

// TestForeachItemsShareVolume: the same with a ReadWriteMany volume: every pod
// mounts the claim at /manifold/artifacts, here a directory of this machine, and
// the artifacts are files laid out as in a local run directory.
func TestForeachItemsShareVolume(t *testing.T) {
	pods := jobPods(t, "foreach", "--artifacts", "pvc://shared-artifacts", "--run-id", "nightly-1")
	mount := t.TempDir()
	for _, p := range pods {
		if !slices.ContainsFunc(p.spec.Volumes, func(v corev1.Volume) bool {
			return v.Name == plan.ArtifactVolumeName && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "shared-artifacts"
		}) || !slices.ContainsFunc(p.c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == plan.ArtifactVolumeName && m.MountPath == plan.ArtifactVolumePath
		}) {
			t.Fatalf("step %s does not mount the claim at %s: %v %v", p.step, plan.ArtifactVolumePath, p.spec.Volumes, p.c.VolumeMounts)
		}
	}
	// The mount path is the store; here it is mount.
	replace := map[string]string{plan.EnvArtifactStore: mount}
	for _, p := range pods {
		if out, ok := runStep(t, "foreach", p, podEnv(t, p.c, replace), nil); !ok {
			t.Fatalf("step %s item %q failed:\n%s", p.step, p.index, out)
		}
	}
	runDir := filepath.Join(mount, "foreach", "nightly-1")
	if got := artifact[string](t, runDir, "process", "1", "result"); got != "us-west-2: 200 objects" {
		t.Errorf("item 1's result = %q", got)
	}
	if got := artifact[string](t, runDir, "report", "summary"); !strings.HasPrefix(got, "us-east-1: 100 objects\n") {
		t.Errorf("summary = %q", got)
	}
	if env := podEnv(t, pods[2].c, replace); !slices.Contains(env, fmt.Sprintf("MANIFOLD_ARTIFACTS=%s/process/1", runDir)) {
		t.Errorf("item 1's MANIFOLD_ARTIFACTS: %q", env)
	}
	// Without the volume mounted, a step says so rather than write where no
	// other pod looks.
	p := pods[0]
	if out, ok := runStep(t, "foreach", p, podEnv(t, p.c, map[string]string{plan.EnvArtifactStore: filepath.Join(mount, "absent")}), nil); ok || !strings.Contains(out, "is mounted there") {
		t.Errorf("a step without its volume: succeeded %v:\n%s", ok, out)
	}
}
