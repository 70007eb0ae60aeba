package image

import (
	"context"
	"debug/buildinfo"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

var _ Compiler = Program{}

// Program is a flow program already built, used as it is: where there is no go
// command, the running program (os.Executable) is the only build of the flow at
// hand. It serves the platforms it was built for with GoBuildFlags, as GoBuild
// would build it (see BuiltFor); up to date with the source or not, nothing can
// tell without the go command.
type Program struct {
	Path string
}

// Compile hands out the program, when it was built for p as GoBuild builds.
func (b Program) Compile(_ context.Context, p v1.Platform, dir string) (string, error) {
	if err := BuiltFor(b.Path, p); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "flow-"+strings.ReplaceAll(p.String(), "/", "-"))
	if err := os.Link(b.Path, out); err != nil {
		if err := copyFile(b.Path, out); err != nil {
			return "", err
		}
	}
	return out, nil
}

// BuiltFor says, as an ErrBuild error, how the program at path was not built
// for p as GoBuild builds (GoBuildFlags), or that it has no Go build info; nil
// when it was. Flags that leave no trace in the build info (-ldflags with
// -trimpath) are not checked.
func BuiltFor(path string, p v1.Platform) error {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return errorf(ErrBuild, "%s has no Go build information (%v): build the image where the go command is", path, err)
	}
	if why := builtFor(bi, p); why != "" {
		return errorf(ErrBuild, "%s %s: build it with `%s`, or build the image where the go command is", path, why, GoBuildCommand(p))
	}
	return nil
}
