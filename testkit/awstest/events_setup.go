package awstest

import (
	"encoding/json"
	"slices"
	"time"
)

// Connection is one EventBridge connection as the server keeps it,
// including the API key value that DescribeConnection never returns.
type Connection struct {
	Name              string
	ARN               string
	Description       string
	AuthorizationType string
	APIKeyName        string
	APIKeyValue       string
	Created, Modified time.Time
}

type apiDestination struct {
	Name, ARN, Description, ConnectionARN, Endpoint, Method string
	RateLimit                                               int
	Created, Modified                                       time.Time
}

type rule struct {
	Name, ARN, Bus, EventPattern, State, Description string
	targets                                          []json.RawMessage
	targetIDs                                        []string
}

func init() {
	register(eventsPrefix+"CreateConnection", (*Server).createConnection)
	register(eventsPrefix+"UpdateConnection", (*Server).updateConnection)
	register(eventsPrefix+"DescribeConnection", (*Server).describeConnection)
	register(eventsPrefix+"CreateApiDestination", (*Server).createAPIDestination)
	register(eventsPrefix+"UpdateApiDestination", (*Server).updateAPIDestination)
	register(eventsPrefix+"DescribeApiDestination", (*Server).describeAPIDestination)
	register(eventsPrefix+"PutRule", (*Server).putRule)
	register(eventsPrefix+"DescribeRule", (*Server).describeRule)
	register(eventsPrefix+"PutTargets", (*Server).putTargets)
	register(eventsPrefix+"ListTargetsByRule", (*Server).listTargetsByRule)
}

// Connection returns a copy of the connection with the given name.
func (s *Server) Connection(name string) (Connection, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.connections[name]
	if !ok {
		return Connection{}, false
	}
	return *c, true
}

// connectionRequest is the body of CreateConnection and UpdateConnection.
type connectionRequest struct {
	Name              string `json:"Name"`
	Description       *string
	AuthorizationType *string
	AuthParameters    *struct {
		APIKeyAuthParameters *struct {
			APIKeyName  *string `json:"ApiKeyName"`
			APIKeyValue *string `json:"ApiKeyValue"`
		} `json:"ApiKeyAuthParameters"`
	}
}

func (s *Server) createConnection(body []byte) (any, error) {
	var in connectionRequest
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.connections[in.Name]; ok {
		return nil, errorf("ResourceAlreadyExistsException", "Connection %s already exists.", in.Name)
	}
	now := s.Now()
	c := &Connection{Name: in.Name, ARN: arn("events", "connection/"+in.Name+"/"+s.newID()), Created: now}
	applyConnection(c, &in, now)
	s.connections[in.Name] = c
	return connectionState(c), nil
}

func (s *Server) updateConnection(body []byte) (any, error) {
	var in connectionRequest
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.connections[in.Name]
	if !ok {
		return nil, errorf("ResourceNotFoundException", "Connection '%s' does not exist.", in.Name)
	}
	applyConnection(c, &in, s.Now())
	return connectionState(c), nil
}

// applyConnection sets the fields the request carries.
func applyConnection(c *Connection, in *connectionRequest, now time.Time) {
	set(&c.Description, in.Description)
	set(&c.AuthorizationType, in.AuthorizationType)
	if p := in.AuthParameters; p != nil && p.APIKeyAuthParameters != nil {
		set(&c.APIKeyName, p.APIKeyAuthParameters.APIKeyName)
		set(&c.APIKeyValue, p.APIKeyAuthParameters.APIKeyValue)
	}
	c.Modified = now
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func connectionState(c *Connection) map[string]any {
	return map[string]any{"ConnectionArn": c.ARN, "ConnectionState": "AUTHORIZED",
		"CreationTime": epoch{c.Created}, "LastModifiedTime": epoch{c.Modified}}
}

func (s *Server) describeConnection(body []byte) (any, error) {
	var in struct{ Name string }
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.connections[in.Name]
	if !ok {
		return nil, errorf("ResourceNotFoundException", "Failed to describe the connection(s). Connection '%s' does not exist.", in.Name)
	}
	out := connectionState(c)
	out["Name"], out["Description"], out["AuthorizationType"] = c.Name, c.Description, c.AuthorizationType
	out["AuthParameters"] = map[string]any{"ApiKeyAuthParameters": map[string]string{"ApiKeyName": c.APIKeyName}}
	out["SecretArn"] = arn("secretsmanager", "secret:events!connection/"+c.Name)
	return out, nil
}

// apiDestinationRequest is the body of Create- and UpdateApiDestination.
type apiDestinationRequest struct {
	Name                         string
	Description                  *string
	ConnectionARN                *string `json:"ConnectionArn"`
	InvocationEndpoint           *string
	HTTPMethod                   *string `json:"HttpMethod"`
	InvocationRateLimitPerSecond *int
}

func (s *Server) createAPIDestination(body []byte) (any, error) {
	var in apiDestinationRequest
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.apiDests[in.Name]; ok {
		return nil, errorf("ResourceAlreadyExistsException", "An api-destination '%s' already exists.", in.Name)
	}
	d := &apiDestination{Name: in.Name, ARN: arn("events", "api-destination/"+in.Name+"/"+s.newID()), RateLimit: 300, Created: s.Now()}
	if err := s.applyAPIDestination(d, &in); err != nil {
		return nil, err
	}
	s.apiDests[in.Name] = d
	return apiDestinationState(d), nil
}

func (s *Server) updateAPIDestination(body []byte) (any, error) {
	var in apiDestinationRequest
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.apiDests[in.Name]
	if !ok {
		return nil, errorf("ResourceNotFoundException", "An api-destination '%s' does not exist.", in.Name)
	}
	if err := s.applyAPIDestination(d, &in); err != nil {
		return nil, err
	}
	return apiDestinationState(d), nil
}

// applyAPIDestination sets the fields the request carries; the connection
// must exist.
func (s *Server) applyAPIDestination(d *apiDestination, in *apiDestinationRequest) error {
	if in.ConnectionARN != nil && !slices.ContainsFunc(s.connectionList(), func(c *Connection) bool { return c.ARN == *in.ConnectionARN }) {
		return errorf("ResourceNotFoundException", "Connection '%s' does not exist.", *in.ConnectionARN)
	}
	set(&d.Description, in.Description)
	set(&d.ConnectionARN, in.ConnectionARN)
	set(&d.Endpoint, in.InvocationEndpoint)
	set(&d.Method, in.HTTPMethod)
	set(&d.RateLimit, in.InvocationRateLimitPerSecond)
	d.Modified = s.Now()
	return nil
}

func (s *Server) connectionList() []*Connection {
	out := make([]*Connection, 0, len(s.connections))
	for _, c := range s.connections {
		out = append(out, c)
	}
	return out
}

func apiDestinationState(d *apiDestination) map[string]any {
	return map[string]any{"ApiDestinationArn": d.ARN, "ApiDestinationState": "ACTIVE",
		"CreationTime": epoch{d.Created}, "LastModifiedTime": epoch{d.Modified}}
}

func (s *Server) describeAPIDestination(body []byte) (any, error) {
	var in struct{ Name string }
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.apiDests[in.Name]
	if !ok {
		return nil, errorf("ResourceNotFoundException", "Failed to describe the api-destination(s). An api-destination '%s' does not exist.", in.Name)
	}
	out := apiDestinationState(d)
	out["Name"], out["Description"], out["ConnectionArn"] = d.Name, d.Description, d.ConnectionARN
	out["InvocationEndpoint"], out["HttpMethod"], out["InvocationRateLimitPerSecond"] = d.Endpoint, d.Method, d.RateLimit
	return out, nil
}
