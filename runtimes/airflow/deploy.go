package airflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/manifoldflow/manifold/emit"
	emitairflow "github.com/manifoldflow/manifold/emit/airflow"
	"github.com/manifoldflow/manifold/internal/atomicfile"
	"github.com/manifoldflow/manifold/plan"
)

// Deployed is what Deploy wrote.
type Deployed struct {
	// DAGID is the DAG's id in Airflow.
	DAGID string
	// Files are the paths written, in the order they were written.
	Files []string
	// Source is the DAG file's content, which WaitParsed looks for.
	Source []byte
	// Claims is the <flow>.claims.yaml of a flow whose steps claim devices,
	// which Deploy leaves out: it goes to the cluster (kubectl apply), not to
	// the dags folder. Nil for none.
	Claims []byte
	// At is when the DAG file was renamed into place.
	At time.Time
}

// DAGFiles are the names, in dir, of the files Deploy writes for flow, in the
// order it writes them: the .kpo.json first, so that a DAG file Airflow parses
// never meets a half-written companion.
func DAGFiles(flow string) []string {
	return []string{flow + ".kpo.json", flow + ".py"}
}

// header begins every DAG file the airflow target writes; Undeploy removes
// only a file that begins so.
const header = "# Airflow DAG of flow "

// staleTemp is how old a temporary file of a deploy must be for a later
// deploy to remove it as left by a deploy killed before its rename.
const staleTemp = 10 * time.Minute

// written checks that the file at path, one of those Deploy writes for flow
// (DAGFiles), is one Manifold wrote, or is not there: a DAG file that begins
// as the airflow target begins it for flow, a .kpo.json whose dag_id is the
// flow's DAG. Otherwise it returns an error naming the file; what to do
// follows it.
func written(path, flow string) error {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case strings.HasSuffix(path, ".py"):
		if !bytes.HasPrefix(data, []byte(header+flow+",")) {
			return fmt.Errorf("%s was not written by manifold (it does not begin %q)", path, header+flow)
		}
	default:
		var kpo struct {
			DAGID *string `json:"dag_id"`
		}
		if json.Unmarshal(data, &kpo) != nil || kpo.DAGID == nil || *kpo.DAGID != flow {
			return fmt.Errorf("%s was not written by manifold (it is not the .kpo.json of DAG %s)", path, flow)
		}
	}
	return nil
}

// Deploy writes f's DAG file and .kpo.json, as the airflow target emits them,
// into the dags folder dir, each through package atomicfile: to a temporary
// file in dir, named .<name>.<random>.tmp (a name the DAG processor skips, as
// it does every name not ending in .py), synced, then renamed into place; and
// then the folder synced. A file of those names that Manifold did not write
// (written) is refused before anything is written, unless takeOver, which
// replaces it.
func Deploy(dir string, f *plan.Flow, takeOver bool) (*Deployed, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("dags folder: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("dags folder %s is not a directory", dir)
	}
	files, errs := emit.Files(emitairflow.Target{}, f)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	byName := map[string][]byte{}
	for _, file := range files {
		byName[file.Name] = file.Data
	}
	d, errs := emitairflow.Build(f)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	dep := &Deployed{DAGID: d.ID, Claims: byName[f.Name+emit.ClaimsFileSuffix]}
	if !takeOver {
		for _, name := range DAGFiles(f.Name) {
			if err := written(filepath.Join(dir, name), f.Name); err != nil {
				return nil, fmt.Errorf("%w: deploy leaves it alone; move it away, or deploy with --take-over to replace it", err)
			}
		}
	}
	for _, name := range DAGFiles(f.Name) {
		data, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("the airflow target wrote no %s", name)
		}
		p := filepath.Join(dir, name)
		// What a deploy killed before its rename left goes first.
		if _, err := atomicfile.RemoveStale(p, staleTemp); err != nil {
			return dep, err
		}
		if err := atomicfile.WriteSync(p, data); err != nil {
			return dep, fmt.Errorf("writing %s: %w", p, err)
		}
		dep.Files = append(dep.Files, p)
		if strings.HasSuffix(name, ".py") {
			dep.Source, dep.At = data, time.Now()
		}
	}
	return dep, syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// Undeploy removes from dir the files Deploy writes for flow: the DAG file
// first, so Airflow never parses a DAG whose companion is gone. When a file of
// those names was not written by Manifold (written), none is removed, and
// that is an error. It returns the paths removed; none when nothing was
// deployed.
func Undeploy(dir, flow string) ([]string, error) {
	names := DAGFiles(flow)
	for _, name := range []string{names[1], names[0]} {
		if err := written(filepath.Join(dir, name), flow); err != nil {
			return nil, fmt.Errorf("%w: remove it yourself if it is to go", err)
		}
	}
	var removed []string
	for _, name := range []string{names[1], names[0]} {
		p := filepath.Join(dir, name)
		switch err := os.Remove(p); {
		case err == nil:
			removed = append(removed, p)
		case !errors.Is(err, os.ErrNotExist):
			return removed, err
		}
	}
	return removed, syncDir(dir)
}

