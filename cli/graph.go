package cli

import (
	"fmt"
	"io"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

func graphCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:  "graph",
		Usage: "draw the flow's steps and their order",
		Flags: append([]ucli.Flag{
			&ucli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "mermaid", Usage: "draw the graph in `FORMAT`: mermaid or dot"},
		}, flowFlags()...),
		Action: func(c *ucli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			format := c.String("format")
			if format != "mermaid" && format != "dot" {
				return usageErr("--format %q: choose mermaid or dot", format)
			}
			p, err := load(c, flow)
			if err != nil {
				return err
			}
			if format == "dot" {
				return dot(c.App.Writer, p)
			}
			return mermaid(c.App.Writer, p)
		},
	}
}

// mermaid writes a Mermaid flowchart. Nodes get ids of their own (s0, s1…), since
// step names may hold sequences Mermaid reads as arrows.
func mermaid(w io.Writer, p *plan.Flow) error {
	var b strings.Builder
	fmt.Fprintf(&b, "---\ntitle: %s\n---\nflowchart TD\n", p.Name)
	id := map[string]string{}
	for i := range p.Steps {
		s := &p.Steps[i]
		id[s.Name] = fmt.Sprintf("s%d", i)
		label := s.Name
		if n := needs(s); len(n) > 0 {
			label += "<br/><small>" + strings.Join(n, " · ") + "</small>"
		}
		fmt.Fprintf(&b, "    %s[\"%s\"]\n", id[s.Name], strings.ReplaceAll(label, `"`, "#quot;"))
	}
	for i := range p.Steps {
		for _, a := range p.Steps[i].After {
			fmt.Fprintf(&b, "    %s --> %s\n", id[a], id[p.Steps[i].Name])
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// dot writes a Graphviz digraph.
func dot(w io.Writer, p *plan.Flow) error {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %q {\n    rankdir=TB;\n    node [shape=box];\n", p.Name)
	for i := range p.Steps {
		s := &p.Steps[i]
		label := s.Name
		if n := needs(s); len(n) > 0 {
			label += "\n" + strings.Join(n, ", ")
		}
		fmt.Fprintf(&b, "    %q [label=%q];\n", s.Name, label)
	}
	for i := range p.Steps {
		for _, a := range p.Steps[i].After {
			fmt.Fprintf(&b, "    %q -> %q;\n", a, p.Steps[i].Name)
		}
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}
