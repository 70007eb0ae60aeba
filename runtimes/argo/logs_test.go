package argo

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/manifoldflow/manifold/internal/kubeclient"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/cluster"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// cutFirstLog is an API server whose pods' logs are two lines, "NAME 0" and
// "NAME 1", but the first stream of pod cut's, which is cut after its first
// line (the connection lost).
type cutFirstLog struct {
	cut  string
	mu   sync.Mutex
	reqs map[string]int
}

func (f *cutFirstLog) RoundTrip(req *http.Request) (*http.Response, error) {
	name, sub, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/api/v1/namespaces/ns/pods/"), "/")
	if sub != "log" {
		return nil, fmt.Errorf("fake: unexpected request %s", req.URL)
	}
	f.mu.Lock()
	f.reqs[name]++
	first := f.reqs[name] == 1
	f.mu.Unlock()
	var body io.Reader = strings.NewReader(name + " 0\n" + name + " 1\n")
	if name == f.cut && first {
		body = io.MultiReader(strings.NewReader(name+" 0\n"), cutBody{})
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/plain"}}, Body: io.NopCloser(body), Request: req}, nil
}

// cutBody fails as a lost connection does.
type cutBody struct{}

func (cutBody) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// TestFollowLogsPerPod: when the stream of one step's pod is cut, the
// follower opens it again, and goes on following the other pods' logs: every
// line of both steps is kept in the record, once, and nothing is said of the
// cluster's logs.
func TestFollowLogsPerPod(t *testing.T) {
	fake := &cutFirstLog{cut: "wf-a", reqs: map[string]int{}}
	cs, err := kubeclient.NewForConfig(&rest.Config{Host: "http://api.invalid", Transport: fake})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	flow := &plan.Flow{Name: "x", Steps: []plan.Step{{Name: "a"}, {Name: "b", After: []string{"a"}}}}
	f := &follower{Run: dag.New(flow, "wf", dir), c: &Client{conn: &cluster.Conn{Client: cs}}, byKey: map[string]*unit{}, lastPod: map[string]*corev1.Pod{}}
	var out bytes.Buffer
	f.Disp = display.New(display.Options{Stdout: &out})
	f.logs = cluster.NewLogFollower(f.Disp, dir, func(ns string) cluster.PodLogs { return cs.CoreV1().Pods(ns) })
	w := &wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "wf", Namespace: "ns"}}
	pod := func(step string, state corev1.ContainerState) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "wf-" + step, Namespace: "ns", UID: types.UID("uid-" + step)},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: plan.ContainerName, State: state}}}}
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	ended := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}
	var units []*unit
	for i := range flow.Steps {
		u := &unit{Unit: dag.NewUnit(&flow.Steps[i], -1)}
		f.Add(u.Unit)
		units = append(units, u)
	}
	see := func(u *unit, phase wfv1.NodePhase, state corev1.ContainerState) {
		top := wfv1.NodeStatus{ID: "node-" + u.Step.Name, Type: wfv1.NodeTypePod, TemplateName: u.Step.Name, Phase: phase}
		f.node(u, w, top, []wfv1.NodeStatus{top}, map[string]*corev1.Pod{top.ID: pod(u.Step.Name, state)})
	}
	see(units[0], wfv1.NodeRunning, running)
	// Pod b's log is followed once pod a's stream was cut and opened again.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		fake.mu.Lock()
		n := fake.reqs["wf-a"]
		fake.mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("pod wf-a's log was not asked for again after the cut:\n%s", out.String())
			break
		}
	}
	see(units[1], wfv1.NodeRunning, running)
	see(units[0], wfv1.NodeSucceeded, ended)
	see(units[1], wfv1.NodeSucceeded, ended)
	f.logs.Stop()
	for _, step := range []string{"a", "b"} {
		data, err := os.ReadFile(filepath.Join(record.StateDir(dir, step, -1), record.StdoutLog))
		if err != nil {
			t.Fatal(err)
		}
		name := "wf-" + step
		if want := display.Prefixed(step, 0, name+" 0") + "\n" + display.Prefixed(step, 0, name+" 1") + "\n"; string(data) != want {
			t.Errorf("%s's stdout.log holds %q, want %q", step, data, want)
		}
	}
	if strings.Contains(out.String(), "does not serve") || strings.Contains(out.String(), "cannot be read") {
		t.Errorf("the cut was reported:\n%s", out.String())
	}
}
