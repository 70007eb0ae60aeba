//go:build !manifold_image

package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// TestResumeLine: a run --kube is resumed on its cluster, in its namespace, as
// its kind of object, with its params; the flags given to resume follow, each
// as it was set.
func TestResumeLine(t *testing.T) {
	rec := &record.Record{ID: "k1", Runtime: "kube", Context: "kind-dev", Namespace: "ml", As: "jobset",
		Params: map[string]string{"name": "you", "epochs": "9"}}
	line, err := resumeLine("hello", rec)
	if err != nil {
		t.Fatal(err)
	}
	// The flags resume was given, as resume's command parses them.
	flow := sdk.NewFlow("hello").Step("s", sdk.Command("true"))
	var got []string
	app := newApp(flow, "hello", &bytes.Buffer{}, &bytes.Buffer{})
	for _, c := range app.Commands {
		if c.Name == "resume" {
			c.Action = func(c *ucli.Context) error {
				got = append(line, setFlags(c)...)
				return nil
			}
		}
	}
	args := []string{"hello", "resume", "--no-build", "--qps", "7", "--set", "s.retry=1", "--set", "s.cpu=1,2", "--pending-grace=2m", "k1"}
	if err := app.RunContext(context.Background(), args); err != nil {
		t.Fatal(err)
	}
	want := []string{"hello", "run", "--run-id", "k1", "--kube", "--context", "kind-dev", "--namespace", "ml", "--as", "jobset",
		"--param", "epochs=9", "--param", "name=you",
		"--pending-grace=2m0s", "--no-build=true", "--qps=7", "--set=s.retry=1", "--set=s.cpu=1,2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resume's command line (-want +got):\n%s", diff)
	}
	// That line parses as run's (in run's order of flags).
	var out, errOut bytes.Buffer
	if code := Run(context.Background(), flow, append(got[:len(got):len(got)], "--help"), &out, &errOut); code != 0 || !strings.Contains(out.String(), "hello run") {
		t.Errorf("run's help with resume's line: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if _, err := resumeLine("hello", &record.Record{ID: "a1", Runtime: "airflow"}); err == nil || !strings.Contains(err.Error(), "retry --target airflow a1") {
		t.Errorf("resumeLine of an Airflow run: %v, want the retry to run instead", err)
	}
}
