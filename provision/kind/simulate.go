package kind

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/manifoldflow/manifold/provision/nodeshape"
)

// Group asks for Count kind workers shaped as instance type InstanceType.
type Group struct {
	InstanceType string
	Count        int
}

// ParseSimulate parses a --simulate value: comma-separated INSTANCE-TYPE=COUNT
// items, such as "trn1.32xlarge=2,inf2.xlarge=1", each an instance type that
// nodeshape.ForType can shape, given once, with a count of at least 1. The
// groups keep the order given; "" is no groups. Every bad item is reported,
// each naming the item and what to do.
func ParseSimulate(s string) ([]Group, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var groups []Group
	var errs []error
	seen := map[string]int{} // instance type → index in groups
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			errs = append(errs, fmt.Errorf("--simulate: item %d is empty; separate INSTANCE-TYPE=COUNT items with single commas, such as trn1.32xlarge=2,inf2.xlarge=1", i+1))
			continue
		}
		typ, n, ok := strings.Cut(item, "=")
		typ = strings.TrimSpace(typ)
		if !ok || typ == "" {
			errs = append(errs, fmt.Errorf("--simulate item %q: write INSTANCE-TYPE=COUNT, such as trn1.32xlarge=2", item))
			continue
		}
		count, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil || count < 1 {
			errs = append(errs, fmt.Errorf("--simulate item %q: the count must be a whole number of at least 1; leave the item out to simulate no %s", item, typ))
			count = 0
		}
		if _, err := nodeshape.ForType(typ); err != nil {
			errs = append(errs, fmt.Errorf("--simulate item %q: %w", item, err))
			continue
		}
		if j, dup := seen[typ]; dup {
			first := groups[j]
			errs = append(errs, fmt.Errorf("--simulate item %q: %s is given twice; give it once with the total count, such as %s=%d",
				item, typ, typ, first.Count+max(count, 1)))
			continue
		}
		seen[typ] = len(groups)
		groups = append(groups, Group{InstanceType: typ, Count: count})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return groups, nil
}

// FormatSimulate writes groups as ParseSimulate reads them.
func FormatSimulate(groups []Group) string {
	items := make([]string, len(groups))
	for i, g := range groups {
		items[i] = g.InstanceType + "=" + strconv.Itoa(g.Count)
	}
	return strings.Join(items, ",")
}

// workerTypes returns the instance type of each simulated worker, in the order
// of the cluster config: groups in the order given, each group's workers together.
func workerTypes(groups []Group) []string {
	var types []string
	for _, g := range groups {
		for range g.Count {
			types = append(types, g.InstanceType)
		}
	}
	return types
}
