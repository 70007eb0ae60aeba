package cli

import (
	"bytes"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProgramVersion: a flow program in its own module reports its module's
// version, the manifold it requires (and what replaces it), and the VCS
// state Go recorded.
func TestProgramVersion(t *testing.T) {
	modified := true
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		want Version
	}{{
		name: "another module",
		info: &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "example.com/hello", Version: "v1.2.3"},
			Deps: []*debug.Module{
				{Path: "github.com/urfave/cli/v2", Version: "v2.27.7"},
				{Path: manifoldModule, Version: "v0.4.0"},
			},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
		want: Version{Program: "hello", Module: "example.com/hello", ModuleVersion: "v1.2.3", Manifold: "v0.4.0",
			Go: "go1.99.1", Revision: "abc123", Time: "2026-12-01T10:00:00Z", Modified: &modified},
	}, {
		name: "replaced manifold",
		info: &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "example.com/hello", Version: "(devel)"},
			Deps: []*debug.Module{{Path: manifoldModule, Version: "v0.4.0", Replace: &debug.Module{Path: "../manifold"}}}},
		want: Version{Program: "hello", Module: "example.com/hello", ModuleVersion: "(devel)", Manifold: "v0.4.0 => ../manifold", Go: "go1.99.1"},
	}, {
		name: "manifold itself",
		info: &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: manifoldModule, Version: "v0.5.0-rc.1"}},
		want: Version{Program: "hello", Module: manifoldModule, ModuleVersion: "v0.5.0-rc.1", Manifold: "v0.5.0-rc.1", Go: "go1.99.1"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(f func() (*debug.BuildInfo, bool)) { readBuildInfo = f }(readBuildInfo)
			readBuildInfo = func() (*debug.BuildInfo, bool) { return tc.info, true }
			got := programVersion("hello")
			tc.want.Platform = got.Platform
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("programVersion (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVersionText: the text form names every field, aligned.
func TestVersionText(t *testing.T) {
	modified := false
	var b bytes.Buffer
	v := Version{Program: "hello", Module: "example.com/hello", ModuleVersion: "v1.2.3", Manifold: "v0.4.0", Go: "go1.99.1", Platform: "linux/arm64",
		Revision: "abc123", Time: "2026-12-01T10:00:00Z", Modified: &modified}
	if err := v.write(&b); err != nil {
		t.Fatal(err)
	}
	want := "hello v1.2.3\n" +
		"  module    example.com/hello v1.2.3\n" +
		"  manifold  v0.4.0\n" +
		"  go        go1.99.1 linux/arm64\n" +
		"  revision  abc123\n" +
		"  time      2026-12-01T10:00:00Z\n" +
		"  modified  false\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("version text (-want +got):\n%s", diff)
	}
}
