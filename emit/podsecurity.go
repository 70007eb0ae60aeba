package emit

import (
	"strings"
	"sync"

	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/manifoldflow/manifold/plan"
)

// PodSecurity is the strictest Pod Security Standards level that admits a
// step's pod, as the API server's own checks (k8s.io/pod-security-admission,
// the latest version of each level) judge the pod Pod builds for it.
type PodSecurity struct {
	// Level is restricted, baseline or privileged.
	Level string
	// Forbidden says what the next stricter level forbids in the pod, in the
	// checks' own words ("runAsNonRoot != true"); empty at restricted.
	Forbidden []string
	// Todo says which of the step's options needs the level, or which makes the
	// pod restricted; empty at restricted.
	Todo string
}

// The Pod Security Standards levels.
const (
	LevelRestricted = string(psaapi.LevelRestricted)
	LevelBaseline   = string(psaapi.LevelBaseline)
	LevelPrivileged = string(psaapi.LevelPrivileged)
)

var evaluator = sync.OnceValues(func() (policy.Evaluator, error) {
	return policy.NewEvaluator(policy.DefaultChecks(), nil)
})

// StepPodSecurity returns the strictest level that admits step s's pod.
func StepPodSecurity(f *plan.Flow, s *plan.Step) PodSecurity {
	pod := Pod(f, s, PodOptions{})
	e, err := evaluator()
	if err != nil {
		// The upstream checks are fixed at build time; they do not fail to load.
		panic("emit: Pod Security checks: " + err.Error())
	}
	for _, level := range []psaapi.Level{psaapi.LevelBaseline, psaapi.LevelRestricted} {
		var forbidden []string
		for _, r := range e.EvaluatePod(psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()}, &pod.ObjectMeta, &pod.Spec) {
			if !r.Allowed {
				forbidden = append(forbidden, r.ForbiddenReason+" ("+r.ForbiddenDetail+")")
			}
		}
		if len(forbidden) == 0 {
			continue
		}
		ps := PodSecurity{Level: LevelPrivileged, Forbidden: forbidden}
		if level == psaapi.LevelRestricted {
			ps.Level = LevelBaseline
		}
		ps.Todo = podSecurityTodo(s, ps.Level)
		return ps
	}
	return PodSecurity{Level: LevelRestricted}
}

// podSecurityTodo names the options of s that keep its pod at level, and what
// would make it restricted.
func podSecurityTodo(s *plan.Step, level string) string {
	var needs []string
	if s.EFAWiring != nil {
		needs = append(needs, "sdk.EFAWiring adds the IPC_LOCK capability")
	}
	if s.HostNetwork {
		needs = append(needs, "sdk.HostNetwork puts it in the node's network")
	}
	if level == LevelPrivileged && len(needs) > 0 {
		return strings.Join(needs, ", ") + ": run it in a namespace at the privileged level"
	}
	switch {
	case s.RunAsUser != nil && *s.RunAsUser == 0:
		return "sdk.RunAsUser(0) runs it as root: a non-zero user makes it restricted"
	case s.RunAsNonRoot != nil && !*s.RunAsNonRoot:
		return "sdk.RunAsNonRoot(false) lets it run as root: sdk.RunAsUser(UID) with a non-zero UID makes it restricted"
	case s.RunAsNonRoot == nil:
		return "its image may run as root: sdk.RunAsUser(UID) with a non-zero UID, or sdk.RunAsNonRoot(true) when the image runs as non-root, makes it restricted"
	}
	return "run it in a namespace at the " + level + " level"
}
