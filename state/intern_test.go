package state

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"
)

// intern returns a copy of its bytes whatever the cache holds: equal to
// them, unchanged when they change after, the cached string again for the
// same bytes, and a fresh one for bytes too long to cache or a value that
// took the slot, from many decoders at once.
func TestIntern(t *testing.T) {
	b := []byte("RUNNING")
	s := intern(b)
	b[0] = 'X'
	if s != "RUNNING" {
		t.Fatalf("intern kept its input's bytes: %q", s)
	}
	again := intern([]byte("RUNNING"))
	if unsafe.StringData(again) != unsafe.StringData(s) {
		t.Error("the second intern of the same bytes allocated a new string")
	}
	long := make([]byte, internMax+1)
	if a, b := intern(long), intern(long); unsafe.StringData(a) == unsafe.StringData(b) {
		t.Error("a string longer than internMax was cached")
	}
	if intern(nil) != "" || intern([]byte{}) != "" {
		t.Error("intern of no bytes is not the empty string")
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20000 {
				v := fmt.Sprintf("type-%d", (i*7+g)%3000) // more values than slots
				if got := intern([]byte(v)); got != v {
					t.Errorf("intern(%q) = %q", v, got)
					return
				}
			}
		})
	}
	wg.Wait()
}
