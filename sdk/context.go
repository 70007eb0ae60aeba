package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/manifoldflow/manifold/internal/atomicfile"
)

// Context is what a Run body receives: the standard context (cancelled when the step
// must stop), the step's params and foreach item, and its artifacts.
//
// Artifacts are JSON files under the run directory: Put(name, v) writes
// <run dir>/<step>[/<index>]/<name>.json and Get reads what an earlier step put. The
// run directory is MANIFOLD_RUN_DIR, or .manifold/runs/default when it is unset; a
// Command step finds its own artifact directory in MANIFOLD_ARTIFACTS.
type Context struct {
	context.Context
	flow, step string
	params     map[string]string
	item       string
	index      int
	runDir     string
}

// ContextConfig describes the step a Context is made for.
type ContextConfig struct {
	Flow, Step string
	// Params maps each flow param's name to its value.
	Params map[string]string
	// Item and Index are the foreach item and its index; Index is -1 for a step
	// without Foreach.
	Item  string
	Index int
	// RunDir is where artifacts are kept.
	RunDir string
}

// NewContext returns the Context a Run body gets. The CLI's step command and the
// runtimes call it; flows do not need to.
func NewContext(ctx context.Context, c ContextConfig) *Context {
	if ctx == nil {
		ctx = context.Background()
	}
	return &Context{Context: ctx, flow: c.Flow, step: c.Step, params: c.Params,
		item: c.Item, index: c.Index, runDir: c.RunDir}
}

// Flow returns the flow's name.
func (c *Context) Flow() string { return c.flow }

// Step returns the step's name.
func (c *Context) Step() string { return c.step }

// Param returns the value of the flow param name, or "" if the flow declares none.
func (c *Context) Param(name string) string { return c.params[name] }

// Item returns the step's foreach item, or "" for a step without Foreach.
func (c *Context) Item() string { return c.item }

// Index returns the zero-based index of the step's foreach item, or -1.
func (c *Context) Index() int { return c.index }

// ArtifactDir returns the directory where this step's artifacts are kept.
func (c *Context) ArtifactDir() string { return ArtifactDir(c.runDir, c.step, c.index) }

// Put stores v, encoded as JSON, as this step's artifact name. The write is atomic: a
// reader sees the old artifact or the new one, never part of one.
func (c *Context) Put(name string, v any) error {
	if err := checkArtifactName(name); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("artifact %q: %w", name, err)
	}
	dir := c.ArtifactDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return atomicfile.WriteSync(filepath.Join(dir, name+".json"), append(data, '\n'))
}

// Get decodes the artifact name of step into v.
func (c *Context) Get(step, name string, v any) error {
	return c.get(step, -1, name, v)
}

// GetIndex decodes the artifact name that item index of the foreach step wrote.
func (c *Context) GetIndex(step string, index int, name string, v any) error {
	if index < 0 {
		return fmt.Errorf("artifact %q of step %q: index %d is negative", name, step, index)
	}
	return c.get(step, index, name, v)
}

func (c *Context) get(step string, index int, name string, v any) error {
	if err := checkArtifactName(name); err != nil {
		return err
	}
	if err := checkArtifactName(step); err != nil {
		return fmt.Errorf("step %q: %w", step, err)
	}
	path := filepath.Join(ArtifactDir(c.runDir, step, index), name+".json")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("step %q has no artifact %q (looked for %s): did it run and Put it?", step, name, path)
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("artifact %q of step %q: %w", name, step, err)
	}
	return nil
}

// ArtifactDir returns where a step keeps its artifacts in the run directory runDir:
// <run dir>/<step>, or <run dir>/<step>/<index> for item index of a foreach step
// (index is -1 for a step without Foreach). Runtimes give a Command step this
// directory as MANIFOLD_ARTIFACTS.
func ArtifactDir(runDir, step string, index int) string {
	if index < 0 {
		return filepath.Join(runDir, step)
	}
	return filepath.Join(runDir, step, strconv.Itoa(index))
}

var artifactName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

func checkArtifactName(name string) error {
	if !artifactName.MatchString(name) || len(name) > 200 {
		return fmt.Errorf("artifact name %q must be letters, digits, '_', '.' or '-', not starting with '.' or '-'", name)
	}
	return nil
}
