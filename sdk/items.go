package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ItemValue decodes the step's foreach item into v: the element of the list
// for a step of ForeachOf, the item string for a step of Foreach.
func (c *Context) ItemValue(v any) error {
	data := c.itemJSON
	if data == nil {
		if c.index < 0 {
			return fmt.Errorf("step %q has no foreach item", c.step)
		}
		data, _ = json.Marshal(c.item)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("item %d of step %q: %w", c.index, c.step, err)
	}
	return nil
}

// Count returns how many items the step's foreach has, 0 for a step without
// one.
func (c *Context) Count() int { return c.count }

// GetAll decodes, into the slice v points to, the artifact name that every
// item of the foreach step put, in index order: a join's view of a fan-out.
// A fan-out of no item gives an empty slice.
func (c *Context) GetAll(step, name string, v any) error {
	n, err := c.items(step)
	if err != nil {
		return err
	}
	var all bytes.Buffer
	all.WriteByte('[')
	for i := range n {
		var raw json.RawMessage
		if err := c.get(step, i, name, &raw); err != nil {
			return err
		}
		if i > 0 {
			all.WriteByte(',')
		}
		all.Write(raw)
	}
	all.WriteByte(']')
	if err := json.Unmarshal(all.Bytes(), v); err != nil {
		return fmt.Errorf("artifact %q of the %d items of step %q: %w", name, n, step, err)
	}
	return nil
}

// items returns how many items the foreach step had in this run.
func (c *Context) items(step string) (int, error) {
	if c.spec == nil {
		return 0, fmt.Errorf("step %q: the runtime gave no flow to count the items of step %q by", c.step, step)
	}
	for _, d := range c.spec.Steps {
		if d.Name != step {
			continue
		}
		switch {
		case d.Spec.ForeachOf != nil:
			list, err := c.List(*d.Spec.ForeachOf)
			return len(list), err
		case d.Spec.Foreach != nil:
			return len(d.Spec.Foreach), nil
		}
		return 0, fmt.Errorf("step %q has no foreach: read its artifacts with Get", step)
	}
	return 0, fmt.Errorf("flow %s has no step %q", c.spec.Name, step)
}

// List reads the list a step of ForeachOf fans out over: the elements of the
// JSON list that ref names, each as its JSON. Runtimes call it to make a
// fan-out's items, and so does the step itself.
func (c *Context) List(ref ValueRef) ([]json.RawMessage, error) {
	var raw json.RawMessage
	if err := c.get(ref.Step, -1, ref.Name, &raw); err != nil {
		return nil, err
	}
	return decodeList(ref, raw)
}

// decodeList decodes the JSON list data that ref names into its elements
// (null is an empty list).
func decodeList(ref ValueRef, data []byte) ([]json.RawMessage, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("artifact %q of step %q is not a JSON list (%s): a fan-out needs one, such as [\"a\", \"b\"]", ref.Name, ref.Step, describeJSON(data))
	}
	for i, e := range list {
		var b bytes.Buffer
		if err := json.Compact(&b, e); err == nil {
			list[i] = b.Bytes()
		}
	}
	return list, nil
}

// ItemText is how an element of a fan-out reaches a step as MANIFOLD_ITEM: a
// string's text, any other value's JSON.
func ItemText(item json.RawMessage) string {
	var s string
	if len(item) > 0 && item[0] == '"' && json.Unmarshal(item, &s) == nil {
		return s
	}
	return string(item)
}

// Matches reports whether data, the JSON of the value c names, equals c's
// value, compared as decoded JSON.
func (c Condition) Matches(data []byte) (bool, error) {
	var got, want any
	if err := json.Unmarshal(data, &got); err != nil {
		return false, fmt.Errorf("artifact %q of step %q is not JSON: %w", c.Name, c.Step, err)
	}
	if err := json.Unmarshal([]byte(c.Value), &want); err != nil {
		return false, fmt.Errorf("sdk.When value %s: %w", c.Value, err)
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	return bytes.Equal(gb, wb), nil
}

// describeJSON names the kind of JSON value data is, for messages.
func describeJSON(data []byte) string {
	var v any
	if json.Unmarshal(data, &v) != nil {
		return "not JSON"
	}
	switch v.(type) {
	case map[string]any:
		return "an object"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a bool"
	case nil:
		return "null"
	}
	return "a list"
}
