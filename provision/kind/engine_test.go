package kind

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeEngine puts a program named binary, running script (sh), alone on PATH.
// It records each command line it gets in the file calls beside it.
func fakeEngine(t *testing.T, binary, script string) (calls string) {
	t.Helper()
	dir := t.TempDir()
	calls = filepath.Join(dir, "calls")
	body := "#!/bin/sh\necho \"$@\" >> " + calls + "\n" + script
	if err := os.WriteFile(filepath.Join(dir, binary), []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	t.Setenv(engineEnv, "")
	return calls
}

// noEngine leaves no program at all on PATH.
func noEngine(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(engineEnv, "")
}

// A docker whose daemon is not running, as the docker command says it.
const dockerWithoutDaemon = `case "$1" in
-v) echo "Docker version 28.2.2, build e6534b4" ;;
*) echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2; exit 1 ;;
esac
`

// A docker that runs, with no kind cluster and no images.
const dockerEmpty = `case "$1" in
-v) echo "Docker version 28.2.2, build e6534b4" ;;
ps) ;;
image) echo "Error response from daemon: No such image: $3" >&2; exit 1 ;;
*) echo "unexpected: $*" >&2; exit 3 ;;
esac
`

// TestUpNoEngine: without docker, podman or nerdctl, Up says so in one line,
// and what to do.
func TestUpNoEngine(t *testing.T) {
	noEngine(t)
	var log bytes.Buffer
	err := Up(context.Background(), Options{Simulate: []Group{{"trn1.32xlarge", 2}}, Log: &log})
	want := "no container engine found: kind runs its nodes as containers of docker, podman or nerdctl; install one, start it, and try again"
	if err == nil || err.Error() != want {
		t.Fatalf("Up without an engine: %v\nwant: %s", err, want)
	}
	if log.Len() != 0 {
		t.Errorf("Up without an engine wrote %q", log.String())
	}
	for _, f := range []func() error{
		func() error { return Down(context.Background(), "", nil) },
		func() error { return Load(context.Background(), LoadOptions{Image: "registry.example.com/ml/flow:v1"}) },
	} {
		if err := f(); err == nil || err.Error() != want {
			t.Errorf("without an engine: %v\nwant: %s", err, want)
		}
	}
}

// TestEngineChosen: KIND_EXPERIMENTAL_PROVIDER names the engine, as for kind;
// one that is not installed, or not known, is an error that says what to do.
func TestEngineChosen(t *testing.T) {
	noEngine(t)
	t.Setenv(engineEnv, "podman")
	err := Up(context.Background(), Options{})
	if err == nil || err.Error() != "KIND_EXPERIMENTAL_PROVIDER=podman, but podman is not installed (not in PATH); install it, or unset KIND_EXPERIMENTAL_PROVIDER to use another engine" {
		t.Errorf("podman chosen, not installed: %v", err)
	}
	t.Setenv(engineEnv, "rkt")
	err = Up(context.Background(), Options{})
	if err == nil || !strings.Contains(err.Error(), `KIND_EXPERIMENTAL_PROVIDER="rkt": choose docker, podman, nerdctl, finch or nerdctl.lima, or unset it`) {
		t.Errorf("unknown engine chosen: %v", err)
	}
}

// TestDetectEngine: a podman that also answers as docker is podman, as kind
// sees it; a Docker is docker.
func TestDetectEngine(t *testing.T) {
	fakeEngine(t, "docker", `echo "podman version 5.0.0"`)
	if _, err := detectEngine(context.Background()); err != errNoEngine {
		t.Errorf("a docker command that is podman's, and no podman: %v, want no engine", err)
	}
	fakeEngine(t, "docker", dockerEmpty)
	e, err := detectEngine(context.Background())
	if err != nil || e.binary != "docker" {
		t.Errorf("a Docker: %v, %v", e.binary, err)
	}
}

// TestUpEngineNotRunning: an engine whose daemon is down fails Up with the
// engine's own message, on one line, before anything is created.
func TestUpEngineNotRunning(t *testing.T) {
	calls := fakeEngine(t, "docker", dockerWithoutDaemon)
	err := Up(context.Background(), Options{Simulate: []Group{{"trn1.32xlarge", 1}}})
	want := "list the kind clusters of docker: docker ps failed: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
	if err == nil || err.Error() != want {
		t.Fatalf("Up with the daemon down: %v\nwant: %s", err, want)
	}
	data, _ := os.ReadFile(calls)
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if !strings.HasPrefix(line, "-v") && !strings.HasPrefix(line, "ps ") {
			t.Errorf("Up ran docker %s with the daemon down", line)
		}
	}
}

func TestDownNoCluster(t *testing.T) {
	fakeEngine(t, "docker", dockerEmpty)
	var log bytes.Buffer
	if err := Down(context.Background(), "dev", &log); err != nil {
		t.Fatal(err)
	}
	if got := log.String(); got != "there is no kind cluster dev; nothing to delete\n" {
		t.Errorf("Down of no cluster wrote %q", got)
	}
}

