package awstest

import (
	"encoding/json"
	"slices"
)

// ruleKey is the key of a rule: rule names are unique per event bus.
func ruleKey(bus, name string) string {
	if bus == "" {
		bus = "default"
	}
	return bus + "/" + name
}

// ruleARN is the ARN EventBridge gives a rule: the bus name appears only
// for a custom bus.
func ruleARN(bus, name string) string {
	if bus == "" || bus == "default" {
		return arn("events", "rule/"+name)
	}
	return arn("events", "rule/"+bus+"/"+name)
}

func (s *Server) putRule(body []byte) (any, error) {
	var in struct {
		Name         string
		EventPattern string
		State        string
		Description  string
		EventBusName string
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.EventPattern != "" && !json.Valid([]byte(in.EventPattern)) {
		return nil, errorf("InvalidEventPatternException", "Event pattern is not valid. Reason: not valid JSON")
	}
	if in.State == "" {
		in.State = "ENABLED"
	}
	if in.EventBusName == "" {
		in.EventBusName = "default"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := ruleKey(in.EventBusName, in.Name)
	r, ok := s.rules[k]
	if !ok {
		r = &rule{Name: in.Name, ARN: ruleARN(in.EventBusName, in.Name), Bus: in.EventBusName}
		s.rules[k] = r
	}
	r.EventPattern, r.State, r.Description = in.EventPattern, in.State, in.Description
	return map[string]string{"RuleArn": r.ARN}, nil
}

// findRule returns the rule with the given name on the bus ("" = default).
func (s *Server) findRule(name, bus string) (*rule, error) {
	r, ok := s.rules[ruleKey(bus, name)]
	if !ok {
		if bus == "" {
			bus = "default"
		}
		return nil, errorf("ResourceNotFoundException", "Rule %s does not exist on EventBus %s.", name, bus)
	}
	return r, nil
}

func (s *Server) describeRule(body []byte) (any, error) {
	var in struct{ Name, EventBusName string }
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.findRule(in.Name, in.EventBusName)
	if err != nil {
		return nil, err
	}
	return map[string]string{"Name": r.Name, "Arn": r.ARN, "EventPattern": r.EventPattern, "State": r.State,
		"Description": r.Description, "EventBusName": r.Bus, "CreatedBy": AccountID}, nil
}

type failedTarget struct {
	TargetID     string `json:"TargetId"`
	ErrorCode    string `json:"ErrorCode"`
	ErrorMessage string `json:"ErrorMessage"`
}

func (s *Server) putTargets(body []byte) (any, error) {
	var in struct {
		Rule, EventBusName string
		Targets            []json.RawMessage
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.findRule(in.Rule, in.EventBusName)
	if err != nil {
		return nil, err
	}
	failed := []failedTarget{}
	for _, raw := range in.Targets {
		var t struct {
			ID  string `json:"Id"`
			ARN string `json:"Arn"`
		}
		if json.Unmarshal(raw, &t) != nil || t.ID == "" || t.ARN == "" {
			failed = append(failed, failedTarget{t.ID, "ValidationException", "Target Id and Arn are required."})
			continue
		}
		// PutTargets replaces a target with the same id.
		if i := slices.Index(r.targetIDs, t.ID); i >= 0 {
			r.targets[i] = raw
		} else {
			r.targetIDs, r.targets = append(r.targetIDs, t.ID), append(r.targets, raw)
		}
	}
	return map[string]any{"FailedEntryCount": len(failed), "FailedEntries": failed}, nil
}

func (s *Server) listTargetsByRule(body []byte) (any, error) {
	var in struct {
		Rule, EventBusName, NextToken string
		Limit                         int
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.findRule(in.Rule, in.EventBusName)
	if err != nil {
		return nil, err
	}
	from, to, next, err := page(len(r.targets), in.Limit, in.NextToken)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"Targets": r.targets[from:to]}
	if next != "" {
		out["NextToken"] = next
	}
	return out, nil
}
