package worker

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/substatehq/substate/consumers"
	"github.com/substatehq/substate/slofile"
)

// DeadlineFlags set the deadlines the projector holds tenants to.
type DeadlineFlags struct {
	SLOFile string `name:"slo-file" type:"path" help:"SLO file (YAML, see deploy/slo.yaml and docs/deadlines.md): per workflow type, the longest a tenant may stay in each sub-state and the longest a run may take. A tenant past its deadline with no change is stuck: a view field and an io.substate.tenant.stuck.v1 event on the change feed. Reloaded on SIGHUP; a file with a problem is refused with its file:line and the SLOs in force stay."`
	// StuckMetricTypes bounds the workflow_type label; see
	// consumers.StuckCollector.
	StuckMetricTypes int `name:"stuck-metric-workflow-types" default:"50" help:"Workflow types that get a workflow_type label of their own in substate_tenants_stuck: the ones with the most stuck tenants; the others are counted together as workflow_type=\"other\"."`
}

// openSLOs reads the SLO file, before anything is started: a file with a
// problem is one clear line and the worker does not start.
func (w *Worker) openSLOs() error {
	if w.Flags.SLOFile == "" || !w.Flags.projects() {
		return nil
	}
	s, err := slofile.Load(w.Flags.SLOFile)
	if err != nil {
		return err
	}
	w.slos = s
	return nil
}

// useSLOs gives the view the SLOs and registers the stuck tenants' gauge.
func (w *Worker) useSLOs() {
	w.View.SetSLOs(w.slos)
	if w.slos != nil {
		types, def := w.slos.Types()
		w.Logger.Info("deadlines on", "file", w.Flags.SLOFile, "workflow_types", types, "default", def)
	}
	w.registry.MustRegister(&consumers.StuckCollector{Counts: w.View.StuckCounts, MaxTypes: w.Flags.StuckMetricTypes})
}

// watchSLOs reloads the SLO file on SIGHUP. A file with a problem is
// refused, with its file:line, and the SLOs in force stay; new SLOs are
// handed to the view, whose deadline loop recomputes every deadline.
func (w *Worker) watchSLOs(ctx context.Context) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	log := w.Logger.With("component", "deadlines")
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			w.reloadSLOs(log)
		}
	}
}

// reloadSLOs reads the SLO file again and, when it is good and says
// something new, hands it to the view.
func (w *Worker) reloadSLOs(log *slog.Logger) {
	s, err := slofile.Load(w.Flags.SLOFile)
	if err != nil {
		log.Error("SLO file not reloaded, the SLOs in force stay", "err", err)
		return
	}
	if s.Digest() == w.View.SLOs().Digest() {
		log.Info("SLO file reloaded: the same SLOs", "file", w.Flags.SLOFile)
		return
	}
	w.View.SetSLOs(s)
	types, def := s.Types()
	log.Info("SLO file reloaded: deadlines are recomputed", "file", w.Flags.SLOFile, "workflow_types", types, "default", def)
}
