package main

import "testing"

func TestCutText(t *testing.T) {
	msg := "downstream unavailable (attempt 3)\nError: downstream unavailable (attempt 3)\n    at Object.<anonymous> (service.js:66:50)"
	if got, want := clip(msg, 40), "downstream unavailable (attempt 3) Erro…"; got != want {
		t.Errorf("clip = %q, want %q: an error keeps its start", got, want)
	}
	arn := "arn:aws:states:us-east-1:123456789012:execution:orders:ord-2024-000124"
	if got, want := shorten(arn, 20), "…ers:ord-2024-000124"; got != want {
		t.Errorf("shorten = %q, want %q: an id keeps its end", got, want)
	}
	if got := clip("café déjà vu", 6); got != "café …" {
		t.Errorf("clip cuts runes, not bytes: %q", got)
	}
}
