package emit_test

import (
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/plan"
)

// TestStepPodSecurity: the upstream Pod Security checks judge the pod Pod
// builds. A step whose user is known not to be root meets restricted; one on an
// image that may run as root, or that says it runs as root, meets baseline and
// is told which option makes it restricted; EFA wiring's IPC_LOCK and the host's
// network need privileged, and say which option needs it.
func TestStepPodSecurity(t *testing.T) {
	wiring := &plan.Wiring{Arch: plan.ArchX86, Capabilities: []string{"IPC_LOCK"}}
	for _, tc := range []struct {
		name      string
		step      plan.Step
		level     string
		forbidden string // held by one of Forbidden
		todo      string // held by Todo
	}{
		{"non-root", plan.Step{RunAsNonRoot: ptr(true)}, emit.LevelRestricted, "", ""},
		{"a user", plan.Step{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(65532))}, emit.LevelRestricted, "", ""},
		{"image's user", plan.Step{}, emit.LevelBaseline, "runAsNonRoot != true", "sdk.RunAsUser(UID)"},
		{"root", plan.Step{RunAsUser: ptr(int64(0))}, emit.LevelBaseline, "runAsUser=0", "sdk.RunAsUser(0) runs it as root"},
		{"root allowed", plan.Step{RunAsNonRoot: ptr(false)}, emit.LevelBaseline, "runAsNonRoot != true", "sdk.RunAsNonRoot(false)"},
		{"EFA wiring", plan.Step{RunAsNonRoot: ptr(true), EFAWiring: wiring}, emit.LevelPrivileged, "IPC_LOCK", "sdk.EFAWiring"},
		{"host network", plan.Step{RunAsNonRoot: ptr(true), HostNetwork: true}, emit.LevelPrivileged, "host namespaces", "sdk.HostNetwork"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.step
			s.Name, s.Image, s.Command = "s", "example.com/s:v1", []string{"true"}
			f := &plan.Flow{Name: "f", Steps: []plan.Step{s}}
			got := emit.StepPodSecurity(f, &f.Steps[0])
			if got.Level != tc.level {
				t.Errorf("level %s (%v); want %s", got.Level, got.Forbidden, tc.level)
			}
			if !strings.Contains(strings.Join(got.Forbidden, "; "), tc.forbidden) || (tc.forbidden == "") != (len(got.Forbidden) == 0) {
				t.Errorf("forbidden %q; want one holding %q", got.Forbidden, tc.forbidden)
			}
			if !strings.Contains(got.Todo, tc.todo) || (tc.todo == "") != (got.Todo == "") {
				t.Errorf("todo %q; want one holding %q", got.Todo, tc.todo)
			}
		})
	}
}
