// Package golden_test checks every example × every target against the files checked
// in under golden/<example>/ (and golden/<example>.<variant>/ for the variants,
// compiled with flags). Run `go test ./golden -update` to rewrite them, then
// read the diff before committing it.
package golden_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/emit/jobset"
	"github.com/manifoldflow/manifold/harness/argolint"
	"github.com/manifoldflow/manifold/harness/argopod"
	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/kubevalidate"
	"github.com/manifoldflow/manifold/plan"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output")

func TestMain(m *testing.M) {
	code := m.Run()
	exampletest.Cleanup()
	kubevalidate.Cleanup()
	argolint.Cleanup()
	os.Exit(code)
}

// variants are golden directories of examples compiled with flags or a
// manifold.toml: the artifact stores, a Kueue queue and values holding "{{",
// which no example sets itself (its own directory shows that a flow without them emits what it always
// did).
var variants = map[string]struct {
	example string
	args    []string
	config  string
}{
	"neuron-train.kueue":    {example: "neuron-train", config: `queue = "training"`},
	"hello.s3":              {example: "hello", args: []string{"--artifacts", "s3://ml-artifacts/flows"}},
	"foreach.volume":        {example: "foreach", args: []string{"--artifacts", "pvc://shared-artifacts"}},
	"neuron-train.s3-minio": {example: "neuron-train", args: []string{"--artifacts", "s3://ml-artifacts", "--artifacts-endpoint", "http://minio.storage:9000"}},
	// "{{" in a param's default and in every step's variables: Argo would take
	// it for a template tag, so the argo target carries it through its ConfigMap.
	"hello.braces": {example: "hello", args: []string{"--param", "name={{ user }} $(HOME) $$(X)"},
		config: "[env]\nNOTE = \"{{workflow.name}} $(MANIFOLD_PARAM_NAME) ${{\"\n"},
}

// goldens returns the names of the golden directories, in order: one per
// example, and one per variant.
func goldens() []string {
	names := exampletest.Names()
	for name := range variants {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// source returns the example, extra flags and manifold.toml of golden
// directory name.
func source(name string) (string, []string, string) {
	if v, ok := variants[name]; ok {
		return v.example, v.args, v.config
	}
	return name, nil, ""
}

// compileAll runs `<example> compile --target all -o DIR [args]` beside a
// manifold.toml holding config (none when empty) and returns DIR's files.
func compileAll(t *testing.T, bin, config string, args ...string) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(bin, append([]string{"compile", "--target", "all", "-o", dir}, args...)...)
	cmd.Dir = t.TempDir()
	if config != "" {
		if err := os.WriteFile(filepath.Join(cmd.Dir, "manifold.toml"), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s compile: %v\n%s", filepath.Base(bin), err, out)
	}
	return readDir(t, dir)
}

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = data
	}
	return files
}

