package awstest

import (
	"context"
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
