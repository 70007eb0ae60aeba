// Command hello is the smallest Manifold flow: two Go steps that pass data through
// artifacts, then a shell command. It asks for no accelerators.
//
//	go run ./examples/hello run                    # on this machine
//	go run ./examples/hello compile --target job   # as Kubernetes Jobs
package main

import (
	"fmt"
	"strings"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/sdk"
)

var flow = sdk.NewFlow("hello",
	sdk.Image("registry.example.com/manifold/hello:v1"),
	sdk.Param("name", "world"),
	sdk.CPU("100m"), sdk.Memory("128Mi"),
).
	Step("greet", sdk.Run(greet)).
	Step("shout", sdk.Run(shout), sdk.After("greet")).
	// busybox runs as root unless told otherwise; as the flow's own image's
	// user (65532), the step's pod meets Pod Security's restricted level.
	Step("echo", sdk.After("shout"),
		sdk.Image("busybox:1.37"), sdk.RunAsUser(65532),
		sdk.Command("sh", "-c", `echo "hello, $MANIFOLD_PARAM_NAME, from a Command step"`))

// greet writes a greeting for the name param.
func greet(ctx *sdk.Context) error {
	msg := fmt.Sprintf("hello, %s", ctx.Param("name"))
	fmt.Println(msg)
	return ctx.Put("greeting", msg)
}

// shout reads greet's artifact and writes it upper-cased.
func shout(ctx *sdk.Context) error {
	var msg string
	if err := ctx.Get("greet", "greeting", &msg); err != nil {
		return err
	}
	loud := strings.ToUpper(msg) + "!"
	fmt.Println(loud)
	return ctx.Put("shout", loud)
}

func main() { cli.Main(flow) }
