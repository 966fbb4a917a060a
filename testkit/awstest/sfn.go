package awstest

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// stateMachine is one Step Functions state machine.
type stateMachine struct {
	ARN        string
	Name       string
	Definition string
	RoleARN    string
	Type       string
	Created    time.Time
	Revision   int      // updates so far
	Versions   []string // published versions' definitions, oldest first
}

func init() {
	register(sfnPrefix+"CreateStateMachine", (*Server).createStateMachine)
	register(sfnPrefix+"DescribeStateMachine", (*Server).describeStateMachine)
	register(sfnPrefix+"DeleteStateMachine", (*Server).deleteStateMachine)
	register(sfnPrefix+"ListStateMachines", (*Server).listStateMachines)
}

// StateMachineARN returns the ARN of the state machine named name.
func StateMachineARN(name string) string { return arn("states", "stateMachine:"+name) }

func (s *Server) createStateMachine(body []byte) (any, error) {
	var in struct {
		Name       string `json:"name"`
		Definition string `json:"definition"`
		RoleARN    string `json:"roleArn"`
		Type       string `json:"type"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkName(in.Name); err != nil {
		return nil, err
	}
	if err := checkDefinition(in.Definition); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(in.RoleARN, "arn:") {
		return nil, errorf("InvalidArn", "Invalid Arn: 'Resource type not valid in this context: %s'", in.RoleARN)
	}
	if in.Type == "" {
		in.Type = "STANDARD"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := StateMachineARN(in.Name)
	// Like Step Functions, creating the same name, definition and type again
	// is idempotent (a different role is ignored); anything else conflicts.
	if m, ok := s.machines[a]; ok {
		if m.Definition != in.Definition || m.Type != in.Type {
			return nil, errorf("StateMachineAlreadyExists", "State Machine Already Exists: '%s'", a)
		}
		return map[string]any{"stateMachineArn": a, "creationDate": epoch{m.Created}}, nil
	}
	m := &stateMachine{ARN: a, Name: in.Name, Definition: in.Definition, RoleARN: in.RoleARN, Type: in.Type, Created: s.Now()}
	s.machines[a] = m
	return map[string]any{"stateMachineArn": a, "creationDate": epoch{m.Created}}, nil
}

func (s *Server) describeStateMachine(body []byte) (any, error) {
	var in struct {
		ARN string `json:"stateMachineArn"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkARN(in.ARN, "stateMachine", 7); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.machines[in.ARN]
	if !ok {
		return nil, errorf("StateMachineDoesNotExist", "State Machine Does Not Exist: '%s'", in.ARN)
	}
	return map[string]any{
		"stateMachineArn": m.ARN, "name": m.Name, "status": "ACTIVE", "definition": m.Definition,
		"roleArn": m.RoleARN, "type": m.Type, "creationDate": epoch{m.Created},
	}, nil
}

func (s *Server) deleteStateMachine(body []byte) (any, error) {
	var in struct {
		ARN string `json:"stateMachineArn"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if err := checkARN(in.ARN, "stateMachine", 7); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Deleting an unknown state machine succeeds, as in Step Functions.
	delete(s.machines, in.ARN)
	return struct{}{}, nil
}

func (s *Server) listStateMachines(body []byte) (any, error) {
	var in struct {
		MaxResults int    `json:"maxResults"`
		NextToken  string `json:"nextToken"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	all := make([]*stateMachine, 0, len(s.machines))
	for _, m := range s.machines {
		all = append(all, m)
	}
	slices.SortFunc(all, func(a, b *stateMachine) int { return strings.Compare(a.Name, b.Name) })
	from, to, next, err := page(len(all), in.MaxResults, in.NextToken)
	if err != nil {
		return nil, err
	}
	items := make([]map[string]any, 0, to-from)
	for _, m := range all[from:to] {
		items = append(items, map[string]any{"stateMachineArn": m.ARN, "name": m.Name, "type": m.Type, "creationDate": epoch{m.Created}})
	}
	out := map[string]any{"stateMachines": items}
	if next != "" {
		out["nextToken"] = next
	}
	return out, nil
}

// page returns the bounds of one page of n items and the token of the next
// page ("" on the last one). Tokens are offsets; the default page is 100
// items and the largest 1000, as in Step Functions.
func page(n, maxResults int, token string) (from, to int, next string, err error) {
	if token != "" {
		off, perr := strconv.Atoi(strings.TrimPrefix(token, "page-"))
		if perr != nil || !strings.HasPrefix(token, "page-") || off < 0 || off > n {
			return 0, 0, "", errorf("InvalidToken", "Invalid Token: '%s'", token)
		}
		from = off
	}
	size := maxResults
	if size <= 0 {
		size = 100
	}
	size = min(size, 1000)
	to = min(from+size, n)
	if to < n {
		next = "page-" + strconv.Itoa(to)
	}
	return from, to, next, nil
}

// checkName applies Step Functions' naming rules: 1 to 80 characters, no
// white space, brackets, wildcards, special characters or control codes.
func checkName(name string) error {
	if name == "" || len([]rune(name)) > 80 {
		return errorf("InvalidName", "Invalid Name: '%s'", name)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune("<>{}[]?*\"#%\\^|~`$&,;:/", r) {
			return errorf("InvalidName", "Invalid Name: '%s'", name)
		}
	}
	return nil
}

// checkDefinition is the fake's ASL check: a JSON object whose StartAt
// names one of its States.
func checkDefinition(def string) error {
	var asl struct {
		StartAt string                     `json:"StartAt"`
		States  map[string]json.RawMessage `json:"States"`
	}
	if err := json.Unmarshal([]byte(def), &asl); err != nil {
		return errorf("InvalidDefinition", "Invalid State Machine Definition: 'INVALID_JSON_DESCRIPTION: %v'", err)
	}
	if _, ok := asl.States[asl.StartAt]; !ok {
		return errorf("InvalidDefinition", "Invalid State Machine Definition: 'MISSING_TRANSITION_TARGET: Missing 'Next' target: %s at /StartAt'", asl.StartAt)
	}
	return nil
}

// checkARN checks that a names a Step Functions resource of the given type
// with fields colon-separated fields.
func checkARN(a, resourceType string, fields int) error {
	parts := strings.Split(a, ":")
	if len(parts) != fields || parts[0] != "arn" || parts[2] != "states" || parts[5] != resourceType {
		return errorf("InvalidArn", "Invalid Arn: 'Resource type not valid in this context: %s'", a)
	}
	return nil
}
