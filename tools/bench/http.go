package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/substatehq/substate"
)

// httpClients is how many concurrent deliveries the HTTP ingest stage
// makes, as many API destination invocations in flight at once.
const httpClients = 32

// postAll delivers each event to the worker's EventBridge ingress in a
// request of its own, as an EventBridge API destination does, from
// httpClients connections at once, and fails on any answer but 202.
func (p *benchPipeline) postAll(ctx context.Context, load benchLoad, events []benchEvent) error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: httpClients}}
	defer client.CloseIdleConnections()
	url := p.w.HTTP.URL() + "/v1/ingest/eventbridge"
	next := make(chan benchEvent)
	errs := make(chan error, httpClients)
	var wg sync.WaitGroup
	for range httpClients {
		wg.Go(func() {
			for e := range next {
				if err := p.post(ctx, client, url, load.raw(e, nil).Body); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
send:
	for _, e := range events {
		select {
		case next <- e:
		case err = <-errs:
			break send
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	return firstErr(err, <-errs)
}

// post makes one delivery.
func (p *benchPipeline) post(ctx context.Context, client *http.Client, url string, body []byte) error {
	return postEvent(ctx, client, url, p.w.Flags.IngestAPIKey, body)
}

// postEvent posts one EventBridge event to the ingress at url with the
// ingest key (none when ""), and fails unless it is accepted.
func postEvent(ctx context.Context, client *http.Client, url, key string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(substate.HeaderAPIKey, key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("bench: ingest answered %d: %s", resp.StatusCode, msg)
	}
	return nil
}
