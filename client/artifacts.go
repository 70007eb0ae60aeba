package client

import (
	"context"
	"fmt"
	"strings"

	"github.com/manifoldflow/manifold/artifact"
	"github.com/manifoldflow/manifold/sdk"
)

// ArtifactInfo describes an artifact of a run.
type ArtifactInfo struct {
	Step string
	// Index is the foreach item that put it, -1 for a step without items.
	Index int
	Name  string
	Size  int64
	// Location is where it is kept: a path or an s3:// URL.
	Location string
}

// Artifacts lists the artifacts of every step and item of the run, in flow
// order.
func (r *Run) Artifacts(ctx context.Context) ([]ArtifactInfo, error) {
	var all []ArtifactInfo
	for _, s := range r.steps {
		as, err := s.Artifacts(ctx)
		if err != nil {
			return nil, err
		}
		all = append(all, as...)
	}
	return all, nil
}

// list returns the artifacts of step (item index, or -1).
func (r *Run) list(ctx context.Context, step string, index int) ([]ArtifactInfo, error) {
	store, err := r.Store(ctx)
	if err != nil {
		return nil, err
	}
	l, ok := store.(artifact.Lister)
	if !ok {
		return nil, fmt.Errorf("run %s: the artifact store at %s cannot list what it holds", r.ID, store.Location(""))
	}
	entries, err := l.List(ctx, artifact.StepKey(step, index))
	if err != nil {
		return nil, fmt.Errorf("run %s: listing the artifacts of %s: %w", r.ID, describe(step, index), err)
	}
	infos := make([]ArtifactInfo, len(entries))
	for i, e := range entries {
		name := strings.TrimSuffix(e.Key[strings.LastIndexByte(e.Key, '/')+1:], ".json")
		infos[i] = ArtifactInfo{Step: step, Index: index, Name: name, Size: e.Size, Location: store.Location(e.Key)}
	}
	return infos, nil
}

// get decodes artifact name of step (item index, or -1) into v, through
// sdk.Context's GetIndex: the decoding every step's Get does.
func (r *Run) get(ctx context.Context, step string, index int, name string, v any) error {
	store, err := r.Store(ctx)
	if err != nil {
		return err
	}
	sc := sdk.NewContext(ctx, sdk.ContextConfig{Flow: r.Flow, Index: -1, Store: store})
	if index < 0 {
		err = sc.Get(step, name, v)
	} else {
		err = sc.GetIndex(step, index, name, v)
	}
	if err == nil {
		return nil
	}
	// When the artifact is not there, say what is.
	if _, gerr := store.Get(ctx, artifact.Key(step, index, name)); artifact.IsNotExist(gerr) {
		if have, lerr := r.list(ctx, step, index); lerr == nil {
			names := make([]string, len(have))
			for i, a := range have {
				names[i] = a.Name
			}
			if len(names) == 0 {
				return fmt.Errorf("run %s: %s has no artifact %q: it put none (in %s)", r.ID, describe(step, index), name, store.Location(artifact.StepKey(step, index)))
			}
			return fmt.Errorf("run %s: %s has no artifact %q; it has %s", r.ID, describe(step, index), name, strings.Join(names, ", "))
		}
	}
	return fmt.Errorf("run %s: %w", r.ID, err)
}

// Artifact decodes artifact name of step, a step without foreach items, of run
// r into a T.
func Artifact[T any](ctx context.Context, r *Run, step, name string) (T, error) {
	var v T
	err := r.Step(step).Artifact(ctx, name, &v)
	return v, err
}

// ItemArtifact decodes artifact name of item index of foreach step of run r
// into a T.
func ItemArtifact[T any](ctx context.Context, r *Run, step string, index int, name string) (T, error) {
	var v T
	err := r.Step(step).Item(index).Artifact(ctx, name, &v)
	return v, err
}