// TestResolve: which arguments of kind load are archives, which are image
// references, and which are mistakes.
func TestResolve(t *testing.T) {
	dir := t.TempDir()
	archive := filepath.Join(dir, "flow.tar")
	if err := os.WriteFile(archive, []byte("not really a tarball"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	if err := os.WriteFile("oci-layout", []byte{}, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		arg  string
		want Source
	}{
		{archive, Source{Archive: archive}},
		{"flow.tar", Source{Archive: "flow.tar"}},
		{"oci-layout", Source{Archive: "oci-layout"}}, // a file, whatever its name
		{"registry.example.com/ml/neuron-train:v1", Source{Ref: "registry.example.com/ml/neuron-train:v1"}},
		{"localhost:5000/neuron-train", Source{Ref: "localhost:5000/neuron-train"}},
		{"busybox", Source{Ref: "busybox"}},
		{"manifold.local/hello:sha256-0123abcd", Source{Ref: "manifold.local/hello:sha256-0123abcd"}},
		{"busybox@sha256:" + strings.Repeat("ab", 32), Source{Ref: "busybox@sha256:" + strings.Repeat("ab", 32)}},
	} {
		got, err := Resolve(tc.arg)
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%q) = %+v, %v; want %+v", tc.arg, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ arg, want string }{
		{"", "no image given: name an image archive (docker save -o flow.tar IMAGE) or an image reference"},
		{"missing.tar", "image archive missing.tar: no such file; write one with docker save -o missing.tar IMAGE, or give an image reference"},
		{"./images/flow", "image archive ./images/flow: no such file; write one with docker save -o ./images/flow IMAGE, or give an image reference"},
		{"/nowhere/flow.tar.gz", "image archive /nowhere/flow.tar.gz: no such file;"},
		{dir, dir + " is a directory; give an image archive (a tarball of docker save, or of an OCI image layout) or an image reference"},
		{"Registry.example.com/ML/flow:v1", `"Registry.example.com/ML/flow:v1" is neither a file nor an image reference (such as registry.example.com/ml/flow:v1); check the spelling: references are lowercase`},
		{"flow:v1 extra", `"flow:v1 extra" is neither a file nor an image reference`},
	} {
		got, err := Resolve(tc.arg)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Resolve(%q) = %+v, %v; want the error %q", tc.arg, got, err, tc.want)
		}
	}
}

// TestLoadMissingFile: a missing archive is reported before any engine is
// looked for (there is none here).
func TestLoadMissingFile(t *testing.T) {
	noEngine(t)
	err := Load(context.Background(), LoadOptions{Image: filepath.Join(t.TempDir(), "flow.tar")})
	if err == nil || !strings.Contains(err.Error(), "flow.tar: no such file; write one with docker save -o") {
		t.Errorf("Load of a missing archive: %v", err)
	}
}

// TestLoadNoCluster: with a running engine and no cluster of that name, Load
// says how to make it, and saves no image.
func TestLoadNoCluster(t *testing.T) {
	calls := fakeEngine(t, "docker", dockerEmpty)
	err := Load(context.Background(), LoadOptions{Name: "dev", Image: "registry.example.com/ml/flow:v1"})
	if err == nil || err.Error() != "there is no kind cluster dev; make it with kind up --name dev" {
		t.Errorf("Load into no cluster: %v", err)
	}
	data, _ := os.ReadFile(calls)
	if strings.Contains(string(data), "save") {
		t.Errorf("Load saved an image for no cluster: %s", data)
	}
	if !strings.Contains(string(data), "label=io.x-k8s.kind.cluster=dev") {
		t.Errorf("Load did not look for cluster dev's nodes: %s", data)
	}
}

// TestSaveMissingImage: an image reference the engine does not hold is an
// error that says to build or pull it.
func TestSaveMissingImage(t *testing.T) {
	calls := fakeEngine(t, "docker", dockerEmpty)
	err := save(context.Background(), "docker", "registry.example.com/ml/flow:v1", filepath.Join(t.TempDir(), "image.tar"))
	want := "image registry.example.com/ml/flow:v1 is not among the images of docker; build or pull it first (docker pull registry.example.com/ml/flow:v1), or give an image archive"
	if err == nil || err.Error() != want {
		t.Errorf("save of a missing image: %v\nwant: %s", err, want)
	}
	data, _ := os.ReadFile(calls)
	if !strings.Contains(string(data), "image inspect registry.example.com/ml/flow:v1") {
		t.Errorf("save did not ask docker about the image: %s", data)
	}
}

// TestSave: an image the engine holds is written with `docker save -o`.
func TestSave(t *testing.T) {
	fakeEngine(t, "docker", `case "$1" in
image) exit 0 ;;
save) echo archive > "$3" ;;
esac
`)
	out := filepath.Join(t.TempDir(), "image.tar")
	if err := save(context.Background(), "docker", "registry.example.com/ml/flow:v1", out); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(out); err != nil || string(data) != "archive\n" {
		t.Errorf("the archive: %q, %v", data, err)
	}
}
