package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath finds the browser the console tests drive. Outside CI a
// machine without one skips them; in CI (SUBSTATE_CI=1) its absence fails
// them, since .ci/run installs the Debian package chromium.
func chromiumPath(tb testing.TB) string {
	tb.Helper()
	for _, name := range []string{os.Getenv("SUBSTATE_CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("SUBSTATE_CI") == "1" {
		tb.Fatal("no Chromium found (install the Debian package chromium, or set SUBSTATE_CHROMIUM): the console's browser tests cannot run")
	}
	tb.Skip("no Chromium found: install the Debian package chromium to run the console's browser tests")
	return ""
}

// newBrowser starts a headless Chromium with a fresh profile and returns
// a tab's context at 1280×800; the browser is closed when the test ends.
// Extra options are added to the defaults (a flag of Chromium's, say).
//
// On a loaded machine (CI runs the race detector beside other packages'
// tests) Chromium can take longer than chromedp's default 20 s to print
// its DevTools address, so the wait is 90 s, and a start that still fails
// is tried once more with a new profile before the test fails.
func newBrowser(tb testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
	tb.Helper()
	path := chromiumPath(tb)
	var err error
	for range 2 {
		var ctx context.Context
		if ctx, err = startBrowser(tb, path, extra); err == nil {
			return ctx
		}
		tb.Logf("start %s: %v", path, err)
	}
	tb.Fatalf("start %s: %v", path, err)
	return nil
}

// startBrowser starts one Chromium and its first tab; on success the test's
// cleanup closes both and removes the profile, on failure they are closed
// and removed before it returns.
func startBrowser(tb testing.TB, path string, extra []chromedp.ExecAllocatorOption) (context.Context, error) {
	// A fresh profile, removed after the browser: not t.TempDir, whose
	// removal fails when a helper process of Chromium writes one last file.
	profile, err := os.MkdirTemp("", "substate-chromium-")
	if err != nil {
		tb.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.WSURLReadTimeout(90 * time.Second),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true), // screenshots as wide as the window
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 800),
	}
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	stop := func() {
		cancelTab()
		cancelAlloc()
		for range 10 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err := chromedp.Run(ctx); err != nil {
		stop()
		return nil, err
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			logPage(tb, ctx)
		}
		stop()
	})
	return ctx, nil
}

// logPage logs what a failed test's page showed at its end: its address
// and the text of its main part, for a failure that a wait's condition
// alone does not explain.
func logPage(tb testing.TB, ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var shown string
	err := chromedp.Run(ctx, chromedp.Evaluate(`location.hash + "\n" + (document.getElementById("main") || document.body).innerText.slice(0, 4000)`, &shown))
	if err != nil {
		tb.Logf("the page at the end: not read: %v", err)
		return
	}
	tb.Logf("the page at the end: %s", shown)
}

// run runs browser actions with a time limit, failing the test on error.
func run(tb testing.TB, ctx context.Context, what string, actions ...chromedp.Action) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page into out.
func eval(tb testing.TB, ctx context.Context, expr string, out any) {
	tb.Helper()
	run(tb, ctx, "evaluate "+expr, chromedp.Evaluate(expr, out))
}

// waitJS waits until a JavaScript expression is true in the page, up to
// limit; it returns how long that took.
func waitJS(tb testing.TB, ctx context.Context, limit time.Duration, expr string) time.Duration {
	tb.Helper()
	start := time.Now()
	for {
		var ok bool
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := chromedp.Run(tctx, chromedp.Evaluate("!!("+expr+")", &ok))
		cancel()
		if err == nil && ok {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			tb.Fatalf("waited %s for %s (last error %v)", limit, expr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// screenshot writes a PNG of the page (or of the element sel) under dir.
func screenshot(tb testing.TB, ctx context.Context, dir, name, sel string) string {
	tb.Helper()
	var png []byte
	action := chromedp.FullScreenshot(&png, 100) // 100: PNG, anything less is JPEG
	if sel != "" {
		action = chromedp.Screenshot(sel, &png, chromedp.ByQuery)
	}
	run(tb, ctx, "screenshot "+name, action)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// rowSel is the query selector of a tenant's row in the table.
func rowSel(id string) string {
	return fmt.Sprintf("document.querySelector('#tenants tbody tr[data-id=' + CSS.escape(%s) + ']')", jsString(id))
}
