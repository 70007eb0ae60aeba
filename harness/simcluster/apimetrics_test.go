package simcluster

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestParseAPIRequests reads request counts and times from metrics in the API
// server's format: by verb, resource and subresource, dry runs apart, watches
// left out, buckets and other metrics ignored; and Since subtracts.
func TestParseAPIRequests(t *testing.T) {
	const before = `# HELP apiserver_request_duration_seconds [STABLE] Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1",le="0.005"} 3
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1"} 0.5
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1"} 10
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="All",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 0.2
apiserver_request_duration_seconds_count{component="apiserver",dry_run="All",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 4
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 1
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 900
apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 3
apiserver_request_total{code="201",component="apiserver",dry_run="",group="batch",resource="jobs",scope="resource",subresource="",verb="POST",version="v1"} 10
`
	got, err := parseAPIRequests([]byte(before))
	if err != nil {
		t.Fatal(err)
	}
	want := APIRequests{
		"POST jobs":           {Count: 10, Seconds: 0.5},
		"POST pods (dry run)": {Count: 4, Seconds: 0.2},
		"PATCH pods/status":   {Count: 2, Seconds: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parsed (-want +got):\n%s", diff)
	}
	if m := got["POST jobs"].Mean(); m != 50*time.Millisecond {
		t.Errorf("mean of POST jobs: %v, want 50ms", m)
	}
	later := APIRequests{"POST jobs": {Count: 15, Seconds: 1.5}, "POST pods (dry run)": {Count: 4, Seconds: 0.2}, "DELETE pods": {Count: 1, Seconds: 0.01}}
	if diff := cmp.Diff(APIRequests{"POST jobs": {Count: 5, Seconds: 1}, "DELETE pods": {Count: 1, Seconds: 0.01}}, later.Since(got)); diff != "" {
		t.Errorf("Since (-want +got):\n%s", diff)
	}
	if _, err := parseAPIRequests([]byte("apiserver_request_duration_seconds_sum{verb=\"POST\"} x\n")); err == nil {
		t.Error("a value that is no number: no error")
	}
}