// DAG is what the API says of a DAG.
type DAG struct {
	ID             string     `json:"dag_id"`
	IsPaused       bool       `json:"is_paused"`
	IsStale        bool       `json:"is_stale"`
	LastParsedTime *time.Time `json:"last_parsed_time"`
	FileLoc        string     `json:"fileloc"`
	RelativeLoc    string     `json:"relative_fileloc"`
	FileToken      string     `json:"file_token"`
	HasImportErrs  bool       `json:"has_import_errors"`
}

// DAG returns DAG id; NotFound(err) when Airflow has not stored it.
func (c *Client) DAG(ctx context.Context, id string) (*DAG, error) {
	var d DAG
	if err := c.call(ctx, http.MethodGet, path("dags", id), nil, nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// source returns the DAG file content Airflow stored for DAG id, at its latest
// version.
func (c *Client) source(ctx context.Context, id string) (string, error) {
	var s struct {
		Content *string `json:"content"`
	}
	if err := c.call(ctx, http.MethodGet, path("dagSources", id), nil, nil, &s); err != nil || s.Content == nil {
		return "", err
	}
	return *s.Content, nil
}

// Stale reports whether the DAG file Airflow holds for f's DAG differs from
// the one the airflow target emits for f now: f changed since it was deployed.
func (c *Client) Stale(ctx context.Context, f *plan.Flow) (bool, error) {
	files, errs := emit.Files(emitairflow.Target{}, f)
	if len(errs) > 0 {
		return false, errs.ToAggregate()
	}
	d, errs := emitairflow.Build(f)
	if len(errs) > 0 {
		return false, errs.ToAggregate()
	}
	src, err := c.source(ctx, d.ID)
	if err != nil {
		return false, err
	}
	for _, file := range files {
		if file.Name == f.Name+".py" {
			return src != string(file.Data), nil
		}
	}
	return false, nil
}

// Pause pauses or unpauses DAG id.
func (c *Client) Pause(ctx context.Context, id string, paused bool) error {
	return c.call(ctx, http.MethodPatch, path("dags", id), nil, map[string]bool{"is_paused": paused}, nil)
}

// DeleteDAG deletes DAG id and its runs from Airflow's database. Its file, if
// still in the dags folder, makes it again at the next parse.
func (c *Client) DeleteDAG(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, path("dags", id), nil, nil, nil)
}

// ImportError is a DAG file Airflow could not import.
type ImportError struct {
	ID         int       `json:"import_error_id"`
	Timestamp  time.Time `json:"timestamp"`
	Filename   string    `json:"filename"`
	Bundle     string    `json:"bundle_name"`
	StackTrace string    `json:"stack_trace"`
}

// ImportErrors returns the import errors Airflow holds for the file called
// name (relative to its bundle, the dags folder).
func (c *Client) ImportErrors(ctx context.Context, name string) ([]ImportError, error) {
	var out struct {
		Errors []ImportError `json:"import_errors"`
	}
	q := url.Values{"filename": {name}, "limit": {"100"}}
	if err := c.call(ctx, http.MethodGet, "/api/v2/importErrors", q, nil, &out); err != nil {
		return nil, err
	}
	return out.Errors, nil
}

// ParseError is what WaitParsed returns when Airflow could not import the DAG
// file: the file and Airflow's stack trace.
type ParseError struct {
	File, Trace string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("Airflow could not import %s:\n%s", e.File, strings.TrimRight(e.Trace, "\n"))
}

// WaitParsed waits until Airflow has stored the DAG that dep deployed at its new
// content, or has reported an import error of its file since it was written
// (ParseError), polling every interval up to a few seconds. A DAG Airflow knows
// is asked to be parsed again at once; a new file waits for the DAG processor
// to list the folder again ([dag_processor] refresh_interval). ctx bounds the
// wait.
func (c *Client) WaitParsed(ctx context.Context, dep *Deployed) error {
	name := filepath.Base(dep.Files[len(dep.Files)-1])
	asked := false
	wait := PollMin
	for {
		d, err := c.DAG(ctx, dep.DAGID)
		switch {
		case NotFound(err):
		case err != nil:
			return err
		default:
			src, err := c.source(ctx, dep.DAGID)
			if err != nil && !NotFound(err) {
				return err
			}
			if src == string(dep.Source) && !d.IsStale {
				return nil
			}
			if !asked && d.FileToken != "" {
				// Ask for a parse now rather than at the next interval.
				if err := c.call(ctx, http.MethodPut, path("parseDagFile", d.FileToken), nil, nil, nil); err == nil {
					asked = true
				}
			}
		}
		errs, err := c.ImportErrors(ctx, name)
		if err != nil {
			return err
		}
		for _, ie := range errs {
			// Airflow's clock and this machine's may differ a little.
			if !ie.Timestamp.Before(dep.At.Add(-2 * time.Second)) {
				return &ParseError{File: ie.Filename, Trace: ie.StackTrace}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for Airflow to parse %s: %w (the DAG processor lists new files every [dag_processor] refresh_interval, 5 minutes by default)", name, context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, PollMax)
	}
}