func TestGolden(t *testing.T) {
	bins := exampletest.Build(t)
	if len(bins) == 0 {
		t.Fatal("no examples were built")
	}
	for _, name := range goldens() {
		t.Run(name, func(t *testing.T) {
			example, args, config := source(name)
			got := compileAll(t, bins[example], config, args...)
			if again := compileAll(t, bins[example], config, args...); !cmp.Equal(got, again) {
				t.Fatalf("two compiles gave different output (-first +second):\n%s", cmp.Diff(got, again))
			}
			dir := filepath.Join("testdata", name)
			if *update {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for file, data := range got {
					if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			want := readDir(t, dir)
			if len(want) == 0 {
				t.Fatalf("no golden files in %s: run go test ./golden -update and review them", dir)
			}
			for file := range union(want, got) {
				if diff := cmp.Diff(string(want[file]), string(got[file])); diff != "" {
					t.Errorf("%s/%s differs from the golden file (-want +got):\n%s", name, file, diff)
				}
			}
		})
	}
}

// TestGoldenDirsMatchExamples fails on golden files left behind by a removed
// example or variant.
func TestGoldenDirsMatchExamples(t *testing.T) {
	exampletest.Build(t)
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		dirs = append(dirs, e.Name())
	}
	sort.Strings(dirs)
	if diff := cmp.Diff(goldens(), dirs); diff != "" {
		t.Errorf("golden directories do not match the examples and variants (-examples +golden):\n%s", diff)
	}
}

// kubeFiles are the golden files of the Kubernetes-shaped targets, the
// ResourceClaimTemplates the argo and airflow targets put beside their own, and
// the argo target's ConfigMap.
var kubeFiles = []string{"*.job.yaml", "*.jobset.yaml", "*" + emit.ClaimsFileSuffix, "*" + argo.LiteralsFileSuffix}

func kubeGoldens(t *testing.T) []string {
	t.Helper()
	var paths []string
	for _, pattern := range kubeFiles {
		found, err := filepath.Glob(filepath.Join("testdata", "*", pattern))
		if err != nil || len(found) == 0 {
			t.Fatalf("no %s golden files: %v", pattern, err)
		}
		paths = append(paths, found...)
	}
	return paths
}

// TestGoldenKubernetesDecodeStrictly decodes every document of every job and jobset
// golden file into its API type, refusing unknown fields, so a misspelt field cannot
// hide in a golden file.
func TestGoldenKubernetesDecodeStrictly(t *testing.T) {
	for _, path := range kubeGoldens(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range documents(data) {
			var meta struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s document %d: %v", path, i, err)
			}
			var obj any
			switch meta.APIVersion + " " + meta.Kind {
			case "batch/v1 Job":
				obj = &batchv1.Job{}
			case "batch/v1 CronJob":
				obj = &batchv1.CronJob{}
			case "v1 Service":
				obj = &corev1.Service{}
			case "jobset.x-k8s.io/v1alpha2 JobSet":
				obj = &jobsetv1.JobSet{}
			case emit.ResourceClaimTemplateAPIVersion + " ResourceClaimTemplate":
				obj = &resourcev1.ResourceClaimTemplate{}
			case "v1 ConfigMap":
				obj = &corev1.ConfigMap{}
			default:
				t.Fatalf("%s document %d: unexpected %s %s", path, i, meta.APIVersion, meta.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Errorf("%s document %d: %v", path, i, err)
			}
			for _, noise := range []string{"creationTimestamp", "status:", "resources: {}", ": null"} {
				if bytes.Contains(doc, []byte(noise)) {
					t.Errorf("%s document %d carries empty noise %q", path, i, noise)
				}
			}
		}
	}
}

// TestGoldenAcceptedByAPIServerValidation puts every Kubernetes golden file through
// the API server's own decoding, defaulting and create validation, and JobSets
// through their CRD's schema and JobSet's webhooks (tools/kubevalidate).
func TestGoldenAcceptedByAPIServerValidation(t *testing.T) {
	if out, ok := kubevalidate.Run(t, kubeGoldens(t)...); !ok {
		t.Errorf("the API server's validation refuses golden output:\n%s", out)
	}
}

// TestGoldenAcceptedByArgoLint puts every Argo golden file through Argo's own
// validator, with strict decoding (tools/argolint).
func TestGoldenAcceptedByArgoLint(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*", "*.argo.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no argo golden files: %v", err)
	}
	if out, ok := argolint.Run(t, paths...); !ok {
		t.Errorf("Argo's validator refuses golden output:\n%s", out)
	}
}

// TestGoldenArgoPodsAreJobPods: for every example, every Job of the job target (one
// per step, or per item of a foreach step) has the pod that Argo's controller would
// build for the same step and item from the argo target's WorkflowTemplate
// (internal/argopod, which leaves out what Argo adds for its executor), or, for a
// multi-node step, the pod in the JobSet its resource template creates (less the
// mechanisms' differences, see multiNodePods). Empty and absent lists compare
// equal, since both serialize to nothing. Beside the argo target's ConfigMap, the
// containers are compared as the kubelet fills them in (argopod.Expanded).
func TestGoldenArgoPodsAreJobPods(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*", "*.argo.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no argo golden files: %v", err)
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var wt wfv1.WorkflowTemplate
		if err := yaml.UnmarshalStrict(documents(data)[0], &wt); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		literals := literalsBeside(t, path)
		jobPath := strings.TrimSuffix(path, ".argo.yaml") + ".job.yaml"
		jobData, err := os.ReadFile(jobPath)
		if err != nil {
			t.Fatal(err)
		}
		jobs := documents(jobData)
		for i, doc := range jobs {
			var meta struct{ Kind string }
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s document %d: %v", jobPath, i, err)
			}
			if meta.Kind == "Service" || meta.Kind == "ResourceClaimTemplate" {
				continue // TestGoldenKubernetesDecodeStrictly checks them; the pods name the templates
			}
			var j batchv1.Job
			if err := yaml.UnmarshalStrict(doc, &j); err != nil {
				t.Fatalf("%s document %d: %v", jobPath, i, err)
			}
			step := j.Spec.Template.Labels[plan.LabelStep]
			item := 0
			if index, ok := j.Labels[plan.LabelIndex]; ok {
				if item, err = strconv.Atoi(index); err != nil {
					t.Fatalf("%s: job %s index %q", jobPath, j.Name, index)
				}
			}
			want := j.Spec.Template
			var got corev1.PodTemplateSpec
			if j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion {
				want, got = multiNodePods(t, &wt, path, step, item, &j)
			} else if got, err = argopod.Resolve(&wt, argo.TaskName(step), item); err != nil {
				t.Fatalf("%s: step %s item %d: %v", path, step, item, err)
			}
			want = *want.DeepCopy()
			if j.Spec.CompletionMode == nil {
				// Argo creates a single-node step's pod bare, so Kueue admits the
				// pod by the labels it admits the Job by on the job target.
				for _, k := range []string{plan.LabelQueueName, plan.LabelPriorityClass} {
					if v, ok := j.Labels[k]; ok {
						if want.Labels == nil {
							want.Labels = map[string]string{}
						}
						want.Labels[k] = v
					}
				}
			}
			argopod.RunIDs(t, fmt.Sprintf("%s: step %s item %d", path, step, item), &want, &got)
			if literals != nil {
				// Values holding "{{" are written otherwise on Argo; the
				// kubelet gives the container the same bytes.
				if want.Spec.Containers[0], err = argopod.Expanded(want.Spec.Containers[0]); err == nil {
					got.Spec.Containers[0], err = argopod.Expanded(got.Spec.Containers[0], literals)
				}
				if err != nil {
					t.Fatalf("%s: step %s item %d: %v", path, step, item, err)
				}
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), argopod.Untraced); diff != "" {
				t.Errorf("%s: step %s item %d: Argo's pod differs from Job %s's (-job +argo):\n%s", path, step, item, j.Name, diff)
			}
		}
		if len(jobs) == 0 {
			t.Errorf("%s holds no Jobs", jobPath)
		}
	}
}

