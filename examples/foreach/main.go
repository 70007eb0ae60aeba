// Command foreach fans a step out over a list of regions, then joins the results.
//
//	go run ./examples/foreach run -j 3
//	go run ./examples/foreach compile --target job
package main

import (
	"fmt"
	"strings"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/sdk"
)

var regions = []string{"us-east-1", "us-west-2", "eu-west-1"}

var flow = sdk.NewFlow("foreach",
	sdk.Image("registry.example.com/manifold/foreach:v1"),
	sdk.CPU("500m"), sdk.Memory("512Mi"),
).
	Step("plan", sdk.Run(planRegions)).
	Step("process", sdk.Run(process), sdk.After("plan"), sdk.Foreach(regions...), sdk.Retry(3)).
	Step("report", sdk.Run(report), sdk.After("process"))

func planRegions(ctx *sdk.Context) error {
	return ctx.Put("regions", regions)
}

// process handles one region: MANIFOLD_ITEM is the region, MANIFOLD_INDEX its index.
func process(ctx *sdk.Context) error {
	result := fmt.Sprintf("%s: %d objects", ctx.Item(), 100*(ctx.Index()+1))
	fmt.Println(result)
	return ctx.Put("result", result)
}

// report joins the results of every item.
func report(ctx *sdk.Context) error {
	var regions []string
	if err := ctx.Get("plan", "regions", &regions); err != nil {
		return err
	}
	lines := make([]string, len(regions))
	for i := range regions {
		if err := ctx.GetIndex("process", i, "result", &lines[i]); err != nil {
			return err
		}
	}
	summary := strings.Join(lines, "\n")
	fmt.Println(summary)
	return ctx.Put("summary", summary)
}

func main() { cli.Main(flow) }
