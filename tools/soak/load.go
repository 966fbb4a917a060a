package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/substatehq/substate"
)

// client posts the next step of its tenants (every Clients-th tenant from
// i) until ctx is done, each step again until it is answered 202.
func (s *soak) client(ctx context.Context, i int) {
	for ctx.Err() == nil {
		for t := i; t < len(s.acked) && ctx.Err() == nil; t += max(s.cfg.Clients, 1) {
			step := s.acked[t].Load() + 1
			if s.post(ctx, t, step) {
				s.acked[t].Store(step)
				s.nAcked.Add(1)
			} else {
				s.nRefused.Add(1)
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// soakTenant is the id of tenant t.
func soakTenant(t int) string { return fmt.Sprintf("soak-%04d", t) }

// soakBase is the modified_at of every tenant's step 0.
var soakBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// post delivers step of tenant t as a Restate webhook would, and reports
// whether it was answered 202.
func (s *soak) post(ctx context.Context, t int, step int64) bool {
	tenant := soakTenant(t)
	status := "running"
	if step%3 == 0 {
		status = "suspended"
	}
	body, _ := json.Marshal(map[string]any{"id": "inv_" + tenant, "target_service_key": tenant, "status": status,
		"created_at": soakBase.Format(time.RFC3339Nano), "modified_at": soakBase.Add(time.Duration(step) * time.Millisecond).Format(time.RFC3339Nano)})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.http+"/v1/ingest/restate", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(substate.HeaderWebhookID, fmt.Sprintf("%s-%d", tenant, step))
	resp, err := soakClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusAccepted
}
