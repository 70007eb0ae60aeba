package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strings"
)

// ConfigReference renders manifold.toml's keys from the source of package
// compile in dir: the fields of Config (and of the tables it holds) with their
// toml tags and doc comments.
func ConfigReference(dir string) ([]byte, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	pkg := pkgs["compile"]
	if pkg == nil {
		return nil, fmt.Errorf("no package compile in %s", dir)
	}
	structs := map[string]*ast.StructType{}
	docs := map[string]string{}
	for _, f := range pkg.Files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				ts := s.(*ast.TypeSpec)
				if st, ok := ts.Type.(*ast.StructType); ok {
					structs[ts.Name.Name] = st
					text := g.Doc.Text()
					if ts.Doc != nil {
						text = ts.Doc.Text()
					}
					docs[ts.Name.Name] = text
				}
			}
		}
	}
	cfg := structs["Config"]
	if cfg == nil {
		return nil, fmt.Errorf("no type Config in %s", dir)
	}

	var b bytes.Buffer
	b.WriteString(generatedNote("go run ./tools/docgen"))
	b.WriteString("# manifold.toml reference\n\n")
	b.WriteString("Every command that compiles a flow reads `manifold.toml` from the working\n")
	b.WriteString("directory (or the file `--config` names). Its keys are defaults: a flow's own\n")
	b.WriteString("options override them, and a step's override the flow's. A key that is not below\n")
	b.WriteString("is an error, so that a misspelt key is not silently ignored.\n\n")
	if ex := example(docs["Config"]); ex != "" {
		fmt.Fprintf(&b, "```toml\n%s```\n\n", ex)
	}
	b.WriteString("## Keys\n\n| key | type | meaning |\n|---|---|---|\n")
	var tables []string
	for _, f := range fields(cfg) {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.key, f.typ, cell(f.doc))
		if f.table != "" {
			tables = append(tables, f.key+"\x00"+f.table)
		}
	}
	for _, t := range tables {
		key, typeName, _ := strings.Cut(t, "\x00")
		st := structs[typeName]
		if st == nil {
			return nil, fmt.Errorf("no struct %s for %s", typeName, key)
		}
		fmt.Fprintf(&b, "\n## %s\n\n", key)
		if text := prose(docs[typeName]); text != "" {
			fmt.Fprintf(&b, "%s\n\n", escape(text))
		}
		if ex := example(docs[typeName]); ex != "" {
			fmt.Fprintf(&b, "```toml\n%s```\n\n", ex)
		}
		b.WriteString("| key | type | meaning |\n|---|---|---|\n")
		for _, f := range fields(st) {
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.key, f.typ, cell(f.doc))
		}
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// field is a key of the config.
type field struct {
	key, typ, doc string
	// table is the Go type of a table's (or array of tables') fields.
	table string
}

// fields returns st's fields that have a toml tag, in order.
func fields(st *ast.StructType) []field {
	var out []field
	for _, f := range st.Fields.List {
		if f.Tag == nil || len(f.Names) == 0 {
			continue
		}
		key := reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("toml")
		key, _, _ = strings.Cut(key, ",")
		if key == "" || key == "-" {
			continue
		}
		typ, table := tomlType(f.Type)
		text := f.Doc.Text()
		// The doc comment begins with the field's Go name: say the key instead.
		if rest, ok := strings.CutPrefix(text, f.Names[0].Name); ok {
			text = "`" + key + "`" + rest
		}
		out = append(out, field{key: key, typ: typ, doc: text, table: table})
	}
	return out
}

// tomlType names a Go type as TOML does, and the struct a table holds.
func tomlType(e ast.Expr) (string, string) {
	switch t := e.(type) {
	case *ast.Ident:
		switch t.Name {
		case "string":
			return "string", ""
		case "bool":
			return "boolean", ""
		case "int", "int64":
			return "integer", ""
		}
		return "table", t.Name
	case *ast.StarExpr:
		return tomlType(t.X)
	case *ast.ArrayType:
		inner, table := tomlType(t.Elt)
		if table != "" {
			return "array of tables", table
		}
		return "array of " + inner + "s", ""
	case *ast.MapType:
		inner, _ := tomlType(t.Value)
		return "table of " + inner + "s", ""
	}
	return "value", ""
}

// example returns the indented (code) lines of a doc comment, unindented.
func example(text string) string {
	var b strings.Builder
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "\t") {
			b.WriteString(strings.TrimPrefix(l, "\t") + "\n")
		} else if b.Len() > 0 && l == "" {
			b.WriteString("\n")
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// prose returns the paragraphs of a doc comment, without its code, on one line
// each.
func prose(text string) string {
	var paras []string
	var cur []string
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, "\t"):
		case l == "":
			if len(cur) > 0 {
				paras = append(paras, strings.Join(cur, " "))
				cur = nil
			}
		default:
			cur = append(cur, l)
		}
	}
	if len(cur) > 0 {
		paras = append(paras, strings.Join(cur, " "))
	}
	return strings.Join(paras, "\n\n")
}
