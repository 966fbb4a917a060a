package substate

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"maps"
	"slices"
	"time"
)

// SLO names what a deadline is for: the longest a tenant may stay in one
// of the four non-terminal sub-states, or SLORun, the longest a whole run
// (an execution, from its start) may take.
type SLO string

// The SLOs a workflow type can have, as the SLO file names them.
const (
	SLORunning    SLO = "running"
	SLOWaiting    SLO = "waiting"
	SLOBackingOff SLO = "backing-off"
	SLOError      SLO = "error"
	SLORun        SLO = "run"
)

// SLONames are every SLO, in the order of the SLO file's documentation.
var SLONames = []SLO{SLORunning, SLOWaiting, SLOBackingOff, SLOError, SLORun}

// Bounds of an SLO's duration: a deadline is checked to the second, and
// an SLO beyond a year is a mistake (a unit typed wrong) rather than a
// promise.
const (
	MinSLODuration = time.Second
	MaxSLODuration = 366 * 24 * time.Hour
)

// AnyWorkflow is the workflow type of the SLO file's default entry: its
// limits apply to every workflow type without an entry of its own, and to
// each key a type's entry does not give.
const AnyWorkflow = "*"

// sloIndex is the position of an SLO in SLONames, -1 for none.
func sloIndex(s SLO) int { return slices.Index(SLONames, s) }

// Valid reports whether s is one of SLONames.
func (s SLO) Valid() bool { return sloIndex(s) >= 0 }

// SLOLimits are the durations one entry of the SLO file gives, by SLO. A
// duration of 0 is given and means none: it overrides the default entry's
// with no deadline.
type SLOLimits map[SLO]time.Duration

// SLOs are the deadlines a worker holds tenants to, per workflow type;
// immutable once made. A nil *SLOs sets no deadline.
type SLOs struct {
	types  map[string]*limits // merged with the default entry
	def    *limits            // the default entry; nil without one
	digest string
}

// limits are one workflow type's durations in SLONames order; 0 is none.
type limits [5]time.Duration

// NewSLOs returns the SLOs of entries by workflow type (AnyWorkflow for
// the default). Each type's limits are its own where it gives them and
// the default's elsewhere. An entry naming no SLO, a duration outside
// MinSLODuration to MaxSLODuration (0 aside) or an unknown SLO is an
// EINVALID error; the SLO file's reader reports them with their place in
// the file first.
func NewSLOs(entries map[string]SLOLimits) (*SLOs, error) {
	s := &SLOs{types: make(map[string]*limits, len(entries))}
	for _, wt := range slices.Sorted(maps.Keys(entries)) {
		for slo, d := range entries[wt] {
			if err := CheckSLO(slo, d); err != nil {
				return nil, WrapError(EINVALID, err, "workflow %q: %v", wt, err)
			}
		}
	}
	if e, ok := entries[AnyWorkflow]; ok {
		s.def = merge(nil, e)
	}
	for wt, e := range entries {
		if wt != AnyWorkflow {
			s.types[wt] = merge(s.def, e)
		}
	}
	s.digest = s.hash()
	return s, nil
}

// CheckSLO returns an EINVALID error when slo is not an SLO or d is not a
// duration an SLO can have (0, or MinSLODuration to MaxSLODuration).
func CheckSLO(slo SLO, d time.Duration) error {
	switch {
	case !slo.Valid():
		return Errorf(EINVALID, "unknown key %s: want running, waiting, backing-off, error or run (succeeded and failed are terminal: a finished tenant holds no deadline)", QuotePrefix(string(slo), QuoteLimit))
	case d < 0:
		return Errorf(EINVALID, "%s: %s is negative", slo, d)
	case d != 0 && d < MinSLODuration:
		return Errorf(EINVALID, "%s: %s is shorter than %s, finer than deadlines are kept", slo, d, MinSLODuration)
	case d > MaxSLODuration:
		return Errorf(EINVALID, "%s: %s is longer than %s (366 days)", slo, d, MaxSLODuration)
	}
	return nil
}

// merge returns base's limits with e's over them.
func merge(base *limits, e SLOLimits) *limits {
	var l limits
	if base != nil {
		l = *base
	}
	for slo, d := range e {
		l[sloIndex(slo)] = d
	}
	return &l
}

// hash is a digest of the merged limits: two SLOs with the same digest set
// every tenant the same deadline.
func (s *SLOs) hash() string {
	h := sha256.New()
	put := func(name string, l *limits) {
		h.Write(binary.BigEndian.AppendUint32(nil, uint32(len(name))))
		h.Write([]byte(name))
		for _, d := range l {
			h.Write(binary.BigEndian.AppendUint64(nil, uint64(d)))
		}
	}
	if s.def != nil {
		put(AnyWorkflow, s.def)
	}
	for _, wt := range slices.Sorted(maps.Keys(s.types)) {
		put("type:"+wt, s.types[wt])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Digest identifies the deadlines s sets: equal digests, equal deadlines.
// Nil and SLOs without entries have the empty digest.
func (s *SLOs) Digest() string {
	if s == nil || (s.def == nil && len(s.types) == 0) {
		return ""
	}
	return s.digest
}

// Types returns how many workflow types have an entry of their own, and
// whether there is a default entry.
func (s *SLOs) Types() (int, bool) {
	if s == nil {
		return 0, false
	}
	return len(s.types), s.def != nil
}

// Limit returns the duration s gives a workflow type for an SLO: its
// entry's, else the default entry's; 0 for none.
func (s *SLOs) Limit(workflowType string, slo SLO) time.Duration {
	l := s.limitsOf(workflowType)
	if l == nil || !slo.Valid() {
		return 0
	}
	return l[sloIndex(slo)]
}

func (s *SLOs) limitsOf(workflowType string) *limits {
	if s == nil {
		return nil
	}
	if l, ok := s.types[workflowType]; ok {
		return l
	}
	return s.def
}

// Deadline returns when a tenant of this workflow type, in sub-state ss
// since since, in a run that started at started, becomes stuck if nothing
// changes, and which SLO that is: the earlier of its sub-state's deadline
// and its run's (the sub-state's on a tie). A terminal sub-state, an SLO
// the type does not have, or an unknown start (zero since or started)
// gives none: the zero time.
func (s *SLOs) Deadline(workflowType string, ss SubState, since, started time.Time) (time.Time, SLO) {
	l := s.limitsOf(workflowType)
	if l == nil || ss == "" || ss.Terminal() {
		return time.Time{}, ""
	}
	var at time.Time
	var slo SLO
	if i := sloIndex(SLO(ss)); i >= 0 && l[i] > 0 && !since.IsZero() {
		at, slo = since.Add(l[i]), SLO(ss)
	}
	if d := l[sloIndex(SLORun)]; d > 0 && !started.IsZero() {
		if run := started.Add(d); at.IsZero() || run.Before(at) {
			at, slo = run, SLORun
		}
	}
	return at, slo
}
