package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/substatehq/substate"
)

// Resources returns the task resources ("service.operation") the
// definition's Task states call, sorted, each once.
func (d *Definition) Resources() []string {
	var out []string
	for _, st := range d.states {
		if st.typ == typeTask && st.service != "" {
			out = append(out, st.service+"."+st.operation)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// discoveryGap is how long UnservedResources waits for more services to
// answer after the last one did.
const discoveryGap = 200 * time.Millisecond

// UnservedResources returns the resources of def that no task service
// announces, by asking every nats micro service for its endpoints ($SRV.INFO)
// on nc. Those left unmatched are asked again by service name
// ($SRV.INFO.<service>), waiting until ctx ends for a slow one. A handler
// written without micro announces nothing and is reported as missing, so
// the answer is a hint, not a verdict.
func UnservedResources(ctx context.Context, nc *nats.Conn, def *Definition) ([]string, error) {
	want := def.Resources()
	if len(want) == 0 {
		return nil, nil
	}
	subjects, err := gatherEndpoints(ctx, nc)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, r := range want {
		if !servedBy(subjects, r) && !askService(ctx, nc, r) {
			missing = append(missing, r)
		}
	}
	return missing, nil
}

// gatherEndpoints asks every micro service for its info and returns the
// subjects of their endpoints, reading answers until none came for
// discoveryGap, none can come (no responders), or ctx ends.
func gatherEndpoints(ctx context.Context, nc *nats.Conn) ([]string, error) {
	subject, err := micro.ControlSubject(micro.InfoVerb, "", "")
	if err != nil {
		return nil, err
	}
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("discover task services: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }() // the connection's own; it goes with the connection
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		return nil, fmt.Errorf("discover task services: %w", err)
	}
	var subjects []string
	wait := time.Second // for the first answer
	for {
		mctx, cancel := context.WithTimeout(ctx, wait)
		msg, err := sub.NextMsgWithContext(mctx)
		cancel()
		if err != nil || msg.Header.Get("Status") == "503" { // quiet, or nobody listens
			return subjects, nil
		}
		subjects = append(subjects, endpointSubjects(msg.Data)...)
		wait = discoveryGap
	}
}

// askService asks the micro services named like the resource's service
// whether one of them serves it.
func askService(ctx context.Context, nc *nats.Conn, resource string) bool {
	service := resource[:strings.LastIndexByte(resource, '.')]
	subject, err := micro.ControlSubject(micro.InfoVerb, service, "")
	if err != nil {
		return false // not a valid micro service name: none can have it
	}
	msg, err := nc.RequestWithContext(ctx, subject, nil)
	if err != nil {
		return false
	}
	return servedBy(endpointSubjects(msg.Data), resource)
}

// endpointSubjects reads the endpoint subjects of a micro info response.
func endpointSubjects(data []byte) []string {
	var info micro.Info
	if json.Unmarshal(data, &info) != nil {
		return nil
	}
	out := make([]string, 0, len(info.Endpoints))
	for _, e := range info.Endpoints {
		out = append(out, e.Subject)
	}
	return out
}

// servedBy reports whether one of the endpoint subjects (which may hold
// the wildcards * and >) receives the resource's task requests.
func servedBy(subjects []string, resource string) bool {
	i := strings.LastIndexByte(resource, '.')
	task := substate.TaskSubject(resource[:i], resource[i+1:])
	for _, s := range subjects {
		if subjectMatches(s, task) {
			return true
		}
	}
	return false
}

// subjectMatches reports whether the NATS subject pattern matches subject.
func subjectMatches(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, tok := range p {
		switch {
		case tok == ">":
			return i < len(s)
		case i >= len(s):
			return false
		case tok != "*" && tok != s[i]:
			return false
		}
	}
	return len(p) == len(s)
}
