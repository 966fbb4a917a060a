package worker

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/substatehq/substate/providers/stepfunctions"
)

// workerSFNFeatures are what the worker does with Step Functions.
var workerSFNFeatures = []stepfunctions.Feature{stepfunctions.FeatureReconcile, stepfunctions.FeatureOperate}

// checkSFNPermissions makes one harmless call per IAM action the worker's
// Step Functions features need and logs, per feature, exactly the actions
// the credentials lack. It never stops the worker: a feature without its
// permission fails when used, with an error naming the action.
func (w *Worker) checkSFNPermissions(ctx context.Context, p *stepfunctions.Provider) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	missing, err := p.CheckPermissions(ctx, workerSFNFeatures...)
	if err != nil {
		w.Logger.Warn("step functions permissions not checked", "err", err)
	}
	for _, f := range workerSFNFeatures {
		var lack []string
		for _, a := range stepfunctions.FeatureActions[f] {
			if slices.Contains(missing, a) {
				lack = append(lack, "states:"+a)
			}
		}
		if len(lack) > 0 {
			w.Logger.Warn("step functions permissions missing: grant them or this feature fails", "feature", string(f), "missing", strings.Join(lack, ", "))
		}
	}
	if err == nil && len(missing) == 0 {
		w.Logger.Info("step functions permissions checked", "features", "reconcile, operate")
	}
}
