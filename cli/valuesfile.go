package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// writeValuesFile writes to file, when it is set, one JSON object of every
// value published in dir (each <name>.json, plan.EnvValues), as
// plan.EnvValuesFile says: an engine that reads one file of the pod, once the
// step has ended, gets them all from it.
func writeValuesFile(dir, file string) error {
	if file == "" {
		return nil
	}
	if dir == "" {
		return fmt.Errorf("%s is set, and %s, where the values it gathers are, is not", plan.EnvValuesFile, plan.EnvValues)
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	values := map[string]plan.PublishedValue{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		v, err := publish(data)
		if err != nil {
			return fmt.Errorf("published value %s: %w", name, err)
		}
		values[name] = v
	}
	data, err := json.Marshal(values)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}

// publish returns the JSON text data as the values file holds it: its text,
// its canonical form, and, for a list (or null, a list of none), each
// element's text; items is null for any other value.
func publish(data []byte) (plan.PublishedValue, error) {
	var decoded any
	if err := json.Unmarshal(data, &decoded); err != nil {
		return plan.PublishedValue{}, fmt.Errorf("not JSON: %w", err)
	}
	canonical, err := json.Marshal(decoded)
	if err != nil {
		return plan.PublishedValue{}, err
	}
	v := plan.PublishedValue{JSON: string(data), Canonical: string(canonical)}
	var list []json.RawMessage
	if _, isList := decoded.([]any); (isList || decoded == nil) && json.Unmarshal(data, &list) == nil {
		// null is a list of no items, as a fan-out reads it.
		v.Items = make([]string, len(list))
		for i, e := range list {
			var b bytes.Buffer
			if json.Compact(&b, e) == nil {
				e = b.Bytes()
			}
			v.Items[i] = sdk.ItemText(e)
		}
	}
	return v, nil
}