// literalsBeside returns the ConfigMap of the argo golden file path's flow,
// nil when it has none.
func literalsBeside(t *testing.T, path string) *corev1.ConfigMap {
	t.Helper()
	data, err := os.ReadFile(strings.TrimSuffix(path, ".argo.yaml") + argo.LiteralsFileSuffix)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(documents(data)[0], &cm); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &cm
}

// multiNodePods returns the pod of multi-node Job j of the job target, and the pod
// of the same step and item inside the JobSet that the argo target's resource
// template creates (its default mode), each less what its mechanism sets: the
// Job's subdomain (its Service's name), and the address of rank 0 in the
// rendezvous variables, which names the Job's Service or the JobSet's. The
// JobSet's address is checked to be its own rank 0's.
func multiNodePods(t *testing.T, wt *wfv1.WorkflowTemplate, path, step string, item int, j *batchv1.Job) (want, got corev1.PodTemplateSpec) {
	t.Helper()
	const uid = "0f3c9a7e-5b1d-4e2a-9c8f-7a6b5c4d3e2f"
	m, err := argopod.Manifest(wt, argo.TaskName(step), 0, uid)
	if err != nil {
		t.Fatalf("%s: step %s: %v", path, step, err)
	}
	var js jobsetv1.JobSet
	if err := yaml.UnmarshalStrict([]byte(m), &js); err != nil {
		t.Fatalf("%s: step %s: the manifest is not a JobSet: %v", path, step, err)
	}
	if item >= len(js.Spec.ReplicatedJobs) {
		t.Fatalf("%s: step %s: no replicated job for item %d", path, step, item)
	}
	rj := js.Spec.ReplicatedJobs[item]
	want, got = *j.Spec.Template.DeepCopy(), *rj.Template.Spec.Template.DeepCopy()
	want.Spec.Subdomain = ""
	addrs := map[string]string{
		plan.EnvMasterAddr: jobset.MasterAddr(js.Name, rj.Name), plan.EnvPETMasterAddr: jobset.MasterAddr(js.Name, rj.Name),
		plan.EnvNeuronRootComm: jobset.MasterAddr(js.Name, rj.Name) + ":" + strconv.Itoa(plan.NeuronRootCommPort),
	}
	for _, pod := range []*corev1.PodTemplateSpec{&want, &got} {
		for i, e := range pod.Spec.Containers[0].Env {
			if addr, ok := addrs[e.Name]; ok {
				if pod == &got && e.Value != addr {
					t.Errorf("%s: step %s item %d: %s is %q, not rank 0 of JobSet %s (%q)", path, step, item, e.Name, e.Value, js.Name, addr)
				}
				pod.Spec.Containers[0].Env[i].Value = ""
			}
		}
	}
	return want, got
}

// documents splits a YAML stream into its non-empty documents.
func documents(data []byte) [][]byte {
	var out [][]byte
	for _, doc := range strings.Split(string(data), "\n---\n") {
		doc = strings.TrimPrefix(doc, "---\n")
		var body []string
		for _, line := range strings.Split(doc, "\n") {
			if !strings.HasPrefix(line, "#") {
				body = append(body, line)
			}
		}
		if s := strings.TrimSpace(strings.Join(body, "\n")); s != "" && s != "---" {
			out = append(out, []byte(s+"\n"))
		}
	}
	return out
}

func union(a, b map[string][]byte) map[string]bool {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return keys
}
