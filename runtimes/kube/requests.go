package kube

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Requests counts the requests a run or check makes to the API server, by verb
// and resource (Options.Requests). The zero value is ready to use, and safe for
// concurrent use.
type Requests struct {
	mu sync.Mutex
	n  map[Request]int
}

// Request is a kind of request: its verb as the API server's audit log names it
// (get, list, watch, create, update, patch, delete, deletecollection), with
// " (dry run)" added to a dry run's, and the resource it is made to
// ("jobs", "pods/log"), or the path of a request that is not to a resource.
type Request struct {
	Verb, Resource string
}

func (r Request) String() string { return r.Verb + " " + r.Resource }

// Counts returns how many requests of each kind were made.
func (rs *Requests) Counts() map[Request]int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return maps.Clone(rs.n)
}

// Total is how many requests were made.
func (rs *Requests) Total() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	total := 0
	for _, n := range rs.n {
		total += n
	}
	return total
}

// String lists the counts, most first: "412 create jobs, 3 list pods".
func (rs *Requests) String() string {
	counts := rs.Counts()
	kinds := slices.Collect(maps.Keys(counts))
	slices.SortFunc(kinds, func(a, b Request) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a.String(), b.String())
	})
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%d %s", counts[k], k)
	}
	return strings.Join(parts, ", ")
}

func (rs *Requests) add(req *http.Request) {
	k := requestKind(req)
	rs.mu.Lock()
	if rs.n == nil {
		rs.n = map[Request]int{}
	}
	rs.n[k]++
	rs.mu.Unlock()
}

// counting is a transport that counts each request before sending it on.
type counting struct {
	next http.RoundTripper
	reqs *Requests
}

func (c counting) RoundTrip(req *http.Request) (*http.Response, error) {
	c.reqs.add(req)
	return c.next.RoundTrip(req)
}

// requestKind tells a request's verb and resource from its method and path:
// /api/v1/namespaces/NS/pods/NAME/log, /apis/GROUP/VERSION/jobs?watch=true.
func requestKind(req *http.Request) Request {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return Request{strings.ToLower(req.Method), req.URL.Path}
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:] // a namespaced resource (a namespace itself keeps its path)
	}
	if len(rest) == 0 {
		return Request{strings.ToLower(req.Method), req.URL.Path} // discovery
	}
	resource, named := rest[0], len(rest) > 1
	if len(rest) > 2 {
		resource += "/" + rest[2]
	}
	q := req.URL.Query()
	var verb string
	switch req.Method {
	case http.MethodGet:
		switch {
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(req.Method)
	}
	if q.Has("dryRun") {
		verb += " (dry run)"
	}
	return Request{verb, resource}
}
