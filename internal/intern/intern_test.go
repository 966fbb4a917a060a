package intern

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"
)

// Bytes returns a copy of its bytes whatever the cache holds: equal to
// them, unchanged when they change after, the cached string again for the
// same bytes, and a fresh one for bytes too long to cache or a value that
// took the slot, from many decoders at once.
func TestIntern(t *testing.T) {
	b := []byte("RUNNING")
	s := Bytes(b)
	b[0] = 'X'
	if s != "RUNNING" {
		t.Fatalf("Bytes kept its input's bytes: %q", s)
	}
	again := Bytes([]byte("RUNNING"))
	if unsafe.StringData(again) != unsafe.StringData(s) {
		t.Error("the second Bytes of the same bytes allocated a new string")
	}
	long := make([]byte, Max+1)
	if a, b := Bytes(long), Bytes(long); unsafe.StringData(a) == unsafe.StringData(b) {
		t.Error("a string longer than Max was cached")
	}
	if Bytes(nil) != "" || Bytes([]byte{}) != "" {
		t.Error("Bytes of no bytes is not the empty string")
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20000 {
				v := fmt.Sprintf("type-%d", (i*7+g)%3000) // more values than slots
				if got := Bytes([]byte(v)); got != v {
					t.Errorf("Bytes(%q) = %q", v, got)
					return
				}
			}
		})
	}
	wg.Wait()
}
