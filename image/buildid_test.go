package image

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoBuildID: the build ID of a program go build linked is the one `go tool
// buildid` reads; a file that is not a Go program has none.
func TestGoBuildID(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "tiny")
	build := exec.Command("go", append(append([]string{"build"}, GoBuildFlags...), "-o", prog, "./testdata/tiny")...)
	build.Env = append(os.Environ(), linuxEnv(DefaultPlatform)...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	want, err := exec.Command("go", "tool", "buildid", prog).Output()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(prog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if id, ok := goBuildID(f); !ok || id != strings.TrimSpace(string(want)) {
		t.Errorf("build ID %q (%v), go tool buildid says %q", id, ok, want)
	}

	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := os.Open(script)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if id, ok := goBuildID(s); ok {
		t.Errorf("a script has build ID %q", id)
	}
}
