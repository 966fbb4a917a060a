package worker

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/httpapi"
	"github.com/substatehq/substate/redact"
)

// ReadAPIFlags guard what the worker's HTTP server lets out: the read
// API's keys, where /metrics is served, and which fields of the
// providers' input and output a read:raw caller sees.
type ReadAPIFlags struct {
	APIKeysFile           string        `name:"api-keys-file" type:"path" help:"Read-API keys, one per line: NAME SCOPES TENANT-PREFIX sha256:HEX (docs/security.md); reloaded on SIGHUP and when the file changes. Keys (this or --api-keys) are required when --http-addr is not loopback."`
	APIKeys               string        `name:"api-keys" help:"Read-API key lines as in --api-keys-file, separated by ';' (for SUBSTATE_API_KEYS)."`
	MetricsAddr           string        `name:"metrics-addr" help:"Serve /metrics, /healthz and /readyz on this address of their own, without keys (for a scraper), and no /metrics on --http-addr."`
	EvidenceCheckInterval time.Duration `default:"1m" help:"How often the projector checks new canonical events against their raw evidence in SUBSTATE_RAW, as verify does, counting forged and missing ones in substate_evidence_events_total (0 = never)."`
	EvidenceCheckBudget   float64       `default:"0.5" help:"Share of one core the evidence check may work (0 to 1): after each batch it waits so that its working time stays within it, reported in substate_evidence_check_seconds_total (1 = no wait)."`
	RedactAllow           []string      `name:"redact-allow" sep:"none" placeholder:"JSONPATH" help:"Field of the providers' execution input and output that read:raw callers see (RFC 9535 JSONPath on the input, e.g. $.order.id), repeatable. The tenant rule's fields are always shown; every other value, and any whose name looks secret, is [redacted]."`
}

// servesReads reports whether the main HTTP server serves read routes:
// the tenant view and its history (projector roles), or /metrics.
func (f Flags) servesReads() bool { return f.projects() || f.MetricsAddr == "" }

// openReadAPI loads the read API's keys and builds the redaction policy.
// Without keys it refuses a non-loopback --http-addr that serves reads.
// It runs before anything is started, so a bad key file or a missing key
// is one clear line and nothing else happens.
func (w *Worker) openReadAPI() error {
	w.Keys = &httpapi.Keys{File: w.Flags.APIKeysFile, Text: w.Flags.APIKeys}
	if err := w.Keys.Load(); err != nil {
		return err
	}
	w.Auth = &httpapi.Authorizer{Keys: w.Keys}
	if w.Flags.servesReads() {
		auth, err := httpapi.NewAuthorizer(w.Flags.HTTPAddr, w.Keys)
		if err != nil {
			return err
		}
		w.Auth = auth
	}
	policy, err := RedactionPolicy(w.Flags.TenantRule, w.Flags.RedactAllow)
	if err != nil {
		return err
	}
	w.Redaction = policy
	return nil
}

// RedactionPolicy is the policy that shows the allow paths and the fields
// the input tenant rules read (the default rule reads $.tenantId).
func RedactionPolicy(tenantRules, allow []string) (*redact.Policy, error) {
	if len(tenantRules) == 0 {
		tenantRules = []string{"input:$.tenantId"}
	}
	var always []string
	for _, r := range tenantRules {
		if path, ok := strings.CutPrefix(strings.TrimSpace(r), "input:"); ok {
			always = append(always, strings.TrimSpace(path))
		}
	}
	p, err := redact.New(allow, always)
	if err != nil {
		return nil, substate.WrapError(substate.EINVALID, err, "redaction (--redact-allow, --tenant-rule): %v", err)
	}
	return p, nil
}

// watchKeys reloads the key file on SIGHUP and when it changes.
func (w *Worker) watchKeys(ctx context.Context) error {
	return w.Keys.Watch(ctx, 0, w.Logger.With("component", "http"))
}

// metricsHandler is /metrics for the main HTTP server: nil (none there)
// when --metrics-addr serves it.
func (w *Worker) metricsHandler() http.Handler {
	if w.Flags.MetricsAddr != "" {
		return nil
	}
	return promhttp.HandlerFor(w.registry, promhttp.HandlerOpts{})
}

// openMetricsHTTP serves /metrics, /healthz and /readyz on --metrics-addr.
// They carry counts and readiness, no tenant ids and no payloads, so they
// need no key: a scraper reaches them on a port the network keeps apart.
func (w *Worker) openMetricsHTTP(context.Context) error {
	if w.Flags.MetricsAddr == "" {
		return nil
	}
	w.MetricsHTTP = &httpapi.Server{
		Addr: w.Flags.MetricsAddr, AllowedHosts: w.Flags.HTTPAllowedHosts, Live: w.Live, Ready: w.Ready, Logger: w.Logger.With("component", "metrics"),
		Metrics: promhttp.HandlerFor(w.registry, promhttp.HandlerOpts{}),
	}
	if err := w.MetricsHTTP.Open(); err != nil {
		return fmt.Errorf("metrics listen: %w", err)
	}
	w.closers = append(w.closers, w.MetricsHTTP.Close)
	w.Logger.Info("metrics listening", "url", w.MetricsHTTP.URL())
	return nil
}
