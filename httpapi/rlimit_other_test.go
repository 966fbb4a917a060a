//go:build !unix

package httpapi_test

import "testing"

func raiseFileLimit(tb testing.TB, _ uint64) { tb.Skip("needs a Unix open-file limit") }
