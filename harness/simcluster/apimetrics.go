package simcluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// APIRequests is what the API server has served, by kind of request, as its
// own metric apiserver_request_duration_seconds counts it: how many requests
// and the time they took in all. A kind is the verb and resource as the
// metric names them ("POST jobs", "PATCH pods/status", "DELETE pods"; " (dry
// run)" added to a dry run's). Long-running requests (WATCH, CONNECT) are
// left out: their time is how long they stayed open.
type APIRequests map[string]APITime

// APITime is a count of requests and the time they took.
type APITime struct {
	Count   int
	Seconds float64
}

// Mean is the mean time of a request, or 0 when there were none.
func (t APITime) Mean() time.Duration {
	if t.Count == 0 {
		return 0
	}
	return time.Duration(t.Seconds / float64(t.Count) * float64(time.Second))
}

// APIRequests reads the API server's metrics.
func (c *Cluster) APIRequests(ctx context.Context) (APIRequests, error) {
	data, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	return parseAPIRequests(data)
}

// parseAPIRequests reads apiserver_request_duration_seconds' sums and counts
// from metrics in Prometheus' text format.
func parseAPIRequests(metrics []byte) (APIRequests, error) {
	const name = "apiserver_request_duration_seconds"
	out := APIRequests{}
	sc := bufio.NewScanner(bytes.NewReader(metrics))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var sum bool
		var rest string
		switch {
		case strings.HasPrefix(line, name+"_sum{"):
			sum, rest = true, strings.TrimPrefix(line, name+"_sum{")
		case strings.HasPrefix(line, name+"_count{"):
			rest = strings.TrimPrefix(line, name+"_count{")
		default:
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			return nil, fmt.Errorf("the API server's metrics: a line without a value: %q", line)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("the API server's metrics: %q: %w", line, err)
		}
		l := parseLabels(labels)
		if l["verb"] == "WATCH" || l["verb"] == "CONNECT" || l["verb"] == "WATCHLIST" {
			continue
		}
		kind := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			kind += "/" + l["subresource"]
		}
		if l["dry_run"] != "" {
			kind += " (dry run)"
		}
		t := out[kind]
		if sum {
			t.Seconds += v
		} else {
			t.Count += int(v)
		}
		out[kind] = t
	}
	return out, sc.Err()
}

// parseLabels reads a metric's labels, `a="x",b="y"` (values without quotes
// or commas inside, as these metrics' are).
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for kv := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}

// Since is what was served between before and r: each kind's count and time
// less before's, the kinds that saw no request left out.
func (r APIRequests) Since(before APIRequests) APIRequests {
	out := APIRequests{}
	for k, t := range r {
		b := before[k]
		if d := (APITime{Count: t.Count - b.Count, Seconds: t.Seconds - b.Seconds}); d.Count > 0 {
			out[k] = d
		}
	}
	return out
}

// Total is every kind's requests and time together.
func (r APIRequests) Total() APITime {
	var out APITime
	for _, t := range r {
		out.Count += t.Count
		out.Seconds += t.Seconds
	}
	return out
}

// String lists the kinds, most requests first, each with its count and mean
// time: "2000 POST pods (dry run) 12.3ms, 1000 POST jobs 8.1ms".
func (r APIRequests) String() string {
	kinds := slices.Collect(maps.Keys(r))
	slices.SortFunc(kinds, func(a, b string) int {
		if r[a].Count != r[b].Count {
			return r[b].Count - r[a].Count
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%d %s %s", r[k].Count, k, r[k].Mean().Round(100*time.Microsecond))
	}
	return strings.Join(parts, ", ")
}
