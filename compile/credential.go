package compile

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/internal/credential"
)

// redactErrors withholds, from the errors a compile returns, every value that
// looks like a credential: an error prints its value, and a credential in a label
// is both invalid and secret. The field path stands for the name the value is
// given to (steps[s].env[AWS_SECRET_ACCESS_KEY]).
func redactErrors(errs field.ErrorList) field.ErrorList {
	for _, e := range errs {
		v, ok := e.BadValue.(string)
		if !ok {
			continue
		}
		if c, ok := credential.Detect(e.Field, v); ok {
			e.BadValue = c.Withheld()
			e.Detail = strings.ReplaceAll(e.Detail, v, c.Withheld())
		}
	}
	return errs
}
