package e2e_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/s3test"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// realNodeConfig is a manifold.toml that sends every step to the real nodes.
const realNodeConfig = `base_image = "scratch"

[node_selector]
"` + simcluster.LabelRealNode + `" = "true"

[[tolerations]]
key = "` + simcluster.LabelRealNode + `"
operator = "Exists"
effect = "NoSchedule"
`

// realFlows are the examples run on the real node, with patterns of their run's
// output and what they put in the store.
var realFlows = []struct {
	flow string
	// out are patterns of the run's output; put are artifacts (paths ending
	// in STEP/[INDEX/]NAME.json) and the values they must hold.
	out []string
	put map[string]any
}{
	{"hello",
		[]string{`(?m)greet +\| hello, world$`, `(?m)shout +\| HELLO, WORLD!$`, `(?m)echo +\| hello, world, from a Command step$`},
		map[string]any{"greet/greeting.json": "hello, world", "shout/shout.json": "HELLO, WORLD!"}},
	{"foreach",
		[]string{`(?m)process\[0\] +\| us-east-1: 100 objects$`, `(?m)process\[2\] +\| eu-west-1: 300 objects$`, `(?m)report +\| us-west-2: 200 objects$`},
		map[string]any{"process/1/result.json": "us-west-2: 200 objects", "report/summary.json": "us-east-1: 100 objects\nus-west-2: 200 objects\neu-west-1: 300 objects"}},
}

// TestRealNodeRunKube: hello and foreach run through `run --kube`, as Jobs and
// as JobSets, in real containers: the run builds the flow's own image and pushes
// it to the loopback registry; each Run step's container runs `FLOW step NAME`
// from it; an artifact written by one pod into the shared volume is read by the
// next (hello's greeting; foreach's plan and each item's result, joined by
// report); the steps' output is streamed from their containers' logs; hello's
// Command step runs busybox, whose shell reads $MANIFOLD_PARAM_NAME.
func TestRealNodeRunKube(t *testing.T) {
	c := simcluster.Shared(t)
	node := c.RealNode(t)
	bins := exampletest.Build(t)
	ctx := context.Background()
	reg, err := c.Registry(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.PushBusybox(t, "busybox:1.37")
	for _, ex := range realFlows {
		for _, as := range []string{"job", "jobset"} {
			t.Run(ex.flow+"/"+as, func(t *testing.T) {
				realRun(t, c, node, bins[ex.flow], ex.flow, as, reg.Host, ex.out, ex.put, pvcStore(t, c))
			})
		}
	}
	// foreach's items put their results in S3 from their pods, as Jobs and as
	// JobSets.
	srv := s3test.Start(t)
	for _, as := range []string{"job", "jobset"} {
		t.Run("foreach/"+as+"/s3", func(t *testing.T) {
			ex := realFlows[1]
			realRun(t, c, node, bins[ex.flow], ex.flow, as, reg.Host, ex.out, ex.put, s3Store(t, c, srv, "real-"+as))
		})
	}
}

// TestRealNodeParamIsData: a name param that a shell would run, were it
// written into the script, reaches hello's Command step in a real busybox
// container, through `run --kube --param`, as data: the step prints it as
// given, on one line, and greet puts it as given.
func TestRealNodeParamIsData(t *testing.T) {
	c := simcluster.Shared(t)
	node := c.RealNode(t)
	bins := exampletest.Build(t)
	reg, err := c.Registry(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c.PushBusybox(t, "busybox:1.37")
	name := `x"; echo INJECTED-$(id -un); echo "`
	store := pvcStore(t, c)
	store.args = append(store.args, "--param", "name="+name)
	realRun(t, c, node, bins["hello"], "hello", "job", reg.Host,
		[]string{`(?m)echo +\| ` + regexp.QuoteMeta("hello, "+name+", from a Command step") + `$`},
		map[string]any{"greet/greeting.json": "hello, " + name}, store)
}

// realStore is an artifact store of a run on the real node: the namespace made
// for the run, what the run's manifold.toml and command line add for it, and
// read, which returns the JSON files it holds by path below it.
type realStore struct {
	what   string
	ns     string
	config string
	args   []string
	read   func(t testing.TB) map[string][]byte
}

// pvcStore is a ReadWriteMany claim "art" on a directory of this machine (a
// hostPath volume on the real node).
func pvcStore(t *testing.T, c *simcluster.Cluster) realStore {
	ns, dir := c.Namespace(t), t.TempDir()
	c.HostPathClaim(t, ns, "art", dir)
	return realStore{what: "the volume", ns: ns, args: []string{"--artifacts", "pvc://art"}, read: func(t testing.TB) map[string][]byte {
		got := map[string][]byte{}
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") {
				if data, err := os.ReadFile(path); err == nil {
					rel, _ := filepath.Rel(dir, path)
					got[filepath.ToSlash(rel)] = data
				}
			}
			return nil
		})
		return got
	}}
}

