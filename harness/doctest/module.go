package doctest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Text returns the block's lines as a file's text, each line ending in a newline.
func (b Block) Text() string {
	if len(b.Lines) == 0 {
		return ""
	}
	return strings.Join(b.Lines, "\n") + "\n"
}

// ModuleCommand returns what a page's new module runs for cmd, one of its
// commands, where module (the path of the module under test, found in root's
// go.mod) is not published: a go get of the module, or of one of its packages,
// is preceded by `go mod edit -replace module=root`, so that it resolves to the
// repository at root; and go mod tidy runs with -e, since the test-only
// dependencies of the module's own dependencies, which tidy reads and no build
// needs, are not in the module cache of a test that has no network. Any other
// command is returned as it is.
func ModuleCommand(cmd, module, root string) string {
	fields := strings.Fields(cmd)
	switch {
	case len(fields) >= 3 && fields[0] == "go" && fields[1] == "get" && getsModule(fields[2:], module):
		return "go mod edit -replace " + shellQuote(module+"="+root) + " && " + cmd
	case len(fields) >= 3 && fields[0] == "go" && fields[1] == "mod" && fields[2] == "tidy":
		return "go mod tidy -e" + strings.TrimPrefix(strings.TrimSpace(cmd), strings.Join(fields[:3], " "))
	}
	return cmd
}

// getsModule tells whether the arguments of a go get name module or one of its
// packages, at any version.
func getsModule(args []string, module string) bool {
	for _, a := range args {
		path, _, _ := strings.Cut(a, "@")
		if path == module || strings.HasPrefix(path, module+"/") {
			return true
		}
	}
	return false
}

// shellQuote quotes s as one word of a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// moduleEnvKeys are the variables ModuleEnv sets, or takes out, of the go
// command's environment.
var moduleEnvKeys = []string{"GOWORK", "GOFLAGS", "GOPROXY", "GOSUMDB", "GONOSUMDB", "GONOPROXY", "GOPRIVATE", "GOINSECURE", "GOTOOLCHAIN"}

// ModuleEnv returns the environment of a page's new module: environ (such as
// os.Environ()) without the go command's settings of modules, proxies,
// checksums, workspaces and toolchains, and with those that fetch modules from
// the module cache only (GOPROXY=off, GOSUMDB=off, GOTOOLCHAIN=local) and use
// no workspace (GOWORK=off). GOCACHE and GOMODCACHE stay, as does a go env
// file's setting of them: the module builds from the caches the tests share.
func ModuleEnv(environ []string) []string {
	var env []string
	for _, kv := range environ {
		if key, _, _ := strings.Cut(kv, "="); !slices.Contains(moduleEnvKeys, key) {
			env = append(env, kv)
		}
	}
	return append(env, "GOWORK=off", "GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local")
}

var modulePathRE = regexp.MustCompile(`(?m)^module\s+(\S+)\s*$`)

// ModulePath returns the module path of root's go.mod.
func ModulePath(root string) (string, error) {
	file := filepath.Join(root, "go.mod")
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	m := modulePathRE.FindSubmatch(data)
	if m == nil {
		return "", fmt.Errorf("%s has no module directive", file)
	}
	return string(m[1]), nil
}
