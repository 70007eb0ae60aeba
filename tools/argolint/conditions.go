package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// jsonFields reads a selector's keys as gjson paths into an object, as Argo's
// executor does when it waits on a resource template's object.
type jsonFields []byte

func (j jsonFields) Has(key string) bool   { return gjson.GetBytes(j, key).Exists() }
func (j jsonFields) Get(key string) string { return gjson.GetBytes(j, key).String() }
func (j jsonFields) Lookup(key string) (string, bool) {
	r := gjson.GetBytes(j, key)
	return r.String(), r.Exists()
}

// printConditions says, for each object in file, what Argo's executor
// (workflow/executor/resource.go) concludes from a resource template's success
// and failure conditions: "failed" when any failure requirement matches, else
// "succeeded" when every success requirement does, else "waiting".
func printConditions(w io.Writer, success, failure, file string) error {
	parse := func(s string) (labels.Requirements, error) {
		if s == "" {
			return nil, nil
		}
		sel, err := labels.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("condition %q: %v", s, err)
		}
		reqs, _ := sel.Requirements()
		return reqs, nil
	}
	ok, err := parse(success)
	if err != nil {
		return err
	}
	bad, err := parse(failure)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		obj, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return err
		}
		fields := jsonFields(obj)
		state := "waiting"
		matched := 0
		for _, r := range ok {
			if r.Matches(fields) {
				matched++
			}
		}
		if matched == len(ok) {
			state = "succeeded"
		}
		for _, r := range bad {
			if r.Matches(fields) {
				state = "failed"
			}
		}
		fmt.Fprintln(w, state)
	}
}
