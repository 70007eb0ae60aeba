package job_test

import (
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var cmpIgnoreDetail = cmpopts.IgnoreFields(field.Error{}, "BadValue", "Detail")
