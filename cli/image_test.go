package cli_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/image/built"
)

// TestImageBuildHello runs `hello image build` as a user would: the hello example,
// built as a program, in a directory of its own (a workspace of this module), finds
// its own main package, builds it onto a base in a real registry and pushes it;
// compile --image-from-build then puts the digest in every Run step. A tarball
// of the same source holds the same image.
func TestImageBuildHello(t *testing.T) {
	root := exampletest.Root()
	bin := filepath.Join(t.TempDir(), "hello")
	build := exec.Command("go", "build", "-o", bin, "./examples/hello")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building examples/hello: %v\n%s", err, out)
	}

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	base, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := base.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	if base, err = mutate.ConfigFile(base, cf); err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(mustTag(t, host+"/base:v1"), base); err != nil {
		t.Fatal(err)
	}

	// A directory outside the module, where the go command finds it through a
	// workspace, as in a checkout of a flow that uses Manifold.
	work, env := exampletest.Workspace(t)
	hello := func(args ...string) (string, string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = work, env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	lastLine := func(s string) string {
		lines := strings.Split(strings.TrimSpace(s), "\n")
		return lines[len(lines)-1]
	}

	stdout, stderr, err := hello("image", "build", "--base", host+"/base:v1", "--tag", host+"/flows/hello:v1", "--push")
	if err != nil {
		t.Fatalf("image build: %v\n%s%s", err, stdout, stderr)
	}
	t.Logf("image build --push:\n%s", stdout)
	// Off a terminal, the compiling's progress is plain lines on stderr, the
	// first saying what a first build costs.
	if !strings.HasPrefix(stderr, "compiling hello for linux/amd64 (the first build compiles each of the program's packages, a minute or more; later builds take seconds)\n") ||
		strings.ContainsAny(stderr, "\r\x1b") {
		t.Errorf("image build's stderr %q: want plain progress lines, the first saying what a first build costs", stderr)
	}
	ref := lastLine(stdout)
	if !strings.HasPrefix(ref, host+"/flows/hello@sha256:") {
		t.Fatalf("image build printed %q last, want %s/flows/hello@sha256:…", ref, host)
	}
	if !strings.Contains(stdout, "building hello (github.com/manifoldflow/manifold/examples/hello) for linux/amd64") {
		t.Errorf("image build did not say which package it built:\n%s", stdout)
	}
	data, err := os.ReadFile(filepath.Join(work, built.File))
	if err != nil {
		t.Fatal(err)
	}
	var rec built.Record
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Flow != "hello" || rec.Reference != ref || rec.Output != "registry" || rec.Base != host+"/base:v1" ||
		rec.Entrypoint != "/usr/local/bin/hello" || strings.Join(rec.Platforms, ",") != "linux/amd64" || "@"+rec.Digest != ref[strings.Index(ref, "@"):] {
		t.Errorf("record %s", data)
	}

	// The registry has it, by digest and by tag.
	digestRef, err := name.NewDigest(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(digestRef)
	if err != nil {
		t.Fatalf("pulling %s: %v", ref, err)
	}
	cf, err = img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != "/usr/local/bin/hello" {
		t.Errorf("entrypoint %q, want /usr/local/bin/hello", cf.Config.Entrypoint)
	}
	if d, err := remote.Head(mustTag(t, host+"/flows/hello:v1")); err != nil || d.Digest.String() != rec.Digest {
		t.Errorf("tag v1 is %v (%v), want %s", d, err, rec.Digest)
	}

	// compile --image-from-build: the Run steps greet and shout run it; the
	// Command step echo keeps busybox.
	stdout, stderr, err = hello("compile", "--image-from-build", "--target", "job")
	if err != nil {
		t.Fatalf("compile --image-from-build: %v\n%s", err, stderr)
	}
	if n := strings.Count(stdout, "image: "+ref+"\n"); n != 2 {
		t.Errorf("%d steps run %s, want greet and shout:\n%s", n, ref, stdout)
	}
	if n := strings.Count(stdout, "image: busybox:1.37\n"); n != 1 {
		t.Errorf("%d steps run busybox:1.37, want echo", n)
	}

	// The same source, as a tarball: the same image, named by a tag made from its
	// digest, in the repository of the flow's own image.
	stdout, stderr, err = hello("image", "build", "--base", host+"/base:v1", "--tarball", "out/hello.tar")
	if err != nil {
		t.Fatalf("image build --tarball: %v\n%s%s", err, stdout, stderr)
	}
	want := "registry.example.com/manifold/hello:sha256-" + strings.TrimPrefix(rec.Digest, "sha256:")
	if got := lastLine(stdout); got != want {
		t.Errorf("image build --tarball printed %q last, want %q (the pushed image's digest)", got, want)
	}
	if _, err := os.Stat(filepath.Join(work, "out", "hello.tar")); err != nil {
		t.Error(err)
	}
	if data, err := os.ReadFile(filepath.Join(work, built.File)); err != nil || !bytes.Contains(data, []byte(`"reference": "`+want+`"`)) {
		t.Errorf("record after --tarball: %s (%v)", data, err)
	}
}

func mustTag(t *testing.T, ref string) name.Tag {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}
