package e2e_test

import (
	"bufio"
	"net/http"
	"testing"

	"github.com/substatehq/substate/testkit/workertest"
)

// The HTTP server of a worker with consoles open shuts down at once: the
// open change streams end when it starts to, rather than hold it until
// its timeout (Close then returns the deadline's error).
func TestConsoleStreamsEndOnShutdown(t *testing.T) {
	w := workertest.Start(t)
	resp, err := http.Get(w.HTTP.URL() + "/console/api/changes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ended := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
		}
		close(ended)
	}()
	if err := w.HTTP.Close(); err != nil {
		t.Fatalf("http shutdown with a console open: %v", err)
	}
	<-ended
}
