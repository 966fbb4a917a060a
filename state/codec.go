package state

import (
	"encoding/binary"
	"errors"
	"math"
	"time"

	"github.com/substatehq/substate"
)

// recordVersion is the first byte of every stored record.
const recordVersion = 1

// errCorrupt reports stored bytes that do not decode as a record.
var errCorrupt = errors.New("corrupt record")

// Record flags.
const (
	flagOwnExecution = 1 << 0 // the followed execution differs from the view's
	flagMapping      = 1 << 1 // a mapping version follows the revision
	flagStep         = 1 << 2 // the step follows, last (records written before it have none)
)

// knownFlags are the flags decodeRecord accepts.
const knownFlags = flagOwnExecution | flagMapping | flagStep

// encodeRecord returns the stored form of r. The tenant id is the key and is
// not repeated. Layout (version 1): version, flags, sub-state code, then
// length-prefixed strings and varints in the order written below. Optional
// fields are announced by a flag and appended, so a record written before
// a field existed still decodes (without it).
func encodeRecord(r *Record) []byte {
	v := &r.View
	b := make([]byte, 0, 64+len(v.WorkflowExecutionID)+len(v.WorkflowErrorMessage)+len(v.ProviderState)+len(v.WorkflowStep))
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
	b = append(b, recordVersion, flags, subStateCode(v.WorkflowSubState))
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
	return b
}

// decodeRecord decodes a stored record of tenant id. It rejects anything
// encodeRecord cannot have written, including trailing bytes.
func decodeRecord(id string, b []byte) (Record, error) {
	d := decoder{b: b}
	if d.byte() != recordVersion {
		return Record{}, errCorrupt
	}
	flags := d.byte()
	var r Record
	v := &r.View
	v.TenantID = id
	v.WorkflowSubState = subStateOf(d.byte())
	v.WorkflowVerb = substate.Verb(d.string())
	v.WorkflowStatus = substate.Status(d.string())
	v.WorkflowExecutionID = d.string()
	v.WorkflowRetryCount = d.int()
	v.WorkflowErrorMessage = d.string()
	v.Provider = substate.Provider(d.string())
	v.ProviderState = d.string()
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
	switch {
	case d.err || len(d.b) != 0 || flags&^knownFlags != 0 || v.WorkflowSubState == "":
		return Record{}, errCorrupt
	case flags&flagMapping != 0 && r.Mapping == 0:
		return Record{}, errCorrupt
	case flags&flagStep != 0 && v.WorkflowStep == "":
		return Record{}, errCorrupt
	case flags&flagOwnExecution != 0 && r.ExecutionID == v.WorkflowExecutionID:
		return Record{}, errCorrupt // not canonical: encodeRecord writes no flag then
	}
	return r, nil
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

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
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
