package compile

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/internal/credential"
)

// redactErrors withholds, from the errors a compile returns, every value that
// looks like a credential (credential.Redact, the rule of every output): an error prints its value, and a credential in a label
// is both invalid and secret. The field path stands for the name the value is
// given to (steps[s].env[AWS_SECRET_ACCESS_KEY]).
func redactErrors(errs field.ErrorList) field.ErrorList {
	for _, e := range errs {
		v, ok := e.BadValue.(string)
		if !ok {
			continue
		}
		if red := credential.Redact(e.Field, v); red != v {
			e.BadValue = red
			e.Detail = strings.ReplaceAll(e.Detail, v, red)
		}
		e.Detail = credential.Redact("", e.Detail)
	}
	return errs
}
