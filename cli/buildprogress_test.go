//go:build !manifold_image

package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestCompileProgressPlain: off a terminal, the progress of compiling the flow
// program is plain lines: one when it starts, saying what a first build costs;
// one every progressEvery at most while packages compile, however many; one at
// the end with the count and the time.
func TestCompileProgressPlain(t *testing.T) {
	var b strings.Builder
	now := time.Unix(1000, 0)
	p := &compileProgress{w: &b, program: "hello", now: func() time.Time { return now }}
	p.begin(v1.Platform{OS: "linux", Architecture: "amd64"})
	for i := 1; i <= 700; i++ {
		now = now.Add(100 * time.Millisecond) // 70 s in all
		p.update(i, 700)
	}
	p.end()
	want := []string{
		"compiling hello for linux/amd64 (the first build compiles each of the program's packages, a minute or more; later builds take seconds)",
		"compiling hello for linux/amd64: 100 of 700 packages, 10s",
		"compiling hello for linux/amd64: 200 of 700 packages, 20s",
		"compiling hello for linux/amd64: 300 of 700 packages, 30s",
		"compiling hello for linux/amd64: 400 of 700 packages, 40s",
		"compiling hello for linux/amd64: 500 of 700 packages, 50s",
		"compiling hello for linux/amd64: 600 of 700 packages, 1m",
		"compiled 700 packages for linux/amd64 in 1m10s",
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	if strings.ContainsAny(b.String(), "\r\x1b") {
		t.Errorf("plain output holds terminal controls: %q", b.String())
	}
}

// TestCompileProgressNothing: a build that compiles nothing (an unchanged
// program) prints the first line only.
func TestCompileProgressNothing(t *testing.T) {
	var b strings.Builder
	p := &compileProgress{w: &b, program: "hello", now: time.Now}
	p.begin(v1.Platform{OS: "linux", Architecture: "arm64"})
	p.end()
	if got := strings.Count(b.String(), "\n"); got != 1 || !strings.HasPrefix(b.String(), "compiling hello for linux/arm64 (") {
		t.Errorf("output %q: want the first line alone", b.String())
	}
}

// TestCompileProgressLive: on a terminal, one line rewritten in place, ended
// by the last.
func TestCompileProgressLive(t *testing.T) {
	var b strings.Builder
	now := time.Unix(1000, 0)
	p := &compileProgress{w: &b, program: "hello", live: true, now: func() time.Time { return now }}
	p.begin(v1.Platform{OS: "linux", Architecture: "amd64"})
	for i := 1; i <= 3; i++ {
		now = now.Add(time.Second)
		p.update(i, 3)
	}
	p.end()
	want := "compiling hello for linux/amd64 (the first build compiles each of the program's packages, a minute or more; later builds take seconds)\n" +
		"\r\x1b[Kcompiling hello for linux/amd64: 1 of 3 packages, 1s" +
		"\r\x1b[Kcompiling hello for linux/amd64: 2 of 3 packages, 2s" +
		"\r\x1b[Kcompiling hello for linux/amd64: 3 of 3 packages, 3s" +
		"\r\x1b[Kcompiled 3 packages for linux/amd64 in 3s\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
