// Command dynamic fans out over what an earlier step found, then branches on
// a value: list finds the shards (how many is known only when it runs),
// process runs once per shard, pick measures the result and chooses a branch,
// and report joins whichever branch ran.
//
//	go run ./examples/dynamic run
//	go run ./examples/dynamic run --param shards=0
//	go run ./examples/dynamic run --param fail-once=1  # shard 1 fails, and is retried alone
package main

import (
	"fmt"
	"strconv"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/sdk"
)

// Shard is one item of the fan-out: any JSON value can be an item.
type Shard struct {
	Name string `json:"name"`
	Rows int    `json:"rows"`
}

var flow = sdk.NewFlow("dynamic",
	sdk.Image("registry.example.com/manifold/dynamic:v1"),
	sdk.CPU("500m"), sdk.Memory("512Mi"),
	sdk.Param("shards", "3"),
	sdk.Param("fail-once", ""),
).
	Step("list", sdk.Run(list)).
	Step("process", sdk.Run(process), sdk.ForeachOf("list", "shards"), sdk.Retry(1)).
	Step("pick", sdk.Run(pick), sdk.After("process")).
	Step("large", sdk.Run(summarize("large")), sdk.When("pick", "size", "large")).
	Step("small", sdk.Run(summarize("small")), sdk.When("pick", "size", "small")).
	Step("report", sdk.Run(report), sdk.After("large", "small"))

// list finds the shards: here, as many as the shards param says.
func list(ctx *sdk.Context) error {
	n, err := strconv.Atoi(ctx.Param("shards"))
	if err != nil || n < 0 {
		return fmt.Errorf("param shards=%q: want a count", ctx.Param("shards"))
	}
	shards := make([]Shard, n)
	for i := range shards {
		shards[i] = Shard{Name: fmt.Sprintf("shard-%d", i), Rows: 10 * (i + 1)}
	}
	return ctx.Put("shards", shards)
}

// process handles one shard: its item, index and the count of items.
func process(ctx *sdk.Context) error {
	var s Shard
	if err := ctx.ItemValue(&s); err != nil {
		return err
	}
	if err := failOnce(ctx); err != nil {
		return err
	}
	fmt.Printf("%s (%d of %d): %d rows\n", s.Name, ctx.Index()+1, ctx.Count(), s.Rows)
	return ctx.Put("rows", s.Rows)
}

// failOnce fails the first attempt of the shard the fail-once param names,
// to show that Retry(1) runs that item again, and it alone: the attempt
// leaves an artifact behind, which the next attempt finds.
func failOnce(ctx *sdk.Context) error {
	if ctx.Param("fail-once") != strconv.Itoa(ctx.Index()) {
		return nil
	}
	var failed bool
	if ctx.GetIndex("process", ctx.Index(), "failed-once", &failed) == nil {
		return nil
	}
	if err := ctx.Put("failed-once", true); err != nil {
		return err
	}
	return fmt.Errorf("shard %d fails its first attempt (--param fail-once=%d)", ctx.Index(), ctx.Index())
}

// pick adds up the rows of every shard, in index order, and chooses a branch.
func pick(ctx *sdk.Context) error {
	var rows []int
	if err := ctx.GetAll("process", "rows", &rows); err != nil {
		return err
	}
	total := 0
	for _, r := range rows {
		total += r
	}
	size := "small"
	if total >= 50 {
		size = "large"
	}
	fmt.Printf("%d shards, %d rows: %s\n", len(rows), total, size)
	if err := ctx.Put("total", total); err != nil {
		return err
	}
	return ctx.Put("size", size)
}

// summarize is the body of the branch called size.
func summarize(size string) func(*sdk.Context) error {
	return func(ctx *sdk.Context) error {
		var total int
		if err := ctx.Get("pick", "total", &total); err != nil {
			return err
		}
		return ctx.Put("summary", fmt.Sprintf("%s: %d rows", size, total))
	}
}

// report joins the branch that ran.
func report(ctx *sdk.Context) error {
	var summary string
	err := ctx.Get("large", "summary", &summary)
	if err != nil {
		err = ctx.Get("small", "summary", &summary)
	}
	if err != nil {
		return err
	}
	fmt.Println(summary)
	return ctx.Put("report", summary)
}

func main() { cli.Main(flow) }
