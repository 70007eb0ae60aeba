//go:build !manifold_image

package cli

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/manifoldflow/manifold/image"
)

// progressEvery is the least time between two plain progress lines.
const progressEvery = 10 * time.Second

// compileProgress tells on w (standard error) how compiling the flow program
// goes, which takes minutes the first time: a line when it starts, saying so;
// while packages compile, on a terminal (live) one line rewritten in place,
// elsewhere a plain line every progressEvery at most; and a line at the end
// with the count and the time, when anything was compiled. The count of the
// program's packages (go list -deps) holds one or two that are never compiled
// (unsafe), so the last line says only how many were.
type compileProgress struct {
	w       io.Writer
	program string
	live    bool
	now     func() time.Time

	mu              sync.Mutex
	platform        string
	start, last     time.Time
	compiled, total int
}

func (p *compileProgress) begin(platform v1.Platform) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.platform, p.compiled, p.total = platform.String(), 0, 0
	p.start = p.now()
	p.last = p.start
	fmt.Fprintf(p.w, "compiling %s for %s (the first build compiles each of the program's packages, a minute or more; later builds take seconds)\n", p.program, p.platform)
}

// update is image.GoBuild's Progress.
func (p *compileProgress) update(compiled, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.compiled, p.total = compiled, total
	now := p.now()
	line := fmt.Sprintf("compiling %s for %s: %d of %d packages, %s", p.program, p.platform, compiled, total, human(now.Sub(p.start).Round(time.Second)))
	switch {
	case p.live:
		fmt.Fprint(p.w, "\r\x1b[K"+line)
	case now.Sub(p.last) >= progressEvery && compiled < total: // end says the last
		p.last = now
		fmt.Fprintln(p.w, line)
	}
}

func (p *compileProgress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.compiled == 0 {
		return
	}
	if p.live {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	fmt.Fprintf(p.w, "compiled %d packages for %s in %s\n", p.compiled, p.platform, human(p.now().Sub(p.start).Round(time.Second)))
}

// progressCompiler is a GoBuild that tells a compileProgress of each platform's
// compiling.
type progressCompiler struct {
	*image.GoBuild
	progress *compileProgress
}

var _ image.Compiler = progressCompiler{}

func (c progressCompiler) Compile(ctx context.Context, p v1.Platform, dir string) (string, error) {
	c.progress.begin(p)
	defer c.progress.end()
	return c.GoBuild.Compile(ctx, p, dir)
}
