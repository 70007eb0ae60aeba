package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/manifoldflow/manifold/client"
)

// A notebook-style read of the last run of examples/foreach, from the directory
// it ran in: the summary its report step put, each region's result and how its
// attempts went. (Compiled, not run: it needs a run of the flow.)
func Example() {
	ctx := context.Background()
	c := client.Open("") // .manifold/runs
	r, err := c.Latest("foreach")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.ID, r.State, r.End.Sub(r.Start))

	summary, err := client.Artifact[string](ctx, r, "report", "summary")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(summary)

	process := r.Step("process")
	for _, item := range process.Tasks() {
		var result string
		if err := item.Artifact(ctx, "result", &result); err != nil {
			log.Fatal(err)
		}
		attempts, err := item.Attempts()
		if err != nil {
			log.Fatal(err)
		}
		for _, a := range attempts {
			fmt.Printf("%s attempt %d: %s %q\n", item.Label(), a.N, a.State, a.Stdout)
		}
		fmt.Println(item.Item, result, item.StdoutPath())
	}
}
