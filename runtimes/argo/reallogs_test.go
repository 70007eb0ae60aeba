package argo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/runtimes/argo"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// TestRealLongLogLine: a Workflow's pod on a real node prints a line of 5 MiB
// (past the 4 MiB a log line could be) and lines after it. trigger --wait
// follows its log to the end, recording the long line in pieces that join into
// it and the lines after it; logs --target argo prints it whole. (Argo's
// executor adds a line of its own to the log, argo=true, left out here.)
func TestRealLongLogLine(t *testing.T) {
	const size = 5 << 20
	flow := sdk.NewFlow("argo-longline", sdk.Image("busybox:1.37"), sdk.CPU("10m")).
		Step("bar", sdk.Command("sh", "-c", fmt.Sprintf(`echo before; head -c %d /dev/zero | tr '\0' '#'; echo; echo after-1; echo after-2`, size)))
	f := newCLI(t, flow)
	f.c.RealNode(t)
	f.c.PushBusybox(t, "busybox:1.37")
	f.c.ArgoExecutor(t, f.ns)
	if code, _, _ := f.run("deploy", "--target", "argo"); code != 0 {
		t.Fatalf("deploy: exit %d", code)
	}
	// Argo's executor reaches the API server from the real node's network.
	res := f.c.Dynamic.Resource(argo.WorkflowTemplateGVR).Namespace(f.ns)
	u, err := res.Get(context.Background(), "argo-longline", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	simcluster.OnRealNode(u.Object["spec"].(map[string]any))
	if _, err := res.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, _ := f.run("trigger", "--target", "argo", "--wait")
	if code != 0 {
		t.Fatalf("trigger --wait: exit %d", code)
	}
	name := firstLine(out)
	want := []string{"before", strings.Repeat("#", size), "after-1", "after-2"}
	data, err := os.ReadFile(filepath.Join(record.StateDir(filepath.Join(record.DefaultRoot, name), "bar", -1), record.StdoutLog))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		piece, ok := strings.CutPrefix(line, display.Prefixed("bar", 0, ""))
		if !ok {
			t.Fatalf("a line of the record without its label: %.80q", line)
		}
		if strings.Contains(piece, "argo=true") {
			continue
		}
		if rest, cont := strings.CutPrefix(piece, display.Continues); cont && len(got) > 0 {
			got[len(got)-1] += rest
		} else {
			got = append(got, piece)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the record holds %d lines (%d bytes) of bar's log, want %d lines (%d bytes)", len(got), len(strings.Join(got, "\n")), len(want), len(strings.Join(want, "\n")))
	}
	code, logs, _ := f.run("logs", "--target", "argo", name, "bar")
	var kept []string
	for _, line := range strings.SplitAfter(logs, "\n") {
		if !strings.Contains(line, "argo=true") {
			kept = append(kept, line)
		}
	}
	logs = strings.Join(kept, "")
	var printed []string
	for _, w := range want {
		printed = append(printed, display.Prefixed("bar", 3, w))
	}
	if code != 0 || logs != strings.Join(printed, "\n")+"\n" {
		t.Errorf("logs --target argo: exit %d, %d bytes; want the log whole, %d bytes", code, len(logs), len(strings.Join(printed, "\n"))+1)
	}
}