// s3Store is bucket, made on srv, under the prefix flows: its pods reach the
// server from the node's network (host_network) and take their credentials
// from the Secret s3Secret of the namespace, manifold.toml's secrets.
func s3Store(t testing.TB, c *simcluster.Cluster, srv *s3test.Server, bucket string) realStore {
	ns := c.Namespace(t)
	srv.Bucket(t, bucket)
	_, err := c.Client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: s3Secret},
		StringData: map[string]string{"AWS_ACCESS_KEY_ID": s3test.AccessKey, "AWS_SECRET_ACCESS_KEY": s3test.SecretKey, "AWS_REGION": s3test.Region},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return realStore{
		what:   "bucket " + bucket,
		ns:     ns,
		config: "host_network = true\nsecrets = [\"" + s3Secret + "\"]\n",
		args:   []string{"--artifacts", "s3://" + bucket + "/flows", "--artifacts-endpoint", srv.Endpoint},
		read: func(t testing.TB) map[string][]byte {
			got := map[string][]byte{}
			for _, key := range srv.Keys(t, bucket, "flows/") {
				got[strings.TrimPrefix(key, "flows/")] = s3Object(t, srv, bucket, key)
			}
			return got
		},
	}
}

// realRun runs flow (its program bin) with `run --kube --as as` on the real
// node, its image pushed to registry and its artifacts in store, and checks the
// run's output against the patterns out and its artifacts against put.
func realRun(t *testing.T, c *simcluster.Cluster, node *simcluster.Node, bin, flow, as, registry string, out []string, put map[string]any, store realStore) {
	t.Helper()
	ctx := context.Background()
	ns := store.ns
	work, env := exampletest.Workspace(t)
	if err := os.WriteFile(filepath.Join(work, compile.ConfigFile), []byte(store.config+realNodeConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	id := "real-" + as
	cmd := exec.Command(bin, append([]string{"run", "--kube", "--kubeconfig", c.Kubeconfig, "--namespace", ns, "--as", as,
		"--image", registry + "/flows/" + flow + ":v1", "--run-id", id, "--keep"}, store.args...)...)
	cmd.Dir, cmd.Env = work, env
	output, err := cmd.CombinedOutput()
	t.Logf("%s run --kube --as %s:\n%s", flow, as, output)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, want := range append(out, `run `+id+` succeeded`) {
		if !regexp.MustCompile(want).Match(output) {
			t.Errorf("the run's output lacks %s", want)
		}
	}
	// What each step put is in the store, as its container wrote it, under
	// <flow>/<run ID>/.
	got := store.read(t)
	for name, want := range put {
		var v any
		data, ok := got[flow+"/"+id+"/"+name]
		if !ok || json.Unmarshal(data, &v) != nil || v != want {
			t.Errorf("no artifact %s = %q in %s; it holds %s", name, want, store.what, slices.Sorted(maps.Keys(got)))
		}
	}
	// Every pod of the run ran on the real node, to completion.
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + id})
	if err != nil || len(pods.Items) < 3 {
		t.Fatalf("%d pods of the run (%v); want one per step", len(pods.Items), err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != node.Name {
			t.Errorf("pod %s ran on %s, not the real node %s", p.Name, p.Spec.NodeName, node.Name)
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 {
				t.Errorf("pod %s container %s: %+v; want exited 0", p.Name, s.Name, s.State)
			}
		}
	}
}

// TestRealNodeArgo: the foreach example's WorkflowTemplate runs under Argo's real
// workflow-controller with Argo's real executor on the real node: each step's
// pod has Argo's init and wait containers (argoexec from the loopback registry)
// around the step's own, which runs `foreach step NAME` from the flow's image;
// the pods are in the node's network (host_network), where the executor reaches
// the API server on loopback. The artifacts each step put through the shared
// volume are those the job target's run puts (TestRealNodeRunKube).
func TestRealNodeArgo(t *testing.T) {
	c := simcluster.Shared(t)
	node := c.RealNode(t)
	bins := exampletest.Build(t)
	ctx := context.Background()
	reg, err := c.Registry(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ns := c.Namespace(t)
	c.ArgoExecutor(t, ns)
	store := t.TempDir()
	c.HostPathClaim(t, ns, "art", store)
	work, env := exampletest.Workspace(t)
	if err := os.WriteFile(filepath.Join(work, compile.ConfigFile), []byte("host_network = true\n"+realNodeConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := bins["foreach"]
	for _, args := range [][]string{
		{"image", "build", "--tag", reg.Host + "/flows/foreach:argo", "--push"},
		{"compile", "--target", "argo", "--image-from-build", "--artifacts", "pvc://art", "-o", "out"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = work, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("foreach %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	objs := readObjects(t, filepath.Join(work, "out"))
	wr := runWorkflow(t, c, ns, objs)
	if wr.phase != "Succeeded" {
		t.Fatalf("Workflow %s ended %s: %v", wr.name, wr.phase, wr.failed)
	}
	want := map[string]any{
		"plan/regions.json":     nil,
		"process/0/result.json": "us-east-1: 100 objects",
		"process/1/result.json": "us-west-2: 200 objects",
		"process/2/result.json": "eu-west-1: 300 objects",
		"report/summary.json":   "us-east-1: 100 objects\nus-west-2: 200 objects\neu-west-1: 300 objects",
	}
	for name, v := range want {
		path := filepath.Join(store, "foreach", wr.name, filepath.FromSlash(name))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("artifact %s: %v", name, err)
			continue
		}
		var got any
		if err := json.Unmarshal(data, &got); err != nil {
			t.Errorf("artifact %s: %v", name, err)
		} else if v != nil && got != v {
			t.Errorf("artifact %s = %q, want %q", name, got, v)
		}
	}
	for step, pods := range wr.pods {
		for _, p := range pods {
			if p.Spec.NodeName != node.Name || !p.Spec.HostNetwork {
				t.Errorf("step %s pod %s: node %s, hostNetwork %t; want the real node %s, true", step, p.Name, p.Spec.NodeName, p.Spec.HostNetwork, node.Name)
			}
			names := map[string]bool{}
			for _, s := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
				names[s.Name] = true
				if s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 {
					t.Errorf("step %s pod %s container %s: %+v; want exited 0", step, p.Name, s.Name, s.State)
				}
			}
			for _, n := range []string{"init", "wait", plan.ContainerName} {
				if !names[n] {
					t.Errorf("step %s pod %s has no container %s: %v", step, p.Name, n, names)
				}
			}
		}
	}
}

// The values TestRealNodeArgoLiterals gives a step, each with what its
// container must get: what the kubelet makes of the value on every target
// ("$$" is "$", a reference to no variable stays as written).
var (
	literalParam = [2]string{"{{workflow.parameters.p}} {{ p }} $(NOPE)", "{{workflow.parameters.p}} {{ p }} $(NOPE)"}
	literalItems = [][2]string{{"{{item}}", "{{item}}"}, {"{{workflow.name}} $(X) $$(X)", "{{workflow.name}} $(X) $(X)"}}
	literalEnv   = map[string][2]string{
		"V1": {"{{workflow.name}} {{ x }}", "{{workflow.name}} {{ x }}"},
		"V2": {"$(MANIFOLD_PARAM_P)/{{inputs.parameters.item}}/$(NOPE)/$$(X)/${{y}}\n", literalParam[1] + "/{{inputs.parameters.item}}/$(NOPE)/$(X)/${{y}}\n"},
	}
	literalArgs = [][2]string{
		{"{{workflow.name}}", "{{workflow.name}}"},
		{"{{ x }}", "{{ x }}"},
		{"$(NOPE) $$(X) ${{y}} $({{z", "$(NOPE) $(X) ${{y}} $({{z"},
		{"a{{b}}c{{ \t'\"\\ ü ✓", "a{{b}}c{{ \t'\"\\ ü ✓"},
		{"{{=sprig.trunc(1, 'x')}}", "{{=sprig.trunc(1, 'x')}}"},
		{"$(MANIFOLD_BRACES)", "$(MANIFOLD_BRACES)"}, // the carrier's own name stays text
		{"$$(MANIFOLD_BRACES){{$(MANIFOLD_BRACES)", "$(MANIFOLD_BRACES){{$(MANIFOLD_BRACES)"},
		{"{{item}}=$(MANIFOLD_ITEM)", ""}, // the item's own, below
	}
)

// TestRealNodeArgoLiterals: values holding "{{" (which Argo reads as a template
// tag), "$(...)" (which the kubelet expands) and other bytes reach the
// container under Argo's real workflow-controller, executor and a real kubelet
// as on the other targets: a param's default, foreach items, variables and
// command arguments, which a busybox step writes to a host directory that the
// test reads back. The ConfigMap the argo target writes beside the
// WorkflowTemplate is created first, as a user applies it.
func TestRealNodeArgoLiterals(t *testing.T) {
	c := simcluster.Shared(t)
	node := c.RealNode(t)
	c.PushBusybox(t, "busybox:1.37")
	ns := c.Namespace(t)
	c.ArgoExecutor(t, ns)
	store := t.TempDir()
	c.HostPathClaim(t, ns, "out", store)

	// The step writes each value to a file of its item's directory.
	script := `d=/out/$MANIFOLD_INDEX && mkdir -p $d && printf %s "$MANIFOLD_PARAM_P" >$d/param && printf %s "$MANIFOLD_ITEM" >$d/item && ` +
		`printf %s "$V1" >$d/V1 && printf %s "$V2" >$d/V2 && n=0 && for a in "$@"; do printf %s "$a" >$d/arg$n; n=$((n+1)); done`
	command := []string{"sh", "-c", script, "sh"}
	for _, a := range literalArgs {
		command = append(command, a[0])
	}
	var items []string
	for _, it := range literalItems {
		items = append(items, it[0])
	}
	flow := sdk.NewFlow("braces", sdk.Image("busybox:1.37"), sdk.Param("p", literalParam[0]), sdk.HostNetwork(true),
		sdk.NodeSelector(simcluster.LabelRealNode, "true"), sdk.Toleration(simcluster.LabelRealNode, "", "NoSchedule")).
		Step("write", sdk.Command(command...), sdk.Env("V1", literalEnv["V1"][0]), sdk.Env("V2", literalEnv["V2"][0]),
			sdk.Foreach(items...), sdk.Volume("out", "/out"))
	p, errs := compile.Compile(flow, compile.Options{})
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	files, errs := emit.Files(argo.Target{}, p)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		o, err := simcluster.Decode(f.Data)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		objs = append(objs, o...)
	}
	if len(files) != 2 || files[1].Name != "braces"+argo.LiteralsFileSuffix {
		t.Fatalf("the argo target wrote %d files; want the WorkflowTemplate's and the ConfigMap's", len(files))
	}

	wr := runWorkflow(t, c, ns, objs)
	if wr.phase != "Succeeded" {
		t.Fatalf("Workflow %s ended %s: %v", wr.name, wr.phase, wr.failed)
	}
	for i, item := range literalItems {
		want := map[string]string{"param": literalParam[1], "item": item[1]}
		for name, v := range literalEnv {
			want[name] = v[1]
		}
		for j, a := range literalArgs {
			want["arg"+strconv.Itoa(j)] = a[1]
		}
		want["arg"+strconv.Itoa(len(literalArgs)-1)] = "{{item}}=" + item[1]
		for name, v := range want {
			data, err := os.ReadFile(filepath.Join(store, strconv.Itoa(i), name))
			if err != nil {
				t.Errorf("item %d: %v", i, err)
			} else if string(data) != v {
				t.Errorf("item %d: the container got %s = %q, want %q", i, name, data, v)
			}
		}
	}
	if n := len(wr.pods["write"]); n != len(literalItems) {
		t.Errorf("%d pods ran the step, want one per item", n)
	}
	for _, pod := range wr.pods["write"] {
		if pod.Spec.NodeName != node.Name {
			t.Errorf("pod %s ran on %s, not the real node %s", pod.Name, pod.Spec.NodeName, node.Name)
		}
	}
}
