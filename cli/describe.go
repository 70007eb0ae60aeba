package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/manifoldflow/manifold/plan"
)

// needs summarizes what a step asks of its nodes: how many, instance type,
// accelerators (per node), fan-out, retries and timeout.
func needs(s *plan.Step) []string {
	var out []string
	if s.Nodes > 1 {
		out = append(out, fmt.Sprintf("%d nodes", s.Nodes))
	}
	if s.InstanceType != "" {
		out = append(out, s.InstanceType)
	}
	if s.Neuron > 0 {
		out = append(out, fmt.Sprintf("%d Neuron", s.Neuron))
	}
	if s.GPU > 0 {
		out = append(out, fmt.Sprintf("%d GPU", s.GPU))
	}
	if s.EFA > 0 {
		efa := fmt.Sprintf("%d EFA", s.EFA)
		if s.EFAWiring != nil {
			efa += " (wired)"
		}
		out = append(out, efa)
	}
	if s.DRA != nil && len(s.DRA.Requests) > 0 {
		out = append(out, "DRA")
	}
	if s.Foreach != nil {
		out = append(out, fmt.Sprintf("foreach ×%d", len(s.Foreach)))
	}
	if s.Retry > 0 {
		out = append(out, fmt.Sprintf("retry %d", s.Retry))
	}
	if s.Timeout > 0 {
		out = append(out, "timeout "+human(s.Timeout))
	}
	return out
}

// human prints a duration without zero tails: 6h, not 6h0m0s.
func human(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func describe(s *plan.Step) string {
	parts := needs(s)
	if len(s.After) > 0 {
		parts = append([]string{"after " + strings.Join(s.After, ", ")}, parts...)
	}
	return strings.Join(parts, "; ")
}
