package state

import (
	"encoding/binary"
	"errors"
	"math"
	"time"

	"github.com/substatehq/substate"
	"github.com/substatehq/substate/internal/intern"
)

// Record versions, the first byte of every stored record. Version 1
// records were written before the view had a workflow type, an error type
// and fingerprint, and a time of entering the sub-state: they read with
// none of the first three and, for the last, their last event time (the
// latest the sub-state can have begun), and carry none of the flags that
// announce them. Version 2 records have them when their flag says so.
//
// Version 3 records are version 2 records with a second flags byte after
// the first, for the fields added when the first was full: a record that
// has none of them is still written as version 2, byte for byte.
const (
	recordVersion1 = 1
	recordVersion  = 2
	recordVersion3 = 3
)

// errCorrupt reports stored bytes that do not decode as a record.
var errCorrupt = errors.New("corrupt record")

// Record flags.
const (
	flagOwnExecution = 1 << 0 // the followed execution differs from the view's
	flagMapping      = 1 << 1 // a mapping version follows the revision
	flagStep         = 1 << 2 // the step follows, last (records written before it have none)
	flagWorkflowType = 1 << 3 // version 2: the workflow type follows the step
	flagErrorKind    = 1 << 4 // version 2: the error type and fingerprint follow
	flagSince        = 1 << 5 // version 2: the time the sub-state began follows
	flagSeq          = 1 << 6 // version 2: the sequence of the last change follows
	flagDeadline     = 1 << 7 // version 2: the deadline, its SLO and stuck flag follow, last
)

// Record flags of the second byte (version 3).
const (
	flag2NextRetry = 1 << 0 // the next retry time follows, last
)

// knownFlags are the flags decodeRecord accepts, by record version.
const (
	knownFlags1 = flagOwnExecution | flagMapping | flagStep
	knownFlags  = knownFlags1 | flagWorkflowType | flagErrorKind | flagSince | flagSeq | flagDeadline
	knownFlags2 = flag2NextRetry
)

// encodeRecord returns the stored form of r. The tenant id is the key and is
// not repeated. Layout (version 2): version, flags, sub-state code, then
// length-prefixed strings and varints in the order written below. Optional
// fields are announced by a flag and appended, so a record written before
// a field existed still decodes (without it).
func encodeRecord(r *Record) []byte {
	v := &r.View
	b := make([]byte, 0, 80+len(v.WorkflowExecutionID)+len(v.WorkflowErrorMessage)+len(v.ProviderState)+len(v.WorkflowStep)+
		len(v.WorkflowType)+len(v.WorkflowErrorType)+len(v.WorkflowErrorFingerprint))
	flags, flags2 := recordFlags(r), recordFlags2(r)
	if flags2 != 0 {
		b = append(b, recordVersion3, flags, flags2)
	} else {
		b = append(b, recordVersion, flags)
	}
	b = append(b, subStateCode(v.WorkflowSubState))
	b = appendString(b, string(v.WorkflowVerb))
	b = appendString(b, string(v.WorkflowStatus))
	b = appendString(b, v.WorkflowExecutionID)
	b = binary.AppendUvarint(b, uint64(max(v.WorkflowRetryCount, 0)))
	b = appendString(b, v.WorkflowErrorMessage)
	b = appendString(b, string(v.Provider))
	b = appendString(b, v.ProviderState)
	b = appendTime(b, v.UpdatedAt)
	b = appendTime(b, v.LastEventAt)
	if flags&flagOwnExecution != 0 {
		b = appendString(b, r.ExecutionID)
	}
	b = appendTime(b, r.StartedAt)
	b = binary.AppendUvarint(b, uint64(r.Revision))
	if flags&flagMapping != 0 {
		b = binary.AppendUvarint(b, uint64(r.Mapping))
	}
	if flags&flagStep != 0 {
		b = appendString(b, v.WorkflowStep)
	}
	if flags&flagWorkflowType != 0 {
		b = appendString(b, v.WorkflowType)
	}
	if flags&flagErrorKind != 0 {
		b = appendString(b, v.WorkflowErrorType)
		b = appendString(b, v.WorkflowErrorFingerprint)
	}
	if flags&flagSince != 0 {
		b = appendTime(b, v.WorkflowSubStateSince)
	}
	if flags&flagSeq != 0 {
		b = binary.AppendUvarint(b, r.Seq)
	}
	if flags&flagDeadline != 0 {
		b = appendTime(b, v.Deadline)
		b = append(b, deadlineByte(v))
	}
	if flags2&flag2NextRetry != 0 {
		b = appendTime(b, v.WorkflowNextRetryAt)
	}
	return b
}

// recordFlags2 returns the flags of r's second flags byte; 0 writes the
// record as version 2, without the byte.
func recordFlags2(r *Record) byte {
	var flags byte
	if !r.View.WorkflowNextRetryAt.IsZero() {
		flags |= flag2NextRetry
	}
	return flags
}

