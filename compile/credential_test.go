package compile

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Credentials made up for these tests, in the shapes of real ones.
const (
	fakeKeyID     = "AKIA" + "Z7Q4M2XK9PLR3TWB"
	fakeAWSSecret = "q8Zr3kX/7vLm2+Pw9TnB4yHc6JdF1sGa0eUoRiWx"
)

func TestRedactErrors(t *testing.T) {
	at := field.NewPath("steps").Key("s").Child("labels").Key("key")
	errs := redactErrors(field.ErrorList{
		field.Invalid(at, fakeKeyID+"/x", "a label value must be ..."),
		field.Invalid(field.NewPath("steps").Key("s").Child("env").Key("AWS_SECRET_ACCESS_KEY"), fakeAWSSecret, "the value "+fakeAWSSecret+" is wrong"),
		field.Invalid(at, "plain", "fine"),
	})
	for _, e := range errs {
		for _, secret := range []string{fakeKeyID, fakeAWSSecret} {
			if strings.Contains(e.Error(), secret) {
				t.Errorf("%s: holds the credential", e.Error())
			}
		}
	}
	if !strings.Contains(errs[0].Error(), "AKIA… (withheld)") {
		t.Errorf("%s: does not say what was withheld", errs[0].Error())
	}
	if !strings.Contains(errs[2].Error(), `"plain"`) {
		t.Errorf("%s: withholds a value that is no credential", errs[2].Error())
	}
}
