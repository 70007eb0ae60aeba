package kind

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"sigs.k8s.io/kind/pkg/cluster"
)

// engineEnv chooses the container engine, as it does for the kind command.
const engineEnv = "KIND_EXPERIMENTAL_PROVIDER"

// engine is the container engine that runs kind's nodes.
type engine struct {
	// binary runs the engine's command line: docker, podman, nerdctl, finch or
	// nerdctl.lima.
	binary string
	// provider makes kind's Provider use the engine.
	provider cluster.ProviderOption
}

// engines are what kind detects, in its order, each by the first words of its
// `-v` output (a docker command that is podman's says "podman version").
var engines = []struct {
	binary, version string
	provider        func(binary string) cluster.ProviderOption
}{
	{"docker", "Docker version", func(string) cluster.ProviderOption { return cluster.ProviderWithDocker() }},
	{"nerdctl", "nerdctl version", cluster.ProviderWithNerdctl},
	{"finch", "finch version", cluster.ProviderWithNerdctl},
	{"podman", "podman version", func(string) cluster.ProviderOption { return cluster.ProviderWithPodman() }},
}

// errNoEngine says what to do when no container engine is found.
var errNoEngine = fmt.Errorf("no container engine found: kind runs its nodes as containers of docker, podman or nerdctl; install one, start it, and try again")

// detectEngine finds the container engine as kind does: the one $KIND_EXPERIMENTAL_PROVIDER
// names, else the first of docker, nerdctl (or finch) and podman that answers.
func detectEngine(ctx context.Context) (engine, error) {
	if name := os.Getenv(engineEnv); name != "" {
		for _, e := range engines {
			if e.binary == name || name == "nerdctl.lima" && e.binary == "nerdctl" {
				if _, err := exec.LookPath(name); err != nil {
					return engine{}, fmt.Errorf("%s=%s, but %s is not installed (not in PATH); install it, or unset %s to use another engine", engineEnv, name, name, engineEnv)
				}
				return engine{binary: name, provider: e.provider(name)}, nil
			}
		}
		return engine{}, fmt.Errorf("%s=%q: choose docker, podman, nerdctl, finch or nerdctl.lima, or unset it", engineEnv, name)
	}
	for _, e := range engines {
		out, err := exec.CommandContext(ctx, e.binary, "-v").Output()
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(out)), e.version) {
			return engine{binary: e.binary, provider: e.provider(e.binary)}, nil
		}
	}
	return engine{}, errNoEngine
}

// newProvider finds the container engine as kind does and returns kind's Provider
// for it, logging to log.
func newProvider(ctx context.Context, log *logger) (*cluster.Provider, engine, error) {
	eng, err := detectEngine(ctx)
	if err != nil {
		return nil, engine{}, err
	}
	return cluster.NewProvider(cluster.ProviderWithLogger(log), eng.provider), eng, nil
}
