package image

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Registry pushes the image (or index) to a registry under Tag. Pods name it by
// digest, REPOSITORY@sha256:…, so a later push to the same tag changes nothing
// for them.
type Registry struct {
	Tag name.Tag
	// Options are the remote options of the push, such as
	// remote.WithAuthFromKeychain(authn.DefaultKeychain).
	Options []remote.Option
}

// Publish pushes r.
func (g Registry) Publish(ctx context.Context, r *Result) (Published, error) {
	opts := append(append([]remote.Option(nil), g.Options...), remote.WithContext(ctx))
	var err error
	if r.Index != nil {
		err = remote.WriteIndex(g.Tag, r.Index, opts...)
	} else {
		err = remote.Write(g.Tag, r.Image, opts...)
	}
	if err != nil {
		return Published{}, g.pushErr(err)
	}
	return Published{
		Reference: g.Tag.Context().Digest(r.Digest.String()).String(),
		Tags:      []string{g.Tag.String()},
		Output:    "registry",
	}, nil
}

func (g Registry) pushErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	reg := g.Tag.Context().RegistryStr()
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch terr.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return errorf(ErrPushRefused, "registry %s refused the push to %s (%d %s): log in with `docker login %s` (credentials come from the docker config and its credential helpers), or push to a repository you may write with --tag", reg, g.Tag, terr.StatusCode, http.StatusText(terr.StatusCode), reg)
		}
		for _, d := range terr.Errors {
			if d.Code == transport.UnauthorizedErrorCode || d.Code == transport.DeniedErrorCode {
				return errorf(ErrPushRefused, "registry %s refused the push to %s (%s): log in with `docker login %s` (credentials come from the docker config and its credential helpers), or push to a repository you may write with --tag", reg, g.Tag, d.Code, reg)
			}
		}
	}
	return fmt.Errorf("cannot push to %s: %w: check the registry's address and that it is up", g.Tag, err)
}
