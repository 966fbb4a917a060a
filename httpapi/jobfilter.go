package httpapi

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/substatehq/substate"
)

// JobTenantFields are the filter fields of a job on tenants: the
// conditions GET /v1/tenants takes (its parameters but the page's), so a
// condition added there is one here too.
var JobTenantFields = slices.DeleteFunc(slices.Clone(TenantParams), func(p string) bool {
	return p == "sort" || p == "limit" || p == "pageToken"
})

// JobDeadLetterFields are the filter fields of a requeue job: the stage
// that dead-lettered, text the reason contains, the prefix of the tenant
// the payload names, and when the dead letter was stored (RFC 3339, a
// date, or a duration before now).
var JobDeadLetterFields = []string{"stage", "reason", "tenantPrefix", "since", "until"}

// MaxFilterValue bounds one value of a job's filter, in bytes.
const MaxFilterValue = 1024

// ParseJobFilter reads a job's filter for action: the tenant conditions,
// or for requeue the dead-letter ones. A field the action's filter does
// not have, an empty value, or a value that does not parse, is an
// EINVALID error naming it: a misspelt filter must not select every
// tenant.
func ParseJobFilter(action substate.ExecutionAction, filter map[string]string, now time.Time) (substate.TenantFilter, substate.DeadLetterFilter, error) {
	valid := JobTenantFields
	if action == substate.ActionRequeue {
		valid = JobDeadLetterFields
	}
	for _, k := range slices.Sorted(maps.Keys(filter)) {
		switch {
		case !slices.Contains(valid, k):
			return substate.TenantFilter{}, substate.DeadLetterFilter{}, substate.Errorf(substate.EINVALID,
				"unknown filter field %s; the fields of a %s filter are %s", substate.QuotePrefix(k, substate.QuoteLimit), action, strings.Join(valid, ", "))
		case len(filter[k]) > MaxFilterValue:
			return substate.TenantFilter{}, substate.DeadLetterFilter{}, substate.Errorf(substate.EINVALID, "filter field %s: longer than %d bytes", k, MaxFilterValue)
		case filter[k] == "":
			// An empty value would select any: a variable left unset
			// must not widen a job to every tenant.
			return substate.TenantFilter{}, substate.DeadLetterFilter{}, substate.Errorf(substate.EINVALID,
				"filter field %s is empty; leave it out to select any", k)
		}
	}
	if action == substate.ActionRequeue {
		d, err := parseDeadLetterFilter(filter, now)
		return substate.TenantFilter{}, d, err
	}
	q := map[string][]string{}
	for k, v := range filter {
		q[k] = []string{v}
	}
	f, err := parseConditions(q)
	if err != nil {
		err = substate.WrapError(substate.EINVALID, err, "filter: %s", substate.ErrorMessage(err))
	}
	return f, substate.DeadLetterFilter{}, err
}

// parseDeadLetterFilter reads a requeue job's filter.
func parseDeadLetterFilter(filter map[string]string, now time.Time) (substate.DeadLetterFilter, error) {
	d := substate.DeadLetterFilter{Stage: filter["stage"], Reason: filter["reason"], TenantPrefix: filter["tenantPrefix"]}
	var err error
	if d.Since, err = ParseWhen("filter field since", filter["since"], now); err != nil {
		return d, err
	}
	d.Until, err = ParseWhen("filter field until", filter["until"], now)
	return d, err
}

// NarrowToKey narrows a filter's tenant prefix to a key's: a filter
// without one, or with a wider one, gets the key's; one inside it stays;
// one outside it is EFORBIDDEN, so a key never selects, and a job never
// acts on, another key's tenants.
func NarrowToKey(prefix, key string) (string, error) {
	switch {
	case strings.HasPrefix(prefix, key):
		return prefix, nil
	case strings.HasPrefix(key, prefix):
		return key, nil
	}
	return "", substate.Errorf(substate.EFORBIDDEN, "the filter's tenantPrefix %s is outside this key's tenants (prefix %q): nothing was selected",
		substate.QuotePrefix(prefix, substate.QuoteLimit), key)
}

// EncodeJobFilter writes a filter map as "name=value,name=value", names
// in order: how the CLI and logs show it.
func EncodeJobFilter(filter map[string]string) string {
	parts := make([]string, 0, len(filter))
	for _, k := range slices.Sorted(maps.Keys(filter)) {
		parts = append(parts, fmt.Sprintf("%s=%s", k, filter[k]))
	}
	return strings.Join(parts, ",")
}
