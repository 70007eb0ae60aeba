// Command docgen writes the reference pages generated from the code: the
// command line of a flow program (docs/reference/cli.md, from the urfave/cli app
// that cli.Main runs) and manifold.toml (docs/reference/manifold-toml.md, from
// compile.Config's fields and their doc comments).
//
//	go run ./tools/docgen        # or: make docs
//
// Run it from the module's root after changing a command, a flag or the config;
// its test fails while the pages are stale.
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	if err := write("."); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}

// write writes every page under root, the module's root directory.
func write(root string) error {
	pages, err := Pages(root)
	if err != nil {
		return err
	}
	for _, p := range pages {
		path := filepath.Join(root, filepath.FromSlash(p.Path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, p.Content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Page is a generated page: its path under the module's root, and its bytes.
type Page struct {
	Path    string
	Content []byte
}

// Pages returns the generated pages; root is the module's root, where the
// config's source is read.
func Pages(root string) ([]Page, error) {
	cliPage, err := CLIReference()
	if err != nil {
		return nil, err
	}
	tomlPage, err := ConfigReference(filepath.Join(root, "compile"))
	if err != nil {
		return nil, err
	}
	return []Page{
		{Path: "docs/reference/cli.md", Content: cliPage},
		{Path: "docs/reference/manifold-toml.md", Content: tomlPage},
	}, nil
}
