package airflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/manifoldflow/manifold/artifact"
	emitairflow "github.com/manifoldflow/manifold/emit/airflow"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/dag"
)

// XComReturnKey is the key of the XCom a task's return value is, and the
// key under which KubernetesPodOperator pushes what its sidecar read.
const XComReturnKey = "return_value"

// XCom returns the JSON of the XCom key of task taskID (map index -1) in run
// runID of DAG id; an XCom that is not there is an error that wraps
// fs.ErrNotExist.
func (c *Client) XCom(ctx context.Context, id, runID, taskID, key string) (json.RawMessage, error) {
	var out struct {
		Value json.RawMessage `json:"value"`
	}
	err := c.call(ctx, http.MethodGet, path("dags", id, "dagRuns", runID, "taskInstances", taskID, "xcomEntries", key), url.Values{"map_index": {"-1"}}, nil, &out)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return nil, fmt.Errorf("task %s of run %s has no XCom %s: %w", taskID, runID, key, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	// The API gives the value as stored: JSON, or a string that holds it.
	var s string
	if json.Unmarshal(out.Value, &s) == nil {
		return json.RawMessage(s), nil
	}
	return out.Value, nil
}

// valuesStore is the values the steps of a followed run published, as
// their tasks' XComs hold them (emit/airflow.ValuesFile): the store the dag
// core reads the values of sdk.ForeachOf and sdk.When from, so that it
// decides what Airflow decided, from the same values. Only Get is served;
// it reads each step's XCom once.
type valuesStore struct {
	c            *Client
	dagID, runID string
	mu           sync.Mutex
	steps        map[string]map[string]plan.PublishedValue
}

// Get returns the value key names (artifact.Key of a step and a name).
func (s *valuesStore) Get(ctx context.Context, key string) ([]byte, error) {
	step, name, ok := artifact.SplitKey(key)
	if !ok {
		return nil, fmt.Errorf("%s: not a value a step published: %w", key, fs.ErrNotExist)
	}
	values, err := s.values(ctx, step)
	if err != nil {
		return nil, err
	}
	v, ok := values[name]
	if !ok {
		return nil, fmt.Errorf("step %s published no value %s (its XCom holds %d): %w", step, name, len(values), fs.ErrNotExist)
	}
	return []byte(v.JSON), nil
}

// values reads the values step published, once.
func (s *valuesStore) values(ctx context.Context, step string) (map[string]plan.PublishedValue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.steps[step]; ok {
		return v, nil
	}
	data, err := s.c.XCom(ctx, s.dagID, s.runID, step, XComReturnKey)
	if err != nil {
		return nil, err
	}
	var values map[string]plan.PublishedValue
	if err := json.Unmarshal(data, &values); err != nil {
		return nil, fmt.Errorf("the XCom of task %s is not the object of values a step publishes: %w", step, err)
	}
	if s.steps == nil {
		s.steps = map[string]map[string]plan.PublishedValue{}
	}
	s.steps[step] = values
	return values, nil
}

// Put refuses: a follower writes no value.
func (s *valuesStore) Put(context.Context, string, []byte) error {
	return errors.New("the values of a run on Airflow are read, never written, by its follower")
}

// Location says where key is read from.
func (s *valuesStore) Location(key string) string {
	step, _, _ := strings.Cut(key, "/")
	return "the XCom of task " + step + " of run " + s.runID
}

// dynamic gives the follower's dag run what it needs of a dynamic flow: the
// values from the tasks' XComs, and a unit of its own for each unit the dag
// core makes (each item of a fan-out, whose task instance is the mapped
// task's of that map index).
func (fl *follower) dynamic(resumed *bool) dag.Dynamic {
	return dag.Dynamic{
		Store: &valuesStore{c: fl.c, dagID: fl.dagID, runID: fl.r.ID},
		Made: func(us []*dag.Unit) error {
			for _, du := range us {
				u := &unit{Unit: du}
				fl.units = append(fl.units, u)
				fl.byTask[du.Step.Name][du.Index] = u
				if *resumed {
					if err := fl.r.Resume(du); err != nil {
						return err
					}
				}
			}
			return nil
		},
	}
}

// gateStep returns the step whose gate task id is (emit/airflow's items
// or when task), if it is one.
func gateStep(task string) (string, bool) {
	for _, suffix := range []string{emitairflow.ItemsTaskSuffix, emitairflow.WhenTaskSuffix} {
		if s, ok := strings.CutSuffix(task, suffix); ok {
			return s, true
		}
	}
	return "", false
}
