package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestGeneratedCurrent fails while catalog/ec2types_gen.go differs from what the
// SDK of go.mod gives.
func TestGeneratedCurrent(t *testing.T) {
	want, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(Output)))
	if err != nil {
		t.Fatalf("%v; run `make ec2types` (cd tools/ec2types && go run .) to write it", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s is stale: run `make ec2types` (cd tools/ec2types && go run .) and commit it (-want +got):\n%s", Output, cmp.Diff(string(want), string(got)))
	}
}
