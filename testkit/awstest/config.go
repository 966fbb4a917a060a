package awstest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// MaxAttempts is how many attempts the clients built from Config make per
// operation: a throttled or 5xx call is retried twice, then its error
// surfaces.
const MaxAttempts = 3

// Config returns an AWS configuration for clients of the server at url:
// static credentials, Region, BaseEndpoint set to url and the standard
// retryer with MaxAttempts attempts, a 1 ms backoff and no retry quota, so
// retries are real but tests stay fast and independent of each other.
func Config(url string) aws.Config {
	return aws.Config{
		Region: Region,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", Source: "awstest"}, nil
		}),
		BaseEndpoint: aws.String(url),
		HTTPClient:   bufferedClient{},
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = MaxAttempts
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) {
					return time.Millisecond, nil
				})
				o.RateLimiter = ratelimit.None
			})
		},
	}
}

// Config returns Config(s.URL).
func (s *Server) Config() aws.Config { return Config(s.URL) }

// bufferedClient reads every response body whole before the SDK sees it.
// The SDK can close a body while Go's HTTP client still reads a large one,
// which closes the connection and makes the SDK retry: a real retry, but
// one that would make the tests' call counts depend on goroutine timing.
type bufferedClient struct{}

func (bufferedClient) Do(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// Env points the standard AWS configuration of the process (what
// config.LoadDefaultConfig and the SDK's default chain read) at the server
// at endpoint, for the rest of the test: region, test credentials,
// AWS_ENDPOINT_URL, and no shared files, profile or instance metadata.
func Env(t testing.TB, endpoint, region string) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_REGION":                  region,
		"AWS_DEFAULT_REGION":          "",
		"AWS_PROFILE":                 "",
		"AWS_ACCESS_KEY_ID":           "AKIDTEST",
		"AWS_SECRET_ACCESS_KEY":       "secret",
		"AWS_SESSION_TOKEN":           "",
		"AWS_ENDPOINT_URL":            endpoint,
		"AWS_CONFIG_FILE":             dir + "/config",
		"AWS_SHARED_CREDENTIALS_FILE": dir + "/credentials",
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		t.Setenv(k, v)
	}
}