// recordFlags returns the flags of r's stored form: one for each optional
// field it has.
func recordFlags(r *Record) byte {
	v := &r.View
	var flags byte
	if r.ExecutionID != v.WorkflowExecutionID {
		flags |= flagOwnExecution
	}
	if r.Mapping > 0 {
		flags |= flagMapping
	}
	if v.WorkflowStep != "" {
		flags |= flagStep
	}
	if v.WorkflowType != "" {
		flags |= flagWorkflowType
	}
	if v.WorkflowErrorType != "" || v.WorkflowErrorFingerprint != "" {
		flags |= flagErrorKind
	}
	if !v.WorkflowSubStateSince.IsZero() {
		flags |= flagSince
	}
	if r.Seq != 0 {
		flags |= flagSeq
	}
	if !v.Deadline.IsZero() {
		flags |= flagDeadline
	}
	return flags
}

// decodeRecord decodes a stored record of tenant id. It rejects anything
// encodeRecord cannot have written, including trailing bytes, except that
// it reads version 1 records as they were written.
func decodeRecord(id string, b []byte) (Record, error) {
	d := decoder{b: b}
	version := d.byte()
	flags := d.byte()
	var flags2 byte
	if version == recordVersion3 {
		flags2 = d.byte()
	}
	var r Record
	v := &r.View
	v.TenantID = id
	v.WorkflowSubState = subStateOf(d.byte())
	v.WorkflowVerb = substate.Verb(d.shared())
	v.WorkflowStatus = substate.Status(d.shared())
	v.WorkflowExecutionID = d.string()
	v.WorkflowRetryCount = d.int()
	v.WorkflowErrorMessage = d.string()
	v.Provider = substate.Provider(d.shared())
	v.ProviderState = d.shared()
	v.UpdatedAt = d.time()
	v.LastEventAt = d.time()
	r.ExecutionID = v.WorkflowExecutionID
	if flags&flagOwnExecution != 0 {
		r.ExecutionID = d.string()
	}
	r.StartedAt = d.time()
	r.Revision = substate.Revision(d.uvarint())
	if flags&flagMapping != 0 {
		r.Mapping = d.int()
	}
	if flags&flagStep != 0 {
		v.WorkflowStep = d.string()
	}
	decodeAdded(&d, &r, flags)
	if flags2&flag2NextRetry != 0 {
		v.WorkflowNextRetryAt = d.time()
	}
	if version == recordVersion1 {
		v.WorkflowSubStateSince = v.LastEventAt
	}
	if d.err || len(d.b) != 0 || !canonical(&r, version, flags, flags2) {
		return Record{}, errCorrupt
	}
	return r, nil
}

// decodeAdded reads the fields version 2 added.
func decodeAdded(d *decoder, r *Record, flags byte) {
	v := &r.View
	if flags&flagWorkflowType != 0 {
		v.WorkflowType = d.shared()
	}
	if flags&flagErrorKind != 0 {
		v.WorkflowErrorType = d.shared()
		v.WorkflowErrorFingerprint = d.string()
	}
	if flags&flagSince != 0 {
		v.WorkflowSubStateSince = d.time()
	}
	if flags&flagSeq != 0 {
		r.Seq = d.uvarint()
	}
	if flags&flagDeadline != 0 {
		v.Deadline = d.time()
		if !setDeadlineByte(v, d.byte()) {
			d.err = true
		}
	}
}

// canonical reports whether flags are those encodeRecord writes for r in
// that version.
func canonical(r *Record, version, flags, flags2 byte) bool {
	switch version {
	case recordVersion1:
		if flags&^knownFlags1 != 0 {
			return false
		}
		flags |= recordFlags(r) & flagSince // v1 has no flag for what it reads as LastEventAt
	case recordVersion:
	case recordVersion3:
		if flags2 == 0 || flags2&^knownFlags2 != 0 {
			return false // a record without them is written as version 2
		}
	default:
		return false
	}
	return r.View.WorkflowSubState != "" && flags == recordFlags(r) && flags2 == recordFlags2(r)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendTime stores t as Unix seconds (zigzag varint) and nanoseconds. The
// zero time round-trips: it is a valid, if ancient, Unix second.
func appendTime(b []byte, t time.Time) []byte {
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

// The Unix seconds of years 0 and 9999, the range a JSON time can hold.
const (
	minUnix = -62167219200
	maxUnix = 253402300799
)

// decoder reads the fields of a record; the first short or invalid field
// sets err and every later read returns zero.
type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) byte() byte {
	if d.err || len(d.b) == 0 {
		d.err = true
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	if d.err {
		return 0
	}
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *decoder) int() int {
	x := d.uvarint()
	if x > math.MaxInt32 {
		d.err = true
		return 0
	}
	return int(x)
}

func (d *decoder) string() string { return string(d.text()) }

// shared is string for a field whose few values most records repeat
// (verb, status, provider and its state, workflow and error type): a
// value decoded before is returned from the shared cache (package intern).
func (d *decoder) shared() string { return intern.Bytes(d.text()) }

// text reads a length-prefixed string's bytes, a part of the record.
func (d *decoder) text() []byte {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return nil
	}
	b := d.b[:n]
	d.b = d.b[n:]
	return b
}

func (d *decoder) time() time.Time {
	if d.err {
		return time.Time{}
	}
	sec, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = true
		return time.Time{}
	}
	d.b = d.b[n:]
	nsec := d.uvarint()
	if nsec >= 1e9 || sec < minUnix || sec > maxUnix {
		d.err = true
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}
